//! Cursor's agent hooks (cursor.com/docs/agent/hooks; `.cursor/hooks.json`, `"version": 1`):
//! camelCase event names in `hook_event_name`, snake_case fields, and a `conversation_id`,
//! `generation_id` and `workspace_roots` on every payload. Tool events: `preToolUse`,
//! `postToolUse`, `postToolUseFailure` (`error_message`, `failure_type`, `is_interrupt`),
//! `beforeShellExecution`; `subagentStop` ends a subagent; `stop` ends the agent loop.
//! Answers: `permission`/`user_message`/`agent_message` for the events before a call,
//! `additional_context` after one, `followup_message` at a stop.

use super::{canonical_tool, context_of, denial, str_of, Decoded, Encoded};
use crate::hook::codec::Response;
use serde_json::{Map, Value};

/// Cursor's agent tools under the names the policy and the classifier know; its subagent
/// tool `Task` is the core's subagent tool.
const TOOLS: &[(&str, &str)] = &[
    ("Shell", "Bash"),
    ("Read", "Read"),
    ("Write", "Write"),
    ("Grep", "Grep"),
    ("Task", "Agent"),
];

/// The fields every Cursor payload carries and no other client sends.
pub(super) fn claims(v: &Value) -> bool {
    [
        "conversation_id",
        "generation_id",
        "cursor_version",
        "workspace_roots",
    ]
    .iter()
    .any(|k| v.get(*k).is_some())
}

/// A field that may be a JSON object or that object serialized (Cursor sends some tool
/// inputs and outputs as strings of JSON).
fn object_or_json(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(s)) => {
            serde_json::from_str(s).unwrap_or_else(|_| Value::from(s.as_str()))
        }
        Some(v) => v.clone(),
        None => Value::Null,
    }
}

pub(super) fn decode(v: Value) -> Option<Decoded> {
    let native = str_of(&v, "hook_event_name")?.to_string();
    let mut p = Map::new();
    if let Some(id) = v.get("conversation_id") {
        p.insert("session_id".into(), id.clone());
    }
    for key in ["cwd", "tool_use_id"] {
        if let Some(x) = v.get(key) {
            p.insert(key.into(), x.clone());
        }
    }
    if let Some(ms) = v.get("duration").and_then(Value::as_u64) {
        p.insert("duration_ms".into(), Value::from(ms));
    }
    let tool = str_of(&v, "tool_name").map(|t| canonical_tool(t, TOOLS));
    let input = object_or_json(v.get("tool_input"));
    let event = match native.as_str() {
        "preToolUse" | "beforeMCPExecution" => "PreToolUse",
        "beforeShellExecution" => {
            p.insert("tool_name".into(), Value::from("Bash"));
            p.insert(
                "tool_input".into(),
                serde_json::json!({"command": v.get("command").cloned().unwrap_or(Value::Null)}),
            );
            "PreToolUse"
        }
        "postToolUse" => {
            p.insert("tool_response".into(), object_or_json(v.get("tool_output")));
            "PostToolUse"
        }
        "postToolUseFailure" => {
            let message = str_of(&v, "error_message").unwrap_or("the tool failed");
            // A timeout the client enforced reads as one whatever its message says.
            let error = match str_of(&v, "failure_type") {
                Some("timeout") if !message.to_ascii_lowercase().contains("timed out") => {
                    format!("Command timed out: {message}")
                }
                _ => message.to_string(),
            };
            p.insert("error".into(), Value::from(error));
            if let Some(i) = v.get("is_interrupt") {
                p.insert("is_interrupt".into(), i.clone());
            }
            "PostToolUseFailure"
        }
        "subagentStop" => {
            // The subagent's final text, when the payload carries it; without it its output
            // cannot be checked.
            let said = ["summary", "result", "text", "output"]
                .iter()
                .find_map(|k| v.get(*k).filter(|x| x.is_string()))?
                .clone();
            p.insert("last_assistant_message".into(), said);
            if let Some(t) = v.get("subagent_type") {
                p.insert("agent_type".into(), t.clone());
            }
            if let Some(id) = v.get("subagent_id").or_else(|| v.get("agent_id")) {
                p.insert("agent_id".into(), id.clone());
            }
            "SubagentStop"
        }
        "sessionStart" => "SessionStart",
        _ => return None,
    };
    p.insert("hook_event_name".into(), Value::from(event));
    if let Some(tool) = tool {
        let mut input = input;
        if tool == "Agent" {
            // The subagent's type is what its breaker is keyed by.
            if let (Some(o), Some(t)) = (input.as_object_mut(), v.get("subagent_type")) {
                o.entry("subagent_type").or_insert(t.clone());
            }
        }
        p.insert("tool_name".into(), Value::from(tool));
        p.insert("tool_input".into(), input);
    }
    Some(Decoded {
        payload: Value::Object(p),
        native,
    })
}

pub(super) fn encode(native: &str, r: &Response) -> Encoded {
    let mut out = Map::new();
    match native {
        "preToolUse" | "beforeShellExecution" | "beforeMCPExecution" => {
            if let Some(why) = denial(r) {
                out.insert("permission".into(), Value::from("deny"));
                out.insert("user_message".into(), Value::from(why));
                out.insert("agent_message".into(), Value::from(why));
            }
        }
        "postToolUse" | "postToolUseFailure" | "sessionStart" => {
            if let Some(c) = context_of(r) {
                out.insert("additional_context".into(), Value::from(c));
            }
        }
        // The only way to keep a stopping agent at work: a follow-up message it is sent.
        "subagentStop" | "stop" if r.decision.as_deref() == Some("block") => {
            out.insert(
                "followup_message".into(),
                Value::from(r.reason.clone().unwrap_or_default()),
            );
        }
        _ => {}
    }
    Encoded::json(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_tool_is_the_cores_failure_in_its_session() {
        let v = json!({"hook_event_name": "postToolUseFailure", "conversation_id": "c1",
            "generation_id": "g1", "workspace_roots": ["/w"], "tool_name": "Shell",
            "tool_input": {"command": "sleep 999"}, "tool_use_id": "t1",
            "error_message": "killed after 30s", "failure_type": "timeout", "duration": 30000});
        assert!(claims(&v));
        let d = decode(v).unwrap();
        assert_eq!(d.payload["session_id"], "c1");
        assert_eq!(d.payload["tool_name"], "Bash");
        assert_eq!(d.payload["error"], "Command timed out: killed after 30s");
        assert_eq!(d.payload["duration_ms"], 30000);
    }

    #[test]
    fn a_stop_without_its_final_text_is_not_judged() {
        let v = json!({"hook_event_name": "stop", "conversation_id": "c1", "status": "completed", "loop_count": 0});
        assert_eq!(decode(v), None);
    }
}
