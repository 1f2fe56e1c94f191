//! Admission control for a fleet of agents (issue 33), the pure part: a key's permits as a
//! table of leases (a bulkhead whose slots free themselves when a holder dies), and a retry
//! budget with gRPC's `retryThrottling` arithmetic. Functions of (state, settings, now); the
//! store keeps the state (a lease table file under a lock, or Redis by one script each).
//!
//! Leases, not counters: a slot is held by a lease that expires at a time; a holder renews it
//! while it works and releases it at the end, and a holder that dies (`kill -9`) leaves a
//! lease that simply runs out. A table read from the state root is untrusted: [`Table::sane`]
//! drops what cannot be a lease and clamps an expiry further away than one lease time, so a
//! planted table can neither grant more than `max` nor hold a slot for ever.

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

/// The most leases a table keeps, whatever `max` says (bounds the work on a planted file).
pub const MAX_LEASES: usize = 10_000;

/// How far past one lease time an expiry may lie before it is clamped (clocks read by two
/// processes a moment apart).
pub const SLACK_MS: i64 = 2_000;

/// The longest lease id accepted from a file or a command line.
pub const MAX_LEASE_ID: usize = 128;

/// One held slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The lease id the holder renews and releases it by.
    pub id: String,
    /// When it runs out unless renewed.
    pub expires_ms: Millis,
    /// Who took it, for people (`pid 1234 on host`); never trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
}

/// The leases of one key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Table {
    /// The key.
    pub key: String,
    /// The leases, live or not yet swept.
    #[serde(default)]
    pub leases: Vec<Lease>,
}

/// A key's permit settings, resolved from the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PermitLimits {
    /// How many leases may be held at once.
    pub max: u32,
    /// How long a lease lasts unless renewed, in milliseconds.
    pub lease_ms: u64,
}

/// What an acquire decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The lease granted; `held` counts it.
    Granted { lease: Lease, held: u32 },
    /// None free: `held` leases are live, and the first runs out at `next_free_ms`.
    Busy {
        held: u32,
        next_free_ms: Option<Millis>,
    },
}

/// Whether `id` can be a lease id: 1 to [`MAX_LEASE_ID`] letters, digits, `-`, `_` or `.`.
pub fn valid_lease_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_LEASE_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The clocks a lease table is judged by. On one clock (a fleet's Redis, the tests) all three
/// are the same time; on the files, where each process reads its own clock, they differ: a
/// lease is gone only once every clock the reader has says it ran out, by a margin, and an
/// expiry is planted only when it lies beyond the latest of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Judge {
    /// The reader's time: a lease it grants or renews runs one lease time from here.
    pub now: Millis,
    /// Leases that run out at or before this are gone (swept, their slots free).
    pub gone_before: Millis,
    /// The latest clock: an expiry more than one lease time (and [`SLACK_MS`]) past it was
    /// never granted by anyone and is clamped.
    pub latest: Millis,
}

impl Judge {
    /// One clock: a lease is gone the moment it runs out.
    #[cfg(test)]
    pub fn at(now: Millis) -> Judge {
        Judge {
            now,
            gone_before: now,
            latest: now,
        }
    }

    /// The files' rule: the reader's time `now` and the machine's clock `machine`. A lease is
    /// gone only when both are past its expiry by [`EXPIRY_MARGIN_MS`], so a clock ahead of
    /// the others (a skewed process, `TRIAGE_NOW`) never takes a live lease, and one that runs
    /// backwards never frees a slot.
    pub fn local(now: Millis, machine: Millis) -> Judge {
        Judge {
            now,
            gone_before: now.min(machine).saturating_sub(EXPIRY_MARGIN_MS),
            latest: now.max(machine),
        }
    }
}

/// How long past its expiry a lease in the files is kept before its slot frees: the skew
/// tolerated between the processes of one machine reading their clocks.
pub const EXPIRY_MARGIN_MS: i64 = 2_000;

impl Table {
    /// An empty table for `key`.
    pub fn new(key: &str) -> Table {
        Table {
            key: key.to_string(),
            leases: Vec::new(),
        }
    }

