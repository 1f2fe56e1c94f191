//! Guarded calls: the breaker gate at `PreToolUse`, and the call completed where its end is
//! seen — `PostToolUse`, or a background subagent's `SubagentStop` (error record, a timeout
//! past the agent's, the outcome on the breaker with its ticket).

use super::check_output;
use super::codec::Response;
use super::{announce, guarded_key, record_failure};
use crate::context::Context;
use crate::core::breaker::{CallReport, Outcome};
use crate::core::error_record::Warning;
use crate::core::hook_payload::Payload;
use crate::core::output_check::Final;
use crate::core::vocab::Kind;
use crate::exit::Failure;
use crate::store::breakers::calls as breaker;
use crate::store::{error_log, sessions};
use serde_json::{json, Value};

pub(super) fn pre_tool_use(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    let Some(key) = guarded_key(cx, p)? else {
        return Ok(Response::default());
    };
    let g = cx.ground();
    let r = breaker::check_in(&g, cx.policy()?, key, p.session_id())?;
    if !r.allowed {
        return Ok(Response::deny(breaker::template4_reason(&r)));
    }
    let upstream = match super::upstream::gate(cx, p, key, r.ticket.as_deref())? {
        super::upstream::Gate::Denied(denied) => return Ok(denied),
        super::upstream::Gate::Allowed(upstream) => upstream,
    };
    if let Some(denied) = super::permits::gate(cx, p)? {
        // Not launched: the half-open probes its breakers gave it go back, so the next
        // launch is the probe (not refused until the probes' leases run out).
        super::upstream::hand_back(cx, p, key, r.ticket.as_deref());
        if let Some((api, ticket)) = &upstream {
            super::upstream::hand_back(cx, p, api, Some(ticket));
        }
        return Ok(denied);
    }
    if let Some(id) = p.tool_use_id() {
        let start = sessions::Start {
            key: key.to_string(),
            ticket: r.ticket,
            at_ms: cx.now.timestamp_millis(),
        };
        if let Err(f) = sessions::remember_start(&g, p.session_id(), id, &start) {
            cx.warn(&format!(
                "the call goes ahead, but its start time was not kept: {f}"
            ));
        }
    }
    Ok(Response::default())
}

pub(super) fn post_tool_use(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    super::permits::release(cx, p);
    let moved = super::background::moved(cx, p);
    let Some(key) = guarded_key(cx, p)? else {
        return Ok(Response::default());
    };
    let start = p
        .tool_use_id()
        .and_then(|id| sessions::take_start(&cx.ground(), p.session_id(), id));
    if moved {
        // Not over yet: its probe ticket is handed back, and its end is judged when the
        // client reports it (a failure then charges the breaker as any failure does).
        let report = CallReport {
            outcome: Some(Outcome::Ignored),
            ticket: start.and_then(|s| s.ticket),
            kind: None,
            detail: None,
            duration_ms: p.duration_ms(),
        };
        if let Err(f) = breaker::record_in(&cx.ground(), cx.policy()?, key, p.session_id(), &report)
        {
            cx.warn(&format!("the breaker did not get its probe back: {f}"));
        }
        return Ok(Response::default());
    }
    if p.is_subagent_tool() {
        if let Some(agent_id) = p.response_agent_id() {
            return subagent_call(cx, p, key, agent_id, start);
        }
    }
    if p.is_async_launched() {
        // Launched in the background with no id to meet its SubagentStop by: its end is not
        // seen here, and a probe permit it holds runs out with its lease.
        return Ok(Response::default());
    }
    judge_here(cx, p, key, start)
}

/// PostToolUse of a subagent call whose `agentId` is known: it meets the subagent's
/// SubagentStop (see `session`), so the call is judged and recorded once, wherever its end
/// is seen.
fn subagent_call(
    cx: &Context,
    p: &Payload,
    key: &str,
    agent_id: &str,
    start: Option<sessions::Start>,
) -> Result<Response, Failure> {
    let background = p.is_async_launched();
    let start = start.unwrap_or_else(|| sessions::Start {
        key: key.to_string(),
        ticket: None,
        at_ms: cx.now.timestamp_millis(),
    });
    let ended = sessions::meet_end(
        &cx.ground(),
        p.session_id(),
        agent_id,
        background.then_some(&start),
    )?;
    let Some(ended) = ended else {
        if background {
            // Its SubagentStop will complete the call.
            return Ok(Response::default());
        }
        // Finished in the foreground with no SubagentStop before it (a hook not installed
        // for that event, an older client): judge its output here.
        return judge_here(cx, p, key, Some(start));
    };
    let elapsed = p
        .duration_ms()
        .or_else(|| u64::try_from(ended.at_ms - start.at_ms).ok());
    let who = &crate::core::text::label(p.subagent_type().unwrap_or(key));
    let mut response = if background {
        Response::default()
    } else {
        parent_note(&ended.last, who)
    };
    let done = complete(cx, p, key, start.ticket, &ended.last, elapsed)?;
    if background {
        super::pending::queue_end(cx, p, &ended.last, who);
    }
    if let Some(note) = done.timeout_note {
        response.add_context("PostToolUse", note);
    }
    announce(cx, p, &done.warnings, &mut response);
    Ok(response)
}

