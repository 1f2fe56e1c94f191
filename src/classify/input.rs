//! What a failure says about itself, whatever shape it came in: an error object (seed 003), a
//! Claude Code hook payload (PostToolUseFailure, PostToolUse, StopFailure), a plain object
//! (`message`, `exit_code`, `stderr`, …) or raw text. Missing and oddly typed fields are
//! tolerated: a hook must never fail on a payload it half understands.

use super::Overrides;
use crate::hook_io::Payload;
use crate::vocab::Kind;
use regex::bytes::Regex;
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// The facts found in one input.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// All error text, for matching.
    pub text: String,
    /// The exit status, from a field or Claude Code's `Exit code N` line.
    pub exit_code: Option<i64>,
    /// The HTTP status, from a field or the text.
    pub http_status: Option<u16>,
    /// Seconds the server asked to wait.
    pub retry_after_s: Option<f64>,
    /// The tool that failed.
    pub tool: Option<String>,
    /// The agent that failed.
    pub agent: Option<String>,
    /// Attempts made so far.
    pub attempt: Option<u32>,
    /// `is_interrupt` or an `interrupted` response.
    pub interrupted: bool,
    /// StopFailure's `error` word.
    pub stop_failure: Option<String>,
    /// Everything else worth keeping, for the error object's `context`.
    pub context: Map<String, Value>,
    /// The fields of an error object given as input (seed 003's shape).
    pub given: Option<Map<String, Value>>,
    /// The kind an input error object names.
    pub given_kind: Option<Kind>,
    /// False for a PostToolUse whose response reports no error.
    pub is_failure: bool,
}

fn s(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(t) if !t.trim().is_empty() => Some(t.clone()),
        _ => None,
    }
}

fn int(v: &Value, keys: &[&str]) -> Option<i64> {
    keys.iter().find_map(|k| match v.get(*k)? {
        Value::Number(n) => n.as_i64(),
        Value::String(t) => t.trim().parse().ok(),
        _ => None,
    })
}

fn push(text: &mut String, part: Option<String>) {
    if let Some(p) = part {
        if !text.contains(p.trim()) {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(p.trim_end());
        }
    }
}

/// Reads the facts of `input`, with the command line's overrides applied.
pub fn facts(input: &Value, o: &Overrides) -> Facts {
    let mut f = Facts {
        is_failure: true,
        ..Facts::default()
    };
    match input {
        _ if o.raw => {
            f.text = match input {
                Value::String(t) => t.clone(),
                Value::Null => String::new(),
                v => v.to_string(),
            }
        }
        Value::String(t) => f.text = t.clone(),
        Value::Object(_) => object(input, &mut f),
        Value::Null => {}
        v => f.text = v.to_string(),
    }
    if let Some(m) = &o.message {
        f.text = m.clone();
    }
    if o.agent.is_some() {
        f.agent = o.agent.clone();
    }
    if o.attempt.is_some() {
        f.attempt = o.attempt;
    }
    if o.exit_code.is_some() {
        f.exit_code = o.exit_code;
    }
    if o.tool.is_some() {
        f.tool = o.tool.clone();
    }
    from_text(&mut f);
    f
}

fn object(v: &Value, f: &mut Facts) {
    let p = Payload::new(v.clone());
    match p.event() {
        Some("PostToolUseFailure") => {
            f.text = p.error().unwrap_or_default().to_string();
            f.interrupted = p.is_interrupt();
        }
        Some("PostToolUse") => tool_response(p.tool_response(), f),
        Some("StopFailure") => {
            f.stop_failure = p.error().map(str::to_string);
            push(&mut f.text, p.error().map(str::to_string));
            let details = match v.get("error_details") {
                Some(Value::String(t)) => Some(t.clone()),
                Some(Value::Null) | None => None,
                Some(d) => Some(d.to_string()),
            };
            push(&mut f.text, details);
        }
        _ => plain(v, f),
    }
    if let Some(e) = p.event() {
        f.context.insert("event".into(), Value::from(e));
    }
    f.tool = p.tool_name().map(str::to_string).or_else(|| s(v, "tool"));
    f.agent = s(v, "agent")
        .or_else(|| {
            p.is_subagent_tool()
                .then(|| p.subagent_type().map(str::to_string))
                .flatten()
        })
        .or_else(|| p.agent_type().map(str::to_string));
    if let Some(ms) = p.duration_ms() {
        f.context.insert("duration_ms".into(), Value::from(ms));
    }
    if let Some(id) = p.session_id() {
        f.context.insert("session_id".into(), Value::from(id));
    }
    if let Some(cmd) = p.tool_input().get("command").and_then(Value::as_str) {
        f.context.insert("command".into(), Value::from(cmd));
    }
    if let Some(path) = p.tool_input().get("file_path").and_then(Value::as_str) {
        f.context.insert("file".into(), Value::from(path));
    }
}

