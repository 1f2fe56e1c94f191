//! Dialects: the hook protocols of agent clients other than Claude Code, each only a decoding
//! (the client's payload → the internal payload [`crate::hook::answer`] understands, Claude
//! Code's shape) and an encoding (the internal [`Response`] → the client's JSON and exit
//! status). The judgments stay in one core, which never learns which client asked.
//!
//! The client is named on the wired command (`triage hook --client NAME`, as `triage init
//! --client NAME` writes it), or told from the payload by each client's distinctive fields
//! ([`detect`]). A client event with no counterpart in the core decodes to nothing: the hook
//! answers nothing. Where a client does not report a fact a judgment needs, that judgment is
//! not made (see `docs/clients.md`, "cannot").

mod codex;
mod copilot;
mod cursor;
mod gemini;

use super::codec::Response;
use serde_json::{Map, Value};

/// An agent client whose hook protocol triage speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Code: the internal shape itself.
    Claude,
    /// OpenAI Codex CLI.
    Codex,
    /// Google Gemini CLI.
    Gemini,
    /// Cursor's agent.
    Cursor,
    /// GitHub Copilot CLI.
    Copilot,
}

impl Client {
    /// The name `--client` takes.
    pub fn name(self) -> &'static str {
        match self {
            Client::Claude => "claude",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
            Client::Cursor => "cursor",
            Client::Copilot => "copilot",
        }
    }
}

/// A client payload decoded: the internal payload and the client's own name of its event
/// (the answer is encoded for that event).
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// The payload in the internal shape.
    pub payload: Value,
    /// The event as the client named it.
    pub native: String,
}

/// An answer in a client's format.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Encoded {
    /// One JSON line on stdout (`None`: nothing).
    pub stdout: Option<String>,
    /// Text on stderr, for a client that reads its answer there.
    pub stderr: Option<String>,
    /// The exit status, when not 0.
    pub exit: Option<u8>,
}

impl Encoded {
    /// A JSON object on stdout; an empty object is nothing.
    fn json(v: Map<String, Value>) -> Encoded {
        if v.is_empty() {
            return Encoded::default();
        }
        Encoded {
            stdout: Some(Value::Object(v).to_string()),
            ..Encoded::default()
        }
    }
}

/// The client whose payload `v` is, from the fields only that client sends; Claude Code when
/// none is distinctive.
pub fn detect(v: &Value) -> Client {
    if codex::claims(v) {
        Client::Codex
    } else if cursor::claims(v) {
        Client::Cursor
    } else if copilot::claims(v) {
        Client::Copilot
    } else if gemini::claims(v) {
        Client::Gemini
    } else {
        Client::Claude
    }
}

/// `v` (a payload of `client`) in the internal shape; `event` is the event the wired command
/// names (`--event`), for a payload that does not name its own. `None`: an event the core has
/// no counterpart for.
pub fn decode(client: Client, v: Value, event: Option<&str>) -> Option<Decoded> {
    match client {
        Client::Claude => {
            let native = str_of(&v, "hook_event_name").or(event)?.to_string();
            Some(Decoded { payload: v, native })
        }
        Client::Codex => codex::decode(v),
        Client::Gemini => gemini::decode(v),
        Client::Cursor => cursor::decode(v),
        Client::Copilot => copilot::decode(v, event),
    }
}

/// The core's answer `r` to a `client` event named `native`, in that client's format.
pub fn encode(client: Client, native: &str, r: &Response) -> Encoded {
    if r.is_empty() {
        return Encoded::default();
    }
    match client {
        Client::Claude => Encoded {
            stdout: serde_json::to_string(r).ok(),
            ..Encoded::default()
        },
        Client::Codex => codex::encode(native, r),
        Client::Gemini => gemini::encode(native, r),
        Client::Cursor => cursor::encode(native, r),
        Client::Copilot => copilot::encode(native, r),
    }
}

/// A non-empty string field of `v`.
fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// `hookSpecificOutput.<key>` of an answer, as text.
fn specific<'r>(r: &'r Response, key: &str) -> Option<&'r str> {
    r.hook_specific
        .as_ref()
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
}

