//! OpenAI Codex CLI's hooks: Claude Code's shape, with a `turn_id` on every payload
//! (`codex-rs/hooks/schema/generated/*.command.input.schema.json`). Its events keep Claude
//! Code's names; what differs: a failed shell command comes as `PostToolUse` with only the
//! command's output text as `tool_response` and no exit status (recorded from Codex 0.171:
//! `tests/data/clients/codex/`); the status is in the session's rollout (`transcript_path`),
//! whose `item_completed` line for the call is written before the hook runs, and is read from
//! there ([`rollout_exit`]). An empty final answer is `last_assistant_message: null`. A rollout
//! is otherwise not read (it is no Claude Code transcript). Its answers are checked against
//! closed schemas (`*.command.output.schema.json`, `additionalProperties: false`,
//! `hookEventName` one of the event's own names).

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

/// How much of a rollout's end is read for a call's status: the call's line is among the
/// last written when its PostToolUse runs.
const ROLLOUT_TAIL: u64 = 1024 * 1024;

/// What a rollout says of a finished shell call.
#[derive(Debug, PartialEq)]
struct Completed {
    exit_code: i64,
    output: Option<String>,
    duration_ms: Option<u64>,
}

/// The `item_completed` line of call `id` in the last [`ROLLOUT_TAIL`] bytes of the rollout
/// at `path` (`{"type": "event_msg", "payload": {"type": "item_completed", "item": {"type":
/// "CommandExecution", "id", "exit_code", "aggregated_output", "duration": {"secs",
/// "nanos"}}}}`); `None` when it is not there (or the file cannot be read).
fn rollout_exit(path: &str, id: &str) -> Option<Completed> {
    let tail = crate::store::files::read_tail(std::path::Path::new(path), ROLLOUT_TAIL).ok()?;
    let quoted = serde_json::to_string(id).ok()?;
    tail.split(|b| *b == b'\n')
        .rev()
        .filter(|l| l.windows(quoted.len()).any(|w| w == quoted.as_bytes()))
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .find_map(|line| {
            let p = line.get("payload")?;
            let item = p.get("item")?;
            (p.get("type")?.as_str()? == "item_completed"
                && item.get("id")?.as_str()? == id
                && item.get("type").and_then(Value::as_str) == Some("CommandExecution"))
            .then_some(())?;
            let d = item.get("duration");
            let duration_ms = d.and_then(|d| {
                let secs = d.get("secs")?.as_u64()?;
                let nanos = d.get("nanos").and_then(Value::as_u64).unwrap_or(0);
                Some(secs * 1000 + nanos / 1_000_000)
            });
            Some(Completed {
                exit_code: item.get("exit_code")?.as_i64()?,
                output: item
                    .get("aggregated_output")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                duration_ms,
            })
        })
}

pub(super) fn decode(mut v: Value) -> Option<Decoded> {
    let native = str_of(&v, "hook_event_name")?.to_string();
    if !EVENTS.contains(&native.as_str()) {
        return None;
    }
    let obj = v.as_object_mut()?;
    // A rollout is no Claude Code transcript: the core must not read it as one.
    let rollout = obj
        .remove("transcript_path")
        .and_then(|p| p.as_str().map(str::to_string));
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
    // A shell command that exited non-zero is a failure: the core's PostToolUseFailure. Its
    // status: stated in the response, else the rollout's line for the call.
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
        let stated = obj
            .get("tool_response")
            .and_then(|r| r.get("exit_code"))
            .and_then(Value::as_i64)
            .or_else(|| text.as_deref().and_then(shell_exit));
        let id = obj
            .get("tool_use_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let completed = match (stated, &rollout, id) {
            (None, Some(path), Some(id)) => rollout_exit(path, id),
            _ => None,
        };
        if let Some(ms) = completed.as_ref().and_then(|c| c.duration_ms) {
            obj.entry("duration_ms").or_insert(Value::from(ms));
        }
        let code = stated
            .or(completed.as_ref().map(|c| c.exit_code))
            .filter(|c| *c != 0);
        if let Some(code) = code {
            let output = text
                .as_deref()
                .filter(|t| !t.trim().is_empty())
                .or(completed.as_ref().and_then(|c| c.output.as_deref()))
                .unwrap_or_default();
            let error = shell_error(code, output);
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
    fn the_exit_status_codex_leaves_out_is_read_from_its_rollout() {
        let dir = std::env::temp_dir().join(format!("triage-rollout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rollout.jsonl");
        let line = |id: &str, code: i64| {
            json!({"type": "event_msg", "payload": {"type": "item_completed", "item": {
                "type": "CommandExecution", "id": id, "status": "failed", "exit_code": code,
                "aggregated_output": "ls: cannot access", "duration": {"secs": 1, "nanos": 500_000_000}}}})
            .to_string()
        };
        std::fs::write(
            &path,
            format!("{}\n{}\n", line("call_0", 0), line("call_1", 2)),
        )
        .unwrap();
        let p = path.to_str().unwrap();
        assert_eq!(
            rollout_exit(p, "call_1"),
            Some(Completed {
                exit_code: 2,
                output: Some("ls: cannot access".into()),
                duration_ms: Some(1500)
            })
        );
        assert_eq!(rollout_exit(p, "call_0").map(|c| c.exit_code), Some(0));
        assert_eq!(rollout_exit(p, "call_9"), None);
        let mut v = post(json!("ls: cannot access\n"));
        v["transcript_path"] = json!(p);
        v["tool_use_id"] = json!("call_1");
        let d = decode(v).unwrap();
        assert_eq!(d.payload["hook_event_name"], "PostToolUseFailure");
        assert_eq!(d.payload["error"], "Exit code 2\nls: cannot access");
        assert_eq!(d.payload["duration_ms"], 1500);
        assert!(d.payload.get("transcript_path").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
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