/// A plain object, or an error object in seed 003's shape.
fn plain(v: &Value, f: &mut Facts) {
    if let Some(obj) = v.as_object() {
        let kind = s(v, "kind").and_then(|k| k.parse::<Kind>().ok());
        if kind.is_some() || s(v, "status").as_deref() == Some("error") {
            f.given = Some(obj.clone());
            f.given_kind = kind;
            if let Some(Value::Object(c)) = v.get("context") {
                f.context.extend(c.clone());
            }
        }
    }
    for key in ["message", "detail", "error", "stderr", "stdout", "output"] {
        match v.get(key) {
            Some(Value::String(t)) if !t.trim().is_empty() => push(&mut f.text, Some(t.clone())),
            Some(Value::Object(e)) => {
                // `{"error": {"type": "rate_limit_error", "message": "..."}}` (Anthropic, OpenAI).
                for k in ["type", "code", "message"] {
                    push(&mut f.text, s(&Value::Object(e.clone()), k));
                }
            }
            _ => {}
        }
    }
    f.exit_code = int(v, &["exit_code", "exitCode", "returncode", "code"]);
    f.http_status = int(v, &["http_status", "status_code", "statusCode", "status"])
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| (400..600).contains(n));
    f.attempt = int(v, &["attempt"]).and_then(|n| u32::try_from(n).ok());
    f.retry_after_s = retry_after_field(v);
    f.interrupted = v.get("interrupted").and_then(Value::as_bool) == Some(true)
        || v.get("is_interrupt").and_then(Value::as_bool) == Some(true);
    for key in [
        "elapsed",
        "signal",
        "file",
        "phase",
        "task_id",
        "workflow_id",
    ] {
        if let Some(x) = v.get(key).filter(|x| !x.is_null()) {
            f.context.entry(key.to_string()).or_insert(x.clone());
        }
    }
}

fn retry_after_field(v: &Value) -> Option<f64> {
    ["retry_after", "retry_after_s", "retryAfter"]
        .iter()
        .find_map(|k| match v.get(*k)? {
            Value::Number(n) => n.as_f64(),
            Value::String(t) => t.trim().trim_end_matches('s').parse().ok(),
            _ => None,
        })
}

/// PostToolUse: whether `tool_response` reports an error, and its text.
fn tool_response(r: &Value, f: &mut Facts) {
    let flag = |k: &str| r.get(k).and_then(Value::as_bool) == Some(true);
    let status = s(r, "status").unwrap_or_default();
    let code = int(r, &["exit_code", "exitCode", "returncode", "code"]);
    f.interrupted = flag("interrupted");
    f.is_failure = flag("is_error")
        || flag("isError")
        || f.interrupted
        || r.get("success").and_then(Value::as_bool) == Some(false)
        || matches!(status.as_str(), "error" | "failed" | "failure")
        || s(r, "error").is_some()
        || code.is_some_and(|c| c != 0);
    if let Value::String(t) = r {
        f.text = t.clone();
        f.is_failure = t.trim_start().starts_with("Error") || t.contains("<tool_use_error>");
        return;
    }
    f.exit_code = code;
    for key in ["error", "stderr", "message"] {
        push(&mut f.text, s(r, key));
    }
    if let Some(blocks) = r.get("content").and_then(Value::as_array) {
        for b in blocks {
            push(&mut f.text, s(b, "text"));
        }
    }
    if f.text.is_empty() {
        push(&mut f.text, s(r, "stdout"));
    }
}

