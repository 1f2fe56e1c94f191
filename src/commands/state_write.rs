//! `triage state-write FILE`: replace a JSON state document atomically (seed 002 "Atomic State
//! Writes Protocol"): validate first, then under the file's lock write a temp file, fsync,
//! keep the old version as `.bak`, rename, fsync the folder. `--update JQ` reads, transforms
//! and writes under one lock, so concurrent updates never lose one another.

use crate::context::{Answer, Context};
use crate::core::state::{check_writable, type_name, Validation};
use crate::exit::Failure;
use crate::store::files::{self, Backup};
use crate::store::recovery::{self, checkpoint_dir};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Arguments of `triage state-write`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    echo '{\"stage\": 2, \"workflow_id\": \"w1\"}' | triage state-write run/state.json --require workflow_id\n  \
    triage state-write run/state.json --update '.stage += 1' --checkpoint stage_3_complete.json")]
pub struct Args {
    /// The state file (stdin is its whole new content)
    pub file: PathBuf,
    /// Accept any JSON value, not only an object
    #[arg(long)]
    pub any: bool,
    /// A dotted path that must be present and not null (repeatable)
    #[arg(long, value_name = "KEY")]
    pub require: Vec<String>,
    /// A jq filter that must yield true before anything is written
    #[arg(long, value_name = "JQ")]
    pub check: Option<String>,
    /// Instead of stdin: apply this jq filter to the current document, under the lock
    #[arg(long, value_name = "JQ")]
    pub update: Option<String>,
    /// Also keep a copy as NAME in FILE's checkpoint folder (checkpoints/<FILE name>/NAME)
    #[arg(long, value_name = "NAME")]
    pub checkpoint: Option<String>,
    /// Folder of checkpoint folders; FILE's go in its FILE-name subfolder [default: FILE's
    /// folder/checkpoints]
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
}

/// Runs `triage state-write`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    let rules = Validation::new(args.any, &args.require, args.check.as_deref())
        .map_err(|e| Failure::usage(format!("--check: {e}")))?;
    let update = match &args.update {
        Some(code) => Some(
            crate::core::jq::Filter::compile(code)
                .map_err(|e| Failure::usage(format!("--update: {e}")))?,
        ),
        None => None,
    };
    if let Some(name) = &args.checkpoint {
        check_checkpoint_name(name)?;
    }
    let checkpoints = checkpoint_dir(&args.file, args.checkpoint_dir.as_deref());
    recovery::anchor_state_folders(&args.file, &checkpoints);

    // Plain writes validate before taking the lock: bad input never touches the file.
    let input = match &update {
        // `--update` says everything: stdin is not read.
        Some(_) => None,
        None => {
            let bytes = cx.read_stdin()?.ok_or_else(|| {
                Failure::data(
                    "stdin is empty; send the whole new JSON document (or use --update JQ)",
                )
            })?;
            let doc = crate::context::parse_json(&bytes)?;
            rules
                .check(&doc)
                .map_err(|e| Failure::data(format!("not written: {e}")))?;
            check_writable(&doc, None, args.any, cx.max_input)
                .map_err(|e| Failure::data(format!("not written: {e}")))?;
            Some(bytes)
        }
    };

    // The file's folder is opened once for the lock, the reads and the write.
    let _folders = files::hold_folders();
    if let Some(dir) = args.file.parent().filter(|d| !d.as_os_str().is_empty()) {
        files::ensure_dir(dir)?;
    }
    let _lock = files::lock(&args.file, cx.lock_wait())?;
    let (bytes, current_valid) = match (&update, input) {
        (Some(filter), _) => updated(&args.file, filter, &rules, &checkpoints, cx)?,
        (None, Some(bytes)) => (bytes, false),
        (None, None) => return Err(Failure::data("nothing to write")),
    };

    // A corrupt current version is quarantined, not made the backup: the good .bak stays.
    // `--update` has just read and parsed it under this lock when it was valid: not again.
    // One over its size bound is not read (`Some(None)`): as corrupt as one that does not parse.
    let old = if current_valid {
        None
    } else {
        match files::read_optional(&args.file) {
            Err(e) if e.is_too_large() => Some(None),
            r => r?.map(Some),
        }
    };
    let corrupt = |old: &Option<Vec<u8>>| {
        old.as_ref()
            .is_none_or(|b| Validation::shape_only(true).parse(b).is_err())
    };
    let backup = match old {
        Some(old) if corrupt(&old) => {
            let q = files::quarantine(&args.file, &cx.stamp())?;
            cx.warn(&format!(
                "{} was corrupt; kept it as {}",
                args.file.display(),
                q.display()
            ));
            Backup::Skip
        }
        _ => Backup::Keep,
    };
    let replaced = files::replace(&args.file, &bytes, backup)?;

    let checkpoint = match &args.checkpoint {
        Some(name) => {
            files::ensure_dir(&checkpoints)?;
            let path = checkpoints.join(name);
            files::replace(&path, &bytes, Backup::Skip)?;
            Some(path)
        }
        None => None,
    };
    let digest = Sha256::digest(&bytes);
    let out = json!({
        "path": args.file,
        "bytes": bytes.len(),
        "sha256": digest.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        "backup": replaced.backup,
        "checkpoint": checkpoint,
        "written": true,
    });
    if cx.global.text {
        return Ok(Answer::text(format!(
            "wrote {} ({} bytes)",
            args.file.display(),
            bytes.len()
        )));
    }
    Ok(Answer::json(&out))
}

