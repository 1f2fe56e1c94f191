//! Where retry budgets are kept: `budgets/<escaped key>.json` (the tokens, in thousandths)
//! read, changed and replaced under the `flock` of its sidecar, or one script on a fleet's
//! Redis.
//!
//! A Redis that does not answer a check is the breakers' rule (the local files, a warning). A
//! record it does not take is applied to the local files *and* kept in
//! `logs/budget.outbox/<nonce>.json`: the next record that Redis takes pushes up to
//! [`PUSH_MAX`] of them, `triage store sync` the rest, and the nonce makes a record whose
//! first call reached Redis (its answer lost to the timeout) count once.
//!
//! The state root is untrusted. A budget never used (no file) is full; a file that cannot be
//! read as this key's budget counts as **spent**, with a warning (and is moved aside by the
//! next record, which goes on from 0), so corrupting a spent budget never refills it; a count
//! above the maximum is clamped to it, so a planted file never buys more retries than a full
//! budget has.

use crate::core::admission::{budget_apply, BudgetLimits, BudgetOp};
use crate::exit::Failure;
use crate::store::files;
use crate::store::fleet::{select, Remote, RemoteError};
use crate::store::ground::Ground;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// At most this many waiting records are pushed by a record that found Redis answering (the
/// rest by `store sync` or the next records), so no call pays for a long outage at once.
pub const PUSH_MAX: usize = 16;

#[derive(Serialize, Deserialize)]
struct Stored {
    key: String,
    milli: u64,
}

/// A record taken locally while the fleet's Redis did not answer, waiting to be pushed.
#[derive(Serialize, Deserialize)]
struct Waiting {
    key: String,
    outcome: BudgetOp,
    /// The policy's `max_tokens` × 1000 when it was recorded.
    max_milli: u64,
    /// The policy's `token_ratio` × 1000 when it was recorded.
    ratio_milli: u64,
}

/// Where records taken locally during an outage wait to be pushed.
pub fn outbox_dir(root: &Path) -> PathBuf {
    root.join("logs").join("budget.outbox")
}

/// Applies `op` to `key`'s budget: the tokens (thousandths) after it, and the backend.
pub fn call(
    g: &Ground,
    key: &str,
    limits: BudgetLimits,
    op: BudgetOp,
) -> Result<(u64, &'static str), Failure> {
    if op == BudgetOp::Check {
        // Looking takes no lock and writes nothing.
        return peek(g, key, limits);
    }
    let nonce = new_nonce(g);
    let root = g.root.clone();
    let taken = select::only(g, |r| {
        let t = r.budget(op, key, limits, Some(&nonce))?;
        push_waiting(g, &root, r);
        Ok(t)
    });
    match taken {
        Some(Ok(t)) => return Ok((t, "redis")),
        Some(Err(why)) => {
            g.warn(&format!(
                "a retry budget: {why}; used the local files for this call, and kept the record for the fleet's Redis (pushed once it answers, or by `triage store sync`)"
            ));
            keep(g, key, limits, op, &nonce);
        }
        None => {}
    }
    on_files(g, key, limits, op)
}

fn on_files(
    g: &Ground,
    key: &str,
    limits: BudgetLimits,
    op: BudgetOp,
) -> Result<(u64, &'static str), Failure> {
    let dir = g.ensure_root()?.join("budgets");
    files::ensure_dir(&dir)?;
    let path = path_of(&dir, key);
    let _lock = files::lock(&path, g.lock_wait())?;
    let (stored, unreadable) = read(g, &path, key);
    let t = budget_apply(limits, stored, op);
    if unreadable {
        if let Ok(moved) = files::quarantine(&path, &g.stamp()) {
            g.warn(&format!(
                "retry budget `{key}`: kept the unreadable budget as {}; it goes on from spent",
                moved.display()
            ));
        }
    }
    let mut bytes = serde_json::to_vec(&Stored {
        key: key.to_string(),
        milli: t,
    })
    .map_err(|e| Failure::data(format!("cannot serialize budget `{key}`: {e}")))?;
    bytes.push(b'\n');
    files::replace_unsynced(&path, &bytes, files::Backup::Skip)?;
    Ok((t, "files"))
}

fn path_of(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{}.json", files::escape_key(key)))
}

