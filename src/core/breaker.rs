//! The circuit breaker as a pure state machine (seed 000 "Circuit Breaker Configuration",
//! seed 002's per-stage breakers, the library survey in `shared/reference/resilience-libraries.md`).
//!
//! A [`Breaker`] is the whole persisted state of one key. The functions in [`machine`] take it
//! with the key's [`BreakerSettings`] and `now` (Unix milliseconds), change it, and return what
//! the caller asked for plus the [`Transition`]s that happened. They never open a file or read
//! the clock: `store::breakers` is the seam that loads one key under exclusion, applies them and
//! stores the result.
//!
//! Decisions where the libraries disagree (issue 4):
//! - trips at `>=` the threshold and at `>=` the failure rate (pybreaker, failsafe, r4j);
//! - open → half-open when `now >= opened_at + open_duration` (inclusive, as Polly and
//!   pybreaker), lazily, by the next check, record or status;
//! - `ignored` is neutral and gives back a probe permit (gobreaker, r4j);
//! - one failure in half-open reopens it; `success_threshold` successes close it;
//! - results from an older generation are dropped as stale (gobreaker);
//! - a probe permit is a lease that expires after `probe_ttl`, so a probe that never reports
//!   back cannot wedge the breaker (r4j #903, Polly #1979, opossum #276).

pub mod call_input;
pub mod machine;
pub mod sane;
pub mod template;
#[cfg(test)]
mod tests;

use crate::core::vocab::Kind;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

pub use crate::core::policy::BreakerSettings;
pub use machine::{
    check, disable, half_open, opener_ticket, record, reset, status, trip, CallReport, Effect,
    Permit, Recorded, Refused, Status,
};

/// Unix milliseconds: the only clock the core knows.
pub type Millis = i64;

/// The five states (issue 4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Calls go ahead; failures are counted.
    #[default]
    Closed,
    /// Calls are refused until the open period ends.
    Open,
    /// A few probe calls test whether the agent recovered.
    HalfOpen,
    /// Opened by an operator, until reset (or for a while).
    ForcedOpen,
    /// Always allowed, nothing counted.
    Disabled,
}

impl State {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::Disabled => "disabled",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a call came to, as reported to `breaker record`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// It worked.
    Success,
    /// It failed.
    Failure,
    /// Neither: counts nothing and gives back a probe permit.
    Ignored,
}

impl Outcome {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Ignored => "ignored",
        }
    }
}

impl FromStr for Outcome {
    type Err = String;
    fn from_str(s: &str) -> Result<Outcome, String> {
        match s {
            "success" => Ok(Outcome::Success),
            "failure" => Ok(Outcome::Failure),
            "ignored" => Ok(Outcome::Ignored),
            _ => Err(format!(
                "unknown outcome `{s}`; expected one of: success, failure, ignored"
            )),
        }
    }
}

/// One call in the failure-rate window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// When it was recorded.
    pub at: Millis,
    /// Whether it counted as a failure.
    pub failed: bool,
}

/// A probe permit granted in half-open: its ticket and when the lease runs out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// The ticket handed to the caller.
    pub ticket: String,
    /// The lease ends here; after it the permit is given to someone else.
    pub expires: Millis,
}

/// The last failure seen, for status and Template 4.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastError {
    /// When it was recorded.
    pub at: Millis,
    /// Its kind, when the caller said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    /// Its text, when the caller gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// A success slower than `slow_call_threshold`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slow: bool,
}

/// Everything recorded since the breaker was created (status only; no rule reads them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Successes counted.
    pub successes: u64,
    /// Failures counted (slow calls included).
    pub failures: u64,
    /// Outcomes reported as ignored.
    pub ignored: u64,
    /// Results dropped as stale.
    pub stale: u64,
    /// Times it opened (not counting an operator's trip): seed 000 takes "circuit breaker
    /// opens twice" as a sign to abort.
    #[serde(default)]
    pub opened: u64,
}

/// The persisted state of one breaker key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Breaker {
    /// The key, unescaped (the file name is its escaped form); with `scope = "session"` it
    /// starts with the session id and a `/`.
    pub key: String,
    /// The session of a `scope = "session"` key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The state.
    pub state: State,
    /// Bumped on every transition; a ticket from another generation is stale.
    pub generation: u64,
    /// Consecutive failures while closed.
    pub consecutive_failures: u32,
    /// Probe successes in this half-open period.
    pub probe_successes: u32,
    /// The failure-rate window (kept only when `failure_rate` is set).
    pub calls: VecDeque<Call>,
    /// When the closed-state counts were last cleared by `interval`.
    pub interval_start: Option<Millis>,
    /// When it last opened.
    pub opened_at: Option<Millis>,
    /// How long this open period lasts.
    pub open_duration_ms: u64,
    /// Failed probes since it last closed (grows the open period).
    pub failed_probes: u32,
    /// `trip --for`: the forced-open period ends here.
    pub forced_until: Option<Millis>,
    /// Probe leases outstanding.
    pub probes: Vec<Probe>,
    /// The number of the last probe ticket handed out.
    pub last_probe: u64,
    /// The last failure.
    pub last_error: Option<LastError>,
    /// The last success.
    pub last_success: Option<Millis>,
    /// Totals since creation.
    pub totals: Totals,
    /// Times it opened since a call last succeeded while it was closed: 2 is seed 000's
    /// "circuit breaker opens twice" (the dependency is not recovering). An operator's trip
    /// does not count; a reset clears it.
    #[serde(skip_serializing_if = "is_zero")]
    pub opens_unrecovered: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Breaker {
    /// A new, closed breaker for `key`.
    pub fn new(key: &str) -> Breaker {
        Breaker {
            key: key.to_string(),
            ..Breaker::default()
        }
    }
}

/// One change of state, as logged to `logs/breaker-events.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Transition {
    /// The state it left.
    pub from: State,
    /// The state it entered.
    pub to: State,
    /// Why: `consecutive_failures`, `failure_rate`, `cooldown_elapsed`, `probe_succeeded`,
    /// `probe_failed`, `retry_succeeded`, `reset`, `tripped`, `forced_period_ended`,
    /// `disabled`, `manual`.
    pub reason: &'static str,
    /// The generation it entered.
    pub generation: u64,
    /// When.
    pub at: Millis,
}
