//! `triage hook`: the one command every Claude Code event in `settings.json` runs. It reads the
//! payload, routes on `hook_event_name`, and answers with one object in the hook output schema,
//! or with nothing:
//!
//! - `PreToolUse`: the breaker gate for the subagent tool and for tools the policy names in
//!   `[breaker.<tool>]`; denies with Template 4 when open, else remembers when the call started.
//! - `PostToolUse`: for a guarded tool, checks the subagent's output, records a `timeout` error
//!   when it ran past its configured timeout, and records the call's outcome on the breaker.
//! - `PostToolUseFailure`: classifies, records the error, records a breaker failure, and tells
//!   the model the advised next step.
//! - `SubagentStop`, `Stop`: the output checks with the loop guard (`check-output`).
//! - `StopFailure`: classifies and records (Claude Code ignores its output).
//! - `SessionStart`: names open breakers and unresolved errors of earlier sessions.
//!
//! It never blocks by accident: any failure is traced to `logs/triage.log` (and stderr, which
//! Claude Code only shows in its debug log) and the hook exits 0 with nothing on stdout.

mod session;

use crate::breaker::CallReport;
use crate::classify;
use crate::commands::breaker::{self, Outcome as CallOutcome};
use crate::commands::{check_output, record_error};
use crate::context::{Context, Outcome};
use crate::error_record::Warning;
use crate::exit::Failure;
use crate::hook_io::{Payload, Response};
use crate::vocab::Kind;
use serde_json::{json, Value};

/// Arguments of `triage hook`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Reads one Claude Code hook payload on stdin and answers in the hook output schema \
    (or prints nothing). It always exits 0: a failure is traced to <root>/logs/triage.log.\n\n\
    Examples:\n  \
    # in .claude/settings.json (written by `triage init`):\n  \
    {\"type\": \"command\", \"command\": \"/usr/local/bin/triage hook\"}\n  \
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
        Some("SubagentStop" | "Stop") => check_output::judge_hook(cx, p),
        Some("StopFailure") => {
            // Claude Code ignores this event's output, and kills the hook when it exits a few
            // tens of milliseconds later: record only, and spool rather than wait for a lock.
            cx.limit_lock_wait(STOP_FAILURE_LOCK_WAIT);
            record_failure(cx, p, &p.0)?;
            Ok(Response::default())
        }
        Some("SessionStart") => session_start(cx, p),
        _ => Ok(Response::default()),
    }
}

/// How long the `StopFailure` hook may wait for locks: the client exits and kills it about
/// 60 ms after it starts.
const STOP_FAILURE_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(25);

