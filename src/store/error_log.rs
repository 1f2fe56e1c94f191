//! The error log, `logs/errors.jsonl`, with the two files that keep it cheap and lossless:
//!
//! - `logs/errors.counters.json`: the threshold counters, a cache of the log up to a length
//!   (and inode). Under the log's lock they are only ever brought up to date incrementally
//!   (a few appended lines); a full rebuild, whose cost grows with the log, is done without
//!   the lock and then caught up under it, so no writer waits on another's scan.
//! - `logs/errors.pending/`: records whose writer could not get the lock in time (a busy or
//!   stopped holder, the hook's deadline). Each is a file of its own, written without a lock,
//!   and the next writer that holds the lock appends them to the log. A busy lock never costs
//!   a record.
//!
//! Every record is cut to fit [`MAX_RECORD`] bytes (long texts end with a marker), so no hook
//! writes a line of megabytes.

mod fleet;
mod listing;
mod prune;
mod record;
mod resolve;

pub use fleet::{migrate, sync, waiting};
pub use listing::{newest, summarize, Listed};
pub use prune::prune;
pub use record::{record, Recorded};
pub use resolve::{recovered, resolve, started_at, Selection};

use crate::core::error_record::{self, Counters, ErrorRecord, LogLine, Resolution, ResolutionLine};
use crate::exit::Failure;
use crate::store::files::{self, Lock, StoreError};
use crate::store::ground::Ground;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The most bytes a record's line may have (the store's line limit, less room for the id).
pub const MAX_RECORD: usize = files::MAX_LINE - 1024;

/// At most this many bytes of the log are counted under the lock to bring the counters up to
/// date; more is a rebuild, done without the lock.
const CATCH_UP_MAX: u64 = 1 << 20;

/// At most this many spooled records are appended by one writer (the rest by the next ones),
/// so the lock is never held for work that grows.
const FOLD_MAX: usize = 64;

/// How every serialized record begins while its id is still empty.
const ID_PREFIX: &[u8] = br#"{"error_id":"""#;

/// The log under the state root `root`.
pub fn log_path(root: &Path) -> PathBuf {
    root.join("logs").join("errors.jsonl")
}

/// Whether the local log exists (a report or a listing says so when it does not).
pub fn local_exists(root: &Path) -> bool {
    files::file_len(&log_path(root)).ok().flatten().is_some()
}

/// Follows the local log from its end (`triage errors --follow` without a fleet store).
pub fn follow_local(root: &Path) -> Result<files::Follower, Failure> {
    Ok(files::Follower::at_end(&log_path(root))?)
}

fn counters_path(root: &Path) -> PathBuf {
    root.join("logs").join("errors.counters.json")
}

/// The folder of records written while the log was busy.
pub fn pending_dir(root: &Path) -> PathBuf {
    root.join("logs").join("errors.pending")
}

/// Where a record went.
#[derive(Debug)]
pub enum Written {
    /// Appended to the log; the counters include it.
    Logged(Counters),
    /// The log's lock was not obtained in time: kept in `errors.pending/` for the next writer.
    Pending,
}

