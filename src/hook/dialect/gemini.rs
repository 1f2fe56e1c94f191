//! Google Gemini CLI's hooks (`docs/hooks/reference.md` in google-gemini/gemini-cli): snake_case
//! payloads with `session_id`, `transcript_path`, `cwd`, `hook_event_name` and an ISO
//! `timestamp`; events `BeforeTool`, `AfterTool`, `BeforeAgent`, `AfterAgent`, `SessionStart`
//! and others; answers are JSON on stdout with `decision: "deny"` and `reason`, and
//! `hookSpecificOutput.additionalContext`.
//!
//! A tool's failure comes in `AfterTool` as `tool_response.error`, and a shell command's
//! non-zero exit as an `Exit Code: N` line in `tool_response.llmContent`
//! (`packages/core/src/tools/shell.ts`).

use super::{
    canonical_tool, context_of, denial, shell_error, shell_exit, str_of, Decoded, Encoded,
};
use crate::hook::codec::Response;
use serde_json::{json, Map, Value};

/// Events only Gemini CLI sends.
const OWN_EVENTS: &[&str] = &[
    "BeforeTool",
    "AfterTool",
    "BeforeAgent",
    "AfterAgent",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
    "PreCompress",
];

/// What Gemini CLI puts in `prompt_response` for a final answer with no text.
const EMPTY_PLACEHOLDER: &str = "[no response text]";

/// Gemini CLI's built-in tools under the names the policy and the classifier know.
const TOOLS: &[(&str, &str)] = &[
    ("run_shell_command", "Bash"),
    ("read_file", "Read"),
    ("read_many_files", "Read"),
    ("write_file", "Write"),
    ("replace", "Edit"),
    ("glob", "Glob"),
    ("search_file_content", "Grep"),
    ("grep_search", "Grep"),
    ("list_directory", "LS"),
];

/// An event name only Gemini CLI uses, or (for the names it shares with Claude Code) the
/// `timestamp` Claude Code never sends.
pub(super) fn claims(v: &Value) -> bool {
    let Some(event) = str_of(v, "hook_event_name") else {
        return false;
    };
    OWN_EVENTS.contains(&event)
        || (v.get("timestamp").is_some_and(Value::is_string)
            && matches!(event, "SessionStart" | "SessionEnd" | "Notification"))
}

/// The text of `llmContent` (a string, a part `{text}`, or a list of parts), with the
/// `<untrusted_context>` wrapper Gemini CLI puts around tool output taken off.
fn llm_text(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(llm_text)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(o) => o
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    };
    let t = text.trim();
    let t = t
        .strip_prefix("<untrusted_context>")
        .and_then(|t| t.strip_suffix("</untrusted_context>"))
        .unwrap_or(t);
    t.trim()
        .lines()
        .map(|l| l.strip_prefix("Output: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn decode(v: Value) -> Option<Decoded> {
    let native = str_of(&v, "hook_event_name")?.to_string();
    let mut p = Map::new();
    // Its chat file is no Claude Code transcript: the core must not read it as one.
    for key in ["session_id", "cwd"] {
        if let Some(x) = v.get(key) {
            p.insert(key.into(), x.clone());
        }
    }
    let tool = str_of(&v, "tool_name").map(|t| canonical_tool(t, TOOLS));
    let event = match native.as_str() {
        "BeforeTool" => "PreToolUse",
        "AfterTool" => {
            let response = v.get("tool_response").cloned().unwrap_or(Value::Null);
            let text = llm_text(response.get("llmContent").unwrap_or(&Value::Null));
            let error = response.get("error").filter(|e| !e.is_null());
            let code = response
                .get("data")
                .and_then(|d| d.get("exitCode"))
                .and_then(Value::as_i64)
                .filter(|c| *c != 0)
                .or_else(|| shell_exit(&text));
            let failure = match (tool.as_deref(), code, error) {
                (Some("Bash"), Some(code), _) => Some(shell_error(code, &text)),
                (_, _, Some(e)) => Some(
                    e.get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| e.to_string(), str::to_string),
                ),
                _ => None,
            };
            match failure {
                Some(error) => {
                    p.insert("error".into(), Value::from(error));
                    "PostToolUseFailure"
                }
                None => {
                    p.insert("tool_response".into(), Value::from(text));
                    "PostToolUse"
                }
            }
        }
        "AfterAgent" => {
            // The final text of the turn is the output the checks judge; an empty one comes
            // as the client's placeholder (`fireAfterAgentHookSafe`,
            // `packages/core/src/core/client.ts`).
            let said = match v.get("prompt_response") {
                Some(Value::String(s)) if s.trim() == EMPTY_PLACEHOLDER => json!(""),
                Some(x) => x.clone(),
                None => json!(""),
            };
            p.insert("last_assistant_message".into(), said);
            if let Some(a) = v.get("stop_hook_active") {
                p.insert("stop_hook_active".into(), a.clone());
            }
            "Stop"
        }
        "BeforeAgent" => "UserPromptSubmit",
        "SessionStart" => "SessionStart",
        _ => return None,
    };
    p.insert("hook_event_name".into(), Value::from(event));
    if let Some(tool) = tool {
        p.insert("tool_name".into(), Value::from(tool));
        p.insert(
            "tool_input".into(),
            v.get("tool_input").cloned().unwrap_or(Value::Null),
        );
    }
    Some(Decoded {
        payload: Value::Object(p),
        native,
    })
}

