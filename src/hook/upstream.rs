//! One breaker for the API itself (`[breaker] upstream`, default `api`): a 429 or 529 storm is
//! the account's limit or the service's load, not one agent type's health, so every API
//! `rate_limited` or `overloaded` failure of a subagent (whatever its type) and every such
//! StopFailure counts on it too, beside the agent type's own breaker. While it is open, no
//! subagent is launched (PreToolUse of `Agent`/`Task`); the open period lasts at least until
//! the `retry-after` or the usage-limit reset the error gave. A subagent call that succeeds
//! counts as its success (and, half-open, as its probe's).

use super::codec::Response;
use crate::context::Context;
use crate::core::breaker::{CallReport, Outcome, State};
use crate::core::classify::{self, fmt_wait, Overrides};
use crate::core::hook_payload::Payload;
use crate::core::vocab::Kind;
use crate::exit::Failure;
use crate::store::breakers::{self as store, calls as breaker};
use serde_json::Value;

/// The failures that speak of the API rather than of the agent.
fn upstream_kind(kind: Option<Kind>) -> bool {
    matches!(kind, Some(Kind::RateLimited | Kind::Overloaded))
}

/// What the API's breaker said of a subagent launch.
pub(super) enum Gate {
    /// It may go: the API breaker's key and the probe ticket it gave, if any (half-open).
    Allowed(Option<(String, String)>),
    /// Denied while the API's breaker is open.
    Denied(Response),
}

/// PreToolUse of the subagent tool, once the agent type's own breaker let it through
/// (`ticket`, on breaker `own`): denied while the API's breaker is open, and a probe permit
/// the type's breaker gave is handed back.
pub(super) fn gate(
    cx: &Context,
    p: &Payload,
    own: &str,
    ticket: Option<&str>,
) -> Result<Gate, Failure> {
    let policy = cx.policy()?;
    let Some(key) = policy
        .breaker
        .upstream_key()
        .filter(|_| p.is_subagent_tool())
    else {
        return Ok(Gate::Allowed(None));
    };
    let g = cx.ground();
    let r = breaker::check_in(&g, policy, key, p.session_id())?;
    if r.allowed {
        return Ok(Gate::Allowed(r.ticket.map(|t| (key.to_string(), t))));
    }
    hand_back(cx, p, own, ticket);
    let wait = r
        .retry_after_s
        .map(|s| format!(" for {} more", fmt_wait(s as f64)))
        .unwrap_or_default();
    let last = r
        .last_error
        .as_deref()
        .map(|e| format!("; last: {}", crate::core::text::quoted_max(e, 200)))
        .unwrap_or_default();
    Ok(Gate::Denied(Response::deny(format!(
        "triage: the API is refusing requests (breaker {} is open after {} API failures in a row{last}). No subagent can be launched{wait}: carry on without subagents until then.",
        crate::core::text::name(key),
        r.failures
    ))))
}

/// A call that took breaker `key`'s half-open probe permit (`ticket`) but will not run: the
/// permit goes back, counting nothing, so the next call can be the probe. A ticket of the
/// run that opened the breaker (`GEN-0`) holds no permit.
pub(super) fn hand_back(cx: &Context, p: &Payload, key: &str, ticket: Option<&str>) {
    let Some(t) = ticket.filter(|t| !t.ends_with("-0")) else {
        return;
    };
    let Ok(policy) = cx.policy() else {
        return;
    };
    let back = CallReport {
        outcome: Some(Outcome::Ignored),
        ticket: Some(t.to_string()),
        ..CallReport::default()
    };
    if let Err(f) = breaker::record_in(&cx.ground(), policy, key, p.session_id(), &back) {
        cx.warn(&format!(
            "a probe permit of `{key}` was not handed back: {f}"
        ));
    }
}

/// A subagent call ended: an API failure counts on the API's breaker, a success too.
pub(super) fn hear_call(
    cx: &Context,
    p: &Payload,
    outcome: Outcome,
    kind: Option<Kind>,
    detail: Option<&str>,
) {
    if !p.is_subagent_tool() && !matches!(p.event(), Some("SubagentStop" | "StopFailure")) {
        return;
    }
    match outcome {
        Outcome::Success => hear(cx, p, Outcome::Success, None, None),
        Outcome::Failure if upstream_kind(kind) => hear(cx, p, Outcome::Failure, kind, detail),
        _ => {}
    }
}

/// StopFailure: the turn ended on an API error; a rate limit or an overload counts. Only the
/// main agent's: a subagent's (with its `agent_id`) ends its Agent call, whose failure counts
/// once when the call completes (see `subagent_failure`).
pub(super) fn hear_stop_failure(cx: &Context, p: &Payload) {
    if p.agent_id().is_some() {
        return;
    }
    let Ok(policy) = cx.policy() else {
        return;
    };
    let o = Overrides {
        now: Some(cx.now),
        ..Overrides::default()
    };
    let e = classify::classify(&p.0, &o, policy, 0);
    if upstream_kind(Some(e.kind)) {
        let text = p.last_assistant_message().or(p.error());
        hear(cx, p, Outcome::Failure, Some(e.kind), text);
    }
}

fn hear(cx: &Context, p: &Payload, outcome: Outcome, kind: Option<Kind>, text: Option<&str>) {
    let Ok(policy) = cx.policy() else {
        return;
    };
    let Some(key) = policy.breaker.upstream_key() else {
        return;
    };
    let g = cx.ground();
    let report = CallReport {
        outcome: Some(outcome),
        kind,
        detail: text.map(|t| snippet(t, 300)),
        ..CallReport::default()
    };
    if let Err(f) = breaker::record_in(&g, policy, key, p.session_id(), &report) {
        cx.warn(&format!("the API's breaker did not hear of this call: {f}"));
        return;
    }
    let Some(wait_s) = text.and_then(|t| wait_of(cx, t)) else {
        return;
    };
    // Open: it stays so at least until the API said it would answer again.
    let wait_ms =
        (wait_s * 1000.0).min(crate::core::breaker::sane::MAX_NAMED_WAIT_MS as f64) as u64;
    let extend = breaker::resolve(&g, policy, key, p.session_id(), true).and_then(|id| {
        store::update(&g, policy, &id, |b, _, now| {
            if b.state == State::Open {
                let opened = b.opened_at.unwrap_or(now);
                let passed = u64::try_from(now.saturating_sub(opened)).unwrap_or(0);
                b.open_duration_ms = b.open_duration_ms.max(passed.saturating_add(wait_ms));
            }
            Ok(((), Vec::new()))
        })
    });
    if let Err(f) = extend {
        cx.warn(&format!("the API's breaker keeps its own cooldown: {f}"));
    }
}

/// The wait an API error names: its `retry-after`, or the time until a usage limit resets.
fn wait_of(cx: &Context, text: &str) -> Option<f64> {
    let o = Overrides {
        raw: true,
        now: Some(cx.now),
        ..Overrides::default()
    };
    let e = classify::classify(&Value::String(text.to_string()), &o, cx.policy().ok()?, 0);
    e.context
        .get("retry_after_s")
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s > 0.0)
}

/// At most `max` characters of `s` on one line ([`crate::core::text::cap`]).
fn snippet(s: &str, max: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::core::text::cap(&one, max)
}
