//! `report --text`: the summary as a person reads it at a terminal — which log and filters it
//! read, counts in words that agree with their numbers, a sparkline of failures per hour over
//! the last day, and tables that fit the terminal's width.

use crate::core::error_record::LogLine;
use crate::core::summary::{By, Filter, Summary};
use crate::store::breakers::calls::Status;
use crate::term::{count, cut, human, sparkline, Term, Tone};
use chrono::{DateTime, Local, Utc};
use std::path::Path;

/// Hours in the sparkline.
pub const HOURS: usize = 24;

/// What the report read, so that an empty report says why it is empty.
#[derive(Clone, Debug)]
pub struct Source<'a> {
    /// The state root.
    pub root: &'a Path,
    /// The error log.
    pub log: &'a Path,
    /// Whether the state root exists.
    pub root_exists: bool,
    /// Whether the log exists.
    pub log_exists: bool,
    /// Error records in the log, in scope or not.
    pub records_in_log: u64,
}

/// Error records per hour over the last [`HOURS`] hours, the current hour last.
#[derive(Clone, Debug)]
pub struct Hourly {
    now: DateTime<Utc>,
    /// The counts, oldest hour first.
    pub counts: [u64; HOURS],
    /// Error records in the log, in scope or not.
    pub records_in_log: u64,
}

impl Hourly {
    /// Empty, ending at `now`.
    pub fn new(now: DateTime<Utc>) -> Hourly {
        Hourly {
            now,
            counts: [0; HOURS],
            records_in_log: 0,
        }
    }

    /// Takes one parsed line (a resolution line is not a failure).
    pub fn observe(&mut self, l: &LogLine, admitted: bool) {
        if l.is_resolution() {
            return;
        }
        self.records_in_log += 1;
        if !admitted {
            return;
        }
        let Some(t) = l
            .timestamp
            .as_deref()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        else {
            return;
        };
        let ago = self.now.signed_duration_since(t).num_seconds();
        if (0..(HOURS as i64) * 3600).contains(&ago) {
            let i = HOURS - 1 - (ago / 3600) as usize;
            self.counts[i] += 1;
        }
    }
}

/// The filters in words: `session s1, since 2026-02-04 14:02`, or `all records`; times as
/// [`stamp`] writes them (the terminal's zone).
pub fn filters(f: &Filter, now: DateTime<Utc>) -> String {
    let _ = now;
    filters_in(f, stamp)
}

/// [`filters`] with times in UTC, for the HTML page (which says its times are UTC).
pub fn filters_utc(f: &Filter, now: DateTime<Utc>) -> String {
    let _ = now;
    filters_in(f, |t| t.format("%Y-%m-%d %H:%M").to_string())
}

fn filters_in(f: &Filter, stamp: impl Fn(DateTime<Utc>) -> String) -> String {
    let mut parts = Vec::new();
    for (name, v) in [
        ("session", &f.session),
        ("workflow", &f.workflow),
        ("agent", &f.agent),
        ("phase", &f.phase),
    ] {
        if let Some(v) = v {
            parts.push(format!("{name} {v}"));
        }
    }
    if let Some(t) = f.since {
        parts.push(format!("since {}", stamp(t)));
    }
    if let Some(t) = f.until {
        parts.push(format!("until {}", stamp(t)));
    }
    if parts.is_empty() {
        "all records".into()
    } else {
        parts.join(", ")
    }
}

/// The one time format of `report --text`: `2026-02-04 14:02` in the terminal's time zone —
/// the same width in every row, so a column of times reads down without mixing "7 min ago",
/// "13:55:00" and "Feb 03 12:07".
pub fn stamp(t: DateTime<Utc>) -> String {
    t.with_timezone(&Local).format("%Y-%m-%d %H:%M").to_string()
}

/// [`stamp`] of a stored RFC 3339 text; the text itself when it is not a time.
fn stamp_text(t: &str) -> String {
    match DateTime::parse_from_rfc3339(t) {
        Ok(t) => stamp(t.with_timezone(&Utc)),
        Err(_) => t.to_string(),
    }
}

