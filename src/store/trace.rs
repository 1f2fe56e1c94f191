//! The decision trace: seed 000's DEBUG level ("verbose mode only"). With `-v` or
//! `TRIAGE_LOG=debug`, each decision writes what it was given and the rule that made it as one
//! line of level `debug` in `logs/triage.log`, in that log's own format (`at`, `subcommand`,
//! `level`, `pid`, `message`), through the same writer: a link or a FIFO in the log's place is
//! refused, a busy log is not waited for.
//!
//! Three decisions are traced: classify (the rule, its family and pattern, the kind, tier and
//! retryable, and what the policy overrode), the retry decision (attempt n of m, and why a
//! retry is made or not) and the breaker (its state before and after, failures against the
//! threshold, why it opened, closed or stayed).
//!
//! Off by default, and then free: every function asks [`Ground::debug`] (one virtual call that
//! reads a flag) before it formats anything. Bounded: once `triage.log` holds
//! [`MAX_LOG_BYTES`], the trace stops adding to it (the warnings go on).

use crate::core::breaker::State;
use crate::core::classify::{family_of, ErrorObject};
use crate::core::policy::Policy;
use crate::store::files;
use crate::store::ground::Ground;
use serde::Serialize;

/// The size of `triage.log` past which no more trace lines are written.
pub const MAX_LOG_BYTES: u64 = 16 * 1024 * 1024;

/// One trace line, made by `what` only when the trace is on and the log has room.
pub fn note(g: &Ground, what: impl FnOnce() -> String) {
    if !g.debug() {
        return;
    }
    let log = g.root.join("logs").join("triage.log");
    if matches!(files::file_len(&log), Ok(Some(n)) if n >= MAX_LOG_BYTES) {
        return;
    }
    g.trace("debug", &what());
}

/// The word a value serializes to (`rate_limited`, `half_open`).
fn word(v: &impl Serialize) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

/// The classifier's verdict `e` under `policy` on a failure of `who` (an agent, a tool, a
/// command; empty when not known): the rule, the kind and what the policy overrode.
pub fn classified(g: &Ground, policy: &Policy, who: &str, e: &ErrorObject) {
    note(g, || classification(policy, who, e));
}

/// The retry decision `e` carries, for the failure of attempt `attempt` (1 when not known).
pub fn advised(g: &Ground, policy: &Policy, who: &str, attempt: u32, e: &ErrorObject) {
    note(g, || {
        let verdict = retry_verdict(policy, e);
        let (n, m) = match &e.retry {
            Some(r) => (r.attempt.saturating_sub(1).max(1), Some(r.max_attempts)),
            None => (attempt.max(1), None),
        };
        retry_line(who, n, m, &verdict)
    });
}

/// The classification of `e` in words.
fn classification(policy: &Policy, who: &str, e: &ErrorObject) -> String {
    let tool = e.context.get("tool").and_then(serde_json::Value::as_str);
    let rule = &e.matched_rule;
    let how = if let Some(name) = rule.strip_prefix("config:") {
        let r = policy.classify.rules.iter().find(|r| r.name == name);
        let mut what = vec![format!("the policy's [[classify.rules]] `{name}`")];
        if let Some(p) = r.and_then(|r| r.pattern.as_ref()) {
            what.push(format!("match `{p}`"));
        }
        if let Some(j) = r.and_then(|r| r.jq.as_ref()) {
            what.push(format!("jq `{j}`"));
        }
        what.join(", ")
    } else if rule.starts_with("builtin:") {
        "a built-in rule".to_string()
    } else if rule.starts_with("model:") {
        // No rule knew the text: the learned fallback's confidence and what weighed most.
        let top: Vec<String> = e
            .model_features
            .iter()
            .map(|(f, w)| format!("{f} +{w:.2}"))
            .collect();
        format!(
            "no rule knew the text; the learned model, confidence {:.3}, top features: {}",
            e.confidence.unwrap_or_default(),
            top.join(", ")
        )
    } else if rule == "input" {
        "the kind the input gave".to_string()
    } else {
        "no rule".to_string()
    };
    let mut overrides = Vec::new();
    if let Some(name) = rule.strip_prefix("config:") {
        overrides.push(format!("classify rule `{name}`"));
    }
    if let Some(k) = policy.retry.kinds.get(&e.kind) {
        if let Some(r) = k.retryable {
            overrides.push(format!("[retry.kinds.{}] retryable = {r}", e.kind));
        }
        if let Some(m) = k.max_attempts {
            overrides.push(format!("[retry.kinds.{}] max_attempts = {m}", e.kind));
        }
        if let Some(d) = k.delay {
            overrides.push(format!("[retry.kinds.{}] delay = {d}", e.kind));
        }
    }
    let overridden = if overrides.is_empty() {
        "no policy override".to_string()
    } else {
        format!("policy override: {}", overrides.join(", "))
    };
    format!(
        "decision classify{}: rule {rule} ({how}) matched; kind {}, family {}, class {}; tier {} ({}), severity {}, retryable {}; {overridden}",
        if who.is_empty() { String::new() } else { format!(" of `{who}`") },
        e.kind,
        word(&family_of(e.kind, tool)),
        word(&e.class),
        e.tier.number(),
        e.tier.name(),
        word(&e.severity),
        e.retryable,
    )
}

