//! Subagent launches under a bulkhead: when the policy sets `[permits.agents]`, PreToolUse of
//! the subagent tool takes a permit of key `agents` (its lease id is the call's
//! `tool_use_id`), and a launch finding none free is denied with the time the first frees. A
//! foreground call gives its permit back at PostToolUse (or PostToolUseFailure); a background
//! launch's permit runs out with its lease (`lease`, set it to a subagent's usual length), as
//! its end is seen only at SubagentStop, which does not carry the call's id.
//!
//! The hook never fails its caller: a permit that cannot be taken for a reason other than
//! "none free" (a store error) lets the launch go, with a warning.

use super::codec::Response;
use crate::context::Context;
use crate::core::admission::valid_lease_id;
use crate::core::hook_payload::Payload;
use crate::exit::Failure;
use crate::store::permits;

/// The permits' key of subagent launches.
pub const KEY: &str = "agents";

/// PreToolUse of the subagent tool: the denial when no permit is free.
pub(super) fn gate(cx: &Context, p: &Payload) -> Result<Option<Response>, Failure> {
    if !p.is_subagent_tool() {
        return Ok(None);
    }
    let Some(limits) = cx.policy()?.permits_for(KEY) else {
        return Ok(None);
    };
    let id = p
        .tool_use_id()
        .filter(|id| valid_lease_id(id))
        .map_or_else(permits::new_lease_id, str::to_string);
    let op = permits::Op::Acquire {
        id,
        holder: format!(
            "{} (session {})",
            p.subagent_type().unwrap_or("subagent"),
            p.session_id().unwrap_or("-")
        ),
    };
    let out = match permits::call(&cx.ground(), KEY, limits, &op) {
        Ok(out) => out,
        Err(f) => {
            cx.warn(&format!(
                "the subagent launch goes ahead without a permit of `{KEY}`: {f}"
            ));
            return Ok(None);
        }
    };
    if out.done {
        return Ok(None);
    }
    let wait = out
        .next_free_ms()
        .map(|t| ((t - out.now_ms).max(0) + 999) / 1000);
    Ok(Some(Response::deny(format!(
        "{} of {} subagents this project allows at once are running (policy [permits.{KEY}] max = {}){}. Launch this subagent after one of them has finished; do not launch others in the meantime.",
        out.held,
        limits.max,
        limits.max,
        match wait {
            Some(s) => format!("; the first permit frees within {s}s"),
            None => String::new(),
        }
    ))))
}

/// PostToolUse / PostToolUseFailure of a foreground subagent call: its permit back.
pub(super) fn release(cx: &Context, p: &Payload) {
    if !p.is_subagent_tool() || p.is_async_launched() {
        return;
    }
    let Ok(policy) = cx.policy() else {
        return;
    };
    let Some(limits) = policy.permits_for(KEY) else {
        return;
    };
    let Some(id) = p.tool_use_id().filter(|id| valid_lease_id(id)) else {
        return;
    };
    if let Err(f) = permits::call(
        &cx.ground(),
        KEY,
        limits,
        &permits::Op::Release(id.to_string()),
    ) {
        cx.warn(&format!(
            "the subagent's permit of `{KEY}` was not given back ({f}); it frees when its lease runs out"
        ));
    }
}
