//! `triage record-error`: append one error record (SPEC §5) to `logs/errors.jsonl` under the
//! log's lock, keep the threshold counters beside it under the same lock, and answer with the
//! record plus the thresholds it crossed (seeds 000 and 001). `--resolve ID` appends the
//! resolution of an earlier record (seed 002), never rewriting a line.
//!
//! Other commands (the hook) call [`record`] in-process.

use crate::classify::{self, ErrorObject, Overrides};
use crate::context::{Context, Outcome};
use crate::error_log::{self, Written};
use crate::error_record::{
    self, ErrorRecord, Keys, LogLine, Phase, Resolution, ResolutionLine, Warning,
};
use crate::exit::Failure;
use crate::hook_io::Payload;
use crate::policy::Policy;
use crate::vocab::{Kind, Severity};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Arguments of `triage record-error`.
#[derive(clap::Args, Debug, Default)]
#[command(after_help = "Examples:\n  \
    echo '{\"kind\": \"timeout\", \"detail\": \"Agent exceeded 5 minute timeout\"}' | triage record-error --session s1 --phase 2 --agent statistician-consultant --retry-count 2\n  \
    echo 'connection reset by peer' | triage record-error --session s1 --agent researcher\n  \
    triage record-error --resolve err-20260204T143022123Z-000001 --action-taken retry --successful true")]
