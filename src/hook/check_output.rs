//! `check-output` as a Claude Code hook: on SubagentStop / Stop a failed check blocks the stop
//! with a reason the agent can act on; on PostToolUse of the subagent tool it tells the parent
//! that the output is unusable.
//!
//! The loop guard is a counter of consecutive rejections per session and agent, kept under
//! `<root>/rejections/` behind a lock. `stop_hook_active` is not trusted (it is absent at
//! first on SubagentStop and has stayed false across fires: claude-code #83365, #54360): the
//! counter alone decides. After `max_rejections` the agent is let go (seed 002: "fails
//! validation 3x → proceed without"), a `validation_failed` error is recorded, and the user is
//! told in `systemMessage`.
//!
//! An output that says it is BLOCKED is never blocked back (seed 004: a blocked worker stops
//! and escalates): the user is told, one error is recorded, and the agent may stop.

use crate::context::Context;
use crate::core::breaker::Outcome;
use crate::core::hook_payload::Payload;
use crate::core::output_check::{Final, Input, Verdict, DEFAULT_MAX_REJECTIONS};
use crate::core::policy::OutputRules;
use crate::core::transcript::{self, Scan};
use crate::core::vocab::{Criticality, Kind};
use crate::exit::Failure;
use crate::hook::codec::Response;
use crate::store::files;
use crate::store::project_files;
use crate::store::rejections::{bump, counter_path, reset};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The whole hook answer of `check-output` for one payload: SubagentStop, Stop, or
/// PostToolUse on `Agent`/`Task`; any other event gets the empty answer.
pub fn answer(cx: &Context, payload: &Payload, flags: &OutputRules) -> Result<Response, Failure> {
    match payload.event() {
        Some("SubagentStop") => Ok(stop(cx, payload, flags, true)?.response),
        Some("Stop") => Ok(stop(cx, payload, flags, false)?.response),
        Some("PostToolUse") if payload.is_subagent_tool() => post_tool_use(cx, payload, flags),
        _ => Ok(Response::default()),
    }
}

/// What a stop hook decided: the answer, and, once the agent may stop, how its call ended.
#[derive(Debug, Default)]
pub struct Judged {
    /// The hook answer.
    pub response: Response,
    /// `None` while the agent is blocked (it goes on); set when it may stop.
    pub last: Option<Final>,
    /// The thresholds its record crossed, for the caller to announce.
    pub warnings: Vec<crate::core::error_record::Warning>,
}

/// The stop hook's judgement for a SubagentStop or Stop payload.
pub fn judge_stop(cx: &Context, payload: &Payload) -> Result<Judged, Failure> {
    let subagent = payload.event() == Some("SubagentStop");
    stop(cx, payload, &OutputRules::default(), subagent)
}

