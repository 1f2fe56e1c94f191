//! Where retry budgets are kept (issue 33): `budgets/<escaped key>.json` (the tokens, in
//! thousandths) read, changed and replaced under the `flock` of its sidecar, or one script on a
//! fleet's Redis; a Redis that cannot be reached is the breakers' rule (local files, a
//! warning). A stored count that is not a number is a full budget again, with a warning; one
//! above the maximum is clamped to it, so a planted file never buys more retries than a full
//! budget has.

use crate::core::admission::{budget_apply, BudgetLimits, BudgetOp};
use crate::exit::Failure;
use crate::store::files;
use crate::store::fleet::select;
use crate::store::ground::Ground;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Stored {
    key: String,
    milli: u64,
}

/// Applies `op` to `key`'s budget: the tokens (thousandths) after it, and the backend.
pub fn call(
    g: &Ground,
    key: &str,
    limits: BudgetLimits,
    op: BudgetOp,
) -> Result<(u64, &'static str), Failure> {
    if let Some(t) = select::with(g, "a retry budget", |r| r.budget(op, key, limits)) {
        return Ok((t, "redis"));
    }
    let dir = g.ensure_root()?.join("budgets");
    files::ensure_dir(&dir)?;
    let path = dir.join(format!("{}.json", files::escape_key(key)));
    let _lock = files::lock(&path, g.lock_wait())?;
    let stored = match files::read_optional(&path) {
        Ok(None) => None,
        Ok(Some(bytes)) => match serde_json::from_slice::<Stored>(&bytes) {
            Ok(s) if s.key == key => Some(s.milli),
            _ => {
                g.warn(&format!(
                    "retry budget `{key}`: {} is not a budget; starting it full",
                    path.display()
                ));
                None
            }
        },
        Err(e) => {
            g.warn(&format!("retry budget `{key}`: {e}; starting it full"));
            None
        }
    };
    let t = budget_apply(limits, stored, op);
    if op != BudgetOp::Check {
        let mut bytes = serde_json::to_vec(&Stored {
            key: key.to_string(),
            milli: t,
        })
        .map_err(|e| Failure::data(format!("cannot serialize budget `{key}`: {e}")))?;
        bytes.push(b'\n');
        files::replace_unsynced(&path, &bytes, files::Backup::Skip)?;
    }
    Ok((t, "files"))
}

/// Reads `key`'s budget without changing it (for `report`): the tokens (thousandths) and the
/// backend; on files with no lock taken and nothing written (a missing or unusable file is a
/// full budget).
pub fn peek(g: &Ground, key: &str, limits: BudgetLimits) -> Result<(u64, &'static str), Failure> {
    if let Some(t) = select::with(g, "a retry budget", |r| {
        r.budget(BudgetOp::Check, key, limits)
    }) {
        return Ok((t, "redis"));
    }
    let path = g
        .root
        .join("budgets")
        .join(format!("{}.json", files::escape_key(key)));
    let stored = match files::read_optional(&path)? {
        None => None,
        Some(bytes) => match serde_json::from_slice::<Stored>(&bytes) {
            Ok(s) if s.key == key => Some(s.milli),
            _ => {
                g.warn(&format!(
                    "retry budget `{key}`: {} is not a budget; shown full",
                    path.display()
                ));
                None
            }
        },
    };
    Ok((budget_apply(limits, stored, BudgetOp::Check), "files"))
}

/// Every key that has a budget, sorted.
pub fn keys(g: &Ground) -> Result<Vec<String>, Failure> {
    if let Some(k) = select::with(g, "listing budgets", |r| r.budget_keys()) {
        return Ok(k);
    }
    Ok(files::keys_in(&g.root.join("budgets"))?)
}
