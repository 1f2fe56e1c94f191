//! `triage hook`: the one command every Claude Code event in `settings.json` runs. It reads the
//! payload, routes on `hook_event_name`, and answers with one object in the hook output schema,
//! or with nothing:
//!
//! - `PreToolUse`: the breaker gate for the subagent tool and for tools the policy names in
//!   `[breaker.<tool>]`; denies with Template 4 when open, else remembers when the call started
//!   and the probe ticket it was given.
//! - `PostToolUse`: completes a guarded call (error record, `timeout` past its configured
//!   timeout, outcome on the breaker with its ticket). A subagent call meets its SubagentStop by
//!   `agentId` (see [`crate::store::sessions`]): in the background (`async_launched`) it leaves the call for
//!   SubagentStop; in the foreground it takes SubagentStop's verdict and tells the parent.
//! - `PostToolUseFailure`: classifies, records the error (once: a subagent SubagentStop already
//!   recorded is not recorded again), records a breaker failure, and tells the model the
//!   advised next step.
//! - `SubagentStop`, `Stop`: the output checks with the loop guard (`check-output`); a
//!   background subagent's call is completed at its SubagentStop, the only place its end is seen.
//! - `StopFailure`: classifies and records, within a deadline, through the client's exit signal.
//! - `SessionStart`: names breakers that are not closed (what a call gets now) and unresolved
//!   errors of earlier sessions.
//!
//! It never blocks by accident: any failure is traced to `logs/triage.log` (and stderr, which
//! Claude Code only shows in its debug log) and the hook exits 0 with nothing on stdout.

mod log_tail;

use crate::commands::check_output;
use crate::context::{Context, Outcome};
use crate::core::breaker::CallReport;
use crate::core::breaker::Outcome as CallOutcome;
use crate::core::classify;
use crate::core::error_record;
use crate::core::error_record::Warning;
use crate::core::vocab::Kind;
use crate::exit::Failure;
use crate::hook::codec::{Payload, Response};
use crate::store::breakers::calls as breaker;
use crate::store::error_log;
use crate::store::sessions;
use serde_json::{json, Value};

/// Arguments of `triage hook`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Reads one Claude Code hook payload on stdin and answers in the hook output schema \
    (or prints nothing). It always exits 0: a failure is traced to <root>/logs/triage.log.\n\n\
    Examples:\n  \
    # in .claude/settings.json (written by `triage init`):\n  \
    {\"type\": \"command\", \"command\": \"command -v triage >/dev/null 2>&1 && exec triage hook; ...\"}\n  \
    echo '{\"hook_event_name\":\"PreToolUse\",\"session_id\":\"s1\",\"tool_name\":\"Agent\",\"tool_input\":{\"subagent_type\":\"researcher\"}}' | triage hook"
)]
pub struct Args {
    /// The event, for a payload without `hook_event_name` (the payload's own name wins)
    #[arg(long, value_name = "EVENT")]
    pub event: Option<String>,
}

/// Runs `triage hook`.
pub fn run(args: &Args, cx: &Context) -> Result<Outcome, Failure> {
    let mut value = match cx.read_json() {
        Ok(Some(v)) => v,
        Ok(None) => {
            cx.trace("warning", "empty stdin: no hook payload, nothing to do");
            return Ok(Outcome::nothing());
        }
        Err(f) => {
            cx.warn(&format!("{}; answered nothing", f.message));
            return Ok(Outcome::nothing());
        }
    };
    if let (Some(event), Some(obj)) = (&args.event, value.as_object_mut()) {
        let named = obj
            .get("hook_event_name")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty());
        if !named {
            obj.insert("hook_event_name".into(), Value::from(event.as_str()));
        }
    }
    let payload = Payload::new(value);
    if payload.event() == Some("StopFailure") {
        outlive_the_client(cx);
    }
    match answer(cx, &payload) {
        Ok(r) => Ok(Outcome::hook(&r)),
        Err(f) => {
            cx.warn(&format!(
                "{} failed, answered nothing: {}",
                payload.event().unwrap_or("the event"),
                f.message
            ));
            Ok(Outcome::nothing())
        }
    }
}

/// The answer to one payload (empty: print nothing).
pub fn answer(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    match p.event() {
        Some("PreToolUse") => pre_tool_use(cx, p),
        Some("PostToolUse") => post_tool_use(cx, p),
        Some("PostToolUseFailure") => post_tool_use_failure(cx, p),
        Some("SubagentStop") => subagent_stop(cx, p),
        Some("Stop") => {
            let judged = check_output::judge_stop(cx, p)?;
            let mut response = judged.response;
            announce(cx, p, &judged.warnings, &mut response);
            Ok(response)
        }
        Some("StopFailure") => {
            stop_failure(cx, p);
            Ok(Response::default())
        }
        Some("SessionStart") => session_start(cx, p),
        _ => Ok(Response::default()),
    }
}

