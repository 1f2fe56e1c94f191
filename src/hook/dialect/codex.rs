//! OpenAI Codex CLI's hooks: Claude Code's shape, with a `turn_id` on every payload
//! (`codex-rs/hooks/schema/generated/*.command.input.schema.json`). Its events keep Claude
//! Code's names; what differs: a failed shell command comes as `PostToolUse` with only the
//! command's output text as `tool_response` and no exit status (recorded from Codex 0.171:
//! `tests/data/clients/codex/`), so a failure is seen only where the response states its
//! status; an empty final answer is `last_assistant_message: null`; its transcripts are
//! rollouts in a format of their own, not read; and its answers are checked against closed
//! schemas (`*.command.output.schema.json`, `additionalProperties: false`, `hookEventName` one
//! of the event's own names).

use super::{canonical_tool, shell_error, shell_exit, str_of, Decoded, Encoded};
use crate::hook::codec::Response;
use serde_json::{Map, Value};

/// The events Codex sends that the core answers.
const EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "StopFailure",
];

/// Codex's shell tools, by the names its hooks have carried.
const TOOLS: &[(&str, &str)] = &[
    ("shell", "Bash"),
    ("local_shell", "Bash"),
    ("exec_command", "Bash"),
    ("unified_exec", "Bash"),
    ("shell_command", "Bash"),
];

/// Every Codex hook payload carries `turn_id` (a required field of each input schema), which
/// Claude Code's do not.
pub(super) fn claims(v: &Value) -> bool {
    v.get("turn_id").is_some_and(Value::is_string)
}

pub(super) fn decode(mut v: Value) -> Option<Decoded> {
    let native = str_of(&v, "hook_event_name")?.to_string();
    if !EVENTS.contains(&native.as_str()) {
        return None;
    }
    let obj = v.as_object_mut()?;
    // A rollout is no Claude Code transcript: the core must not read it as one.
    obj.remove("transcript_path");
    obj.remove("agent_transcript_path");
    // `null`: the turn ended with no final text.
    if matches!(native.as_str(), "Stop" | "SubagentStop")
        && obj.get("last_assistant_message").is_none_or(Value::is_null)
    {
        obj.insert("last_assistant_message".into(), Value::from(""));
    }
    if let Some(tool) = obj.get("tool_name").and_then(Value::as_str) {
        let tool = canonical_tool(tool, TOOLS);
        obj.insert("tool_name".into(), Value::from(tool));
    }
    // A shell command that says it exited non-zero is a failure: the core's
    // PostToolUseFailure. (Codex 0.171 sends the output alone: then this cannot be told.)
    if native == "PostToolUse" && obj.get("tool_name").and_then(Value::as_str) == Some("Bash") {
        let text = match obj.get("tool_response") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Object(o)) => o
                .get("output")
                .or_else(|| o.get("stdout"))
                .and_then(Value::as_str)
                .map(str::to_string),
            _ => None,
        };
        let code = obj
            .get("tool_response")
            .and_then(|r| r.get("exit_code"))
            .and_then(Value::as_i64)
            .filter(|c| *c != 0)
            .or_else(|| text.as_deref().and_then(shell_exit));
        if let Some(code) = code {
            let error = shell_error(code, text.as_deref().unwrap_or_default());
            obj.insert("hook_event_name".into(), Value::from("PostToolUseFailure"));
            obj.insert("error".into(), Value::from(error));
        }
    }
    Some(Decoded { payload: v, native })
}

/// Claude Code's answer, with `hookEventName` the event Codex sent and only the fields that
/// event's output schema allows.
pub(super) fn encode(native: &str, r: &Response) -> Encoded {
    let mut out = Map::new();
    let top = match native {
        // PreToolUse's output schema has no `decision`/`reason`.
        "PreToolUse" | "SessionStart" => &["continue", "stopReason", "systemMessage"][..],
        _ => &[
            "continue",
            "decision",
            "reason",
            "stopReason",
            "systemMessage",
        ][..],
    };
    let Ok(Value::Object(whole)) = serde_json::to_value(r) else {
        return Encoded::default();
    };
    for key in top {
        if let Some(v) = whole.get(*key) {
            out.insert((*key).to_string(), v.clone());
        }
    }
    let allowed: &[&str] = match native {
        "PreToolUse" => &[
            "permissionDecision",
            "permissionDecisionReason",
            "additionalContext",
        ],
        "PostToolUse" | "SessionStart" | "UserPromptSubmit" => &["additionalContext"],
        _ => &[],
    };
    if let Some(specific) = &r.hook_specific {
        let mut m = Map::new();
        for key in allowed {
            if let Some(v) = specific.get(*key) {
                m.insert((*key).to_string(), v.clone());
            }
        }
        if !m.is_empty() {
            m.insert("hookEventName".into(), Value::from(native));
            out.insert("hookSpecificOutput".into(), Value::Object(m));
        }
    }
    Encoded::json(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn post(response: Value) -> Value {
        json!({"session_id": "s", "turn_id": "t1", "hook_event_name": "PostToolUse",
            "cwd": "/w", "model": "m", "permission_mode": "default", "transcript_path": null,
            "tool_name": "Bash", "tool_use_id": "call_1", "tool_input": {"command": "make"},
            "tool_response": response})
    }

    #[test]
    fn a_shell_command_that_exited_non_zero_is_a_failure() {
        let d = decode(post(json!(
            "Exit code: 2\nWall time: 0.2 seconds\nOutput:\nmake: *** No rule"
        )))
        .unwrap();
        assert_eq!(d.native, "PostToolUse");
        assert_eq!(d.payload["hook_event_name"], "PostToolUseFailure");
        assert_eq!(d.payload["error"], "Exit code 2\nmake: *** No rule");
        let d = decode(post(json!("Exit code: 0\nOutput:\nok"))).unwrap();
        assert_eq!(d.payload["hook_event_name"], "PostToolUse");
        assert!(d.payload.get("error").is_none());
    }

    #[test]
    fn answers_name_the_event_codex_sent_and_only_its_fields() {
        let r = Response::context("PostToolUseFailure", "advice");
        let e = encode("PostToolUse", &r);
        let v: Value = serde_json::from_str(e.stdout.as_deref().unwrap()).unwrap();
        assert_eq!(
            v,
            json!({"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "advice"}})
        );
        let e = encode("PreToolUse", &Response::deny("open"));
        let v: Value = serde_json::from_str(e.stdout.as_deref().unwrap()).unwrap();
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
        assert_eq!(e.exit, None);
    }
}
