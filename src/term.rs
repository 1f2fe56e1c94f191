//! How `--text` output meets a person at a terminal: tables that fit the width (`COLUMNS`,
//! else the terminal's, else 80) by wrapping long cells, colour only when stdout is a terminal
//! and `NO_COLOR` is unset, short times (`14:02:07`, `3 min ago`), plurals that agree with
//! their number, and sparklines.
//!
//! Pure but for [`Screen::of`]: [`Term`] is decided once from the environment by [`terminal`]
//! (or [`Screen`] for stderr) and handed in, so every other function here is a function of
//! its arguments.

use chrono::{DateTime, Local, Utc};
use comfy_table::{
    presets, Attribute, Cell, CellAlignment, Color, ColumnConstraint, ContentArrangement, Table,
    Width,
};
use std::io::IsTerminal;
use std::os::fd::AsFd;

/// The narrowest and widest layouts we make, whatever `COLUMNS` says.
const MIN_WIDTH: usize = 40;
const MAX_WIDTH: usize = 1000;

/// What the output may use: its width in columns, and whether to colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    /// Columns available.
    pub width: usize,
    /// ANSI colours and bold.
    pub colour: bool,
}

/// A meaning that a colour shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// Broken or blocking: open breakers, critical errors.
    Bad,
    /// Worth a look: half-open breakers, warnings.
    Warn,
    /// Healthy: closed breakers.
    Good,
    /// Set by hand: disabled or forced.
    Manual,
    /// Less important: ids, times.
    Dim,
    /// Headings.
    Strong,
}

impl Term {
    /// Decides from what the environment says: `columns` (`COLUMNS`), the terminal's own
    /// width, whether the output is a terminal, `NO_COLOR` and `TERM`.
    pub fn decide(
        columns: Option<&str>,
        tty_width: Option<usize>,
        is_terminal: bool,
        no_color: bool,
        term: Option<&str>,
    ) -> Term {
        let width = columns
            .and_then(|c| c.trim().parse::<usize>().ok())
            .filter(|w| *w > 0)
            .or(tty_width.filter(|w| *w > 0))
            .unwrap_or(80)
            .clamp(MIN_WIDTH, MAX_WIDTH);
        let colour = is_terminal && !no_color && term != Some("dumb");
        Term { width, colour }
    }

    /// Plain text of a given width.
    #[cfg(test)]
    pub fn plain(width: usize) -> Term {
        Term {
            width: width.clamp(MIN_WIDTH, MAX_WIDTH),
            colour: false,
        }
    }

    /// `text` in the colour of `tone`, or as it is without colour.
    pub fn paint(&self, text: &str, tone: Tone) -> String {
        let text = crate::core::text::printable(text);
        if !self.colour || text.is_empty() {
            return text;
        }
        let code = match tone {
            Tone::Bad => "1;31",
            Tone::Warn => "33",
            Tone::Good => "32",
            Tone::Manual => "35",
            Tone::Dim => "2",
            Tone::Strong => "1",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }

    /// A table as wide as the terminal at most: the cells of the columns in `wrap` wrap
    /// when the width is short, the others keep their width (up to 40 columns); columns keep
    /// two spaces between them; the header is bold when colouring.
    pub fn table(&self, header: &[&str], wrap: &[usize], rows: Vec<Vec<Cell>>) -> String {
        let mut t = Table::new();
        t.load_style(presets::NOTHING)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(u16::try_from(self.width).unwrap_or(u16::MAX))
            .force_no_tty();
        if self.colour {
            t.enforce_styling();
        }
        t.set_header(
            header
                .iter()
                .map(|h| Cell::new(h).add_attribute(Attribute::Bold)),
        );
        for row in rows {
            t.add_row(row);
        }
        let widths = t.column_max_content_widths();
        for (i, col) in t.column_iter_mut().enumerate() {
            col.set_padding((0, 2));
            if !wrap.contains(&i) {
                let keep = widths.get(i).copied().unwrap_or(0).min(40);
                col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(keep + 2)));
            }
        }
        let text = t.to_string();
        let mut out = String::with_capacity(text.len());
        for line in text.lines() {
            out.push_str(&trim_end_styled(line));
            out.push('\n');
        }
        out
    }

    /// Words of `text` wrapped at the width, line by line (a word longer than the width
    /// stays whole: a path is better long than broken).
    pub fn wrap(&self, text: &str) -> String {
        let mut out = String::new();
        for para in text.lines() {
            let mut len = 0;
            for word in para.split(' ').filter(|w| !w.is_empty()) {
                let w = visible_len(word);
                if len > 0 && len + 1 + w > self.width {
                    out.push('\n');
                    len = 0;
                }
                if len > 0 {
                    out.push(' ');
                    len += 1;
                }
                out.push_str(word);
                len += w;
            }
            out.push('\n');
        }
        out
    }

    /// A table cell in the colour of `tone`; control characters from input are shown, not
    /// sent (and so measured as what the terminal shows).
    pub fn cell(&self, text: impl Into<String>, tone: Option<Tone>) -> Cell {
        let c = Cell::new(crate::core::text::printable(&text.into()));
        match tone {
            Some(t) if self.colour => match t {
                Tone::Bad => c.fg(Color::Red).add_attribute(Attribute::Bold),
                Tone::Warn => c.fg(Color::Yellow),
                Tone::Good => c.fg(Color::Green),
                Tone::Manual => c.fg(Color::Magenta),
                Tone::Dim => c.add_attribute(Attribute::Dim),
                Tone::Strong => c.add_attribute(Attribute::Bold),
            },
            _ => c,
        }
    }

    /// A right-aligned number cell.
    pub fn number(&self, n: u64) -> Cell {
        Cell::new(n).set_alignment(CellAlignment::Right)
    }
}

