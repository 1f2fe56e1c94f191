//! Where permits are kept: the one seam between the commands and the leases, whatever the
//! backend. On files, `permits/<escaped key>.json` is the key's lease table, read, changed by
//! [`crate::core::admission`] and replaced under the `flock` of its sidecar; on a fleet's
//! Redis, one script over a sorted set of leases by expiry (the server's `TIME`, never a
//! client's). A fleet's Redis that does not answer refuses the permit, naming why: the local
//! files know nothing of the other hosts' leases, so granting from them would over-grant.
//!
//! One clock for leases: on files a lease is gone only when the reader's time and the
//! machine's clock (the kernel's, not a preloaded libc's) both say it ran out, by
//! [`crate::core::admission::EXPIRY_MARGIN_MS`]; looking ([`peek`]) never writes.
//!
//! The table file sits in the state root, which is untrusted: what cannot be read as a table
//! is moved aside with a warning and the key starts with no leases, and what can is made sane
//! first (bad ids dropped, expiries clamped to one lease time), so a planted table never grants
//! more than `max` nor holds a slot longer than a lease.

use crate::core::admission::{Acquired, Judge, Lease, Millis, PermitLimits, Table};
use crate::exit::Failure;
use crate::store::files;
use crate::store::fleet::select;
use crate::store::ground::Ground;
use std::path::{Path, PathBuf};

/// What to do with a key's permits (looking is [`peek`]).
#[derive(Clone, Debug)]
pub enum Op {
    /// Take a lease `id` if one is free.
    Acquire {
        /// The new lease's id.
        id: String,
        /// Who takes it, for people.
        holder: String,
    },
    /// Extend lease `id`.
    Renew(String),
    /// Give lease `id` back.
    Release(String),
}

/// What a permit call found and did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Granted, renewed or released.
    pub done: bool,
    /// The lease's expiry, when granted or renewed.
    pub expires_ms: Option<Millis>,
    /// The time the call was judged at (the server's with a fleet).
    pub now_ms: Millis,
    /// The live leases after the call.
    pub held: u32,
    /// The live leases (on Redis the first hundred), soonest to run out first.
    pub leases: Vec<Lease>,
    /// `files` or `redis`.
    pub backend: &'static str,
    /// Why nothing could be decided: the fleet's Redis did not answer (a permit is then
    /// refused, never granted from this host's files, which know nothing of the other hosts).
    pub unavailable: Option<String>,
}

impl Outcome {
    /// When the first live lease runs out.
    pub fn next_free_ms(&self) -> Option<Millis> {
        self.leases.iter().map(|l| l.expires_ms).min()
    }
}

/// The clocks the files judge leases by: the reader's time (`TRIAGE_NOW` when it fixed the
/// time, else the machine's clock) and the machine's clock as the kernel keeps it, read
/// through the vDSO rather than libc, so a preloaded clock (libfaketime) does not move it.
pub fn judge(g: &Ground) -> Judge {
    let machine = machine_ms();
    let now = if g.fixed_now {
        g.now.timestamp_millis()
    } else {
        machine
    };
    Judge::local(now, machine)
}

/// The machine's real-time clock, in Unix milliseconds.
fn machine_ms() -> Millis {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    t.tv_sec
        .saturating_mul(1000)
        .saturating_add(t.tv_nsec / 1_000_000)
}

/// Why a permit is refused when the fleet's Redis does not answer.
fn unreachable_reason(why: &str) -> String {
    format!(
        "the fleet's Redis did not answer ({why}); no permit is granted from this host's files, which do not see the other hosts' leases (TRIAGE_STORE=file keeps one host on its files)"
    )
}

/// Applies `op` to `key`'s permits under `limits`. With a fleet store, Redis alone decides:
/// when it does not answer, the outcome is not done and says why ([`Outcome::unavailable`]).
pub fn call(g: &Ground, key: &str, limits: PermitLimits, op: &Op) -> Result<Outcome, Failure> {
    let (name, id) = match op {
        Op::Acquire { id, .. } => ("acquire", id.as_str()),
        Op::Renew(id) => ("renew", id.as_str()),
        Op::Release(id) => ("release", id.as_str()),
    };
    match select::only(g, |r| r.permit(name, key, id, limits)) {
        Some(Ok(r)) => Ok(Outcome {
            done: r.done,
            expires_ms: (r.done && r.expires_ms > 0).then_some(r.expires_ms),
            now_ms: r.now_ms,
            held: r.held,
            leases: r.leases,
            backend: "redis",
            unavailable: None,
        }),
        Some(Err(why)) => Ok(Outcome {
            done: false,
            expires_ms: None,
            now_ms: g.now.timestamp_millis(),
            held: 0,
            leases: Vec::new(),
            backend: "redis",
            unavailable: Some(unreachable_reason(&why)),
        }),
        None => on_files(g, key, limits, op),
    }
}

/// Every key that has had a permit, sorted.
pub fn keys(g: &Ground) -> Result<Vec<String>, Failure> {
    match select::only(g, |r| r.permit_keys()) {
        Some(Ok(k)) => Ok(k),
        Some(Err(why)) => Err(Failure::io(format!(
            "cannot list the permits: the fleet's Redis did not answer ({why})"
        ))),
        None => Ok(files::keys_in(&g.root.join("permits"))?),
    }
}

