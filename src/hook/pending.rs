//! Pending words: what the model should know but could not be told when it arose (a
//! background subagent's rejection, seen only at its SubagentStop) is queued in the session
//! ([`crate::store::pending`]) and given once, with the next answer that reaches the model:
//! UserPromptSubmit's or PostToolUse's `additionalContext`, or Stop's block reason (the turn
//! would otherwise end on a result the model never heard was bad).

use super::codec::Response;
use crate::context::Context;
use crate::core::breaker::Outcome;
use crate::core::hook_payload::Payload;
use crate::core::output_check::Final;
use crate::store::pending;

/// Queues the end of a background subagent call when the model must hear of it.
pub(super) fn queue_end(cx: &Context, p: &Payload, last: &Final, who: &str) {
    let Some(session) = p.session_id() else {
        return;
    };
    let detail = last
        .detail
        .as_deref()
        .unwrap_or("its output failed its checks");
    let text = if let Some(note) = super::results::api_note(last, who) {
        format!("triage: a background subagent ended. {note}")
    } else if last.blocked {
        format!(
            "triage: the {who} subagent you ran in the background says it is blocked:\n{detail}\nTell the user what it needs."
        )
    } else if last.outcome == Outcome::Failure && !last.optional {
        format!(
            "triage: the {who} subagent you ran in the background finished, but its output failed its checks:\n{detail}\nDo not rely on its result."
        )
    } else {
        return;
    };
    if let Err(f) = pending::push(&cx.ground(), session, &text) {
        cx.warn(&format!("the model will not hear of {who}'s end: {f}"));
    }
}

/// What is queued for the main agent of the session (never a subagent's own hooks).
fn take(cx: &Context, p: &Payload) -> Option<String> {
    if p.agent_id().is_some() {
        return None;
    }
    let session = p.session_id()?;
    match pending::take(&cx.ground(), session) {
        Ok(words) if !words.is_empty() => Some(words.join("\n\n")),
        Ok(_) => None,
        Err(f) => {
            cx.warn(&format!(
                "the pending words for the model were not read: {f}"
            ));
            None
        }
    }
}

/// Adds what is queued to an answer that carries `additionalContext` for `event`.
pub(super) fn deliver(cx: &Context, p: &Payload, event: &str, mut r: Response) -> Response {
    if let Some(words) = take(cx, p) {
        r.add_context(event, words);
    }
    r
}

/// Stop: what is queued keeps the turn going, once, with the words as the block reason.
pub(super) fn at_stop(cx: &Context, p: &Payload, r: &mut Response) {
    let Some(words) = take(cx, p) else {
        return;
    };
    let reason = match r.reason.take() {
        Some(old) if r.decision.as_deref() == Some("block") => format!("{old}\n\n{words}"),
        _ => words,
    };
    let mut blocked = Response::block(reason);
    blocked.system_message = r.system_message.take();
    *r = blocked;
}
