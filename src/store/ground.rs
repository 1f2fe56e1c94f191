//! What a store call stands on ([`Ground`]): the state root, the time of the call, how long
//! its locks may still be waited for, and the program around it ([`Surroundings`]: where its
//! warnings go, which backend it uses).
//!
//! The edge builds it from the environment (`Context::ground`); the store and `exec` never
//! see the environment, the command line or the terminal. The policy is not part of it: the
//! calls that judge by the policy are handed it beside the ground.

use crate::exit::Failure;
use crate::store::{files, fleet};
use chrono::{DateTime, Utc};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The program a store call runs in, as the store needs it: the edge implements it (the
/// subcommand's name starts its messages; its policy and environment choose the backend).
/// `Sync`: the items of a phase run on threads of their own, over the same surroundings.
pub trait Surroundings: Sync {
    /// A warning that does not stop the call: on stderr, and a line in the trace.
    fn warn(&self, ground: &Ground, message: &str);

    /// One line in `<root>/logs/triage.log`; never fails the call.
    fn trace(&self, ground: &Ground, level: &str, message: &str);

    /// The fleet's Redis, when `TRIAGE_STORE` or the policy's `[store] url` names one: `None`
    /// for the local files; `Some(Err)` when its URL is not valid (the caller warns and uses
    /// the files). Asked whenever a seam chooses its backend, never before: it reads the
    /// policy, which a call that touches no shared state must not.
    fn fleet(&self) -> Option<Result<fleet::Config, String>>;

    /// Whether the decision trace is on (`-v`, `TRIAGE_LOG=debug`; see
    /// [`crate::store::trace`]). Off unless the edge says otherwise.
    fn debug(&self) -> bool {
        false
    }
}

/// The ground of one call (or, for a command that lasts, of one step of it).
pub struct Ground<'a> {
    /// The state root (not created).
    pub root: PathBuf,
    /// The project folder (`$CLAUDE_PROJECT_DIR`, else the current folder): the files an
    /// output check names are found under it.
    pub project: PathBuf,
    /// Now: `TRIAGE_NOW`, else the clock when the call (or the step) began.
    pub now: DateTime<Utc>,
    /// Whether `TRIAGE_NOW` fixed the time (a command that lasts then keeps it; it overrides
    /// every clock, the fleet's server's too).
    pub fixed_now: bool,
    /// `--strict`: what the store cannot do fails the call instead of being a warning (a
    /// breaker that cannot be read no longer lets the call through).
    pub strict: bool,
    /// How long the lock waits of one call may take in all (`TRIAGE_LOCK_TIMEOUT`).
    pub lock_timeout: Duration,
    /// When this call's lock waits must be over (shared by every lock of the call).
    pub deadline: Instant,
    /// Where warnings go and which backend is used.
    pub around: &'a dyn Surroundings,
}

impl<'a> Ground<'a> {
    /// How long a lock may still be waited for: what is left of the call's time.
    pub fn lock_wait(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// The same ground at another time, with the lock waits of a new call (`triage run`
    /// between attempts, a phase's work item).
    pub fn at(&self, now: DateTime<Utc>) -> Ground<'a> {
        Ground {
            root: self.root.clone(),
            project: self.project.clone(),
            now,
            fixed_now: self.fixed_now,
            strict: self.strict,
            lock_timeout: self.lock_timeout,
            deadline: deadline_after(self.lock_timeout),
            around: self.around,
        }
    }

    /// Now, read again for a command that lasts: `TRIAGE_NOW` when it fixed the time (it
    /// holds for the whole run), else the clock. The one place a command rereads the clock.
    pub fn clock(&self) -> DateTime<Utc> {
        if self.fixed_now {
            self.now
        } else {
            Utc::now()
        }
    }

    /// This ground at [`Ground::clock`]'s time, with the lock waits of a new call, for a
    /// command that lasts (`triage run` before and after each attempt); `None` when
    /// `TRIAGE_NOW` fixed the time, and this ground stands as it is.
    pub fn later(&self) -> Option<Ground<'a>> {
        (!self.fixed_now).then(|| self.at(self.clock()))
    }

    /// The state root, created 0700 if missing.
    pub fn ensure_root(&self) -> Result<PathBuf, Failure> {
        files::ensure_dir(&self.root)?;
        Ok(self.root.clone())
    }

    /// A timestamp for file names: `20260102T030405Z`.
    pub fn stamp(&self) -> String {
        self.now.format("%Y%m%dT%H%M%SZ").to_string()
    }

    /// A warning that does not stop the call (see [`Surroundings::warn`]).
    pub fn warn(&self, message: &str) {
        self.around.warn(self, message);
    }

    /// One line in the trace (see [`Surroundings::trace`]).
    pub fn trace(&self, level: &str, message: &str) {
        self.around.trace(self, level, message);
    }

    /// Whether the decision trace is on (see [`Surroundings::debug`]).
    pub fn debug(&self) -> bool {
        self.around.debug()
    }

    /// The fleet's Redis, if one is asked for (see [`Surroundings::fleet`]).
    pub fn fleet(&self) -> Option<Result<fleet::Config, String>> {
        self.around.fleet()
    }
}

/// `wait` from now (a year when that cannot be told).
pub fn deadline_after(wait: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(wait)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365))
}

/// A ground for the store's own tests: the local files, warnings on stderr, no trace.
#[cfg(test)]
pub mod testing {
    use super::*;

    /// Surroundings that say warnings on stderr and keep no trace.
    pub struct Quiet;

    impl Surroundings for Quiet {
        fn warn(&self, _: &Ground, message: &str) {
            say!("test: warning: {message}");
        }

        fn trace(&self, _: &Ground, _: &str, _: &str) {}

        fn fleet(&self) -> Option<Result<fleet::Config, String>> {
            None
        }
    }

    /// The ground of a call on `root` now, whose lock waits may take `lock_timeout`.
    pub fn ground(root: PathBuf, lock_timeout: Duration) -> Ground<'static> {
        Ground {
            root,
            project: PathBuf::from("."),
            now: Utc::now(),
            fixed_now: false,
            strict: false,
            lock_timeout,
            deadline: deadline_after(lock_timeout),
            around: &Quiet,
        }
    }

    #[test]
    fn a_ground_at_another_time_keeps_its_root_and_waits_anew() {
        let g = ground(PathBuf::from("/nowhere/.triage"), Duration::from_secs(60));
        let spent = Ground {
            deadline: Instant::now(),
            ..ground(g.root.clone(), g.lock_timeout)
        };
        assert_eq!(spent.lock_wait(), Duration::ZERO);
        let later = g.now + chrono::Duration::seconds(5);
        let next = spent.at(later);
        assert_eq!((next.root.as_path(), next.now), (g.root.as_path(), later));
        assert!(next.lock_wait() > Duration::from_secs(50));
        assert_eq!(next.stamp(), later.format("%Y%m%dT%H%M%SZ").to_string());
    }
}
