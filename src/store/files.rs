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
//!
//! By seam: `paths` (the anchors, opening folders, locating a file), `locks`, `open` (opening
//! and reading whole files, stamps), `jsonl` (reading, appending and moving lines), `atomic`
//! (replacing and writing whole files, moving aside, removing), `tail` (a log from its end,
//! and following it); below them `dir` (one opened folder), `names` (file names that fit and
//! keys escaped) and `fault` (the crash tests' fault points).

mod atomic;
mod dir;
pub mod fault;
mod jsonl;
mod locks;
mod names;
mod open;
mod paths;
mod tail;

pub use atomic::{
    create_new, overwrite_cache, quarantine, remove, replace, replace_deferred, replace_unsynced,
    spool, sync_dir, write_cache, Backup,
};
pub use dir::Kind;
pub use jsonl::{
    append_line, append_line_best_effort, append_line_locked, append_line_synced, move_lines,
    read_jsonl, read_jsonl_at, read_jsonl_from, JsonlStats, MAX_LINE,
};
pub use locks::{lock, Lock};
pub use names::{escape_key, unescape_key};
pub use open::{
    file_len, modified_ns, read_named, read_optional, read_optional_within, read_private,
    read_store_tail, read_tail, stamp, Bound, Stamp,
};
pub use paths::{
    anchor, create_dirs, ensure_dir, hold_folders, keys_in, list_dir, remove_empty_dir,
    set_private_dir, set_root, with_suffix,
};
pub use tail::{read_jsonl_rev_to, Follower};

use open::open_read;
use std::io;
use std::sync::RwLock;

/// Where the store's notices go: what it did on its own that the user should hear of (a
/// folder of theirs it repaired). The edge sets it once ([`on_notice`]); unset, they are lost.
type NoticeSink = Box<dyn Fn(&str) + Send + Sync>;
static NOTICE: RwLock<Option<NoticeSink>> = RwLock::new(None);

/// Sends the store's notices to `sink` (a warning on stderr, named for the subcommand).
pub fn on_notice(sink: impl Fn(&str) + Send + Sync + 'static) {
    if let Ok(mut n) = NOTICE.write() {
        *n = Some(Box::new(sink));
    }
}

/// Tells the user something the store did on its own (see [`on_notice`]).
fn notice(message: &str) {
    if let Ok(n) = NOTICE.read() {
        if let Some(sink) = n.as_ref() {
            sink(message);
        }
    }
}
use std::path::{Path, PathBuf};

/// A failure of the store: what was being done, to which path, and why.
#[derive(Debug)]
pub struct StoreError {
    what: String,
    path: PathBuf,
    source: Option<io::Error>,
    lock_timeout: bool,
    refused: bool,
    too_large: bool,
}

impl StoreError {
    fn io(what: &str, path: &Path, source: io::Error) -> StoreError {
        StoreError {
            what: what.into(),
            path: path.into(),
            source: None,
            lock_timeout: false,
            refused: false,
            too_large: false,
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
            too_large: false,
        }
    }

    /// A file of `len` bytes, over the `max` bytes a file of its kind (`what`) may have to be
    /// read whole: not read, and treated as a corrupt one.
    fn too_large(path: &Path, len: u64, max: u64, what: &str) -> StoreError {
        StoreError {
            what: format!(
                "{} is {len} bytes, more than the {} triage reads of {what}; it was not read",
                path.display(),
                size_words(max)
            ),
            path: PathBuf::new(),
            source: None,
            lock_timeout: false,
            refused: false,
            too_large: true,
        }
    }

    /// True when a file was not read for being over its size bound ([`Bound`]).
    pub fn is_too_large(&self) -> bool {
        self.too_large
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
        if self.too_large {
            return f.write_str(&self.what);
        }
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

/// For a caller that starts afresh from a file it cannot use (one that does not parse): a
/// file over its size bound is such a file, read as missing once `warn` is told why; any other
/// failure stays one.
pub fn unusable(e: StoreError, warn: impl FnOnce(&str)) -> Result<Option<Vec<u8>>> {
    if e.is_too_large() {
        warn(&e.to_string());
        Ok(None)
    } else {
        Err(e)
    }
}

/// A bound in bytes as a person reads it: `16 MiB`, else the bytes.
fn size_words(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

type Result<T> = std::result::Result<T, StoreError>;

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
