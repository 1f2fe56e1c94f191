//! The only code that opens shared files: locks, atomic replacement, JSONL appends and reads,
//! and the escaping that keeps a key inside the state root (SPEC §6).
//!
//! It knows nothing of breakers or errors: only bytes, locks and paths. The recipes follow
//! `shared/reference/crash-safe-files.md`: lock a sidecar that is never renamed (locking the
//! replaced file itself loses updates), fsync before rename and the folder after, cut back a
//! failed or torn append, and never retry a failed fsync into a false success.
//!
//! The state root is hostile ground (a cloned project can ship one), so callers name files by
//! path but nothing is resolved as a string: a path under the state root (see [`set_root`]), or
//! under the user's cache folder ([`set_private_dir`]), is walked from that opened folder one
//! folder at a time, each opened without following a link and checked (owned by the user,
//! not writable by group or others); a path elsewhere is the user's own, and its folder is
//! opened as named. Then every file is reached relative to its opened folder ([`dir::Dir`]):
//! never through a link, never a FIFO or a device, created 0600 and folders 0700 whatever the
//! umask. Whatever is refused is an error that names the path and the reason, so a hook fails
//! open with a warning and writes nothing.

mod dir;
mod fault;
mod names;
mod tail;

pub use dir::{Kind, FILE_MODE};
pub use names::{escape_key, unescape_key};
pub use tail::{read_jsonl_rev_to, Follower};

use dir::Dir;
use rustix::fs::OFlags;
use std::ffi::{OsStr, OsString};
use std::fs::{File, TryLockError};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

/// A failure of the store: what was being done, to which path, and why.
#[derive(Debug)]
pub struct StoreError {
    what: String,
    path: PathBuf,
    source: Option<io::Error>,
    lock_timeout: bool,
    refused: bool,
}

impl StoreError {
    fn io(what: &str, path: &Path, source: io::Error) -> StoreError {
        StoreError {
            what: what.into(),
            path: path.into(),
            source: None,
            lock_timeout: false,
            refused: false,
        }
        .with_source(source)
    }

    fn with_source(mut self, source: io::Error) -> StoreError {
        self.source = Some(source);
        self
    }

    /// Something at `path` that the store will not touch, and why.
    fn refused(path: &Path, why: String) -> StoreError {
        StoreError {
            what: format!("refusing {}: {why}", path.display()),
            path: PathBuf::new(),
            source: None,
            lock_timeout: false,
            refused: true,
        }
    }

    /// True when a lock was not obtained in time.
    pub fn is_lock_timeout(&self) -> bool {
        self.lock_timeout
    }

    /// True when the store refused a path: a link, a FIFO or device, a folder owned by
    /// another user or writable by others.
    pub fn is_refused(&self) -> bool {
        self.refused
    }

    /// True when the cause was a full disk (ENOSPC) or a file-size limit (EFBIG).
    pub fn is_no_space(&self) -> bool {
        matches!(
            self.source.as_ref().map(|e| e.kind()),
            Some(io::ErrorKind::StorageFull | io::ErrorKind::FileTooLarge)
        )
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.refused {
            return write!(
                f,
                "{} (triage follows no link, opens only regular files and uses only folders that are yours and not writable by others; nothing was written there)",
                self.what
            );
        }
        write!(f, "{} {}", self.what, self.path.display())?;
        if let Some(e) = &self.source {
            write!(f, ": {e}")?;
        }
        if self.is_no_space() {
            write!(f, " (free some space; nothing was changed)")?;
        }
        Ok(())
    }
}

impl std::error::Error for StoreError {}

type Result<T> = std::result::Result<T, StoreError>;

// ---------------------------------------------------------------------------------------------
// Where files are: the state root, and the user's own folders.

/// A folder paths are resolved from: below it, every folder is opened without following a
/// link and checked.
#[derive(Clone)]
struct Anchor {
    path: PathBuf,
    /// The anchor itself may be a link.
    follow: bool,
    /// The anchor itself is checked (owner, mode): the state root is; a folder the user
    /// named for a state file is theirs to choose.
    checked: bool,
}

static ANCHORS: RwLock<Vec<Anchor>> = RwLock::new(Vec::new());

fn add_anchor(anchor: Anchor) {
    if let Ok(mut list) = ANCHORS.write() {
        list.retain(|a| a.path != anchor.path);
        list.push(anchor);
    }
}

/// Declares the state root of this process. Paths under it are resolved from the opened root
/// without following links; `follow` says whether the root itself may be a link (a root the
/// user named with `--dir` may be; the default `.triage` a cloned project could ship may not).
pub fn set_root(path: &Path, follow: bool) {
    add_anchor(Anchor {
        path: normal(path),
        follow,
        checked: true,
    });
}

/// Declares a folder of the user's own outside any project (the compiled-policy cache,
/// `~/.cache/triage`): checked like the state root (yours or root's, not writable by group or
/// others) and never a link itself, though the folders above it (`$XDG_CACHE_HOME`) are the
/// user's to choose. Created 0700 when a file is written in it.
pub fn set_private_dir(path: &Path) {
    add_anchor(Anchor {
        path: normal(path),
        follow: false,
        checked: true,
    });
}

