//! The attempt loop's effects, in-process: the breaker gate before each attempt and the outcome
//! after it ([`crate::store::breakers::calls`]'s `check_in`/`record_in`, under the breaker's
//! exclusion), the classifier's verdict on a failure, the error log ([`crate::store::error_log`]'s
//! `record`, counters included) and the output check of `--until-output-ok`
//! ([`crate::store::project_files::judge`], as `check-output`). The breaker and the log are best
//! effort: when they cannot be used, `run` warns and goes on, like the commands themselves (SPEC
//! §2).

use super::Request;
use crate::core::attempt_plan;
use crate::core::breaker::CallReport;
use crate::core::breaker::Outcome;
use crate::core::classify::{self, ErrorObject, Overrides};
use crate::core::error_record::{ErrorRecord, Phase, Warning};
use crate::core::output_check::Input;
use crate::core::policy::{OutputRules, Policy};
use crate::core::vocab::Kind;
use crate::exec::child::Attempt;
use crate::exit::Failure;
use crate::store::breakers::calls::{self as breaker, template4_reason};
use crate::store::error_log;
use crate::store::ground::Ground;
use crate::store::project_files;
use chrono::SecondsFormat;
use serde_json::{json, Value};
use std::time::Duration;

/// The breaker's answer before an attempt.
pub enum Gate {
    /// Go ahead; hand the ticket back with the outcome.
    Go(Option<String>),
    /// Open, by this run's own failure: the retry goes ahead with the opener's ticket (the
    /// retry decision comes first within one run; the breaker stops the next run).
    Own(String),
    /// Refused: the message for stderr and the facts for the report.
    Refused {
        /// `triage run: breaker KEY is open; retry after TIME` and seed 000's Template 4.
        message: String,
        /// `{key, reason, retry_after_s, retry_at}`.
        facts: Value,
    },
}

/// Asks the breaker `key` whether an attempt may start. No key, no gate; a breaker that
/// cannot be read lets the attempt go ahead with a warning (`check_in` fails open) unless
/// `--strict`. `own`: the generation an earlier attempt of this run opened it into.
pub fn gate(
    g: &Ground,
    policy: &Policy,
    key: Option<&str>,
    session: Option<&str>,
    own: Option<u64>,
) -> Result<Gate, Failure> {
    let Some(key) = key else {
        return Ok(Gate::Go(None));
    };
    let r = breaker::check_in(g, policy, key, session)?;
    if r.allowed {
        return Ok(Gate::Go(r.ticket));
    }
    if r.reason == "open" && own == Some(r.generation) {
        return Ok(Gate::Own(crate::core::breaker::opener_ticket(r.generation)));
    }
    let at = r.retry_after_s.and_then(|s| {
        let secs = chrono::Duration::try_seconds(i64::try_from(s).ok()?)?;
        let at = g.now.checked_add_signed(secs)?;
        Some(at.to_rfc3339_opts(SecondsFormat::Secs, true))
    });
    let when = match (&at, r.retry_after_s) {
        (Some(at), Some(s)) => format!("{at} (in {s}s)"),
        _ => format!("it is reset (`triage breaker reset {}`)", r.key),
    };
    let message = format!(
        "triage run: breaker {} is open; retry after {when}\n{}",
        r.key,
        template4_reason(&r)
    );
    let facts = json!({
        "key": r.key,
        "reason": r.reason,
        "retry_after_s": r.retry_after_s,
        "retry_at": at,
    });
    Ok(Gate::Refused { message, facts })
}

