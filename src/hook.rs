//! The Claude Code hook protocol: the codec ([`codec`]) and the answer to each event
//! (`triage hook`, the one command every Claude Code event in `settings.json` runs, reads the
//! payload and hands it to [`answer`], which routes on `hook_event_name` and answers with one
//! object in the hook output schema, or with nothing):
//!
//! - `PreToolUse`: the breaker gate for the subagent tool and for tools the policy names in
//!   `[breaker.<tool>]`; denies with Template 4 when open, else remembers when the call started
//!   and the probe ticket it was given.
//! - `PreSkillShellCommand` (a skill's shell command): the same gate for its tool (`Bash`,
//!   `PowerShell`), without a probe ticket or a remembered start ([`skill_shell`]).
//! - `PostToolUse`: completes a guarded call (error record, `timeout` past its configured
//!   timeout, outcome on the breaker with its ticket). A subagent call meets its SubagentStop by
//!   `agentId` (see [`crate::store::sessions`] and `calls`): in the background
//!   (`async_launched`) it leaves the call for SubagentStop; in the foreground it takes
//!   SubagentStop's verdict and tells the parent.
//! - `PostToolUseFailure`: classifies, records the error (once: a subagent SubagentStop already
//!   recorded is not recorded again), records a breaker failure, and tells the model the
//!   advised next step.
//! - `SubagentStop`, `Stop`: the output checks with the loop guard (`check-output`); a
//!   background subagent's call is completed at its SubagentStop, the only place its end is seen.
//! - `StopFailure`: classifies and records, within a deadline, through the client's exit signal.
//!   A subagent's (the API failed it, and no SubagentStop follows) is that subagent's failure,
//!   counted once with its call ([`subagent_failure`]).
//! - `UserPromptSubmit`: gives the model what could not be told at the time (pending words,
//!   see `pending`), as PostToolUse and Stop do too.
//! - `SessionStart`: names breakers that are not closed (what a call gets now) and unresolved
//!   errors of earlier sessions.
//!
//! It never blocks by accident: any failure is traced to `logs/triage.log` (and stderr, which
//! Claude Code only shows in its debug log) and the hook exits 0 with nothing on stdout.

mod agents;
pub mod breaker;
mod calls;
pub mod check_output;
pub mod codec;
pub mod dialect;
mod failure;
pub use failure::is_work;
mod log_tail;
mod pending;
mod permits;
mod results;
mod session_start;
mod skill_shell;
mod subagent_failure;
mod upstream;

use crate::context::Context;
use crate::core::error_record::{self, ErrorRecord, Warning};
use crate::core::hook_payload::Payload;
use crate::exit::Failure;
use crate::store::{error_log, sessions};
use codec::Response;
use serde_json::Value;

/// The answer to one payload (empty: print nothing).
pub fn answer(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    permits::renew_for_agent(cx, p);
    match p.event() {
        Some("PreToolUse") => calls::pre_tool_use(cx, p),
        Some(skill_shell::EVENT) => skill_shell::pre_skill_shell_command(cx, p),
        Some("PostToolUse") => {
            calls::post_tool_use(cx, p).map(|r| pending::deliver(cx, p, "PostToolUse", r))
        }
        Some("UserPromptSubmit") => Ok(pending::deliver(
            cx,
            p,
            "UserPromptSubmit",
            Response::default(),
        )),
        Some("PostToolUseFailure") => failure::post_tool_use_failure(cx, p),
        Some("SubagentStop") => calls::subagent_stop(cx, p),
        Some("Stop") => {
            let judged = check_output::judge_stop(cx, p)?;
            let mut response = judged.response;
            announce(cx, p, &judged.warnings, &mut response);
            pending::at_stop(cx, p, &mut response);
            Ok(response)
        }
        Some("StopFailure") => {
            stop_failure(cx, p);
            Ok(Response::default())
        }
        Some("SessionStart") => session_start::session_start(cx, p),
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
pub fn outlive_the_client(cx: &Context) {
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
    if subagent_failure::stop_failure(cx, p) {
        return;
    }
    if let Err(f) = record_failure(cx, p, &p.0) {
        // Not lost: the trace keeps what the record would have said.
        let said = p.last_assistant_message().unwrap_or_default();
        cx.warn(&format!(
            "StopFailure not recorded within its deadline ({f}): error {:?}, {:?}",
            p.error().unwrap_or_default(),
            said.chars().take(300).collect::<String>()
        ));
    }
    // The record first: it is what the deadline is for; the API's breaker hears of it after.
    upstream::hear_stop_failure(cx, p);
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

/// Classifies `input` and records it; returns the thresholds it crossed.
fn record_failure(cx: &Context, p: &Payload, input: &Value) -> Result<Vec<Warning>, Failure> {
    let (rec, object) = error_record::classified_at(input, cx.policy()?, None, Some(cx.now));
    object.warnings.iter().for_each(|w| cx.warn(w));
    store_record(cx, p, rec)
}

/// Writes the record. A session is its own workflow for the cascade rule (distinct failing
/// agents), unless the record names one.
fn store_record(cx: &Context, p: &Payload, mut rec: ErrorRecord) -> Result<Vec<Warning>, Failure> {
    if rec.session_id.is_none() {
        rec.session_id = p.session_id().map(str::to_string);
    }
    if rec.workflow_id.is_none() {
        rec.workflow_id = rec.session_id.clone();
    }
    Ok(error_log::record(&cx.ground(), cx.policy()?, rec, None)?.warnings)
}

/// Adds Template 5's warning to the answer for each threshold this session crosses for the
/// first time; a threshold already announced stays quiet.
fn announce(cx: &Context, p: &Payload, warnings: &[Warning], r: &mut Response) {
    let Some(sid) = p.session_id() else {
        return;
    };
    // One agent failing again and again in a session is told as the repeat line ("change
    // approach"), not as a workflow-wide warning: a session is not an orchestrated workflow.
    let warnings: Vec<&Warning> = warnings
        .iter()
        .filter(|w| w.name != "agent_failure_threshold")
        .collect();
    if warnings.is_empty() {
        return;
    }
    let names: Vec<&str> = warnings.iter().map(|w| w.name.as_str()).collect();
    let fresh = match sessions::first_announcements(&cx.ground(), sid, &names) {
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
