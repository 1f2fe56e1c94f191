//! GitHub Copilot CLI's hooks (docs.github.com, "GitHub Copilot CLI hooks reference";
//! `.github/hooks/*.json`, `"version": 1`). An event configured in camelCase (`preToolUse`)
//! gets camelCase fields (`sessionId`, `toolName`, `toolArgs`, `toolResult`) and no event name
//! in the payload: the wired command names it (`--event`); one configured in PascalCase gets
//! the VS Code extension's snake_case fields with `hook_event_name`. Answers: `preToolUse`
//! denies with `permissionDecision`; `postToolUseFailure` takes recovery guidance from stderr
//! when the hook exits 2; `agentStop`/`subagentStop` block with `decision`/`reason`.

use super::{canonical_tool, context_of, denial, str_of, Decoded, Encoded};
use crate::hook::codec::Response;
use serde_json::{Map, Value};

/// Copilot CLI's tools under the names the policy and the classifier know; its subagent tool
/// `task` is the core's subagent tool.
const TOOLS: &[(&str, &str)] = &[
    ("bash", "Bash"),
    ("powershell", "PowerShell"),
    ("view", "Read"),
    ("create", "Write"),
    ("edit", "Edit"),
    ("glob", "Glob"),
    ("grep", "Grep"),
    ("web_fetch", "WebFetch"),
    ("task", "Agent"),
];

/// The camelCase fields of its own format, or the `tool_result` of its VS Code one.
pub(super) fn claims(v: &Value) -> bool {
    [
        "sessionId",
        "toolName",
        "toolArgs",
        "toolResult",
        "errorContext",
    ]
    .iter()
    .any(|k| v.get(*k).is_some())
        || v.get("tool_result")
            .is_some_and(|r| r.get("result_type").is_some())
        || (v.get("timestamp").is_some_and(Value::is_string)
            && matches!(
                str_of(v, "hook_event_name"),
                Some("PreToolUse" | "PostToolUse" | "PostToolUseFailure" | "ErrorOccurred")
            ))
}

/// A field under its camelCase or its snake_case name.
fn field<'v>(v: &'v Value, camel: &str, snake: &str) -> Option<&'v Value> {
    v.get(camel)
        .or_else(|| v.get(snake))
        .filter(|x| !x.is_null())
}

fn text<'v>(v: &'v Value, camel: &str, snake: &str) -> Option<&'v str> {
    field(v, camel, snake)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The event in camelCase, whichever format named it.
fn event_of(v: &Value, named: Option<&str>) -> Option<String> {
    let name = str_of(v, "hook_event_name").or(named);
    let name = match name {
        Some("UserPromptSubmit") => "userPromptSubmitted".to_string(),
        Some("Stop") => "agentStop".to_string(),
        Some(n) => {
            let mut c = n.chars();
            c.next()
                .map(|f| f.to_ascii_lowercase().to_string() + c.as_str())
                .unwrap_or_default()
        }
        // A camelCase payload the command did not name: its fields tell which it is.
        None if field(v, "toolResult", "tool_result").is_some() => "postToolUse".into(),
        None if field(v, "toolName", "tool_name").is_some() => {
            if field(v, "error", "error").is_some_and(Value::is_string) {
                "postToolUseFailure".into()
            } else {
                "preToolUse".into()
            }
        }
        None if field(v, "errorContext", "error_context").is_some() => "errorOccurred".into(),
        None => return None,
    };
    Some(name)
}

