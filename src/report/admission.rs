//! Permits and retry budgets as the report shows them: every key the policy names (its globs
//! aside) or the store holds, read through the store the `permit` and `budget` commands use
//! (Redis when the policy says so) without changing it. A store that cannot be read is a
//! warning and shows nothing of that kind; the rest of the report is unchanged.

use crate::core::admission::{
    retry_allowed, rfc3339, secs, shown_keys, Lease, Millis, PermitLimits,
};
use crate::core::policy::Policy;
use crate::store::ground::Ground;
use crate::store::{budget, permits};
use serde_json::{json, Value};

/// One permit key now.
#[derive(Clone, Debug)]
pub struct PermitNow {
    /// The key.
    pub key: String,
    /// `max` from the policy; `None` when the policy no longer sets it.
    pub max: Option<u32>,
    /// The live leases.
    pub held: u32,
    /// The live leases, soonest to run out first.
    pub leases: Vec<Lease>,
    /// When it was judged.
    pub now_ms: Millis,
    /// `files` or `redis`.
    pub backend: &'static str,
}

impl PermitNow {
    /// When the first live lease runs out.
    pub fn next_free_ms(&self) -> Option<Millis> {
        self.leases.iter().map(|l| l.expires_ms).min()
    }

    /// Seconds until the first live lease runs out.
    pub fn next_free_in_s(&self) -> Option<f64> {
        self.next_free_ms().map(|t| secs(t - self.now_ms))
    }

    /// Every permit held: a launch or call asking now is refused.
    pub fn busy(&self) -> bool {
        self.max.is_some_and(|m| self.held >= m)
    }
}

/// One retry budget now.
#[derive(Clone, Debug)]
pub struct BudgetNow {
    /// The key.
    pub key: String,
    /// Tokens left, in thousandths.
    pub tokens_milli: u64,
    /// A full budget, in thousandths.
    pub max_milli: u64,
    /// What a success gives back, in thousandths.
    pub ratio_milli: u64,
    /// Whether a retry may go ahead now.
    pub retry_allowed: bool,
    /// `files` or `redis`.
    pub backend: &'static str,
}

/// Permits and budgets, each sorted by key.
#[derive(Clone, Debug, Default)]
pub struct Admission {
    /// The permit keys.
    pub permits: Vec<PermitNow>,
    /// The retry budgets.
    pub budgets: Vec<BudgetNow>,
}

impl Admission {
    /// Nothing to show.
    pub fn is_empty(&self) -> bool {
        self.permits.is_empty() && self.budgets.is_empty()
    }

    /// The keys that need attention: permits all held, budgets that refuse retries.
    pub fn attention(&self) -> (Vec<&str>, Vec<&str>) {
        (
            self.permits
                .iter()
                .filter(|p| p.busy())
                .map(|p| p.key.as_str())
                .collect(),
            self.budgets
                .iter()
                .filter(|b| !b.retry_allowed)
                .map(|b| b.key.as_str())
                .collect(),
        )
    }
}

/// Keys of each kind the report reads, at most (a planted folder of files bounds no work).
pub const KEYS_SHOWN: usize = 200;

/// The first [`KEYS_SHOWN`] of `keys`; a warning names how many more were left out.
fn bounded(g: &Ground, what: &str, mut keys: Vec<String>) -> Vec<String> {
    if keys.len() > KEYS_SHOWN {
        g.warn(&format!(
            "{} {what} keys; the report shows the first {KEYS_SHOWN}",
            keys.len()
        ));
        keys.truncate(KEYS_SHOWN);
    }
    keys
}

/// Reads every permit key and budget, without changing them. A listing or a key that cannot
/// be read is a warning; that kind (or that key) is left out.
pub fn read(g: &Ground, policy: &Policy) -> Admission {
    let mut out = Admission::default();
    match permits::keys(g) {
        Ok(stored) => {
            for key in bounded(g, "permit", shown_keys(stored, policy.permits.keys())) {
                let limits = policy.permits_for(&key);
                // A key the policy no longer limits is judged as `permit status` does.
                let judge = limits.unwrap_or(PermitLimits {
                    max: 0,
                    lease_ms: 60_000,
                });
                match permits::peek(g, &key, judge) {
                    Ok(o) => out.permits.push(PermitNow {
                        key,
                        max: limits.map(|l| l.max),
                        held: o.held,
                        leases: o.leases,
                        now_ms: o.now_ms,
                        backend: o.backend,
                    }),
                    Err(f) => g.warn(&format!("the permits of `{key}` were not read: {f}")),
                }
            }
        }
        Err(f) => g.warn(&format!("the permits were not read: {f}")),
    }
    match budget::keys(g) {
        Ok(stored) => {
            for key in bounded(g, "retry budget", shown_keys(stored, policy.budget.keys())) {
                // A stored budget the policy no longer names is left out, as `budget status` does.
                let Some(limits) = policy.budget_for(&key) else {
                    continue;
                };
                match budget::peek(g, &key, limits) {
                    Ok((tokens, backend)) => out.budgets.push(BudgetNow {
                        key,
                        tokens_milli: tokens,
                        max_milli: limits.max_milli,
                        ratio_milli: limits.ratio_milli,
                        retry_allowed: retry_allowed(limits, tokens),
                        backend,
                    }),
                    Err(f) => g.warn(&format!("the retry budget `{key}` was not read: {f}")),
                }
            }
        }
        Err(f) => g.warn(&format!("the retry budgets were not read: {f}")),
    }
    out
}

/// The JSON report's `permits` member: one object per key, as `permit status` prints it, with
/// when the first lease frees and whether the key is busy.
pub fn permits_json(a: &Admission) -> Value {
    Value::Array(
        a.permits
            .iter()
            .map(|p| {
                json!({
                    "key": p.key,
                    "max": p.max,
                    "held": p.held,
                    "free": p.max.map(|m| m.saturating_sub(p.held)),
                    "busy": p.busy(),
                    "next_free": p.next_free_ms().map(rfc3339),
                    "next_free_in_s": p.next_free_in_s(),
                    "leases": p.leases.iter().map(|l| json!({
                        "lease": l.id,
                        "expires": rfc3339(l.expires_ms),
                        "expires_in_s": secs(l.expires_ms - p.now_ms),
                        "holder": l.holder,
                    })).collect::<Vec<Value>>(),
                    "backend": p.backend,
                })
            })
            .collect(),
    )
}

/// The JSON report's `budgets` member: one object per key, as `budget status` prints it.
pub fn budgets_json(a: &Admission) -> Value {
    Value::Array(
        a.budgets
            .iter()
            .map(|b| {
                json!({
                    "key": b.key,
                    "tokens": tokens(b.tokens_milli),
                    "max_tokens": tokens(b.max_milli),
                    "token_ratio": tokens(b.ratio_milli),
                    "retry_allowed": b.retry_allowed,
                    "backend": b.backend,
                })
            })
            .collect(),
    )
}

/// Thousandths of a token as a number of tokens.
pub fn tokens(milli: u64) -> f64 {
    milli as f64 / 1000.0
}

/// A wait in milliseconds rounded up to whole seconds, for [`crate::term::human`].
pub fn whole_secs_ms(ms: Millis) -> u64 {
    u64::try_from(ms.max(0)).unwrap_or(0).div_ceil(1000) * 1000
}
