//! Phase manifests (`triage phase`): `<root>/workflows/<W>/phase-<N>.json` and the folder of
//! the items' files beside it, read with a fall back to the `.bak` of a torn write, written
//! atomically, and held by a lock for the whole of a run, a resume or a decision; and a
//! person's decision recorded at once on the phase's open errors and on its manifest.

use crate::core::error_record::{Phase, Resolution};
use crate::core::phase::{Applied, ItemEntry, Manifest};
use crate::exit::Failure;
use crate::store::error_log::{self, Selection};
use crate::store::files::{self, Backup, Lock};
use crate::store::ground::Ground;
use serde::{Deserialize, Serialize};
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
        files::ensure_dir(dir)?;
    }
    match files::lock(path, wait) {
        Ok(lock) => Ok(Some(lock)),
        Err(e) if e.is_lock_timeout() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads the manifest; a torn or corrupt one falls back to its `.bak` (then `true`: a version
/// that may predate the last write). The lines of its journal, when a runner left one of the
/// manifest's generation, bring its items up to date (see [`Journal`]); a line that does not
/// parse or names an item the manifest does not have is passed over, and `warn` told.
pub fn read(path: &Path, warn: &dyn Fn(&str)) -> Result<Option<(Manifest, bool)>, Failure> {
    // One over its size bound is not read, and is as unreadable as a corrupt one.
    let parsed = match files::read_optional_within(path, files::Bound::Manifest) {
        Ok(None) => return Ok(None),
        Ok(Some(bytes)) => serde_json::from_slice::<Manifest>(&bytes).map_err(|e| e.to_string()),
        Err(e) if e.is_too_large() => Err(e.to_string()),
        Err(e) => return Err(e.into()),
    };
    let (mut m, from_backup) = match parsed {
        Ok(m) => (m, false),
        Err(e) => {
            let bak = files::with_suffix(path, ".bak");
            match files::read_optional_within(&bak, files::Bound::Manifest)
                .or_else(|e| if e.is_too_large() { Ok(None) } else { Err(e) })?
                .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
            {
                Some(m) => (m, true),
                None => {
                    return Err(Failure::data(format!(
                        "the manifest {} is not readable ({e}) and has no readable .bak",
                        path.display()
                    )))
                }
            }
        }
    };
    replay(path, &mut m, warn);
    Ok(Some((m, from_backup)))
}

/// The journal beside manifest `path`: `phase-<N>.json.journal`.
pub fn journal_path(path: &Path) -> PathBuf {
    files::with_suffix(path, ".journal")
}

/// The first line of a journal: the generation of the manifest it belongs to.
#[derive(Serialize, Deserialize)]
struct Header {
    journal: u64,
}

/// One line of a journal: item `i` (whose id must be the manifest's) as it now stands.
#[derive(Serialize)]
struct LineOut<'a> {
    i: usize,
    e: &'a ItemEntry,
}

#[derive(Deserialize)]
struct LineIn {
    i: usize,
    e: ItemEntry,
}

/// Brings `m`'s items up to date from the journal of its generation. The journal is as
/// hostile as the rest of the state root: a torn last line (a runner killed mid-append) is
/// skipped silently; a line that does not parse, or names an item not in the manifest, is
/// passed over with a warning; an unreadable journal is a warning, never a failure.
fn replay(path: &Path, m: &mut Manifest, warn: &dyn Fn(&str)) {
    let Some(generation) = m.journal else {
        return;
    };
    let jp = journal_path(path);
    let mut header: Option<bool> = None;
    let mut ignored = 0u64;
    let read = files::read_jsonl(&jp, |line| match header {
        None => {
            let ours =
                serde_json::from_slice::<Header>(line).is_ok_and(|h| h.journal == generation);
            header = Some(ours);
            true
        }
        Some(false) => true,
        Some(true) => match serde_json::from_slice::<LineIn>(line) {
            Ok(l) if m.items.get(l.i).is_some_and(|e| e.id == l.e.id) => {
                if let Some(e) = m.items.get_mut(l.i) {
                    *e = l.e;
                }
                true
            }
            _ => {
                ignored += 1;
                true
            }
        },
    });
    match read {
        Err(e) => warn(&format!("the journal {} is not read: {e}", jp.display())),
        Ok(_) if ignored > 0 => warn(&format!(
            "{ignored} line(s) of the journal {} do not parse or name no item of the manifest; passed over",
            jp.display()
        )),
        Ok(_) => {}
    }
}

/// A fresh journal generation: never one an older journal of this manifest can have.
fn new_generation() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    (nanos ^ (u64::from(std::process::id()) << 32))
        .wrapping_add(COUNT.fetch_add(1, Ordering::Relaxed))
        .max(1)
}

