//! Locks: an exclusive `flock(2)` on a sidecar `NAME.lock` that is never renamed or removed,
//! waited for within the invocation's time.

use super::dir::Dir;
use super::names;
use super::paths::locate_for_write;
use super::{Result, StoreError};
use rustix::fs::OFlags;
use std::ffi::OsStr;
use std::fs::{File, TryLockError};
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

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

pub(super) fn lock_in(dir: &Dir, data: &OsStr, wait: Duration) -> Result<Lock> {
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
                too_large: false,
            });
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}