/// Writes one record: its id assigned (unique under the lock), its size capped, appended to
/// the log with the counters brought up to date, or spooled when the lock is busy.
pub fn write_record(g: &Ground, root: &Path, rec: &mut ErrorRecord) -> Result<Written, Failure> {
    rec.error_id = String::new();
    let mut value = serde_json::to_value(&*rec)
        .map_err(|e| Failure::data(format!("cannot serialize the record: {e}")))?;
    if error_record::fit(&mut value, MAX_RECORD) {
        if let Ok(cut) = serde_json::from_value::<ErrorRecord>(value.clone()) {
            *rec = cut;
        }
    }
    let body = serde_json::to_vec(&value)
        .map_err(|e| Failure::data(format!("cannot serialize the record: {e}")))?;
    let rest = body
        .strip_prefix(ID_PREFIX)
        .ok_or_else(|| Failure::data("the record does not start with its error_id"))?;
    let with_id = |id: &str| {
        let mut line = Vec::with_capacity(body.len() + 40);
        line.extend_from_slice(&ID_PREFIX[..ID_PREFIX.len() - 1]);
        line.extend_from_slice(id.as_bytes());
        line.push(b'"');
        line.extend_from_slice(rest);
        line
    };
    let millis = g.now.timestamp_millis();

    // A fleet store first: the record's id is the fleet's next number. When it cannot take
    // the record, the record is written here as always, and kept for the fleet's log under
    // a nonce that makes pushing it later idempotent.
    let fleet_nonce = crate::store::fleet::select::configured(g)
        .then(|| error_record::unique_error_id(millis, random()));
    if let Some(nonce) = &fleet_nonce {
        let seq0 = error_record::error_id(millis, 0);
        let prefix = seq0.trim_end_matches('0');
        if let Some(done) = fleet::write(g, root, rest, prefix, nonce) {
            let (id, written) = done?;
            rec.error_id = id;
            return Ok(written);
        }
    }
    let keep = |id: &str| {
        if let Some(nonce) = &fleet_nonce {
            fleet::keep(g, root, nonce, &with_id(id));
        }
    };
    files::ensure_dir(&root.join("logs"))?;

    let (lock, mut counters) = match lock_with_counters(g, root)? {
        Ok(held) => held,
        Err(busy) => {
            rec.error_id = fleet_nonce
                .clone()
                .unwrap_or_else(|| error_record::unique_error_id(millis, random()));
            let path = pending_dir(root).join(format!("{}.json", files::escape_key(&rec.error_id)));
            files::spool(&path, &with_id(&rec.error_id))?;
            keep(&rec.error_id);
            g.warn(&format!(
                "{busy}; the record was kept as {} and the next writer adds it to the log",
                path.display()
            ));
            return Ok(Written::Pending);
        }
    };
    rec.error_id = match counters.seq.checked_add(1) {
        // Written here while the fleet's Redis is away: the id must never equal one the
        // fleet's sequence hands out, so it is the nonce (unique without any sequence).
        _ if fleet_nonce.is_some() => fleet_nonce.clone().unwrap_or_default(),
        Some(seq) => {
            counters.seq = seq;
            error_record::error_id(millis, seq)
        }
        // A planted or ancient counter at u64::MAX: never wrap to an id already given.
        None => error_record::unique_error_id(millis, random()),
    };
    let log = log_path(root);
    let line = with_id(&rec.error_id);
    let at = counters.log_len;
    files::append_line_locked(&log, &line)?;
    count(&mut counters, at, &line);
    save_counters(g, root, &mut counters);
    drop(lock);
    keep(&rec.error_id);
    Ok(Written::Logged(counters))
}

/// Appends resolution lines under the log's lock, keeping the counters up to date. The caller
/// scanned the log without the lock up to byte `scanned` (see [`scan`]): `catch_up` is shown
/// every line appended since, then `lines` says what to append, knowing the counters. A busy
/// lock is an error here: the caller is a person who can retry, or a success that leaves the
/// failures open for the next one.
///
/// With a fleet store (when [`scan`] read the fleet's log), the lines go to the fleet's log,
/// a closing one at most once per record whoever races ([`fleet::append_resolutions`]); when
/// it cannot take them they are written here, and kept for `store sync`.
pub fn append_resolutions(
    g: &Ground,
    root: &Path,
    scanned: Option<u64>,
    catch_up: impl FnMut(&[u8]),
    lines: impl FnOnce(&Counters) -> Result<Vec<ResolutionLine>, Failure>,
) -> Result<Vec<ResolutionLine>, Failure> {
    if scanned == Some(FLEET_SCANNED) && crate::store::fleet::select::configured(g) {
        let lines = lines(&Counters::new())?;
        let bytes = lines
            .iter()
            .map(resolution_bytes)
            .collect::<Result<Vec<_>, Failure>>()?;
        if let Some(added) = fleet::append_resolutions(g, root, &lines, &bytes) {
            return Ok(added);
        }
        return append_local(g, root, None, |_| {}, |_| Ok(lines), true);
    }
    append_local(g, root, scanned, catch_up, lines, false)
}

