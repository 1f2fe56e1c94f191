//! `triage classify`: read one failure (an error object, a Claude Code hook payload, a plain
//! object or raw text), print the error object of SPEC §5 with the retry decision. It never
//! writes a file and needs no state root; the jitter seed comes from `TRIAGE_SEED`.

use crate::context::{Answer, Context};
use crate::core::classify::{self, ErrorObject, Overrides};
use crate::exit::Failure;
use crate::hook::codec::Response;
use serde_json::{json, Value};

const EXAMPLES: &str = "\
Examples:
  echo 'curl: (6) Could not resolve host: example.invalid' | triage classify --raw
  triage classify --message 'Command timed out after 2m 0s' --agent researcher --attempt 2
  echo '{\"message\": \"Error: connect ECONNREFUSED 127.0.0.1:5432\", \"exit_code\": 1}' | triage classify --text
  printf '%s' '{\"hook_event_name\": \"PostToolUseFailure\", \"tool_name\": \"Bash\", \"error\": \"Exit code 6\\ncurl: (6) Could not resolve host: registry.npmjs.org\"}' | triage classify --hook

-e exits 1 when no retry is advised. TRIAGE_SEED=N makes jitter repeatable.";

/// Arguments of `triage classify`.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES, after_long_help = long_help())]
pub struct Args {
    /// The agent that failed (decides criticality and side effects from the policy)
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Attempts made so far, the failing one included [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub attempt: Option<u32>,
    /// The error text (replaces the input's)
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// The failing command's exit status
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub exit_code: Option<i64>,
    /// The tool that failed
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// Read stdin as text, not JSON
    #[arg(long)]
    pub raw: bool,
    /// Read a Claude Code hook payload; answer with hookSpecificOutput.additionalContext
    #[arg(long)]
    pub hook: bool,
    /// Rules only: a text no rule knows stays `unknown` (no learned fallback)
    #[arg(long)]
    pub no_model: bool,
}

const PRECEDENCE: &str = "\
Precedence: the input's own kind, the policy's [[classify.rules]], then specific wordings \
(hook errors and denies, edit-tool mismatches, usage limits, context limits, pipeline \
conditions (a failed gate, a lost coordinator, a corrupt state file), parse, compiler, package-manager and test-runner output), then the HTTP \
status and the API error type (before any hint such as \"Retrying in 37 seconds\" or \
\"esc to interrupt\"), then StopFailure's error word, then generic wordings (the earliest \
line wins; stack frames are not evidence), then the exit status and a bare `Exit code N` \
(tool_failure, tier 1, retried once), and, when nothing matched, the wordings on the text \
with its line breaks joined. Where no rule knows the text, a learned model (naive Bayes over \
its words and character n-grams, trained from the project's corpora) gives the kind when it \
is confident enough: decided_by says \"model\", confidence how sure it was (--no-model: \
rules only; --hook never uses it). A usage limit waits until its reset (context.retry_at, \
from TRIAGE_NOW in tests). priority is P0 critical, P1 error, P2 warning, P3 info. --text \
prints a notification for a person, CRITICAL in capitals.
";

fn long_help() -> String {
    format!("{}\n{PRECEDENCE}\n{EXAMPLES}", classify::kinds_table())
}

/// Runs `triage classify`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    let seed = cx.jitter_seed();
    // Credentials in the input or in --message become markers before anything reads them.
    let mut input = read_input(args, cx)?;
    cx.redactor().value(&mut input);
    let mut o = Overrides {
        agent: args.agent.clone(),
        attempt: args.attempt,
        message: args
            .message
            .as_deref()
            .map(|m| cx.redactor().text(m).into_owned()),
        raw: args.raw,
        exit_code: args.exit_code,
        tool: args.tool.clone(),
        now: Some(cx.now),
        utc_offset: None,
        // The hook's answer stays the rules' own (and as quick as before).
        model_fallback: !args.hook && !args.no_model,
    };
    if args.hook && input.is_null() && o.message.is_none() && o.exit_code.is_none() {
        return Ok(Answer::nothing());
    }
    if input.is_null() && o.message.is_none() && o.exit_code.is_none() {
        // Best effort: a hook that pipes an empty stderr still gets an answer to act on.
        cx.warn(
            "nothing to classify: pipe an error on stdin (JSON, or text with --raw), or pass --message TEXT; answered as an unknown failure",
        );
        o.message = Some("no error text was given".into());
    }
    let policy = cx.policy()?;
    let failed = classify::is_failure(&input, &o);
    let event = input
        .get("hook_event_name")
        .and_then(Value::as_str)
        .unwrap_or("PostToolUseFailure");
    if args.hook {
        // StopFailure's output is ignored by Claude Code; a tool that succeeded needs no word.
        if !failed || event == "StopFailure" {
            return Ok(Answer::nothing());
        }
        let e = classify::classify(&input, &o, policy, seed);
        e.warnings.iter().for_each(|w| cx.warn(w));
        traced(cx, policy, &o, &e);
        // The agent's own work (a red test, a lint complaint): no word, as `triage hook`.
        let tool = input.get("tool_name").and_then(Value::as_str);
        if crate::hook::is_work(policy, &e, tool) {
            return Ok(Answer::nothing());
        }
        let event = match event {
            "PostToolUse" => "PostToolUse",
            _ => "PostToolUseFailure",
        };
        let response = Response::context(event, classify::hook_context(&e));
        return Ok(Answer::hook(&response).negative(e.retry.is_none()));
    }
    if !failed {
        let ok = json!({"status": "ok", "detail": "the tool response reports no error"});
        return Ok(if cx.global.text {
            Answer::text("ok: the tool response reports no error")
        } else {
            Answer::json(&ok)
        });
    }
    let e = classify::classify(&input, &o, policy, seed);
    e.warnings.iter().for_each(|w| cx.warn(w));
    traced(cx, policy, &o, &e);
    let negative = e.retry.is_none();
    let out = if cx.global.text {
        Answer::text(as_text(&e))
    } else {
        Answer::json(&e)
    };
    Ok(out.negative(negative))
}

