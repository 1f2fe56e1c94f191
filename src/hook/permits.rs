//! Subagent launches under a bulkhead: when the policy sets `[permits.agents]`, PreToolUse of
//! the subagent tool takes a permit of key `agents` (its lease id is the call's
//! `tool_use_id`), and a launch finding none free is denied with the time the first frees. A
//! foreground call gives its permit back at PostToolUse (or PostToolUseFailure).
//!
//! A background launch's PostToolUse comes at once (`async_launched`), while the subagent
//! runs on: its permit is kept until the subagent stops. That PostToolUse carries the
//! subagent's `agentId`, which its SubagentStop carries as `agent_id` (SubagentStop has no
//! `tool_use_id`), so the lease id is kept under the session by agent id
//! (`sessions/<session>/permit-<agent id>.json`); the subagent's own hook events (which carry
//! its `agent_id`) renew the lease once half of it has passed, and the SubagentStop that lets
//! it stop (or its StopFailure: the API failed it) releases it. When the stop comes before
//! the launch's PostToolUse, it leaves a stop mark (`permit-<agent id>.stopped`) and that
//! PostToolUse gives the permit back instead of keeping it. A subagent killed without a
//! SubagentStop, or a launch whose response has no `agentId`, keeps its permit until the
//! lease runs out.
//!
//! The hook never fails its caller: a permit that cannot be taken for a reason other than
//! "none free" (a store error) lets the launch go, with a warning.

