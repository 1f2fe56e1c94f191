//! The error log on a fleet's Redis (see [`crate::fleet::log`]): a line goes to the stream with
//! its counter changes in one script; when Redis cannot take it, the line goes to the local
//! log as it always did, and a copy waits in `logs/fleet.outbox/<nonce>.json` until `triage
//! store sync` (or the next record written while Redis answers) pushes it. The nonce makes the
//! push idempotent: a record whose first append reached Redis but whose answer was lost is
//! not added twice.
//!
//! Which counters a line changes is decided here, by the rules of [`Counters`]: the session's
//! records, and per scope (the workflow, else the session) the failing units and their phases.

use super::Written;
use crate::context::Context;
use crate::error_record::{self, Counters, LogLine};
use crate::exit::Failure;
use crate::fleet::log::{Append, Change, Hash, Id};
use crate::fleet::{select, Remote, RemoteError};
use crate::store;
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
    workflow: Option<&'a str>,
    /// The workflow, else the session, else `""`.
    scope: &'a str,
}

/// The counter changes a line makes: a record that counts adds one to its session and marks
/// its unit (and the unit in its phase) failing in its scope; other lines change nothing.
pub fn changes(line: &LogLine) -> Vec<Change> {
    if line.is_resolution() || line.error_id.is_none() || !line.counts() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(s) = line.session_id.as_deref() {
        out.push(Change {
            hash: Hash::Sessions,
            field: s.to_string(),
            delta: 1,
            since: false,
        });
    }
    if let Some(agent) = line.agent() {
        out.push(Change {
            hash: Hash::Units,
            field: agent.to_string(),
            delta: 1,
            since: true,
        });
        if let Some(p) = line.phase() {
            out.push(Change {
                hash: Hash::Units,
                field: format!("{agent}\u{1f}{}", phase_text(p)),
                delta: 1,
                since: false,
            });
        }
    }
    out
}

fn phase_text(p: &error_record::PhaseRef) -> String {
    match p {
        error_record::PhaseRef::Number(n) => n.to_string(),
        error_record::PhaseRef::Name(s) => s.to_string(),
    }
}

fn scope_of<'a>(line: &'a LogLine) -> Scope<'a> {
    let session = line.session_id.as_deref();
    let workflow = line.workflow_id.as_deref();
    Scope {
        session,
        workflow,
        scope: workflow.or(session).unwrap_or(""),
    }
}

/// The counters a threshold needs, as the append left them: the session's count, and the
/// scope's failing units (per workflow, and per phase).
fn counters_of(sc: &Scope<'_>, session_open: u64, units: &[(String, u64)]) -> Counters {
    let mut c = Counters::new();
    if let Some(s) = sc.session {
        c.sessions.insert(s.to_string(), session_open);
    }
    for (field, n) in units.iter().filter(|(_, n)| *n > 0) {
        let _ = n;
        match field.split_once('\u{1f}') {
            Some((agent, phase)) => {
                c.phases
                    .entry(format!("{}\u{1f}{phase}", sc.scope))
                    .or_default()
                    .insert(agent.to_string());
            }
            None => {
                if let Some(w) = sc.workflow {
                    c.workflows
                        .entry(w.to_string())
                        .or_default()
                        .insert(field.clone());
                }
            }
        }
    }
    c
}

/// Appends a record to the fleet's log: its id the fleet's next sequence number. `None` when
/// there is no fleet store or it failed (the caller writes locally and calls [`keep`]).
pub(super) fn write(
    cx: &Context,
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
    let done = select::with(cx, "record", |r| {
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
        push_waiting(cx, root, r, PUSH_MAX);
        Ok(a)
    })?;
    let counters = counters_of(&sc, done.session_open, &done.units);
    Some(Ok((done.error_id, Written::Logged(counters))))
}

