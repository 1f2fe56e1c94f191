//! The few calls only Linux has, each with the portable way chosen at compile time when it is
//! missing, so the layers above never name a platform: behaviour and the durability contract
//! are the same everywhere, only the cost differs. Below every layer, like `exit`.
//!
//! - [`pidfd`]: a descriptor that becomes readable when a child exits (Linux 5.3+), so a wait
//!   needs no thread; elsewhere `None`, and the caller waits on a thread.
//! - [`memfd`]: an anonymous file in memory for a child's captured output; elsewhere (and where
//!   the kernel refuses) a temp file on disk.
//! - [`become_subreaper`]: orphans of what triage starts are reparented to triage, which can
//!   then reap them and end what its items leave behind; elsewhere a no-op (process groups are
//!   still ended; an orphan that left its group is reaped by PID 1 as usual).
//!
//! `renameat2`'s `RENAME_EXCHANGE` and `RENAME_NOREPLACE` are not here: rustix maps them to
//! `renameatx_np` on Apple's systems, and the store falls back to a plain rename or link +
//! unlink where a filesystem refuses them.

use rustix::fd::OwnedFd;
use std::fs::File;
use std::io;

/// A pidfd for `pid`, if this system has them.
pub(crate) fn pidfd(pid: rustix::process::Pid) -> Option<OwnedFd> {
    #[cfg(target_os = "linux")]
    {
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// An anonymous, close-on-exec file in memory, else a temp file.
pub(crate) fn memfd(name: &str) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    if let Ok(fd) = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC) {
        return Ok(File::from(fd));
    }
    let _ = name;
    tempfile::tempfile()
}

/// Makes this process the reaper of its descendants' orphans, where the system can.
pub(crate) fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    }
}

/// `n` bytes from the system's random source (`/dev/urandom`, on Linux and macOS alike).
pub(crate) fn random_bytes(n: usize) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}
