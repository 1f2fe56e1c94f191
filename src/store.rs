//! The only code that opens shared files: locks, atomic replacement, JSONL appends and reads,
//! and the escaping that keeps a key inside the state root (SPEC §6).
//!
//! It knows nothing of breakers or errors: only bytes, locks and paths. The recipes follow
//! `shared/reference/crash-safe-files.md`: lock a sidecar that is never renamed (locking the
//! replaced file itself loses updates), fsync before rename and the folder after, cut back a
//! failed append, and never retry a failed fsync into a false success.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod tail;
pub use tail::{read_jsonl_rev, read_jsonl_rev_to, Follower};

/// A failure of the store: what was being done, to which path, and why.
#[derive(Debug)]
pub struct StoreError {
    what: String,
    path: PathBuf,
    source: Option<io::Error>,
    lock_timeout: bool,
}

impl StoreError {
    fn io(what: &str, path: &Path, source: io::Error) -> StoreError {
        StoreError {
            what: what.into(),
            path: path.into(),
            source: Some(source),
            lock_timeout: false,
        }
    }

    /// True when a lock was not obtained in time.
    pub fn is_lock_timeout(&self) -> bool {
        self.lock_timeout
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
// Fault points, for the crash and failure tests only.

/// A test-only fault injected at a named step, from `TRIAGE_FAULT=step:action`.
///
/// `action` is `sleep` (print `READY step` on stderr and wait to be killed), `abort` (end the
/// process at once, as SIGKILL would) or `eio` (fail the step with an I/O error).
fn fault(step: &str) -> io::Result<()> {
    static SPEC: OnceLock<Option<(String, String)>> = OnceLock::new();
    let spec = SPEC.get_or_init(|| {
        let v = std::env::var("TRIAGE_FAULT").ok()?;
        let (s, a) = v.split_once(':')?;
        Some((s.to_string(), a.to_string()))
    });
    match spec {
        Some((s, action)) if s == step => match action.as_str() {
            "sleep" => {
                eprintln!("READY {step}");
                loop {
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
            "abort" => std::process::abort(),
            _ => Err(io::Error::other(format!("injected fault at {step}"))),
        },
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// Folders and paths.

/// Creates `dir` (and its parents) with mode 0700 if it does not exist.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| StoreError::io("cannot create folder", dir, e))
}

/// Escapes any text into one safe file name: no key can name a path outside its folder.
///
/// Letters, digits, `-` and `_` stay; everything else (including `.`, `/` and bytes of
/// non-ASCII text) becomes `%XX`. A very long key is cut and ends in a hash of the whole key,
/// so two keys never share a file.
pub fn escape_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        return "%".into();
    }
    if out.len() > 180 {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(key.as_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        out.truncate(140);
        // Keep a `%XX` escape whole so the name stays readable.
        while out.len() > 137 && out.as_bytes()[out.len() - 3] == b'%' {
            out.truncate(out.len() - 3);
        }
        out.push('~');
        out.push_str(&hex);
    }
    out
}

/// Undoes [`escape_key`] for keys that were not shortened.
pub fn unescape_key(name: &str) -> Option<String> {
    if name.contains('~') {
        return None;
    }
    if name == "%" {
        return Some(String::new());
    }
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = name.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `path` with `suffix` added to its file name: `state.json` + `.bak` = `state.json.bak`.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
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

/// Locks `data` by its sidecar `data.lock`, waiting at most `timeout`.
///
/// The sidecar is never renamed or deleted, so `flock(1)` in a shell script shares the lock.
pub fn lock(data: &Path, timeout: Duration) -> Result<Lock> {
    let sidecar = with_suffix(data, ".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&sidecar)
        .map_err(|e| StoreError::io("cannot open lock file", &sidecar, e))?;
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_micros(200);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Lock { _file: file }),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => {
                return Err(StoreError::io("cannot lock", &sidecar, e));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(StoreError {
                what: format!(
                    "lock not obtained within {} (TRIAGE_LOCK_TIMEOUT) on",
                    crate::duration::Dur(timeout)
                ),
                path: sidecar,
                source: None,
                lock_timeout: true,
            });
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// Reads a whole file; `Ok(None)` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("cannot read", path, e)),
    }
}

/// Reads at most the last `max` bytes of a file (for transcripts too large to read whole).
pub fn read_tail(path: &Path, max: u64) -> Result<Vec<u8>> {
    let f = File::open(path).map_err(|e| StoreError::io("cannot open", path, e))?;
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
pub fn read_jsonl(path: &Path, mut visit: impl FnMut(&[u8]) -> bool) -> Result<JsonlStats> {
    let mut stats = JsonlStats::default();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(stats),
        Err(e) => return Err(StoreError::io("cannot open", path, e)),
    };
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| StoreError::io("cannot read", path, e))?;
        if n == 0 {
            return Ok(stats);
        }
        if line.last() != Some(&b'\n') {
            stats.skipped += 1;
            return Ok(stats);
        }
        let mut body = &line[..line.len() - 1];
        if body.last() == Some(&b'\r') {
            body = &body[..body.len() - 1];
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if visit(body) {
            stats.valid += 1;
        } else {
            stats.skipped += 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Appending.

/// Appends one line to a JSONL file under its lock: built whole, written with one `write`,
/// cut back to the old length if the write fails, on a fresh line if the last one was torn.
pub fn append_line(path: &Path, line: &[u8], timeout: Duration) -> Result<()> {
    let _lock = lock(path, timeout)?;
    append_line_locked(path, line)
}

/// [`append_line`] for a caller that already holds the file's lock.
pub fn append_line_locked(path: &Path, line: &[u8]) -> Result<()> {
    let mut f = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| StoreError::io("cannot open", path, e))?;
    let len = f
        .metadata()
        .map_err(|e| StoreError::io("cannot stat", path, e))?
        .len();
    let mut buf = Vec::with_capacity(line.len() + 2);
    if len > 0 {
        let mut last = [0u8; 1];
        f.read_exact_at(&mut last, len - 1)
            .map_err(|e| StoreError::io("cannot read", path, e))?;
        if last[0] != b'\n' {
            buf.push(b'\n');
        }
    }
    buf.extend_from_slice(line);
    if buf.last() != Some(&b'\n') {
        buf.push(b'\n');
    }
    let written = fault("append").and_then(|()| f.write_all(&buf));
    if let Err(e) = written {
        // A short write followed by ENOSPC leaves a fragment: cut it off so no torn line stays.
        let _ = f.set_len(len);
        return Err(StoreError::io("cannot append to", path, e));
    }
    Ok(())
}

/// The length of a file in bytes; `Ok(None)` when it does not exist.
pub fn file_len(path: &Path) -> Result<Option<u64>> {
    match fs::metadata(path) {
        Ok(m) => Ok(Some(m.len())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("cannot stat", path, e)),
    }
}

/// Overwrites a cache file (one that can be rebuilt from other data) in place, without
/// fsync and without a rename: replace-by-rename makes ext4 flush the data first
/// (`auto_da_alloc`), which costs milliseconds on every call. Safe because the caller holds the
/// lock that guards the file, so no reader sees it half-written, and a crash mid-write leaves
/// bytes that no longer parse (a cut JSON text, or new JSON followed by the old tail), which
/// the caller detects and rebuilds from.
pub fn overwrite_cache(target: &Path, bytes: &[u8]) -> Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(target)
        .map_err(|e| StoreError::io("cannot open", target, e))?;
    f.write_all_at(bytes, 0)
        .and_then(|()| f.set_len(bytes.len() as u64))
        .map_err(|e| StoreError::io("cannot write", target, e))
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
/// a line in both files, never in neither. The caller holds `path`'s lock.
pub fn move_lines(path: &Path, to: &Path, mut take: impl FnMut(&[u8]) -> bool) -> Result<Moved> {
    let mut counts = Moved::default();
    let src = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(counts),
        Err(e) => return Err(StoreError::io("cannot open", path, e)),
    };
    let dir = parent_of(path);
    remove_stale_temps(path);
    let mut rest = tempfile::Builder::new()
        .prefix(&temp_prefix(path))
        .rand_bytes(8)
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("cannot create a temp file in", dir, e))?;
    let mode = src
        .metadata()
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o600);
    let mut dest: Option<io::BufWriter<File>> = None;
    let mut reader = BufReader::with_capacity(256 * 1024, src);
    let mut kept = io::BufWriter::with_capacity(256 * 1024, rest.as_file_mut());
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
                let f = OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o600)
                    .open(to)
                    .map_err(|e| StoreError::io("cannot open", to, e))?;
                dest = Some(io::BufWriter::with_capacity(256 * 1024, f));
            }
            if let Some(d) = dest.as_mut() {
                d.write_all(&line)
                    .map_err(|e| StoreError::io("cannot append to", to, e))?;
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
        return Ok(counts);
    };
    let dest = dest
        .into_inner()
        .map_err(|e| StoreError::io("cannot append to", to, e.into_error()))?;
    dest.sync_all()
        .map_err(|e| StoreError::io("cannot fsync", to, e))?;
    sync_dir(parent_of(to))?;
    rest.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))
        .and_then(|()| rest.as_file().sync_all())
        .map_err(|e| StoreError::io("cannot fsync", rest.path(), e))?;
    rest.persist(path)
        .map_err(|e| StoreError::io("cannot rename onto", path, e.error))?;
    sync_dir(dir)?;
    Ok(counts)
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