/// Appends a line that is not a record (a resolution) to the fleet's log. `None` as [`write`].
pub(super) fn write_other(cx: &Context, root: &Path, line: &[u8], nonce: &str) -> Option<()> {
    let parsed = LogLine::parse(line);
    let (sc, ch) = match &parsed {
        Some(l) => (scope_of(l), changes(l)),
        None => (
            Scope {
                session: None,
                workflow: None,
                scope: "",
            },
            Vec::new(),
        ),
    };
    select::with(cx, "record", |r| {
        r.append(&Append {
            before_id: line,
            after_id: b"",
            id: Id::Keep(String::new()),
            nonce,
            keep_nonce: false,
            scope: sc.scope,
            session: sc.session,
            changes: &ch,
        })?;
        push_waiting(cx, root, r, PUSH_MAX);
        Ok(())
    })
}

/// Keeps a line written locally while the fleet's Redis was away, for [`sync`].
pub(super) fn keep(cx: &Context, root: &Path, nonce: &str, line: &[u8]) {
    let path = outbox_dir(root).join(format!("{}.json", store::escape_key(nonce)));
    let kept = store::ensure_dir(&outbox_dir(root)).and_then(|()| store::spool(&path, line));
    match kept {
        Ok(()) => cx.trace(
            "info",
            &format!(
                "kept {} for the fleet's log; `triage store sync` pushes it",
                path.display()
            ),
        ),
        Err(e) => cx.warn(&format!(
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
pub fn sync(cx: &Context, root: &Path, r: &mut Remote, max: usize) -> Result<Synced, RemoteError> {
    let mut done = Synced::default();
    let waiting = match waiting(root) {
        Ok(w) => w,
        Err(e) => {
            cx.warn(&format!("cannot list {}: {e}", outbox_dir(root).display()));
            return Ok(done);
        }
    };
    let total = waiting.len() as u64;
    for (path, nonce) in waiting.into_iter().take(max) {
        let bytes = match store::read_optional(&path) {
            Ok(Some(b)) => b,
            Ok(None) => continue,
            Err(e) => {
                cx.warn(&format!("cannot read {}: {e}", path.display()));
                continue;
            }
        };
        let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        let Some(parsed) = LogLine::parse(line) else {
            if let Ok(q) = store::quarantine(&path, &cx.stamp()) {
                cx.warn(&format!(
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
            keep_nonce: false,
            scope: sc.scope,
            session: sc.session,
            changes: &ch,
        })?;
        if a.added {
            done.pushed += 1;
        } else {
            done.already += 1;
        }
        if let Err(e) = store::remove(&path) {
            cx.warn(&format!(
                "pushed {}, but cannot remove it ({e}); the next sync finds it already there",
                path.display()
            ));
        }
    }
    done.waiting = total - done.pushed - done.already - done.unreadable;
    Ok(done)
}

/// The waiting files with their nonces, oldest first (a nonce starts with its time).
pub fn waiting(root: &Path) -> Result<Vec<(PathBuf, String)>, store::StoreError> {
    let dir = outbox_dir(root);
    let mut out: Vec<(PathBuf, String)> = store::list_dir(&dir)?
        .into_iter()
        .filter(|e| e.kind == store::Kind::File)
        .filter_map(|e| {
            let name = e.name.to_string_lossy().into_owned();
            let stem = name.strip_suffix(".json").filter(|s| !s.starts_with('.'))?;
            let nonce = store::unescape_key(stem)?;
            Some((dir.join(&e.name), nonce))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Pushes a few waiting lines while Redis answers; a failure here only leaves them waiting.
fn push_waiting(cx: &Context, root: &Path, r: &mut Remote, max: usize) {
    let any = store::list_dir(&outbox_dir(root)).is_ok_and(|l| !l.is_empty());
    if any {
        if let Err(e) = sync(cx, root, r, max) {
            cx.trace(
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
    cx: &Context,
    root: &Path,
    visit: &mut dyn FnMut(&[u8]) -> bool,
) -> Option<Result<store::JsonlStats, Failure>> {
    let mut stats = store::JsonlStats::default();
    let mut failed_midway = None;
    let read = select::with(cx, "reading the error log", |r| {
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
            if let Ok(Some(bytes)) = store::read_optional(&path) {
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