/// `--update`: the current document (recovered if need be; `{}` when none ever existed),
/// transformed by the filter, validated, serialized; and whether the current version was
/// the file itself, valid (read under the caller's lock).
fn updated(
    file: &Path,
    filter: &crate::core::jq::Filter,
    rules: &Validation,
    checkpoints: &Path,
    cx: &Context,
) -> Result<(Vec<u8>, bool), Failure> {
    let current = recovery::recover(file, &Validation::shape_only(rules.any), checkpoints, None)?;
    if current.all_invalid() {
        let what: Vec<String> = current
            .tried
            .iter()
            .map(|t| format!("{} ({})", t.path.display(), t.problem))
            .collect();
        return Err(Failure::data(format!(
            "cannot update: no valid version of {} ({}); repair it with `triage state-read`, or write a whole document without --update",
            file.display(),
            what.join(", ")
        )));
    }
    let from_file = current.recovered_from.as_deref() == Some("primary");
    if let Some(src) = current
        .recovered_from
        .as_deref()
        .filter(|s| *s != "primary")
    {
        cx.warn(&format!("{} was updated from {src}", file.display()));
    }
    // No version ever existed: start from `{}` (or null with --any), as a new state would.
    let input = current
        .data
        .unwrap_or(if rules.any { Value::Null } else { json!({}) });
    let mut outputs = filter
        .run(&input)
        .map_err(|e| Failure::data(format!("--update: {e}")))?;
    if outputs.len() != 1 {
        return Err(Failure::data(format!(
            "--update must yield exactly one document; it yielded {}",
            outputs.len()
        )));
    }
    let doc = outputs.remove(0);
    rules.check(&doc).map_err(|e| {
        Failure::data(format!(
            "not written: the updated document ({}) fails: {e}",
            type_name(&doc)
        ))
    })?;
    // Everything the reader will demand, before serializing (which recurses).
    check_writable(&doc, None, rules.any, cx.max_input)
        .map_err(|e| Failure::data(format!("not written: the updated document fails: {e}")))?;
    let mut bytes = serde_json::to_vec_pretty(&doc)
        .map_err(|e| Failure::data(format!("cannot serialize the update: {e}")))?;
    bytes.push(b'\n');
    check_writable(&doc, Some(&bytes), rules.any, cx.max_input)
        .map_err(|e| Failure::data(format!("not written: the updated document fails: {e}")))?;
    Ok((bytes, from_file))
}

fn check_checkpoint_name(name: &str) -> Result<(), Failure> {
    let bad = name.is_empty() || name.contains('/') || name.starts_with('.') || name.contains('\0');
    if bad {
        return Err(Failure::usage(format!(
            "--checkpoint `{name}` must be a plain file name (no `/`, not starting with `.`)"
        )));
    }
    Ok(())
}