fn stop(
    cx: &Context,
    payload: &Payload,
    flags: &OutputRules,
    subagent: bool,
) -> Result<Judged, Failure> {
    // The main session's Stop is judged as agent `main` unless it runs under --agent.
    let agent = payload
        .agent_type()
        .map(str::to_string)
        .or_else(|| (!subagent).then(|| "main".to_string()));
    let Some(output) = stop_output(cx, payload) else {
        let unknown = Final {
            outcome: Outcome::Ignored,
            ..Final::success()
        };
        return Ok(Judged {
            response: Response::default(),
            last: Some(unknown),
            warnings: Vec::new(),
        });
    };
    let input = Input {
        agent: agent.clone(),
        output: Some(output),
        tool_uses: super::results::tool_uses(cx, payload, agent.as_deref(), flags),
        ..Input::default()
    };
    let g = cx.ground();
    let (verdict, rules, criticality) = project_files::judge(&g, cx.policy()?, &input, flags);
    let key = payload
        .agent_id()
        .or(agent.as_deref())
        .unwrap_or("main")
        .to_string();
    let counter = counter_path(&g, payload.session_id().unwrap_or("no-session"), &key);
    // The agent's type is outside text: a name that is not a plain identifier is quoted.
    let who = &agent
        .as_deref()
        .map_or_else(|| "the subagent".into(), crate::core::text::label);
    if verdict.ok {
        reset(&g, &counter)?;
        // The main agent's passing stop is its success: its open failures in this session
        // (its workflow) are resolved. A subagent's is resolved when its call completes,
        // which knows when the call started.
        if let (false, Some(a)) = (subagent, agent.as_deref()) {
            let session = payload.session_id().unwrap_or("");
            crate::store::error_log::recovered(&g, session, a, "hook Stop", Some(cx.now));
        }
        return Ok(Judged {
            response: Response::default(),
            last: Some(Final::success()),
            warnings: Vec::new(),
        });
    }
    let failed = Final {
        outcome: Outcome::Failure,
        kind: verdict.error.as_ref().map(|e| e.kind),
        detail: Some(verdict.reason()),
        ..Final::success()
    };
    if let Some((response, last, warnings)) =
        super::results::api_failure(cx, payload, &verdict, who)
    {
        reset(&g, &counter)?;
        return Ok(Judged {
            response,
            last: Some(last),
            warnings,
        });
    }
    if verdict.failed().any(|c| c.check == "not_blocked") {
        // Seed 004: a blocked worker stops and escalates. Blocking it back would make it carry
        // on; the user is the one who can unblock it.
        reset(&g, &counter)?;
        let (recorded, warnings) = match record(cx, payload, &verdict, RecordAs::Blocked) {
            Ok((_, w)) => (true, w),
            Err(f) => {
                cx.warn(&format!("could not record the error: {f}"));
                (false, Vec::new())
            }
        };
        let mut r = Response::default();
        r.add_system_message(format!(
            "triage: {who} says it is blocked and needs you (a blocked agent stops and escalates):\n{}",
            verdict.reason()
        ));
        let last = Final {
            outcome: Outcome::Ignored,
            recorded,
            blocked: true,
            ..failed
        };
        return Ok(Judged {
            response: r,
            last: Some(last),
            warnings,
        });
    }
    if criticality == Criticality::Optional {
        let mut r = Response::default();
        r.add_system_message(format!(
            "triage: optional agent {who}'s output failed its checks; proceeding without blocking it.\n{}",
            verdict.reason()
        ));
        let last = Final {
            optional: true,
            ..failed
        };
        return Ok(Judged {
            response: r,
            last: Some(last),
            warnings: Vec::new(),
        });
    }
    // Seed 002's `validation_fails_3x`: the agent's own `max_rejections`, else its breaker's
    // `validation_failures`.
    let max = rules.max_rejections.unwrap_or_else(|| {
        cx.policy().map_or(DEFAULT_MAX_REJECTIONS, |p| {
            p.breaker_for(agent.as_deref().unwrap_or("main"))
                .validation_failures
        })
    });

    let count = bump(&g, &counter, &key)?;
    crate::store::trace::note(&g, || {
        let by = if rules.max_rejections.is_some() {
            "the agent's output.max_rejections"
        } else {
            "the breaker's validation_failures"
        };
        let then = if count <= max {
            "blocked, to fix its output".to_string()
        } else {
            "let go; the call is one validation_failed failure on its breaker".to_string()
        };
        format!(
            "decision output check of `{who}`: rejection {count} of {max} ({by}); {then}: {}",
            verdict.reason()
        )
    });
    if count <= max {
        return Ok(Judged {
            response: Response::block(format!(
                "triage check-output: the output is not ready (rejection {count} of {max}). Fix:\n{}\nThen finish your answer.",
                verdict.reason()
            )),
            last: None,
            warnings: Vec::new(),
        });
    }
    reset(&g, &counter)?;
    let (logged, recorded, warnings) = match record(cx, payload, &verdict, RecordAs::LetGo(max)) {
        Ok((path, w)) => (
            format!(" Recorded as validation_failed in {}.", path.display()),
            true,
            w,
        ),
        Err(f) => {
            cx.warn(&format!("could not record the error: {f}"));
            (String::new(), false, Vec::new())
        }
    };
    let mut r = Response::default();
    r.add_system_message(format!(
        "triage: {who}'s output still fails its checks after {max} rejections; letting it stop \
         so the work can go on without it.{logged}\n{}",
        verdict.reason()
    ));
    let last = Final {
        kind: Some(Kind::ValidationFailed),
        recorded,
        ..failed
    };
    Ok(Judged {
        response: r,
        last: Some(last),
        warnings,
    })
}