/// Reports an attempt's outcome to the breaker `key`, with the ticket the gate gave.
/// Returns the breaker's state afterwards, for the report; a failure is a warning.
#[allow(clippy::too_many_arguments)]
pub fn breaker_outcome(
    g: &Ground,
    policy: &Policy,
    key: Option<&str>,
    session: Option<&str>,
    outcome: Outcome,
    ticket: Option<String>,
    error: Option<&ErrorObject>,
    elapsed: Duration,
) -> Option<Value> {
    let key = key?;
    let report = CallReport {
        outcome: Some(outcome),
        ticket,
        kind: error.map(|e| e.kind),
        detail: error.map(|e| e.detail.clone()),
        duration_ms: Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)),
    };
    match breaker::record_in(g, policy, key, session, &report) {
        Ok(r) => Some(json!({
            "key": r.key, "state": r.state, "effect": r.effect, "generation": r.generation,
            "transition": r.transition, "opens_unrecovered": r.opens_unrecovered,
        })),
        Err(f) => {
            g.warn(&format!(
                "could not record the attempt on breaker `{key}`: {f}"
            ));
            None
        }
    }
}

/// The classifier's verdict on a failed attempt: its end, the stderr tail, the agent and the
/// attempt number (for the retry advice), under `policy` (run's retry flags applied). A plain
/// non-zero exit that no rule recognises is a `tool_failure`.
pub fn classify_failure(
    g: &Ground,
    policy: &Policy,
    agent: Option<&str>,
    attempt_no: u32,
    attempt: &Attempt,
    seed: u64,
) -> Result<ErrorObject, Failure> {
    let o = Overrides {
        agent: agent.map(str::to_string),
        attempt: Some(attempt_no),
        ..Overrides::default()
    };
    let end = &attempt.end;
    let tail = String::from_utf8_lossy(&attempt.stderr_tail);
    let tail = policy.redact.redactor().text(&tail).into_owned();
    let ms = u64::try_from(attempt.elapsed.as_millis()).unwrap_or(u64::MAX);
    let input = attempt_plan::classify_input(end, &tail, ms);
    let e = warned(g, classify::classify(&input, &o, policy, seed));
    if attempt_plan::needs_fallback(end, &e) {
        return Ok(classify::classify(
            &attempt_plan::with_fallback_kind(input, end, &e.detail),
            &o,
            policy,
            seed,
        ));
    }
    Ok(e)
}

/// `--until-output-ok`: judges the attempt's stdout by the agent's output rules (or the
/// default ones: present and not empty). A rejected output is a `validation_failed` error,
/// classified like any other (never retried: seed 001); the check's own kind
/// (`output_missing`, `quality_failed`, …) is kept as `context.check_kind`.
pub fn check_stdout(
    g: &Ground,
    policy: &Policy,
    agent: Option<&str>,
    attempt: u32,
    stdout: &[u8],
) -> Result<Option<ErrorObject>, Failure> {
    let input = Input {
        agent: agent.map(str::to_string),
        output: Some(Value::String(String::from_utf8_lossy(stdout).into_owned())),
        ..Input::default()
    };
    let (verdict, _, _) = project_files::judge(g, policy, &input, &OutputRules::default());
    let Some(error) = verdict.error.filter(|_| !verdict.ok) else {
        return Ok(None);
    };
    let mut v = serde_json::to_value(&error)
        .map_err(|e| Failure::data(format!("cannot serialize the output check: {e}")))?;
    if let Some(m) = v.as_object_mut() {
        if let Some(Value::Object(c)) = m.get_mut("context") {
            c.insert("check_kind".into(), error.kind.as_str().into());
            c.insert("checks".into(), json!(verdict.checks));
        }
        m.insert("kind".into(), Kind::ValidationFailed.as_str().into());
        m.insert("retryable".into(), false.into());
    }
    let o = Overrides {
        agent: agent.map(str::to_string),
        attempt: Some(attempt),
        ..Overrides::default()
    };
    Ok(Some(warned(g, classify::classify(&v, &o, policy, 0))))
}

/// What the error log is told besides the error object.
pub struct Failed<'a> {
    /// The attempt, from 1.
    pub attempt: u32,
    /// How it ended, in words.
    pub end: String,
    /// How long it ran.
    pub elapsed: Duration,
    /// Partial outputs kept.
    pub preserved: Vec<String>,
    /// The record's agent: `--agent`, else the run's name.
    pub agent: &'a str,
    /// The work item's own breaker key, when it is not the agent's name.
    pub breaker_key: Option<&'a str>,
    /// The end of the attempt's stderr.
    pub stderr_tail: &'a [u8],
}

