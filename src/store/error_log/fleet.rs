//! The error log on a fleet's Redis (see [`crate::store::fleet::log`]): a line goes to the stream
//! with its counter changes in one script; when Redis cannot take it, the line goes to the local
//! log as it always did, and a copy waits in `logs/fleet.outbox/<nonce>.json` until `triage store
//! sync` (or the next record written while Redis answers) pushes it. The nonce makes the push
//! idempotent: a record whose first append reached Redis but whose answer was lost is not added
//! twice.
//!
//! Which counters a line changes is decided here, by the rules of [`Counters`]: the session's
//! records, and per scope (the workflow, else the session) the failing units and their phases.

use super::Written;
use crate::core::error_record::{self, Counters, LogLine, ResolutionLine};
use crate::exit::Failure;
use crate::store::files;
use crate::store::fleet::log::{Append, Change, Hash, Id};
use crate::store::fleet::{select, Remote, RemoteError};
use crate::store::ground::Ground;
use std::path::{Path, PathBuf};

/// At most this many waiting records are pushed by a writer that found Redis answering (the
/// rest by `store sync` or the next writers), so no call pays for a long outage at once.
const PUSH_MAX: usize = 16;

/// Where records written locally during an outage wait to be pushed.
pub fn outbox_dir(root: &Path) -> PathBuf {
    root.join("logs").join("fleet.outbox")
}

/// The ids a line's counters are kept under.
struct Scope<'a> {
    session: Option<&'a str>,
    /// The workflow, else the session, else `""`.
    scope: &'a str,
}

/// The counter changes a line makes, by the rules of the file store's counters: a record
/// that opens a failure adds one to its session, its unit (the work item's breaker key, else
/// the agent) and the unit in its phase; a resolution line that closes one takes them off.
pub fn changes(line: &LogLine) -> Vec<Change> {
    let delta = if line.opens() {
        1
    } else if line.closes() {
        -1
    } else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(s) = line.session_id.as_deref() {
        out.push(Change {
            hash: Hash::Sessions,
            field: s.to_string(),
            delta,
            since: false,
        });
    }
    if let Some(unit) = line.unit() {
        out.push(Change {
            hash: Hash::Units,
            field: unit.to_string(),
            delta,
            since: true,
        });
        if let Some(p) = line.phase_text() {
            out.push(Change {
                hash: Hash::Units,
                field: format!("{unit}\u{1f}{p}"),
                delta,
                since: false,
            });
        }
    }
    out
}

fn scope_of<'a>(line: &'a LogLine) -> Scope<'a> {
    let session = line.session_id.as_deref();
    let workflow = line.workflow_id.as_deref();
    Scope {
        session,
        scope: workflow.or(session).unwrap_or(""),
    }
}

/// The counters a threshold needs, as the append left them: the session's open failures,
/// and the scope's units with open failures (and their phases).
fn counters_of(sc: &Scope<'_>, session_open: u64, units: &[(String, u64)]) -> Counters {
    let mut c = Counters::new();
    if let Some(s) = sc.session {
        c.open.sessions.insert(s.to_string(), session_open);
    }
    for (field, n) in units.iter().filter(|(_, n)| *n > 0) {
        let (unit, phase) = match field.split_once('\u{1f}') {
            Some((u, p)) => (u, Some(p)),
            None => (field.as_str(), None),
        };
        let u = c
            .open
            .units
            .entry(sc.scope.to_string())
            .or_default()
            .entry(unit.to_string())
            .or_default();
        match phase {
            Some(p) => {
                u.phases.insert(p.to_string(), *n);
            }
            None => u.open = *n,
        }
    }
    c
}

/// Appends a record to the fleet's log: its id the fleet's next sequence number. `None` when
/// there is no fleet store or it failed (the caller writes locally and calls [`keep`]).
pub(super) fn write(
    g: &Ground,
    root: &Path,
    body_after_id: &[u8],
    id_prefix: &str,
    nonce: &str,
) -> Option<Result<(String, Written), Failure>> {
    // The line as it will read, for its counters (its id is not one of them).
    let mut probe = Vec::with_capacity(body_after_id.len() + 20);
    probe.extend_from_slice(super::ID_PREFIX);
    probe.extend_from_slice(body_after_id);
    let parsed = LogLine::parse(&probe)?;
    let sc = scope_of(&parsed);
    let ch = changes(&parsed);
    let before = &super::ID_PREFIX[..super::ID_PREFIX.len() - 1];
    let after = std::iter::once(b'"')
        .chain(body_after_id.iter().copied())
        .collect::<Vec<u8>>();
    let done = select::with(g, "record", |r| {
        let a = r.append(&Append {
            before_id: before,
            after_id: &after,
            id: Id::Sequence(id_prefix.to_string()),
            nonce,
            keep_nonce: false,
            scope: sc.scope,
            session: sc.session,
            changes: &ch,
        })?;
        push_waiting(g, root, r, PUSH_MAX);
        Ok(a)
    })?;
    let counters = counters_of(&sc, done.session_open, &done.units);
    Some(Ok((done.error_id, Written::Logged(counters))))
}