/// Declares a folder the user named (the folder of a state file, a checkpoint folder given
/// with a flag): it is opened as named, links and all, but what the store derives below it
/// (`checkpoints/<file name>/`) is walked without following links, like the state root.
pub fn anchor(dir: &Path) {
    let path = normal(dir);
    let known = ANCHORS
        .read()
        .map(|list| list.iter().any(|a| path.starts_with(&a.path)))
        .unwrap_or(false);
    if !known {
        add_anchor(Anchor {
            path,
            follow: true,
            checked: false,
        });
    }
}

/// `path` without `.` components, so `./.triage/logs` and `.triage/logs` compare equal (the
/// current folder itself is the empty path, a prefix of every relative path).
fn normal(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// A normalized path as it can be opened: the empty path is the current folder.
fn openable(path: &Path) -> &Path {
    if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    }
}

/// The folder `dir`, opened: walked from the deepest anchor above it when there is one (see
/// [`set_root`], [`anchor`]), else as named. `create` makes what is missing (0700).
/// `Ok(None)`: it does not exist.
fn open_dir(dir: &Path, create: bool) -> Result<Option<Dir>> {
    let dir = normal(dir);
    let found = ANCHORS.read().ok().and_then(|list| {
        list.iter()
            .filter_map(|a| {
                let rest = dir.strip_prefix(&a.path).ok()?;
                let parts: Option<Vec<OsString>> = rest
                    .components()
                    .map(|c| match c {
                        Component::Normal(n) => Some(n.to_os_string()),
                        _ => None,
                    })
                    .collect();
                Some((a.clone(), parts?))
            })
            .max_by_key(|(a, _)| a.path.components().count())
    });
    let Some((anchor, parts)) = found else {
        return Dir::open_named(openable(&dir), create);
    };
    let at = openable(&anchor.path);
    let opened = if anchor.checked {
        open_root_once(&anchor, at, create)?
    } else {
        Dir::open_named(at, create)?
    };
    let Some(mut d) = opened else {
        return Ok(None);
    };
    for (depth, part) in parts.into_iter().enumerate() {
        let next = if depth == 0 && anchor.checked {
            root_child(&anchor.path, &d, &part, create)?
        } else {
            d.sub(&part, create)?
        };
        match next {
            Some(next) => d = next,
            None => return Ok(None),
        }
    }
    Ok(Some(d))
}

/// A folder right below the state root (`logs`, `breakers`, `cache`, …), opened and checked
/// once per run like the root itself: a call touches the same few many times. (Deeper folders
/// are opened each time: a session's folder can be removed by another call meanwhile; these
/// never are.)
fn root_child(root: &Path, dir: &Dir, name: &OsStr, create: bool) -> Result<Option<Dir>> {
    static OPENED: Mutex<Vec<(PathBuf, OsString, Dir)>> = Mutex::new(Vec::new());
    let known = OPENED.lock().ok().and_then(|list| {
        list.iter()
            .find(|(r, n, _)| r == root && n == name)
            .map(|(_, _, d)| d.clone())
    });
    if let Some(d) = known {
        return Ok(Some(d));
    }
    let opened = dir.sub(name, create)?;
    if let (Some(d), Ok(mut list)) = (&opened, OPENED.lock()) {
        list.push((root.to_path_buf(), name.to_os_string(), d.clone()));
    }
    Ok(opened)
}

/// The state root, opened and checked once per run: every file of the run is then reached
/// from that one descriptor (and a root replaced meanwhile is never followed).
fn open_root_once(anchor: &Anchor, at: &Path, create: bool) -> Result<Option<Dir>> {
    static OPENED: Mutex<Vec<(PathBuf, Dir)>> = Mutex::new(Vec::new());
    if let Some(d) = OPENED.lock().ok().and_then(|list| {
        list.iter()
            .find(|(p, _)| *p == anchor.path)
            .map(|(_, d)| d.clone())
    }) {
        return Ok(Some(d));
    }
    let opened = Dir::open_root(at, anchor.follow, create)?;
    if let (Some(d), Ok(mut list)) = (&opened, OPENED.lock()) {
        list.push((anchor.path.clone(), d.clone()));
    }
    Ok(opened)
}

/// The folder of `path`, opened, and the file's name in it.
fn locate(path: &Path, create: bool) -> Result<Option<(Dir, OsString)>> {
    let name = match path.components().next_back() {
        Some(Component::Normal(n)) => n.to_os_string(),
        _ => {
            return Err(StoreError::refused(
                path,
                "it does not end in a file name".into(),
            ))
        }
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok(open_dir(parent, create)?.map(|d| (d, name)))
}

/// Like [`locate`], for a file that must be written: its folders are created.
fn locate_for_write(path: &Path) -> Result<(Dir, OsString)> {
    locate(path, true)?.ok_or_else(|| {
        StoreError::io(
            "cannot open the folder of",
            path,
            io::Error::from(io::ErrorKind::NotFound),
        )
    })
}

/// Creates `dir` (and the folders above it, up to the state root) with mode 0700 if missing,
/// refusing links and loose folders under the state root.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    open_dir(dir, true).map(|_| ())
}

/// Creates a folder and its parents with the usual mode (for folders that belong to the
/// user, such as `.claude/`, rather than to the state root).
pub fn create_dirs(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io("cannot create folder", dir, e))
}

