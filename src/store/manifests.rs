//! Phase manifests (`triage phase`): `<root>/workflows/<W>/phase-<N>.json` and the folder of
//! the items' files beside it, read with a fall back to the `.bak` of a torn write, written
//! atomically, and held by a lock for the whole of a run, a resume or a decision; and a
//! person's decision recorded at once on the phase's open errors and on its manifest.

use crate::core::error_record::{Phase, Resolution};
use crate::core::phase::{Applied, Manifest};
use crate::exit::Failure;
use crate::store::error_log::{self, Selection};
use crate::store::files::{self, Backup, Lock};
use crate::store::ground::Ground;
use std::path::{Path, PathBuf};

/// The manifest of phase `phase` of workflow `workflow`.
pub fn path(root: &Path, workflow: &str, phase: &str) -> PathBuf {
    root.join("workflows")
        .join(files::escape_key(workflow))
        .join(format!("phase-{}.json", files::escape_key(phase)))
}

/// The folder of a phase's item files: `<root>/workflows/<W>/phase-<N>/`.
pub fn files_dir(root: &Path, workflow: &str, phase: &str) -> PathBuf {
    root.join("workflows")
        .join(files::escape_key(workflow))
        .join(format!("phase-{}", files::escape_key(phase)))
}

/// Takes the manifest's lock for the whole run; `None` when another process holds it past
/// `wait` (a second runner, or a `decide` while one runs).
pub fn hold(path: &Path, wait: std::time::Duration) -> Result<Option<Lock>, Failure> {
    if let Some(dir) = path.parent() {
        files::create_dirs(dir)?;
    }
    match files::lock(path, wait) {
        Ok(lock) => Ok(Some(lock)),
        Err(e) if e.is_lock_timeout() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads the manifest; a torn or corrupt one falls back to its `.bak` (then `true`: a version
/// that may predate the last write).
pub fn read(path: &Path) -> Result<Option<(Manifest, bool)>, Failure> {
    let Some(bytes) = files::read_optional(path)? else {
        return Ok(None);
    };
    match serde_json::from_slice::<Manifest>(&bytes) {
        Ok(m) => Ok(Some((m, false))),
        Err(e) => {
            let bak = files::with_suffix(path, ".bak");
            if let Some(m) = files::read_optional(&bak)?
                .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
            {
                return Ok(Some((m, true)));
            }
            Err(Failure::data(format!(
                "the manifest {} is not readable ({e}) and has no readable .bak",
                path.display()
            )))
        }
    }
}

/// Writes the manifest atomically (temp file, fsync, rename, previous version as `.bak`).
/// The caller holds its lock.
pub fn write(path: &Path, m: &Manifest) -> Result<(), Failure> {
    write_as(path, m, true)
}

/// [`write()`]; `durable: false` leaves out the folder's fsync (the file itself is fsynced, so
/// never torn): for the writes while items run, whose loss to a power cut only means
/// `resume` runs again what they had filed as ended.
pub fn write_as(path: &Path, m: &Manifest, durable: bool) -> Result<(), Failure> {
    let mut bytes = serde_json::to_vec_pretty(m)
        .map_err(|e| Failure::data(format!("cannot serialize the manifest: {e}")))?;
    bytes.push(b'\n');
    if durable {
        files::replace(path, &bytes, Backup::Keep)?;
    } else {
        files::replace_deferred(path, &bytes, Backup::Keep)?;
    }
    Ok(())
}

/// What a decision did.
pub struct Decided {
    /// The open errors of the phase it resolved.
    pub resolved: Vec<String>,
    /// Those that were resolved already.
    pub already_resolved: usize,
    /// What it did to the items.
    pub items: Applied,
}

/// Records choice `letter` (`action`) on every open error of phase `phase` of `workflow` in
/// the log and on the manifest's items, then writes the manifest (the caller holds its lock).
pub fn decide(
    g: &Ground,
    (workflow, phase): (&str, &str),
    path: &Path,
    m: &mut Manifest,
    (letter, action): (&str, &str),
) -> Result<Decided, Failure> {
    let sel = Selection {
        workflow: Some(workflow.to_string()),
        phase: Some(Phase::parse(phase).to_string()),
        ..Selection::default()
    };
    let resolution = Resolution {
        action_taken: Some(action.into()),
        user_choice: Some(letter.into()),
        ..Resolution::default()
    };
    let done = error_log::resolve(g, &sel, resolution)?;
    let at = crate::core::saga::stamp(g.now);
    let items = m.apply_choice(letter, action, &at);
    let resolved: Vec<String> = done.lines.iter().map(|l| l.resolves.clone()).collect();
    let record = serde_json::json!({
        "choice": letter, "action": action, "at": at,
        "resolved": resolved, "skipped": items.skipped, "rerun": items.rerun,
    });
    if let Some(d) = m
        .decision
        .as_mut()
        .and_then(serde_json::Value::as_object_mut)
    {
        d.insert("choice".into(), record);
    } else {
        m.decision = Some(serde_json::json!({ "choice": record }));
    }
    m.updated_at = crate::core::saga::stamp(g.now);
    write(path, m)?;
    Ok(Decided {
        resolved,
        already_resolved: done.already_resolved,
        items,
    })
}