fn utf8(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or_default()
}

fn re(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| super::rules::ascii(pattern)).as_ref()
}

/// Facts read from the text itself: exit status, HTTP status, Retry-After, errno.
fn from_text(f: &mut Facts) {
    static EXIT: OnceLock<Option<Regex>> = OnceLock::new();
    static HTTP: OnceLock<Option<Regex>> = OnceLock::new();
    static HTTP_PHRASE: OnceLock<Option<Regex>> = OnceLock::new();
    static RETRY: OnceLock<Option<Regex>> = OnceLock::new();
    static ERRNO: OnceLock<Option<Regex>> = OnceLock::new();
    let text = f.text.to_ascii_lowercase();
    if f.exit_code.is_none() {
        // Claude Code's Bash errors start with `Exit code N`; Python says `non-zero exit status N`.
        f.exit_code = re(
            &EXIT,
            r"(?i)(?:^exit code:?|exit status|exited with code|non-zero exit status)\s+(-?\d+)",
        )
        .and_then(|r| r.captures(text.as_bytes()))
        .and_then(|c| utf8(&c[1]).parse().ok());
    }
    if f.http_status.is_none() {
        let code = re(&HTTP, r"(?i)(?:\bHTTP(?:/\d(?:\.\d)?)?[ :]+|\bstatus(?:[ _]?code)?[ :=]+|\berror code[ :=]+|\bAPI Error:?\s*|returned error:?\s*|\bError:\s+)([45]\d\d)\b")
            .and_then(|r| r.captures(text.as_bytes()))
            .or_else(|| {
                re(&HTTP_PHRASE, r"(?i)\b([45]\d\d) (?:Too Many Requests|Service Unavailable|Bad Gateway|Gateway Time-?out|Not Found|Unauthorized|Forbidden|Bad Request|Internal Server Error|Unprocessable Entity|Request Timeout)")
                    .and_then(|r| r.captures(text.as_bytes()))
            })
            .and_then(|c| utf8(&c[1]).parse().ok());
        f.http_status = code;
    }
    if f.retry_after_s.is_none() {
        f.retry_after_s = re(&RETRY, r#"(?i)retry[-_ ]after["']?\s*[:=]?\s*"?(\d+(?:\.\d+)?)|(?:retry|try again) in (\d+(?:\.\d+)?)\s*s"#)
            .and_then(|r| r.captures(text.as_bytes()))
            .and_then(|c| c.get(1).or(c.get(2)).and_then(|m| utf8(m.as_bytes()).parse().ok()));
    }
    if let Some(code) = f.exit_code {
        f.context.insert("exit_code".into(), Value::from(code));
    }
    if let Some(h) = f.http_status {
        f.context.insert("http_status".into(), Value::from(h));
    }
    if let Some(r) = f.retry_after_s {
        f.context.insert("retry_after_s".into(), Value::from(r));
    }
    if let Some(m) = re(&ERRNO, r"\b(E(?:NOENT|ACCES|PERM|CONNREFUSED|CONNRESET|NOTFOUND|TIMEDOUT|HOSTUNREACH|NETUNREACH|AI_AGAIN|PIPE|ROFS|NOSPC|MFILE))\b")
        .and_then(|r| r.captures(text.as_bytes()))
    {
        f.context.insert("errno".into(), Value::from(utf8(&m[1]).to_ascii_uppercase()));
    }
    if let Some(t) = &f.tool {
        f.context.insert("tool".into(), Value::from(t.clone()));
    }
    if let Some(a) = &f.agent {
        f.context.insert("agent".into(), Value::from(a.clone()));
    }
    if let Some(w) = &f.stop_failure {
        f.context
            .insert("stop_failure".into(), Value::from(w.clone()));
    }
    if f.interrupted {
        f.context.insert("is_interrupt".into(), Value::Bool(true));
    }
}