/// A resolution line as appended: cut to fit.
fn resolution_bytes(l: &ResolutionLine) -> Result<Vec<u8>, Failure> {
    let mut value = serde_json::to_value(l)
        .map_err(|e| Failure::data(format!("cannot serialize the resolution: {e}")))?;
    error_record::fit(&mut value, MAX_RECORD);
    serde_json::to_vec(&value)
        .map_err(|e| Failure::data(format!("cannot serialize the resolution: {e}")))
}

/// [`append_resolutions`] on the local log; `keep`: each line also waits for the fleet's log.
fn append_local(
    g: &Ground,
    root: &Path,
    scanned: Option<u64>,
    mut catch_up: impl FnMut(&[u8]),
    lines: impl FnOnce(&Counters) -> Result<Vec<ResolutionLine>, Failure>,
    keep: bool,
) -> Result<Vec<ResolutionLine>, Failure> {
    files::ensure_dir(&root.join("logs"))?;
    let (lock, mut counters) = lock_with_counters(g, root)?.map_err(Failure::from)?;
    let log = log_path(root);
    if let Some(from) = scanned {
        // A log replaced since the scan (a prune) is read whole again.
        let from = if files::file_len(&log)?.unwrap_or(0) < from {
            0
        } else {
            from
        };
        files::read_jsonl_from(&log, from, |bytes| {
            catch_up(bytes);
            true
        })?;
    }
    let lines = lines(&counters)?;
    for l in &lines {
        let bytes = resolution_bytes(l)?;
        let at = counters.log_len;
        files::append_line_locked(&log, &bytes)?;
        count(&mut counters, at, &bytes);
        counters.log_len = files::file_len(&log)?.unwrap_or(0);
        if keep {
            fleet::keep(g, root, &fleet::resolution_nonce(l, g), &bytes);
        }
    }
    if !lines.is_empty() {
        save_counters(g, root, &mut counters);
    }
    drop(lock);
    Ok(lines)
}

/// A success, and what it resolves.
#[derive(Clone, Copy, Debug, Default)]
pub struct Recovery<'a> {
    /// The workflow, else the session.
    pub scope: &'a str,
    /// The agent, or a work item's own breaker key.
    pub unit: &'a str,
    /// What succeeded: `run`, `hook PostToolUse`, …
    pub by: &'a str,
    /// Only failures recorded up to this record (and it).
    pub upto: Option<&'a str>,
    /// When the successful call started: only failures recorded by then are its to resolve.
    /// A call that was already running when another failed (a parallel sibling of the same
    /// agent) says nothing about that failure.
    pub started: Option<chrono::DateTime<chrono::Utc>>,
}

