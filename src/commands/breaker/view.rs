//! How `triage breaker` shows breakers: the `--text` forms (the status rows themselves, with
//! RFC 3339 times, and Template 4 are [`crate::store::breakers::calls`]'s).

use crate::core::breaker::{self as core};
use crate::store::breakers::calls::{CheckResult, RecordResult, Status};
use crate::term::{count, cut, when_text, Term, Tone};
use chrono::Utc;

/// `check --text`.
pub fn check_text(r: &CheckResult) -> String {
    match (r.allowed, r.retry_after_s) {
        (true, _) => format!("{}: allowed ({})", r.key, r.reason),
        (false, Some(s)) => format!("{}: refused ({}), retry in {}", r.key, r.reason, secs(s)),
        (false, None) => format!("{}: refused ({}) until reset", r.key, r.reason),
    }
}

/// `record --text`.
pub fn record_text(r: &RecordResult) -> String {
    let mut s = format!(
        "{}: {} {:?}, now {}",
        r.key,
        r.outcome.as_str(),
        r.effect,
        r.state
    );
    if let Some(t) = &r.transition {
        s.push_str(&format!(" ({} -> {}: {})", t.from, t.to, t.reason));
    }
    s.to_lowercase()
}

/// `status --text`: where the breakers are, then a table that fits the terminal, states in
/// colour, durations for people; an empty or missing folder says so and what to check.
pub fn status_table(
    list: &[Status],
    at: &crate::store::breakers::Location,
    term: &Term,
    now: chrono::DateTime<Utc>,
) -> String {
    if list.is_empty() {
        if let Some(root) = &at.missing_root {
            return term.wrap(&format!(
                "no state root at {}: no breaker has been used there.\nPass --dir or set TRIAGE_DIR to the state root (default: $CLAUDE_PROJECT_DIR/.triage, else ./.triage).",
                root.display()
            ));
        }
        return term.wrap(&format!(
            "no breakers under {}: no call has been checked or recorded yet.",
            at.place
        ));
    }
    // The last success gives way to the last error below 100 columns.
    let wide = term.width >= 100;
    let mut rows = Vec::new();
    for s in list {
        let tone = match s.state {
            core::State::Open | core::State::ForcedOpen => Tone::Bad,
            core::State::HalfOpen => Tone::Warn,
            core::State::Closed => Tone::Good,
            core::State::Disabled => Tone::Manual,
        };
        let last_error = s.last_error.as_ref().map_or("-".into(), |e| {
            let text = [e.kind.map(|k| k.to_string()), e.detail.clone()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(": ");
            format!("{} {}", when_text(&e.at, now), cut(&text, 120))
        });
        let mut row = vec![
            term.cell(s.key.clone(), Some(Tone::Strong)),
            term.cell(s.state.to_string(), Some(tone)),
            term.cell(
                format!("{}/{}", s.consecutive_failures, s.failure_threshold),
                None,
            ),
            // Seed 000: a breaker that opens twice is a reason to abort.
            term.cell(
                s.totals.opened.to_string(),
                (s.totals.opened >= 2).then_some(Tone::Bad),
            ),
            term.cell(
                s.half_open_in_s
                    .map_or("-".into(), |n| format!("in {}", secs(n))),
                None,
            ),
        ];
        if wide {
            row.push(
                term.cell(
                    s.since_last_success_s
                        .map_or("never".into(), |n| format!("{} ago", secs(n))),
                    None,
                ),
            );
        }
        row.push(term.cell(last_error, None));
        rows.push(row);
    }
    let open = list
        .iter()
        .filter(|s| matches!(s.state, core::State::Open | core::State::ForcedOpen))
        .count() as u64;
    let mut out = term.wrap(&format!(
        "{} under {}; {}",
        count(list.len() as u64, "breaker", "breakers"),
        at.place,
        term.paint(
            &format!("{open} open"),
            if open > 0 { Tone::Bad } else { Tone::Good }
        )
    ));
    let head: &[&str] = if wide {
        &[
            "KEY",
            "STATE",
            "FAILS",
            "OPENED",
            "HALF-OPEN",
            "LAST SUCCESS",
            "LAST ERROR",
        ]
    } else {
        &["KEY", "STATE", "FAILS", "OPENED", "HALF-OPEN", "LAST ERROR"]
    };
    out.push_str(&term.table(head, &[head.len() - 1], rows));
    out
}

/// Seconds as the one duration format (`1m30s`), shortened to its two largest units.
fn secs(n: u64) -> String {
    crate::core::duration::Dur::secs(n).approx().to_string()
}
