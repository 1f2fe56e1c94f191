//! Where permits are kept (issue 33): the one seam between the commands and the leases, whatever
//! the backend. On files, `permits/<escaped key>.json` is the key's lease table, read, changed
//! by [`crate::core::admission`] and replaced under the `flock` of its sidecar; on a fleet's
//! Redis, one script over a sorted set of leases by expiry (the server's `TIME`). A Redis that
//! cannot be reached is the breakers' rule: this call uses the local files, with a warning.
//!
//! The table file sits in the state root, which is untrusted: what cannot be read as a table
//! is moved aside with a warning and the key starts with no leases, and what can is made sane
//! first (bad ids dropped, expiries clamped to one lease time), so a planted table never grants
//! more than `max` nor holds a slot longer than a lease.

use crate::core::admission::{Acquired, Lease, Millis, PermitLimits, Table};
use crate::exit::Failure;
use crate::store::files;
use crate::store::fleet::select;
use crate::store::ground::Ground;
use std::path::{Path, PathBuf};

/// What to do with a key's permits.
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
    /// Only look.
    Status,
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
}

impl Outcome {
    /// When the first live lease runs out.
    pub fn next_free_ms(&self) -> Option<Millis> {
        self.leases.iter().map(|l| l.expires_ms).min()
    }
}

/// Applies `op` to `key`'s permits under `limits`.
pub fn call(g: &Ground, key: &str, limits: PermitLimits, op: &Op) -> Result<Outcome, Failure> {
    if select::configured(g) {
        let now = g.fixed_now.then(|| g.now.timestamp_millis());
        let (name, id) = match op {
            Op::Acquire { id, .. } => ("acquire", id.as_str()),
            Op::Renew(id) => ("renew", id.as_str()),
            Op::Release(id) => ("release", id.as_str()),
            Op::Status => ("status", ""),
        };
        if let Some(r) = select::with(g, "permits", |r| r.permit(name, key, id, limits, now)) {
            return Ok(Outcome {
                done: r.done,
                expires_ms: (r.done && r.expires_ms > 0).then_some(r.expires_ms),
                now_ms: r.now_ms,
                held: r.held,
                leases: r.leases,
                backend: "redis",
            });
        }
    }
    on_files(g, key, limits, op)
}

/// Every key that has had a permit, sorted.
pub fn keys(g: &Ground) -> Result<Vec<String>, Failure> {
    if let Some(k) = select::with(g, "listing permits", |r| r.permit_keys()) {
        return Ok(k);
    }
    Ok(files::keys_in(&g.root.join("permits"))?)
}

/// Reads `key`'s permits without changing them (for `report`): on a fleet's Redis the status
/// script; on files the table as it is, made sane and swept in memory, with no lock taken and
/// nothing written (a missing or unusable table is no leases).
pub fn peek(g: &Ground, key: &str, limits: PermitLimits) -> Result<Outcome, Failure> {
    if select::configured(g) {
        let now = g.fixed_now.then(|| g.now.timestamp_millis());
        if let Some(r) = select::with(g, "permits", |r| r.permit("status", key, "", limits, now)) {
            return Ok(Outcome {
                done: false,
                expires_ms: None,
                now_ms: r.now_ms,
                held: r.held,
                leases: r.leases,
                backend: "redis",
            });
        }
    }
    let now = g.now.timestamp_millis();
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
    table.sane(limits, now);
    table.sweep(now);
    let mut leases = table.leases.clone();
    leases.sort_by_key(|l| l.expires_ms);
    Ok(Outcome {
        done: false,
        expires_ms: None,
        now_ms: now,
        held: table.held(now),
        leases,
        backend: "files",
    })
}

fn path_of(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{}.json", files::escape_key(key)))
}

fn on_files(g: &Ground, key: &str, limits: PermitLimits, op: &Op) -> Result<Outcome, Failure> {
    let now = g.now.timestamp_millis();
    let dir = g.ensure_root()?.join("permits");
    files::ensure_dir(&dir)?;
    let path = path_of(&dir, key);
    let _lock = files::lock(&path, g.lock_wait())?;
    let (mut table, rebuilt) = load(g, &path, key)?;
    let before = table.clone();
    let fixed = table.sane(limits, now);
    if fixed > 0 {
        g.warn(&format!(
            "permits `{key}`: {fixed} entries of {} were not leases or ran out later than one lease time; dropped or clamped",
            path.display()
        ));
    }
    let (done, expires_ms) = match op {
        Op::Acquire { id, holder } => match table.acquire(limits, now, id, Some(holder.clone())) {
            Acquired::Granted { lease, .. } => (true, Some(lease.expires_ms)),
            Acquired::Busy { .. } => (false, None),
        },
        Op::Renew(id) => {
            let e = table.renew(limits, now, id);
            (e.is_some(), e)
        }
        Op::Release(id) => (table.release(now, id), None),
        Op::Status => {
            table.sweep(now);
            (false, None)
        }
    };
    if rebuilt || table != before {
        let mut bytes = serde_json::to_vec(&table)
            .map_err(|e| Failure::data(format!("cannot serialize permits `{key}`: {e}")))?;
        bytes.push(b'\n');
        files::replace_unsynced(&path, &bytes, files::Backup::Skip)?;
    }
    let mut leases = table.leases.clone();
    leases.sort_by_key(|l| l.expires_ms);
    Ok(Outcome {
        done,
        expires_ms,
        now_ms: now,
        held: table.held(now),
        leases,
        backend: "files",
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
/// time it is made): the last outcome and, when granted, the lease's id.
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
