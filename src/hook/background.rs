//! A shell command the client moved to the background when it ran past its timeout: the
//! client reports it as a success (`PostToolUse`, `tool_response.backgroundTaskId` with
//! `timedOutAfterMs`), and its end comes later as a `<task-notification>` in a
//! `UserPromptSubmit` prompt (its task id, the call's tool use id, its output file, `failed`,
//! `completed`, `killed`, and a summary such as "failed with exit code 3").
//!
//! At the move, triage keeps a record of what happened (kind `timeout`, severity `info`, kept
//! out of the thresholds and out of the repeat counts: not a failure yet) and remembers the
//! call under its task id in the session. At the notification it judges the end as the call's
//! own failure would have been judged (classified, work or trouble, repeats, breakers, the
//! advised next step), and tells the model with the prompt's `additionalContext`. A
//! notification whose task id and tool use id are not a call triage saw moved in this session
//! (text a user typed, or pasted from elsewhere) changes nothing.

use super::codec::Response;
use crate::context::Context;
use crate::core::error_record;
use crate::core::hook_payload::Payload;
use crate::core::text;
use crate::store::files;
use crate::store::sessions::{self, Task};
use serde_json::{json, Value};

/// How much of the end of a failed task's output is read to classify its failure.
const OUTPUT_TAIL: u64 = 4096;

/// PostToolUse of a call the client moved to the background at its timeout: records what
/// happened and remembers the call; `false` when the payload is no such call.
pub(super) fn moved(cx: &Context, p: &Payload) -> bool {
    let response = p.tool_response();
    let (Some(task), Some(after_ms)) = (
        response
            .get("backgroundTaskId")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty()),
        response.get("timedOutAfterMs").and_then(Value::as_u64),
    ) else {
        return false;
    };
    let secs = after_ms.div_ceil(1000).max(1);
    let detail = format!(
        "Command ran past its {secs}s timeout and was moved to the background (task {task}): not a failure yet; its end is judged when the client reports it"
    );
    let input = json!({
        "hook_event_name": "PostToolUseFailure",
        "session_id": p.session_id(),
        "tool_name": p.tool_name(),
        "tool_input": p.tool_input(),
        "tool_use_id": p.tool_use_id(),
        "error": detail,
    });
    let policy = match cx.policy() {
        Ok(policy) => policy,
        Err(f) => {
            cx.warn(&format!("the moved command was not recorded: {f}"));
            return true;
        }
    };
    let (mut rec, _) = error_record::classified_at(&input, policy, None, Some(cx.now));
    for (key, value) in [
        ("kind", json!("timeout")),
        ("severity", json!("info")),
        ("retryable", json!(false)),
        ("counts_toward_thresholds", json!(false)),
        ("background_task", json!(task)),
    ] {
        rec.error.insert(key.into(), value);
    }
    rec.duration_ms = p.duration_ms();
    if let Err(f) = super::store_record(cx, p, rec) {
        cx.warn(&format!("the moved command was not recorded: {f}"));
    }
    let kept = Task {
        tool_use_id: p.tool_use_id().unwrap_or_default().to_string(),
        tool_name: p.tool_name().unwrap_or_default().to_string(),
        tool_input: p.tool_input().clone(),
        timeout_ms: after_ms,
        at_ms: cx.now.timestamp_millis(),
    };
    if let Err(f) = sessions::remember_task(&cx.ground(), p.session_id(), task, &kept) {
        cx.warn(&format!("the moved command's end will not be judged: {f}"));
    }
    true
}

/// One `<task-notification>` of a prompt.
#[derive(Debug, PartialEq)]
struct Notice<'a> {
    task: &'a str,
    tool_use_id: Option<&'a str>,
    output_file: Option<&'a str>,
    status: &'a str,
    summary: &'a str,
}

/// The text of `<tag>…</tag>` within `block`.
fn tag<'a>(block: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = block.find(&open)? + open.len();
    let len = block[start..].find(&close)?;
    Some(block[start..start + len].trim())
}

/// The task notifications in a prompt, in order.
fn notices(prompt: &str) -> Vec<Notice<'_>> {
    const OPEN: &str = "<task-notification>";
    const CLOSE: &str = "</task-notification>";
    let mut out = Vec::new();
    let mut rest = prompt;
    while let Some(at) = rest.find(OPEN) {
        let body = &rest[at + OPEN.len()..];
        let Some(end) = body.find(CLOSE) else {
            break;
        };
        let block = &body[..end];
        rest = &body[end + CLOSE.len()..];
        let (Some(task), Some(status)) = (tag(block, "task-id"), tag(block, "status")) else {
            continue;
        };
        out.push(Notice {
            task,
            tool_use_id: tag(block, "tool-use-id"),
            output_file: tag(block, "output-file"),
            status,
            summary: tag(block, "summary").unwrap_or_default(),
        });
    }
    out
}

