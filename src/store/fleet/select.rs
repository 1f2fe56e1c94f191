//! Which backend a call uses, and failing safe: the domain seams ([`crate::store::breakers`],
//! [`crate::store::error_log`]) ask [`with`] to run an operation on the fleet's Redis; `None` means
//! use the local files: no Redis configured, or it could not be reached or answered an error
//! in time (then a warning on stderr and a line in `logs/triage.log` say so).
//!
//! One connection per process, made on first use. After a failure the process stays on its
//! files for [`RETRY_AFTER`] (a hook makes several calls: it pays one timeout, not one per
//! call), then tries again, so a long `triage run` goes back to Redis once it is back; every
//! new process tries afresh.

use super::{Config, Remote, RemoteError};
use crate::store::ground::Ground;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a process keeps to its files after Redis failed it.
pub const RETRY_AFTER: Duration = Duration::from_secs(2);

enum Slot {
    Untried,
    Up { id: String, remote: Box<Remote> },
    Down { id: String, until: Instant },
}

static SLOT: Mutex<Slot> = Mutex::new(Slot::Untried);

fn id_of(c: &Config) -> String {
    format!("{}|{}", c.target, c.namespace)
}

/// Whether a fleet store is asked for (whether or not it is valid or reachable: [`with`]
/// says what is wrong).
pub fn configured(g: &Ground) -> bool {
    g.fleet().is_some()
}

/// Runs `op` on the fleet's Redis: `None` when there is none, or when it failed (said with a
/// warning naming `doing`), and the caller uses the local files for this call.
pub fn with<T>(
    g: &Ground,
    doing: &str,
    op: impl FnOnce(&mut Remote) -> Result<T, RemoteError>,
) -> Option<T> {
    match attempt(g, op)? {
        Ok(v) => Some(v),
        Err(Missed::Config(e)) => {
            warn_once(g, &format!("{e}; using the local files"));
            None
        }
        Err(Missed::Remote(e)) => {
            fell_back(g, doing, &e);
            None
        }
        // Said when it failed: this process keeps to its files for a while.
        Err(Missed::Resting(_)) => None,
    }
}

/// Runs `op` on the fleet's Redis for a call that must not fall back to the files (a permit:
/// the files know nothing of the other hosts' leases): `None` when no fleet store is asked
/// for; `Some(Err(why))` when one is and it did not answer (a bad URL, unreachable, slow past
/// the timeout, an error), with nothing said: the caller refuses, naming why.
pub fn only<T>(
    g: &Ground,
    op: impl FnOnce(&mut Remote) -> Result<T, RemoteError>,
) -> Option<Result<T, String>> {
    match attempt(g, op)? {
        Ok(v) => Some(Ok(v)),
        Err(Missed::Config(e)) => Some(Err(e)),
        Err(Missed::Remote(e) | Missed::Resting(e)) => Some(Err(e.to_string())),
    }
}

/// Why a call did not reach the fleet's Redis.
enum Missed {
    /// The store's URL is not valid.
    Config(String),
    /// Unreachable, slow or answering an error.
    Remote(RemoteError),
    /// It failed this process less than [`RETRY_AFTER`] ago: not tried again yet.
    Resting(RemoteError),
}

fn attempt<T>(
    g: &Ground,
    op: impl FnOnce(&mut Remote) -> Result<T, RemoteError>,
) -> Option<Result<T, Missed>> {
    let config = match g.fleet()? {
        Ok(c) => c,
        Err(e) => return Some(Err(Missed::Config(e))),
    };
    let id = id_of(&config);
    let Ok(mut slot) = SLOT.lock() else {
        return Some(Err(Missed::Resting(RemoteError::new(
            "the connection's lock is poisoned",
        ))));
    };
    let usable = match &*slot {
        Slot::Up { id: had, .. } => *had == id,
        Slot::Down { id: had, until } => *had != id || Instant::now() >= *until,
        Slot::Untried => false,
    };
    if !usable {
        if let Slot::Down { id: had, until } = &*slot {
            if *had == id && Instant::now() < *until {
                return Some(Err(Missed::Resting(RemoteError::new(format!(
                    "redis {}: it failed a call less than {} s ago",
                    config.target,
                    RETRY_AFTER.as_secs()
                )))));
            }
        }
        match Remote::connect(&config) {
            Ok(remote) => {
                *slot = Slot::Up {
                    id: id.clone(),
                    remote: Box::new(remote),
                }
            }
            Err(e) => {
                *slot = Slot::Down {
                    id,
                    until: Instant::now() + RETRY_AFTER,
                };
                return Some(Err(Missed::Remote(e)));
            }
        }
    }
    let Slot::Up { remote, .. } = &mut *slot else {
        return Some(Err(Missed::Remote(RemoteError::new("no connection"))));
    };
    match op(remote) {
        Ok(v) => Some(Ok(v)),
        Err(e) => {
            *slot = Slot::Down {
                id,
                until: Instant::now() + RETRY_AFTER,
            };
            Some(Err(Missed::Remote(e)))
        }
    }
}

fn fell_back(g: &Ground, doing: &str, e: &RemoteError) {
    g.warn(&format!(
        "{doing}: {e}; used the local files for this call (the fleet's Redis is tried again later)"
    ));
}

fn warn_once(g: &Ground, message: &str) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        g.warn(message);
    }
}
