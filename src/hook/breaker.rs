//! `triage breaker --hook`: the breaker's part of the Claude Code hook protocol. PreToolUse
//! asks the breaker (the key is the subagent type for `Agent`/`Task`, else the tool name) and
//! denies with seed 000's Template 4 when the call may not go ahead; PostToolUse and
//! PostToolUseFailure record the outcome for the same key.

use crate::core::breaker::CallReport;
use crate::core::breaker::Outcome;
use crate::core::hook_payload::Payload;
use crate::exit::Failure;
use crate::hook::codec::Response;
use crate::store::breakers::calls::{check_in, record_in, template4_reason};

/// The breaker key a hook payload is about.
pub fn hook_key(p: &Payload) -> Option<&str> {
    if p.is_subagent_tool() {
        p.subagent_type().or(p.tool_name())
    } else {
        p.tool_name()
    }
}

/// The hook response for one payload (empty when there is nothing to say).
pub fn answer(cx: &crate::context::Context, p: &Payload) -> Result<Response, Failure> {
    let Some(key) = hook_key(p) else {
        return Ok(Response::default());
    };
    let session = p.session_id();
    let g = cx.ground();
    match p.event() {
        Some("PreToolUse") => {
            let r = check_in(&g, cx.policy()?, key, session)?;
            if r.allowed {
                Ok(Response::default())
            } else {
                Ok(Response::deny(template4_reason(&r)))
            }
        }
        Some("PostToolUse") => {
            let report = CallReport {
                outcome: Some(Outcome::Success),
                duration_ms: p.duration_ms(),
                ..CallReport::default()
            };
            record_in(&g, cx.policy()?, key, session, &report)?;
            // A success: the agent's failures in this session (its workflow) recorded before
            // this call started are resolved (not those of siblings that ran beside it).
            let started = crate::store::error_log::started_at(&g, p.duration_ms());
            crate::store::error_log::recovered(
                &g,
                session.unwrap_or(""),
                key,
                "breaker --hook PostToolUse",
                Some(started),
            );
            Ok(Response::default())
        }
        Some("PostToolUseFailure") => {
            // An interrupt is the user's doing, not the agent's failure: neutral.
            // So is an agent type that does not exist: the name was wrong, not the agent.
            let undefined =
                p.is_subagent_tool() && p.error().and_then(super::agents::unknown_type).is_some();
            let outcome = if p.is_interrupt() || undefined {
                Outcome::Ignored
            } else {
                Outcome::Failure
            };
            let report = CallReport {
                outcome: Some(outcome),
                detail: p.error().map(str::to_string),
                duration_ms: p.duration_ms(),
                ..CallReport::default()
            };
            record_in(&g, cx.policy()?, key, session, &report)?;
            Ok(Response::default())
        }
        _ => Ok(Response::default()),
    }
}