/// The subagent's end as SubagentStop judged it, told to its parent (foreground only: a
/// background call's parent hears of the end from Claude Code itself).
fn parent_note(last: &Final, who: &str) -> Response {
    if let Some(note) = super::results::api_note(last, who) {
        return Response::block(note);
    }
    let detail = last
        .detail
        .as_deref()
        .unwrap_or("its output failed its checks");
    if last.blocked {
        let mut r = Response::context(
            "PostToolUse",
            format!(
                "The {who} subagent says it is blocked:\n{detail}\nIt needs something only the user can give: tell the user what it needs (a blocked agent escalates) rather than working around it."
            ),
        );
        r.add_system_message(format!(
            "triage: {who} says it is blocked and needs you:\n{detail}"
        ));
        return r;
    }
    if last.outcome != Outcome::Failure {
        return Response::default();
    }
    let text = format!("The {who} subagent's output is unusable:\n{detail}");
    if last.optional {
        let mut r = Response::context(
            "PostToolUse",
            format!("{text}\n{who} is optional: proceed without its output."),
        );
        r.add_system_message(format!(
            "triage: optional agent {who}'s output failed its checks; proceeding"
        ));
        return r;
    }
    Response::block(format!(
        "{text}\nDo not rely on it: rerun the subagent with these fixed, or proceed without it."
    ))
}

/// SubagentStop: the output checks with the loop guard; once the subagent may stop, its call
/// is completed here when it ran in the background (its PostToolUse came long before).
pub(super) fn subagent_stop(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    let judged = check_output::judge_stop(cx, p)?;
    if judged.last.is_some() {
        super::permits::agent_stopped(cx, p);
    }
    let mut response = judged.response;
    announce(cx, p, &judged.warnings, &mut response);
    let (Some(last), Some(agent_id), Some(agent)) = (judged.last, p.agent_id(), p.agent_type())
    else {
        return Ok(response);
    };
    let ended = sessions::Ended {
        last,
        at_ms: cx.now.timestamp_millis(),
        key: agent.to_string(),
    };
    let start = match sessions::meet_start(&cx.ground(), p.session_id(), agent_id, &ended) {
        Ok(Some(start)) => start,
        // A foreground subagent: its PostToolUse comes next and completes the call.
        Ok(None) => return Ok(response),
        Err(f) => {
            cx.warn(&format!(
                "the subagent's end was not kept for its call: {f}"
            ));
            return Ok(response);
        }
    };
    let key = if start.key.is_empty() {
        agent.to_string()
    } else {
        start.key.clone()
    };
    let elapsed = u64::try_from(ended.at_ms - start.at_ms).ok();
    let done = complete(cx, p, &key, start.ticket, &ended.last, elapsed)?;
    super::pending::queue_end(cx, p, &ended.last, agent);
    announce(cx, p, &done.warnings, &mut response);
    Ok(response)
}

/// What completing a call left to say.
pub(super) struct Completed {
    pub(super) warnings: Vec<Warning>,
    pub(super) timeout_note: Option<String>,
}

