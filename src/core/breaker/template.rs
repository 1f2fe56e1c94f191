//! Seed 000's "Template 4: Circuit Breaker Open", filled in from a breaker's facts. It is the
//! reason a PreToolUse hook gives when it denies a call, so the agent (and its user) can act.
//! The text states the facts and the options; the seed's `Enter choice [A/B/C]:` line is a
//! question for a person at a terminal ([`PROMPT`]), never sent to a model that nothing reads
//! an answer from.

use crate::core::duration::Dur;
use std::time::Duration;

/// What Template 4 needs to know.
#[derive(Clone, Debug, Default)]
pub struct CircuitOpen<'a> {
    /// The agent (the breaker's key).
    pub agent: &'a str,
    /// Why the call was refused: `open`, `forced_open` or `probes_exhausted`.
    pub reason: &'a str,
    /// Failures that opened it.
    pub failures: u32,
    /// The last error, as text.
    pub last_error: Option<&'a str>,
    /// Seconds since the last success.
    pub since_last_success_s: Option<u64>,
    /// Seconds until it may be retried.
    pub retry_after_s: Option<u64>,
}

/// The seed's prompt line, for a person at a terminal.
pub const PROMPT: &str = "Enter choice [A/B/C]:";

/// The message, in the seed's words and layout, without the prompt line.
pub fn circuit_open(f: &CircuitOpen) -> String {
    let since = match f.since_last_success_s {
        Some(s) => format!("{} ago", Dur(Duration::from_secs(s))),
        None => "no success recorded".to_string(),
    };
    let wait = match (f.reason, f.retry_after_s) {
        ("forced_open", None) => format!(
            "Wait until an operator resets it (`triage breaker reset {}`) and retry",
            f.agent
        ),
        ("probes_exhausted", Some(s)) => {
            format!("Wait {s} seconds (a probe call is already testing it) and retry")
        }
        (_, s) => format!("Wait {} seconds and retry", s.unwrap_or(0)),
    };
    let opened = if f.reason == "forced_open" {
        "circuit breaker was opened by an operator"
    } else {
        "circuit breaker opened"
    };
    format!(
        "[CIRCUIT BREAKER] {agent} {opened}\n\n\
         Consecutive failures: {failures}\n\
         Last error: {last}\n\
         Time since last success: {since}\n\n\
         This agent is temporarily disabled to prevent cascading failures.\n\n\
         Options:\n  \
         (A) {wait}\n  \
         (B) Skip this agent for this session\n  \
         (C) Abort workflow",
        agent = f.agent,
        failures = f.failures,
        last = f.last_error.unwrap_or("none recorded"),
    )
}