/// What the core asked the model to be told: `additionalContext`, and a block's reason after
/// a tool ran (a tool that ran cannot be blocked; its reason is context).
fn context_of(r: &Response) -> Option<String> {
    let parts: Vec<&str> = [specific(r, "additionalContext"), r.reason.as_deref()]
        .into_iter()
        .flatten()
        .filter(|s| !s.is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// The reason of a denied call (`permissionDecision: deny`), if the answer denies.
fn denial(r: &Response) -> Option<&str> {
    (specific(r, "permissionDecision") == Some("deny"))
        .then(|| specific(r, "permissionDecisionReason").unwrap_or("denied by triage"))
}

/// A shell command's failure in a client's tool output: its exit status (not 0) and its
/// output, from the first line that states it (`Exit code: 2`, `Exit Code: 2`, `Process
/// exited with code 2`, `exit_code=2`).
fn shell_exit(text: &str) -> Option<i64> {
    for line in text.lines().take(64) {
        let l = line.trim().to_ascii_lowercase();
        let rest = [
            "exit code:",
            "exit code",
            "process exited with code",
            "exit_code=",
        ]
        .iter()
        .find_map(|p| l.strip_prefix(p));
        if let Some(rest) = rest {
            let digits: String = rest
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '-')
                .collect();
            if let Ok(n) = digits.parse::<i64>() {
                return (n != 0).then_some(n);
            }
        }
    }
    None
}

/// A shell failure as the core reads one (Claude Code's `error` text: `Exit code N`, then the
/// output), from the exit status and the client's output text with its status lines left out.
fn shell_error(code: i64, output: &str) -> String {
    let body: Vec<&str> = output
        .lines()
        .filter(|l| {
            let l = l.trim().to_ascii_lowercase();
            !(l.starts_with("exit code")
                || l.starts_with("process exited with code")
                || l.starts_with("wall time")
                || l.starts_with("chunk id")
                || l.starts_with("original token count")
                || l.starts_with("process group pgid")
                || l == "output:")
        })
        .collect();
    let body = body.join("\n");
    let body = body.trim();
    if body.is_empty() {
        format!("Exit code {code}")
    } else {
        format!("Exit code {code}\n{body}")
    }
}

/// The internal name of a client's tool: its shell and file tools take the names the policy
/// and the classifier know (`Bash`, `Read`, ...), so one `[breaker.Bash]` guards every
/// client's shell; any other tool keeps its own name.
fn canonical_tool(name: &str, table: &[(&str, &str)]) -> String {
    table
        .iter()
        .find(|(theirs, _)| *theirs == name)
        .map_or_else(|| name.to_string(), |(_, ours)| (*ours).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shell_failures_are_read_from_each_clients_output_text() {
        assert_eq!(
            shell_exit("Exit code: 1\nWall time: 0.1 seconds\nOutput:\nx"),
            Some(1)
        );
        assert_eq!(shell_exit("Output: boom\nExit Code: 2"), Some(2));
        assert_eq!(
            shell_exit("Process exited with code 127\n\nOutput:\nnot found"),
            Some(127)
        );
        assert_eq!(shell_exit("Exit code: 0\nOutput:\nok"), None);
        assert_eq!(shell_exit("all fine"), None);
        assert_eq!(
            shell_error(
                1,
                "Exit code: 1\nWall time: 0.1 seconds\nOutput:\nnpm error code ECONNRESET"
            ),
            "Exit code 1\nnpm error code ECONNRESET"
        );
        assert_eq!(shell_error(3, "Exit code: 3\nOutput:\n"), "Exit code 3");
    }

    #[test]
    fn claude_code_payloads_are_detected_as_claude_code() {
        let p = json!({"hook_event_name": "PostToolUseFailure", "session_id": "s",
            "transcript_path": "/t", "tool_name": "Bash", "error": "Exit code 1"});
        assert_eq!(detect(&p), Client::Claude);
        let d = decode(Client::Claude, p.clone(), None).unwrap();
        assert_eq!(
            d.payload, p,
            "Claude Code's payload is the internal one, unchanged"
        );
    }
}
