//! A state document read with recovery (seed 002 "Recovery on Corruption"): the newest valid
//! of `FILE.bak` and FILE's own checkpoints when FILE is missing or corrupt, then FILE
//! rewritten from it. A corrupt file is moved aside as `FILE.corrupt-<timestamp>`, never
//! deleted; a candidate of another workflow is never used. `state-read`, `state-write` and
//! `saga` read state through here.

use crate::core::state::Validation;
use crate::exit::Failure;
use crate::store::files;
use crate::store::ground::Ground;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

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
    /// The file the data came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered_path: Option<PathBuf>,
    /// The document.
    pub data: Option<Value>,
    /// What was tried before the data was found.
    pub tried: Vec<Tried>,
    /// Corrupt files moved aside.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quarantined: Vec<PathBuf>,
    /// True when the file was rewritten from what was recovered.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub repaired: bool,
    /// The bytes the data was read from, to repair the file with.
    #[serde(skip)]
    bytes: Option<Vec<u8>>,
    /// Whether the file itself was missing or corrupt (and so may be repaired).
    #[serde(skip)]
    pub primary_broken: bool,
}

impl Recovery {
    /// True when some file existed but none was valid.
    pub fn all_invalid(&self) -> bool {
        self.data.is_none() && self.tried.iter().any(|t| t.problem != "missing")
    }
}

/// The checkpoint folder of `file`: `checkpoints/<file name>/` beside it (or in the folder
/// given), so no file is ever recovered from another file's checkpoint.
pub fn checkpoint_dir(file: &Path, flag: Option<&Path>) -> PathBuf {
    let base = match flag {
        Some(d) => d.to_path_buf(),
        None => file.parent().unwrap_or(Path::new("")).join("checkpoints"),
    };
    base.join(file.file_name().unwrap_or(std::ffi::OsStr::new("state")))
}

/// Declares the folders of a state file to the store: the file's own folder and the folder
/// of its checkpoint folder are the user's (opened as named); `checkpoints/<file name>/` and
/// everything else the store derives below them is never reached through a link.
pub fn anchor_state_folders(file: &Path, checkpoints: &Path) {
    let folder = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    files::anchor(folder);
    if let Some(base) = checkpoints.parent().filter(|p| !p.as_os_str().is_empty()) {
        files::anchor(base);
    }
}

/// Reads `file` with recovery (see [`recover_workflow`]), with no workflow id asked for.
pub fn recover(
    file: &Path,
    rules: &Validation,
    checkpoints: &Path,
    quarantine_stamp: Option<&str>,
) -> Result<Recovery, Failure> {
    recover_workflow(file, rules, checkpoints, quarantine_stamp, None)
}