/// Reads `key`'s permits without changing anything (`permit status`, `report`): on a fleet's
/// Redis the status script, which only looks; on files the table as it is, made sane and
/// judged in memory, with no lock taken, nothing written, moved or deleted (a missing or
/// unusable table is no leases).
pub fn peek(g: &Ground, key: &str, limits: PermitLimits) -> Result<Outcome, Failure> {
    match select::only(g, |r| r.permit("status", key, "", limits)) {
        Some(Ok(r)) => {
            return Ok(Outcome {
                done: false,
                expires_ms: None,
                now_ms: r.now_ms,
                held: r.held,
                leases: r.leases,
                backend: "redis",
                unavailable: None,
            })
        }
        Some(Err(why)) => {
            return Err(Failure::io(format!(
                "cannot read the permits of `{key}`: the fleet's Redis did not answer ({why})"
            )))
        }
        None => {}
    }
    let j = judge(g);
    let path = path_of(&g.root.join("permits"), key);
    let mut table = match files::read_optional(&path)? {
        None => Table::new(key),
        Some(bytes) => match serde_json::from_slice::<Table>(&bytes) {
            Ok(t) if t.key == key => t,
            _ => {
                g.warn(&format!(
                    "permits `{key}`: {} is not a lease table; shown with no leases",
                    path.display()
                ));
                Table::new(key)
            }
        },
    };
    table.sane(limits, j);
    Ok(Outcome {
        done: false,
        expires_ms: None,
        now_ms: j.now,
        held: table.held(j),
        leases: table.live(j),
        backend: "files",
        unavailable: None,
    })
}

fn path_of(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{}.json", files::escape_key(key)))
}

fn on_files(g: &Ground, key: &str, limits: PermitLimits, op: &Op) -> Result<Outcome, Failure> {
    let dir = g.ensure_root()?.join("permits");
    files::ensure_dir(&dir)?;
    let path = path_of(&dir, key);
    let _lock = files::lock(&path, g.lock_wait())?;
    // Judged once the lock is held: the clock read after any wait for it.
    let j = judge(g);
    let (mut table, rebuilt) = load(g, &path, key)?;
    let before = table.clone();
    let fixed = table.sane(limits, j);
    if fixed > 0 {
        g.warn(&format!(
            "permits `{key}`: {fixed} entries of {} were not leases or ran out later than one lease time; dropped or clamped",
            path.display()
        ));
    }
    let (done, expires_ms) = match op {
        Op::Acquire { id, holder } => match table.acquire(limits, j, id, Some(holder.clone())) {
            Acquired::Granted { lease, .. } => (true, Some(lease.expires_ms)),
            Acquired::Busy { .. } => (false, None),
        },
        Op::Renew(id) => {
            let e = table.renew(limits, j, id);
            (e.is_some(), e)
        }
        Op::Release(id) => (table.release(j, id), None),
    };
    if rebuilt || table != before {
        let mut bytes = serde_json::to_vec(&table)
            .map_err(|e| Failure::data(format!("cannot serialize permits `{key}`: {e}")))?;
        bytes.push(b'\n');
        files::replace_unsynced(&path, &bytes, files::Backup::Skip)?;
    }
    Ok(Outcome {
        done,
        expires_ms,
        now_ms: j.now,
        held: table.held(j),
        leases: table.live(j),
        backend: "files",
        unavailable: None,
    })
}

/// The table in `path`: a missing file is no leases; one that cannot be read as a table of
/// this key is moved aside (never deleted) with a warning, and the key starts with none.
fn load(g: &Ground, path: &Path, key: &str) -> Result<(Table, bool), Failure> {
    let problem = match files::read_optional(path) {
        Ok(None) => return Ok((Table::new(key), false)),
        Ok(Some(bytes)) => match serde_json::from_slice::<Table>(&bytes) {
            Ok(t) if t.key == key => return Ok((t, false)),
            Ok(t) => format!("it holds key `{}`", t.key),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    };
    let moved = files::quarantine(path, &g.stamp())?;
    g.warn(&format!(
        "permits `{key}`: the lease table was unusable ({problem}); kept it as {} and started with no leases",
        moved.display()
    ));
    Ok((Table::new(key), true))
}

/// A new lease id: 16 hex digits from this process, the clock and a counter.
pub fn new_lease_id() -> String {
    use sha2::{Digest, Sha256};
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut h = Sha256::new();
    h.update(std::process::id().to_le_bytes());
    h.update(nanos.to_le_bytes());
    h.update(N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let d = h.finalize();
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Who holds a lease this process takes, for people.
pub fn holder() -> String {
    format!("pid {}", std::process::id())
}

/// Takes a lease of `key`, waiting up to `wait` for one to free (polling, each try at the
/// time it is made; a fleet's Redis that does not answer is waited for too): the last outcome
/// and, when granted, the lease's id.
pub fn acquire(
    g: &Ground,
    key: &str,
    limits: PermitLimits,
    wait: std::time::Duration,
) -> Result<(Outcome, Option<String>), Failure> {
    let id = new_lease_id();
    let op = Op::Acquire {
        id: id.clone(),
        holder: holder(),
    };
    let deadline = std::time::Instant::now() + wait;
    let mut pause = std::time::Duration::from_millis(20);
    let mut first = true;
    loop {
        let later;
        let ground = if first {
            g
        } else {
            later = g.at(g.clock());
            &later
        };
        first = false;
        let out = call(ground, key, limits, &op)?;
        if out.done {
            return Ok((out, Some(id)));
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            return Ok((out, None));
        }
        // Until the first lease runs out, but never longer than a quarter second: a release
        // frees a slot early.
        let until_free = out
            .next_free_ms()
            .map(|t| u64::try_from(t - out.now_ms).unwrap_or(0))
            .map_or(pause, std::time::Duration::from_millis);
        let nap = until_free
            .min(pause)
            .max(std::time::Duration::from_millis(1));
        std::thread::sleep(nap.min(deadline - now));
        pause = (pause * 2).min(std::time::Duration::from_millis(250));
    }
}