pub(super) fn decode(v: Value, named: Option<&str>) -> Option<Decoded> {
    let native = event_of(&v, named)?;
    let mut p = Map::new();
    if let Some(id) = field(&v, "sessionId", "session_id") {
        p.insert("session_id".into(), id.clone());
    }
    if let Some(cwd) = v.get("cwd") {
        p.insert("cwd".into(), cwd.clone());
    }
    let tool = text(&v, "toolName", "tool_name").map(|t| canonical_tool(t, TOOLS));
    let event = match native.as_str() {
        "preToolUse" => "PreToolUse",
        "postToolUse" => {
            let result = field(&v, "toolResult", "tool_result")?;
            let kind = text(result, "resultType", "result_type").unwrap_or("success");
            let said = text(result, "textResultForLlm", "text_result_for_llm").unwrap_or("");
            match kind {
                "success" => {
                    p.insert("tool_response".into(), Value::from(said));
                    "PostToolUse"
                }
                "failure" | "error" => {
                    p.insert("error".into(), Value::from(said));
                    "PostToolUseFailure"
                }
                // The user's refusal is no failure of the tool.
                _ => return None,
            }
        }
        "postToolUseFailure" => {
            p.insert(
                "error".into(),
                Value::from(text(&v, "error", "error").unwrap_or("the tool failed")),
            );
            "PostToolUseFailure"
        }
        // The model API's own failure ended the turn.
        "errorOccurred" if text(&v, "errorContext", "error_context") == Some("model_call") => {
            let e = field(&v, "error", "error")?;
            let message = e.get("message").and_then(Value::as_str).unwrap_or_default();
            p.insert("error".into(), Value::from("unknown"));
            p.insert("last_assistant_message".into(), Value::from(message));
            "StopFailure"
        }
        _ => return None,
    };
    p.insert("hook_event_name".into(), Value::from(event));
    if let Some(tool) = tool {
        let mut input = match field(&v, "toolArgs", "tool_input") {
            Some(Value::String(s)) => {
                serde_json::from_str(s).unwrap_or_else(|_| Value::from(s.as_str()))
            }
            Some(x) => x.clone(),
            None => Value::Null,
        };
        if tool == "Agent" {
            // The subagent's type is what its breaker is keyed by.
            if let Some(o) = input.as_object_mut() {
                if let Some(t) = o.get("agent_type").cloned() {
                    o.entry("subagent_type").or_insert(t);
                }
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
        "preToolUse" => {
            if let Some(why) = denial(r) {
                out.insert("permissionDecision".into(), Value::from("deny"));
                out.insert("permissionDecisionReason".into(), Value::from(why));
            }
        }
        // A command hook's recovery guidance: stderr, with exit status 2.
        "postToolUseFailure" => {
            if let Some(c) = context_of(r) {
                return Encoded {
                    stdout: None,
                    stderr: Some(c),
                    exit: Some(2),
                };
            }
        }
        "agentStop" | "subagentStop" if r.decision.as_deref() == Some("block") => {
            out.insert("decision".into(), Value::from("block"));
            out.insert(
                "reason".into(),
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
    fn camel_case_payloads_are_told_apart_by_their_fields() {
        let pre = json!({"sessionId": "s", "timestamp": 1, "cwd": "/w", "toolName": "bash",
            "toolArgs": "{\"command\":\"make\"}"});
        assert!(claims(&pre));
        let d = decode(pre, None).unwrap();
        assert_eq!(d.native, "preToolUse");
        assert_eq!(d.payload["hook_event_name"], "PreToolUse");
        assert_eq!(d.payload["tool_input"]["command"], "make");
        let failed =
            json!({"sessionId": "s", "toolName": "bash", "toolArgs": {}, "error": "Exit code 1"});
        assert_eq!(decode(failed, None).unwrap().native, "postToolUseFailure");
        let named = json!({"sessionId": "s", "toolName": "bash", "toolArgs": {}});
        assert_eq!(
            decode(named, Some("postToolUseFailure")).unwrap().native,
            "postToolUseFailure"
        );
    }

    #[test]
    fn recovery_guidance_goes_to_stderr_with_exit_2() {
        let e = encode(
            "postToolUseFailure",
            &Response::context("PostToolUseFailure", "advice"),
        );
        assert_eq!(e.exit, Some(2));
        assert_eq!(e.stderr.as_deref(), Some("advice"));
        assert_eq!(e.stdout, None);
    }
}
