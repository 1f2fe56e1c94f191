//! `report --html`: one self-contained page — no script, no network, no font — that answers an
//! operator's questions at a glance: which agents fail most and how (failures over time per
//! agent, stacked by kind), what the breakers did (open / half-open / closed bands per key),
//! whether timeouts are tight (durations against each agent's timeout), which thresholds were
//! crossed, the most frequent error texts, and the unresolved errors with the ids that
//! `record-error --resolve` takes. A written summary opens the page for screen readers (and
//! for anyone in a hurry); colours follow the reader's light or dark scheme.
//!
//! Pure: it renders what [`super::dashboard`] gathered, the [`Summary`] and the breakers it is
//! handed. Its size is bounded by the caps below, whatever the log's; its width by the window,
//! whatever the log holds: a word longer than its room wraps anywhere, names are cut with the
//! whole name in a `title`, and the columns a reader scans (ids, times, numbers) keep their
//! width so that a long detail beside them cannot squeeze them to a letter a line. Every text
//! goes through [`esc`], which also shows bidirectional controls rather than obeying them.

use super::dashboard::{bin_start_ms, Drawn, DURATION_BINS};
use super::svg::{self, esc, Lane, Stack};
use crate::core::summary::Summary;
use crate::store::breakers::calls::Status;
use crate::term::{count, human};
use chrono::{DateTime, TimeZone, Utc};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Agents drawn one by one in the time and duration charts; the rest share one chart.
const AGENTS_DRAWN: usize = 8;
/// Kinds with a colour of their own; the rest share one.
const KIND_COLOURS: usize = 7;
/// Columns of the time chart, at most.
const COLUMNS: i64 = 72;
/// Breakers drawn in the timeline, at most.
const BREAKERS_DRAWN: usize = 30;
/// Transitions kept per breaker (the newest).
const EVENTS_KEPT: usize = 2000;

/// The breakers as the page shows them: transitions from `logs/breaker-events.jsonl` and the
/// current state of each.
#[derive(Debug, Default)]
pub struct Breakers {
    /// Per key: (Unix ms, state entered), in file order, the newest [`EVENTS_KEPT`].
    pub events: BTreeMap<String, Vec<(i64, String)>>,
    /// The current states.
    pub now: Vec<BreakerNow>,
}

/// One breaker's current state.
#[derive(Clone, Debug)]
pub struct BreakerNow {
    /// Its key.
    pub key: String,
    /// Its state.
    pub state: String,
    /// Consecutive failures and the threshold.
    pub failures: (u32, u32),
    /// Seconds until it half-opens.
    pub half_open_in_s: Option<u64>,
    /// The last error in one line.
    pub last_error: Option<String>,
}

impl From<Status> for BreakerNow {
    fn from(s: Status) -> BreakerNow {
        BreakerNow {
            last_error: s.last_error.as_ref().map(|e| {
                [e.kind.map(|k| k.to_string()), e.detail.clone()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(": ")
            }),
            key: s.key,
            state: s.state.to_string(),
            failures: (s.consecutive_failures, s.failure_threshold),
            half_open_in_s: s.half_open_in_s,
        }
    }
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow)]
    key: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    to: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    at: std::borrow::Cow<'a, str>,
}

impl Breakers {
    /// Takes one line of `breaker-events.jsonl`; false when it is not an event.
    pub fn observe_event(&mut self, bytes: &[u8]) -> bool {
        let Ok(e) = serde_json::from_slice::<Event>(bytes) else {
            return false;
        };
        let Ok(at) = DateTime::parse_from_rfc3339(&e.at) else {
            return false;
        };
        if !self.events.contains_key(e.key.as_ref()) && self.events.len() >= 5000 {
            return true;
        }
        let list = self.events.entry(e.key.into_owned()).or_default();
        if list.len() >= EVENTS_KEPT {
            list.drain(..EVENTS_KEPT / 2);
        }
        list.push((at.timestamp_millis(), e.to.into_owned()));
        true
    }
}

/// Everything the page needs.
pub struct Page<'a> {
    /// The report.
    pub summary: &'a Summary,
    /// The charts' numbers.
    pub drawn: &'a Drawn,
    /// The breakers.
    pub breakers: &'a Breakers,
    /// Permits and retry budgets now.
    pub admission: &'a super::admission::Admission,
    /// The log read.
    pub log: &'a str,
    /// The filters, in words.
    pub filters: &'a str,
    /// Now.
    pub now: DateTime<Utc>,
    /// The range asked for (`--since`, `--until`): the timelines span it.
    pub range: (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
    /// `triage --version`'s text.
    pub version: &'a str,
}