/// Completes a guarded call: records its failure (unless its record is already written, and
/// at most one record for the call), a timeout when it ran past its agent's, and its outcome
/// on the breaker with the ticket its PreToolUse was given.
pub(super) fn complete(
    cx: &Context,
    p: &Payload,
    key: &str,
    ticket: Option<String>,
    last: &Final,
    elapsed_ms: Option<u64>,
) -> Result<Completed, Failure> {
    let agent = p.subagent_type().unwrap_or(key);
    let mut outcome = last.outcome;
    let mut kind = last.kind;
    let mut detail = last.detail.clone();
    // What to write, at most one record for the call.
    let mut to_write: Option<(Kind, String)> = None;
    if outcome == Outcome::Failure && !last.recorded {
        let text = detail
            .clone()
            .unwrap_or_else(|| "the subagent's output failed its checks".into());
        to_write = Some((kind.unwrap_or(Kind::ValidationFailed), text));
    }
    let mut timeout_note = None;
    let policy = cx.policy()?;
    let limit = policy.agent(agent).timeout;
    if let (Some(ms), Some(limit)) = (elapsed_ms, limit) {
        let limit_ms = u64::try_from(limit.0.as_millis()).unwrap_or(u64::MAX);
        if ms > limit_ms {
            let text = format!(
                "{} ran for {}, past its {limit} timeout",
                crate::core::text::label(agent),
                crate::core::duration::Dur(std::time::Duration::from_millis(ms))
            );
            timeout_note = Some(format!("triage: {text}; recorded as a timeout. Treat its result with care, and give it a narrower task if you call it again."));
            // One failure of one call is one record: a call already on record stays so.
            if !last.recorded && to_write.is_none() {
                outcome = Outcome::Failure;
                kind = Some(Kind::Timeout);
                detail = Some(text.clone());
                to_write = Some((Kind::Timeout, text));
            }
        }
    }

    // The breaker first: the gate of the next call must not depend on the error log.
    let report = CallReport {
        outcome: Some(outcome),
        ticket,
        kind,
        detail,
        duration_ms: elapsed_ms,
    };
    let g = cx.ground();
    if let Err(f) = breaker::record_in(&g, policy, key, p.session_id(), &report) {
        cx.warn(&format!("the breaker did not hear of this call: {f}"));
    }
    super::upstream::hear_call(cx, p, outcome, kind, report.detail.as_deref());
    if outcome == Outcome::Success {
        super::failure::credit_budget(cx, key);
        // A success: the agent's failures in this session (its workflow) recorded before this
        // call started are resolved (not those of siblings that ran beside it).
        let by = format!("hook {}", p.event().unwrap_or("PostToolUse"));
        let started = error_log::started_at(&g, elapsed_ms);
        error_log::recovered(&g, p.session_id().unwrap_or(""), agent, &by, Some(started));
    }
    let mut warnings = Vec::new();
    if let Some((kind, text)) = to_write {
        let input = json!({
            "kind": kind.as_str(),
            "detail": text,
            "session_id": p.session_id(),
            "agent": agent,
            "task_id": p.tool_use_id(),
            "duration_ms": elapsed_ms,
            "context": {"hook_event_name": p.event(), "tool_name": p.tool_name(), "agent_id": p.agent_id().or(p.response_agent_id())},
        });
        match record_failure(cx, p, &input) {
            Ok(w) => warnings = w,
            Err(f) => cx.warn(&format!("the failure was not recorded: {f}")),
        }
    }
    Ok(Completed {
        warnings,
        timeout_note,
    })
}

/// PostToolUse of a guarded call whose end no SubagentStop judged: its output is checked
/// here (a subagent's), then the call is completed.
fn judge_here(
    cx: &Context,
    p: &Payload,
    key: &str,
    start: Option<sessions::Start>,
) -> Result<Response, Failure> {
    let elapsed_ms = p.duration_ms().or_else(|| {
        let at = start.as_ref()?.at_ms;
        u64::try_from(cx.now.timestamp_millis() - at).ok()
    });
    let (mut response, failed) = if p.is_subagent_tool() {
        check_output::judge_call(cx, p, &Default::default()).unwrap_or_else(|f| {
            cx.warn(&format!("the subagent's output was not checked: {f}"));
            (Response::default(), None)
        })
    } else {
        (Response::default(), None)
    };
    let last = if let Some(api) = failed.filter(|f| f.api_error) {
        api
    } else if response.is_empty() {
        Final::success()
    } else {
        Final {
            outcome: Outcome::Failure,
            kind: Some(Kind::ValidationFailed),
            detail: Some(verdict_text(&response)),
            ..Final::success()
        }
    };
    let done = complete(cx, p, key, start.and_then(|s| s.ticket), &last, elapsed_ms)?;
    if let Some(note) = done.timeout_note {
        response.add_context("PostToolUse", note);
    }
    announce(cx, p, &done.warnings, &mut response);
    Ok(response)
}

/// What the output check said, for the error record.
fn verdict_text(r: &Response) -> String {
    let context = r
        .hook_specific
        .as_ref()
        .and_then(|m| m.get("additionalContext"))
        .and_then(Value::as_str);
    r.reason
        .as_deref()
        .or(context)
        .or(r.system_message.as_deref())
        .unwrap_or("the subagent's output failed its checks")
        .to_string()
}