/// The breakers' line: those open (forced open included) counted as `breaker status` counts
/// them, the half-open ones (which let probes through) named apart — "3 open" beside a
/// status that says "2 open" would be two answers to one question.
pub fn breakers_line(not_closed: &[&Status]) -> Option<(String, String)> {
    use crate::core::breaker::State;
    let named = |b: &Status| match b.totals.opened {
        // Seed 000: a breaker that opens twice is a reason to abort; say so.
        n if n >= 2 => format!("{} ({}, opened {n}×)", b.key, b.state),
        _ => format!("{} ({})", b.key, b.state),
    };
    let open: Vec<String> = not_closed
        .iter()
        .filter(|b| matches!(b.state, State::Open | State::ForcedOpen))
        .map(|b| named(b))
        .collect();
    let half: Vec<String> = not_closed
        .iter()
        .filter(|b| matches!(b.state, State::HalfOpen))
        .map(|b| named(b))
        .collect();
    if open.is_empty() && half.is_empty() {
        return None;
    }
    let label = count(open.len() as u64, "open breaker", "open breakers");
    let mut rest = if open.is_empty() {
        String::new()
    } else {
        format!(": {}", open.join(", "))
    };
    if !half.is_empty() {
        rest.push_str(&format!("; {} half-open: {}", half.len(), half.join(", ")));
    }
    Some((label, rest))
}

/// A path on one line: its control characters in caret notation (`^J` for a newline, `^I`
/// for a tab, `^[` for ESC), as [`crate::core::text::printable`] shows the rest of the text — a
/// state root named with a newline must not print as two lines that look like two messages.
pub fn shown_path(path: &Path) -> String {
    let text = path.display().to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("^J"),
            '\t' => out.push_str("^I"),
            c => out.push(c),
        }
    }
    crate::core::text::printable(&out)
}

/// Why there is nothing to show, when there is nothing: a missing root or log is named with
/// what to do, so a wrong `--dir` never reads as a clean bill of health.
fn nothing_to_show(src: &Source, s: &Summary, f: &Filter, now: DateTime<Utc>) -> Option<String> {
    if !src.root_exists {
        return Some(format!(
            "no state root at {}: nothing has been recorded there.\nPass --dir or set TRIAGE_DIR to the state root (default: $CLAUDE_PROJECT_DIR/.triage, else ./.triage).",
            shown_path(src.root)
        ));
    }
    if !src.log_exists {
        return Some(format!(
            "no error log at {}: no error has been recorded under {} yet.",
            shown_path(src.log),
            shown_path(src.root)
        ));
    }
    if s.records == 0 {
        return Some(format!(
            "{}: no error record matches {} ({} in the log).",
            shown_path(src.log),
            filters(f, now),
            count(src.records_in_log, "record", "records")
        ));
    }
    None
}

