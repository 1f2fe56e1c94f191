//! `PostToolUseFailure`: classifies, counts the failure's repeats in the session, and then
//! either stays quiet (work: a red test, a compile error, a lint complaint, a search with no
//! match — the agent's own loop, recorded nowhere that counts and charged to no breaker) or
//! speaks (trouble: records the error once — a subagent whose SubagentStop already recorded
//! its failure is not recorded again —, records a breaker failure, and tells the model the
//! next step of the retry schedule for this occurrence: the first retry the first time, the
//! next step on a repeat). The third identical failure, work or trouble, gets one line, once.
//! With `[budget.KEY]` for the breaker's key, a retryable failure costs the fleet's retry
//! budget a token, and a retry the budget refuses is advised as fail fast instead.

use super::codec::Response;
use super::{announce, guarded_key, store_record};
use crate::context::Context;
use crate::core::admission::{retry_allowed, BudgetOp};
use crate::core::breaker::{CallReport, Outcome, State};
use crate::core::classify::{self, ErrorObject};
use crate::core::error_record;
use crate::core::hook_payload::Payload;
use crate::core::policy::Policy;
use crate::core::repeat;
use crate::core::text::{name, quoted};
use crate::core::vocab::{Action, Class};
use crate::exit::Failure;
use crate::store::breakers::calls as breaker;
use crate::store::{repeats, sessions};
use serde_json::Value;

/// The occurrence of the same failure that gets the change-approach line (seed 000: the same
/// agent failing 3 or more times is an abort recommendation).
pub const REPEAT_LINE_AT: u32 = 3;

/// The sentence for the third identical failure: facts, then one directive.
fn repeat_sentence(n: u32) -> String {
    format!(
        "The same command failed the same way {n} times in this session: change approach, or ask the user."
    )
}

/// Whether the failure is the agent's own work under the policy: the classifier says work,
/// and `[voice] work` names its family.
pub fn is_work(policy: &Policy, object: &ErrorObject, tool: Option<&str>) -> bool {
    object.class == Class::Work && policy.voice.is_work(classify::family_of(object.kind, tool))
}