pub(super) fn encode(native: &str, r: &Response) -> Encoded {
    let mut out = Map::new();
    if let Some(m) = &r.system_message {
        out.insert("systemMessage".into(), Value::from(m.as_str()));
    }
    match native {
        "BeforeTool" => {
            if let Some(why) = denial(r) {
                out.insert("decision".into(), Value::from("deny"));
                out.insert("reason".into(), Value::from(why));
            }
        }
        // `deny` rejects the final answer and sends `reason` to the agent as its next prompt.
        "AfterAgent" if r.decision.as_deref() == Some("block") => {
            out.insert("decision".into(), Value::from("deny"));
            out.insert(
                "reason".into(),
                Value::from(r.reason.clone().unwrap_or_default()),
            );
        }
        "AfterTool" | "BeforeAgent" | "SessionStart" => {
            if let Some(c) = context_of(r) {
                out.insert(
                    "hookSpecificOutput".into(),
                    json!({"hookEventName": native, "additionalContext": c}),
                );
            }
        }
        _ => {}
    }
    Encoded::json(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_commands_exit_code_in_llm_content_is_a_failure() {
        let v = json!({"session_id": "g", "hook_event_name": "AfterTool",
            "timestamp": "2026-11-28T10:00:00Z", "tool_name": "run_shell_command",
            "tool_input": {"command": "npm test"},
            "tool_response": {"llmContent": "<untrusted_context>\nOutput: FAIL x\nExit Code: 1\nProcess Group PGID: 7\n</untrusted_context>",
                "returnDisplay": "Command exited with code: 1"}});
        assert!(claims(&v));
        let d = decode(v).unwrap();
        assert_eq!(d.payload["hook_event_name"], "PostToolUseFailure");
        assert_eq!(d.payload["tool_name"], "Bash");
        assert_eq!(d.payload["error"], "Exit code 1\nFAIL x");
    }

    #[test]
    fn a_denied_call_and_a_rejected_answer_in_gemini_words() {
        let e = encode("BeforeTool", &Response::deny("open"));
        let v: Value = serde_json::from_str(e.stdout.as_deref().unwrap()).unwrap();
        assert_eq!(v, json!({"decision": "deny", "reason": "open"}));
        let e = encode("AfterAgent", &Response::block("say more"));
        let v: Value = serde_json::from_str(e.stdout.as_deref().unwrap()).unwrap();
        assert_eq!(v, json!({"decision": "deny", "reason": "say more"}));
    }
}
