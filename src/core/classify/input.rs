//! What a failure says about itself, whatever shape it came in: an error object (seed 003), a
//! Claude Code hook payload (PostToolUseFailure, PostToolUse, StopFailure), a plain object
//! (`message`, `exit_code`, `stderr`, …) or raw text. Missing and oddly typed fields are
//! tolerated: a hook must never fail on a payload it half understands.

use super::facts::Found;
use super::Overrides;
use crate::core::hook_payload::Payload;
use crate::core::vocab::Kind;
use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveTime, TimeZone, Utc};
use serde_json::{Map, Value};

/// The facts found in one input.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// All error text, for matching.
    pub text: String,
    /// The exit status, from a field or Claude Code's `Exit code N` line.
    pub exit_code: Option<i64>,
    /// The HTTP status, from a field or the text.
    pub http_status: Option<u16>,
    /// Seconds the server asked to wait, or until a usage limit resets.
    pub retry_after_s: Option<f64>,
    /// When a usage limit resets.
    pub retry_at: Option<DateTime<Utc>>,
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

/// The agent type Claude Code did not find and the ones it lists instead, from its error text
/// (`Agent type 'code-reviewer' not found. Available agents: general-purpose, Explore`);
/// `None` when `error` is not that text.
pub fn unknown_agent_type(error: &str) -> Option<(String, Vec<String>)> {
    let start = error.find("Agent type '")? + "Agent type '".len();
    let rest = &error[start..];
    let end = rest.find("' not found")?;
    let name = rest[..end].trim();
    if name.is_empty() || name.len() > 200 {
        return None;
    }
    let available = match rest.find("Available agents:") {
        Some(i) => rest[i + "Available agents:".len()..]
            .lines()
            .next()
            .unwrap_or_default()
            .split(',')
            .map(|a| a.trim().trim_end_matches('.').trim())
            .filter(|a| !a.is_empty() && a.len() <= 200)
            .take(50)
            .map(str::to_string)
            .collect(),
        None => Vec::new(),
    };
    Some((name.to_string(), available))
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
    from_text(&mut f, o);
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
            // The `error` word is coarse (`server_error` for a 529, `unknown` for a 400); the
            // failed turn's text carries the status and the API's message.
            f.stop_failure = p.error().map(str::to_string);
            push(&mut f.text, p.last_assistant_message().map(str::to_string));
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

/// When a Claude usage limit resets: `usage limit reached|<epoch seconds>`, or a wall-clock
/// time as the client prints it (`reset at 9am (America/Chicago)`, `resets 2:10pm`,
/// `resets Jan 18, 11:30am (Asia/Calcutta)`). A wall-clock time needs `now`; it is read in the
/// zone named when that is UTC, GMT, `Etc/GMT±N` or an offset, else in the machine's local
/// zone (the one the client printed it in; there is no zone database here).
fn usage_reset(found: &Found, o: &Overrides) -> Option<DateTime<Utc>> {
    if let Some(epoch) = found.usage_epoch() {
        let secs: i64 = utf8(epoch).parse().ok()?;
        return Utc.timestamp_opt(secs, 0).single();
    }
    let c = found.usage_clock()?;
    let now = o.now?;
    let mut hour: u32 = utf8(c.hour).parse().ok()?;
    let minute: u32 = c.minute.map_or(Some(0), |m| utf8(m).parse().ok())?;
    if hour == 0 || hour > 12 || minute > 59 {
        return None;
    }
    hour = hour % 12 + if c.half == b"pm" { 12 } else { 0 };
    let offset = c
        .zone
        .and_then(|z| zone_offset(utf8(z)))
        .or(o.utc_offset)
        .unwrap_or_else(|| local_offset(now));
    let local_now = now.with_timezone(&offset);
    let time = NaiveTime::from_hms_opt(hour, minute, 0)?;
    let date = match c.month {
        Some((m, d)) => {
            let month = MONTHS.iter().position(|n| m.starts_with(n.as_bytes()))? as u32 + 1;
            let day: u32 = utf8(d).parse().ok()?;
            let this_year = NaiveDate::from_ymd_opt(local_now.year(), month, day)?;
            // A date more than half a year back is next year's.
            if (local_now.date_naive() - this_year).num_days() > 183 {
                NaiveDate::from_ymd_opt(local_now.year() + 1, month, day)?
            } else {
                this_year
            }
        }
        _ => {
            let today = local_now.date_naive();
            if today.and_time(time) <= local_now.naive_local() {
                today.succ_opt()?
            } else {
                today
            }
        }
    };
    let at = offset.from_local_datetime(&date.and_time(time)).single()?;
    Some(at.with_timezone(&Utc))
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// The offset a zone name stands for, when it says so without a zone database: `UTC`, `GMT`,
/// `Etc/GMT+5` (POSIX signs: five hours behind), `UTC+2`, `+05:30`.
fn zone_offset(name: &str) -> Option<FixedOffset> {
    let lower = name.trim().to_ascii_lowercase();
    let (etc, n) = match lower.strip_prefix("etc/") {
        Some(rest) => (true, rest),
        None => (false, lower.as_str()),
    };
    if matches!(n, "utc" | "gmt" | "z" | "zulu" | "universal") {
        return FixedOffset::east_opt(0);
    }
    let (posix, rest) = if let Some(r) = n.strip_prefix("gmt") {
        (etc, r)
    } else if let Some(r) = n.strip_prefix("utc") {
        (false, r)
    } else {
        (false, n)
    };
    let (sign, digits) = match rest.as_bytes().first() {
        Some(b'+') => (1, &rest[1..]),
        Some(b'-') => (-1, &rest[1..]),
        _ => return None,
    };
    let (h, m) = digits.split_once(':').unwrap_or((digits, "0"));
    let secs = h.parse::<i32>().ok()? * 3600 + m.parse::<i32>().ok()? * 60;
    // `Etc/GMT+5` is five hours *behind* UTC (POSIX signs); `UTC+5` and `+05:00` are ahead.
    FixedOffset::east_opt(if posix { -sign * secs } else { sign * secs })
}

/// The machine's local offset at `now` (the TZ environment variable, else /etc/localtime).
fn local_offset(now: DateTime<Utc>) -> FixedOffset {
    use chrono::Offset;
    chrono::Local
        .offset_from_utc_datetime(&now.naive_utc())
        .fix()
}

/// Facts read from the text itself: exit status, HTTP status, Retry-After or a usage limit's
/// reset, errno.
fn from_text(f: &mut Facts, o: &Overrides) {
    let text = f.text.to_ascii_lowercase();
    let found = Found::new(text.as_bytes());
    if f.exit_code.is_none() {
        f.exit_code = found.exit_status().and_then(|c| utf8(c).parse().ok());
    }
    if f.http_status.is_none() {
        f.http_status = found.http_status().and_then(|c| utf8(c).parse().ok());
    }
    if f.retry_after_s.is_none() {
        f.retry_after_s = found.retry_after().and_then(|c| utf8(c).parse().ok());
    }
    if f.retry_after_s.is_none() {
        if let Some(at) = usage_reset(&found, o) {
            f.retry_at = Some(at);
            if let Some(now) = o.now {
                let secs = (at - now).num_milliseconds().max(0) as f64 / 1000.0;
                f.retry_after_s = Some(secs);
            }
        }
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
    if let Some(at) = f.retry_at {
        f.context.insert(
            "retry_at".into(),
            Value::from(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        );
    }
    if let Some(e) = found.errno() {
        f.context
            .insert("errno".into(), Value::from(utf8(e).to_ascii_uppercase()));
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