/// The stored tokens of `key` (`None`: never used, a full budget) and whether the file was
/// unreadable, which counts as spent (`Some(0)`), said with a warning.
fn read(g: &Ground, path: &Path, key: &str) -> (Option<u64>, bool) {
    let why = match files::read_optional(path) {
        Ok(None) => return (None, false),
        Ok(Some(bytes)) => match serde_json::from_slice::<Stored>(&bytes) {
            Ok(s) if s.key == key => return (Some(s.milli), false),
            Ok(s) => format!("it holds the budget of `{}`", s.key),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    };
    g.warn(&format!(
        "retry budget `{key}`: {} cannot be read as a budget ({why}); it counts as spent (retries refused) until successes refill it: a damaged budget is never taken as full",
        path.display()
    ));
    (Some(0), true)
}

/// Reads `key`'s budget without changing it (for `report`, `budget status`): the tokens
/// (thousandths) and the backend; on files with no lock taken and nothing written (a missing
/// file is a full budget, an unusable one spent).
pub fn peek(g: &Ground, key: &str, limits: BudgetLimits) -> Result<(u64, &'static str), Failure> {
    if let Some(t) = select::with(g, "a retry budget", |r| {
        r.budget(BudgetOp::Check, key, limits, None)
    }) {
        return Ok((t, "redis"));
    }
    let path = path_of(&g.root.join("budgets"), key);
    let (stored, _) = read(g, &path, key);
    Ok((budget_apply(limits, stored, BudgetOp::Check), "files"))
}

/// Every key that has a budget, sorted.
pub fn keys(g: &Ground) -> Result<Vec<String>, Failure> {
    if let Some(k) = select::with(g, "listing budgets", |r| r.budget_keys()) {
        return Ok(k);
    }
    Ok(files::keys_in(&g.root.join("budgets"))?)
}

/// A record's nonce: its time first, so waiting records sort oldest first.
fn new_nonce(g: &Ground) -> String {
    format!(
        "b{:013}-{}",
        g.now.timestamp_millis().max(0),
        crate::store::permits::new_lease_id()
    )
}

/// Keeps a record taken locally, for [`sync`].
fn keep(g: &Ground, key: &str, limits: BudgetLimits, op: BudgetOp, nonce: &str) {
    let dir = outbox_dir(&g.root);
    let path = dir.join(format!("{}.json", files::escape_key(nonce)));
    let line = serde_json::to_vec(&Waiting {
        key: key.to_string(),
        outcome: op,
        max_milli: limits.max_milli,
        ratio_milli: limits.ratio_milli,
    });
    let kept = match line {
        Ok(bytes) => files::ensure_dir(&dir)
            .and_then(|()| files::spool(&path, &bytes))
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = kept {
        g.warn(&format!(
            "retry budget `{key}`: the record was not kept for the fleet's Redis ({e}); it counts on this host only"
        ));
    }
}

/// What [`sync`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Synced {
    /// Records applied to the fleet's budgets.
    pub pushed: u64,
    /// Records it had already (their first call reached it).
    pub already: u64,
    /// Records still waiting (Redis failed during the push, or `max` was reached).
    pub waiting: u64,
    /// Unreadable files moved aside.
    pub unreadable: u64,
}

/// Pushes waiting budget records to the fleet's Redis, oldest first, at most `max`; each is
/// removed once Redis has it. An error is Redis failing midway: what was pushed stays pushed.
pub fn sync(g: &Ground, root: &Path, r: &mut Remote, max: usize) -> Result<Synced, RemoteError> {
    let mut done = Synced::default();
    let dir = outbox_dir(root);
    let mut waiting: Vec<(PathBuf, String)> = match files::list_dir(&dir) {
        Ok(l) => l
            .into_iter()
            .filter(|e| e.kind == files::Kind::File)
            .filter_map(|e| {
                let name = e.name.to_string_lossy().into_owned();
                let stem = name.strip_suffix(".json").filter(|s| !s.starts_with('.'))?;
                let nonce = files::unescape_key(stem)?;
                Some((dir.join(&e.name), nonce))
            })
            .collect(),
        Err(e) => {
            g.warn(&format!("cannot list {}: {e}", dir.display()));
            return Ok(done);
        }
    };
    waiting.sort();
    let total = waiting.len() as u64;
    for (path, nonce) in waiting.into_iter().take(max) {
        let parsed = match files::read_optional(&path) {
            Ok(Some(b)) => serde_json::from_slice::<Waiting>(&b).ok(),
            Ok(None) => {
                done.already += 1;
                continue;
            }
            Err(e) => {
                g.warn(&format!("cannot read {}: {e}", path.display()));
                continue;
            }
        };
        let Some(w) = parsed.filter(|w| {
            crate::core::admission::check_key(&w.key).is_ok() && w.outcome != BudgetOp::Check
        }) else {
            if let Ok(q) = files::quarantine(&path, &g.stamp()) {
                g.warn(&format!(
                    "a budget record kept for the fleet's Redis was unreadable; moved it aside as {}",
                    q.display()
                ));
            }
            done.unreadable += 1;
            continue;
        };
        // Within what any policy could set (a planted file buys nothing beyond it).
        let limits = BudgetLimits::new(w.max_milli as f64 / 1000.0, w.ratio_milli as f64 / 1000.0);
        let (_, applied) = r.budget_applied(w.outcome, &w.key, limits, Some(&nonce))?;
        if applied {
            done.pushed += 1;
        } else {
            done.already += 1;
        }
        if let Err(e) = files::remove(&path) {
            g.warn(&format!(
                "pushed {}, but cannot remove it ({e}); the next sync finds it already there",
                path.display()
            ));
        }
    }
    done.waiting = total.saturating_sub(done.pushed + done.already + done.unreadable);
    Ok(done)
}

/// Pushes a few waiting records while Redis answers; a failure here only leaves them waiting.
fn push_waiting(g: &Ground, root: &Path, r: &mut Remote) {
    let any = files::list_dir(&outbox_dir(root)).is_ok_and(|l| !l.is_empty());
    if any {
        if let Err(e) = sync(g, root, r, PUSH_MAX) {
            g.trace(
                "warning",
                &format!("budget records kept during an outage were not all pushed: {e}"),
            );
        }
    }
}
