//! `triage config show` prints the effective policy; `triage config check [FILE]` validates a
//! policy file and names the line of every problem.

use crate::context::{Context, Outcome};
use crate::exit::Failure;
use crate::policy;
use clap::Subcommand;
use serde_json::json;
use std::path::PathBuf;

/// Arguments of `triage config`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  triage config show --text\n  triage config check .triage.toml -e"
)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// `config` actions.
#[derive(Subcommand, Debug)]
pub enum Action {
    /// Print the effective policy (the file's, over the seeds' defaults)
    Show,
    /// Check a policy file [default: the one in force]; every problem names its line
    Check {
        /// The policy file
        file: Option<PathBuf>,
    },
}

/// Runs `triage config`.
pub fn run(args: &Args, cx: &Context) -> Result<Outcome, Failure> {
    match &args.action {
        Action::Show => {
            let policy = cx.policy()?;
            let source = cx.policy_path();
            let shown = policy.effective();
            if cx.global.text {
                let body = toml::to_string_pretty(&without_nulls(shown))
                    .map_err(|e| Failure::data(format!("cannot render the policy: {e}")))?;
                let from = source.map_or("built-in defaults".into(), |p| p.display().to_string());
                return Ok(Outcome::text(format!(
                    "# effective policy, from {from}\n{body}"
                )));
            }
            Ok(Outcome::json(&shown))
        }
        Action::Check { file } => {
            let file = file.clone().or_else(|| cx.policy_path()).ok_or_else(|| {
                Failure::usage("no policy file to check: name one, or create .triage.toml")
            })?;
            let text = std::fs::read_to_string(&file)
                .map_err(|e| Failure::io(format!("cannot read {}: {e}", file.display())))?;
            let problems = match policy::load_checked(&text, policy::Depth::Compile) {
                Ok(_) => Vec::new(),
                Err(p) => p,
            };
            for p in &problems {
                eprintln!("triage config: {}:{p}", file.display());
            }
            let ok = problems.is_empty();
            let out = if cx.global.text {
                Outcome::text(if ok {
                    format!("{}: ok", file.display())
                } else {
                    format!("{}: {} problem(s)", file.display(), problems.len())
                })
            } else {
                Outcome::json(&json!({"file": file, "ok": ok, "problems": problems}))
            };
            Ok(out.negative(!ok))
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