/// A fault point of the crash tests (none in a shipped build).
fn fault(step: &str) -> Result<(), Failure> {
    files::fault::at(step).map_err(|e| Failure::io(e.to_string()))
}

/// The manifest's journal while a runner works: a state change costs one appended line (the
/// item's entry as it now stands), not a rewrite of the whole manifest. The manifest is
/// written whole (compacted) when the journal starts — so at each resume — and when the run
/// ends ([`write()`]). Its first line names the manifest's generation: a journal left beside a
/// manifest written since (a runner killed between the two steps of a compaction) is stale and
/// never read. The caller holds the manifest's lock.
pub struct Journal {
    path: PathBuf,
    /// Lines appended since the last fsync.
    unsynced: bool,
}

impl Journal {
    /// Writes `m` whole under a new generation (durably), then starts the empty journal of
    /// that generation (durably too: an item with side effects may start right after).
    pub fn start(path: &Path, m: &mut Manifest) -> Result<Journal, Failure> {
        m.journal = Some(new_generation());
        write_snapshot(path, m)?;
        fault("journal-compacted")?;
        let jp = journal_path(path);
        files::remove(&jp)?;
        fault("journal-removed")?;
        let header = serde_json::to_vec(&Header {
            journal: m.journal.unwrap_or_default(),
        })
        .map_err(|e| Failure::data(format!("cannot serialize the journal: {e}")))?;
        files::append_line_synced(&jp, &header)?;
        if let Some(dir) = jp.parent() {
            files::sync_dir(dir)?;
        }
        Ok(Journal {
            path: path.to_path_buf(),
            unsynced: false,
        })
    }

    /// Appends the entries of items `which` as they stand in `m`; `durable`: fsynced before
    /// this returns (an item with side effects is about to start). An entry too long for a
    /// line makes it a compaction instead.
    pub fn append(
        &mut self,
        m: &mut Manifest,
        which: impl IntoIterator<Item = usize>,
        durable: bool,
    ) -> Result<(), Failure> {
        let jp = journal_path(&self.path);
        let mut batch: Vec<u8> = Vec::new();
        for i in which {
            let Some(e) = m.items.get(i) else {
                continue;
            };
            let line = serde_json::to_vec(&LineOut { i, e })
                .map_err(|e| Failure::data(format!("cannot serialize the journal: {e}")))?;
            if line.len() + 1 >= files::MAX_LINE {
                *self = Journal::start(&self.path, m)?;
                return Ok(());
            }
            if batch.len() + line.len() + 1 >= files::MAX_LINE {
                fault("journal-append")?;
                files::append_line_locked(&jp, &batch)?;
                self.unsynced = true;
                batch.clear();
            }
            batch.extend_from_slice(&line);
            batch.push(b'\n');
        }
        if !batch.is_empty() {
            fault("journal-append")?;
            if durable {
                files::append_line_synced(&jp, &batch)?;
            } else {
                files::append_line_locked(&jp, &batch)?;
            }
            self.unsynced = !durable;
        } else if durable && self.unsynced {
            files::append_line_synced(&jp, b"\n")?;
            self.unsynced = false;
        }
        fault("journal-appended")?;
        Ok(())
    }
}

/// Writes the manifest atomically (temp file, fsync, rename, previous version as `.bak`)
/// whole, with no journal: a journal beside it is removed. The caller holds its lock.
pub fn write(path: &Path, m: &mut Manifest) -> Result<(), Failure> {
    m.journal = None;
    write_snapshot(path, m)?;
    fault("journal-final")?;
    files::remove(&journal_path(path))?;
    Ok(())
}

/// The manifest whole, durably (its folder fsynced too).
fn write_snapshot(path: &Path, m: &Manifest) -> Result<(), Failure> {
    let mut bytes = serde_json::to_vec_pretty(m)
        .map_err(|e| Failure::data(format!("cannot serialize the manifest: {e}")))?;
    bytes.push(b'\n');
    files::replace(path, &bytes, Backup::Keep)?;
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
/// `by`: who decided (`person`, or [`crate::core::phase::BY_DEFAULT`] when `phase wait`
/// applied the default at the deadline); the decision is no longer pending.
pub fn decide(
    g: &Ground,
    (workflow, phase): (&str, &str),
    path: &Path,
    m: &mut Manifest,
    (letter, action): (&str, &str),
    by: &str,
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
        "choice": letter, "action": action, "at": at, "decided_by": by,
        "resolved": resolved, "skipped": items.skipped, "rerun": items.rerun,
    });
    if let Some(d) = m
        .decision
        .as_mut()
        .and_then(serde_json::Value::as_object_mut)
    {
        d.insert("choice".into(), record);
        if d.contains_key("pending") {
            d.insert("pending".into(), false.into());
        }
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