/// A success of `r.unit` in `r.scope` at the ground's time: every open failure of that unit
/// there (recorded before the successful call started) is resolved (`recovered_by_retry`,
/// automatic), one resolution line each, and so is every interrupt of it not resolved yet
/// (the resume worked).
///
/// Cheap when there is nothing to resolve: the saved counters are read without the lock, and
/// the lock is taken only when they are stale or count open failures of the unit. Under it,
/// only the log from the unit's oldest open failure on is read.
pub fn recover(g: &Ground, root: &Path, r: Recovery) -> Result<Vec<ResolutionLine>, Failure> {
    let Recovery { scope, unit, .. } = r;
    if let Some(done) = fleet::recover(g, root, &r) {
        return done;
    }
    let log = log_path(root);
    let Some(stamp) = files::stamp(&log)? else {
        return Ok(Vec::new());
    };
    // Read without the lock, a cache may be caught half-written: it then does not parse, and
    // the lock decides. Only its stamp is parsed: a unit whose name appears nowhere in it has
    // nothing open (the common case, a success with no failure before it).
    if let Ok(Some(bytes)) = files::read_optional(&counters_path(root)) {
        #[derive(serde::Deserialize)]
        struct Head {
            version: u32,
            log_len: u64,
            log_ino: u64,
        }
        let current = serde_json::from_slice::<Head>(&bytes).is_ok_and(|h| {
            h.version == error_record::COUNTERS_VERSION
                && h.log_len == stamp.len
                && h.log_ino == stamp.ino
        });
        let name = serde_json::to_vec(unit).unwrap_or_default();
        let named = memchr::memmem::find(&bytes, &name).is_some();
        if current && !named && pending(root)?.is_empty() {
            return Ok(Vec::new());
        }
    }
    let at = g.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    append_resolutions(
        g,
        root,
        None,
        |_| {},
        |c| {
            let Some(since) = c.unresolved_since(scope, unit) else {
                return Ok(Vec::new());
            };
            let mut picking = Recovering::new(&r, &at);
            files::read_jsonl_at(&log, since, |_, bytes| picking.see(bytes))?;
            Ok(picking.open)
        },
    )
}

/// The open failures (and interrupts) a success resolves, picked from the log's lines from
/// where the unit's open failures begin, in order.
pub struct Recovering<'a> {
    r: &'a Recovery<'a>,
    at: &'a str,
    past: bool,
    /// The resolution lines to append.
    pub open: Vec<ResolutionLine>,
}

