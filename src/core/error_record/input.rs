//! An input in whatever shape it comes (an error object, a raw error's text, a seed's YAML
//! record, a hook payload) as an [`ErrorRecord`], its error object decided by the classifier.
//! Shared by `record-error`, the hooks and `run`; nothing here opens a file.

use super::{ErrorRecord, Phase, Resolution};
use crate::core::classify::{self, ErrorObject, Overrides};
use crate::core::hook_payload::Payload;
use crate::core::policy::Policy;
use crate::core::vocab::Kind;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// An input in a seed's own shape, in ours: seed 001's `error_context` and seed 002's
/// `error_log` unwrapped (a list of one record too); `error_type` and a kind in a seed's
/// words (`SKILL_TIMEOUT`, `Validation error`) as a kind with the seed's category;
/// `error_message`/`message` as `detail`, `skill` as `agent`, `stage` as `phase`; the agent
/// and attempt inside `context` (seed 002) lifted out; `outcome: "SUCCESS on retry"` and
/// `resolution: "User selected: …"` (seed 001) read into the resolution. Every other field,
/// and every original word, is kept as given.
pub fn normalize(v: &Value) -> Value {
    let v = match v {
        Value::Array(a) if a.len() == 1 && a[0].is_object() => &a[0],
        v => v,
    };
    let Some(obj) = v.as_object() else {
        return v.clone();
    };
    if obj.contains_key("hook_event_name") {
        return v.clone();
    }
    let mut m = Map::new();
    for wrapper in ["error_context", "error_log"] {
        if let Some(Value::Object(inner)) = obj.get(wrapper) {
            m.extend(inner.clone());
        }
    }
    for (k, x) in obj {
        if !m.contains_key(k) && !(x.is_object() && (k == "error_context" || k == "error_log")) {
            m.insert(k.clone(), x.clone());
        }
    }
    let rename = |m: &mut Map<String, Value>, from: &str, to: &str| {
        if !m.contains_key(to) {
            if let Some(x) = m.remove(from) {
                m.insert(to.into(), x);
            }
        }
    };
    rename(&mut m, "error_message", "detail");
    rename(&mut m, "message", "detail");
    rename(&mut m, "skill", "agent");
    rename(&mut m, "stage", "phase");
    // The kind: ours, or a seed's word (kept as `error_type` when it was not ours).
    let word = ["kind", "error_type"]
        .iter()
        .filter_map(|k| m.get(*k).and_then(Value::as_str))
        .flat_map(|w| w.split('|'))
        .find_map(crate::core::vocab::seed_kind);
    if let Some(Value::String(k)) = m.get("kind") {
        if k.parse::<Kind>().is_err() {
            let k = k.clone();
            m.remove("kind");
            m.entry("error_type").or_insert(k.into());
        }
    }
    if let Some((kind, category)) = word {
        m.insert("kind".into(), kind.as_str().into());
        if let Some(c) = category {
            m.entry("category").or_insert(c.as_str().into());
        }
    }
    // Seed 002's context{agent, section, attempt}.
    let lifted = m.get("context").and_then(Value::as_object).map(|c| {
        (
            c.get("agent").filter(|a| a.is_string()).cloned(),
            c.get("attempt").and_then(Value::as_u64),
        )
    });
    if let Some((agent, attempt)) = lifted {
        if let Some(a) = agent {
            m.entry("agent").or_insert(a);
        }
        if let Some(n) = attempt {
            m.entry("retry_count")
                .or_insert(Value::from(n.saturating_sub(1)));
        }
    }
    // Seed 001's log: `resolution: "User selected: …"`, `outcome: "SUCCESS on retry"`.
    if let Some(Value::String(r)) = m.get("resolution") {
        if let Some(choice) = r.trim().strip_prefix("User selected:") {
            let choice = choice.trim().to_string();
            m.entry("user_choice").or_insert(choice.into());
        }
    }
    let outcome = m
        .get("outcome")
        .and_then(Value::as_str)
        .map(|o| o.trim().to_ascii_uppercase());
    let worked = match outcome.as_deref() {
        Some(o) if o.starts_with("SUCCESS") || o.starts_with("SUCCEEDED") => Some(true),
        Some(o) if o.starts_with("FAIL") => Some(false),
        _ => None,
    };
    if let Some(ok) = worked {
        let r = match m.remove("resolution") {
            Some(Value::Object(mut r)) => {
                r.entry("successful").or_insert(ok.into());
                Value::Object(r)
            }
            Some(Value::String(a)) => serde_json::json!({"action_taken": a, "successful": ok}),
            _ => serde_json::json!({"successful": ok}),
        };
        m.insert("resolution".into(), r);
    }
    // The caller's own id is kept beside ours.
    if let Some(id) = m.remove("error_id") {
        let ctx = m
            .entry("context")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(c) = ctx {
            c.entry("error_id").or_insert(id);
        }
    }
    Value::Object(m)
}

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

/// The classified record of `v` (see [`classified_record`]) at time `now` (a usage limit's reset
/// time becomes `retry_after_s`).
pub fn classified_at(
    v: &Value,
    policy: &Policy,
    retry_count: Option<u32>,
    now: Option<DateTime<Utc>>,
) -> (ErrorRecord, ErrorObject) {
    let v = &normalize(v);
    let mut rec = record_from_input(v);
    let given = std::mem::take(&mut rec.error);
    let overrides = Overrides {
        agent: rec.agent.clone(),
        attempt: retry_count.or(rec.retry_count).map(|n| n.saturating_add(1)),
        now,
        ..Overrides::default()
    };
    let object = classify::classify(v, &overrides, policy, 0);
    if let Ok(Value::Object(mut m)) = serde_json::to_value(&object) {
        if object.kind == Kind::Unknown {
            if let Some(k) = given.get("kind") {
                m.insert("kind".into(), k.clone());
            }
        }
        if v.get("hook_event_name").is_none() {
            keep_given(&mut m, given);
        }
        rec.error = m;
    } else {
        rec.error = given;
    }
    (rec, object)
}

/// Lays the input's own fields over the classifier's error object wherever the classifier
/// says nothing: nothing the caller wrote is dropped. `context` is merged (the caller's keys
/// win); the hook payload's own fields are not the caller's words and stay out.
fn keep_given(object: &mut Map<String, Value>, given: Map<String, Value>) {
    for (k, v) in given {
        match (k.as_str(), object.get_mut(&k), v) {
            ("context", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (ck, cv) in theirs {
                    mine.insert(ck, cv);
                }
            }
            (_, Some(_), _) => {}
            (_, None, v) => {
                object.insert(k, v);
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Seed 000's "Logging" line: `error_type`, `error_message` and a plain-string resolution.
    #[test]
    fn an_error_type_line_keeps_its_kind_phase_retries_and_resolution() {
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

    /// Seed 001's "Error Context Preservation" words (`SKILL_TIMEOUT`, ...).
    #[test]
    fn error_type_words_name_a_kind_in_any_case_and_a_category_names_none() {
        assert_eq!(kind_word("SKILL_TIMEOUT"), Some(Kind::Timeout));
        assert_eq!(kind_word("rate_limited"), Some(Kind::RateLimited));
        assert_eq!(kind_word("QUALITY_FAILURE"), None);
    }
}