/// `path` with `suffix` added to its file name, shortened with a hash when the result would
/// not fit in one file name: `state.json` + `.bak` = `state.json.bak`.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let name = path.file_name().unwrap_or(OsStr::new(""));
    path.with_file_name(names::derived(name, suffix, 0))
}

// ---------------------------------------------------------------------------------------------
// Locks.

/// An exclusive `flock(2)` on a sidecar `.lock` file, released when dropped.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

impl std::os::fd::AsFd for Lock {
    /// The locked file: `triage saga` hands it to a compensation so the lock lasts as long as
    /// the compensation does, even past the death of the triage that started it.
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self._file.as_fd()
    }
}

/// Locks `data` by its sidecar `data.lock`, waiting at most `wait` (but always trying once,
/// so a free lock is taken even when the invocation's time is up).
///
/// The sidecar is never renamed or deleted, so `flock(1)` in a shell script shares the lock.
pub fn lock(data: &Path, wait: Duration) -> Result<Lock> {
    let (dir, name) = locate_for_write(data)?;
    lock_in(&dir, &name, wait)
}

fn lock_in(dir: &Dir, data: &OsStr, wait: Duration) -> Result<Lock> {
    let sidecar = names::derived(data, ".lock", 0);
    let path = dir.child(&sidecar);
    let file = dir.open(&sidecar, OFlags::RDONLY, true)?.ok_or_else(|| {
        StoreError::io(
            "cannot open lock file",
            &path,
            io::ErrorKind::NotFound.into(),
        )
    })?;
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_micros(200);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Lock { _file: file }),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(StoreError::io("cannot lock", &path, e)),
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(StoreError {
                what: format!(
                    "lock not obtained within {} (TRIAGE_LOCK_TIMEOUT) on",
                    crate::core::duration::Dur(wait)
                ),
                path,
                source: None,
                lock_timeout: true,
                refused: false,
            });
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// Opens `path` for reading (never through a link, only a regular file); `None` if missing.
fn open_read(path: &Path) -> Result<Option<File>> {
    match locate(path, false)? {
        Some((dir, name)) => dir.open(&name, OFlags::RDONLY, false),
        None => Ok(None),
    }
}

/// Reads a whole file; `Ok(None)` when it does not exist. A link or anything but a regular
/// file is refused.
pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    read_whole(path, open_read(path)?)
}

fn read_whole(path: &Path, file: Option<File>) -> Result<Option<Vec<u8>>> {
    let Some(mut f) = file else {
        return Ok(None);
    };
    // By hand rather than `read_to_end`, which asks the file's size twice (statx, lseek)
    // before reading: the files read whole are small, two reads suffice.
    let mut bytes = vec![0; 8192];
    let mut len = 0;
    loop {
        if len == bytes.len() {
            bytes.resize(len * 2, 0);
        }
        match f.read(&mut bytes[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(StoreError::io("cannot read", path, e)),
        }
    }
    bytes.truncate(len);
    Ok(Some(bytes))
}

/// Opens a file the user or the client named (the policy file, a transcript): links are
/// followed, since someone chose them, but only a regular file is read, never a FIFO or a
/// device that would block. `Ok(None)` when it does not exist.
fn open_named(path: &Path) -> Result<Option<File>> {
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags::NONBLOCK | libc_flags::NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("cannot open", path, e)),
    };
    let meta = f
        .metadata()
        .map_err(|e| StoreError::io("cannot stat", path, e))?;
    if !meta.is_file() {
        return Err(StoreError::refused(
            path,
            "it is not a regular file (a FIFO or a device would block)".into(),
        ));
    }
    Ok(Some(f))
}

/// The `O_*` flags std needs as raw numbers.
mod libc_flags {
    pub const NONBLOCK: i32 = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    pub const NOCTTY: i32 = rustix::fs::OFlags::NOCTTY.bits() as i32;
}

/// Reads a whole file the user named (see [`open_named`]); `Ok(None)` when it does not exist.
pub fn read_named(path: &Path) -> Result<Option<Vec<u8>>> {
    read_whole(path, open_named(path)?)
}

/// Reads at most the last `max` bytes of a file the client named (a transcript, too large to
/// read whole): links followed, only a regular file.
pub fn read_tail(path: &Path, max: u64) -> Result<Vec<u8>> {
    let f = open_named(path)?
        .ok_or_else(|| StoreError::io("cannot open", path, io::ErrorKind::NotFound.into()))?;
    tail_of(&f, path, max)
}

/// Reads at most the last `max` bytes of a store file (never through a link); `None` when
/// it does not exist.
pub fn read_store_tail(path: &Path, max: u64) -> Result<Option<(Vec<u8>, u64)>> {
    let Some(f) = open_read(path)? else {
        return Ok(None);
    };
    let len = f
        .metadata()
        .map_err(|e| StoreError::io("cannot stat", path, e))?
        .len();
    Ok(Some((tail_of(&f, path, max)?, len)))
}

fn tail_of(f: &File, path: &Path, max: u64) -> Result<Vec<u8>> {
    let len = f
        .metadata()
        .map_err(|e| StoreError::io("cannot stat", path, e))?
        .len();
    let start = len.saturating_sub(max);
    let mut buf = vec![0; usize::try_from(len - start).unwrap_or(0)];
    f.read_exact_at(&mut buf, start)
        .map_err(|e| StoreError::io("cannot read", path, e))?;
    Ok(buf)
}

