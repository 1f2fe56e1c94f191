//! The Claude Code hook codec: a payload in ([`crate::core::hook_payload::Payload`], tolerant of
//! unknown and missing fields, and of both names of the subagent tool), one response object
//! out in the documented schema.
//! It only translates; what to answer is decided by the commands.
//!
//! See `shared/reference/claude-code-hooks.md` §1 for the protocol.

use serde::Serialize;
use serde_json::{Map, Value};

/// A hook response. Fields left `None` are not printed; an empty response prints nothing.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Response {
    /// `"block"` to block (Stop, SubagentStop, PostToolUse, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// Why, for the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `false` stops Claude.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_: Option<bool>,
    /// Shown to the user when `continue` is false.
    #[serde(rename = "stopReason", skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Shown to the user.
    #[serde(rename = "systemMessage", skip_serializing_if = "Option::is_none")]
    pub system_message: Option<String>,
    /// Event-specific output.
    #[serde(rename = "hookSpecificOutput", skip_serializing_if = "Option::is_none")]
    pub hook_specific: Option<Map<String, Value>>,
}

/// The protocol caps strings at 10,000 characters.
const MAX_CHARS: usize = 10_000;

fn capped(s: impl Into<String>) -> String {
    let s: String = s.into();
    if s.chars().count() <= MAX_CHARS {
        return s;
    }
    let mut out: String = s.chars().take(MAX_CHARS - 1).collect();
    out.push('…');
    out
}

impl Response {
    /// True when there is nothing to say (print nothing).
    pub fn is_empty(&self) -> bool {
        self == &Response::default()
    }

    /// `{"decision": "block", "reason": ...}`.
    pub fn block(reason: impl Into<String>) -> Response {
        Response {
            decision: Some("block".into()),
            reason: Some(capped(reason)),
            ..Response::default()
        }
    }

    /// PreToolUse: deny with a reason that goes to Claude.
    pub fn deny(reason: impl Into<String>) -> Response {
        Response::deny_as("PreToolUse", reason)
    }

    /// Deny with a reason that goes to Claude, for an event with PreToolUse's answer
    /// (`PreSkillShellCommand`).
    pub fn deny_as(event: &str, reason: impl Into<String>) -> Response {
        let mut r = Response::default();
        r.specific(event, "permissionDecision", Value::from("deny"));
        r.specific(
            event,
            "permissionDecisionReason",
            Value::from(capped(reason)),
        );
        r
    }

    /// `hookSpecificOutput.additionalContext` for `event`.
    pub fn context(event: &str, text: impl Into<String>) -> Response {
        let mut r = Response::default();
        r.add_context(event, text);
        r
    }

    /// Adds (or appends to) `additionalContext`.
    pub fn add_context(&mut self, event: &str, text: impl Into<String>) {
        let text: String = text.into();
        let joined = match self
            .hook_specific
            .as_ref()
            .and_then(|m| m.get("additionalContext"))
        {
            Some(Value::String(old)) => format!("{old}\n\n{text}"),
            _ => text,
        };
        self.specific(event, "additionalContext", Value::from(capped(joined)));
    }

    /// Adds (or appends to) `systemMessage`.
    pub fn add_system_message(&mut self, text: impl Into<String>) {
        let text: String = text.into();
        self.system_message = Some(capped(match self.system_message.take() {
            Some(old) => format!("{old}\n{text}"),
            None => text,
        }));
    }

    fn specific(&mut self, event: &str, key: &str, value: Value) {
        let m = self.hook_specific.get_or_insert_with(Map::new);
        m.insert("hookEventName".into(), Value::from(event));
        m.insert(key.into(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn responses_serialize_in_the_protocol_schema() {
        let r = Response::deny("open");
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "deny", "permissionDecisionReason": "open"}})
        );
        let mut r = Response::block("finish");
        r.add_system_message("note");
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"decision": "block", "reason": "finish", "systemMessage": "note"})
        );
        assert!(Response::default().is_empty());
        let long = Response::block("x".repeat(20_000));
        assert_eq!(long.reason.map(|s| s.chars().count()), Some(10_000));
    }
}