/// What the classifier advised and why, in words.
fn retry_verdict(policy: &Policy, e: &ErrorObject) -> String {
    if let Some(r) = &e.retry {
        return format!(
            "retry in {}s as attempt {} of {} (the policy's schedule)",
            r.delay_s, r.attempt, r.max_attempts
        );
    }
    let reason = e
        .context
        .get("action_reason")
        .and_then(serde_json::Value::as_str)
        .map(String::from);
    let why = match reason {
        Some(r) => r,
        None if !e.retryable => {
            let by_policy = policy
                .retry
                .kinds
                .get(&e.kind)
                .and_then(|k| k.retryable)
                .is_some();
            format!(
                "kind {} is not retryable{}",
                e.kind,
                if by_policy {
                    " (the policy says so)"
                } else {
                    ""
                }
            )
        }
        None => "the kind's usual action".to_string(),
    };
    format!("no retry, action {}: {why}", word(&e.action))
}

fn retry_line(who: &str, n: u32, m: Option<u32>, verdict: &str) -> String {
    let of = m.map(|m| format!(" of {m}")).unwrap_or_default();
    let who = if who.is_empty() {
        String::new()
    } else {
        format!(" of `{who}`")
    };
    format!("decision retry{who}: attempt {n}{of} failed; {verdict}")
}

/// The retry decision of a command that retries itself (`run`, a phase's item): attempt `n` of
/// at most `m` failed, and `verdict` says what follows (`retry in 30s`, `not retried: why`).
pub fn retry(g: &Ground, who: &str, n: u32, m: Option<u32>, verdict: impl FnOnce() -> String) {
    note(g, || retry_line(who, n, m, &verdict()));
}

/// What a breaker did with one reported outcome.
pub struct Recorded<'a> {
    /// The breaker's key.
    pub key: &'a str,
    /// `success`, `failure` or `ignored`, as reported.
    pub outcome: &'a str,
    /// What was done with it (`counted`, `stale`, …).
    pub effect: &'a str,
    /// The state before and after.
    pub before: State,
    /// The state after.
    pub after: State,
    /// Consecutive failures before and after.
    pub failures: (u32, u32),
    /// The threshold that opens it (0: off).
    pub threshold: u32,
    /// The reason of the transition, if one happened.
    pub reason: Option<&'a str>,
}

/// A breaker's record of one outcome: before and after, failures against the threshold, and
/// why it opened, closed or stayed.
pub fn breaker_recorded(g: &Ground, r: &Recorded) {
    note(g, || breaker_line(r));
}

fn breaker_line(r: &Recorded) -> String {
    let (was, now) = r.failures;
    let counts = if r.threshold == 0 {
        format!("{now} consecutive failures (no failure threshold)")
    } else {
        format!("{now} of {} consecutive failures (was {was})", r.threshold)
    };
    let why = match r.reason {
        Some(reason) => format!("{} -> {}: {reason}", word(&r.before), word(&r.after)),
        None => {
            let stays = match (r.after, r.outcome) {
                (State::Closed, "failure") if r.threshold > now => {
                    format!("below the threshold of {}", r.threshold)
                }
                (State::Closed, _) => "no failure to count".to_string(),
                (State::Open | State::ForcedOpen, _) => "already open".to_string(),
                (State::HalfOpen, _) => "the probe's result is still awaited".to_string(),
                _ => "nothing to change".to_string(),
            };
            format!("stays {}: {stays}", word(&r.after))
        }
    };
    format!(
        "decision breaker `{}`: {} reported, effect {}; {counts}; {why}",
        r.key, r.outcome, r.effect
    )
}

/// A breaker's answer to a call that asks to go ahead.
pub fn breaker_checked(
    g: &Ground,
    key: &str,
    state: Option<State>,
    allowed: bool,
    reason: &str,
    retry_after_s: Option<u64>,
) {
    note(g, || {
        let state = state.map_or_else(|| "unreadable".to_string(), |s| word(&s));
        let after = retry_after_s
            .map(|s| format!(", ask again in {s}s"))
            .unwrap_or_default();
        format!(
            "decision breaker `{key}`: check in state {state}: {} ({reason}){after}",
            if allowed { "allowed" } else { "refused" }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(before: State, after: State, failures: (u32, u32), reason: Option<&str>) -> String {
        breaker_line(&Recorded {
            key: "k",
            outcome: "failure",
            effect: "counted",
            before,
            after,
            failures,
            threshold: 3,
            reason,
        })
    }

    #[test]
    fn a_breaker_line_names_the_threshold_and_why() {
        let opened = rec(
            State::Closed,
            State::Open,
            (2, 3),
            Some("consecutive_failures"),
        );
        assert!(
            opened.contains("3 of 3 consecutive failures (was 2)"),
            "{opened}"
        );
        assert!(
            opened.contains("closed -> open: consecutive_failures"),
            "{opened}"
        );
        let stayed = rec(State::Closed, State::Closed, (0, 1), None);
        assert!(
            stayed.contains("stays closed: below the threshold of 3"),
            "{stayed}"
        );
    }
}
