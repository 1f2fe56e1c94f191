//! Seed 000's "Template 4: Circuit Breaker Open", filled in from a breaker's facts. It is the
//! reason a PreToolUse hook gives when it denies a call, so the agent (and its user) can act.
//! The text states the facts and one directive: a model reads it, so no menu of options and
//! no `Enter choice [A/B/C]:` line ([`PROMPT`], a question for a person at a terminal).

use crate::core::duration::humane;
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

/// The message, in the seed's words and layout, ending with one directive for the model that
/// reads it (the seed's A/B/C menu is a person's, in `triage report --template breaker-open`).
pub fn circuit_open(f: &CircuitOpen) -> String {
    let since = match f.since_last_success_s {
        Some(s) => format!("{} ago", humane(Duration::from_secs(s))),
        None => "no success recorded".to_string(),
    };
    let wait = |s: u64| humane(Duration::from_secs(s));
    let agent = &crate::core::text::label(f.agent);
    let directive = match (f.reason, f.retry_after_s) {
        ("forced_open", None) => format!(
            "Do not call {agent} until an operator resets it (`triage breaker reset {agent}`): go on without it, and tell the user what is missing."
        ),
        ("probes_exhausted", Some(s)) => format!(
            "A probe call is testing it now: do not call {agent} for {}, and go on without it meanwhile.",
            wait(s)
        ),
        (_, Some(s)) if s > 0 => format!(
            "Do not call {agent} for {}: go on without it meanwhile, and call it again after that.",
            wait(s)
        ),
        _ => format!("The next call to {agent} is let through as a probe: make it only if the work needs it."),
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
         {directive}",
        failures = f.failures,
        last = f
            .last_error
            .map_or_else(|| "none recorded".into(), crate::core::text::quoted),
    )
}
