//! JSONL logs: reading them line by line (a torn last line skipped and counted), appending
//! one line under the lock (a torn tail cut off first, a failed write cut back), and moving
//! the lines a caller selects to another log without losing one.

use super::atomic::remove_temps_in;
use super::dir::{Dir, FILE_MODE};
use super::fault;
use super::locks::lock_in;
use super::open::{open_read, Stamp};
use super::paths::{locate, locate_for_write};
use super::{Result, StoreError};
use rustix::fs::OFlags;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
/// torn by a crash and is skipped and counted without being shown to `visit`, and so is a line
/// longer than [`MAX_READ_LINE`], never held in memory. Memory stays bounded whatever the
/// file's size.
pub fn read_jsonl(path: &Path, visit: impl FnMut(&[u8]) -> bool) -> Result<JsonlStats> {
    read_jsonl_from(path, 0, visit).map(|(stats, _)| stats)
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
        let (n, whole, kept) = read_line_within(&mut reader, &mut line, MAX_READ_LINE)
            .map_err(|e| StoreError::io("cannot read", path, e))?;
        if n == 0 {
            return Ok((stats, Some((stamp, end))));
        }
        if !whole {
            stats.skipped += 1;
            return Ok((stats, Some((stamp, end))));
        }
        let at = end;
        end += n as u64;
        if !kept {
            stats.skipped += 1;
            continue;
        }
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

/// The longest line a log's reader holds in memory: a longer one (no writer of triage's makes
/// one, see [`MAX_LINE`]; a planted file of gigabytes with no newline is one) is skipped
/// without being kept.
pub const MAX_READ_LINE: usize = 1 << 20;

/// Reads one line (up to and with its newline) into `line`, keeping at most `max` bytes of
/// it: the bytes consumed, whether it ended in a newline, and whether it was kept (a longer
/// line is consumed and left out, `line` empty).
fn read_line_within(
    r: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> io::Result<(usize, bool, bool)> {
    let mut total = 0;
    let mut kept = true;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((total, false, kept));
        }
        let (n, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if kept {
            if line.len() + n > max {
                kept = false;
                line.clear();
            } else {
                line.extend_from_slice(&buf[..n]);
            }
        }
        r.consume(n);
        total += n;
        if done {
            return Ok((total, true, kept));
        }
    }
}

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

/// [`append_line_locked`], then fsyncs the file's data: the line (or lines: `line` may hold
/// several, each ending in a newline) survives a crash once this returns.
pub fn append_line_synced(path: &Path, line: &[u8]) -> Result<()> {
    let (dir, name) = locate_for_write(path)?;
    append_in(&dir, &name, line, true)?;
    let f = dir
        .open(&name, OFlags::RDONLY, false)?
        .ok_or_else(|| StoreError::io("cannot open", path, io::ErrorKind::NotFound.into()))?;
    fault::at("append-fsync")
        .and_then(|()| f.sync_data())
        .map_err(|e| StoreError::io("cannot fsync", path, e))
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
