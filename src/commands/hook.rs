//! `triage hook`: the one command every Claude Code event in `settings.json` runs. It reads the
//! payload and answers with what [`crate::hook::answer`] says (see [`crate::hook`] for each
//! event), or with nothing: any failure is traced to `logs/triage.log` and the hook exits 0.
//! Another client's payload (named with `--client`, or told from its fields) is decoded into
//! the same internal payload and the answer encoded in that client's format
//! ([`crate::hook::dialect`]).

use crate::context::{Answer, Context};
use crate::core::hook_payload::Payload;
use crate::exit::Failure;
use crate::hook::dialect::{self, Client};
use crate::hook::{answer, outlive_the_client};
use serde_json::Value;

/// Arguments of `triage hook`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Reads one Claude Code hook payload on stdin and answers in the hook output schema \
    (or prints nothing). It always exits 0: a failure is traced to <root>/logs/triage.log.\n\n\
    Examples:\n  \
    # in .claude/settings.json (written by `triage init`):\n  \
    {\"type\": \"command\", \"command\": \"command -v triage >/dev/null 2>&1 && exec triage hook; ...\"}\n  \
    echo '{\"hook_event_name\":\"PreToolUse\",\"session_id\":\"s1\",\"tool_name\":\"Agent\",\"tool_input\":{\"subagent_type\":\"researcher\"}}' | triage hook"
)]
pub struct Args {
    /// The event, for a payload without `hook_event_name` (the payload's own name wins)
    #[arg(long, value_name = "EVENT")]
    pub event: Option<String>,
    /// The agent client whose payload this is and whose format the answer takes (default:
    /// told from the payload's fields; Claude Code when none is distinctive)
    #[arg(long, value_enum, value_name = "NAME")]
    pub client: Option<Client>,
}

/// Runs `triage hook`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    let mut value = match cx.read_json() {
        Ok(Some(v)) => v,
        Ok(None) => {
            cx.trace("warning", "empty stdin: no hook payload, nothing to do");
            return Ok(Answer::nothing());
        }
        Err(f) => {
            cx.warn(&format!("{}; answered nothing", f.message));
            return Ok(Answer::nothing());
        }
    };
    let client = args.client.unwrap_or_else(|| dialect::detect(&value));
    if client != Client::Claude {
        return other_client(cx, client, value, args.event.as_deref());
    }
    if let (Some(event), Some(obj)) = (&args.event, value.as_object_mut()) {
        let named = obj
            .get("hook_event_name")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty());
        if !named {
            obj.insert("hook_event_name".into(), Value::from(event.as_str()));
        }
    }
    let payload = Payload::redacted(value, cx.redactor());
    if payload.event() == Some("StopFailure") {
        outlive_the_client(cx);
    }
    match answer(cx, &payload) {
        Ok(r) => Ok(Answer::hook(&r)),
        Err(f) => {
            cx.warn(&format!(
                "{} failed, answered nothing: {}",
                payload.event().unwrap_or("the event"),
                f.message
            ));
            Ok(Answer::nothing())
        }
    }
}

/// A payload of another client: decoded, answered by the same core, and encoded in the
/// client's format (its JSON, its stderr, its exit status).
fn other_client(
    cx: &Context,
    client: Client,
    value: Value,
    event: Option<&str>,
) -> Result<Answer, Failure> {
    let Some(decoded) = dialect::decode(client, value, event) else {
        cx.trace(
            "info",
            &format!(
                "{} event {}: nothing triage judges; answered nothing",
                client.name(),
                event.unwrap_or("(unnamed)")
            ),
        );
        return Ok(Answer::nothing());
    };
    let payload = Payload::redacted(decoded.payload, cx.redactor());
    if payload.event() == Some("StopFailure") {
        outlive_the_client(cx);
    }
    let response = match answer(cx, &payload) {
        Ok(r) => r,
        Err(f) => {
            cx.warn(&format!(
                "{} {} failed, answered nothing: {}",
                client.name(),
                decoded.native,
                f.message
            ));
            return Ok(Answer::nothing());
        }
    };
    let encoded = dialect::encode(client, &decoded.native, &response);
    if let Some(text) = &encoded.stderr {
        say!("{text}");
    }
    Ok(Answer {
        stdout: encoded.stdout,
        exit: encoded.exit,
        ..Answer::nothing()
    })
}