fn temp_prefix(target: &Path) -> String {
    format!(".{}.tmp-", file_name(target))
}

/// Removes temp files a killed writer left beside `target`. Call it under the target's lock.
pub fn remove_stale_temps(target: &Path) {
    let prefix = temp_prefix(target);
    let bak_tmp = format!("{}.bak.tmp", file_name(target));
    let Ok(entries) = fs::read_dir(parent_of(target)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) || name == bak_tmp {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Replaces `target` with `bytes` atomically. The caller holds the target's lock.
///
/// Temp file in the same folder, write, fsync, keep the old version as `.bak` (a hard link,
/// or a copy where links fail), rename over the target, fsync the folder. The target's mode
/// is kept. On any failure before the rename, the target and its `.bak` are as they were.
pub fn replace(target: &Path, bytes: &[u8], backup: Backup) -> Result<Replaced> {
    let dir = parent_of(target);
    remove_stale_temps(target);
    let old_mode = fs::metadata(target)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777);
    let mut tmp = tempfile::Builder::new()
        .prefix(&temp_prefix(target))
        .rand_bytes(8)
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("cannot create a temp file in", dir, e))?;
    let mode = old_mode.unwrap_or(0o644);
    let tmp_path = tmp.path().to_path_buf();
    let step = |what: &str, r: io::Result<()>| r.map_err(|e| StoreError::io(what, &tmp_path, e));
    step(
        "cannot set the mode of",
        tmp.as_file()
            .set_permissions(fs::Permissions::from_mode(mode)),
    )?;
    step("cannot write", tmp.as_file_mut().write_all(bytes))?;
    step("cannot write", fault("after-temp-write"))?;
    step(
        "cannot fsync",
        fault("fsync").and_then(|()| tmp.as_file().sync_all()),
    )?;

    let kept = match (backup, old_mode) {
        (Backup::Keep, Some(_)) => Some(keep_backup(target)?),
        _ => None,
    };
    fault("before-rename").map_err(|e| StoreError::io("cannot rename onto", target, e))?;
    tmp.persist(target)
        .map_err(|e| StoreError::io("cannot rename onto", target, e.error))?;
    fault("before-dir-fsync").map_err(|e| StoreError::io("cannot fsync folder", dir, e))?;
    sync_dir(dir)?;
    Ok(Replaced { backup: kept })
}