/// How long StopFailure waits for the error log's lock: the rest of the path (read the
/// payload, classify, append) takes about 4 ms in a release build (bench case
/// `hook-stop-failure`), so the whole of it stays well inside the 20 to 80 ms Claude Code
/// gives the hook before it exits, even when another hook holds the lock.
pub const STOP_FAILURE_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(25);

/// Claude Code sends StopFailure while `-p` shuts down, and sends the hook SIGTERM as it
/// exits, 20 to 80 ms after the hook started (measured with 2.1.330, `tests/e2e`): on a busy
/// machine that can come before the record is written. The hook catches SIGTERM from here on
/// and finishes its record, which is bounded by [`STOP_FAILURE_LOCK_WAIT`]; nothing reads its
/// output anyway.
fn outlive_the_client(cx: &Context) {
    let caught = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        if let Err(e) = signal_hook::flag::register(sig, std::sync::Arc::clone(&caught)) {
            cx.trace(
                "warning",
                &format!("StopFailure: cannot catch signal {sig} ({e}); the client's exit may cut the record short"),
            );
        }
    }
}

/// StopFailure: classifies the API error that ended the turn (its `error` word and the
/// message in `last_assistant_message`) and records it. Claude Code ignores the output.
///
/// Recording in this process, not handing the payload to a detached one: spawning a process
/// costs more than the record itself (7 ms against 4 ms, release build); the hook catches the
/// client's SIGTERM instead ([`outlive_the_client`]).
fn stop_failure(cx: &Context, p: &Payload) {
    // Every lock wait of this run ends within the deadline; a busy log gets the record
    // spooled in `errors.pending/` for the next writer.
    cx.limit_lock_wait(STOP_FAILURE_LOCK_WAIT);
    if let Err(f) = record_failure(cx, p, &p.0) {
        // Not lost: the trace keeps what the record would have said.
        let said = p.last_assistant_message().unwrap_or_default();
        cx.warn(&format!(
            "StopFailure not recorded within its deadline ({f}): error {:?}, {:?}",
            p.error().unwrap_or_default(),
            said.chars().take(300).collect::<String>()
        ));
    }
}

/// The breaker key of a guarded call: the subagent type for `Agent`/`Task`, or a tool the
/// policy names in `[breaker.<tool>]`. Other tools are not gated.
fn guarded_key<'p>(cx: &Context, p: &'p Payload) -> Result<Option<&'p str>, Failure> {
    if p.is_subagent_tool() {
        return Ok(p.subagent_type().or(p.tool_name()));
    }
    let Some(tool) = p.tool_name() else {
        return Ok(None);
    };
    let named = !crate::core::glob::matching(cx.policy()?.breaker.keys.keys(), tool).is_empty();
    Ok(named.then_some(tool))
}

fn pre_tool_use(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    let Some(key) = guarded_key(cx, p)? else {
        return Ok(Response::default());
    };
    let r = breaker::check_in(cx, key, p.session_id())?;
    if !r.allowed {
        return Ok(Response::deny(breaker::template4_reason(&r)));
    }
    if let Some(id) = p.tool_use_id() {
        let start = sessions::Start {
            key: key.to_string(),
            ticket: r.ticket,
            at_ms: cx.now.timestamp_millis(),
        };
        if let Err(f) = sessions::remember_start(cx, p.session_id(), id, &start) {
            cx.warn(&format!(
                "the call goes ahead, but its start time was not kept: {f}"
            ));
        }
    }
    Ok(Response::default())
}

fn post_tool_use(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    let Some(key) = guarded_key(cx, p)? else {
        return Ok(Response::default());
    };
    let start = p
        .tool_use_id()
        .and_then(|id| sessions::take_start(cx, p.session_id(), id));
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
    let ended = sessions::meet_end(cx, p.session_id(), agent_id, background.then_some(&start))?;
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
    let who = p.subagent_type().unwrap_or(key);
    let mut response = if background {
        Response::default()
    } else {
        parent_note(&ended.last, who)
    };
    let done = complete(cx, p, key, start.ticket, &ended.last, elapsed)?;
    if let Some(note) = done.timeout_note {
        response.add_context("PostToolUse", note);
    }
    announce(cx, p, &done.warnings, &mut response);
    Ok(response)
}