/// A line without its trailing blanks, also those inside a final colour reset (a styled cell
/// is padded before its reset code).
fn trim_end_styled(line: &str) -> String {
    let mut rest = line.trim_end();
    let mut codes = Vec::new();
    while rest.ends_with('m') {
        match rest.rfind('\x1b') {
            Some(i) if rest[i..].starts_with("\x1b[") => {
                codes.push(&rest[i..]);
                rest = rest[..i].trim_end();
            }
            _ => break,
        }
    }
    let mut out = rest.to_string();
    for c in codes.iter().rev() {
        out.push_str(c);
    }
    out
}

/// Characters a terminal shows: escape sequences do not count.
fn visible_len(text: &str) -> usize {
    let mut n = 0;
    let mut in_escape = false;
    for c in text.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => n += 1,
        }
    }
    n
}

/// A duration in milliseconds for people: the program's one format, cut to its two largest
/// units (`1h`, `1m30s`, `450ms`).
pub fn human(ms: u64) -> String {
    crate::core::duration::Dur::millis(ms).approx().to_string()
}

/// `1 session`, `2 sessions`, `0 sessions`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A time as short as it can be and still clear: `45 s ago` and `3 min ago` within the last
/// hour, `14:02:07` earlier today, `Nov 21 14:02` this year, else the date. Local time.
pub fn when(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let ago = now.signed_duration_since(t).num_seconds();
    if (0..60).contains(&ago) {
        return format!("{ago} s ago");
    }
    if (60..3600).contains(&ago) {
        return format!("{} min ago", ago / 60);
    }
    let (local, local_now) = (t.with_timezone(&Local), now.with_timezone(&Local));
    if local.date_naive() == local_now.date_naive() {
        local.format("%H:%M:%S").to_string()
    } else if local.format("%Y").to_string() == local_now.format("%Y").to_string() {
        local.format("%b %d %H:%M").to_string()
    } else {
        local.format("%Y-%m-%d").to_string()
    }
}

/// [`when`] for a stored RFC 3339 text; the text itself when it is not a time.
pub fn when_text(t: &str, now: DateTime<Utc>) -> String {
    match DateTime::parse_from_rfc3339(t) {
        Ok(t) => when(t.with_timezone(&Utc), now),
        Err(_) => t.to_string(),
    }
}

/// Counts as a line of block characters, the highest as a full block; zero is a dot.
pub fn sparkline(counts: &[u64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = counts.iter().copied().max().unwrap_or(0);
    counts
        .iter()
        .map(|&n| {
            if n == 0 || max == 0 {
                '·'
            } else {
                let i = ((n as f64 / max as f64) * 7.0).round() as usize;
                BARS[i.clamp(0, 7)]
            }
        })
        .collect()
}

/// The first line of `text`, cut to `max` characters with an ellipsis.
pub fn cut(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    let max = max.max(2);
    match line.char_indices().nth(max - 1) {
        Some((i, _)) if line.chars().count() > max => format!("{}…", &line[..i]),
        _ => line.to_string(),
    }
}

/// How `--text` output meets the terminal: `COLUMNS` (else the terminal's width), and colour
/// only when stdout is a terminal, `NO_COLOR` is unset or empty and `TERM` is not `dumb`.
pub fn terminal() -> Term {
    Screen::of(&std::io::stdout()).term
}

/// A stream as the person watching it sees it: stdout for `--text` ([`terminal`]), stderr
/// for the live views (`phase run`'s progress). The one place that asks whether a stream is a
/// terminal and reads `COLUMNS`, `LINES`, `NO_COLOR` and `TERM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Screen {
    /// Width and colour ([`Term::decide`]).
    pub term: Term,
    /// Whether the stream is a terminal at all.
    pub is_terminal: bool,
    /// Lines: `LINES`, else the terminal's own height, else 24.
    pub height: usize,
    /// Whether the cursor may move to redraw (`TERM` is not `dumb`).
    pub redraw: bool,
}