const STYLE: &str = r#"
:root{color-scheme:light dark;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--panel:#f6f8fa}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#9198a1;--line:#3d444d;--panel:#151b23}}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;overflow-wrap:anywhere}
header,main,footer{max-width:1100px;margin:0 auto;padding:0 20px}header{padding-top:18px}
h1{font-size:1.5em;margin:0 0 4px}h2{font-size:1.2em;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:1em;margin:12px 0 2px}.meta,.note,footer{color:var(--muted);font-size:.9em}
.summary{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:10px 14px}
.kpis{display:flex;flex-wrap:wrap;gap:10px;list-style:none;padding:0;margin:10px 0 0}
.kpis li{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:6px 12px}.kpis b{display:block;font-size:1.3em}
.legend{display:flex;flex-wrap:wrap;gap:6px 14px;list-style:none;padding:0;margin:4px 0;font-size:.85em}
.legend i{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px;vertical-align:-1px}
figure{margin:6px 0 10px}figcaption{font-size:.9em;font-weight:600}.chart{width:100%;height:auto;display:block}
.chart text{fill:var(--muted);font-size:11px}.chart .label{fill:var(--fg)}.axis{stroke:var(--line)}
.bar{fill:var(--bar)}.marker{stroke:var(--marker);stroke-width:2;stroke-dasharray:4 3}.chart .marker-label{fill:var(--marker)}
.k0{fill:var(--k0);background:var(--k0)}.k1{fill:var(--k1);background:var(--k1)}.k2{fill:var(--k2);background:var(--k2)}
.k3{fill:var(--k3);background:var(--k3)}.k4{fill:var(--k4);background:var(--k4)}.k5{fill:var(--k5);background:var(--k5)}
.k6{fill:var(--k6);background:var(--k6)}.k7{fill:var(--k7);background:var(--k7)}
.s-closed{fill:var(--closed);background:var(--closed)}.s-open{fill:var(--open);background:var(--open)}
.s-half_open{fill:var(--half);background:var(--half)}.s-forced_open{fill:var(--forced);background:var(--forced)}
.s-disabled{fill:var(--disabled);background:var(--disabled)}
table{border-collapse:collapse;width:100%;font-size:.9em}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600;overflow-wrap:normal}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.nw{white-space:nowrap}td.name{min-width:8em}td.id{min-width:14em}
@media (max-width:880px){.nw{white-space:normal}td.name,td.id{min-width:0}}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
.meter{background:var(--bar);height:8px;border-radius:2px;min-width:2px}
.sev-critical{color:var(--open);font-weight:700}.sev-error{color:var(--open)}.sev-warning{color:var(--half)}
.empty{color:var(--muted);font-style:italic}
.spark{font-family:ui-monospace,monospace;letter-spacing:-1px;color:var(--k0)}table.groups td div{font-size:.92em}table.groups td:last-child{min-width:24em}
@media (max-width:880px){table.groups td:last-child{min-width:0}}
tr.sev3 td:first-child{border-left:4px solid var(--open)}tr.sev2 td:first-child{border-left:4px solid var(--half)}
"#;

fn utc(secs: i64) -> String {
    Utc.timestamp_opt(secs, 0)
        .single()
        .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|| secs.to_string())
}

fn short(secs: i64, span: i64) -> String {
    let Some(t) = Utc.timestamp_opt(secs, 0).single() else {
        return secs.to_string();
    };
    if span <= 20 * 3600 {
        t.format("%H:%M").to_string()
    } else if span <= 7 * 86_400 {
        t.format("%b %d %H:%M").to_string()
    } else {
        t.format("%b %d").to_string()
    }
}

/// A name from the log (an agent, a kind) as a label: escaped, and cut to `max` characters
/// with the whole name in a `title`, for a pointer, when longer — a 300-character name would
/// otherwise fill a caption or a cell with one unbroken word.
fn label(text: &str, max: usize) -> String {
    let shown = crate::term::cut(text, max);
    if shown == text {
        return esc(text);
    }
    format!("<span title=\"{}\">{}</span>", esc(text), esc(&shown))
}

/// Names cut in a caption, a cell and a legend; ids are never cut (they are copied whole into
/// `--resolve`) but wrap when they are longer than an id can be.
const CAPTION_NAME: usize = 80;
const CELL_NAME: usize = 40;
const ID_WHOLE: usize = 48;

fn kind_class(rank: usize) -> String {
    format!("k{}", rank.min(KIND_COLOURS))
}

/// The page.
pub fn render(p: &Page) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>triage report: {log}</title><style>:root{{{light}}}@media (prefers-color-scheme:dark){{:root{{{dark}}}}}{STYLE}</style></head>
<body><header><h1>Failures dashboard</h1>
<p class="meta">Error log <code>{log}</code> · {filters} · made {now} UTC · times in UTC</p></header>
<main>
"#,
        log = esc(p.log),
        light = super::palette::css_vars(false),
        dark = super::palette::css_vars(true),
        filters = esc(p.filters),
        now = p.now.format("%Y-%m-%d %H:%M:%S"),
    );
    summary(&mut out, p);
    groups(&mut out, p);
    over_time(&mut out, p);
    breakers(&mut out, p);
    admission(&mut out, p);
    durations(&mut out, p);
    thresholds(&mut out, p);
    texts(&mut out, p);
    unresolved(&mut out, p);
    let _ = write!(
        out,
        "</main>\n<footer><p>Made by triage {}.</p></footer>\n</body></html>\n",
        esc(p.version)
    );
    out
}

fn section(out: &mut String, id: &str, title: &str) {
    let _ = writeln!(
        out,
        "<section id=\"{id}\" aria-labelledby=\"{id}-h\"><h2 id=\"{id}-h\">{}</h2>",
        esc(title)
    );
}

fn empty(out: &mut String, text: &str) {
    let _ = writeln!(out, "<p class=\"empty\">{}</p></section>", esc(text));
}

