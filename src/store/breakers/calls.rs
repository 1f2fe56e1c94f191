//! What the commands do with a breaker, whatever the backend: check whether a call may go
//! ahead, record how it went, read the status of one or all. Each is one [`store::update`]
//! (or [`store::peek`], for reports) around the pure machine, so `triage hook`, `triage run`,
//! `triage record-error`, `triage report` and `triage breaker` share these operations and none
//! calls another command's code. The command's own flags, texts and manual overrides stay in
//! `commands::breaker`.

use super::{self as store, Id};
use crate::core::breaker::template::{circuit_open, CircuitOpen};
use crate::core::breaker::{self, CallReport, LastError, Millis, Outcome, Totals};
use crate::core::policy::{Policy, Scope};
use crate::exit::{Failure, FailureClass};
use crate::store::ground::Ground;
use crate::store::trace;
use chrono::{SecondsFormat, TimeZone, Utc};
use serde::Serialize;

/// The answer to `check`.
#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
    /// The key (with its session prefix under `scope = "session"`).
    pub key: String,
    /// The state after the check; `null` when the breaker could not be read (fail open).
    pub state: Option<breaker::State>,
    /// Whether the call may go ahead.
    pub allowed: bool,
    /// `closed`, `open`, `forced_open`, `probe_granted`, `probes_exhausted`, `disabled`, or
    /// `unavailable` when the state could not be read or written (allowed, with a warning).
    pub reason: &'static str,
    /// When refused: seconds until it may be asked again.
    pub retry_after_s: Option<u64>,
    /// The generation; a ticket carries it.
    pub generation: u64,
    /// When allowed: hand it back to `record --ticket`.
    pub ticket: Option<String>,
    /// For Template 4: consecutive failures.
    #[serde(skip)]
    pub failures: u32,
    /// For Template 4: the last error as text.
    #[serde(skip)]
    pub last_error: Option<String>,
    /// For Template 4: seconds since the last success.
    #[serde(skip)]
    pub since_last_success_s: Option<u64>,
}