impl Screen {
    /// What `stream` is, and what the environment says of the terminal.
    pub fn of(stream: &(impl AsFd + IsTerminal)) -> Screen {
        let is_terminal = stream.is_terminal();
        let size = is_terminal
            .then(|| rustix::termios::tcgetwinsize(stream).ok())
            .flatten();
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let term_name = var("TERM");
        let term = Term::decide(
            var("COLUMNS").as_deref(),
            size.map(|w| usize::from(w.ws_col)),
            is_terminal,
            var("NO_COLOR").is_some(),
            term_name.as_deref(),
        );
        let height = var("LINES")
            .and_then(|l| l.trim().parse::<usize>().ok())
            .or(size.map(|w| usize::from(w.ws_row)))
            .filter(|h| *h > 0)
            .unwrap_or(24);
        Screen {
            term,
            is_terminal,
            height,
            redraw: term_name.as_deref() != Some("dumb"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_comes_from_columns_then_the_terminal_then_80() {
        assert_eq!(
            Term::decide(Some("120"), Some(90), true, false, None).width,
            120
        );
        assert_eq!(
            Term::decide(Some("junk"), Some(90), true, false, None).width,
            90
        );
        assert_eq!(Term::decide(None, None, false, false, None).width, 80);
        assert_eq!(
            Term::decide(Some("5"), None, false, false, None).width,
            MIN_WIDTH
        );
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(Term::decide(None, None, true, false, Some("xterm")).colour);
        assert!(!Term::decide(None, None, false, false, None).colour);
        assert!(!Term::decide(None, None, true, true, None).colour);
        assert!(!Term::decide(None, None, true, false, Some("dumb")).colour);
        let t = Term::plain(80);
        assert_eq!(t.paint("open", Tone::Bad), "open");
        let c = Term {
            width: 80,
            colour: true,
        };
        assert_eq!(c.paint("open", Tone::Bad), "\x1b[1;31mopen\x1b[0m");
    }

    #[test]
    fn plurals_agree() {
        assert_eq!(count(1, "session", "sessions"), "1 session");
        assert_eq!(count(0, "session", "sessions"), "0 sessions");
        assert_eq!(count(2, "entry", "entries"), "2 entries");
    }

    #[test]
    fn short_times() {
        let now: DateTime<Utc> = "2026-02-04T14:30:00Z".parse().expect("time");
        let at = |s: &str| s.parse::<DateTime<Utc>>().expect("time");
        assert_eq!(when(at("2026-02-04T14:29:15Z"), now), "45 s ago");
        assert_eq!(when(at("2026-02-04T14:27:00Z"), now), "3 min ago");
        assert_eq!(when_text("not a time", now), "not a time");
    }

    #[test]
    fn tables_fit_the_width() {
        let t = Term::plain(40);
        let long = "word ".repeat(40);
        let out = t.table(
            &["KEY", "DETAIL"],
            &[1],
            vec![vec![t.cell("researcher", None), t.cell(long, None)]],
        );
        for line in out.lines() {
            assert!(line.chars().count() <= 40, "{line:?}");
        }
        assert!(out.lines().count() > 3, "{out}");
    }

    #[test]
    fn sparklines_scale_to_the_highest() {
        assert_eq!(sparkline(&[0, 1, 2, 4, 8]), "·▂▃▅█");
        assert_eq!(sparkline(&[0, 0]), "··");
        let t = Term::plain(40);
        assert_eq!(
            t.wrap(&"word ".repeat(10)),
            format!("{}\n{}\n", ["word"; 8].join(" "), "word word")
        );
        assert_eq!(
            trim_end_styled("a  \x1b[1mb   \x1b[0m"),
            "a  \x1b[1mb\x1b[0m"
        );
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abcd\nnext", 4), "abcd");
    }
}