impl<'a> Recovering<'a> {
    /// Nothing picked yet.
    pub fn new(r: &'a Recovery<'a>, at: &'a str) -> Recovering<'a> {
        Recovering {
            r,
            at,
            past: false,
            open: Vec::new(),
        }
    }

    /// One line of the log; false when it is not a log line.
    pub fn see(&mut self, bytes: &[u8]) -> bool {
        let Recovery {
            scope,
            unit,
            by,
            upto,
            started,
        } = *self.r;
        let Some(l) = LogLine::parse(bytes) else {
            return false;
        };
        let keys = error_record::Keys::of_line(&l, None);
        if keys.scope() != scope || l.unit() != Some(unit) {
            return true;
        }
        let interrupt = l.is_interrupt() && l.error_id.is_some() && !l.is_resolution();
        let before = match (started, l.timestamp.as_deref()) {
            (None, _) => true,
            (Some(s), Some(t)) => chrono::DateTime::parse_from_rfc3339(t)
                .is_ok_and(|t| t.with_timezone(&chrono::Utc) <= s),
            (Some(_), None) => false,
        };
        if (l.opens() || interrupt) && !self.past && before {
            self.past = upto.is_some() && l.error_id.as_deref() == upto;
            let recovered = Resolution {
                action_taken: Some("recovered_by_retry".into()),
                successful: Some(true),
                user_choice: None,
                automatic: true,
            };
            if let Some(mut line) = ResolutionLine::of(&l, self.at, recovered) {
                line.by = Some(by.to_string());
                self.open.push(line);
            }
        } else if l.is_resolution() && !l.resolution.as_ref().is_some_and(|r| r.failed()) {
            if let Some(id) = l.resolves.as_deref() {
                self.open.retain(|o| o.resolves != id);
            }
        }
        true
    }
}

/// What [`scan`] returns when it read the fleet's log: no byte of the local log.
pub const FLEET_SCANNED: u64 = u64::MAX;

/// Reads the whole log without the lock (then the spooled records), for a caller that will
/// append under it with [`append_resolutions`]; returns the byte the log was read up to, or
/// [`FLEET_SCANNED`] when it read the fleet's log (and what waits to be pushed to it).
pub fn scan(g: &Ground, root: &Path, mut visit: impl FnMut(&[u8])) -> Result<u64, Failure> {
    let mut all = |bytes: &[u8]| {
        visit(bytes);
        true
    };
    if let Some(done) = fleet::read_all(g, root, &mut all) {
        done?;
        return Ok(FLEET_SCANNED);
    }
    let (_, end) = files::read_jsonl_from(&log_path(root), 0, &mut all)?;
    for (_, bytes) in pending(root)? {
        all(bytes.strip_suffix(b"\n").unwrap_or(&bytes));
    }
    Ok(end.map_or(0, |(_, e)| e))
}

/// Brings the counters up to date with the log and saves them (after a prune replaced it),
/// so the next hook does not pay for the rebuild.
pub fn refresh_counters(g: &Ground, root: &Path) -> Result<(), Failure> {
    let (lock, mut counters) = lock_with_counters(g, root)?.map_err(Failure::from)?;
    save_counters(g, root, &mut counters);
    drop(lock);
    Ok(())
}

/// Visits every line of the log: the fleet's (and what waits to be pushed to it) with a fleet
/// store, else the local log and its spooled records; the read statistics.
pub fn read_all_in(
    g: &Ground,
    root: &Path,
    mut visit: impl FnMut(&[u8]) -> bool,
) -> Result<files::JsonlStats, Failure> {
    if let Some(done) = fleet::read_all(g, root, &mut visit) {
        return done;
    }
    read_all(root, visit)
}

/// Where a reader of the log is: a byte offset of the local log, or the fleet's last stream id.
#[derive(Clone, Debug)]
pub enum Position {
    /// The local log.
    Local,
    /// The fleet's stream, after this id (`None`: from its start).
    Fleet(Option<String>),
}

/// Visits the log newest first until `visit` says stop: the fleet's with a fleet store, else
/// the local one up to `end`. Returns where the newest line is, for a follower to go on from.
pub fn visit_rev(
    g: &Ground,
    root: &Path,
    end: Option<u64>,
    mut visit: impl FnMut(&[u8]) -> bool,
) -> Result<Position, Failure> {
    let mut seen = 0u64;
    let fleet = crate::store::fleet::select::with(g, "reading the error log", |r| {
        r.read_log_rev(|_, line| {
            seen += 1;
            visit(line)
        })
    });
    match fleet {
        Some(newest) => Ok(Position::Fleet(newest)),
        None if seen > 0 => Err(Failure::io(
            "the fleet's error log could not be read to its end",
        )),
        None => {
            files::read_jsonl_rev_to(&log_path(root), end, visit)?;
            Ok(Position::Local)
        }
    }
}

/// The fleet's lines after stream id `after` (all, when `None`), oldest first; `None` when
/// the fleet's Redis did not answer (the follower tries again). The id of the last one comes
/// back, for the next call.
pub fn fleet_after(
    g: &Ground,
    after: Option<&str>,
    mut visit: impl FnMut(&[u8]),
) -> Option<Option<String>> {
    let from = after.map_or_else(|| "-".to_string(), |id| format!("({id}"));
    let mut last = None;
    crate::store::fleet::select::with(g, "following the error log", |r| {
        r.read_log(&from, |id, line| {
            visit(line);
            last = Some(id.to_string());
            true
        })
    })?;
    Some(last)
}

/// Visits the lines at the end of the log (the fleet's with a fleet store), oldest first: as
/// many as fit in `max_bytes`, so the memory is bounded whatever the log's length.
pub fn visit_tail(
    g: &Ground,
    root: &Path,
    max_bytes: u64,
    mut visit: impl FnMut(&[u8]),
) -> Result<(), Failure> {
    if let Some(lines) = crate::store::fleet::select::with(g, "reading the error log", |r| {
        r.read_log_tail(max_bytes)
    }) {
        lines.iter().for_each(|l| visit(l));
        return Ok(());
    }
    let Some((bytes, len)) = files::read_store_tail(&log_path(root), max_bytes)? else {
        return Ok(());
    };
    let mut lines = bytes.split(|b| *b == b'\n');
    if len > max_bytes {
        lines.next(); // cut mid-line
    }
    for line in lines.filter(|l| !l.is_empty()) {
        visit(line);
    }
    Ok(())
}

/// Visits every line of the local log, then every spooled record; the log's read statistics.
pub fn read_all(
    root: &Path,
    mut visit: impl FnMut(&[u8]) -> bool,
) -> Result<files::JsonlStats, Failure> {
    let mut stats = files::read_jsonl(&log_path(root), &mut visit)?;
    for (_, bytes) in pending(root)? {
        let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        if visit(line) {
            stats.valid += 1;
        } else {
            stats.skipped += 1;
        }
    }
    Ok(stats)
}

/// The spooled records, oldest first (their names begin with their time).
fn pending(root: &Path) -> Result<Vec<(PathBuf, Vec<u8>)>, Failure> {
    let dir = pending_dir(root);
    let mut names: Vec<_> = files::list_dir(&dir)?
        .into_iter()
        .filter(|e| e.kind == files::Kind::File)
        .map(|e| e.name)
        .filter(|n| {
            let n = n.to_string_lossy();
            n.ends_with(".json") && !n.starts_with('.')
        })
        .collect();
    names.sort();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let path = dir.join(&name);
        if let Some(bytes) = files::read_optional(&path)? {
            out.push((path, bytes));
        }
    }
    Ok(out)
}

