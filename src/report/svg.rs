//! The charts of the HTML report as inline SVG, made here rather than with a charting crate:
//! three simple shapes (stacked bars, state bands, histograms as small multiples with a marker) in a few hundred
//! lines, styled by CSS classes so that one page follows the reader's light or dark scheme,
//! with a `<title>` and `<desc>` on every chart and a `<title>` on every mark for a pointer.
//!
//! Every text that reaches the page goes through [`esc`]: the log is untrusted.

use std::fmt::Write;

/// The drawing width; charts scale to the page with `width: 100%`.
pub const WIDTH: f64 = 800.0;
const LEFT: f64 = 44.0;
/// The right margin of every chart.
pub const RIGHT: f64 = 8.0;
/// The room for the keys left of a state timeline's bands.
pub const LANE_LABEL: f64 = 180.0;

/// Where a tick's text hangs from its point: the first and last stay inside the drawing.
fn anchor(f: f64) -> &'static str {
    if f < 0.05 {
        "start"
    } else if f > 0.95 {
        "end"
    } else {
        "middle"
    }
}

/// The bidirectional embeddings, overrides and isolates (LRE, RLE, PDF, LRO, RLO, LRI, RLI,
/// FSI, PDI): invisible, and able to make a name read reversed ("Trojan Source").
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn show_bidi(out: &mut String, c: char) {
    let _ = write!(out, "\\u{{{:x}}}", c as u32);
}