/// The subagent's end as SubagentStop judged it, told to its parent (foreground only: a
/// background call's parent hears of the end from Claude Code itself).
fn parent_note(last: &check_output::Final, who: &str) -> Response {
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
    if last.outcome != CallOutcome::Failure {
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
fn subagent_stop(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    let judged = check_output::judge_stop(cx, p)?;
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
    let start = match sessions::meet_start(cx, p.session_id(), agent_id, &ended) {
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
    announce(cx, p, &done.warnings, &mut response);
    Ok(response)
}

/// What completing a call left to say.
struct Completed {
    warnings: Vec<Warning>,
    timeout_note: Option<String>,
}

/// Completes a guarded call: records its failure (unless its record is already written, and
/// at most one record for the call), a timeout when it ran past its agent's, and its outcome
/// on the breaker with the ticket its PreToolUse was given.
fn complete(
    cx: &Context,
    p: &Payload,
    key: &str,
    ticket: Option<String>,
    last: &check_output::Final,
    elapsed_ms: Option<u64>,
) -> Result<Completed, Failure> {
    let agent = p.subagent_type().unwrap_or(key);
    let mut outcome = last.outcome;
    let mut kind = last.kind;
    let mut detail = last.detail.clone();
    // What to write, at most one record for the call.
    let mut to_write: Option<(Kind, String)> = None;
    if outcome == CallOutcome::Failure && !last.recorded {
        let text = detail
            .clone()
            .unwrap_or_else(|| "the subagent's output failed its checks".into());
        to_write = Some((kind.unwrap_or(Kind::ValidationFailed), text));
    }
    let mut timeout_note = None;
    let limit = cx.policy()?.agent(agent).timeout;
    if let (Some(ms), Some(limit)) = (elapsed_ms, limit) {
        let limit_ms = u64::try_from(limit.0.as_millis()).unwrap_or(u64::MAX);
        if ms > limit_ms {
            let text = format!(
                "{agent} ran for {}, past its {limit} timeout",
                crate::core::duration::Dur(std::time::Duration::from_millis(ms))
            );
            timeout_note = Some(format!("triage: {text}; recorded as a timeout. Treat its result with care, and give it a narrower task if you call it again."));
            // One failure of one call is one record: a call already on record stays so.
            if !last.recorded && to_write.is_none() {
                outcome = CallOutcome::Failure;
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
    if let Err(f) = breaker::record_in(cx, key, p.session_id(), &report) {
        cx.warn(&format!("the breaker did not hear of this call: {f}"));
    }
    if outcome == CallOutcome::Success {
        // A success: the agent's failures in this session (its workflow) recorded before this
        // call started are resolved (not those of siblings that ran beside it).
        let by = format!("hook {}", p.event().unwrap_or("PostToolUse"));
        let started = error_log::started_at(cx, elapsed_ms);
        error_log::recovered(cx, p.session_id().unwrap_or(""), agent, &by, Some(started));
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
    let mut response = if p.is_subagent_tool() {
        check_output::judge_hook(cx, p).unwrap_or_else(|f| {
            cx.warn(&format!("the subagent's output was not checked: {f}"));
            Response::default()
        })
    } else {
        Response::default()
    };
    let last = if response.is_empty() {
        check_output::Final::success()
    } else {
        check_output::Final {
            outcome: CallOutcome::Failure,
            kind: Some(Kind::ValidationFailed),
            detail: Some(verdict_text(&response)),
            ..check_output::Final::success()
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

fn post_tool_use_failure(cx: &Context, p: &Payload) -> Result<Response, Failure> {
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
    let ended = match guarded {
        Some(key) if p.is_subagent_tool() => sessions::take_end_for_key(cx, p.session_id(), key),
        _ => None,
    };
    // The breaker first: the gate of the next call must not depend on the error log.
    if let Some(key) = guarded {
        let start = p
            .tool_use_id()
            .and_then(|id| sessions::take_start(cx, p.session_id(), id));
        // An interrupt is the user's doing, not the agent's failure: neutral for the breaker.
        let outcome = if p.is_interrupt() {
            CallOutcome::Ignored
        } else {
            CallOutcome::Failure
        };
        let report = CallReport {
            outcome: Some(outcome),
            ticket: start.and_then(|s| s.ticket),
            kind: Some(object.kind),
            detail: p.error().map(str::to_string),
            duration_ms: p.duration_ms(),
        };
        if let Err(f) = breaker::record_in(cx, key, p.session_id(), &report) {
            cx.warn(&format!("the breaker did not hear of this failure: {f}"));
        }
    }
    let warnings = if ended.as_ref().is_some_and(|e| e.last.recorded) {
        Vec::new()
    } else {
        store_record(cx, p, rec).unwrap_or_else(|f| {
            cx.warn(&format!("the failure was not recorded: {f}"));
            Vec::new()
        })
    };
    let advice = match ended.as_ref().filter(|e| e.last.outcome == CallOutcome::Failure) {
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

/// What SessionStart says of one breaker that is not closed: what a call to it gets now.
fn breaker_line(s: &breaker::Status) -> Option<String> {
    use crate::core::breaker::State;
    let what = match (s.state, s.half_open_in_s) {
        (State::Closed | State::Disabled, _) => return None,
        (State::Open, Some(secs)) if secs > 0 => {
            format!("calls are refused for {secs} s more, then one probe call is let through")
        }
        (State::Open, _) => "the next call is let through as a probe".to_string(),
        (State::HalfOpen, _) if s.probes_in_flight > 0 => {
            "a probe call is testing it now; other calls are refused until it ends".to_string()
        }
        (State::HalfOpen, _) => {
            "the next call is let through as a probe; its success closes the breaker".to_string()
        }
        (State::ForcedOpen, Some(secs)) if secs > 0 => {
            format!("an operator opened it; calls are refused for {secs} s more")
        }
        (State::ForcedOpen, _) => {
            "an operator opened it; calls are refused until it is reset".to_string()
        }
    };
    Some(format!("- {} ({}): {what}", s.key, s.state))
}

/// Classifies `input` and records it; returns the thresholds it crossed.
fn record_failure(cx: &Context, p: &Payload, input: &Value) -> Result<Vec<Warning>, Failure> {
    let (rec, object) = error_record::classified_at(input, cx.policy()?, None, Some(cx.now));
    object.warnings.iter().for_each(|w| cx.warn(w));
    store_record(cx, p, rec)
}

/// Writes the record. A session is its own workflow for the cascade rule (distinct failing
/// agents), unless the record names one.
fn store_record(
    cx: &Context,
    p: &Payload,
    mut rec: crate::core::error_record::ErrorRecord,
) -> Result<Vec<Warning>, Failure> {
    if rec.session_id.is_none() {
        rec.session_id = p.session_id().map(str::to_string);
    }
    if rec.workflow_id.is_none() {
        rec.workflow_id = rec.session_id.clone();
    }
    Ok(error_log::record(cx, rec, None)?.warnings)
}

/// Adds Template 5's warning to the answer for each threshold this session crosses for the
/// first time; a threshold already announced stays quiet.
fn announce(cx: &Context, p: &Payload, warnings: &[Warning], r: &mut Response) {
    let Some(sid) = p.session_id() else {
        return;
    };
    if warnings.is_empty() {
        return;
    }
    let names: Vec<&str> = warnings.iter().map(|w| w.name.as_str()).collect();
    let fresh = match sessions::first_announcements(cx, sid, &names) {
        Ok(fresh) => fresh,
        Err(f) => {
            cx.warn(&format!("thresholds crossed but not announced: {f}"));
            return;
        }
    };
    if fresh.is_empty() {
        return;
    }
    let mut text = match log_tail::stability_warning(cx, sid) {
        Ok(t) => t,
        Err(f) => {
            cx.warn(&format!("the stability warning could not be rendered: {f}"));
            "[WORKFLOW STABILITY WARNING]".to_string()
        }
    };
    for w in warnings.iter().filter(|w| fresh.contains(&w.name)) {
        text.push_str(&format!("\ntriage: {}", w.message));
    }
    r.add_system_message(text);
}

fn session_start(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    let pruned = sessions::prune_starts(cx);
    if pruned > 0 {
        cx.trace(
            "info",
            &format!("removed {pruned} call starts older than a day that no PostToolUse took"),
        );
    }
    let mut parts = Vec::new();
    let not_closed: Vec<String> = breaker::status_all(cx)?
        .into_iter()
        .filter_map(|s| breaker_line(&s))
        .collect();
    if !not_closed.is_empty() {
        parts.push(format!(
            "Circuit breakers not closed (`triage breaker status` shows why):\n{}",
            not_closed.join("\n")
        ));
    }
    let earlier = log_tail::unresolved_elsewhere(cx, p.session_id())?;
    if earlier.count > 0 {
        parts.push(format!(
            "Unresolved errors from earlier sessions of this project: {} ({}). `triage report` summarizes them; `triage record-error --resolve ID` closes one.",
            earlier.count,
            earlier.summary()
        ));
    }
    if parts.is_empty() {
        return Ok(Response::default());
    }
    Ok(Response::context(
        "SessionStart",
        format!("triage: {}", parts.join("\n")),
    ))
}