/// What a JSONL read saw: lines accepted and lines skipped (torn, invalid or not UTF-8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsonlStats {
    /// Lines the visitor accepted.
    pub valid: u64,
    /// Lines skipped: a torn last line, a line the visitor rejected.
    pub skipped: u64,
}

/// Streams the lines of a JSONL file to `visit`, which says whether each line was valid.
///
/// A missing file is empty. Blank lines are passed over; a last line without its newline was
/// torn by a crash and is skipped and counted without being shown to `visit`. Memory stays
/// constant whatever the file's size.
pub fn read_jsonl(path: &Path, visit: impl FnMut(&[u8]) -> bool) -> Result<JsonlStats> {
    read_jsonl_from(path, 0, visit).map(|(stats, _)| stats)
}

/// A file's identity and length, to tell an append (same file, longer) from a replacement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// The inode number.
    pub ino: u64,
    /// The length in bytes.
    pub len: u64,
}

/// [`read_jsonl`] from byte `from` (the start of a line) to the end; also returns the stamp
/// of the file and the offset just after the last whole line read.
pub fn read_jsonl_from(
    path: &Path,
    from: u64,
    mut visit: impl FnMut(&[u8]) -> bool,
) -> Result<(JsonlStats, Option<(Stamp, u64)>)> {
    read_jsonl_at(path, from, |_, line| visit(line))
}

/// [`read_jsonl_from`], telling `visit` the offset at which each line starts, so a caller can
/// come back to it later (the error log's counters keep where a unit's open failures begin).
pub fn read_jsonl_at(
    path: &Path,
    from: u64,
    mut visit: impl FnMut(u64, &[u8]) -> bool,
) -> Result<(JsonlStats, Option<(Stamp, u64)>)> {
    let mut stats = JsonlStats::default();
    let Some(file) = open_read(path)? else {
        return Ok((stats, None));
    };
    let meta = file
        .metadata()
        .map_err(|e| StoreError::io("cannot stat", path, e))?;
    let stamp = Stamp {
        ino: meta.ino(),
        len: meta.len(),
    };
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    io::Seek::seek(&mut reader, io::SeekFrom::Start(from))
        .map_err(|e| StoreError::io("cannot read", path, e))?;
    let mut end = from;
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| StoreError::io("cannot read", path, e))?;
        if n == 0 {
            return Ok((stats, Some((stamp, end))));
        }
        if line.last() != Some(&b'\n') {
            stats.skipped += 1;
            return Ok((stats, Some((stamp, end))));
        }
        let at = end;
        end += n as u64;
        let mut body = &line[..line.len() - 1];
        if body.last() == Some(&b'\r') {
            body = &body[..body.len() - 1];
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if visit(at, body) {
            stats.valid += 1;
        } else {
            stats.skipped += 1;
        }
    }
}

/// The stamp of a file (never through a link); `Ok(None)` when it does not exist.
pub fn stamp(path: &Path) -> Result<Option<Stamp>> {
    let Some(f) = open_read(path)? else {
        return Ok(None);
    };
    let m = f
        .metadata()
        .map_err(|e| StoreError::io("cannot stat", path, e))?;
    Ok(Some(Stamp {
        ino: m.ino(),
        len: m.len(),
    }))
}

/// The length of a file in bytes; `Ok(None)` when it does not exist.
pub fn file_len(path: &Path) -> Result<Option<u64>> {
    Ok(stamp(path)?.map(|s| s.len))
}

/// One entry of a folder listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The file name.
    pub name: OsString,
    /// What it is (links are not followed).
    pub kind: Kind,
}

/// The entries of a folder (a missing folder is empty). Under the state root, the folder
/// and those above it must not be links.
pub fn list_dir(dir: &Path) -> Result<Vec<Entry>> {
    let Some(d) = open_dir(dir, false)? else {
        return Ok(Vec::new());
    };
    Ok(d.entries()?
        .into_iter()
        .map(|(name, kind)| Entry { name, kind })
        .collect())
}

/// Removes an empty folder; `false` when it is not empty, missing or cannot be removed.
pub fn remove_empty_dir(dir: &Path) -> bool {
    match locate(dir, false) {
        Ok(Some((parent, name))) => parent.remove_dir(&name).is_ok(),
        _ => false,
    }
}

/// The modification time of a file (never through a link), in nanoseconds since the epoch.
pub fn modified_ns(path: &Path) -> Result<Option<i128>> {
    let Some(f) = open_read(path)? else {
        return Ok(None);
    };
    let m = f
        .metadata()
        .map_err(|e| StoreError::io("cannot stat", path, e))?;
    Ok(Some(
        i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    ))
}

// ---------------------------------------------------------------------------------------------
// Appending.

/// The longest line the store appends to a log (with its newline): a record longer than this
/// is cut by its writer, so no hook ever writes a line of megabytes.
pub const MAX_LINE: usize = 64 * 1024;

/// Appends one line to a JSONL file under its lock: built whole, written with one `write`,
/// cut back to the old length if the write fails, and a torn line a crashed writer left at
/// the end is cut off first.
pub fn append_line(path: &Path, line: &[u8], wait: Duration) -> Result<()> {
    let (dir, name) = locate_for_write(path)?;
    let _lock = lock_in(&dir, &name, wait)?;
    append_in(&dir, &name, line, true)
}