/// The report as text.
pub fn render(
    s: &Summary,
    src: &Source,
    f: &Filter,
    hourly: &Hourly,
    open_breakers: &[&Status],
    term: &Term,
    now: DateTime<Utc>,
) -> String {
    if let Some(why) = nothing_to_show(src, s, f, now) {
        return term.wrap(&why);
    }
    let mut head = format!(
        "{} {} ({})\n",
        term.paint("error log", Tone::Strong),
        shown_path(src.log),
        filters(f, now)
    );
    let mut line = format!(
        "{} in {} and {}; {} ({:.0}% resolved)",
        count(s.records, "error record", "error records"),
        count(s.sessions, "session", "sessions"),
        count(s.workflows, "workflow", "workflows"),
        count(s.resolutions, "resolution", "resolutions"),
        s.resolution_rate * 100.0
    );
    if s.skipped_lines > 0 {
        line.push_str(&format!(
            "; {} skipped",
            count(
                s.skipped_lines,
                "torn or invalid line",
                "torn or invalid lines"
            )
        ));
    }
    head.push_str(&line);
    head.push('\n');
    let day: u64 = hourly.counts.iter().sum();
    let peak = hourly.counts.iter().copied().max().unwrap_or(0);
    head.push_str(&format!(
        "failures per hour, last 24 h: │{}│ {} in the last day",
        sparkline(&hourly.counts),
        day
    ));
    if day > 0 {
        head.push_str(&format!(", at most {peak} an hour"));
    }
    let mut out = term.wrap(&head);
    out.push('\n');
    out.push_str(&groups(s, term));
    if !s.thresholds.is_empty() {
        out.push('\n');
        out.push_str(&term.paint("thresholds crossed", Tone::Bad));
        out.push('\n');
        let rows = s
            .thresholds
            .iter()
            .map(|c| {
                vec![
                    term.cell(c.name.clone(), Some(Tone::Bad)),
                    term.cell(c.scope.clone(), None),
                    term.cell(format!("{} (threshold {})", c.count, c.threshold), None),
                ]
            })
            .collect();
        out.push_str(&term.table(&["THRESHOLD", "SCOPE", "COUNT"], &[1], rows));
        for (name, n) in &s.thresholds_crossed {
            let listed = s.thresholds.iter().filter(|c| &c.name == name).count() as u64;
            if *n > listed {
                out.push_str(&format!(
                    "{name}: {} more not listed (the {listed} highest are)\n",
                    n - listed
                ));
            }
        }
    }
    if let Some((label, rest)) = breakers_line(open_breakers) {
        // Wrapped as plain text first, so the painted label never counts toward the width.
        let line = term.wrap(&format!("{label}{rest}"));
        let rest = line.strip_prefix(&label).unwrap_or(&line).trim_end();
        out.push_str(&format!("\n{}{rest}\n", term.paint(&label, Tone::Bad)));
    }
    out
}

fn groups(s: &Summary, term: &Term) -> String {
    let by = match s.by {
        By::Agent => "AGENT",
        By::Kind => "KIND",
        By::Phase => "PHASE",
        By::Category => "CATEGORY",
    };
    let durations = s.by == By::Agent
        && s.groups
            .iter()
            .any(|g| g.durations.as_ref().is_some_and(|d| d.count > 0));
    // Columns by what fits: every one from 160 columns, the 95th percentile and the runs past
    // the timeout (seed 001's "are timeouts too tight?") from 110, the essentials below.
    let wide = term.width >= 160;
    let medium = durations && term.width >= 110;
    let mut head = vec![by, "COUNT"];
    if wide {
        head.push("RETRIES");
    }
    head.push("RESOLVED");
    if wide && durations {
        head.extend(["P50", "P95", "MAX", "PAST TIMEOUT"]);
    } else if medium {
        head.extend(["P95", "PAST TIMEOUT"]);
    }
    head.extend(["KINDS", "LAST ERROR"]);
    // Below 120 columns each kind sits on a line of its own beside its count, and the column
    // is as wide as the longest (never split between a kind and its number); wider, they
    // share a line.
    let stacked = term.width < 120;
    // The KINDS column keeps its width (the longest kind and count) when that leaves the last
    // error 14 columns (a date); on a narrower terminal it wraps with the rest.
    let longest = |f: &dyn Fn(&crate::core::summary::GroupSummary) -> usize| {
        s.groups.iter().map(f).max().unwrap_or(0)
    };
    let kind_w = longest(&|g| {
        g.kinds
            .iter()
            .map(|(k, n)| k.chars().count().min(41) + n.to_string().len() + 1)
            .max()
            .unwrap_or(0)
    });
    let fixed = longest(&|g| g.key.chars().count()).clamp(by.len(), 40)
        + longest(&|g| g.count.to_string().len()).max(5)
        + 8
        + if medium { 24 } else { 0 }
        + kind_w.max(5)
        + 2 * 4;
    let keep_kinds = stacked && fixed + 14 <= term.width;
    let wrap: Vec<usize> = if keep_kinds {
        vec![head.len() - 1]
    } else {
        vec![head.len() - 2, head.len() - 1]
    };
    // The last error's text gets what a narrow terminal leaves; comfy-table wraps the rest.
    let detail_room = (term.width / 3).clamp(20, 100);
    let ms = |v: Option<u64>| v.map_or("-".to_string(), human);
    let mut rows = Vec::new();
    for g in &s.groups {
        let mut kinds: Vec<(&String, &u64)> = g.kinds.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        // A no-break space: a table that wraps the column keeps a kind and its count together.
        let kinds: Vec<String> = kinds
            .iter()
            .map(|(k, n)| format!("{}\u{a0}{n}", cut(k, 40)))
            .collect();
        let resolved = format!("{:.0}%", g.resolution_rate * 100.0);
        let tone = (g.resolution_rate < 0.5).then_some(Tone::Warn);
        let mut row = vec![
            term.cell(g.key.clone(), Some(Tone::Strong)),
            term.number(g.count),
        ];
        if wide {
            row.push(term.cell(
                if g.retries.total == 0 {
                    "0".to_string()
                } else {
                    format!("{} (max {})", g.retries.total, g.retries.max)
                },
                None,
            ));
        }
        row.push(term.cell(resolved, tone));
        if wide || medium {
            let d = g.durations.clone().unwrap_or_default();
            if wide && durations {
                row.push(term.cell(ms(d.p50_ms), None));
            }
            row.push(term.cell(ms(d.p95_ms), None));
            if wide && durations {
                row.push(term.cell(ms(d.max_ms), None));
            }
            row.push(match d.timeout_ms {
                Some(t) => term.cell(
                    format!("{} (> {})", d.past_timeout, human(t)),
                    (d.past_timeout > 0).then_some(Tone::Warn),
                ),
                None => term.cell("-", None),
            });
        }
        row.push(term.cell(kinds.join(if stacked { "\n" } else { ", " }), None));
        let last = &g.last_error;
        let at = last
            .timestamp
            .as_deref()
            .map(stamp_text)
            .unwrap_or_else(|| "-".into());
        let detail = last
            .detail
            .as_deref()
            .map(|d| cut(d, detail_room))
            .unwrap_or_default();
        row.push(term.cell(format!("{at} {detail}").trim_end().to_string(), None));
        rows.push(row);
    }
    term.table(&head, &wrap, rows)
}