pub struct Args {
    /// Session id (else the input's `session_id`)
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Workflow id (else the input's `workflow_id`)
    #[arg(long, value_name = "ID")]
    pub workflow: Option<String>,
    /// Phase or stage, a number or a name
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// The agent (or skill, or tool) that failed
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Task id
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// Retries already made
    #[arg(long, value_name = "N")]
    pub retry_count: Option<u32>,
    /// What was done about it (the resolution's action_taken)
    #[arg(long, value_name = "ACTION")]
    pub resolution: Option<String>,
    /// A partial output that was kept (repeatable)
    #[arg(long = "preserved", value_name = "PATH")]
    pub preserved: Vec<String>,
    /// critical, error, warning or info
    #[arg(long, value_name = "SEVERITY")]
    pub severity: Option<Severity>,
    /// The error's kind, overriding the input's
    #[arg(long, value_name = "KIND")]
    pub kind: Option<Kind>,
    /// The error's message, overriding the input's
    #[arg(long, value_name = "TEXT")]
    pub detail: Option<String>,
    /// Agents in this phase's fan-out [default: the policy's phases.<phase>.size]
    #[arg(long, value_name = "N")]
    pub phase_size: Option<u32>,
    /// Append the resolution of the record with this error_id instead
    #[arg(long, value_name = "ERROR_ID", requires_all = ["action_taken", "successful"])]
    pub resolve: Option<String>,
    /// With --resolve: what was done
    #[arg(long, value_name = "ACTION", requires = "resolve")]
    pub action_taken: Option<String>,
    /// With --resolve: whether it worked
    #[arg(long, value_name = "BOOL", requires = "resolve")]
    pub successful: Option<bool>,
    /// What the person chose, when one was asked
    #[arg(long, value_name = "CHOICE")]
    pub user_choice: Option<String>,
}

/// A written record and the thresholds it crossed.
#[derive(Clone, Debug, Serialize)]
pub struct Recorded {
    /// The record as written.
    #[serde(flatten)]
    pub record: ErrorRecord,
    /// `session_failure_threshold`, `cascade`, `phase_failure_ratio`.
    pub warnings: Vec<Warning>,
}

/// Runs `triage record-error`.
pub fn run(args: &Args, cx: &Context) -> Result<Outcome, Failure> {
    if let Some(id) = &args.resolve {
        let resolution = Resolution {
            action_taken: args.action_taken.clone(),
            successful: args.successful,
            user_choice: args.user_choice.clone(),
        };
        let line = resolve(cx, id, resolution)?;
        if cx.global.text {
            return Ok(Outcome::text(format!("resolved {}", line.resolves)));
        }
        return Ok(Outcome::json(&line));
    }
    let input = read_input(cx)?;
    let mut rec = match &input {
        Some(v) => {
            let (rec, object) = classified_at(v, cx.policy()?, args.retry_count, Some(cx.now));
            object.warnings.iter().for_each(|w| cx.warn(w));
            rec
        }
        None if args.kind.is_some() || args.detail.is_some() => ErrorRecord::default(),
        None => {
            return Err(Failure::data(
                "stdin is empty; send an error object, a raw error or a hook payload, or give --kind/--detail",
            ))
        }
    };
    apply_flags(&mut rec, args);
    let size = match (args.phase_size, &rec.phase) {
        (Some(n), _) => Some(n),
        (None, Some(p)) => cx.policy()?.phase(&p.to_string()).and_then(|p| p.size),
        (None, None) => None,
    };
    let done = record(cx, rec, size)?;
    let negative = !done.warnings.is_empty();
    if cx.global.text {
        return Ok(Outcome::text(text(&done)).negative(negative));
    }
    Ok(Outcome::json(&done).negative(negative))
}

fn text(done: &Recorded) -> String {
    let r = &done.record;
    let mut out = format!(
        "recorded {} ({}) for {}",
        r.error_id,
        r.kind().unwrap_or("unknown"),
        r.agent.as_deref().unwrap_or("an unnamed agent")
    );
    for w in &done.warnings {
        out.push_str(&format!("\nwarning: {}: {}", w.name, w.message));
    }
    out
}

/// Stdin as JSON, or as the text of a raw error when it is not JSON.
fn read_input(cx: &Context) -> Result<Option<Value>, Failure> {
    let Some(bytes) = cx.read_stdin()? else {
        return Ok(None);
    };
    if let Ok(v) = crate::input::parse_json(&bytes) {
        return Ok(Some(v));
    }
    // A raw error is kept even when it is not UTF-8 (invalid bytes become U+FFFD), as
    // `classify` reads it: a failure is never dropped for its encoding.
    Ok(Some(Value::String(
        String::from_utf8_lossy(&bytes).trim_end().to_string(),
    )))
}

/// The log under the state root.
pub fn log_path(root: &Path) -> PathBuf {
    error_log::log_path(root)
}

/// Writes one record (see [`error_log::write_record`]) and evaluates the thresholds on the
/// counters. A record spooled because the log was busy crosses no threshold now; it is
/// counted when the next writer adds it to the log.
///
/// `error_id` is always assigned here (unique under the lock); `timestamp` is kept when the
/// caller set a valid one, else it is now.
pub fn record(
    cx: &Context,
    mut rec: ErrorRecord,
    phase_size: Option<u32>,
) -> Result<Recorded, Failure> {
    let thresholds = cx.policy()?.thresholds.clone();
    let root = cx.ensure_root()?;
    rec.timestamp = normalized_time(&rec.timestamp)
        .unwrap_or_else(|| cx.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    if !rec.error.contains_key("status") {
        rec.error.insert("status".into(), "error".into());
    }
    // A record kept out of the thresholds (an unguarded tool's failure) crosses none.
    let counts = rec.counts_toward_thresholds();
    let warnings = match error_log::write_record(cx, &root, &mut rec)? {
        Written::Logged(counters) if counts => {
            let phase = rec.phase.as_ref().map(Phase::to_string);
            let keys = Keys {
                session: rec.session_id.as_deref(),
                workflow: rec.workflow_id.as_deref(),
                phase: phase.as_deref(),
                agent: rec.agent.as_deref(),
            };
            error_record::warnings(&counters, &keys, &thresholds, phase_size)
        }
        Written::Logged(_) | Written::Pending(_) => Vec::new(),
    };
    Ok(Recorded {
        record: rec,
        warnings,
    })
}

fn normalized_time(text: &str) -> Option<String> {
    let t = chrono::DateTime::parse_from_rfc3339(text.trim()).ok()?;
    Some(
        t.with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    )
}

/// Appends the resolution of record `id`, copying the ids that group it. The record is
/// looked for without the lock (lines are never rewritten), so the lock is held only for
/// the append.
pub fn resolve(cx: &Context, id: &str, resolution: Resolution) -> Result<ResolutionLine, Failure> {
    let root = cx.ensure_root()?;
    let log = log_path(&root);
    let mut found: Option<ResolutionLine> = None;
    error_log::read_all_in(cx, &root, |bytes| {
        let Some(l) = LogLine::parse(bytes) else {
            return false;
        };
        if l.error_id.as_deref() == Some(id) && !l.is_resolution() {
            found = Some(ResolutionLine {
                resolves: id.to_string(),
                session_id: l.session_id.as_deref().map(String::from),
                workflow_id: l.workflow_id.as_deref().map(String::from),
                phase: l.phase().map(|p| p.to_phase()),
                agent: l.agent().map(String::from),
                kind: l.kind().map(String::from),
                category: l.category.as_deref().map(String::from),
                ..ResolutionLine::default()
            });
        }
        true
    })?;
    let mut line = found.ok_or_else(|| {
        Failure::data(format!(
            "no record with error_id `{id}` in {}; copy the id from record-error's output or `triage report`",
            log.display()
        ))
    })?;
    line.timestamp = cx.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    line.resolution = resolution;
    let mut value = serde_json::to_value(&line)
        .map_err(|e| Failure::data(format!("cannot serialize the resolution: {e}")))?;
    error_record::fit(&mut value, error_log::MAX_RECORD);
    let bytes = serde_json::to_vec(&value)
        .map_err(|e| Failure::data(format!("cannot serialize the resolution: {e}")))?;
    error_log::append_other(cx, &root, &bytes)?;
    Ok(line)
}

// ---------------------------------------------------------------------------------------------
// Input: an error object, a raw error, or a hook payload.

/// The error object for an input, as given: `status`, a `kind` that names one of SPEC §5's
/// kinds, else `unknown`, the message as `detail`, every other field as is. The classifier's
/// decision is laid over it by [`classified_record`].
pub fn error_fields(input: &Value) -> Map<String, Value> {
    let mut m = match input {
        Value::Object(o) => o.clone(),
        Value::Null => Map::new(),
        Value::String(s) => {
            let mut m = Map::new();
            m.insert("detail".into(), s.clone().into());
            m
        }
        other => {
            let mut m = Map::new();
            m.insert("detail".into(), other.to_string().into());
            m
        }
    };
    m.entry("status").or_insert_with(|| "error".into());
    let kind = ["kind", "error_type"]
        .iter()
        .filter_map(|k| m.get(*k).and_then(Value::as_str))
        .find_map(kind_word)
        .unwrap_or(Kind::Unknown);
    m.insert("kind".into(), kind.as_str().into());
    if !m.contains_key("detail") {
        let msg = ["error_message", "message", "error"]
            .iter()
            .find_map(|k| m.get(*k).and_then(Value::as_str).map(String::from));
        if let Some(msg) = msg {
            m.insert("detail".into(), msg.into());
        }
    }
    m
}

/// A kind written in SPEC §5's words or a seed's (`TIMEOUT`, `SKILL_TIMEOUT`).
fn kind_word(text: &str) -> Option<Kind> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_prefix("skill_").unwrap_or(&t);
    t.parse().ok()
}

const RECORD_FIELDS: &[&str] = &[
    "error_id",
    "timestamp",
    "session_id",
    "workflow_id",
    "phase",
    "stage",
    "agent",
    "skill",
    "task_id",
    "retry_count",
    "duration_ms",
    "preserved_outputs",
    "recovery_options",
    "resolution",
    "user_choice",
    "hook_event_name",
];

fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The record an input describes, its error object decided by the classifier (kind, tier,
/// retry advice, …); a kind the input names in a seed's words (`error_type: "TIMEOUT"`) is kept
/// when the classifier finds none.
pub fn classified_record(v: &Value, policy: &Policy, retry_count: Option<u32>) -> ErrorRecord {
    classified_at(v, policy, retry_count, None).0
}

/// [`classified_record`], with the classifier's error object as well (for the advice a hook
/// gives the model).
pub fn classified(
    v: &Value,
    policy: &Policy,
    retry_count: Option<u32>,
) -> (ErrorRecord, ErrorObject) {
    classified_at(v, policy, retry_count, None)
}

/// [`classified`] at time `now` (a usage limit's reset time becomes `retry_after_s`).
pub fn classified_at(
    v: &Value,
    policy: &Policy,
    retry_count: Option<u32>,
    now: Option<DateTime<Utc>>,
) -> (ErrorRecord, ErrorObject) {
    let mut rec = record_from_input(v);
    let given_kind = rec.error.get("kind").cloned();
    let overrides = Overrides {
        agent: rec.agent.clone(),
        attempt: retry_count.or(rec.retry_count).map(|n| n.saturating_add(1)),
        now,
        ..Overrides::default()
    };
    let object = classify::classify(v, &overrides, policy, 0);
    if let Ok(Value::Object(mut m)) = serde_json::to_value(&object) {
        if object.kind == Kind::Unknown {
            if let Some(k) = given_kind {
                m.insert("kind".into(), k);
            }
        }
        rec.error = m;
    }
    (rec, object)
}

/// The record an input describes (ids from its fields; the rest is the error object).
pub fn record_from_input(v: &Value) -> ErrorRecord {
    let Some(obj) = v.as_object() else {
        return ErrorRecord {
            error: error_fields(v),
            ..ErrorRecord::default()
        };
    };
    if obj.contains_key("hook_event_name") {
        return record_from_hook(&Payload::new(v.clone()));
    }
    let rest: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| !RECORD_FIELDS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let phase = obj.get("phase").or_else(|| obj.get("stage"));
    let mut resolution = match obj.get("resolution") {
        Some(Value::String(s)) => Some(Resolution {
            action_taken: Some(s.clone()),
            ..Resolution::default()
        }),
        Some(r @ Value::Object(_)) => serde_json::from_value(r.clone()).ok(),
        _ => None,
    };
    if let Some(choice) = text_of(obj.get("user_choice")) {
        resolution
            .get_or_insert_with(Resolution::default)
            .user_choice = Some(choice);
    }
    ErrorRecord {
        timestamp: text_of(obj.get("timestamp")).unwrap_or_default(),
        session_id: text_of(obj.get("session_id")),
        workflow_id: text_of(obj.get("workflow_id")),
        phase: phase.and_then(|p| match p {
            Value::Number(n) => n.as_u64().map(Phase::Number),
            Value::String(s) if !s.is_empty() => Some(Phase::parse(s)),
            _ => None,
        }),
        agent: text_of(obj.get("agent")).or_else(|| text_of(obj.get("skill"))),
        task_id: text_of(obj.get("task_id")),
        retry_count: obj
            .get("retry_count")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        duration_ms: obj.get("duration_ms").and_then(Value::as_u64),
        preserved_outputs: strings(obj.get("preserved_outputs")),
        recovery_options: obj
            .get("recovery_options")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        resolution,
        error: error_fields(&Value::Object(rest)),
        ..ErrorRecord::default()
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A hook payload (`PostToolUseFailure`, `StopFailure`, …) as a record.
fn record_from_hook(p: &Payload) -> ErrorRecord {
    let mut raw = Map::new();
    let detail = p
        .error()
        .map(String::from)
        .or_else(|| p.tool_response_text());
    if let Some(d) = detail.filter(|d| !d.is_empty()) {
        raw.insert("detail".into(), d.into());
    }
    if p.is_interrupt() {
        raw.insert("kind".into(), Kind::Interrupted.as_str().into());
    }
    let mut context = Map::new();
    for key in [
        "hook_event_name",
        "tool_name",
        "tool_use_id",
        "error_details",
        "agent_id",
    ] {
        if let Some(v) = p.0.get(key).filter(|v| !v.is_null()) {
            context.insert(key.into(), v.clone());
        }
    }
    raw.insert("context".into(), Value::Object(context));
    let agent = if p.is_subagent_tool() {
        p.subagent_type()
    } else {
        p.agent_type().or_else(|| p.tool_name())
    };
    ErrorRecord {
        session_id: p.session_id().map(String::from),
        agent: agent.map(String::from),
        task_id: p.tool_use_id().map(String::from),
        duration_ms: p.duration_ms(),
        error: error_fields(&Value::Object(raw)),
        ..ErrorRecord::default()
    }
}

/// Flags override the input's fields.
fn apply_flags(rec: &mut ErrorRecord, a: &Args) {
    let set = |slot: &mut Option<String>, v: &Option<String>| {
        if let Some(v) = v {
            *slot = Some(v.clone());
        }
    };
    set(&mut rec.session_id, &a.session);
    set(&mut rec.workflow_id, &a.workflow);
    set(&mut rec.agent, &a.agent);
    set(&mut rec.task_id, &a.task);
    if let Some(p) = &a.phase {
        rec.phase = Some(Phase::parse(p));
    }
    if let Some(n) = a.retry_count {
        rec.retry_count = Some(n);
    }
    rec.preserved_outputs.extend(a.preserved.iter().cloned());
    if a.resolution.is_some() || a.user_choice.is_some() {
        let r = rec.resolution.get_or_insert_with(Resolution::default);
        set(&mut r.action_taken, &a.resolution);
        set(&mut r.user_choice, &a.user_choice);
    }
    if let Some(s) = a.severity {
        rec.error.insert("severity".into(), s.as_str().into());
    }
    if let Some(k) = a.kind {
        rec.error.insert("kind".into(), k.as_str().into());
    }
    if let Some(d) = &a.detail {
        rec.error.insert("detail".into(), d.clone().into());
    }
    if rec.error.is_empty() {
        rec.error = error_fields(&Value::Object(std::mem::take(&mut rec.error)));
    }
    if !rec.error.contains_key("kind") {
        rec.error
            .insert("kind".into(), Kind::Unknown.as_str().into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seed_000_log_lines_keep_their_meaning() {
        let r = record_from_input(&json!({
            "timestamp": "2026-02-04T14:30:22Z",
            "session_id": "session-20260204-143022-12345",
            "phase": 2,
            "agent": "statistician-consultant",
            "error_type": "timeout",
            "error_message": "Agent exceeded 5 minute timeout",
            "retry_count": 2,
            "resolution": "user_escalation",
            "user_choice": "proceed_without"
        }));
        assert_eq!(r.kind(), Some("timeout"));
        assert_eq!(r.phase, Some(Phase::Number(2)));
        assert_eq!(r.retry_count, Some(2));
        assert_eq!(r.error["detail"], "Agent exceeded 5 minute timeout");
        let res = r.resolution.expect("resolution");
        assert_eq!(res.action_taken.as_deref(), Some("user_escalation"));
        assert_eq!(res.user_choice.as_deref(), Some("proceed_without"));
        assert!(!r.error.contains_key("session_id"));
    }

    #[test]
    fn raw_text_becomes_an_unknown_error_with_its_detail() {
        let r = record_from_input(&json!("connection reset by peer"));
        assert_eq!(r.kind(), Some("unknown"));
        assert_eq!(r.error["detail"], "connection reset by peer");
        assert_eq!(r.error["status"], "error");
    }

    #[test]
    fn hook_payloads_name_the_subagent_and_session() {
        let r = record_from_input(&json!({
            "hook_event_name": "PostToolUseFailure",
            "session_id": "s9",
            "tool_name": "Agent",
            "tool_input": {"subagent_type": "researcher"},
            "tool_use_id": "toolu_1",
            "error": "Command timed out after 2m 0s",
            "duration_ms": 120000
        }));
        assert_eq!(r.session_id.as_deref(), Some("s9"));
        assert_eq!(r.agent.as_deref(), Some("researcher"));
        assert_eq!(r.duration_ms, Some(120_000));
        assert_eq!(r.error["detail"], "Command timed out after 2m 0s");
        assert_eq!(r.error["context"]["hook_event_name"], "PostToolUseFailure");
    }

    #[test]
    fn seed_001_error_types_map_to_kinds() {
        assert_eq!(kind_word("SKILL_TIMEOUT"), Some(Kind::Timeout));
        assert_eq!(kind_word("rate_limited"), Some(Kind::RateLimited));
        assert_eq!(kind_word("QUALITY_FAILURE"), None);
    }
}