    /// The table made safe to judge by: leases with an invalid or repeated id dropped, expiries
    /// further than one lease time (and [`SLACK_MS`]) past the latest clock clamped to one
    /// lease time from the reader's `now`, at most [`MAX_LEASES`] kept. Returns how many
    /// entries were changed or dropped.
    pub fn sane(&mut self, limits: PermitLimits, j: Judge) -> usize {
        let before = self.leases.len();
        let lease = i64::try_from(limits.lease_ms).unwrap_or(i64::MAX);
        let horizon = j.latest.saturating_add(lease);
        let mut seen = std::collections::HashSet::new();
        let mut changed = 0;
        self.leases.retain_mut(|l| {
            if !valid_lease_id(&l.id) || !seen.insert(l.id.clone()) {
                return false;
            }
            // A little slack: a process judging with a `now` read a moment before another
            // renewed is not a planted table.
            if l.expires_ms > horizon.saturating_add(SLACK_MS) {
                l.expires_ms = j.now.saturating_add(lease);
                changed += 1;
            }
            if l.holder.as_ref().is_some_and(|h| h.len() > 200) {
                l.holder = None;
            }
            true
        });
        self.leases.truncate(MAX_LEASES);
        changed + (before - self.leases.len())
    }

    /// Drops the leases that are gone by `j`.
    pub fn sweep(&mut self, j: Judge) {
        self.leases.retain(|l| l.expires_ms > j.gone_before);
    }

    /// The live leases by `j`.
    pub fn held(&self, j: Judge) -> u32 {
        let n = self
            .leases
            .iter()
            .filter(|l| l.expires_ms > j.gone_before)
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The live leases by `j`, soonest to run out first.
    pub fn live(&self, j: Judge) -> Vec<Lease> {
        let mut v: Vec<Lease> = self
            .leases
            .iter()
            .filter(|l| l.expires_ms > j.gone_before)
            .cloned()
            .collect();
        v.sort_by_key(|l| l.expires_ms);
        v
    }

    /// When the first live lease runs out.
    pub fn next_free(&self, j: Judge) -> Option<Millis> {
        self.leases
            .iter()
            .map(|l| l.expires_ms)
            .filter(|&e| e > j.gone_before)
            .min()
    }

    /// Grants lease `id` if fewer than `max` are live by `j`.
    pub fn acquire(
        &mut self,
        limits: PermitLimits,
        j: Judge,
        id: &str,
        holder: Option<String>,
    ) -> Acquired {
        self.sweep(j);
        let held = self.held(j);
        if held >= limits.max || self.leases.len() >= MAX_LEASES {
            return Acquired::Busy {
                held,
                next_free_ms: self.next_free(j),
            };
        }
        let lease = Lease {
            id: id.to_string(),
            expires_ms: j
                .now
                .saturating_add(i64::try_from(limits.lease_ms).unwrap_or(i64::MAX)),
            holder,
        };
        self.leases.push(lease.clone());
        Acquired::Granted {
            lease,
            held: held + 1,
        }
    }

    /// Extends live lease `id` to one lease time from the reader's `now` (never shorter than
    /// it was): its new expiry, or `None` when it is not held (released, run out, or never
    /// granted).
    pub fn renew(&mut self, limits: PermitLimits, j: Judge, id: &str) -> Option<Millis> {
        self.sweep(j);
        let l = self.leases.iter_mut().find(|l| l.id == id)?;
        let to = j
            .now
            .saturating_add(i64::try_from(limits.lease_ms).unwrap_or(i64::MAX));
        l.expires_ms = l.expires_ms.max(to);
        Some(l.expires_ms)
    }

    /// Releases lease `id`: whether it was live.
    pub fn release(&mut self, j: Judge, id: &str) -> bool {
        self.sweep(j);
        let before = self.leases.len();
        self.leases.retain(|l| l.id != id);
        self.leases.len() != before
    }
}

/// A key's retry budget settings, resolved from the policy, in thousandths of a token (as
/// gRPC keeps them, so every backend's arithmetic is exact integers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetLimits {
    /// `max_tokens` × 1000.
    pub max_milli: u64,
    /// `token_ratio` × 1000: what a success gives back.
    pub ratio_milli: u64,
}