use super::codec::Response;
use crate::context::Context;
use crate::core::admission::{valid_lease_id, Millis, PermitLimits, SLACK_MS};
use crate::core::hook_payload::Payload;
use crate::exit::Failure;
use crate::store::{files, permits};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    // A fleet's Redis that does not answer grants nothing (this host cannot see the others').
    if let Some(why) = &out.unavailable {
        return Ok(Some(Response::deny(format!(
            "No permit to launch a subagent could be taken (policy [permits.{KEY}]): {why}. Launch this subagent again in a little while."
        ))));
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

/// PostToolUse / PostToolUseFailure of a subagent call: a foreground call's permit back; a
/// background launch's kept for its SubagentStop, by the `agentId` of its response.
pub(super) fn release(cx: &Context, p: &Payload) {
    if !p.is_subagent_tool() {
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
    if p.is_async_launched() {
        if let Some(agent_id) = p.response_agent_id() {
            if !took_stopped(cx, p, agent_id) {
                keep_for_agent(cx, p, limits, id, agent_id);
                // A stop that came while it was being kept: given back after all.
                if !took_stopped(cx, p, agent_id) {
                    return;
                }
                if let Some(path) = kept_path(cx, p, agent_id) {
                    let _ = files::remove(&path);
                }
            }
            // It stopped before its launch was reported: nothing to keep it for.
        } else {
            return;
        }
    } else if let Some(agent_id) = p.response_agent_id() {
        // A foreground subagent stops before its PostToolUse: its mark is not needed.
        took_stopped(cx, p, agent_id);
    }
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

/// A background subagent's permit, kept by its agent id until it stops.
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    /// The lease id (the launch's `tool_use_id`).
    lease: String,
    /// When the lease runs out unless renewed, in Unix milliseconds.
    expires_ms: Millis,
}

/// The longest agent id kept by (a planted or broken payload names no file beyond this).
const MAX_AGENT_ID: usize = 128;

fn kept_path(cx: &Context, p: &Payload, agent_id: &str) -> Option<PathBuf> {
    if agent_id.is_empty() || agent_id.len() > MAX_AGENT_ID {
        return None;
    }
    Some(
        cx.state_root()
            .join("sessions")
            .join(files::escape_key(p.session_id().unwrap_or("no-session")))
            .join(format!("permit-{}.json", files::escape_key(agent_id))),
    )
}

/// The mark a subagent's stop leaves when no permit was kept for it yet: its background
/// launch's PostToolUse, which comes after, then gives the permit back instead of keeping it.
fn stopped_path(cx: &Context, p: &Payload, agent_id: &str) -> Option<PathBuf> {
    kept_path(cx, p, agent_id).map(|k| k.with_extension("stopped"))
}

/// When the stop mark was written (the session's stale files are pruned by it).
#[derive(Debug, Serialize, Deserialize)]
struct Stopped {
    at_ms: Millis,
}

/// Takes the stop mark of `agent_id`: true when the subagent already stopped.
fn took_stopped(cx: &Context, p: &Payload, agent_id: &str) -> bool {
    let Some(path) = stopped_path(cx, p, agent_id) else {
        return false;
    };
    match files::read_optional(&path) {
        Ok(None) => false,
        found => {
            if let Err(e) = files::remove(&path) {
                cx.warn(&format!(
                    "the stop mark {} was not removed: {e}",
                    path.display()
                ));
            }
            found.is_ok()
        }
    }
}

fn write_kept(cx: &Context, path: &std::path::Path, kept: &Kept) {
    let written = serde_json::to_vec(kept)
        .map_err(|e| e.to_string())
        .and_then(|bytes| {
            let dir = path.parent().unwrap_or(path);
            files::ensure_dir(dir)
                .and_then(|()| files::write_cache(path, &bytes))
                .map_err(|e| e.to_string())
        });
    if let Err(e) = written {
        cx.warn(&format!(
            "the background subagent's permit of `{KEY}` was not kept for its end ({e}); it frees when its lease runs out"
        ));
    }
}

/// What was kept for `agent_id`, when it can be read as a lease of ours; `None` otherwise.
fn read_kept(path: &std::path::Path) -> Option<Kept> {
    let bytes = files::read_optional(path).ok()??;
    serde_json::from_slice::<Kept>(&bytes)
        .ok()
        .filter(|k| valid_lease_id(&k.lease))
}

/// PostToolUse of a background launch: the lease renewed from now (a slow launch) and kept
/// under the subagent's id; a lease no longer held is not kept.
fn keep_for_agent(cx: &Context, p: &Payload, limits: PermitLimits, id: &str, agent_id: &str) {
    let Some(path) = kept_path(cx, p, agent_id) else {
        return;
    };
    match permits::call(&cx.ground(), KEY, limits, &permits::Op::Renew(id.to_string())) {
        Ok(out) => {
            if let Some(expires_ms) = out.expires_ms {
                write_kept(
                    cx,
                    &path,
                    &Kept {
                        lease: id.to_string(),
                        expires_ms,
                    },
                );
            }
        }
        Err(f) => cx.warn(&format!(
            "the background subagent's permit of `{KEY}` was not renewed ({f}); it frees when its lease runs out"
        )),
    }
}

/// The permit kept for the background subagent whose hook event this is: the policy's
/// limits, the file that keeps it and what it holds; `None` when there is none.
fn kept_for(cx: &Context, p: &Payload) -> Option<(PermitLimits, PathBuf, Kept)> {
    // The payload first: most hook events carry no agent id, and need no policy for this.
    let agent_id = p.agent_id()?;
    let limits = cx.policy().ok()?.permits_for(KEY)?;
    let path = kept_path(cx, p, agent_id)?;
    let kept = read_kept(&path)?;
    Some((limits, path, kept))
}

/// Any hook event of a running background subagent (it carries the subagent's `agent_id`):
/// its kept lease renewed once half of it has passed, so a subagent that runs longer than one
/// lease keeps its permit while it works. A lease that ran out is forgotten.
pub(super) fn renew_for_agent(cx: &Context, p: &Payload) {
    if matches!(p.event(), Some("SubagentStop" | "StopFailure")) {
        return;
    }
    let Some((limits, path, kept)) = kept_for(cx, p) else {
        return;
    };
    let now = cx.now.timestamp_millis();
    let lease = i64::try_from(limits.lease_ms).unwrap_or(i64::MAX);
    // An expiry further than one lease ahead was never granted (a planted or stale file):
    // renewed now rather than trusted to postpone the renewal.
    let planted = kept.expires_ms.saturating_sub(now) > lease.saturating_add(SLACK_MS);
    if !planted && kept.expires_ms.saturating_sub(now) > lease / 2 {
        return;
    }
    match permits::call(
        &cx.ground(),
        KEY,
        limits,
        &permits::Op::Renew(kept.lease.clone()),
    ) {
        Ok(out) => match out.expires_ms {
            Some(expires_ms) => write_kept(
                cx,
                &path,
                &Kept {
                    lease: kept.lease,
                    expires_ms,
                },
            ),
            // Not decided (a fleet's Redis that did not answer): kept for the next event.
            None if out.unavailable.is_some() => cx.warn(&format!(
                "the background subagent's permit of `{KEY}` was not renewed: {}",
                out.unavailable.as_deref().unwrap_or_default()
            )),
            None => {
                let _ = files::remove(&path);
            }
        },
        Err(f) => cx.warn(&format!(
            "the background subagent's permit of `{KEY}` was not renewed ({f})"
        )),
    }
}

/// SubagentStop that lets the subagent stop, or its StopFailure: the permit kept for it (a
/// background launch) is given back. None kept yet (its launch's PostToolUse has not come,
/// or it ran in the foreground): a stop mark is left, so that a background launch's
/// PostToolUse gives the permit back rather than keep it for a full lease.
pub(super) fn agent_stopped(cx: &Context, p: &Payload) {
    let Some((limits, path, kept)) = kept_for(cx, p).or_else(|| {
        mark_stopped(cx, p);
        // A launch kept it while the mark was being written: given back after all.
        kept_for(cx, p)
    }) else {
        return;
    };
    match permits::call(&cx.ground(), KEY, limits, &permits::Op::Release(kept.lease)) {
        Ok(_) => {
            if let Err(e) = files::remove(&path) {
                cx.warn(&format!("the kept permit {} was not removed: {e}", path.display()));
            }
        }
        Err(f) => cx.warn(&format!(
            "the background subagent's permit of `{KEY}` was not given back ({f}); it frees when its lease runs out"
        )),
    }
}

/// Leaves the stop mark of the subagent whose hook event this is, when subagent launches take
/// permits.
fn mark_stopped(cx: &Context, p: &Payload) {
    let Some(agent_id) = p.agent_id() else {
        return;
    };
    if cx
        .policy()
        .ok()
        .and_then(|policy| policy.permits_for(KEY))
        .is_none()
    {
        return;
    }
    let Some(path) = stopped_path(cx, p, agent_id) else {
        return;
    };
    let written = serde_json::to_vec(&Stopped {
        at_ms: cx.now.timestamp_millis(),
    })
    .map_err(|e| e.to_string())
    .and_then(|bytes| {
        let dir = path.parent().unwrap_or(&path);
        files::ensure_dir(dir)
            .and_then(|()| files::write_cache(&path, &bytes))
            .map_err(|e| e.to_string())
    });
    if let Err(e) = written {
        cx.warn(&format!(
            "the subagent's stop was not kept for its launch ({e}); a background launch reported after it keeps its permit until the lease runs out"
        ));
    }
}
