//! A subagent the API itself failed: when the API answers 529 or 429 until the client gives
//! up, the client sends the subagent's `StopFailure` (with its `agent_id` and `agent_type`)
//! and no SubagentStop. That StopFailure is the subagent's failure, counted once:
//!
//! - in the background (its launch's `async_launched` PostToolUse parked the call's start),
//!   the call is completed here: the start taken, the type's breaker charged with the launch's
//!   probe ticket, the API's breaker charged, its permit given back, and the model told with
//!   the next answer that reaches it (pending words);
//! - in the foreground the parent's PostToolUseFailure of the call reports the same failure:
//!   whichever of the two comes second finds what the first left (the subagent's end, or the
//!   failed call's mark, met by agent type within a short window), so the failure has one
//!   record and one charge;
//! - a background launch whose PostToolUse has not come yet finds the end at that
//!   PostToolUse, which completes the call as it does after a SubagentStop.

use super::results::quote;
use crate::context::Context;
use crate::core::breaker::Outcome;
use crate::core::classify::{self, Overrides};
use crate::core::hook_payload::Payload;
use crate::core::output_check::Final;
use crate::store::sessions::{self, FailureMet};

/// StopFailure of a subagent (`agent_id` and `agent_type`); false when it is not one (the
/// main agent's turn).
pub(super) fn stop_failure(cx: &Context, p: &Payload) -> bool {
    let (Some(agent_id), Some(agent)) = (p.agent_id(), p.agent_type().filter(|a| !a.is_empty()))
    else {
        return false;
    };
    let Ok(policy) = cx.policy() else {
        // Without a policy nothing can be classified or charged: the record path says why.
        return false;
    };
    let o = Overrides {
        now: Some(cx.now),
        ..Overrides::default()
    };
    let kind = classify::classify(&p.0, &o, policy, 0).kind;
    let said = p
        .last_assistant_message()
        .or(p.error())
        .unwrap_or("the API failed");
    let last = Final {
        outcome: Outcome::Failure,
        kind: Some(kind),
        detail: Some(format!("its API requests failed: {}", quote(said))),
        // Recorded here, below, whatever the meeting finds (the record is what the client's
        // exit deadline is for); a call's half that comes later only charges.
        recorded: true,
        api_error: true,
        ..Final::success()
    };
    let ended = sessions::Ended {
        last: last.clone(),
        at_ms: cx.now.timestamp_millis(),
        key: agent.to_string(),
    };
    let met = match sessions::meet_failure(&cx.ground(), p.session_id(), agent_id, &ended) {
        Ok(met) => met,
        Err(f) => {
            cx.warn(&format!(
                "the subagent's failure was not kept for its call: {f}"
            ));
            FailureMet::Left
        }
    };
    if matches!(met, FailureMet::Joined) {
        // Its call's PostToolUseFailure recorded and charged it already.
        return true;
    }
    if let Err(f) = super::record_failure(cx, p, &p.0) {
        cx.warn(&format!("the subagent's failure was not recorded: {f}"));
    }
    super::permits::agent_stopped(cx, p);
    let FailureMet::Parked(start) = met else {
        return true;
    };
    let key = if start.key.is_empty() {
        agent.to_string()
    } else {
        start.key.clone()
    };
    let elapsed = u64::try_from(ended.at_ms - start.at_ms).ok();
    // Thresholds it crosses are announced by the next answer that reaches the model (this
    // one's output is ignored).
    if let Err(f) = super::calls::complete(cx, p, &key, start.ticket, &last, elapsed) {
        cx.warn(&format!("the subagent's call was not completed: {f}"));
    }
    super::pending::queue_end(cx, p, &last, agent);
    true
}

/// `text` on one line, capped to [`QUOTE_CHARS`] characters ([`crate::core::text::cap`]),
/// without its closing period (the sentence it is quoted in ends with its own).
#[cfg(test)]
mod tests {
    use super::super::results::QUOTE_CHARS;
    use super::*;

    #[test]
    fn a_long_quote_is_cut_at_a_word() {
        assert_eq!(
            quote("API Error:\n 529  Overloaded"),
            "API Error: 529 Overloaded"
        );
        // The sentence around it ends with its own period: not `(127.0.0.1:44225)..`.
        assert_eq!(
            quote("If it persists, check your inference gateway (127.0.0.1:44225)."),
            "If it persists, check your inference gateway (127.0.0.1:44225)"
        );
        let long = "word ".repeat(100);
        let q = quote(&long);
        assert!(q.chars().count() <= QUOTE_CHARS, "{q}");
        assert!(q.ends_with("word…"), "{q}");
    }
}