/// [`append_line`] for a caller that already holds the file's lock.
pub fn append_line_locked(path: &Path, line: &[u8]) -> Result<()> {
    let (dir, name) = locate_for_write(path)?;
    append_in(&dir, &name, line, true)
}

/// Appends a diagnostic line that must never fail its command and never wait long: under the
/// lock when it comes within `wait`, else without it (then a torn tail is not cut but
/// followed on a fresh line, since cutting is only safe for the lock's holder).
pub fn append_line_best_effort(path: &Path, line: &[u8], wait: Duration) -> Result<()> {
    let (dir, name) = locate_for_write(path)?;
    match lock_in(&dir, &name, wait) {
        Ok(_lock) => append_in(&dir, &name, line, true),
        Err(e) if e.is_lock_timeout() => append_in(&dir, &name, line, false),
        Err(e) => Err(e),
    }
}

fn append_in(dir: &Dir, name: &OsStr, line: &[u8], locked: bool) -> Result<()> {
    let path = dir.child(name);
    if line.len() >= MAX_LINE {
        return Err(StoreError::io(
            "line too long for",
            &path,
            io::Error::other(format!("{} bytes, more than {MAX_LINE}", line.len())),
        ));
    }
    let mut f = dir
        .open(name, OFlags::RDWR | OFlags::APPEND, true)?
        .ok_or_else(|| StoreError::io("cannot open", &path, io::ErrorKind::NotFound.into()))?;
    let len = f
        .metadata()
        .map_err(|e| StoreError::io("cannot stat", &path, e))?
        .len();
    let mut buf = Vec::with_capacity(line.len() + 2);
    let mut keep = len;
    if len > 0 && last_byte(&f, len).map_err(|e| StoreError::io("cannot read", &path, e))? != b'\n'
    {
        if locked {
            // A writer died mid-line: only the lock's holder may cut its fragment off, so
            // the log never keeps a garbage line in the middle.
            keep =
                end_of_last_line(&f, len).map_err(|e| StoreError::io("cannot read", &path, e))?;
            f.set_len(keep)
                .map_err(|e| StoreError::io("cannot cut the torn line of", &path, e))?;
        } else {
            buf.push(b'\n');
        }
    }
    buf.extend_from_slice(line);
    if buf.last() != Some(&b'\n') {
        buf.push(b'\n');
    }
    fault::torn_append(&mut f, &buf);
    let written = fault::at("append").and_then(|()| f.write_all(&buf));
    if let Err(e) = written {
        // A short write followed by ENOSPC leaves a fragment: cut it off so no torn line stays.
        let _ = f.set_len(keep);
        return Err(StoreError::io("cannot append to", &path, e));
    }
    Ok(())
}

fn last_byte(f: &File, len: u64) -> io::Result<u8> {
    let mut last = [0u8; 1];
    f.read_exact_at(&mut last, len - 1)?;
    Ok(last[0])
}

/// The offset just after the last newline before `len` (0 when there is none).
fn end_of_last_line(f: &File, len: u64) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..usize::try_from(end - start).unwrap_or(0)];
        f.read_exact_at(chunk, start)?;
        if let Some(i) = chunk.iter().rposition(|b| *b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// Overwrites a cache file (one that can be rebuilt from other data) in place, without
/// fsync and without a rename: replace-by-rename makes ext4 flush the data first
/// (`auto_da_alloc`), which costs milliseconds on every call. Safe because the caller holds the
/// lock that guards the file, so no reader sees it half-written, and a crash mid-write leaves
/// bytes that no longer parse (a cut JSON text, or new JSON followed by the old tail), which
/// the caller detects and rebuilds from.
pub fn overwrite_cache(target: &Path, bytes: &[u8]) -> Result<()> {
    let (dir, name) = locate_for_write(target)?;
    let f = dir
        .open(&name, OFlags::WRONLY, true)?
        .ok_or_else(|| StoreError::io("cannot open", target, io::ErrorKind::NotFound.into()))?;
    f.write_all_at(bytes, 0)
        .and_then(|()| f.set_len(bytes.len() as u64))
        .map_err(|e| StoreError::io("cannot write", target, e))
}

/// Reads a private file (a cache, see [`set_private_dir`]): `Ok(None)` when it does not
/// exist. Only a regular file owned by this user and closed to group and others (0600) is
/// read; anything else is refused, since another user could have written it.
pub fn read_private(path: &Path) -> Result<Option<Vec<u8>>> {
    let Some(f) = open_read(path)? else {
        return Ok(None);
    };
    let meta = f
        .metadata()
        .map_err(|e| StoreError::io("cannot stat", path, e))?;
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(StoreError::refused(
            path,
            "it belongs to another user".into(),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(StoreError::refused(
            path,
            format!("its mode {:o} lets others in", meta.mode() & 0o7777),
        ));
    }
    read_whole(path, Some(f))
}

/// Writes a file that can be rebuilt from other data (a cache), replacing it atomically: a
/// 0600 temp file renamed over it, so a reader sees the old bytes or the new ones. No fsync:
/// a cache lost to a power cut is rebuilt, and a reader checks what it reads anyway.
pub fn write_cache(target: &Path, bytes: &[u8]) -> Result<()> {
    let (dir, name) = locate_for_write(target)?;
    dir.expect_file(&name)?;
    let (tmp, mut f) = dir.create_temp(&name)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| fault::at("cache-before-rename"))
        .and_then(|()| dir.rename(&tmp, &name));
    if let Err(e) = written {
        let _ = dir.unlink(&tmp);
        return Err(StoreError::io("cannot write", target, e));
    }
    Ok(())
}

/// Writes `bytes` as the new file `target`, failing if it exists, without fsync (a spool
/// file: losing it to a power cut is as bad as losing the log line it stands for, no worse).
/// Written to a temp file and renamed, so a reader never sees it half-written.
pub fn spool(target: &Path, bytes: &[u8]) -> Result<()> {
    let (dir, name) = locate_for_write(target)?;
    let (tmp, mut f) = dir.create_temp(&name)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| dir.rename_new(&tmp, &name));
    if let Err(e) = written {
        let _ = dir.unlink(&tmp);
        return Err(StoreError::io("cannot write", target, e));
    }
    Ok(())
}