/// Permits and retry budgets, one table each, after the rest of the report; nothing when the
/// policy and the store know no key. A key whose permits are all held and a budget that
/// refuses retries are painted as trouble.
pub fn admission(a: &super::admission::Admission, term: &Term) -> String {
    let mut out = String::new();
    if !a.permits.is_empty() {
        out.push('\n');
        out.push_str(&term.paint("permits", Tone::Strong));
        out.push('\n');
        let rows = a
            .permits
            .iter()
            .map(|p| {
                let held = match p.max {
                    Some(m) if p.busy() => format!("{} of {m}, busy", p.held),
                    Some(m) => format!("{} of {m}", p.held),
                    None => format!("{} (no [permits] entry)", p.held),
                };
                let next = p.next_free_ms().map_or("-".to_string(), |t| {
                    format!(
                        "in {}",
                        human(super::admission::whole_secs_ms(t - p.now_ms))
                    )
                });
                vec![
                    term.cell(p.key.clone(), Some(Tone::Strong)),
                    term.cell(held, p.busy().then_some(Tone::Bad)),
                    term.cell(next, None),
                ]
            })
            .collect();
        out.push_str(&term.table(&["KEY", "HELD", "FIRST FREES"], &[0], rows));
    }
    if !a.budgets.is_empty() {
        out.push('\n');
        out.push_str(&term.paint("retry budgets", Tone::Strong));
        out.push('\n');
        let rows = a
            .budgets
            .iter()
            .map(|b| {
                use super::admission::tokens;
                vec![
                    term.cell(b.key.clone(), Some(Tone::Strong)),
                    term.cell(
                        format!("{} of {}", tokens(b.tokens_milli), tokens(b.max_milli)),
                        None,
                    ),
                    if b.retry_allowed {
                        term.cell("allowed", None)
                    } else {
                        term.cell("refused: spent", Some(Tone::Bad))
                    },
                    term.cell(format!("+{} a success", tokens(b.ratio_milli)), None),
                ]
            })
            .collect();
        out.push_str(&term.table(&["KEY", "TOKENS", "RETRIES", "RATIO"], &[0], rows));
    }
    out
}
