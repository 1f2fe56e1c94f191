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
    let config = match g.fleet()? {
        Ok(c) => c,
        Err(e) => {
            warn_once(g, &format!("{e}; using the local files"));
            return None;
        }
    };
    let id = id_of(&config);
    let mut slot = SLOT.lock().ok()?;
    let usable = match &*slot {
        Slot::Up { id: had, .. } => *had == id,
        Slot::Down { id: had, until } => *had != id || Instant::now() >= *until,
        Slot::Untried => false,
    };
    if !usable {
        if let Slot::Down { id: had, until } = &*slot {
            if *had == id && Instant::now() < *until {
                return None;
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
                drop(slot);
                fell_back(g, doing, &e);
                return None;
            }
        }
    }
    let Slot::Up { remote, .. } = &mut *slot else {
        return None;
    };
    match op(remote) {
        Ok(v) => Some(v),
        Err(e) => {
            *slot = Slot::Down {
                id,
                until: Instant::now() + RETRY_AFTER,
            };
            drop(slot);
            fell_back(g, doing, &e);
            None
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