/// What [`move_lines`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moved {
    /// Lines appended to the destination.
    pub moved: u64,
    /// Lines (and a torn tail) left in the source.
    pub kept: u64,
}

/// Moves the lines of a JSONL file that `take` selects to the end of `to`, streaming, losing
/// nothing: the moved lines are appended to `to` and fsynced first, then `path` is replaced
/// atomically by the lines left (a torn last line stays as it was). A crash in between leaves
/// a line in both files, never in neither. `to` is created only when a line moves, and a
/// failed write to it is cut back (an archive left empty by a full disk is removed). The
/// caller holds `path`'s lock.
pub fn move_lines(path: &Path, to: &Path, mut take: impl FnMut(&[u8]) -> bool) -> Result<Moved> {
    let mut counts = Moved::default();
    let Some((dir, name)) = locate(path, false)? else {
        return Ok(counts);
    };
    let Some(src) = dir.open(&name, OFlags::RDONLY, false)? else {
        return Ok(counts);
    };
    remove_temps_in(&dir, &name);
    let mode = src
        .metadata()
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(FILE_MODE);
    let (tmp, mut rest) = dir.create_temp(&name)?;
    let result = (|| {
        let mut dest: Option<Dest> = None;
        let mut reader = BufReader::with_capacity(256 * 1024, src);
        let mut kept = io::BufWriter::with_capacity(256 * 1024, &mut rest);
        let mut line = Vec::with_capacity(4096);
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| StoreError::io("cannot read", path, e))?;
            if n == 0 {
                break;
            }
            let whole = line.last() == Some(&b'\n');
            if whole && take(&line[..line.len() - 1]) {
                if dest.is_none() {
                    dest = Some(Dest::open(to)?);
                }
                if let Some(d) = dest.as_mut() {
                    d.write(&line)?;
                }
                counts.moved += 1;
            } else {
                kept.write_all(&line)
                    .map_err(|e| StoreError::io("cannot write", path, e))?;
                counts.kept += 1;
            }
        }
        kept.flush()
            .map_err(|e| StoreError::io("cannot write", path, e))?;
        drop(kept);
        let Some(dest) = dest else {
            return Ok(false);
        };
        dest.finish()?;
        rest.set_permissions(std::fs::Permissions::from_mode(mode))
            .and_then(|()| rest.sync_all())
            .map_err(|e| StoreError::io("cannot fsync", &dir.child(&tmp), e))?;
        dir.rename(&tmp, &name)
            .map_err(|e| StoreError::io("cannot rename onto", path, e))?;
        dir.sync()?;
        Ok(true)
    })();
    match result {
        Ok(true) => Ok(counts),
        Ok(false) => {
            let _ = dir.unlink(&tmp);
            Ok(counts)
        }
        Err(e) => {
            let _ = dir.unlink(&tmp);
            Err(e)
        }
    }
}

/// The destination of [`move_lines`]: opened on the first moved line; on failure its new
/// bytes are cut back, and a file it created is removed again.
struct Dest {
    dir: Dir,
    name: OsString,
    path: PathBuf,
    out: io::BufWriter<File>,
    start: u64,
    created: bool,
}

impl Dest {
    fn open(to: &Path) -> Result<Dest> {
        let (dir, name) = locate_for_write(to)?;
        let existed = dir.expect_file(&name)?.is_some();
        let f = dir
            .open(&name, OFlags::WRONLY | OFlags::APPEND, true)?
            .ok_or_else(|| StoreError::io("cannot open", to, io::ErrorKind::NotFound.into()))?;
        let start = f
            .metadata()
            .map_err(|e| StoreError::io("cannot stat", to, e))?
            .len();
        Ok(Dest {
            dir,
            name,
            path: to.to_path_buf(),
            out: io::BufWriter::with_capacity(256 * 1024, f),
            start,
            created: !existed,
        })
    }

    fn write(&mut self, line: &[u8]) -> Result<()> {
        let r = self.out.write_all(line);
        r.map_err(|e| self.undo("cannot append to", e))
    }

    fn finish(mut self) -> Result<()> {
        let r = self
            .out
            .flush()
            .and_then(|()| self.out.get_ref().sync_all());
        if let Err(e) = r {
            return Err(self.undo("cannot append to", e));
        }
        self.dir.sync()
    }