/// Makes `target.bak` the current version of `target`: a hard link (no copy; the old inode
/// becomes the backup), or a copy + fsync where links fail. Replaced by rename, so a reader
/// never sees a half-written `.bak`.
fn keep_backup(target: &Path) -> Result<PathBuf> {
    let bak = with_suffix(target, ".bak");
    let bak_tmp = with_suffix(target, ".bak.tmp");
    let _ = fs::remove_file(&bak_tmp);
    if fs::hard_link(target, &bak_tmp).is_err() {
        copy_synced(target, &bak_tmp)?;
    }
    fs::rename(&bak_tmp, &bak).map_err(|e| {
        let _ = fs::remove_file(&bak_tmp);
        StoreError::io("cannot rename backup onto", &bak, e)
    })?;
    Ok(bak)
}

fn copy_synced(from: &Path, to: &Path) -> Result<()> {
    let result = (|| {
        let mut src = File::open(from)?;
        let mut dst = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(to)?;
        io::copy(&mut src, &mut dst)?;
        dst.set_permissions(src.metadata()?.permissions())?;
        dst.sync_all()
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(to);
        StoreError::io("cannot copy a backup to", to, e)
    })
}

/// fsyncs a folder so a rename or a new file in it survives a crash.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("cannot fsync folder", dir, e))
}

/// Writes `bytes` to a new file `target` atomically, failing if it already exists.
/// Used for copies that must never overwrite an earlier one (checkpoints, partial outputs).
pub fn create_new(target: &Path, bytes: &[u8]) -> Result<()> {
    let dir = parent_of(target);
    let mut tmp = tempfile::Builder::new()
        .prefix(&temp_prefix(target))
        .rand_bytes(8)
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("cannot create a temp file in", dir, e))?;
    let mode = fs::Permissions::from_mode(0o644);
    tmp.as_file()
        .set_permissions(mode)
        .and_then(|()| tmp.as_file_mut().write_all(bytes))
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| StoreError::io("cannot write", target, e))?;
    tmp.persist_noclobber(target)
        .map_err(|e| StoreError::io("cannot create", target, e.error))?;
    sync_dir(dir)
}