/// The breaker key of a guarded call: the subagent type for `Agent`/`Task`, or a tool the
/// policy names in `[breaker.<tool>]`. Other tools are not gated.
fn guarded_key<'p>(cx: &Context, p: &'p Payload) -> Result<Option<&'p str>, Failure> {
    if p.is_subagent_tool() {
        return Ok(p.subagent_type().or(p.tool_name()));
    }
    let Some(tool) = p.tool_name() else {
        return Ok(None);
    };
    let named = !crate::glob::matching(cx.policy()?.breaker.keys.keys(), tool).is_empty();
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
        let start = session::Start {
            key: key.to_string(),
            ticket: r.ticket,
            at_ms: cx.now.timestamp_millis(),
        };
        if let Err(f) = session::remember_start(cx, p.session_id(), id, &start) {
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
        .and_then(|id| session::take_start(cx, p.session_id(), id));
    if p.is_async_launched() {
        // Launched in the background: there is no output, and no end, to judge yet.
        return Ok(Response::default());
    }
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
    let mut failures: Vec<(Kind, String)> = Vec::new();
    if !response.is_empty() {
        failures.push((Kind::ValidationFailed, verdict_text(&response)));
    }
    let agent = p.subagent_type().unwrap_or(key);
    let limit = cx.policy()?.agent(agent).timeout;
    if let (Some(ms), Some(limit)) = (elapsed_ms, limit) {
        let limit_ms = u64::try_from(limit.0.as_millis()).unwrap_or(u64::MAX);
        if ms > limit_ms {
            let text = format!(
                "{agent} ran for {}, past its {limit} timeout",
                crate::duration::Dur(std::time::Duration::from_millis(ms))
            );
            response.add_context(
                "PostToolUse",
                format!("triage: {text}; recorded as a timeout. Treat its result with care, and give it a narrower task if you call it again."),
            );
            failures.push((Kind::Timeout, text));
        }
    }

    // The breaker first: the gate of the next call must not depend on the error log.
    let report = CallReport {
        outcome: Some(if failures.is_empty() {
            CallOutcome::Success
        } else {
            CallOutcome::Failure
        }),
        ticket: start.and_then(|s| s.ticket),
        kind: failures.first().map(|f| f.0),
        detail: failures.first().map(|f| f.1.clone()),
        duration_ms: elapsed_ms,
    };
    if let Err(f) = breaker::record_in(cx, key, p.session_id(), &report) {
        cx.warn(&format!("the breaker did not hear of this call: {f}"));
    }
    let mut warnings = Vec::new();
    for (kind, detail) in &failures {
        let input = json!({
            "kind": kind.as_str(),
            "detail": detail,
            "session_id": p.session_id(),
            "agent": agent,
            "task_id": p.tool_use_id(),
            "duration_ms": elapsed_ms,
            "context": {"hook_event_name": "PostToolUse", "tool_name": p.tool_name(), "agent_id": p.agent_id()},
        });
        match record_failure(cx, p, &input) {
            Ok(w) => warnings.extend(w),
            Err(f) => cx.warn(&format!("the failure was not recorded: {f}")),
        }
    }
    announce(cx, p, &warnings, &mut response);
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
    let (rec, object) = record_error::classified_at(&p.0, policy, None, Some(cx.now));
    object.warnings.iter().for_each(|w| cx.warn(w));
    // The breaker first: the gate of the next call must not depend on the error log.
    if let Some(key) = guarded_key(cx, p)? {
        let start = p
            .tool_use_id()
            .and_then(|id| session::take_start(cx, p.session_id(), id));
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
    let warnings = store_record(cx, p, rec).unwrap_or_else(|f| {
        cx.warn(&format!("the failure was not recorded: {f}"));
        Vec::new()
    });
    let mut r = Response::context("PostToolUseFailure", classify::hook_context(&object));
    announce(cx, p, &warnings, &mut r);
    Ok(r)
}

/// Classifies `input` and records it; returns the thresholds it crossed.
fn record_failure(cx: &Context, p: &Payload, input: &Value) -> Result<Vec<Warning>, Failure> {
    let (rec, object) = record_error::classified_at(input, cx.policy()?, None, Some(cx.now));
    object.warnings.iter().for_each(|w| cx.warn(w));
    store_record(cx, p, rec)
}

/// Writes the record. A session is its own workflow for the cascade rule (distinct failing
/// agents), unless the record names one.
fn store_record(
    cx: &Context,
    p: &Payload,
    mut rec: crate::error_record::ErrorRecord,
) -> Result<Vec<Warning>, Failure> {
    if rec.session_id.is_none() {
        rec.session_id = p.session_id().map(str::to_string);
    }
    if rec.workflow_id.is_none() {
        rec.workflow_id = rec.session_id.clone();
    }
    Ok(record_error::record(cx, rec, None)?.warnings)
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
    let fresh = match session::first_announcements(cx, sid, &names) {
        Ok(fresh) => fresh,
        Err(f) => {
            cx.warn(&format!("thresholds crossed but not announced: {f}"));
            return;
        }
    };
    if fresh.is_empty() {
        return;
    }
    let mut text = match session::stability_warning(cx, sid) {
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
    let pruned = session::prune_starts(cx);
    if pruned > 0 {
        cx.trace(
            "info",
            &format!("removed {pruned} call starts older than a day that no PostToolUse took"),
        );
    }
    let mut parts = Vec::new();
    let open: Vec<String> = breaker::status_all(cx)?
        .into_iter()
        .filter(|s| {
            s.state != crate::breaker::State::Closed && s.state != crate::breaker::State::Disabled
        })
        .map(|s| match s.half_open_in_s {
            Some(secs) if secs > 0 => {
                format!("{} ({}, probes allowed in {secs} s)", s.key, s.state)
            }
            _ => format!("{} ({})", s.key, s.state),
        })
        .collect();
    if !open.is_empty() {
        parts.push(format!(
            "Circuit breakers not closed: {}. Calls to these agents are refused until they recover; plan without them or wait. `triage breaker status` shows why.",
            open.join(", ")
        ));
    }
    let earlier = session::unresolved_elsewhere(cx, p.session_id())?;
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