impl BudgetLimits {
    /// From the policy's numbers: `max_tokens` (clamped to 1..=1000) and `token_ratio`
    /// (clamped to 0.001..=max_tokens, rounded to thousandths).
    pub fn new(max_tokens: f64, token_ratio: f64) -> BudgetLimits {
        let max = if max_tokens.is_finite() {
            max_tokens.clamp(1.0, 1000.0)
        } else {
            10.0
        };
        let ratio = if token_ratio.is_finite() {
            token_ratio.clamp(0.001, max)
        } else {
            0.1
        };
        BudgetLimits {
            max_milli: (max * 1000.0).round() as u64,
            ratio_milli: (ratio * 1000.0).round() as u64,
        }
    }
}

/// What a call did to the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetOp {
    /// Read only: may a retry go ahead?
    Check,
    /// A call failed: one token less (never below 0).
    Failure,
    /// A call succeeded: `token_ratio` more (never above `max_tokens`).
    Success,
}

/// The tokens (thousandths) after `op`, from `tokens` (`None`: a budget never used, full).
/// A stored count above the maximum (a lowered policy, a planted file) is clamped to it.
pub fn budget_apply(limits: BudgetLimits, tokens: Option<u64>, op: BudgetOp) -> u64 {
    let t = tokens.unwrap_or(limits.max_milli).min(limits.max_milli);
    match op {
        BudgetOp::Check => t,
        BudgetOp::Failure => t.saturating_sub(1000),
        BudgetOp::Success => (t + limits.ratio_milli).min(limits.max_milli),
    }
}

/// gRPC's rule: retries go ahead only while the tokens are above half the maximum.
pub fn retry_allowed(limits: BudgetLimits, tokens: u64) -> bool {
    tokens * 2 > limits.max_milli
}

/// A permit or budget key as given on a command line or by a hook: 1 to 200 bytes, no
/// control characters. `Err` says what is wrong.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("the key is empty".into());
    }
    if key.len() > 200 {
        return Err(format!(
            "the key is {} bytes long; at most 200 are accepted",
            key.len()
        ));
    }
    if key.chars().any(char::is_control) {
        return Err("the key holds a control character".into());
    }
    Ok(())
}

/// The keys a status shows: those with stored state and the policy's own (not its globs),
/// sorted, each once.
pub fn shown_keys<'a>(
    mut stored: Vec<String>,
    policy: impl Iterator<Item = &'a String>,
) -> Vec<String> {
    stored.extend(policy.filter(|p| !p.contains(['*', '?'])).cloned());
    stored.sort();
    stored.dedup();
    stored
}

/// Milliseconds as seconds, to a tenth (how permits and budgets print a wait).
pub fn secs(ms: Millis) -> f64 {
    (ms.max(0) as f64 / 100.0).round() / 10.0
}

