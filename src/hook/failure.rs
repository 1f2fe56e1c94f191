//! `PostToolUseFailure`: classifies, records the error (once: a subagent whose SubagentStop
//! already recorded its failure is not recorded again), records a breaker failure, and tells
//! the model the advised next step.

use super::codec::Response;
use super::{announce, guarded_key, store_record};
use crate::context::Context;
use crate::core::breaker::{CallReport, Outcome};
use crate::core::classify;
use crate::core::error_record;
use crate::core::hook_payload::Payload;
use crate::exit::Failure;
use crate::store::breakers::calls as breaker;
use crate::store::sessions;
use serde_json::Value;

pub(super) fn post_tool_use_failure(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    if let Some(r) = super::agents::undefined_agent(cx, p)? {
        return Ok(r);
    }
    let policy = cx.policy()?;
    let (mut rec, object) = error_record::classified_at(&p.0, policy, None, Some(cx.now));
    object.warnings.iter().for_each(|w| cx.warn(w));
    let guarded = guarded_key(cx, p)?;
    if guarded.is_none() && !policy.thresholds.count_unguarded_tools {
        // Kept in the log and advised on, but a failing `grep` is no sign of an unstable
        // workflow: it does not count toward the thresholds (`count_unguarded_tools`).
        rec.error
            .insert("counts_toward_thresholds".into(), Value::Bool(false));
    }
    // A subagent whose SubagentStop already recorded its failure (let go after its
    // rejections) ends here too: one failure, one record.
    let g = cx.ground();
    let ended = match guarded {
        Some(key) if p.is_subagent_tool() => sessions::take_end_for_key(&g, p.session_id(), key),
        _ => None,
    };
    // The breaker first: the gate of the next call must not depend on the error log.
    if let Some(key) = guarded {
        let start = p
            .tool_use_id()
            .and_then(|id| sessions::take_start(&g, p.session_id(), id));
        // An interrupt is the user's doing, not the agent's failure: neutral for the breaker.
        let outcome = if p.is_interrupt() {
            Outcome::Ignored
        } else {
            Outcome::Failure
        };
        let report = CallReport {
            outcome: Some(outcome),
            ticket: start.and_then(|s| s.ticket),
            kind: Some(object.kind),
            detail: p.error().map(str::to_string),
            duration_ms: p.duration_ms(),
        };
        if let Err(f) = breaker::record_in(&g, policy, key, p.session_id(), &report) {
            cx.warn(&format!("the breaker did not hear of this failure: {f}"));
        }
        super::upstream::hear_call(cx, p, outcome, report.kind, p.error());
    }
    let warnings = if ended.as_ref().is_some_and(|e| e.last.recorded) {
        Vec::new()
    } else {
        store_record(cx, p, rec).unwrap_or_else(|f| {
            cx.warn(&format!("the failure was not recorded: {f}"));
            Vec::new()
        })
    };
    let advice = match ended.as_ref().filter(|e| e.last.outcome == Outcome::Failure) {
        // What its SubagentStop found says more than the client's "No assistant messages".
        Some(e) => format!(
            "The {} subagent's output is unusable:\n{}\nDo not rely on it: rerun the subagent with these fixed, or proceed without it.",
            e.key,
            e.last.detail.as_deref().unwrap_or("its output failed its checks")
        ),
        None => classify::hook_context(&object),
    };
    let mut r = Response::context("PostToolUseFailure", advice);
    announce(cx, p, &warnings, &mut r);
    Ok(r)
}