/// The nonce of a resolution line: a closing one closes its record once, whoever races (kept
/// for good); any other is its own.
pub(super) fn resolution_nonce(l: &ResolutionLine, g: &Ground) -> String {
    if l.closes() {
        format!("closes:{}", l.resolves)
    } else {
        error_record::unique_error_id(g.now.timestamp_millis(), super::random())
    }
}

/// Appends resolution lines to the fleet's log; those it added (a record another host closed
/// meanwhile is not closed twice). `None` when there is no fleet store or it failed.
pub(super) fn append_resolutions(
    g: &Ground,
    root: &Path,
    lines: &[ResolutionLine],
    bytes: &[Vec<u8>],
) -> Option<Vec<ResolutionLine>> {
    select::with(g, "resolving", |r| {
        let added = push_resolutions(g, r, lines, bytes)?;
        push_waiting(g, root, r, PUSH_MAX);
        Ok(added)
    })
}

fn push_resolutions(
    g: &Ground,
    r: &mut Remote,
    lines: &[ResolutionLine],
    bytes: &[Vec<u8>],
) -> Result<Vec<ResolutionLine>, RemoteError> {
    let mut added = Vec::new();
    for (l, b) in lines.iter().zip(bytes) {
        let Some(parsed) = LogLine::parse(b) else {
            continue;
        };
        let sc = scope_of(&parsed);
        let ch = changes(&parsed);
        let nonce = resolution_nonce(l, g);
        let a = r.append(&Append {
            before_id: b,
            after_id: b"",
            id: Id::Keep(String::new()),
            keep_nonce: l.closes(),
            nonce: &nonce,
            scope: sc.scope,
            session: sc.session,
            changes: &ch,
        })?;
        if a.added {
            added.push(l.clone());
        }
    }
    Ok(added)
}

/// A success on the fleet's log (see [`super::recover`]): the unit's open failures from
/// where they begin (the counters say), resolved once each. `None` when there is no fleet
/// store or it failed.
pub(super) fn recover(
    g: &Ground,
    root: &Path,
    rec: &super::Recovery,
) -> Option<Result<Vec<ResolutionLine>, Failure>> {
    let at = g.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    select::with(g, "resolving", |r| {
        let Some(since) = r.unit_since(rec.scope, rec.unit)? else {
            return Ok(Ok(Vec::new()));
        };
        let mut picking = super::Recovering::new(rec, &at);
        r.read_log(&since, |_, line| picking.see(line))?;
        let bytes = match picking
            .open
            .iter()
            .map(super::resolution_bytes)
            .collect::<Result<Vec<_>, Failure>>()
        {
            Ok(b) => b,
            Err(f) => return Ok(Err(f)),
        };
        let added = push_resolutions(g, r, &picking.open, &bytes)?;
        push_waiting(g, root, r, PUSH_MAX);
        Ok(Ok(added))
    })
}

/// Keeps a line written locally while the fleet's Redis was away, for [`sync`].
pub(super) fn keep(g: &Ground, root: &Path, nonce: &str, line: &[u8]) {
    let path = outbox_dir(root).join(format!("{}.json", files::escape_key(nonce)));
    let kept = files::ensure_dir(&outbox_dir(root)).and_then(|()| files::spool(&path, line));
    match kept {
        Ok(()) => g.trace(
            "info",
            &format!(
                "kept {} for the fleet's log; `triage store sync` pushes it",
                path.display()
            ),
        ),
        Err(e) => g.warn(&format!(
            "the record is in the local log, but was not kept for the fleet's log ({e}); `triage store migrate` copies the local log"
        )),
    }
}

/// What [`sync`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Synced {
    /// Lines added to the fleet's log.
    pub pushed: u64,
    /// Lines it had already (their first push reached it).
    pub already: u64,
    /// Lines still waiting (Redis failed during the push, or `max` was reached).
    pub waiting: u64,
    /// Unreadable files moved aside.
    pub unreadable: u64,
}

/// Pushes waiting lines to the fleet's log, oldest first, at most `max`; each is removed once
/// Redis has it. An error is Redis failing midway: what was pushed stays pushed.
pub fn sync(g: &Ground, root: &Path, r: &mut Remote, max: usize) -> Result<Synced, RemoteError> {
    let mut done = Synced::default();
    let waiting = match waiting(root) {
        Ok(w) => w,
        Err(e) => {
            g.warn(&format!("cannot list {}: {e}", outbox_dir(root).display()));
            return Ok(done);
        }
    };
    let total = waiting.len() as u64;
    for (path, nonce) in waiting.into_iter().take(max) {
        let bytes = match files::read_optional(&path) {
            Ok(Some(b)) => b,
            Ok(None) => continue,
            Err(e) => {
                g.warn(&format!("cannot read {}: {e}", path.display()));
                continue;
            }
        };
        let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        let Some(parsed) = LogLine::parse(line) else {
            if let Ok(q) = files::quarantine(&path, &g.stamp()) {
                g.warn(&format!(
                    "a record kept for the fleet's log was unreadable; moved it aside as {}",
                    q.display()
                ));
            }
            done.unreadable += 1;
            continue;
        };
        let sc = scope_of(&parsed);
        let ch = changes(&parsed);
        let a = r.append(&Append {
            before_id: line,
            after_id: b"",
            id: Id::Keep(parsed.error_id.as_deref().unwrap_or("").to_string()),
            nonce: &nonce,
            keep_nonce: nonce.starts_with("closes:"),
            scope: sc.scope,
            session: sc.session,
            changes: &ch,
        })?;
        if a.added {
            done.pushed += 1;
        } else {
            done.already += 1;
        }
        if let Err(e) = files::remove(&path) {
            g.warn(&format!(
                "pushed {}, but cannot remove it ({e}); the next sync finds it already there",
                path.display()
            ));
        }
    }
    done.waiting = total - done.pushed - done.already - done.unreadable;
    Ok(done)
}