/// Why a stop-hook verdict is recorded.
#[derive(Clone, Copy, Debug)]
enum RecordAs {
    /// Rejected this many times, then let go.
    LetGo(u32),
    /// It said it is BLOCKED: escalated to the user, not retried.
    Blocked,
}

fn post_tool_use(
    cx: &Context,
    payload: &Payload,
    flags: &OutputRules,
) -> Result<Response, Failure> {
    Ok(judge_call(cx, payload, flags)?.0)
}

/// PostToolUse of a subagent call no SubagentStop judged: the answer to the parent, and how
/// the call failed (`None`: it did not, or its output was not checked).
pub fn judge_call(
    cx: &Context,
    payload: &Payload,
    flags: &OutputRules,
) -> Result<(Response, Option<Final>), Failure> {
    if payload.is_async_launched() {
        return Ok((Response::default(), None));
    }
    if payload.tool_response().is_null() {
        cx.warn("PostToolUse without tool_response; the subagent's output was not checked");
        return Ok((Response::default(), None));
    }
    let agent = payload.subagent_type().map(str::to_string);
    let input = Input {
        agent: agent.clone(),
        output: Some(Value::String(
            payload.tool_response_text().unwrap_or_default(),
        )),
        tool_uses: super::results::tool_uses(cx, payload, agent.as_deref(), flags),
        ..Input::default()
    };
    let (verdict, _, criticality) = project_files::judge(&cx.ground(), cx.policy()?, &input, flags);
    if verdict.ok {
        return Ok((Response::default(), None));
    }
    let who = &agent
        .as_deref()
        .map_or_else(|| "subagent".into(), crate::core::text::label);
    let mut failed = Final {
        outcome: Outcome::Failure,
        kind: verdict.error.as_ref().map(|e| e.kind),
        detail: Some(verdict.reason()),
        optional: criticality == Criticality::Optional,
        ..Final::success()
    };
    if let Some(check) = verdict.failed().find(|c| c.check == "api_error") {
        failed.api_error = true;
        failed.detail = Some(check.detail.clone());
        if let Some(note) = super::results::api_note(&failed, who) {
            return Ok((Response::block(note), Some(failed)));
        }
    }
    let text = format!(
        "The {who} subagent's output is unusable:\n{}",
        verdict.reason()
    );
    if criticality == Criticality::Optional {
        let mut r = Response::context(
            "PostToolUse",
            format!("{text}\n{who} is optional: proceed without its output."),
        );
        r.add_system_message(format!(
            "triage: optional agent {who}'s output failed its checks; proceeding"
        ));
        return Ok((r, Some(failed)));
    }
    let r = Response::block(format!(
        "{text}\nDo not rely on it: rerun the subagent with these fixed, or proceed without it."
    ));
    Ok((r, Some(failed)))
}

/// The final message: `last_assistant_message`, else the last assistant text of the
/// transcript. `None` (with a warning) when it cannot be known: a missing or malformed
/// transcript never fails the hook, and never blocks.
fn stop_output(cx: &Context, payload: &Payload) -> Option<Value> {
    let field = payload.0.get("last_assistant_message");
    if let Some(Value::String(s)) = field {
        if !s.trim().is_empty() {
            return Some(Value::String(s.clone()));
        }
    }
    let said_empty = matches!(field, Some(Value::String(_)));
    let empty = || Some(Value::String(String::new()));
    let Some(path) = payload.transcript_path() else {
        if said_empty {
            return empty();
        }
        cx.warn(
            "the payload has no last_assistant_message and no transcript path; output not checked",
        );
        return None;
    };
    // A client that sends `background_tasks` (2.1.330) omits `last_assistant_message` exactly
    // when the final text is empty; its transcript is written asynchronously, and with many
    // subagents at once it may not exist yet when SubagentStop comes.
    let omits_empty = field.is_none() && payload.0.get("background_tasks").is_some();
    let mut waited = std::time::Duration::ZERO;
    let read = loop {
        match last_text(cx, Path::new(path)) {
            Err(_) if omits_empty && waited < TRANSCRIPT_WAIT => {
                std::thread::sleep(TRANSCRIPT_POLL);
                waited += TRANSCRIPT_POLL;
            }
            r => break r,
        }
    };
    match read {
        Ok(Some(text)) => Some(Value::String(text)),
        Ok(None) => empty(),
        Err(why) if omits_empty => {
            cx.trace(
                "info",
                &format!("transcript {path}: {why}; no last_assistant_message from a client that omits it only when the final text is empty: judged empty"),
            );
            empty()
        }
        Err(why) => {
            cx.warn(&format!("transcript {path}: {why}; output not checked"));
            said_empty.then(String::new).map(Value::String)
        }
    }
}