/// The answer to `record`.
#[derive(Clone, Debug, Serialize)]
pub struct RecordResult {
    /// The key.
    pub key: String,
    /// The state after the record.
    pub state: breaker::State,
    /// The generation after the record.
    pub generation: u64,
    /// The outcome as reported.
    pub outcome: Outcome,
    /// `counted`, `ignored`, `stale`, `late` or `disabled`.
    pub effect: breaker::Effect,
    /// `success` or `failure` as counted.
    pub counted_as: Option<Outcome>,
    /// A success slower than `slow_call_threshold`.
    pub slow_call: bool,
    /// Consecutive failures now.
    pub consecutive_failures: u32,
    /// The transition this result caused, if any.
    pub transition: Option<TransitionView>,
    /// Times it opened since a call last succeeded while closed (shown when not 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub opens_unrecovered: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A transition as printed.
#[derive(Clone, Debug, Serialize)]
pub struct TransitionView {
    /// From.
    pub from: breaker::State,
    /// To.
    pub to: breaker::State,
    /// Why.
    pub reason: &'static str,
}

/// A breaker as `status` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    /// The key.
    pub key: String,
    /// The state.
    pub state: breaker::State,
    /// The generation.
    pub generation: u64,
    /// Consecutive failures while closed (the count that opened it, while open).
    pub consecutive_failures: u32,
    /// The threshold (0: off).
    pub failure_threshold: u32,
    /// The failure-rate window, when `failure_rate` is set.
    pub window: Option<crate::core::breaker::machine::Window>,
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

impl Status {
    /// The facts the templates name of a breaker (Template 4, the session summary).
    pub fn facts(&self) -> crate::core::templates::BreakerFacts {
        crate::core::templates::BreakerFacts {
            key: self.key.clone(),
            state: self.state,
            consecutive_failures: self.consecutive_failures,
            last_error: self.last_error.as_ref().map(|e| {
                [e.kind.map(|k| k.to_string()), e.detail.clone()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" - ")
            }),
            since_last_success_s: self.since_last_success_s,
            half_open_in_s: self.half_open_in_s,
            opened: self.totals.opened,
        }
    }
}

/// The last error as printed.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorView {
    /// When.
    pub at: String,
    /// Its kind.
    pub kind: Option<crate::core::vocab::Kind>,
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
pub fn status(s: breaker::Status) -> Status {
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

/// May a call to `key` go ahead? Within `session` for keys whose policy says `scope =
/// "session"`.
pub fn check_in(
    g: &Ground,
    policy: &Policy,
    key: &str,
    session: Option<&str>,
) -> Result<CheckResult, Failure> {
    check_id(g, policy, &resolve(g, policy, key, session, true)?)
}

/// Reports a call's result on breaker `key` (within `session` for keys whose policy says
/// `scope = "session"`).
pub fn record_in(
    g: &Ground,
    policy: &Policy,
    key: &str,
    session: Option<&str>,
    report: &CallReport,
) -> Result<RecordResult, Failure> {
    record_id(g, policy, &resolve(g, policy, key, session, true)?, report)
}

/// Every breaker with a state file, as it stands now (open ones first, then by key). The
/// policy is asked for (`policy`) once there is a breaker to judge: with none, there is
/// nothing a policy that cannot be read (under `--strict`) would stop.
pub fn status_all<'p>(
    g: &Ground,
    policy: impl Fn() -> Result<&'p Policy, Failure>,
) -> Result<Vec<Status>, Failure> {
    let mut list = Vec::new();
    for id in stored_ids(g)? {
        list.push(status_id(g, policy()?, &id)?);
    }
    list.sort_by(|a, b| {
        (a.state == breaker::State::Closed, &a.key)
            .cmp(&(b.state == breaker::State::Closed, &b.key))
    });
    Ok(list)
}

/// Every breaker as stored, read without its lock and never written: for reports, which
/// must not change state (a transition that is due is shown, not recorded). Unreadable files
/// are left out.
pub fn peek_all(g: &Ground, policy: &Policy) -> Result<Vec<Status>, Failure> {
    let now = store::now(g);
    let mut list = Vec::new();
    for id in stored_ids(g)? {
        let Some(mut b) = store::peek(g, &id) else {
            continue;
        };
        let settings = policy.breaker_for(&id.policy_key);
        // Shown as the next call would see it; the stored state is left for that call.
        let wait = store::named_wait(policy, &id);
        store::warn_clamped(g, &id.key, "its stored state", &mut b, &settings, wait, now);
        let (st, _) = breaker::status(&mut b, &settings, now);
        list.push(status(st));
    }
    Ok(list)
}

/// [`check_in`] for a call that can never report its result (a skill's shell command:
/// nothing follows it): the same decision, with the transitions that are due recorded, but no
/// half-open probe permit is taken (it would be held until its lease ran out) and no ticket
/// given.
pub fn check_in_without_ticket(
    g: &Ground,
    policy: &Policy,
    key: &str,
    session: Option<&str>,
) -> Result<CheckResult, Failure> {
    check_id_as(g, policy, &resolve(g, policy, key, session, true)?, false)
}

/// [`check_in`] of a resolved key.
pub fn check_id(g: &Ground, policy: &Policy, id: &Id) -> Result<CheckResult, Failure> {
    check_id_as(g, policy, id, true)
}

/// [`check_id`]; `take`: whether a half-open breaker's probe permit is taken (else the
/// decision is judged on a copy and nothing but the due transitions is kept).
fn check_id_as(g: &Ground, policy: &Policy, id: &Id, take: bool) -> Result<CheckResult, Failure> {
    let result = check_stored(g, policy, id, take);
    if let Ok(r) = &result {
        trace::breaker_checked(g, &r.key, r.state, r.allowed, r.reason, r.retry_after_s);
    }
    result
}

/// [`check_id_as`] before its trace.
fn check_stored(g: &Ground, policy: &Policy, id: &Id, take: bool) -> Result<CheckResult, Failure> {
    let result = store::update(g, policy, id, |b, s, now| {
        let (p, tr) = if take {
            breaker::check(b, s, now)
        } else {
            let (_, tr) = breaker::status(b, s, now);
            let (mut p, _) = breaker::check(&mut b.clone(), s, now);
            p.ticket = None;
            (p, tr)
        };
        let failures = b.consecutive_failures;
        let last_error = b.last_error.as_ref().map(error_text);
        let since = b
            .last_success
            .map(|t| u64::try_from(now.saturating_sub(t)).unwrap_or(0) / 1000);
        let r = CheckResult {
            key: b.key.clone(),
            state: Some(b.state),
            allowed: p.allowed,
            reason: p.reason,
            retry_after_s: p.retry_after_s,
            generation: b.generation,
            ticket: p.ticket,
            failures,
            last_error,
            since_last_success_s: since,
        };
        Ok((r, tr))
    });
    match result {
        Ok(r) => Ok(r),
        // A broken breaker must never stop the agents: fail open (SPEC §2), unless --strict.
        Err(f) if f.class != FailureClass::Usage && !g.strict => {
            g.warn(&format!(
                "breaker `{}` unavailable, allowing the call: {f}",
                id.key
            ));
            Ok(CheckResult {
                key: id.key.clone(),
                state: None,
                allowed: true,
                reason: "unavailable",
                retry_after_s: None,
                generation: 0,
                ticket: None,
                failures: 0,
                last_error: None,
                since_last_success_s: None,
            })
        }
        Err(f) => Err(f),
    }
}

/// [`record_in`] of a resolved key.
pub fn record_id(
    g: &Ground,
    policy: &Policy,
    id: &Id,
    report: &CallReport,
) -> Result<RecordResult, Failure> {
    let mut before = (breaker::State::Closed, 0);
    let done = store::update(g, policy, id, |b, s, now| {
        before = (b.state, b.consecutive_failures);
        let (r, tr) = breaker::record(b, s, report, now).map_err(Failure::usage)?;
        let out = RecordResult {
            key: b.key.clone(),
            state: b.state,
            generation: b.generation,
            outcome: report.outcome.unwrap_or(Outcome::Failure),
            effect: r.effect,
            counted_as: r.counted_as,
            slow_call: r.slow_call,
            consecutive_failures: b.consecutive_failures,
            transition: tr.last().map(|t| TransitionView {
                from: tr.first().map_or(t.from, |f| f.from),
                to: t.to,
                reason: t.reason,
            }),
            opens_unrecovered: b.opens_unrecovered,
        };
        Ok((out, tr))
    });
    if let (true, Ok(r)) = (g.debug(), &done) {
        let outcome = serde_json::to_value(r.outcome).unwrap_or_default();
        let effect = serde_json::to_value(r.effect).unwrap_or_default();
        trace::breaker_recorded(
            g,
            &trace::Recorded {
                key: &r.key,
                outcome: outcome.as_str().unwrap_or("?"),
                effect: effect.as_str().unwrap_or("?"),
                before: r.transition.as_ref().map_or(before.0, |t| t.from),
                after: r.state,
                failures: (before.1, r.consecutive_failures),
                threshold: policy.breaker_for(&id.policy_key).failure_threshold,
                reason: r.transition.as_ref().map(|t| t.reason),
            },
        );
    }
    done
}

/// The status of a resolved key, with the transitions that are due recorded.
pub fn status_id(g: &Ground, policy: &Policy, id: &Id) -> Result<Status, Failure> {
    store::update(g, policy, id, |b, s, now| {
        let (st, tr) = breaker::status(b, s, now);
        Ok((status(st), tr))
    })
}

/// The key as stored: with `scope = "session"`, prefixed by the session id. Without a session,
/// the command line is told to pass one; in-process callers (`lenient`) fall back to the
/// global key with a warning, since a hook must keep working.
pub fn resolve(
    g: &Ground,
    policy: &Policy,
    key: &str,
    session: Option<&str>,
    lenient: bool,
) -> Result<Id, Failure> {
    let scope = policy.breaker_for(key).scope;
    let session = session.filter(|s| !s.is_empty());
    match (scope, session) {
        (Scope::Session, Some(s)) => Ok(Id {
            key: format!("{s}/{key}"),
            policy_key: key.to_string(),
            session: Some(s.to_string()),
        }),
        (Scope::Session, None) if !lenient => Err(Failure::usage(format!(
            "breaker `{key}` has scope = \"session\" in the policy; pass --session ID (or send {{\"session_id\": ...}})"
        ))),
        (scope, _) => {
            if scope == Scope::Session {
                g.warn(&format!("breaker `{key}` has scope = \"session\" but no session id was given; using the global breaker"));
            }
            Ok(Id {
                key: key.to_string(),
                policy_key: key.to_string(),
                session: None,
            })
        }
    }
}

/// Every breaker with a stored state.
pub fn stored_ids(g: &Ground) -> Result<Vec<Id>, Failure> {
    store::stored_ids(g)
}

/// Every breaker as stored now (read, never written); a breaker that cannot be read is a
/// warning, and the caller goes on without it (`report`).
pub fn peek_all_or_warn(g: &Ground, policy: &Policy) -> Vec<Status> {
    peek_all(g, policy).unwrap_or_else(|f| {
        g.warn(&format!("the breakers were not read: {f}"));
        Vec::new()
    })
}

/// Records a logged failure on breaker `key` (an interrupt as neutral): `{key, state,
/// effect}` for `record-error`'s answer; a failure is a warning.
pub fn record_logged(
    g: &Ground,
    policy: &Policy,
    key: &str,
    rec: &crate::core::error_record::ErrorRecord,
) -> Option<serde_json::Value> {
    let interrupt = rec.kind() == Some(crate::core::vocab::Kind::Interrupted.as_str());
    let report = crate::core::breaker::CallReport {
        outcome: Some(if interrupt {
            crate::core::breaker::Outcome::Ignored
        } else {
            crate::core::breaker::Outcome::Failure
        }),
        kind: rec.kind().and_then(|k| k.parse().ok()),
        detail: rec
            .error
            .get("detail")
            .and_then(serde_json::Value::as_str)
            .map(String::from),
        duration_ms: rec.duration_ms,
        ticket: None,
    };
    match record_in(g, policy, key, rec.session_id.as_deref(), &report) {
        Ok(r) => {
            let mut v = serde_json::json!({"key": r.key, "state": r.state, "effect": r.effect});
            if r.transition
                .as_ref()
                .is_some_and(|t| t.to == crate::core::breaker::State::Open)
            {
                v["opened_now"] = serde_json::json!(true);
                v["opens_unrecovered"] = serde_json::json!(r.opens_unrecovered);
            }
            Some(v)
        }
        Err(f) => {
            g.warn(&format!(
                "the failure was not recorded on breaker `{key}`: {f}"
            ));
            None
        }
    }
}