/// Moves a corrupt file aside as `NAME.corrupt-<stamp>`, never deleting it.
pub fn quarantine(path: &Path, stamp: &str) -> Result<PathBuf> {
    let mut dest = with_suffix(path, &format!(".corrupt-{stamp}"));
    let mut n = 1;
    while dest.exists() {
        dest = with_suffix(path, &format!(".corrupt-{stamp}-{n}"));
        n += 1;
    }
    fs::rename(path, &dest).map_err(|e| StoreError::io("cannot move aside", path, e))?;
    sync_dir(parent_of(path))?;
    Ok(dest)
}

/// Creates a folder and its parents with the usual mode (for folders that belong to the
/// user, such as `.claude/`, rather than to the state root).
pub fn create_dirs(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| StoreError::io("cannot create folder", dir, e))
}

/// Removes a file and fsyncs its folder; a file already gone is not an error.
pub fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => sync_dir(parent_of(path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("cannot remove", path, e)),
    }
}

/// Reads bytes with a limit: at most `limit` bytes are kept, the rest is drained and counted.
/// Returns the bytes kept and the total length seen.
pub fn read_bounded(mut input: impl Read, limit: usize) -> io::Result<(Vec<u8>, u64)> {
    let mut kept = Vec::new();
    let mut total: u64 = 0;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match input.read(&mut chunk) {
            Ok(0) => return Ok((kept, total)),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        let room = limit.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..n.min(room)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_keys_stay_in_their_folder() {
        for key in [
            "../../etc/passwd",
            "/abs",
            ".",
            "..",
            "a/b",
            "Agent:researcher",
            "",
            "é",
        ] {
            let name = escape_key(key);
            assert!(
                !name.contains('/') && !name.starts_with('.'),
                "{key:?} -> {name}"
            );
            assert_eq!(unescape_key(&name).as_deref(), Some(key));
        }
        assert_eq!(
            escape_key("mcp__github__create_issue"),
            "mcp__github__create_issue"
        );
    }

    #[test]
    fn long_keys_are_shortened_without_collisions() {
        let a = "x".repeat(300);
        let b = format!("{}y", "x".repeat(299));
        assert!(escape_key(&a).len() <= 180);
        assert_ne!(escape_key(&a), escape_key(&b));
        assert_eq!(unescape_key(&escape_key(&a)), None);
    }

    #[test]
    fn jsonl_reader_skips_and_counts_torn_and_invalid_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("log.jsonl");
        fs::write(&p, b"{\"a\":1}\r\n\nnot json\n{\"a\":2}\n{\"a\":").expect("write");
        let mut seen = 0;
        let stats = read_jsonl(&p, |line| {
            seen += 1;
            serde_json::from_slice::<serde_json::Value>(line).is_ok()
        })
        .expect("read");
        assert_eq!(
            stats,
            JsonlStats {
                valid: 2,
                skipped: 2
            }
        );
        assert_eq!(seen, 3);
    }

    #[test]
    fn append_after_a_torn_line_starts_a_fresh_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("log.jsonl");
        fs::write(&p, b"{\"a\":1}\n{\"a\":").expect("write");
        append_line(&p, b"{\"a\":2}", Duration::from_secs(1)).expect("append");
        assert_eq!(
            fs::read(&p).expect("read"),
            b"{\"a\":1}\n{\"a\":\n{\"a\":2}\n"
        );
    }

    #[test]
    fn replace_keeps_mode_and_backup() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("state.json");
        fs::write(&p, b"old").expect("write");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).expect("chmod");
        let r = replace(&p, b"new", Backup::Keep).expect("replace");
        assert_eq!(r.backup, Some(with_suffix(&p, ".bak")));
        assert_eq!(fs::read(&p).expect("read"), b"new");
        assert_eq!(fs::read(with_suffix(&p, ".bak")).expect("read"), b"old");
        let mode = fs::metadata(&p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }

    #[test]
    fn stale_temps_are_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("s.json");
        let stale = dir.path().join(".s.json.tmp-abc");
        fs::write(&stale, b"torn").expect("write");
        replace(&p, b"{}", Backup::Keep).expect("replace");
        assert!(!stale.exists());
    }

    #[test]
    fn lock_times_out_while_another_holds_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("d");
        let held = lock(&p, Duration::from_secs(1)).expect("first lock");
        let err = lock(&p, Duration::from_millis(30)).expect_err("second lock");
        assert!(err.is_lock_timeout());
        drop(held);
        assert!(lock(&p, Duration::from_millis(30)).is_ok());
    }

    #[test]
    fn bounded_read_drains_everything() {
        let data = vec![7u8; 200_000];
        let (kept, total) = read_bounded(&data[..], 1000).expect("read");
        assert_eq!(kept.len(), 1000);
        assert_eq!(total, 200_000);
    }
}