/// How long a stop hook waits for a transcript that is not there yet, and how often it looks.
const TRANSCRIPT_WAIT: std::time::Duration = std::time::Duration::from_millis(200);
const TRANSCRIPT_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// The last assistant text of a transcript, reading only its tail (growing the window until
/// a message is found or the input limit is reached). `Ok(None)`: readable, but no assistant
/// text at all.
fn last_text(cx: &Context, path: &Path) -> Result<Option<String>, String> {
    let limit = (cx.max_input as u64).max(1);
    let mut window: u64 = 256 * 1024;
    loop {
        window = window.min(limit);
        let tail = files::read_tail(path, window).map_err(|e| e.to_string())?;
        let whole = (tail.len() as u64) < window;
        match transcript::last_assistant_text(&tail, whole) {
            Scan::Found(text) => return Ok(Some(text)),
            Scan::NoAssistantText { valid, malformed } if whole => {
                return match (valid, malformed) {
                    (0, 0) => Err("empty (it is written asynchronously and may lag)".into()),
                    (0, m) => Err(format!("malformed: none of its {m} lines is JSON")),
                    _ => Ok(None),
                };
            }
            Scan::NoAssistantText { .. } if window >= limit => {
                return Err(format!(
                    "no assistant message in its last {window} bytes (TRIAGE_MAX_INPUT)"
                ));
            }
            Scan::NoAssistantText { .. } => window = window.saturating_mul(4),
        }
    }
}

/// Appends the `validation_failed` error record (SPEC §5) of an agent let go.
fn record(
    cx: &Context,
    payload: &Payload,
    verdict: &Verdict,
    why: RecordAs,
) -> Result<(PathBuf, Vec<crate::core::error_record::Warning>), Failure> {
    let mut rec = serde_json::to_value(&verdict.error).unwrap_or_default();
    let Some(obj) = rec.as_object_mut() else {
        return Err(Failure::data("no error to record"));
    };
    let detail = obj
        .get("detail")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (detail, retries, resolution) = match why {
        RecordAs::LetGo(max) => (
            format!(
                "rejected {}, then let go: {detail}",
                match max {
                    1 => "once".to_string(),
                    n => format!("{n} times"),
                }
            ),
            max,
            json!({"action_taken": "proceed_without", "successful": false}),
        ),
        // Unresolved until the user answers: the next session's summary names it.
        RecordAs::Blocked => (
            format!("the agent says it is blocked; escalated to the user: {detail}"),
            0,
            Value::Null,
        ),
    };
    for (k, v) in [
        ("kind", json!("validation_failed")),
        ("category", json!("validation_failure")),
        ("detail", json!(detail)),
        ("session_id", json!(payload.session_id())),
        ("agent", json!(verdict.agent)),
        ("agent_id", json!(payload.agent_id())),
        ("retry_count", json!(retries)),
        ("source", json!("check-output")),
        ("resolution", resolution),
    ] {
        if !v.is_null() {
            obj.insert(k.into(), v);
        }
    }
    if let RecordAs::Blocked = why {
        // Seed 004: BLOCKED is a tier 2 error, escalation required.
        obj.insert("tier".into(), json!(2));
        obj.insert("action".into(), json!("escalate"));
    }
    // Through record-error: a unique error_id, the timestamp, and the threshold counters.
    // A session is its own workflow for the cascade rule, as `triage hook` records it.
    let mut rec = crate::core::error_record::record_from_input(&rec);
    if rec.workflow_id.is_none() {
        rec.workflow_id = rec.session_id.clone();
    }
    let recorded = crate::store::error_log::record(&cx.ground(), cx.policy()?, rec, None)?;
    Ok((
        crate::store::error_log::log_path(&cx.state_root()),
        recorded.warnings,
    ))
}