    fn undo(&mut self, what: &str, e: io::Error) -> StoreError {
        // Whatever the buffer still holds is dropped with the cut.
        let _ = self.out.get_ref().set_len(self.start);
        if self.created {
            let _ = self.dir.unlink(&self.name);
        }
        StoreError::io(what, &self.path, e)
    }
}

// ---------------------------------------------------------------------------------------------
// Atomic replacement.

/// What [`replace`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replaced {
    /// Where the previous version was kept, if there was one.
    pub backup: Option<PathBuf>,
}

/// Whether [`replace`] keeps the previous version as `NAME.bak`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backup {
    /// Keep it.
    Keep,
    /// Do not (the previous version is corrupt and was quarantined, or is not worth keeping).
    Skip,
}

/// Removes temp files a killed writer left beside `name`. Called under the file's lock.
fn remove_temps_in(dir: &Dir, name: &OsStr) {
    use std::os::unix::ffi::OsStrExt;
    let prefix = names::temp_prefix(name);
    let bak_tmp = names::derived(name, ".bak.tmp", 0);
    let Ok(entries) = dir.entries() else {
        return;
    };
    for (entry, kind) in entries {
        if kind == Kind::Dir {
            continue;
        }
        let stale = entry.as_bytes().starts_with(prefix.as_bytes())
            && entry.len() == prefix.len() + names::TEMP_RANDOM;
        if stale || entry == bak_tmp {
            let _ = dir.unlink(&entry);
        }
    }
}

/// Replaces `target` with `bytes` atomically. The caller holds the target's lock.
///
/// Temp file in the same folder, write, fsync, keep the old version as `.bak` (a hard link,
/// or a copy where links fail), rename over the target, fsync the folder. The target's mode
/// is kept (a new file is 0600). On any failure before the rename, the target and its `.bak`
/// are as they were. A target that is a link, a folder or a FIFO is refused.
pub fn replace(target: &Path, bytes: &[u8], backup: Backup) -> Result<Replaced> {
    replace_in(target, bytes, backup, Durability::Full)
}

/// [`replace`] without the folder's fsync: the file is written and fsynced before the rename,
/// so it is never seen torn, but after a power loss the folder may still name the previous
/// version. For a caller that fsyncs the folder once for many files with [`sync_dir`] before
/// anything that names them is made durable.
pub fn replace_deferred(target: &Path, bytes: &[u8], backup: Backup) -> Result<Replaced> {
    replace_in(target, bytes, backup, Durability::DirLater)
}

/// [`replace`] with no fsync at all: as atomic as a rename is for every other process, but a
/// power loss may keep the previous version, or (on a filesystem that does not order a
/// rename after the data it names) leave the file torn. Only for a version whose loss is
/// harmless, read by a reader that rebuilds a torn file.
pub fn replace_unsynced(target: &Path, bytes: &[u8], backup: Backup) -> Result<Replaced> {
    replace_in(target, bytes, backup, Durability::None)
}

/// Fsyncs a folder: the renames [`replace_deferred`] made in it become durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    match open_dir(dir, false)? {
        Some(d) => d.sync(),
        None => Ok(()),
    }
}

/// How much of [`replace`]'s durability a write asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// The file, then the folder.
    Full,
    /// The file; the caller fsyncs the folder.
    DirLater,
    /// Neither.
    None,
}

fn replace_in(
    target: &Path,
    bytes: &[u8],
    backup: Backup,
    durability: Durability,
) -> Result<Replaced> {
    let (dir, name) = locate_for_write(target)?;
    let old_mode = dir.expect_file(&name)?;
    remove_temps_in(&dir, &name);
    let (tmp, mut file) = dir.create_temp(&name)?;
    let tmp_path = dir.child(&tmp);
    let result = (|| {
        let step =
            |what: &str, r: io::Result<()>| r.map_err(|e| StoreError::io(what, &tmp_path, e));
        step(
            "cannot set the mode of",
            file.set_permissions(std::fs::Permissions::from_mode(
                old_mode.unwrap_or(FILE_MODE),
            )),
        )?;
        step("cannot write", file.write_all(bytes))?;
        step("cannot write", fault::at("after-temp-write"))?;
        // An empty file has no data to flush: its inode is made in the same journal
        // transaction as its name, which the folder's fsync makes durable.
        if durability != Durability::None && !bytes.is_empty() {
            step(
                "cannot fsync",
                fault::at("fsync").and_then(|()| file.sync_all()),
            )?;
        }
        let kept = match (backup, old_mode) {
            (Backup::Keep, Some(_)) => {
                // A link (or FIFO, folder) planted as the backup is refused, not replaced.
                dir.expect_file(&names::derived(&name, ".bak", 0))?;
                Some(keep_backup(&dir, &name)?)
            }
            _ => None,
        };
        fault::at("before-rename").map_err(|e| StoreError::io("cannot rename onto", target, e))?;
        let rename_err = |e| StoreError::io("cannot rename onto", target, e);
        // With no fsync asked for, an existing target is swapped with the temp file rather
        // than renamed over: ext4 flushes the new file's data on a rename that replaces a
        // file (its `auto_da_alloc`), and frees the old file's blocks (a discard where the
        // file system is mounted so) at once; an exchange does neither, and the old version,
        // left under the temp name, is removed after. Readers see the old file or the new.
        if durability == Durability::None
            && old_mode.is_some()
            && dir.exchange(&tmp, &name).map_err(rename_err)?
        {
            // Killed here, the old version stays under the temp name until the next write's
            // `remove_temps_in`; the target is already the new version.
            let _ = fault::at("after-exchange");
            let _ = dir.unlink(&tmp);
        } else {
            dir.rename(&tmp, &name).map_err(rename_err)?;
        }
        Ok(kept)
    })();
    let kept = match result {
        Ok(kept) => kept,
        Err(e) => {
            let _ = dir.unlink(&tmp);
            return Err(e);
        }
    };
    if durability == Durability::Full {
        fault::at("before-dir-fsync")
            .map_err(|e| StoreError::io("cannot fsync folder", dir.path(), e))?;
        dir.sync()?;
    }
    Ok(Replaced {
        backup: kept.map(|b| dir.child(&b)),
    })
}

