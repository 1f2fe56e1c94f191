//! `triage state-read FILE`: print a state document, recovering from `FILE.bak`, then the
//! newest valid checkpoint, when it is missing or corrupt (seed 002 "Recovery on Corruption").
//! A corrupt file is moved aside as `FILE.corrupt-<timestamp>`, never deleted.

use crate::context::{Context, Outcome};
use crate::exit::Failure;
use crate::state::Validation;
use crate::store;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Arguments of `triage state-read`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  triage state-read run/state.json\n  \
    triage state-read run/state.json --require stage --data | jq .stage")]
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
    /// Checkpoint folder [default: FILE's folder/checkpoints]
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Print only the document (where it came from goes to stderr when not the file itself)
    #[arg(long)]
    pub data: bool,
}

/// One place recovery looked, and what was wrong there.
#[derive(Clone, Debug, Serialize)]
pub struct Tried {
    /// `primary`, `backup` or `checkpoint:<name>`.
    pub source: String,
    /// The file.
    pub path: PathBuf,
    /// `missing`, or why it was not valid.
    pub problem: String,
}

/// The result of reading with recovery.
#[derive(Debug, Serialize)]
pub struct Recovery {
    /// The file asked for.
    pub path: PathBuf,
    /// Where the data came from, or null when nothing valid exists.
    pub recovered_from: Option<String>,
    /// The document.
    pub data: Option<Value>,
    /// What was tried before the data was found.
    pub tried: Vec<Tried>,
    /// Corrupt files moved aside.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quarantined: Vec<PathBuf>,
}

impl Recovery {
    /// True when some file existed but none was valid.
    pub fn all_invalid(&self) -> bool {
        self.data.is_none() && self.tried.iter().any(|t| t.problem != "missing")
    }
}

/// The checkpoint folder for `file`.
pub fn checkpoint_dir(file: &Path, flag: Option<&Path>) -> PathBuf {
    match flag {
        Some(d) => d.to_path_buf(),
        None => file.parent().unwrap_or(Path::new("")).join("checkpoints"),
    }
}

/// Reads `file` with recovery. The caller holds the file's lock when `quarantine` is true.
pub fn recover(
    file: &Path,
    rules: &Validation,
    checkpoints: &Path,
    quarantine_stamp: Option<&str>,
) -> Result<Recovery, Failure> {
    let mut r = Recovery {
        path: file.to_path_buf(),
        recovered_from: None,
        data: None,
        tried: Vec::new(),
        quarantined: Vec::new(),
    };
    let mut candidates = vec![("primary".to_string(), file.to_path_buf())];
    candidates.push(("backup".to_string(), store::with_suffix(file, ".bak")));
    candidates.extend(newest_checkpoints(checkpoints));
    for (source, path) in candidates {
        let bytes = match store::read_optional(&path) {
            Ok(Some(b)) => b,
            Ok(None) => {
                r.tried.push(Tried {
                    source,
                    path,
                    problem: "missing".into(),
                });
                continue;
            }
            Err(e) => {
                r.tried.push(Tried {
                    source,
                    path,
                    problem: e.to_string(),
                });
                continue;
            }
        };
        match rules.parse(&bytes) {
            Ok(doc) => {
                r.data = Some(doc);
                r.recovered_from = Some(source);
                return Ok(r);
            }
            Err(problem) => {
                if source == "primary" {
                    if let Some(stamp) = quarantine_stamp {
                        r.quarantined.push(store::quarantine(&path, stamp)?);
                    }
                }
                r.tried.push(Tried {
                    source,
                    path,
                    problem,
                });
            }
        }
    }
    Ok(r)
}

/// Checkpoint files, newest first (by modification time, then name).
fn newest_checkpoints(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(std::time::SystemTime, String, PathBuf)> = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(meta) = e.metadata() else { continue };
        if name.starts_with('.') || name.ends_with(".lock") || !meta.is_file() {
            continue;
        }
        let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        found.push((modified, name, e.path()));
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    found
        .into_iter()
        .map(|(_, name, path)| (format!("checkpoint:{name}"), path))
        .collect()
}

/// Runs `triage state-read`.
pub fn run(args: &Args, cx: &Context) -> Result<Outcome, Failure> {
    let rules = Validation::new(args.any, &args.require, args.check.as_deref())
        .map_err(|e| Failure::usage(format!("--check: {e}")))?;
    let checkpoints = checkpoint_dir(&args.file, args.checkpoint_dir.as_deref());
    // Reading needs no lock (writers replace atomically); moving a corrupt file aside does.
    let mut r = recover(&args.file, &rules, &checkpoints, None)?;
    if r.tried
        .first()
        .is_some_and(|t| t.source == "primary" && t.problem != "missing")
    {
        let _lock = store::lock(&args.file, cx.lock_timeout)?;
        r = recover(&args.file, &rules, &checkpoints, Some(&cx.stamp()))?;
    }
    for q in &r.quarantined {
        cx.warn(&format!(
            "{} is corrupt; kept it as {}",
            args.file.display(),
            q.display()
        ));
    }
    match &r.recovered_from {
        Some(src) if src != "primary" => {
            cx.warn(&format!("{} was recovered from {src}", args.file.display()))
        }
        None if !r.tried.is_empty() => {
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
                Outcome::text(serde_json::to_string_pretty(d).unwrap_or_default())
            }
            Some(d) => Outcome::json(d),
            // No document: `null`, so `--data | jq .stage` still reads one JSON value.
            None if !cx.global.text => Outcome::json(&Value::Null),
            None => Outcome::nothing(),
        }
    } else {
        Outcome::json(&r)
    };
    Ok(out.negative(negative))
}