/// Reads `file` with recovery: the file itself when valid, else the newest valid of its
/// `.bak` and its checkpoints. A candidate of another workflow than `workflow` (else the one
/// the file names, read even from a corrupt file) is never returned. A file corrupt in shape
/// (not JSON, or not an object without `--any`) is moved aside when `quarantine_stamp` is
/// given; the caller then holds the file's lock.
pub fn recover_workflow(
    file: &Path,
    rules: &Validation,
    checkpoints: &Path,
    quarantine_stamp: Option<&str>,
    workflow: Option<&str>,
) -> Result<Recovery, Failure> {
    anchor_state_folders(file, checkpoints);
    let mut r = Recovery {
        path: file.to_path_buf(),
        recovered_from: None,
        recovered_path: None,
        data: None,
        tried: Vec::new(),
        quarantined: Vec::new(),
        repaired: false,
        bytes: None,
        primary_broken: false,
    };
    let mut expected = workflow.map(str::to_string);
    let tried = |r: &mut Recovery, source: &str, path: &Path, problem: String| {
        r.tried.push(Tried {
            source: source.to_string(),
            path: path.to_path_buf(),
            problem,
        })
    };
    match files::read_optional(file) {
        Ok(None) => {
            r.primary_broken = true;
            tried(&mut r, "primary", file, "missing".into());
        }
        Err(e) => tried(&mut r, "primary", file, e.to_string()),
        Ok(Some(bytes)) => {
            if expected.is_none() {
                expected = named_workflow(&bytes);
            }
            match Validation::shape_only(rules.any).parse(&bytes) {
                Err(problem) => {
                    r.primary_broken = true;
                    if let Some(stamp) = quarantine_stamp {
                        r.quarantined.push(files::quarantine(file, stamp)?);
                    }
                    tried(&mut r, "primary", file, problem);
                }
                Ok(doc) => match judge(rules, &doc, expected.as_deref()) {
                    Ok(()) => {
                        r.data = Some(doc);
                        r.recovered_from = Some("primary".into());
                        r.recovered_path = Some(file.to_path_buf());
                        r.bytes = Some(bytes);
                        return Ok(r);
                    }
                    Err(problem) => tried(&mut r, "primary", file, problem),
                },
            }
        }
    }
    let backup = files::with_suffix(file, ".bak");
    let mut candidates = vec![("backup".to_string(), backup.clone())];
    candidates.extend(checkpoints_of(checkpoints));
    // The newest write first, whichever file holds it.
    let mut dated: Vec<(i128, String, PathBuf)> = Vec::new();
    for (source, path) in candidates {
        match files::modified_ns(&path) {
            Ok(Some(t)) => dated.push((t, source, path)),
            Ok(None) => tried(&mut r, &source, &path, "missing".into()),
            Err(e) => tried(&mut r, &source, &path, e.to_string()),
        }
    }
    dated.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    for (_, source, path) in dated {
        let bytes = match files::read_optional(&path) {
            Ok(Some(b)) => b,
            Ok(None) => {
                tried(&mut r, &source, &path, "missing".into());
                continue;
            }
            Err(e) => {
                tried(&mut r, &source, &path, e.to_string());
                continue;
            }
        };
        let judged = rules
            .parse(&bytes)
            .and_then(|doc| judge(rules, &doc, expected.as_deref()).map(|()| doc));
        match judged {
            Ok(doc) => {
                r.data = Some(doc);
                r.recovered_from = Some(source);
                r.recovered_path = Some(path);
                r.bytes = Some(bytes);
                return Ok(r);
            }
            Err(problem) => tried(&mut r, &source, &path, problem),
        }
    }
    Ok(r)
}

/// The rules, and the workflow: a document naming another `workflow_id` is not this one's.
fn judge(rules: &Validation, doc: &Value, workflow: Option<&str>) -> Result<(), String> {
    rules.check(doc)?;
    if let (Some(want), Some(got)) = (workflow, doc.get("workflow_id").and_then(Value::as_str)) {
        if want != got {
            return Err(format!("it belongs to workflow `{got}`, not `{want}`"));
        }
    }
    Ok(())
}

/// The `workflow_id` a file names, read even from a corrupt (cut, garbled) file: the first
/// `"workflow_id": "…"` in it.
fn named_workflow(bytes: &[u8]) -> Option<String> {
    if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(bytes) {
        return m
            .get("workflow_id")
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    let text = String::from_utf8_lossy(bytes);
    let at = text.find("\"workflow_id\"")?;
    let rest = text[at + "\"workflow_id\"".len()..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let mut de = serde_json::Deserializer::from_str(rest).into_iter::<String>();
    de.next()?.ok()
}

/// The checkpoints in `dir` (regular files only; links and temp files are passed over).
fn checkpoints_of(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = files::list_dir(dir) else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter(|e| e.kind == files::Kind::File)
        .map(|e| e.name.to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.') && !name.ends_with(".lock"))
        .map(|name| (format!("checkpoint:{name}"), dir.join(&name)))
        .collect()
}

/// `state-read`: reads `file` with recovery, for workflow `workflow` (else the one the file
/// names). Reading needs no lock (writers replace atomically); moving a corrupt file aside
/// and repairing it from what was recovered do, so then it is read again under the lock.
pub fn read_and_repair(
    g: &Ground,
    file: &Path,
    rules: &Validation,
    checkpoints: &Path,
    workflow: Option<&str>,
) -> Result<Recovery, Failure> {
    let mut r = recover_workflow(file, rules, checkpoints, None, workflow)?;
    let needs_repair = r.data.is_some() && r.primary_broken;
    let corrupt = r
        .tried
        .first()
        .is_some_and(|t| t.source == "primary" && r.primary_broken && t.problem != "missing");
    if needs_repair || corrupt {
        let _lock = files::lock(file, g.lock_wait())?;
        r = recover_workflow(file, rules, checkpoints, Some(&g.stamp()), workflow)?;
        if let (true, Some(bytes)) = (r.primary_broken, r.bytes.as_deref()) {
            files::replace(file, bytes, files::Backup::Skip)?;
            r.repaired = true;
        }
    }
    Ok(r)
}