/// `text` with its bidirectional controls shown as [`esc`] shows them.
fn visible_bidi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_bidi_control(c) {
            show_bidi(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Text made safe for HTML and SVG content and attributes: markup characters escaped,
/// control characters replaced, and bidirectional controls shown as `\u{202e}` (as
/// [`crate::core::text::printable`] shows a C1 control), so that no text reads reversed — in a
/// cell, an SVG label or a `<title>` alike, where no markup could isolate it.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c if is_bidi_control(c) => show_bidi(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// The first line of `text`, cut with an ellipsis to what fits in `width` px of 11 px text.
/// The page runs no script and so cannot measure: each character counts as wide as it may
/// be (a capital W, a CJK ideograph), so a cut label never runs past its room. Bidirectional
/// controls are measured as [`esc`] shows them.
fn fit(text: &str, width: f64) -> String {
    let text = &visible_bidi(text);
    let em = |c: char| match c {
        'i' | 'j' | 'l' | 't' | 'f' | 'r' | 'I' | '.' | ',' | ':' | ';' | '|' | '!' | '\''
        | ' ' => 0.35,
        'W' | 'M' | 'm' | 'w' | '@' | '%' => 1.0,
        'A'..='Z' => 0.75,
        c if c.is_ascii() => 0.62,
        // Accented, CJK, emoji: as wide as the widest.
        _ => 1.1,
    };
    let line = text.lines().next().unwrap_or("");
    let room = width / 11.0;
    if line.chars().map(em).sum::<f64>() <= room && line.len() == text.len() {
        return line.to_string();
    }
    let mut used = em('…');
    let mut out = String::new();
    for c in line.chars() {
        used += em(c);
        if used > room {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

fn open(out: &mut String, id: &str, height: f64, title: &str, desc: &str) {
    let _ = write!(
        out,
        r#"<svg class="chart" id="{id}" viewBox="0 0 {WIDTH} {height}" role="img" aria-labelledby="{id}-t {id}-d"><title id="{id}-t">{}</title><desc id="{id}-d">{}</desc>"#,
        esc(title),
        esc(desc)
    );
}

/// One column of a stacked bar chart: the label its pointer shows, and (class, count) from
/// the bottom up.
pub struct Stack {
    /// Shown on hover: the time span and the counts.
    pub label: String,
    /// Segments, bottom first: a CSS class (`k0`…) and a count.
    pub parts: Vec<(String, u64)>,
}

/// Stacked bars over time, scaled to `max` so that small multiples compare; `ticks` label the
/// x axis at column indexes.
pub fn stacked_bars(
    id: &str,
    title: &str,
    desc: &str,
    columns: &[Stack],
    max: u64,
    ticks: &[(usize, String)],
) -> String {
    let height = 86.0;
    let plot_h = 64.0;
    let top = 6.0;
    let mut out = String::new();
    open(&mut out, id, height, title, desc);
    let n = columns.len().max(1) as f64;
    let step = (WIDTH - LEFT - RIGHT) / n;
    let bar = (step * 0.85).max(1.0);
    let _ = write!(
        out,
        r#"<line class="axis" x1="{LEFT}" y1="{y}" x2="{x2}" y2="{y}"/><text class="tick" x="{lx}" y="{ty}" text-anchor="end">{max}</text><text class="tick" x="{lx}" y="{y}" text-anchor="end">0</text>"#,
        y = top + plot_h,
        x2 = WIDTH - RIGHT,
        lx = LEFT - 4.0,
        ty = top + 8.0,
    );
    let scale = if max == 0 { 0.0 } else { plot_h / max as f64 };
    for (i, col) in columns.iter().enumerate() {
        if col.parts.iter().all(|p| p.1 == 0) {
            continue;
        }
        let x = LEFT + i as f64 * step;
        let _ = write!(out, "<g><title>{}</title>", esc(&col.label));
        let mut y = top + plot_h;
        for (class, count) in &col.parts {
            if *count == 0 {
                continue;
            }
            let h = (*count as f64 * scale).max(0.8);
            y -= h;
            let _ = write!(
                out,
                r#"<rect class="{class}" x="{x:.1}" y="{y:.1}" width="{bar:.1}" height="{h:.1}"/>"#
            );
        }
        out.push_str("</g>");
    }
    for (i, label) in ticks {
        let x = LEFT + (*i as f64 + 0.5) * step;
        let _ = write!(
            out,
            r#"<text class="tick" x="{x:.1}" y="{y}" text-anchor="{}">{}</text>"#,
            anchor((x - LEFT) / (WIDTH - LEFT - RIGHT)),
            esc(label),
            y = height - 4.0
        );
    }
    out.push_str("</svg>");
    out
}

/// One row of a state timeline: its label, and bands (start, end as 0..1 of the width, CSS
/// class, what hovering says).
pub struct Lane {
    /// The breaker's key.
    pub label: String,
    /// Bands from left to right.
    pub bands: Vec<(f64, f64, &'static str, String)>,
}

/// Bands of state per key over a shared time axis.
pub fn lanes(id: &str, title: &str, desc: &str, rows: &[Lane], ticks: &[(f64, String)]) -> String {
    let lane_h = 18.0;
    let label_w = LANE_LABEL;
    let height = rows.len() as f64 * (lane_h + 4.0) + 22.0;
    let mut out = String::new();
    open(&mut out, id, height, title, desc);
    let plot_w = WIDTH - label_w - RIGHT;
    for (r, lane) in rows.iter().enumerate() {
        let y = r as f64 * (lane_h + 4.0) + 2.0;
        // Cut to what fits left of the bands; when cut, the whole key is the label's title.
        let shown = fit(&lane.label, label_w - 10.0);
        let title = if shown == lane.label {
            String::new()
        } else {
            format!("<title>{}</title>", esc(&lane.label))
        };
        let _ = write!(
            out,
            r#"<text class="label" x="{x}" y="{ty:.1}" text-anchor="end">{title}{}</text>"#,
            esc(&shown),
            x = label_w - 6.0,
            ty = y + 13.0
        );
        for (a, b, class, hover) in &lane.bands {
            let x = label_w + a * plot_w;
            let w = ((b - a) * plot_w).max(0.8);
            // A band that ends at the right edge stays inside the drawing.
            let x = x.min(WIDTH - RIGHT - w);
            let _ = write!(
                out,
                r#"<rect class="{class}" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{lane_h}"><title>{}</title></rect>"#,
                esc(hover)
            );
        }
    }
    let axis_y = rows.len() as f64 * (lane_h + 4.0) + 2.0;
    let _ = write!(
        out,
        r#"<line class="axis" x1="{label_w}" y1="{axis_y:.1}" x2="{x2}" y2="{axis_y:.1}"/>"#,
        x2 = WIDTH - RIGHT
    );
    for (f, label) in ticks {
        let _ = write!(
            out,
            r#"<text class="tick" x="{x:.1}" y="{y:.1}" text-anchor="{}">{}</text>"#,
            anchor(*f),
            esc(label),
            x = label_w + f * plot_w,
            y = axis_y + 14.0
        );
    }
    out.push_str("</svg>");
    out
}

/// One panel of [`small_multiples`]: its label, counts per bin (with what hovering says) and
/// an optional marker at a fraction of the width.
pub struct Panel {
    /// The panel's name (an agent).
    pub label: String,
    /// Counts per bin, left to right.
    pub bins: Vec<(u64, String)>,
    /// A marker line (0..1 of the width) and its text.
    pub marker: Option<(f64, String)>,
}

/// Histograms side by side in one drawing, two to a row, on one x axis (labelled by `ticks`
/// under every panel) and one y scale, so that panels compare at a glance.
pub fn small_multiples(
    id: &str,
    title: &str,
    desc: &str,
    panels: &[Panel],
    ticks: &[(f64, String)],
) -> String {
    const COLS: usize = 2;
    const GAP: f64 = 24.0;
    const PANEL_H: f64 = 96.0;
    const LABEL_H: f64 = 16.0;
    const PLOT_H: f64 = 50.0;
    let rows = panels.len().div_ceil(COLS).max(1);
    let height = rows as f64 * PANEL_H;
    let panel_w = (WIDTH - GAP * (COLS - 1) as f64) / COLS as f64;
    let plot_w = panel_w - 30.0;
    let max = panels
        .iter()
        .flat_map(|p| p.bins.iter().map(|b| b.0))
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    open(&mut out, id, height, title, desc);
    for (i, p) in panels.iter().enumerate() {
        let x0 = (i % COLS) as f64 * (panel_w + GAP) + 30.0;
        let y0 = (i / COLS) as f64 * PANEL_H;
        let base = y0 + LABEL_H + PLOT_H;
        let _ = write!(
            out,
            r#"<g class="panel"><text class="label" x="{x0:.1}" y="{ly:.1}">{}</text><line class="axis" x1="{x0:.1}" y1="{base:.1}" x2="{x2:.1}" y2="{base:.1}"/><text class="tick" x="{tx:.1}" y="{ty:.1}" text-anchor="end">{max}</text>"#,
            esc(&fit(&p.label, plot_w)),
            ly = y0 + 12.0,
            x2 = x0 + plot_w,
            tx = x0 - 3.0,
            ty = y0 + LABEL_H + 8.0,
        );
        let step = plot_w / p.bins.len().max(1) as f64;
        for (b, (count, label)) in p.bins.iter().enumerate() {
            if *count == 0 || max == 0 {
                continue;
            }
            let h = (*count as f64 / max as f64 * PLOT_H).max(0.8);
            let _ = write!(
                out,
                r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}"><title>{}</title></rect>"#,
                esc(label),
                x = x0 + b as f64 * step,
                y = base - h,
                w = (step * 0.9).max(1.0)
            );
        }
        if let Some((f, label)) = &p.marker {
            let x = x0 + f * plot_w;
            let _ = write!(
                out,
                r#"<line class="marker" x1="{x:.1}" y1="{y1:.1}" x2="{x:.1}" y2="{base:.1}"><title>{}</title></line>"#,
                esc(label),
                y1 = y0 + LABEL_H,
            );
        }
        for (f, label) in ticks {
            let _ = write!(
                out,
                r#"<text class="tick" x="{x:.1}" y="{y:.1}" text-anchor="{}">{}</text>"#,
                anchor(*f),
                esc(label),
                x = x0 + f * plot_w,
                y = base + 13.0
            );
        }
        out.push_str("</g>");
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_the_log_cannot_break_out() {
        assert_eq!(
            esc("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
        let svg = stacked_bars(
            "c",
            "<b>",
            "d",
            &[Stack {
                label: "</title><script>".into(),
                parts: vec![("k0".into(), 3)],
            }],
            3,
            &[],
        );
        assert!(!svg.contains("<script>") && !svg.contains("<b>"), "{svg}");
        assert!(svg.contains(r#"role="img""#));
    }

    #[test]
    fn small_multiples_share_one_scale_and_stay_in_the_drawing() {
        let panel = |label: &str, n: u64| Panel {
            label: label.into(),
            bins: vec![(n, "x".into()), (0, "y".into()), (1, "z".into())],
            marker: Some((0.5, "timeout 5m".into())),
        };
        let svg = small_multiples(
            "d",
            "t",
            "d",
            &[panel("a", 10), panel("b", 5), panel("c", 1)],
            &[(0.0, "100ms".into()), (1.0, "1d".into())],
        );
        assert_eq!(svg.matches("<svg").count(), 1, "one chart");
        assert_eq!(svg.matches("class=\"panel\"").count(), 3);
        let re = regex::Regex::new(
            r#"<rect class="bar" x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="([\d.]+)""#,
        )
        .expect("regex");
        let bars: Vec<(f64, f64, f64)> = re
            .captures_iter(&svg)
            .map(|c| {
                (
                    c[1].parse().unwrap_or(-1.0),
                    c[2].parse().unwrap_or(-1.0),
                    c[3].parse().unwrap_or(-1.0),
                )
            })
            .collect();
        assert_eq!(bars.len(), 6);
        // One scale: b's 5 is half as tall as a's 10.
        assert!((bars[0].2 - 2.0 * bars[2].2).abs() < 0.2, "{bars:?}");
        for (x, w, _) in bars {
            assert!(x >= 0.0 && x + w <= WIDTH, "{x} {w}");
        }
        assert_eq!(svg.matches("timeout 5m").count(), 3);
    }

    #[test]
    fn lane_labels_are_cut_to_their_room() {
        assert_eq!(
            fit("statistician-consultant", 170.0),
            "statistician-consultant"
        );
        let wide = fit(&"W".repeat(300), 170.0);
        assert!(wide.ends_with('…') && wide.chars().count() < 20, "{wide}");
        assert!(fit("two\nlines", 170.0).ends_with('…'));
        let cjk = fit(&"漢".repeat(40), 170.0);
        assert!(cjk.chars().count() < 16, "{cjk}");
    }

    #[test]
    fn bidirectional_controls_are_shown_not_obeyed() {
        let all: String = ('\u{202a}'..='\u{202e}')
            .chain('\u{2066}'..='\u{2069}')
            .collect();
        let out = esc(&format!("agent{all}x"));
        assert!(!out.chars().any(is_bidi_control), "{out}");
        assert!(out.starts_with("agent\\u{202a}\\u{202b}"), "{out}");
        assert!(out.ends_with("\\u{2069}x"), "{out}");
        // Right-to-left text itself stays as written.
        assert_eq!(esc("שלום"), "שלום");
    }
}