/// The decision trace of one classification (`-v`, `TRIAGE_LOG=debug`).
fn traced(
    cx: &Context,
    policy: &crate::core::policy::Policy,
    o: &classify::Overrides,
    e: &classify::ErrorObject,
) {
    if !cx.debug {
        return;
    }
    let g = cx.ground();
    let who = o.agent.as_deref().or(o.tool.as_deref()).unwrap_or_default();
    crate::store::trace::classified(&g, policy, who, e);
    crate::store::trace::advised(&g, policy, who, o.attempt.unwrap_or(1), e);
}

/// Stdin as JSON, or as text with `--raw`. Text that is not JSON is classified as text, with
/// a warning: a failure must still be classified when a hook pipes plain stderr.
fn read_input(args: &Args, cx: &Context) -> Result<Value, Failure> {
    if args.hook {
        // A hook payload is one JSON value: answer as soon as it has arrived.
        return match cx.read_json() {
            Ok(v) => Ok(v.unwrap_or(Value::Null)),
            Err(f) => {
                cx.warn(&format!("{}; answered nothing", f.message));
                Ok(Value::Null)
            }
        };
    }
    let Some(bytes) = cx.read_stdin()? else {
        return Ok(Value::Null);
    };
    if args.raw {
        return Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    }
    match crate::context::parse_json(&bytes) {
        Ok(v) => Ok(v),
        Err(f) => {
            cx.warn(&format!(
                "{}; classified it as text (pass --raw to say so)",
                f.message.trim_end_matches("; send one JSON document")
            ));
            Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        }
    }
}

fn as_text(e: &ErrorObject) -> String {
    use crate::core::vocab::{Action, Severity};
    let retryable = if e.retryable {
        "retryable"
    } else {
        "not retryable"
    };
    let mut headline = format!(
        "{} ({}): {}, tier {} ({}), {retryable}",
        e.severity.as_str().to_uppercase(),
        e.priority,
        e.kind,
        e.tier.number(),
        e.tier.name()
    );
    // Seed 001: "CRITICAL (P0): Use all-caps, immediate action required".
    if e.severity == Severity::Critical {
        headline = format!("{} - IMMEDIATE ACTION REQUIRED", headline.to_uppercase());
    }
    let mut out = vec![headline, String::new()];
    let field = |key: &str| e.context.get(key).and_then(|v| v.as_str());
    if let Some(agent) = field("agent") {
        out.push(format!("Agent: {agent}"));
    }
    if let Some(tool) = field("tool") {
        out.push(format!("Tool: {tool}"));
    }
    out.push(format!("Error type: {} ({})", e.kind, e.category));
    out.push(format!("Message: {}", e.detail));
    out.push(String::new());
    let todo = match (&e.retry, e.action) {
        (Some(r), _) => format!(
            "retry in {} (attempt {} of {})",
            classify::fmt_wait(r.delay_s),
            r.attempt,
            r.max_attempts
        ),
        (None, Action::Retry) => "retry".into(),
        (None, Action::AskUser) => "ask the user how to proceed; do not retry on your own".into(),
        (None, Action::Escalate) => "stop and escalate to the user or the lead".into(),
        (None, Action::ProceedDegraded) => {
            "continue without this result and say what is missing".into()
        }
        (None, Action::Skip) => "skip this step and go on".into(),
        (None, Action::Abort) => "stop the workflow and keep what is done".into(),
    };
    out.push(format!("What to do ({}): {todo}", e.action));
    if let Some(why) = field("action_reason") {
        out.push(format!("Why: {why}"));
    }
    if e.action == Action::Escalate {
        out.push("Options:".into());
        out.push("(A) Retry, changing what made it fail".into());
        out.push("(B) Skip this step and continue".into());
        out.push("(C) Abort, keep the completed outputs".into());
    }
    if !e.suggestions.is_empty() {
        out.push(String::new());
        out.push("Suggestions:".into());
        out.extend(e.suggestions.iter().map(|s| format!("- {s}")));
    }
    out.push(String::new());
    match e.confidence {
        Some(c) => out.push(format!(
            "Rule: {} (no rule knew the text; the learned model, confidence {c:.2})",
            e.matched_rule
        )),
        None => out.push(format!("Rule: {}", e.matched_rule)),
    }
    let context: Vec<String> = e
        .context
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "action_reason" | "agent" | "tool"))
        .map(|(k, v)| {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            format!("  {k}: {v}")
        })
        .collect();
    if !context.is_empty() {
        out.push("Context:".into());
        out.extend(context);
    }
    out.join("\n")
}