/// The waiting files with their nonces, oldest first (a nonce starts with its time).
pub fn waiting(root: &Path) -> Result<Vec<(PathBuf, String)>, files::StoreError> {
    let dir = outbox_dir(root);
    let mut out: Vec<(PathBuf, String)> = files::list_dir(&dir)?
        .into_iter()
        .filter(|e| e.kind == files::Kind::File)
        .filter_map(|e| {
            let name = e.name.to_string_lossy().into_owned();
            let stem = name.strip_suffix(".json").filter(|s| !s.starts_with('.'))?;
            let nonce = files::unescape_key(stem)?;
            Some((dir.join(&e.name), nonce))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Pushes a few waiting lines while Redis answers; a failure here only leaves them waiting.
fn push_waiting(g: &Ground, root: &Path, r: &mut Remote, max: usize) {
    let any = files::list_dir(&outbox_dir(root)).is_ok_and(|l| !l.is_empty());
    if any {
        if let Err(e) = sync(g, root, r, max) {
            g.trace(
                "warning",
                &format!("records kept during an outage were not all pushed: {e}"),
            );
        }
    }
}

/// Visits the fleet's log (and, after it, the lines still waiting to be pushed). `None` when
/// there is no fleet store or it failed before the first line; a failure after it is an error,
/// since the local log would visit lines twice.
pub(super) fn read_all(
    g: &Ground,
    root: &Path,
    visit: &mut dyn FnMut(&[u8]) -> bool,
) -> Option<Result<files::JsonlStats, Failure>> {
    let mut stats = files::JsonlStats::default();
    let mut failed_midway = None;
    let read = select::with(g, "reading the error log", |r| {
        match r.read_log("-", |_, line| {
            if visit(line) {
                stats.valid += 1;
            } else {
                stats.skipped += 1;
            }
            true
        }) {
            Ok(_) => Ok(()),
            Err(e) if stats.valid + stats.skipped > 0 => {
                failed_midway = Some(e.to_string());
                Ok(())
            }
            Err(e) => Err(e),
        }
    });
    read?;
    if let Some(e) = failed_midway {
        return Some(Err(Failure::io(format!(
            "the fleet's error log could not be read to its end: {e}"
        ))));
    }
    if let Ok(list) = waiting(root) {
        for (path, _) in list {
            if let Ok(Some(bytes)) = files::read_optional(&path) {
                let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
                if visit(line) {
                    stats.valid += 1;
                } else {
                    stats.skipped += 1;
                }
            }
        }
    }
    Some(Ok(stats))
}

/// What [`migrate`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Migrated {
    /// Lines copied.
    pub copied: u64,
    /// Lines the fleet had already (a migration run before).
    pub already: u64,
    /// Lines that were not log lines (not copied).
    pub unreadable: u64,
}

/// Copies every line of the local log under `root` into the fleet's stream, oldest first, with
/// its counter changes. A line's nonce is its content's hash, kept for good, so running it
/// again adds nothing.
pub fn migrate(root: &Path, r: &mut Remote) -> Result<Result<Migrated, RemoteError>, Failure> {
    use sha2::{Digest, Sha256};
    let mut done = Migrated::default();
    let mut failure: Option<RemoteError> = None;
    super::read_all(root, |line| {
        if failure.is_some() {
            return true;
        }
        let Some(parsed) = LogLine::parse(line) else {
            done.unreadable += 1;
            return false;
        };
        let nonce: String = std::iter::once("migrated:".to_string())
            .chain(Sha256::digest(line).iter().map(|b| format!("{b:02x}")))
            .collect();
        let sc = scope_of(&parsed);
        let appended = r.append(&Append {
            before_id: line,
            after_id: b"",
            id: Id::Keep(parsed.error_id.as_deref().unwrap_or("").to_string()),
            nonce: &nonce,
            keep_nonce: true,
            scope: sc.scope,
            session: sc.session,
            changes: &changes(&parsed),
        });
        match appended {
            Ok(a) if a.added => done.copied += 1,
            Ok(_) => done.already += 1,
            Err(e) => failure = Some(e),
        }
        true
    })?;
    Ok(match failure {
        Some(e) => Err(e),
        None => Ok(done),
    })
}