/// Bytes of stderr kept in a record's context.
const RECORD_TAIL: usize = 1024;

/// Appends one record to `logs/errors.jsonl` with `record-error`'s own function (its lock,
/// sequence and threshold counters). Returns the error id and the thresholds the record
/// crossed (each also a warning on stderr); a failure to record is a warning.
pub fn record_failure(
    g: &Ground,
    policy: &Policy,
    args: &Request,
    e: &ErrorObject,
    f: Failed,
) -> (Option<String>, Vec<Warning>) {
    let mut error = match serde_json::to_value(e) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    if let Some(Value::Object(c)) = error.get_mut("context") {
        let redactor = policy.redact.redactor();
        let command: Vec<String> = args
            .command
            .iter()
            .map(|c| redactor.text(&c.to_string_lossy()).into_owned())
            .collect();
        c.insert("command".into(), json!(command));
        c.insert("attempt".into(), f.attempt.into());
        c.insert("end".into(), f.end.into());
        let tail = &f.stderr_tail[f.stderr_tail.len().saturating_sub(RECORD_TAIL)..];
        let tail = String::from_utf8_lossy(tail);
        let tail = redactor.text(&tail);
        if !tail.trim().is_empty() {
            c.insert("stderr_tail".into(), tail.trim_end().into());
        }
    }
    let rec = ErrorRecord {
        session_id: args.session.clone(),
        workflow_id: args.workflow.clone(),
        phase: args.phase.as_deref().map(Phase::parse),
        agent: Some(f.agent.to_string()),
        task_id: args.task.clone(),
        breaker_key: f.breaker_key.map(str::to_string),
        retry_count: Some(f.attempt.saturating_sub(1)),
        duration_ms: Some(u64::try_from(f.elapsed.as_millis()).unwrap_or(u64::MAX)),
        preserved_outputs: f.preserved,
        error,
        ..ErrorRecord::default()
    };
    let size = args.phase.as_deref().and_then(|p| policy.phase(p)?.size);
    match error_log::record(g, policy, rec, size) {
        Ok(done) => {
            for w in &done.warnings {
                g.warn(&w.message);
            }
            (Some(done.record.error_id), done.warnings)
        }
        Err(f) => {
            g.warn(&format!(
                "could not record the failure in the error log: {f}"
            ));
            (None, Vec::new())
        }
    }
}

/// An attempt that started at `started` succeeded: the open failures of `unit` in this run's
/// workflow (else session) recorded by then are resolved as recovered by retry. Returns their
/// ids; a failure is a warning.
pub fn recovered(
    g: &Ground,
    args: &Request,
    unit: &str,
    started: chrono::DateTime<chrono::Utc>,
) -> Vec<String> {
    let scope = args
        .workflow
        .as_deref()
        .or(args.session.as_deref())
        .unwrap_or("");
    error_log::recovered(g, scope, unit, "run", Some(started))
}

/// The error object of an interrupt that came while waiting to retry.
pub fn interrupted_while_waiting(
    g: &Ground,
    policy: &Policy,
    agent: Option<&str>,
    attempt: u32,
    sig: i32,
) -> Result<ErrorObject, Failure> {
    let input = json!({
        "kind": Kind::Interrupted.as_str(),
        "interrupted": true,
        "signal": sig,
        "message": format!("interrupted (signal {sig}) while waiting to retry"),
    });
    let o = Overrides {
        agent: agent.map(str::to_string),
        attempt: Some(attempt),
        ..Overrides::default()
    };
    Ok(warned(g, classify::classify(&input, &o, policy, 0)))
}

/// The error object, its policy warnings given (a rule skipped, a filter over budget).
fn warned(g: &Ground, e: ErrorObject) -> ErrorObject {
    e.warnings.iter().for_each(|w| g.warn(w));
    e
}
