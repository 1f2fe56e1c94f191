//! How breakers are shown: status rows with RFC 3339 times, the `--text` forms, and
//! Template 4 for a refused call.

use super::{CheckResult, RecordResult};
use crate::breaker::machine::Window;
use crate::breaker::template::{circuit_open, CircuitOpen};
use crate::breaker::{self as core, LastError, Millis, Totals};
use crate::term::{count, cut, when_text, Term, Tone};
use chrono::{SecondsFormat, TimeZone, Utc};
use serde::Serialize;

/// A breaker as `status` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    /// The key.
    pub key: String,
    /// The state.
    pub state: core::State,
    /// The generation.
    pub generation: u64,
    /// Consecutive failures while closed (the count that opened it, while open).
    pub consecutive_failures: u32,
    /// The threshold (0: off).
    pub failure_threshold: u32,
    /// The failure-rate window, when `failure_rate` is set.
    pub window: Option<Window>,
    /// When it last opened.
    pub opened_at: Option<String>,
    /// The length of the current open period, in seconds.
    pub open_duration_s: Option<f64>,
    /// Seconds until it goes half-open.
    pub half_open_in_s: Option<u64>,
    /// Probe permits held.
    pub probes_in_flight: usize,
    /// Probe successes so far.
    pub probe_successes: u32,
    /// The last failure.
    pub last_error: Option<ErrorView>,
    /// When the last success was recorded.
    pub last_success_at: Option<String>,
    /// Seconds since then.
    pub since_last_success_s: Option<u64>,
    /// Totals since creation.
    pub totals: Totals,
}

/// The last error as printed.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorView {
    /// When.
    pub at: String,
    /// Its kind.
    pub kind: Option<crate::vocab::Kind>,
    /// Its text.
    pub detail: Option<String>,
    /// A slow success counted as a failure.
    pub slow: bool,
}

/// Unix ms as RFC 3339 (UTC, milliseconds).
pub fn rfc3339(ms: Millis) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// The core's status, with times people can read.
pub fn status(s: core::Status) -> Status {
    Status {
        key: s.key,
        state: s.state,
        generation: s.generation,
        consecutive_failures: s.consecutive_failures,
        failure_threshold: s.failure_threshold,
        window: s.window,
        opened_at: s.opened_at.map(rfc3339),
        open_duration_s: s.open_duration_s,
        half_open_in_s: s.half_open_in_s,
        probes_in_flight: s.probes_in_flight,
        probe_successes: s.probe_successes,
        last_error: s.last_error.map(|e| ErrorView {
            at: rfc3339(e.at),
            kind: e.kind,
            detail: e.detail,
            slow: e.slow,
        }),
        last_success_at: s.last_success.map(rfc3339),
        since_last_success_s: s.since_last_success_s,
        totals: s.totals,
    }
}

/// The last error in one line: `timeout: no answer in 5m`.
pub fn error_text(e: &LastError) -> String {
    let kind = e.kind.map(|k| k.to_string());
    let slow = e
        .slow
        .then(|| "slower than slow_call_threshold".to_string());
    let parts: Vec<String> = [kind, e.detail.clone(), slow]
        .into_iter()
        .flatten()
        .collect();
    if parts.is_empty() {
        "failure (no detail recorded)".into()
    } else {
        parts.join(": ")
    }
}

/// Seed 000's Template 4, the reason a PreToolUse hook gives when it denies a call.
pub fn template4_reason(r: &CheckResult) -> String {
    circuit_open(&CircuitOpen {
        agent: &r.key,
        reason: r.reason,
        failures: r.failures,
        last_error: r.last_error.as_deref(),
        since_last_success_s: r.since_last_success_s,
        retry_after_s: r.retry_after_s,
    })
}

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
    dir: &std::path::Path,
    root_exists: bool,
    term: &Term,
    now: chrono::DateTime<Utc>,
) -> String {
    if list.is_empty() {
        if !root_exists {
            return term.wrap(&format!(
                "no state root at {}: no breaker has been used there.\nPass --dir or set TRIAGE_DIR to the state root (default: $CLAUDE_PROJECT_DIR/.triage, else ./.triage).",
                dir.parent().unwrap_or(dir).display()
            ));
        }
        return term.wrap(&format!(
            "no breakers under {}: no call has been checked or recorded yet.",
            dir.display()
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
        dir.display(),
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
    crate::duration::Dur::secs(n).approx().to_string()
}