pub(super) fn post_tool_use_failure(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    super::permits::release(cx, p);
    if let Some(r) = super::agents::undefined_agent(cx, p)? {
        return Ok(r);
    }
    let policy = cx.policy()?;
    let (rec, object) = error_record::classified_at(&p.0, policy, None, Some(cx.now));
    let g = cx.ground();
    let guarded = guarded_key(cx, p)?;
    // A subagent whose SubagentStop already recorded its failure (let go after its
    // rejections) ends here too: one failure, one record.
    let ended = match guarded {
        Some(key) if p.is_subagent_tool() => {
            // None found: the subagent's StopFailure may still come (the API failed it) and
            // must find this failure recorded and charged.
            let mark = p.tool_use_id().filter(|_| !p.is_interrupt());
            sessions::take_end_for_key(&g, p.session_id(), key, mark)
        }
        _ => None,
    };
    let judged = ended
        .as_ref()
        .is_some_and(|e| e.last.outcome == Outcome::Failure);
    let work = !judged && !p.is_interrupt() && is_work(policy, &object, p.tool_name());
    // The breaker first: the gate of the next call must not depend on the repeat counts or
    // the error log. A breaker open after this failure denies the next call: no retry is
    // advised then.
    let mut open_after: Option<(String, u32)> = None;
    if let Some(key) = guarded {
        let start = p
            .tool_use_id()
            .and_then(|id| sessions::take_start(&g, p.session_id(), id));
        // An interrupt is the user's doing, and work is the agent's own loop, not a sign the
        // tool is failing: both neutral for the breaker (a probe ticket is handed back).
        let outcome = if p.is_interrupt() || work {
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
        match breaker::record_in(&g, policy, key, p.session_id(), &report) {
            Ok(r) if matches!(r.state, State::Open | State::ForcedOpen) => {
                open_after = Some((r.key.clone(), r.consecutive_failures));
            }
            Ok(_) => {}
            Err(f) => cx.warn(&format!("the breaker did not hear of this failure: {f}")),
        }
        super::upstream::hear_call(cx, p, outcome, report.kind, p.error());
    }
    // The occurrence number of this failure in the session drives the advice.
    let fingerprint = repeat::fingerprint(
        p.tool_name(),
        Some(p.tool_input()).filter(|v| !v.is_null()),
        object.kind,
        p.error(),
    );
    let seen = repeats::note(
        &g,
        p.session_id().unwrap_or("no-session"),
        &fingerprint,
        REPEAT_LINE_AT,
    )
    .unwrap_or_else(|f| {
        cx.warn(&format!("the failure's repeats were not counted: {f}"));
        repeats::Seen {
            count: 1,
            say_now: false,
        }
    });
    // Whether this kind of failure is one to retry at all (before the schedule of this
    // occurrence, which may have run out of attempts).
    let retryable = object.action == Action::Retry;
    // On a repeat, the decision of that occurrence: the next step of the schedule.
    let (mut rec, mut object) = if seen.count > 1 && !work {
        error_record::classified_at(&p.0, policy, Some(seen.count - 1), Some(cx.now))
    } else {
        (rec, object)
    };
    let open_now = open_after
        .as_ref()
        .filter(|_| !work && object.action == Action::Retry)
        .map(|(key, failures)| {
            let why = format!(
                "the breaker {} is open after {}, so the next call is denied until its cooldown ends",
                name(key),
                crate::core::text::count(*failures, "failure")
            );
            no_retry(&mut object, &mut rec, &why);
            why
        });
    // The fleet's retry budget for the breaker's key, when the policy sets one: a retryable
    // failure costs a token, and a retry the budget refuses is not advised (as `run
    // --budget`). With no `[budget.KEY]` nothing is read or written.
    let budget_spent = match guarded {
        Some(key)
            if !work && !p.is_interrupt() && (retryable || object.action == Action::Retry) =>
        {
            charge_budget(cx, policy, key)
        }
        _ => None,
    }
    .filter(|_| open_now.is_none() && object.action == Action::Retry)
    .inspect(|why| no_retry(&mut object, &mut rec, why));
    object.warnings.iter().for_each(|w| cx.warn(w));
    let who = p.tool_name().unwrap_or_default();
    crate::store::trace::classified(&g, policy, who, &object);
    crate::store::trace::advised(&g, policy, who, seen.count, &object);
    if work {
        // Nothing recorded, nothing advised: the output already says what failed.
        return Ok(if seen.say_now {
            Response::context(
                "PostToolUseFailure",
                format!("triage: {}", repeat_sentence(seen.count)),
            )
        } else {
            Response::default()
        });
    }
    if guarded.is_none() && !policy.thresholds.count_unguarded_tools {
        // Kept in the log and advised on, but a failing `grep` is no sign of an unstable
        // workflow: it does not count toward the thresholds (`count_unguarded_tools`).
        rec.error
            .insert("counts_toward_thresholds".into(), Value::Bool(false));
    }
    let warnings = if ended.as_ref().is_some_and(|e| e.last.recorded) {
        Vec::new()
    } else {
        store_record(cx, p, rec).unwrap_or_else(|f| {
            cx.warn(&format!("the failure was not recorded: {f}"));
            Vec::new()
        })
    };
    // The API failed a foreground subagent and its StopFailure is still to come: the same
    // words as when it came first.
    let api_first = ended
        .is_none()
        .then(|| super::results::foreground_note(p, object.kind))
        .flatten();
    let advice = match ended.as_ref().filter(|e| e.last.outcome == Outcome::Failure) {
        // The API failed it (its StopFailure came first).
        Some(e) if e.last.api_error => super::results::api_note(&e.last, &e.key)
            .map(|note| format!("triage: {note}"))
            .unwrap_or_default(),
        None if api_first.is_some() => {
            format!("triage: {}", api_first.as_deref().unwrap_or_default())
        }
        // What its SubagentStop found says more than the client's "No assistant messages".
        Some(e) => format!(
            "The {} subagent's output is unusable:\n{}\n{}",
            name(&e.key),
            e.last.detail.as_deref().unwrap_or("its output failed its checks"),
            match &open_after {
                // Its breaker denies the next launch: a rerun is not the way on.
                Some((key, _)) => format!(
                    "Do not rely on it, and do not rerun it now: the breaker {} is open; proceed without it.",
                    name(key)
                ),
                None => "Do not rely on it: rerun the subagent with these fixed, or proceed without it."
                    .to_string(),
            }
        ),
        None if seen.say_now => format!(
            "triage: `{}`: {}. {}",
            object.kind,
            quoted(object.detail.trim_end_matches('.')),
            repeat_sentence(seen.count)
        ),
        None => match &open_now {
            // Not "retry (attempt 2 of 3)" when that call would be denied.
            Some(why) => format!(
                "triage: `{}` (tier {}, {}): {}. Next step: do not retry it now: {why}; go on without it until then.",
                object.kind,
                object.tier.number(),
                object.tier.name(),
                quoted(object.detail.trim_end_matches('.'))
            ),
            None => match &budget_spent {
                Some(why) => format!(
                    "triage: `{}` (tier {}, {}): {}. The {}. Next step: fail fast, without retrying this call.",
                    object.kind,
                    object.tier.number(),
                    object.tier.name(),
                    quoted(object.detail.trim_end_matches('.')),
                    why.trim_start_matches("the ")
                ),
                None => classify::hook_context(&object),
            },
        },
    };
    let mut r = Response::context("PostToolUseFailure", advice);
    announce(cx, p, &warnings, &mut r);
    Ok(r)
}

/// The advice of this failure is no retry, for `why`: escalate, in the object the model is
/// told of and in the record.
fn no_retry(object: &mut ErrorObject, rec: &mut error_record::ErrorRecord, why: &str) {
    object.action = Action::Escalate;
    object.retry = None;
    object
        .context
        .insert("action_reason".into(), Value::from(why));
    rec.error.insert("action".into(), Value::from("escalate"));
    rec.error.insert("retry".into(), Value::Null);
    if let Some(Value::Object(c)) = rec.error.get_mut("context") {
        c.insert("action_reason".into(), Value::from(why));
    }
}

/// Charges a retryable failure to the retry budget of breaker key `key`, when the policy
/// sets `[budget.KEY]` (or a glob matching it): when the budget then refuses retries, why
/// (the advice's fact before its one directive, fail fast). A budget that cannot be read or
/// written is a warning and refuses nothing.
fn charge_budget(cx: &Context, policy: &Policy, key: &str) -> Option<String> {
    let limits = policy.budget_for(key)?;
    match crate::store::budget::call(&cx.ground(), key, limits, BudgetOp::Failure) {
        Ok((tokens, _)) if !retry_allowed(limits, tokens) => Some(format!(
            "the fleet's retry budget for {} is spent ({} of {} tokens left; retries resume above half)",
            name(key),
            tokens as f64 / 1000.0,
            limits.max_milli as f64 / 1000.0
        )),
        Ok(_) => None,
        Err(f) => {
            cx.warn(&format!("retry budget `{key}` did not hear of this failure: {f}"));
            None
        }
    }
}

/// A guarded call that succeeded gives back `token_ratio` to the retry budget of its breaker
/// key, when the policy sets one (nothing is read or written otherwise).
pub(super) fn credit_budget(cx: &Context, key: &str) {
    let Ok(policy) = cx.policy() else {
        return;
    };
    let Some(limits) = policy.budget_for(key) else {
        return;
    };
    if let Err(f) = crate::store::budget::call(&cx.ground(), key, limits, BudgetOp::Success) {
        cx.warn(&format!(
            "retry budget `{key}` did not hear of this success: {f}"
        ));
    }
}