/// Takes the log's lock with counters that describe the whole log and spooled records
/// appended to it. A rebuild happens without the lock; under it only a bounded catch-up.
/// `Ok(Err(_))`: the lock was not obtained in time.
#[allow(clippy::type_complexity)]
fn lock_with_counters(
    g: &Ground,
    root: &Path,
) -> Result<Result<(Lock, Counters), StoreError>, Failure> {
    let log = log_path(root);
    let mut scanned: Option<Counters> = None;
    for round in 0..3 {
        let lock = match files::lock(&log, g.lock_wait()) {
            Ok(l) => l,
            Err(e) if e.is_lock_timeout() => return Ok(Err(e)),
            Err(e) => return Err(e.into()),
        };
        let cached = read_counters(g, root)?;
        let cached_seq = cached.as_ref().map_or(0, |c| c.seq);
        let stamp = files::stamp(&log)?.unwrap_or_default();
        // The third round, after the log was replaced twice under the scans, counts under
        // the lock: rare, and better than never writing.
        let max = if round == 2 { u64::MAX } else { CATCH_UP_MAX };
        for base in [cached, scanned.take()].into_iter().flatten() {
            if let Some(mut c) = catch_up(&log, base, stamp, max)? {
                // The spool is a courtesy to earlier writers: its trouble never stops this one.
                if let Err(f) = fold_pending(g, root, &mut c) {
                    g.warn(&format!("spooled records were not added to the log: {f}"));
                }
                return Ok(Ok((lock, c)));
            }
        }
        drop(lock);
        let mut fresh = Counters::new();
        let (_, end) = files::read_jsonl_at(&log, 0, |at, bytes| count(&mut fresh, at, bytes))?;
        let (s, end) = end.unwrap_or_default();
        fresh.log_len = end;
        fresh.log_ino = s.ino;
        // Never hand out a sequence number twice, even if the log was cut back or pruned.
        fresh.seq = fresh.seq.max(cached_seq);
        scanned = Some(fresh);
    }
    Err(Failure::io(format!(
        "{} keeps being replaced while its counters are rebuilt; try again",
        log.display()
    )))
}

fn count(c: &mut Counters, at: u64, bytes: &[u8]) -> bool {
    match LogLine::parse(bytes) {
        Some(line) => {
            c.count_line(&line, at);
            true
        }
        None => false,
    }
}

