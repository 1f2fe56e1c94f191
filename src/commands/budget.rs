//! `triage budget`: a retry budget shared by every process on the machine (or, with a fleet
//! store, every host), with gRPC's `retryThrottling` rule: each failure costs one token, each
//! success gives back `token_ratio`, and retries go ahead only while more than half of
//! `max_tokens` are left. When a fleet's calls mostly fail, its retries stop together instead
//! of piling onto a rate limit.

use crate::context::{Answer, Context};
use crate::core::admission::{check_key, retry_allowed, BudgetLimits, BudgetOp};
use crate::exit::Failure;
use crate::store::budget;
use serde_json::{json, Value};

/// Arguments of `triage budget`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage budget check api -e || exit 1     # may a retry go ahead?\n  \
    triage budget record api --outcome failure\n  \
    triage budget status --text\n\n\
    The budget comes from the policy: [budget.api] max_tokens = 10, token_ratio = 0.1\n\
    (globs too). `triage run --budget KEY` checks it before each retry and records each\n\
    attempt. With -e, check exits 1 when retries are refused.")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The outcome a call reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Reported {
    /// The call succeeded: gives back token_ratio.
    Success,
    /// The call failed: costs one token.
    Failure,
}

/// The budget actions.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// May a retry go ahead? Prints {key, tokens, max_tokens, retry_allowed}
    Check {
        /// The budget's key (`[budget.KEY]` in the policy)
        key: String,
    },
    /// Report a call's outcome
    Record {
        /// The budget's key
        key: String,
        /// success or failure
        #[arg(long, value_name = "OUTCOME")]
        outcome: Reported,
    },
    /// Show the budgets, every one or those named
    Status {
        /// Keys to show [default: every key the policy or the store knows]
        keys: Vec<String>,
    },
}

/// Runs `triage budget`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    let g = cx.ground();
    match &args.action {
        Action::Check { key } | Action::Record { key, .. } => {
            let limits = limits(cx, key)?;
            let op = match &args.action {
                Action::Record {
                    outcome: Reported::Success,
                    ..
                } => BudgetOp::Success,
                Action::Record { .. } => BudgetOp::Failure,
                _ => BudgetOp::Check,
            };
            let (tokens, backend) = budget::call(&g, key, limits, op)?;
            let v = row(key, limits, tokens, backend);
            let allowed = retry_allowed(limits, tokens);
            let answer = if cx.global.text {
                Answer::text(text_line(&v))
            } else {
                Answer::json(&v)
            };
            Ok(answer.negative(op == BudgetOp::Check && !allowed))
        }
        Action::Status { keys } => {
            let policy = cx.policy()?;
            let keys: Vec<String> = if keys.is_empty() {
                crate::core::admission::shown_keys(budget::keys(&g)?, policy.budget.keys())
            } else {
                for k in keys {
                    limits(cx, k)?;
                }
                keys.clone()
            };
            let mut rows = Vec::new();
            for key in &keys {
                // A stored budget the policy no longer names is left out.
                let Some(limits) = policy.budget_for(key) else {
                    continue;
                };
                let (tokens, backend) = budget::call(&g, key, limits, BudgetOp::Check)?;
                rows.push(row(key, limits, tokens, backend));
            }
            if cx.global.text {
                if rows.is_empty() {
                    return Ok(Answer::text(
                        "no retry budgets: the policy sets none ([budget.KEY] max_tokens = 10)",
                    ));
                }
                let lines: Vec<String> = rows.iter().map(text_line).collect();
                return Ok(Answer::text(lines.join("\n")));
            }
            Ok(Answer::json(&json!({ "budgets": rows })))
        }
    }
}

/// The budget of `key`, or a usage error that says how to set it.
pub fn limits(cx: &Context, key: &str) -> Result<BudgetLimits, Failure> {
    check_key(key).map_err(|why| Failure::usage(format!("bad key: {why}")))?;
    cx.policy()?.budget_for(key).ok_or_else(|| {
        Failure::usage(format!(
            "the policy sets no retry budget for `{}`: add `[budget.{}] max_tokens = 10` (or a glob such as `[budget.\"*\"]`)",
            crate::core::text::printable(key),
            if key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_')) {
                key.to_string()
            } else {
                format!("{key:?}")
            }
        ))
    })
}

fn row(key: &str, limits: BudgetLimits, tokens: u64, backend: &str) -> Value {
    json!({
        "key": key,
        "tokens": tokens as f64 / 1000.0,
        "max_tokens": limits.max_milli as f64 / 1000.0,
        "token_ratio": limits.ratio_milli as f64 / 1000.0,
        "retry_allowed": retry_allowed(limits, tokens),
        "backend": backend,
    })
}

fn text_line(v: &Value) -> String {
    format!(
        "{}: {} of {} tokens; retries {}",
        v["key"].as_str().unwrap_or_default(),
        v["tokens"],
        v["max_tokens"],
        if v["retry_allowed"] == true {
            "allowed"
        } else {
            "refused (at or below half)"
        }
    )
}
