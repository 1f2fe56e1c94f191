//! `triage config show` prints the effective policy; `triage config check [FILE]` validates a
//! policy file and names the line of every problem.

use crate::context::{Answer, Context};
use crate::core::policy;
use crate::exit::Failure;
use clap::Subcommand;
use serde_json::json;
use std::path::PathBuf;

/// Arguments of `triage config`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage config show --text\n  \
    triage config check .triage.toml\n\n\
    config check lists every problem, in file order, as FILE:LINE:COL: message (on stderr, and \
    as JSON on stdout; with --text, the list on stdout) and exits 1 when there is any, 0 only \
    for a clean file. It checks what the runtime would refuse: unknown keys (with the closest \
    valid one), types, durations (at most 36500d), regexes (compiled, within the size limit), \
    jq filters (compiled and run on sample inputs within their budget), file globs, and \
    [permits.KEY] (max 1 or more, a lease above 0) and [budget.KEY] (max_tokens above 0, \
    token_ratio above 0 and at most 1). \
    Required keys: a [[classify.rules]] entry needs `name`, and `match` (a regex) or `jq` (a \
    predicate); a [permits.KEY] entry needs `max` (its own or a glob's); nothing else is \
    required. At run time a bad entry is left out with a warning \
    and every good entry applies.")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// `config` actions.
#[derive(Subcommand, Debug)]
pub enum Action {
    /// Print the effective policy (the file's, over the built-in defaults)
    Show,
    /// Check a policy file [default: the one in force]; every problem as FILE:LINE:COL
    Check {
        /// The policy file
        file: Option<PathBuf>,
    },
}

/// Runs `triage config`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    match &args.action {
        Action::Show => {
            let policy = cx.policy()?;
            let source = cx.policy_path();
            let shown = policy.effective();
            if cx.global.text {
                let body = toml::to_string_pretty(&without_nulls(shown))
                    .map_err(|e| Failure::data(format!("cannot render the policy: {e}")))?;
                let from = source.map_or("built-in defaults".into(), |p| p.display().to_string());
                return Ok(Answer::text(format!(
                    "# effective policy, from {from}\n{body}"
                )));
            }
            Ok(Answer::json(&shown))
        }
        Action::Check { file } => {
            let file = file.clone().or_else(|| cx.policy_path()).ok_or_else(|| {
                Failure::usage("no policy file to check: name one, or create .triage.toml")
            })?;
            // Read as the runtime reads it: never a FIFO or a device, UTF-8 only.
            let text = match crate::store::files::read_named(&file) {
                Ok(Some(bytes)) => {
                    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".into())
                }
                Ok(None) => Err("it does not exist".to_string()),
                Err(e) => Err(e.to_string()),
            };
            let problems = match text {
                Ok(text) => policy::load_lenient(&text, policy::Depth::Compile).problems,
                Err(why) => vec![policy::PolicyProblem {
                    line: None,
                    column: None,
                    offset: 0,
                    message: format!("cannot read it: {why}"),
                }],
            };
            let lines: Vec<String> = problems
                .iter()
                .map(|p| match p.line {
                    Some(_) => format!("{}:{p}", file.display()),
                    None => format!("{}: {p}", file.display()),
                })
                .collect();
            let ok = problems.is_empty();
            // A checker's verdict is its exit status, with or without -e: 1 for any problem.
            let status = if ok { 0 } else { 1 };
            if cx.global.text {
                let mut text = lines.join("\n");
                let summary = match problems.len() {
                    0 => format!("{}: ok", file.display()),
                    1 => "1 problem".to_string(),
                    n => format!("{n} problems"),
                };
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&summary);
                return Ok(Answer::text(text).exit(status));
            }
            for line in &lines {
                say!("{}", crate::core::text::printable(line));
            }
            Ok(Answer::json(&json!({"file": file, "ok": ok, "problems": problems})).exit(status))
        }
    }
}

/// TOML has no null: an option that is off is left out of the text form.
fn without_nulls(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => serde_json::Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        serde_json::Value::Array(a) => {
            serde_json::Value::Array(a.into_iter().map(without_nulls).collect())
        }
        v => v,
    }
}