/// The exit status in a summary such as `Background command "x" failed with exit code 3`.
fn exit_code(summary: &str) -> Option<i64> {
    let at = summary.rfind("exit code ")? + "exit code ".len();
    let digits: String = summary[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

/// The last lines of a failed task's output, where the client keeps it: only a regular file
/// named for this task (`…/tasks/<task id>.output`) is read, and only its end.
fn output_tail(cx: &Context, n: &Notice) -> Option<String> {
    let path = n.output_file?;
    if !path.ends_with(&format!("/tasks/{}.output", n.task)) {
        return None;
    }
    match files::read_tail(std::path::Path::new(path), OUTPUT_TAIL) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            // A cut first line is dropped when more follow.
            let text = match text.split_once('\n') {
                Some((_, rest)) if bytes.len() as u64 >= OUTPUT_TAIL && !rest.is_empty() => rest,
                _ => &text,
            };
            Some(text.trim_end().to_string()).filter(|t| !t.is_empty())
        }
        Err(e) => {
            cx.trace(
                "info",
                &format!("the background task's output is unread: {e}"),
            );
            None
        }
    }
}

/// UserPromptSubmit: judges the end of each command triage saw moved to the background that
/// the prompt's task notifications report; the words for the model, if any.
pub(super) fn notified(cx: &Context, p: &Payload) -> Option<String> {
    let prompt = p.str("prompt")?;
    if !prompt.contains("<task-notification>") {
        return None;
    }
    let mut said = Vec::new();
    for n in notices(prompt) {
        let g = cx.ground();
        let Some(task) = sessions::take_task(&g, p.session_id(), n.task) else {
            continue;
        };
        // The call triage saw moved, or the notice is not about it.
        if n.tool_use_id.is_some_and(|id| id != task.tool_use_id) {
            if let Err(f) = sessions::remember_task(&g, p.session_id(), n.task, &task) {
                cx.warn(&format!("the moved command's end will not be judged: {f}"));
            }
            continue;
        }
        let status = n.status.to_ascii_lowercase();
        if status == "completed" {
            cx.trace(
                "info",
                &format!("background task {} completed: {}", n.task, n.summary),
            );
            continue;
        }
        let mut error = match exit_code(n.summary) {
            Some(code) => format!("Exit code {code}"),
            None => n.summary.to_string(),
        };
        if status != "failed" {
            // Killed or stopped: what the summary says is the failure.
            error = format!("{error}\n{}", n.summary);
        }
        if let Some(tail) = output_tail(cx, &n) {
            error = format!("{error}\n{tail}");
        }
        let failure = Payload::new(json!({
            "hook_event_name": "PostToolUseFailure",
            "session_id": p.session_id(),
            "tool_name": task.tool_name,
            "tool_input": task.tool_input,
            "tool_use_id": task.tool_use_id,
            "error": error,
        }));
        match super::failure::post_tool_use_failure(cx, &failure) {
            Ok(r) => {
                if let Some(words) = words_of(&r) {
                    // The command and the client's summary are outside text: quoted as data.
                    let command = task
                        .tool_input
                        .get("command")
                        .and_then(Value::as_str)
                        .map(|c| text::quoted_max(c, 120))
                        .unwrap_or_default();
                    said.push(format!(
                        "triage: the command {command}, moved to the background at its timeout (task {}), ended: {}.\n{words}",
                        text::label(n.task),
                        text::quoted(n.summary.trim_end_matches('.'))
                    ));
                }
            }
            Err(f) => cx.warn(&format!(
                "the background task's failure was not judged: {f}"
            )),
        }
    }
    (!said.is_empty()).then(|| said.join("\n\n"))
}

/// What an answer tells the model: its `additionalContext` and its system message.
fn words_of(r: &Response) -> Option<String> {
    let context = r
        .hook_specific
        .as_ref()
        .and_then(|m| m.get("additionalContext"))
        .and_then(Value::as_str);
    let parts: Vec<&str> = context
        .into_iter()
        .chain(r.system_message.as_deref())
        .filter(|s| !s.is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_notification_of_a_prompt() {
        let prompt = "<task-notification>\n<task-id>b1</task-id>\n<tool-use-id>toolu_2</tool-use-id>\n<output-file>/tmp/x/tasks/b1.output</output-file>\n<status>failed</status>\n<summary>Background command \"wait\" failed with exit code 3</summary>\n</task-notification>\nand <task-notification><task-id>b2</task-id><status>completed</status></task-notification>";
        let found = notices(prompt);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].task, "b1");
        assert_eq!(found[0].tool_use_id, Some("toolu_2"));
        assert_eq!(found[0].output_file, Some("/tmp/x/tasks/b1.output"));
        assert_eq!(found[0].status, "failed");
        assert_eq!(exit_code(found[0].summary), Some(3));
        assert_eq!(found[1].status, "completed");
        assert!(notices("<task-notification><task-id>b3</task-id>").is_empty());
    }
}