/// Makes `NAME.bak` the current version of `name`: a hard link (no copy; the old inode
/// becomes the backup), or a copy + fsync where links fail. Replaced by rename, so a reader
/// never sees a half-written `.bak`.
fn keep_backup(dir: &Dir, name: &OsStr) -> Result<OsString> {
    let bak = names::derived(name, ".bak", 0);
    let bak_tmp = names::derived(name, ".bak.tmp", 0);
    let _ = dir.unlink(&bak_tmp);
    if dir.hard_link(name, &bak_tmp).is_err() {
        copy_synced(dir, name, &bak_tmp)?;
    }
    dir.rename(&bak_tmp, &bak).map_err(|e| {
        let _ = dir.unlink(&bak_tmp);
        StoreError::io("cannot rename backup onto", &dir.child(&bak), e)
    })?;
    Ok(bak)
}

fn copy_synced(dir: &Dir, from: &OsStr, to: &OsStr) -> Result<()> {
    let to_path = dir.child(to);
    let result = (|| {
        let mut src = dir.open(from, OFlags::RDONLY, false)?.ok_or_else(|| {
            StoreError::io(
                "cannot open",
                &dir.child(from),
                io::ErrorKind::NotFound.into(),
            )
        })?;
        let mode = src
            .metadata()
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(FILE_MODE);
        let _ = dir.unlink(to);
        let mut dst = dir.open(to, OFlags::WRONLY, true)?.ok_or_else(|| {
            StoreError::io("cannot create", &to_path, io::ErrorKind::NotFound.into())
        })?;
        io::copy(&mut src, &mut dst)
            .and_then(|_| dst.set_permissions(std::fs::Permissions::from_mode(mode)))
            .and_then(|()| dst.sync_all())
            .map_err(|e| StoreError::io("cannot copy a backup to", &to_path, e))
    })();
    if result.is_err() {
        let _ = dir.unlink(to);
    }
    result
}

/// Writes `bytes` to a new file `target` atomically (0600), failing if it already exists.
/// Used for copies that must never overwrite an earlier one (checkpoints, partial outputs).
pub fn create_new(target: &Path, bytes: &[u8]) -> Result<()> {
    let (dir, name) = locate_for_write(target)?;
    let (tmp, mut f) = dir.create_temp(&name)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| dir.rename_new(&tmp, &name));
    if let Err(e) = written {
        let _ = dir.unlink(&tmp);
        return Err(StoreError::io("cannot create", target, e));
    }
    dir.sync()
}

/// Moves a corrupt file aside as `NAME.corrupt-<stamp>` (shortened to fit one file name),
/// never deleting it. Whatever is at the name is moved itself (a link, not what it points
/// to), and only within a folder the store has checked, never through a linked one.
pub fn quarantine(path: &Path, stamp: &str) -> Result<PathBuf> {
    let (dir, name) = locate(path, false)?
        .ok_or_else(|| StoreError::io("cannot move aside", path, io::ErrorKind::NotFound.into()))?;
    let mut n = 0u32;
    loop {
        let suffix = match n {
            0 => format!(".corrupt-{stamp}"),
            n => format!(".corrupt-{stamp}-{n}"),
        };
        let dest = names::derived(&name, &suffix, 0);
        match dir.rename_new(&name, &dest) {
            Ok(()) => {
                dir.sync()?;
                return Ok(dir.child(&dest));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 10_000 => n += 1,
            Err(e) => return Err(StoreError::io("cannot move aside", path, e)),
        }
    }
}

/// Removes a file and fsyncs its folder; a file already gone is not an error. A link is
/// removed itself (never what it points to); a folder is refused.
pub fn remove(path: &Path) -> Result<()> {
    let Some((dir, name)) = locate(path, false)? else {
        return Ok(());
    };
    if let Some((Kind::Dir, _)) = dir.kind(&name)? {
        return Err(StoreError::refused(path, "it is a folder".into()));
    }
    match dir.unlink(&name) {
        Ok(()) => dir.sync(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("cannot remove", path, e)),
    }
}

/// A store error as a command's failure: a lock not obtained in time is a lock failure (75
/// with `--strict`), anything else an I/O failure (74).
impl From<StoreError> for crate::exit::Failure {
    fn from(e: StoreError) -> crate::exit::Failure {
        use crate::exit::{Failure, FailureClass};
        let class = if e.is_lock_timeout() {
            FailureClass::Lock
        } else {
            FailureClass::Io
        };
        Failure {
            class,
            message: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests;
