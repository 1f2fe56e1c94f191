//! A Claude Code hook event's payload, as the classifier, the error records and the hook
//! handlers read it: every accessor tolerates a missing or oddly typed field. See
//! `shared/reference/claude-code-hooks.md` §1 for the protocol.

use serde_json::Value;

/// The subagent tool's names: `Agent` since v2.1.63, `Task` before.
pub const SUBAGENT_TOOLS: &[&str] = &["Agent", "Task"];

/// A hook event payload. Every accessor tolerates a missing or oddly typed field.
#[derive(Clone, Debug, Default)]
pub struct Payload(pub Value);

impl Payload {
    /// Wraps a parsed payload that is already redacted (or made by triage itself).
    pub fn new(v: Value) -> Payload {
        Payload(v)
    }

    /// A payload as it arrives from outside: every credential in it, and every field the
    /// policy names, replaced by its marker before anything reads it.
    pub fn redacted(mut v: Value, r: &crate::core::redact::Redactor) -> Payload {
        r.value(&mut v);
        Payload(v)
    }

    /// A string field at the top level.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// `hook_event_name`.
    pub fn event(&self) -> Option<&str> {
        self.str("hook_event_name")
    }

    /// `session_id`.
    pub fn session_id(&self) -> Option<&str> {
        self.str("session_id")
    }

    /// `agent_id` (only inside a subagent).
    pub fn agent_id(&self) -> Option<&str> {
        self.str("agent_id")
    }

    /// `agent_type`.
    pub fn agent_type(&self) -> Option<&str> {
        self.str("agent_type")
    }

    /// `tool_name`.
    pub fn tool_name(&self) -> Option<&str> {
        self.str("tool_name")
    }

    /// `tool_use_id`.
    pub fn tool_use_id(&self) -> Option<&str> {
        self.str("tool_use_id")
    }

    /// `tool_input` (null when missing).
    pub fn tool_input(&self) -> &Value {
        self.0.get("tool_input").unwrap_or(&Value::Null)
    }

    /// `tool_response` (null when missing).
    pub fn tool_response(&self) -> &Value {
        self.0.get("tool_response").unwrap_or(&Value::Null)
    }

    /// True when the tool is the subagent tool, under either name.
    pub fn is_subagent_tool(&self) -> bool {
        self.tool_name()
            .is_some_and(|t| SUBAGENT_TOOLS.contains(&t))
    }

    /// The subagent's type: `tool_input.subagent_type`, else `agent_type`.
    pub fn subagent_type(&self) -> Option<&str> {
        self.tool_input()
            .get("subagent_type")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .or_else(|| self.agent_type())
    }

    /// `error` as text (PostToolUseFailure's free text, StopFailure's enum word).
    pub fn error(&self) -> Option<&str> {
        self.str("error")
    }

    /// `is_interrupt`.
    pub fn is_interrupt(&self) -> bool {
        self.0
            .get("is_interrupt")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// `duration_ms`.
    pub fn duration_ms(&self) -> Option<u64> {
        self.0.get("duration_ms").and_then(Value::as_u64)
    }

    /// `last_assistant_message`.
    pub fn last_assistant_message(&self) -> Option<&str> {
        self.str("last_assistant_message")
    }

    /// `agent_transcript_path`, else `transcript_path`.
    pub fn transcript_path(&self) -> Option<&str> {
        self.str("agent_transcript_path")
            .or_else(|| self.str("transcript_path"))
    }

    /// The text blocks of a subagent tool's `tool_response.content`, joined; `None` when the
    /// response has none (or is `async_launched`, which has no output yet).
    pub fn tool_response_text(&self) -> Option<String> {
        let r = self.tool_response();
        if let Some(s) = r.as_str() {
            return Some(s.to_string());
        }
        let blocks = r.get("content")?.as_array()?;
        let texts: Vec<&str> = blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        Some(texts.join("\n"))
    }

    /// The subagent's id in a subagent tool's `tool_response` (`agentId`): the `agent_id` its
    /// own hooks and its SubagentStop carry.
    pub fn response_agent_id(&self) -> Option<&str> {
        self.tool_response()
            .get("agentId")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// True when a subagent was launched in the background and has no output yet.
    pub fn is_async_launched(&self) -> bool {
        self.tool_response().get("status").and_then(Value::as_str) == Some("async_launched")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_names_of_the_subagent_tool() {
        for name in ["Agent", "Task"] {
            let p = Payload::new(
                json!({"tool_name": name, "tool_input": {"subagent_type": "researcher"}}),
            );
            assert!(p.is_subagent_tool());
            assert_eq!(p.subagent_type(), Some("researcher"));
        }
        assert!(!Payload::new(json!({"tool_name": "Bash"})).is_subagent_tool());
    }

    #[test]
    fn tolerates_missing_and_odd_fields() {
        let p = Payload::new(json!({"session_id": 7, "tool_input": "x", "is_interrupt": "yes"}));
        assert_eq!(p.session_id(), None);
        assert_eq!(p.subagent_type(), None);
        assert!(!p.is_interrupt());
        assert_eq!(Payload::default().event(), None);
    }

    #[test]
    fn response_text_blocks() {
        let p = Payload::new(json!({"tool_response": {"status": "completed", "content": [
            {"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}}));
        assert_eq!(p.tool_response_text().as_deref(), Some("a\nb"));
        let p = Payload::new(json!({"tool_response": {"status": "async_launched"}}));
        assert!(p.is_async_launched());
    }
}
