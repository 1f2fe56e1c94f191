//! Opening and reading whole files: the store's own (never through a link, only a regular
//! file), the ones a user or the client named (links followed, never a FIFO or a device), a
//! file's tail, its identity and length ([`Stamp`]), and a private cache file.

use super::paths::locate;
use super::{Result, StoreError};
use rustix::fs::OFlags;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Opens `path` for reading (never through a link, only a regular file); `None` if missing.
pub(super) fn open_read(path: &Path) -> Result<Option<File>> {
    Ok(open_read_sized(path)?.map(|(f, _)| f))
}

/// [`open_read`], with the file's length when it was opened.
fn open_read_sized(path: &Path) -> Result<Option<(File, u64)>> {
    match locate(path, false)? {
        Some((dir, name)) => dir.open_sized(&name, OFlags::RDONLY, false),
        None => Ok(None),
    }
}

/// How large a file read whole may be: past its bound, a file is not read at all (a planted
/// sparse file of gigabytes costs nothing) and the read fails as a corrupt file's would, with
/// an error that names the bound ([`StoreError::is_too_large`]). The one place these bounds
/// are kept; `docs/files-and-locking.md` lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// A state file (a breaker, a permit table, a budget, a session's files, the error log's
    /// counters, init's record, a file `state-write` replaces): 16 MiB.
    State,
    /// A phase's manifest, which holds its plan and an entry per item: 256 MiB.
    Manifest,
    /// A file the user names (the policy, a plan, a settings file): 16 MiB.
    Named,
    /// A compiled-policy cache in the user's cache folder: 64 MiB.
    Cache,
}

impl Bound {
    /// The bound in bytes.
    pub const fn bytes(self) -> u64 {
        match self {
            Bound::State | Bound::Named => 16 << 20,
            Bound::Manifest => 256 << 20,
            Bound::Cache => 64 << 20,
        }
    }

    /// What it bounds, for messages.
    fn what(self) -> &'static str {
        match self {
            Bound::State => "a state file",
            Bound::Manifest => "a phase manifest",
            Bound::Named => "a file you name (a policy, a plan, a settings file)",
            Bound::Cache => "a compiled-policy cache",
        }
    }
}

/// Reads a whole state file ([`Bound::State`]); `Ok(None)` when it does not exist. A link or
/// anything but a regular file is refused.
pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    read_optional_within(path, Bound::State)
}

/// [`read_optional`] for a file of another [`Bound`].
pub fn read_optional_within(path: &Path, bound: Bound) -> Result<Option<Vec<u8>>> {
    read_whole(path, open_read_sized(path)?, bound)
}

/// Reads `file` to its end, `len` (its length when opened) sizing the buffer: one byte more,
/// so a file that has not grown is read in one read and its end seen in a second, and no
/// memory is zeroed, then copied, for a file that was known to be larger. A file longer
/// than `bound` when opened is not read; one that grows past it meanwhile is read no further.
fn read_whole(path: &Path, file: Option<(File, u64)>, bound: Bound) -> Result<Option<Vec<u8>>> {
    let Some((f, len)) = file else {
        return Ok(None);
    };
    let max = bound.bytes();
    if len > max {
        return Err(StoreError::too_large(path, len, max, bound.what()));
    }
    // By hand rather than `read_to_end`, which asks the file's size twice (statx, lseek)
    // before reading: the length is known from the open.
    let size = usize::try_from(len)
        .unwrap_or(usize::MAX)
        .clamp(63, 1 << 24)
        + 1;
    let mut bytes = vec![0; size];
    let mut len = 0;
    // One byte past the bound at most: enough to see that a growing file went past it.
    let mut f = f.take(max + 1);
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
    if len as u64 > max {
        return Err(StoreError::too_large(path, len as u64, max, bound.what()));
    }
    bytes.truncate(len);
    Ok(Some(bytes))
}

/// Opens a file the user or the client named (the policy file, a transcript): links are
/// followed, since someone chose them, but only a regular file is read, never a FIFO or a
/// device that would block. `Ok(None)` when it does not exist.
fn open_named(path: &Path) -> Result<Option<File>> {
    Ok(open_named_sized(path)?.map(|(f, _)| f))
}

/// [`open_named`], with the file's length when it was opened.
fn open_named_sized(path: &Path) -> Result<Option<(File, u64)>> {
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
    Ok(Some((f, meta.len())))
}

/// The `O_*` flags std needs as raw numbers.
mod libc_flags {
    pub const NONBLOCK: i32 = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    pub const NOCTTY: i32 = rustix::fs::OFlags::NOCTTY.bits() as i32;
}

/// Reads a whole file the user named (see [`open_named`]); `Ok(None)` when it does not exist.
/// Bounded by [`Bound::Named`].
pub fn read_named(path: &Path) -> Result<Option<Vec<u8>>> {
    read_whole(path, open_named_sized(path)?, Bound::Named)
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

/// A file's identity and length, to tell an append (same file, longer) from a replacement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// The inode number.
    pub ino: u64,
    /// The length in bytes.
    pub len: u64,
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

/// Reads a private file (a cache, see [`set_private_dir`]): `Ok(None)` when it does not
/// exist. Only a regular file owned by this user and closed to group and others (0600) is
/// read; anything else is refused, since another user could have written it. Bounded by
/// [`Bound::Cache`].
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
    read_whole(path, Some((f, meta.len())), Bound::Cache)
}
