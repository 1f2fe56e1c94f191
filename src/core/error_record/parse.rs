//! What `record-error` is sent, parsed: JSON, a record in YAML (seeds 001 and 002 write
//! theirs so), or the text of a raw error.

use serde_json::Value;

/// The bytes as JSON, else as a YAML error record, else as the text of a raw error (kept even
/// when it is not UTF-8: invalid bytes become U+FFFD, as `classify` reads it, so a failure is
/// never dropped for its encoding).
pub fn sent(bytes: &[u8]) -> Value {
    if let Ok(v) = crate::core::json::parse_json(bytes) {
        return v;
    }
    if let Some(v) = yaml_record(bytes) {
        return v;
    }
    Value::String(String::from_utf8_lossy(bytes).trim_end().to_string())
}

/// Field names that say a YAML text is an error record, not the text of an error (which YAML
/// would read as a mapping too: `Error: connection refused`).
const YAML_RECORD_KEYS: &[&str] = &[
    "error_type",
    "error_message",
    "message",
    "skill",
    "stage",
    "agent",
    "kind",
    "detail",
    "error_id",
    "timestamp",
    "workflow_id",
    "session_id",
    "task_id",
    "severity",
    "resolution",
];

/// A YAML error record: seed 001's `error_context:` or log entry (`- timestamp: …`), seed
/// 002's `error_log:`, or a mapping with at least two of a record's field names.
fn yaml_record(bytes: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(bytes).ok()?;
    let v = crate::core::output_check::yaml_value(text).ok()?;
    let obj = match &v {
        Value::Array(a) if a.len() == 1 => a[0].as_object()?,
        Value::Object(o) => o,
        _ => return None,
    };
    let wrapped = ["error_context", "error_log"]
        .iter()
        .any(|k| obj.get(*k).is_some_and(Value::is_object));
    let known = obj
        .keys()
        .filter(|k| YAML_RECORD_KEYS.contains(&k.as_str()))
        .count();
    (wrapped || known >= 2).then_some(v)
}