/// A time in Unix milliseconds as RFC 3339 (UTC, milliseconds); one out of range as its number.
pub fn rfc3339(ms: Millis) -> String {
    use chrono::{SecondsFormat, TimeZone, Utc};
    Utc.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: PermitLimits = PermitLimits {
        max: 2,
        lease_ms: 1000,
    };

    #[test]
    fn no_more_than_max_leases_are_granted_and_an_expired_one_frees_its_slot() {
        let mut t = Table::new("api");
        assert!(matches!(
            t.acquire(L, Judge::at(0), "a", None),
            Acquired::Granted { held: 1, .. }
        ));
        assert!(matches!(
            t.acquire(L, Judge::at(10), "b", None),
            Acquired::Granted { held: 2, .. }
        ));
        assert_eq!(
            t.acquire(L, Judge::at(20), "c", None),
            Acquired::Busy {
                held: 2,
                next_free_ms: Some(1000)
            }
        );
        // `a` runs out at 1000: its slot is free again without a release.
        assert!(matches!(
            t.acquire(L, Judge::at(1000), "c", None),
            Acquired::Granted { held: 2, .. }
        ));
    }

    #[test]
    fn renew_and_release_know_only_live_leases() {
        let mut t = Table::new("api");
        t.acquire(L, Judge::at(0), "a", None);
        assert_eq!(t.renew(L, Judge::at(500), "a"), Some(1500));
        assert_eq!(t.renew(L, Judge::at(500), "zz"), None);
        assert_eq!(t.renew(L, Judge::at(1500), "a"), None);
        t.acquire(L, Judge::at(2000), "b", None);
        assert!(t.release(Judge::at(2100), "b"));
        assert!(!t.release(Judge::at(2100), "b"));
    }

    #[test]
    fn a_planted_table_grants_no_more_than_max_and_holds_no_slot_for_ever() {
        let mut t = Table::new("api");
        for i in 0..5 {
            t.leases.push(Lease {
                id: format!("x{i}"),
                expires_ms: i64::MAX,
                holder: None,
            });
        }
        t.leases.push(Lease {
            id: "../bad id".into(),
            expires_ms: 10,
            holder: None,
        });
        t.leases.push(Lease {
            id: "x0".into(),
            expires_ms: 10,
            holder: None,
        });
        assert_eq!(t.sane(L, Judge::at(0)), 7);
        assert_eq!(t.leases.len(), 5);
        assert!(matches!(
            t.acquire(L, Judge::at(0), "n", None),
            Acquired::Busy { .. }
        ));
        // Clamped to one lease time: all free after it.
        assert!(matches!(
            t.acquire(L, Judge::at(1000), "n", None),
            Acquired::Granted { held: 1, .. }
        ));
    }

    #[test]
    fn on_two_clocks_a_lease_is_gone_only_when_both_are_past_it_by_the_margin() {
        let machine = 1_000_000;
        let mut t = Table::new("api");
        t.acquire(L, Judge::local(machine, machine), "a", None);
        // A reader a day ahead: the machine's clock says the lease is live.
        let ahead = Judge::local(machine + 86_400_000, machine + 10);
        assert_eq!(t.held(ahead), 1);
        assert!(matches!(
            t.clone().acquire(L, ahead, "b", None),
            Acquired::Granted { held: 2, .. }
        ));
        // A reader a day behind: the lease lies in its future, kept as it is.
        let behind = Judge::local(machine - 86_400_000, machine + 10);
        let before = t.clone();
        assert_eq!(t.sane(L, behind), 0);
        assert_eq!(t, before);
        assert_eq!(t.held(behind), 1);
        // Both clocks past it, but not by the margin: still held; past the margin: gone.
        let end = machine + 1000;
        let just = Judge::local(end + EXPIRY_MARGIN_MS - 1, end + EXPIRY_MARGIN_MS - 1);
        assert_eq!(t.held(just), 1);
        let past = Judge::local(end + EXPIRY_MARGIN_MS, end + EXPIRY_MARGIN_MS);
        assert_eq!(t.held(past), 0);
        // A renew never shortens a lease (a holder's clock that went back).
        let mut r = Table::new("api");
        r.acquire(L, Judge::at(5000), "a", None);
        assert_eq!(r.renew(L, Judge::at(4500), "a"), Some(6000));
    }

    #[test]
    fn the_budget_is_grpcs_retry_throttling_in_thousandths() {
        let b = BudgetLimits::new(10.0, 0.1);
        assert_eq!(b.max_milli, 10_000);
        let mut t = None;
        for _ in 0..5 {
            t = Some(budget_apply(b, t, BudgetOp::Failure));
        }
        // 5 tokens left: not above half of 10, retries stop.
        assert_eq!(t, Some(5000));
        assert!(!retry_allowed(b, 5000));
        let up = budget_apply(b, t, BudgetOp::Success);
        assert_eq!(up, 5100);
        assert!(retry_allowed(b, up));
        assert_eq!(budget_apply(b, Some(9950), BudgetOp::Success), 10_000);
        assert_eq!(budget_apply(b, Some(500), BudgetOp::Failure), 0);
        assert_eq!(budget_apply(b, Some(99_999), BudgetOp::Check), 10_000);
    }

    #[test]
    fn keys_are_bounded_and_printable() {
        assert!(check_key("api").is_ok());
        assert!(check_key("").is_err());
        assert!(check_key("a\nb").is_err());
        assert!(check_key(&"k".repeat(201)).is_err());
        assert!(valid_lease_id("p1a2-3f"));
        assert!(!valid_lease_id("a/b"));
    }
}
