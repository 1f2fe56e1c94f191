//! Results that say they failed: a subagent whose final answer is an API error message
//! ("API Error: 429 …", "Credit balance is too low", …) failed with that kind, even though
//! the client reports its call `completed`; and `min_tool_uses`, the tool calls an agent that
//! must do work has to have made, counted from its transcript.
//!
//! The checks themselves are pure ([`crate::core::output_check`]); this is the hook's part:
//! what the transcript says, the record, and the words for the model.

use crate::context::Context;
use crate::core::breaker::Outcome;
use crate::core::error_record::Warning;
use crate::core::hook_payload::Payload;
use crate::core::output_check::{rules_for, Final, Verdict};
use crate::core::policy::OutputRules;
use crate::core::transcript;
use crate::core::vocab::Kind;
use crate::hook::codec::Response;
use crate::store::files;
use serde_json::{json, Value};
use std::path::Path;

/// The tool calls the agent made, when its rules ask for them (`min_tool_uses`) and they can
/// be known: a SubagentStop's `agent_transcript_path` (never the parent's transcript), a
/// Stop's `transcript_path`, a subagent call's `tool_response.totalToolUseCount`. `None`: not
/// needed, or not known (the check is then skipped).
pub(super) fn tool_uses(
    cx: &Context,
    p: &Payload,
    agent: Option<&str>,
    flags: &OutputRules,
) -> Option<u64> {
    let min = rules_for(cx.policy().ok()?, agent, flags).0.min_tool_uses?;
    let path = match p.event() {
        Some("SubagentStop") => p.str("agent_transcript_path"),
        Some("Stop") => p.str("transcript_path"),
        Some("PostToolUse") => {
            return p
                .tool_response()
                .get("totalToolUseCount")
                .and_then(Value::as_u64);
        }
        _ => None,
    }?;
    let limit = (cx.max_input as u64).max(1);
    let tail = match files::read_tail(Path::new(path), limit) {
        Ok(t) => t,
        Err(e) => {
            cx.warn(&format!(
                "transcript {path}: {e}; min_tool_uses not checked"
            ));
            return None;
        }
    };
    let whole = (tail.len() as u64) < limit;
    let n = transcript::tool_uses(&tail, whole);
    // Only the tail of a long transcript was read: fewer than required there says nothing.
    (whole || n >= u64::from(min)).then_some(n)
}

/// The one directive for a subagent whose answer was an API error of `kind`.
fn directive(kind: Kind) -> &'static str {
    match kind {
        Kind::Billing => "Tell the user that the account's credit must be topped up; no subagent can run until then.",
        Kind::AuthFailed => "Tell the user that the API key must be fixed (`/login`); no subagent can run until then.",
        Kind::ContextExhausted => "Do not rely on its output; if you run it again, give it a smaller task.",
        _ => "Do not rely on its output; run it again later, once the API answers.",
    }
}

/// The model's words for a subagent whose answer was an API error.
pub(super) fn api_note(last: &Final, who: &str) -> Option<String> {
    if !last.api_error || last.outcome != Outcome::Failure {
        return None;
    }
    let kind = last.kind.unwrap_or(Kind::Unknown);
    Some(format!(
        "The {who} subagent did no work: {}.\n{}",
        last.detail
            .as_deref()
            .unwrap_or("its answer is an API error"),
        directive(kind)
    ))
}

/// A stop hook's verdict when the answer is an API error: the agent is not blocked back (it
/// cannot fix the API by trying again at once), the failure is recorded with its kind, and the
/// user is told. Returns the answer, how the call ended and the thresholds crossed; `None`
/// when the answer is not one.
pub(super) fn api_failure(
    cx: &Context,
    p: &Payload,
    verdict: &Verdict,
    who: &str,
) -> Option<(Response, Final, Vec<Warning>)> {
    let check = verdict.failed().find(|c| c.check == "api_error")?;
    let kind = verdict.error.as_ref().map_or(Kind::Unknown, |e| e.kind);
    let detail = check.detail.clone();
    let input = json!({
        "kind": kind.as_str(),
        "detail": format!("{who}: {detail}"),
        "session_id": p.session_id(),
        "agent": verdict.agent.as_deref().unwrap_or(who),
        "agent_id": p.agent_id(),
        "source": "check-output",
        "context": {"hook_event_name": p.event(), "failed_checks": ["api_error"]},
    });
    let (recorded, warnings) = match super::record_failure(cx, p, &input) {
        Ok(w) => (true, w),
        Err(f) => {
            cx.warn(&format!("the API error answer was not recorded: {f}"));
            (false, Vec::new())
        }
    };
    let mut response = Response::default();
    response.add_system_message(format!(
        "triage: {who}'s answer is an API error ({kind}), not its work{}.",
        if recorded { "; recorded" } else { "" }
    ));
    let last = Final {
        outcome: Outcome::Failure,
        kind: Some(kind),
        detail: Some(detail),
        recorded,
        api_error: true,
        ..Final::success()
    };
    Some((response, last, warnings))
}

/// The longest quote of the API's error kept in the words for the model.
pub(super) const QUOTE_CHARS: usize = 300;

/// The client's words for a foreground subagent the API failed, in its call's
/// PostToolUseFailure.
const TERMINATED: &str = "Agent terminated early due to an API error:";

/// What the model is told when a foreground subagent's call fails because the API failed it
/// and its own StopFailure has not come yet: the words that StopFailure would have given, so
/// the text is the same whichever of the two the client's hooks run first. `None` for any
/// other failure.
pub(super) fn foreground_note(p: &Payload, kind: crate::core::vocab::Kind) -> Option<String> {
    let said = p.error()?.trim_start().strip_prefix(TERMINATED)?.trim();
    // The client adds what the subagent's own message does not carry (`(error type
    // server_error, HTTP 529, request id …)`): left out, so both texts are the same.
    let said = said.split(" (error type ").next().unwrap_or(said).trim();
    let who = p.subagent_type()?;
    let last = Final {
        outcome: Outcome::Failure,
        kind: Some(kind),
        detail: Some(format!("its API requests failed: {}", quote(said))),
        api_error: true,
        ..Final::success()
    };
    api_note(&last, who)
}

pub(super) fn quote(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::core::text::cap(one.trim_end_matches('.'), QUOTE_CHARS)
}
