//! `triage state-read FILE`: print a state document, recovering the newest valid of `FILE.bak`
//! and FILE's own checkpoints when it is missing or corrupt (seed 002 "Recovery on
//! Corruption"), then rewriting FILE from it ([`crate::store::recovery`]). A corrupt file is
//! moved aside as `FILE.corrupt-<timestamp>`, never deleted; a candidate of another workflow
//! is never used.

use crate::context::{Answer, Context};
use crate::core::state::Validation;
use crate::exit::Failure;
use crate::store::recovery::{self, checkpoint_dir};
use serde_json::Value;
use std::path::PathBuf;

/// Arguments of `triage state-read`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  triage state-read run/state.json\n  \
    triage state-read run/state.json --require stage --data | jq .stage\n  \
    triage state-read run/state.json --workflow w1")]
pub struct Args {
    /// The state file
    pub file: PathBuf,
    /// A dotted path that must be present (repeatable)
    #[arg(long, value_name = "KEY")]
    pub require: Vec<String>,
    /// A jq filter that must yield true
    #[arg(long, value_name = "JQ")]
    pub check: Option<String>,
    /// Accept any JSON value, not only an object
    #[arg(long)]
    pub any: bool,
    /// Only a document of this workflow (its `workflow_id`) is returned [default: the one
    /// the file names, even when it is corrupt]
    #[arg(long, value_name = "ID")]
    pub workflow: Option<String>,
    /// Folder of checkpoint folders; FILE's are in its FILE-name subfolder [default: FILE's
    /// folder/checkpoints]
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Print only the document (where it came from goes to stderr when not the file itself)
    #[arg(long)]
    pub data: bool,
}

/// Runs `triage state-read`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    let rules = Validation::new(args.any, &args.require, args.check.as_deref())
        .map_err(|e| Failure::usage(format!("--check: {e}")))?;
    let checkpoints = checkpoint_dir(&args.file, args.checkpoint_dir.as_deref());
    let workflow = args.workflow.as_deref();
    let r = recovery::read_and_repair(&cx.ground(), &args.file, &rules, &checkpoints, workflow)?;
    for q in &r.quarantined {
        cx.warn(&format!(
            "{} is corrupt; kept it as {}",
            args.file.display(),
            q.display()
        ));
    }
    match (&r.recovered_from, &r.recovered_path) {
        (Some(src), Some(from)) if src != "primary" => cx.warn(&format!(
            "{} was recovered from {src} ({}){}",
            args.file.display(),
            from.display(),
            if r.repaired {
                "; the file was rewritten from it"
            } else {
                ""
            }
        )),
        (None, _) if !r.tried.is_empty() => {
            let what: Vec<String> = r
                .tried
                .iter()
                .map(|t| format!("{} ({})", t.path.display(), t.problem))
                .collect();
            let msg = format!(
                "no valid state for {}; tried {}",
                args.file.display(),
                what.join(", ")
            );
            if cx.global.strict {
                return Err(Failure::data(msg));
            }
            cx.warn(&msg);
        }
        _ => {}
    }
    let negative = r.data.is_none();
    let out = if args.data || cx.global.text {
        match &r.data {
            Some(d) if cx.global.text => {
                Answer::text(serde_json::to_string_pretty(d).unwrap_or_default())
            }
            Some(d) => Answer::json(d),
            // No document: `null`, so `--data | jq .stage` still reads one JSON value.
            None if !cx.global.text => Answer::json(&Value::Null),
            None => Answer::nothing(),
        }
    } else {
        Answer::json(&r)
    };
    Ok(out.negative(negative))
}