/// The written summary: the page in sentences, first, for screen readers and skimmers.
fn summary(out: &mut String, p: &Page) {
    let s = p.summary;
    let d = p.drawn;
    section(out, "summary", "Summary");
    let mut text = Vec::new();
    if s.records == 0 {
        text.push(format!(
            "No error record matches {} in this log.",
            p.filters
        ));
    } else {
        let span = match (d.first, d.last) {
            (Some(a), Some(b)) => format!(" from {} to {} UTC", utc(a), utc(b)),
            _ => String::new(),
        };
        text.push(format!(
            "{} in {} and {}{span}; {:.0}% resolved.",
            count(s.records, "error record", "error records"),
            count(s.sessions, "session", "sessions"),
            count(s.workflows, "workflow", "workflows"),
            s.resolution_rate * 100.0
        ));
        if let Some((name, n, _)) = d.agents.first() {
            let top_kind = d
                .buckets
                .iter()
                .filter(|b| b.1 == 0)
                .fold(BTreeMap::<usize, u64>::new(), |mut m, b| {
                    *m.entry(b.2).or_default() += b.3;
                    m
                })
                .into_iter()
                .max_by_key(|(_, n)| *n)
                .and_then(|(k, _)| d.kinds.get(k).map(|k| k.0.clone()));
            text.push(format!(
                "The agent that fails most is {} ({}{}).",
                crate::term::cut(name, CAPTION_NAME),
                count(*n, "record", "records"),
                top_kind
                    .map(|k| format!(", mostly {}", crate::term::cut(&k, CELL_NAME)))
                    .unwrap_or_default()
            ));
        }
        if let Some((kind, n)) = d.kinds.first() {
            text.push(format!(
                "The most frequent kind is {} ({n}).",
                crate::term::cut(kind, CELL_NAME)
            ));
        }
        let (day, before) = last_days(d, p.now.timestamp());
        let trend = match day.cmp(&before) {
            std::cmp::Ordering::Greater => "more than",
            std::cmp::Ordering::Less => "fewer than",
            std::cmp::Ordering::Equal => "as many as",
        };
        text.push(format!(
            "In the last 24 hours: {} ({trend} the {before} of the 24 hours before).",
            count(day, "failure", "failures")
        ));
        let past: u64 = d.agents.iter().map(|a| a.2.past_timeout).sum();
        if past > 0 {
            text.push(format!(
                "{} ran past their agent's timeout.",
                count(past, "failed call", "failed calls")
            ));
        }
    }
    let open: Vec<&BreakerNow> = p
        .breakers
        .now
        .iter()
        .filter(|b| b.state != "closed")
        .collect();
    if open.is_empty() {
        text.push("Every breaker is closed.".into());
    } else {
        let names: Vec<String> = open
            .iter()
            .map(|b| {
                format!(
                    "{} ({})",
                    crate::term::cut(&b.key, CAPTION_NAME),
                    b.state.replace('_', "-")
                )
            })
            .collect();
        text.push(format!(
            "Not closed: {} — {}.",
            count(open.len() as u64, "breaker", "breakers"),
            names.join(", ")
        ));
    }
    let (busy, spent) = p.admission.attention();
    if !busy.is_empty() {
        text.push(format!(
            "Every permit held: {}.",
            busy.iter()
                .map(|k| crate::term::cut(k, CAPTION_NAME))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !spent.is_empty() {
        text.push(format!(
            "Retry budget spent (retries refused): {}.",
            spent
                .iter()
                .map(|k| crate::term::cut(k, CAPTION_NAME))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let crossed: u64 = s.thresholds_crossed.values().sum();
    if crossed > 0 {
        let names: Vec<String> = s
            .thresholds_crossed
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        text.push(format!(
            "{} crossed: {}.",
            count(crossed, "threshold", "thresholds"),
            names.join(", ")
        ));
    }
    let unresolved = s
        .records
        .saturating_sub((s.resolution_rate * s.records as f64).round() as u64);
    text.push(format!("{unresolved} unresolved."));
    let _ = write!(
        out,
        "<div class=\"summary\"><p>{}</p>\n<ul class=\"kpis\" aria-label=\"Key numbers\">",
        esc(&text.join(" "))
    );
    for (n, label) in [
        (s.records.to_string(), "error records"),
        (format!("{:.0}%", s.resolution_rate * 100.0), "resolved"),
        (d.agents.len().to_string(), "agents"),
        (open.len().to_string(), "breakers not closed"),
        (crossed.to_string(), "thresholds crossed"),
    ] {
        let _ = write!(out, "<li><b>{}</b>{}</li>", esc(&n), esc(label));
    }
    out.push_str("</ul></div></section>\n");
}

/// Groups shown, at most.
const GROUPS_SHOWN: usize = 20;

/// A command to copy: shell-quoted where a word needs it.
fn command(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.:/=@+,".contains(c))
            {
                (*w).to_string()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn rfc3339(secs: i64) -> String {
    Utc.timestamp_opt(secs, 0)
        .single()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| secs.to_string())
}

/// The operator's to-do list: failures grouped by signature, those that need attention first
/// (a breaker open on them, failing in the last day, critical, rising), each with what triage
/// advises for its kind and the commands that act on it.
fn groups(out: &mut String, p: &Page) {
    let d = p.drawn;
    section(out, "groups", "What needs attention");
    if d.groups.list.is_empty() {
        return empty(out, "No failure to act on.");
    }
    let open: Vec<&str> = p
        .breakers
        .now
        .iter()
        .filter(|b| matches!(b.state.as_str(), "open" | "forced_open" | "half_open"))
        .map(|b| b.key.as_str())
        .collect();
    let open_key = |g: &super::groups::Group| -> Option<String> {
        g.tool
            .iter()
            .chain(g.agents.iter())
            .find(|k| open.contains(&k.as_str()))
            .cloned()
    };
    let ranked = d.groups.ranked(&|g| open_key(g).is_some());
    let _ = writeln!(
        out,
        "<p class=\"note\">{} by kind, tool and message (numbers and ids blanked), those that need attention first: a breaker open on them, failures in the last 24 hours, the most severe, rising. Trend: failures per 6 hours over the last 7 days.</p>",
        count(ranked.len() as u64, "signature", "signatures")
    );
    out.push_str("<table class=\"groups\"><thead><tr><th>Signature</th><th>Count</th><th>First seen (UTC)</th><th>Last seen (UTC)</th><th>Agents</th><th>Sessions</th><th>Trend</th><th>What to do</th></tr></thead><tbody>\n");
    for g in ranked.iter().take(GROUPS_SHOWN) {
        let tool = g
            .tool
            .as_deref()
            .map(|t| format!(" <code>{}</code>", esc(t)))
            .unwrap_or_default();
        let names = |set: &std::collections::BTreeSet<String>| {
            let shown: Vec<String> = set.iter().take(3).map(|n| label(n, CELL_NAME)).collect();
            let more = if set.len() > 3 {
                format!(" +{}", set.len() - 3)
            } else {
                String::new()
            };
            format!(
                "{}{}{more}",
                set.len(),
                if shown.is_empty() {
                    String::new()
                } else {
                    format!(": {}", shown.join(", "))
                }
            )
        };
        let rising = match g.day.cmp(&g.day_before) {
            std::cmp::Ordering::Greater => "rising",
            std::cmp::Ordering::Less => "falling",
            std::cmp::Ordering::Equal => "steady",
        };
        let mut todo = String::new();
        for a in super::groups::advice(&g.kind).iter().take(2) {
            let _ = write!(todo, "<div>{}</div>", esc(a));
        }
        if let Some(k) = open_key(g) {
            let _ = write!(
                todo,
                "<div>Breaker <code>{}</code> is not closed; once the cause is fixed: <code>{}</code></div>",
                esc(&k),
                esc(&command(&["triage", "breaker", "reset", &k]))
            );
        }
        let mut read = vec!["triage", "errors", "--kind", g.kind.as_str()];
        let agent = (g.agents.len() == 1)
            .then(|| g.agents.iter().next())
            .flatten();
        if let Some(a) = agent {
            read.extend(["--agent", a.as_str()]);
        }
        let since = g.first.map(rfc3339);
        if let Some(t) = since.as_deref() {
            read.extend(["--since", t]);
        }
        read.extend(["--unresolved", "--text"]);
        let _ = write!(
            todo,
            "<div>Read them: <code>{}</code></div>",
            esc(&command(&read))
        );
        let _ = writeln!(
            out,
            "<tr class=\"sev{}\"><td><b>{}</b>{tool}<div>{}</div></td><td class=\"n\">{}</td><td class=\"nw first\">{}</td><td class=\"nw last\">{}</td><td class=\"name\">{}</td><td class=\"name\">{}</td><td><span class=\"spark\" aria-hidden=\"true\">{}</span><div>{} in 24 h, {} before: {rising}</div></td><td>{todo}</td></tr>",
            g.worst,
            label(&g.kind, CELL_NAME),
            esc(if g.message.is_empty() { "(no message)" } else { &g.message }),
            g.count,
            g.first.map_or("-".into(), utc),
            g.last.map_or("-".into(), utc),
            names(&g.agents),
            names(&g.sessions),
            crate::term::sparkline(&g.trend),
            g.day,
            g.day_before,
        );
    }
    out.push_str("</tbody></table>\n");
    if ranked.len() > GROUPS_SHOWN {
        let _ = writeln!(
            out,
            "<p class=\"note\">{} more signatures not listed.</p>",
            ranked.len() - GROUPS_SHOWN
        );
    }
    out.push_str("</section>\n");
}

/// Failures in the last 24 hours and in the 24 before them.
fn last_days(d: &Drawn, now: i64) -> (u64, u64) {
    let mut day = 0;
    let mut before = 0;
    for (start, _, _, n) in &d.buckets {
        let ago = now - start;
        if (0..86_400).contains(&ago) {
            day += n;
        } else if (86_400..2 * 86_400).contains(&ago) {
            before += n;
        }
    }
    (day, before)
}

const STEPS: &[i64] = &[
    60,
    300,
    900,
    1800,
    3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86_400,
    2 * 86_400,
    7 * 86_400,
    30 * 86_400,
    365 * 86_400,
];

fn over_time(out: &mut String, p: &Page) {
    let d = p.drawn;
    section(out, "over-time", "Failures over time");
    let (Some(first), Some(last)) = (d.first, d.last) else {
        return empty(out, "No record has a time to draw.");
    };
    let span = (last - first).max(1);
    let step = STEPS
        .iter()
        .copied()
        .find(|s| *s >= d.bucket_seconds && span / s < COLUMNS)
        .unwrap_or(365 * 86_400);
    let start = first.div_euclid(step) * step;
    let n = ((last - start) / step + 1) as usize;
    // (chart, column, kind) → records; chart AGENTS_DRAWN holds every other agent.
    let charts = d.agents.len().min(AGENTS_DRAWN + 1);
    let mut grid = vec![vec![vec![0u64; KIND_COLOURS + 1]; n]; charts];
    for (s, agent, kind, c) in &d.buckets {
        let col = ((s - start) / step).clamp(0, n as i64 - 1) as usize;
        let chart = (*agent).min(AGENTS_DRAWN);
        if let Some(g) = grid.get_mut(chart) {
            g[col][(*kind).min(KIND_COLOURS)] += c;
        }
    }
    let max = grid
        .iter()
        .flat_map(|g| g.iter().map(|col| col.iter().sum::<u64>()))
        .max()
        .unwrap_or(0);
    let _ = write!(
        out,
        "<p class=\"note\">Each bar is {} of failures, stacked by kind; the agents with most failures first, on one scale so they compare.</p>\n<ul class=\"legend\" aria-label=\"Kinds\">",
        human(step as u64 * 1000)
    );
    for (i, (kind, c)) in d.kinds.iter().enumerate().take(KIND_COLOURS + 1) {
        let (name, c) = if i == KIND_COLOURS && d.kinds.len() > KIND_COLOURS + 1 {
            let rest: u64 = d.kinds[KIND_COLOURS..].iter().map(|k| k.1).sum();
            ("other kinds".to_string(), rest)
        } else {
            (kind.clone(), *c)
        };
        let _ = write!(
            out,
            "<li><i class=\"{}\"></i>{} ({c})</li>",
            kind_class(i),
            label(&name, CELL_NAME)
        );
    }
    out.push_str("</ul>\n");
    let ticks: Vec<(usize, String)> = [0, n / 2, n.saturating_sub(1)]
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|i| (i, short(start + i as i64 * step, span)))
        .collect();
    for (chart, g) in grid.iter().enumerate() {
        let (name, total) = if chart < AGENTS_DRAWN {
            (d.agents[chart].0.clone(), d.agents[chart].1)
        } else {
            let rest: u64 = d.agents[AGENTS_DRAWN..].iter().map(|a| a.1).sum();
            (
                format!("{} other agents", d.agents.len() - AGENTS_DRAWN),
                rest,
            )
        };
        let columns: Vec<Stack> = g
            .iter()
            .enumerate()
            .map(|(i, kinds)| {
                let at = start + i as i64 * step;
                let parts: Vec<(String, u64)> = kinds
                    .iter()
                    .enumerate()
                    .map(|(k, c)| (kind_class(k), *c))
                    .collect();
                let named: Vec<String> = kinds
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(k, c)| {
                        let kind = d.kinds.get(k).map_or("other", |x| x.0.as_str());
                        format!("{kind} {c}")
                    })
                    .collect();
                Stack {
                    label: format!("{name}, {} UTC: {}", utc(at), named.join(", ")),
                    parts,
                }
            })
            .collect();
        let busiest = g
            .iter()
            .enumerate()
            .max_by_key(|(_, c)| c.iter().sum::<u64>())
            .map(|(i, c)| (i, c.iter().sum::<u64>()));
        let desc = match busiest {
            Some((i, c)) if c > 0 => format!(
                "{} in all; the most, {c}, in the {} from {} UTC.",
                count(total, "failure", "failures"),
                human(step as u64 * 1000),
                utc(start + i as i64 * step)
            ),
            _ => count(total, "failure", "failures"),
        };
        let _ = writeln!(
            out,
            "<figure><figcaption>{} <span class=\"note\">({total})</span></figcaption>{}</figure>",
            label(&name, CAPTION_NAME),
            svg::stacked_bars(
                &format!("time-{chart}"),
                &format!("Failures of {name} over time"),
                &desc,
                &columns,
                max,
                &ticks
            )
        );
    }
    out.push_str("</section>\n");
}

fn state_class(state: &str) -> &'static str {
    match state {
        "open" => "s-open",
        "half_open" => "s-half_open",
        "forced_open" => "s-forced_open",
        "disabled" => "s-disabled",
        _ => "s-closed",
    }
}

fn breakers(out: &mut String, p: &Page) {
    let b = p.breakers;
    section(out, "breakers", "Circuit breakers");
    if b.events.is_empty() && b.now.is_empty() {
        return empty(out, "No breaker has been used under this state root.");
    }
    out.push_str("<ul class=\"legend\" aria-label=\"States\">");
    for (class, name) in [
        ("s-closed", "closed"),
        ("s-open", "open"),
        ("s-half_open", "half-open"),
        ("s-forced_open", "forced open"),
        ("s-disabled", "disabled"),
    ] {
        let _ = write!(out, "<li><i class=\"{class}\"></i>{name}</li>");
    }
    out.push_str("</ul>\n");
    let now_ms = p.range.1.unwrap_or(p.now).min(p.now).timestamp_millis();
    // The same span as the records' (or the last hour at least), so the two read together;
    // the range asked for when there is one.
    let from = b
        .events
        .values()
        .filter_map(|e| e.first().map(|x| x.0))
        .chain(p.drawn.first.map(|f| f * 1000))
        .min()
        .unwrap_or(now_ms)
        .min(now_ms - 3_600_000);
    let from = p
        .range
        .0
        .map_or(from, |t| t.timestamp_millis().min(now_ms - 1));
    let span = (now_ms - from).max(1) as f64;
    // Keys not closed first, then those that changed most.
    let state_now = |k: &str| {
        b.now
            .iter()
            .find(|n| n.key == k)
            .map(|n| n.state.clone())
            .or_else(|| b.events.get(k).and_then(|e| e.last().map(|x| x.1.clone())))
            .unwrap_or_else(|| "closed".into())
    };
    let mut keys: Vec<&String> = b.events.keys().collect();
    for n in &b.now {
        if !b.events.contains_key(&n.key) {
            keys.push(&n.key);
        }
    }
    keys.sort_by_key(|k| {
        (
            state_now(k) == "closed",
            std::cmp::Reverse(b.events.get(*k).map_or(0, Vec::len)),
            (*k).clone(),
        )
    });
    let shown = keys.len().min(BREAKERS_DRAWN);
    let mut outages: Vec<Outage> = Vec::new();
    let lanes: Vec<Lane> = keys[..shown]
        .iter()
        .map(|k| {
            let events = b.events.get(*k).map(Vec::as_slice).unwrap_or_default();
            let periods = periods(events, from, now_ms);
            outages.extend(outages_of(k, &periods));
            Lane {
                label: (*k).clone(),
                bands: bands(k, &periods, from, span),
            }
        })
        .collect();
    let ticks: Vec<(f64, String)> = [0.0, 0.5, 1.0]
        .iter()
        .map(|f| {
            let t = from + (span * f) as i64;
            (*f, short(t / 1000, (span / 1000.0) as i64))
        })
        .collect();
    let desc = format!(
        "States of {} over time; {} not closed now.",
        count(keys.len() as u64, "breaker", "breakers"),
        keys.iter().filter(|k| state_now(k) != "closed").count()
    );
    let _ = writeln!(
        out,
        "<figure>{}</figure>",
        svg::lanes(
            "breaker-lanes",
            "Breaker states over time",
            &desc,
            &lanes,
            &ticks
        )
    );
    if keys.len() > shown {
        let _ = writeln!(
            out,
            "<p class=\"note\">{} more not drawn.</p>",
            keys.len() - shown
        );
    }
    outage_table(out, &mut outages, now_ms);
    if !b.now.is_empty() {
        out.push_str("<table><caption class=\"note\">Now</caption><thead><tr><th>Key</th><th>State</th><th>Failures</th><th>Half-open in</th><th>Last error</th></tr></thead><tbody>\n");
        for n in b.now.iter().take(200) {
            let _ = writeln!(
                out,
                "<tr><td class=\"name\"><code>{}</code></td><td class=\"nw\"><i class=\"{}\" style=\"display:inline-block;width:9px;height:9px;border-radius:2px;margin-right:5px\"></i>{}</td><td class=\"n\">{}/{}</td><td class=\"nw\">{}</td><td>{}</td></tr>",
                esc(&n.key),
                state_class(&n.state),
                esc(&n.state.replace('_', "-")),
                n.failures.0,
                n.failures.1,
                n.half_open_in_s.map_or("-".into(), |s| human(s * 1000)),
                esc(n.last_error.as_deref().unwrap_or("-"))
            );
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str("</section>\n");
}

/// Permits and retry budgets now, when the policy or the store knows any: a key whose
/// permits are all held and a budget that refuses retries are marked as needing attention.
fn admission(out: &mut String, p: &Page) {
    let a = p.admission;
    if a.is_empty() {
        return;
    }
    section(out, "admission", "Permits and retry budgets");
    if !a.permits.is_empty() {
        out.push_str("<table class=\"permits\"><caption class=\"note\">Permits: leases held at once, of the policy's <code>max</code></caption><thead><tr><th>Key</th><th>Held</th><th style=\"width:20%\"><span class=\"note\">of max</span></th><th>First frees in</th><th>Holders</th></tr></thead><tbody>\n");
        for k in &a.permits {
            let held = match k.max {
                Some(m) => format!("{}/{m}", k.held),
                None => format!("{} (no policy entry)", k.held),
            };
            let share = match k.max {
                Some(m) if m > 0 => (f64::from(k.held) / f64::from(m) * 100.0).min(100.0),
                _ => 0.0,
            };
            let holders: Vec<String> = k
                .leases
                .iter()
                .take(3)
                .map(|l| {
                    let who = l.holder.as_deref().unwrap_or(&l.id);
                    format!("<code>{}</code>", esc(&crate::term::cut(who, CELL_NAME)))
                })
                .collect();
            let more = if k.leases.len() > 3 {
                format!(" +{}", k.leases.len() - 3)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "<tr{}><td class=\"name\"><code>{}</code></td><td class=\"n\">{}{}</td><td><div class=\"meter\" style=\"width:{share:.0}%\"></div></td><td class=\"nw\">{}</td><td>{}{more}</td></tr>",
                if k.busy() { " class=\"sev3 busy\"" } else { "" },
                esc(&k.key),
                esc(&held),
                if k.busy() { " <span class=\"sev-error\">busy</span>" } else { "" },
                k.next_free_ms()
                    .map_or("-".into(), |t| human(super::admission::whole_secs_ms(t - k.now_ms))),
                if holders.is_empty() { "-".to_string() } else { holders.join(", ") },
            );
        }
        out.push_str("</tbody></table>\n");
    }
    if !a.budgets.is_empty() {
        use super::admission::tokens;
        out.push_str("<table class=\"budgets\"><caption class=\"note\">Retry budgets: a failure costs a token, a success gives back the ratio; retries go ahead while more than half are left</caption><thead><tr><th>Key</th><th>Tokens</th><th style=\"width:20%\"><span class=\"note\">of max</span></th><th>Retries</th><th>Ratio</th></tr></thead><tbody>\n");
        for b in &a.budgets {
            let share = if b.max_milli > 0 {
                (b.tokens_milli as f64 / b.max_milli as f64 * 100.0).min(100.0)
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "<tr{}><td class=\"name\"><code>{}</code></td><td class=\"n\">{}/{}</td><td><div class=\"meter\" style=\"width:{share:.0}%\"></div></td><td class=\"nw\">{}</td><td class=\"n\">{}</td></tr>",
                if b.retry_allowed { "" } else { " class=\"sev3 spent\"" },
                esc(&b.key),
                tokens(b.tokens_milli),
                tokens(b.max_milli),
                if b.retry_allowed {
                    "allowed"
                } else {
                    "<span class=\"sev-error\">refused: spent</span>"
                },
                tokens(b.ratio_milli),
            );
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str("</section>\n");
}

/// The narrowest band a state other than closed is drawn with, in the chart's units (800 for
/// the width): 3 px or more wherever the chart is drawn 800 px wide or wider, so that a
/// 30-second open period in a three-day range is still there to see.
pub const MIN_BAND: f64 = 3.0;

/// One stretch of a breaker in one state: (from, to) in Unix ms, the state.
type Period = (i64, i64, String);

/// The states of one breaker from `from` to `now`, from its transitions (closed before the
/// first; a transition before `from` sets the state the range starts in).
fn periods(events: &[(i64, String)], from: i64, now: i64) -> Vec<Period> {
    let mut out: Vec<Period> = Vec::new();
    let mut at = from;
    let mut state = "closed".to_string();
    for (t, to) in events {
        if *t > now {
            break;
        }
        let t = (*t).max(from);
        if t > at {
            out.push((at, t, state.clone()));
            at = t;
        }
        state.clone_from(to);
    }
    if now > at || out.is_empty() {
        out.push((at, now.max(at), state));
    }
    out
}

/// The bands of a lane: the whole range closed beneath, then every other state on top, each
/// at least [`MIN_BAND`] wide. Periods that would touch once widened share one band (drawn in
/// the most severe of their states, its title counting them), so a flapping breaker draws at
/// most one band per [`MIN_BAND`] of width, however many times it opened.
fn bands(
    key: &str,
    periods: &[Period],
    from: i64,
    span: f64,
) -> Vec<(f64, f64, &'static str, String)> {
    let plot = svg::WIDTH - svg::LANE_LABEL - svg::RIGHT;
    let min = MIN_BAND / plot;
    let frac = |t: i64| ((t - from) as f64 / span).clamp(0.0, 1.0);
    let severity = |s: &str| match s {
        "forced_open" => 4,
        "open" => 3,
        "half_open" => 2,
        "disabled" => 1,
        _ => 0,
    };
    let mut out = vec![(0.0, 1.0, "s-closed", format!("{key}: closed"))];
    // (a, b, worst state, first start, last end, periods)
    let mut open: Option<(f64, f64, String, i64, i64, usize)> = None;
    let flush = |o: (f64, f64, String, i64, i64, usize),
                 out: &mut Vec<(f64, f64, &'static str, String)>| {
        let (a, b, state, t0, t1, n) = o;
        let what = state.replace('_', "-");
        let title = if n == 1 {
            format!(
                "{key}: {what} from {} to {} UTC ({})",
                utc(t0 / 1000),
                utc(t1 / 1000),
                human((t1 - t0).max(0) as u64)
            )
        } else {
            format!(
                "{key}: {n} periods not closed (the worst {what}) from {} to {} UTC",
                utc(t0 / 1000),
                utc(t1 / 1000)
            )
        };
        out.push((a, b, state_class(&state), title));
    };
    for (t0, t1, state) in periods.iter().filter(|p| p.2 != "closed") {
        let a = frac(*t0).min(1.0 - min);
        let b = frac(*t1).max(a + min);
        match open.as_mut() {
            Some(o) if a <= o.1 => {
                o.1 = o.1.max(b);
                o.4 = *t1;
                o.5 += 1;
                if severity(state) > severity(&o.2) {
                    o.2.clone_from(state);
                }
            }
            _ => {
                if let Some(o) = open.take() {
                    flush(o, &mut out);
                }
                open = Some((a, b, state.clone(), *t0, *t1, 1));
            }
        }
    }
    if let Some(o) = open.take() {
        flush(o, &mut out);
    }
    out
}

/// One outage of a breaker: from leaving closed to closing again (through half-open and
/// back to open, if it did), for the list beside the timeline.
struct Outage {
    key: String,
    opened: i64,
    closed: Option<i64>,
    forced: bool,
    state: String,
}

fn outages_of(key: &str, periods: &[Period]) -> Vec<Outage> {
    let mut out: Vec<Outage> = Vec::new();
    let mut current: Option<Outage> = None;
    for (t0, t1, state) in periods {
        if state == "closed" || state == "disabled" {
            if let Some(mut o) = current.take() {
                o.closed = Some(*t0);
                out.push(o);
            }
            continue;
        }
        let o = current.get_or_insert_with(|| Outage {
            key: key.to_string(),
            opened: *t0,
            closed: None,
            forced: false,
            state: state.clone(),
        });
        o.forced |= state == "forced_open";
        o.state.clone_from(state);
        let _ = t1;
    }
    out.extend(current);
    out
}

/// Outages listed beside the timeline, those still open first, then the newest; at most 50.
fn outage_table(out: &mut String, list: &mut [Outage], now: i64) {
    if list.is_empty() {
        return;
    }
    list.sort_by_key(|o| (o.closed.is_some(), std::cmp::Reverse(o.opened)));
    let _ = writeln!(
        out,
        "<table id=\"outages\"><caption class=\"note\">Open periods ({}), still open first; a period lasts from leaving closed to closing again</caption><thead><tr><th>Key</th><th>Opened (UTC)</th><th>Closed (UTC)</th><th>How long</th><th>Forced</th></tr></thead><tbody>",
        list.len()
    );
    for o in list.iter().take(50) {
        let end = o.closed.unwrap_or(now);
        let _ = writeln!(
            out,
            "<tr><td class=\"name\"><code>{}</code></td><td class=\"nw\">{}</td><td class=\"nw\">{}</td><td class=\"n\">{}</td><td class=\"nw\">{}</td></tr>",
            esc(&o.key),
            utc(o.opened / 1000),
            match o.closed {
                Some(t) => utc(t / 1000),
                None => format!("still {}", esc(&o.state.replace('_', "-"))),
            },
            human((end - o.opened).max(0) as u64),
            if o.forced { "forced (breaker trip)" } else { "no" }
        );
    }
    out.push_str("</tbody></table>\n");
    if list.len() > 50 {
        let _ = writeln!(
            out,
            "<p class=\"note\">{} older periods not listed.</p>",
            list.len() - 50
        );
    }
}

fn durations(out: &mut String, p: &Page) {
    let d = p.drawn;
    section(out, "durations", "How long failed calls ran");
    let agents: Vec<_> = d
        .agents
        .iter()
        .filter(|a| a.2.count > 0)
        .take(AGENTS_DRAWN)
        .collect();
    if agents.is_empty() {
        return empty(out, "No record says how long its call ran (duration_ms).");
    }
    out.push_str("<p class=\"note\">Durations on a log scale; the dashed line is the agent's timeout in the policy. Calls that fail near it suggest a timeout that is too tight.</p>\n");
    let span = (86_400_000f64 / 100.0).ln();
    let at = |ms: f64| ((ms.max(100.0) / 100.0).ln() / span).clamp(0.0, 1.0);
    let ticks: Vec<(f64, String)> = [100u64, 10_000, 600_000, 86_400_000]
        .iter()
        .map(|ms| (at(*ms as f64), human(*ms)))
        .collect();
    let mut panels = Vec::new();
    let mut lines = Vec::new();
    for (name, _, bins) in &agents {
        let labelled: Vec<(u64, String)> = bins
            .bins
            .iter()
            .enumerate()
            .map(|(b, c)| {
                let lo = bin_start_ms(b) as u64;
                let hi = if b + 1 < DURATION_BINS {
                    human(bin_start_ms(b + 1) as u64)
                } else {
                    "more".into()
                };
                (*c, format!("{name}: {c} ran {}–{hi}", human(lo)))
            })
            .collect();
        let marker = bins
            .timeout_ms
            .map(|t| (at(t as f64), format!("timeout {}", human(t))));
        let line = match bins.timeout_ms {
            Some(t) => format!(
                "{}: {} with a duration; {} ran past the timeout of {}.",
                crate::term::cut(name, CAPTION_NAME),
                count(bins.count, "failed call", "failed calls"),
                bins.past_timeout,
                human(t)
            ),
            None => format!(
                "{}: {} with a duration; no timeout in the policy.",
                crate::term::cut(name, CAPTION_NAME),
                count(bins.count, "failed call", "failed calls")
            ),
        };
        lines.push(line);
        panels.push(svg::Panel {
            label: format!(
                "{} ({}{})",
                name,
                bins.count,
                bins.timeout_ms
                    .map(|_| format!(", {} past timeout", bins.past_timeout))
                    .unwrap_or_default()
            ),
            bins: labelled,
            marker,
        });
    }
    let _ = writeln!(
        out,
        "<figure><figcaption>One panel per agent, on one scale <span class=\"note\">(the {} with most failures)</span></figcaption>{}</figure>",
        count(agents.len() as u64, "agent", "agents"),
        svg::small_multiples(
            "durations-chart",
            "Durations of failed calls per agent",
            &lines.join(" "),
            &panels,
            &ticks
        )
    );
    out.push_str("<ul class=\"note\">");
    for l in &lines {
        let _ = write!(out, "<li>{}</li>", esc(l));
    }
    out.push_str("</ul>\n");
    out.push_str("</section>\n");
}

fn thresholds(out: &mut String, p: &Page) {
    let s = p.summary;
    section(out, "thresholds", "Thresholds crossed");
    if s.thresholds.is_empty() {
        return empty(out, "No threshold was crossed.");
    }
    out.push_str("<table><thead><tr><th>Threshold</th><th>Scope</th><th>Count</th><th>Threshold</th></tr></thead><tbody>\n");
    for c in &s.thresholds {
        let _ = writeln!(
            out,
            "<tr><td class=\"nw\">{}</td><td class=\"name\"><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&c.name),
            esc(&c.scope),
            c.count,
            c.threshold
        );
    }
    out.push_str("</tbody></table>\n");
    for (name, n) in &s.thresholds_crossed {
        let listed = s.thresholds.iter().filter(|c| &c.name == name).count() as u64;
        if *n > listed {
            let _ = writeln!(
                out,
                "<p class=\"note\">{}: {} more not listed (the {listed} highest are).</p>",
                esc(name),
                n - listed
            );
        }
    }
    out.push_str("</section>\n");
}

fn texts(out: &mut String, p: &Page) {
    let d = p.drawn;
    section(out, "texts", "Most frequent errors");
    if d.texts.is_empty() {
        return empty(out, "No record has an error text.");
    }
    if d.texts_approximate {
        out.push_str("<p class=\"note\">The log holds more distinct texts than are counted one by one: counts are at least these.</p>\n");
    }
    let max = d.texts.first().map_or(1, |t| t.1).max(1);
    out.push_str("<table><thead><tr><th>Error text</th><th>Count</th><th style=\"width:25%\"><span class=\"note\">share of the most frequent</span></th></tr></thead><tbody>\n");
    for (text, n) in &d.texts {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{n}</td><td><div class=\"meter\" style=\"width:{:.0}%\"></div></td></tr>",
            esc(text),
            *n as f64 / max as f64 * 100.0
        );
    }
    out.push_str("</tbody></table></section>\n");
}

fn unresolved(out: &mut String, p: &Page) {
    let d = p.drawn;
    section(out, "unresolved", "Unresolved errors");
    if d.unresolved.is_empty() {
        return empty(out, "Every error in scope is resolved.");
    }
    let _ = writeln!(
        out,
        "<p class=\"note\">The newest {}; resolve one with <code>triage record-error --resolve ID --action-taken … --successful true</code>, list them all with <code>triage errors --unresolved</code>.</p>",
        d.unresolved.len()
    );
    out.push_str("<table><thead><tr><th>Id</th><th>When (UTC)</th><th>Agent</th><th>Kind</th><th>Severity</th><th>Detail</th></tr></thead><tbody>\n");
    for r in &d.unresolved {
        let sev = r.severity.as_deref().unwrap_or("");
        let class = match sev {
            "critical" | "error" | "warning" => format!(" class=\"name sev-{sev}\""),
            _ => " class=\"name\"".to_string(),
        };
        let _ = writeln!(
            out,
            "<tr><td class=\"id{}\"><code>{}</code></td><td class=\"nw\">{}</td><td class=\"name\">{}</td><td class=\"name\">{}</td><td{class}>{}</td><td>{}</td></tr>",
            // A real id stays on one line; a longer one is no id of ours and wraps.
            if r.error_id.chars().count() <= ID_WHOLE {
                " nw"
            } else {
                ""
            },
            esc(&r.error_id),
            utc(r.at),
            label(&r.agent, CELL_NAME),
            label(&r.kind, CELL_NAME),
            label(if sev.is_empty() { "-" } else { sev }, CELL_NAME),
            esc(&r.detail)
        );
    }
    out.push_str("</tbody></table></section>\n");
}
