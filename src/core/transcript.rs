//! Claude Code transcripts (JSONL, one event a line): the last assistant text, found in the
//! tail of the file. Pure: handed the bytes the store read from the file's end.
//!
//! A transcript is written asynchronously and may lag or end in a torn line; a stop hook reads
//! it only when the payload has no `last_assistant_message`, and never reads it whole.

use serde_json::Value;

/// What a scan of a transcript tail found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scan {
    /// The text of the last assistant message.
    Found(String),
    /// Valid lines, but no assistant text among them.
    NoAssistantText {
        /// Lines that parsed.
        valid: usize,
        /// Lines that did not.
        malformed: usize,
    },
}

/// Scans `tail` from its end for the last assistant message with text. `from_start` says
/// whether `tail` is the whole file; when it is not, its first (partial) line is ignored.
/// Text blocks of one message split over several lines (same `message.id`) are joined.
pub fn last_assistant_text(tail: &[u8], from_start: bool) -> Scan {
    let mut lines: Vec<&[u8]> = tail.split(|b| *b == b'\n').collect();
    if !from_start && !lines.is_empty() {
        lines.remove(0);
    }
    let (mut valid, mut malformed) = (0, 0);
    let mut found: Option<(Option<String>, Vec<String>)> = None;
    for line in lines.iter().rev() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(event) = crate::core::json::parse_json(line) else {
            malformed += 1;
            continue;
        };
        valid += 1;
        let Some((id, text)) = assistant_text(&event) else {
            if found.is_some() {
                break;
            }
            continue;
        };
        match &mut found {
            None => found = Some((id, vec![text])),
            Some((want, parts)) if want.is_some() && *want == id => parts.push(text),
            Some(_) => break,
        }
    }
    match found {
        Some((_, mut parts)) => {
            parts.reverse();
            Scan::Found(parts.join("\n"))
        }
        None => Scan::NoAssistantText { valid, malformed },
    }
}

/// The tool calls in a transcript (`tool_use` blocks of assistant messages, each id once).
/// `from_start` as for [`last_assistant_text`]: a tail's first, partial line is ignored.
pub fn tool_uses(tail: &[u8], from_start: bool) -> u64 {
    let mut ids = std::collections::HashSet::new();
    let mut unnamed: u64 = 0;
    for (i, line) in tail.split(|b| *b == b'\n').enumerate() {
        if (i == 0 && !from_start) || !line.windows(8).any(|w| w == b"tool_use") {
            continue;
        }
        let Ok(event) = crate::core::json::parse_json(line) else {
            continue;
        };
        let Some(message) = event.get("message") else {
            continue;
        };
        let is_assistant = event.get("type").and_then(Value::as_str) == Some("assistant")
            || message.get("role").and_then(Value::as_str) == Some("assistant");
        let Some(Value::Array(blocks)) = message.get("content").filter(|_| is_assistant) else {
            continue;
        };
        for b in blocks {
            if b.get("type").and_then(Value::as_str) != Some("tool_use") {
                continue;
            }
            match b.get("id").and_then(Value::as_str) {
                Some(id) => {
                    ids.insert(id.to_string());
                }
                None => unnamed += 1,
            }
        }
    }
    (ids.len() as u64).saturating_add(unnamed)
}

/// An assistant event's message id and its text, when it has text.
fn assistant_text(event: &Value) -> Option<(Option<String>, String)> {
    let message = event.get("message")?;
    let is_assistant = event.get("type").and_then(Value::as_str) == Some("assistant")
        || message.get("role").and_then(Value::as_str) == Some("assistant");
    if !is_assistant {
        return None;
    }
    let text = match message.get("content")? {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    if text.trim().is_empty() {
        return None;
    }
    let id = message
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string);
    Some((id, text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostile_input::hostile_text;

    fn line(kind: &str, id: &str, content: Value) -> String {
        serde_json::json!({"type": kind, "message": {"role": kind, "id": id, "content": content}})
            .to_string()
    }

    #[test]
    fn counts_tool_uses_once_each() {
        let t = [
            line("user", "u1", "question".into()),
            line(
                "assistant",
                "a1",
                serde_json::json!([{"type": "text", "text": "reading"}, {"type": "tool_use", "id": "t1", "name": "Read"}]),
            ),
            line(
                "user",
                "u2",
                serde_json::json!([{"type": "tool_result", "tool_use_id": "t1"}]),
            ),
            line(
                "assistant",
                "a2",
                serde_json::json!([{"type": "tool_use", "id": "t2", "name": "Edit"}]),
            ),
            line(
                "assistant",
                "a2",
                serde_json::json!([{"type": "tool_use", "id": "t2", "name": "Edit"}]),
            ),
            "{not json tool_use".to_string(),
        ]
        .join("\n");
        assert_eq!(tool_uses(t.as_bytes(), true), 2);
        let none = line(
            "assistant",
            "a1",
            serde_json::json!("Done: all tests pass."),
        );
        assert_eq!(tool_uses(none.as_bytes(), true), 0);
    }

    #[test]
    fn finds_the_last_assistant_text() {
        let t = [
            line("user", "u1", "question".into()),
            line(
                "assistant",
                "a1",
                serde_json::json!([{"type": "text", "text": "first"}]),
            ),
            line("user", "u2", "more".into()),
            line(
                "assistant",
                "a2",
                serde_json::json!([{"type": "text", "text": "final answer"}]),
            ),
            line(
                "assistant",
                "a2",
                serde_json::json!([{"type": "tool_use", "name": "Read"}]),
            ),
        ]
        .join("\n");
        assert_eq!(
            last_assistant_text(t.as_bytes(), true),
            Scan::Found("final answer".into())
        );
    }

    #[test]
    fn joins_blocks_of_one_message_and_stops_at_another() {
        let t = [
            line("assistant", "a1", serde_json::json!("old")),
            line(
                "assistant",
                "a2",
                serde_json::json!([{"type": "text", "text": "part 1"}]),
            ),
            line(
                "assistant",
                "a2",
                serde_json::json!([{"type": "text", "text": "part 2"}]),
            ),
        ]
        .join("\n");
        assert_eq!(
            last_assistant_text(t.as_bytes(), true),
            Scan::Found("part 1\npart 2".into())
        );
    }

    #[test]
    fn partial_first_line_and_torn_last_line_are_skipped() {
        let good = line("assistant", "a1", serde_json::json!("kept"));
        let t = format!("t\": \"cut\"}}\n{good}\n{{\"type\": \"assis");
        assert_eq!(
            last_assistant_text(t.as_bytes(), false),
            Scan::Found("kept".into())
        );
    }

    #[test]
    fn malformed_and_empty_are_counted() {
        assert_eq!(
            last_assistant_text(b"not json\n{\"type\":\"user\"}\n", true),
            Scan::NoAssistantText {
                valid: 1,
                malformed: 1
            }
        );
        assert_eq!(
            last_assistant_text(b"", true),
            Scan::NoAssistantText {
                valid: 0,
                malformed: 0
            }
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn transcripts_never_panic(a in hostile_text(), b in hostile_text()) {
            // Lines that are JSON, nearly JSON, or an assistant event holding hostile text.
            let event = serde_json::json!({"type": "assistant", "message": {"id": "m", "content": [
                {"type": "text", "text": a.clone()}]}});
            let text = format!("{a}\n{event}\n{b}\n{event}\n{a}{b}");
            let _ = last_assistant_text(text.as_bytes(), true);
            let _ = last_assistant_text(text.as_bytes(), false);
        }
    }
}