/// `base` brought up to the log's end when it describes a prefix of this very file and the
/// rest is at most `max` bytes; `None` when it needs a rebuild.
fn catch_up(
    log: &Path,
    mut base: Counters,
    stamp: files::Stamp,
    max: u64,
) -> Result<Option<Counters>, Failure> {
    let same_file = base.version == error_record::COUNTERS_VERSION
        && (stamp.len == 0 || base.log_ino == stamp.ino);
    if !same_file || base.log_len > stamp.len {
        return Ok(None);
    }
    if stamp.len == 0 {
        // An empty or missing log has nothing to count, whatever the file beside it says:
        // counters that came with the folder (a planted file from a tarball) must not start
        // a session over its threshold. Only the sequence carries over.
        let mut fresh = Counters::new();
        fresh.seq = base.seq;
        fresh.log_ino = stamp.ino;
        return Ok(Some(fresh));
    }
    if base.log_len == stamp.len {
        return Ok(Some(base));
    }
    if stamp.len - base.log_len > max {
        return Ok(None);
    }
    let (_, end) =
        files::read_jsonl_at(log, base.log_len, |at, bytes| count(&mut base, at, bytes))?;
    if let Some((s, end)) = end {
        if s.ino != stamp.ino {
            return Ok(None);
        }
        base.log_len = end;
    }
    Ok(Some(base))
}

/// Appends (at most [`FOLD_MAX`]) spooled records to the log and counts them. The caller
/// holds the log's lock.
fn fold_pending(g: &Ground, root: &Path, c: &mut Counters) -> Result<(), Failure> {
    let log = log_path(root);
    for (path, bytes) in pending(root)?.into_iter().take(FOLD_MAX) {
        let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        let valid = line.len() < files::MAX_LINE
            && serde_json::from_slice::<Value>(line).is_ok_and(|v| v.is_object());
        if !valid {
            match files::quarantine(&path, &g.stamp()) {
                Ok(q) => g.warn(&format!(
                    "a spooled record was unreadable; kept it as {}",
                    q.display()
                )),
                Err(e) => g.warn(&format!("a spooled record was unreadable: {e}")),
            }
            continue;
        }
        let at = c.log_len;
        files::append_line_locked(&log, line)?;
        c.log_len = files::file_len(&log)?.unwrap_or(0);
        count(c, at, line);
        files::remove(&path)?;
    }
    Ok(())
}

/// The counters saved beside the log, if they parse and are of this version. Something
/// planted in their place (a link, a FIFO) is moved aside: they are only a cache.
fn read_counters(g: &Ground, root: &Path) -> Result<Option<Counters>, Failure> {
    let path = counters_path(root);
    let bytes = match files::read_optional(&path) {
        Ok(b) => b,
        Err(e) if e.is_refused() || e.is_too_large() => {
            let why = e.to_string();
            let moved = files::quarantine(&path, &g.stamp()).map_err(|_| Failure::from(e))?;
            g.warn(&format!(
                "the threshold counters are unusable ({why}); moved that aside as {} and rebuilt them",
                moved.display()
            ));
            None
        }
        Err(e) => return Err(e.into()),
    };
    Ok(bytes
        .and_then(|b| serde_json::from_slice::<Counters>(&b).ok())
        .filter(|c| c.version == error_record::COUNTERS_VERSION))
}

/// Saves the counters with the log's new stamp; a failure only costs a rebuild next time.
fn save_counters(g: &Ground, root: &Path, counters: &mut Counters) {
    let written = files::stamp(&log_path(root))
        .map_err(|e| e.to_string())
        .and_then(|s| {
            let s = s.unwrap_or_default();
            counters.log_len = s.len;
            counters.log_ino = s.ino;
            let bytes = serde_json::to_vec(&counters).map_err(|e| e.to_string())?;
            files::overwrite_cache(&counters_path(root), &bytes).map_err(|e| e.to_string())
        });
    if let Err(e) = written {
        g.warn(&format!(
            "the record was written, but not the threshold counters ({e}); they will be rebuilt from the log"
        ));
    }
}

/// A random number for ids that must be unique without the lock.
fn random() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut z = nanos ^ u64::from(std::process::id()).rotate_left(40);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
