//! Permits and retry budgets in Redis (issue 33): one script per call, so the sweep of
//! expired leases, the count and the grant (or a budget's read, change and write) are one
//! atomic step on the server, timed by the server's `TIME` only: no client's clock (nor
//! `TRIAGE_NOW`) decides when a lease runs out.

use super::{int, text, Remote, RemoteError};
use crate::core::admission::{BudgetLimits, BudgetOp, Lease, Millis, PermitLimits};
use redis::Value;

/// The set of keys that have had a permit.
pub const PERMIT_INDEX: &str = "permit-keys";
/// The set of keys that have a budget.
pub const BUDGET_INDEX: &str = "budget-keys";

const PERMIT: &str = include_str!("scripts/permit.lua");
const BUDGET: &str = include_str!("scripts/budget.lua");

fn permit_script() -> &'static redis::Script {
    static S: std::sync::OnceLock<redis::Script> = std::sync::OnceLock::new();
    S.get_or_init(|| redis::Script::new(PERMIT))
}

fn budget_script() -> &'static redis::Script {
    static S: std::sync::OnceLock<redis::Script> = std::sync::OnceLock::new();
    S.get_or_init(|| redis::Script::new(BUDGET))
}

/// A permit call's reply.
#[derive(Clone, Debug)]
pub struct PermitReply {
    /// Granted, renewed or released.
    pub done: bool,
    /// The lease's new expiry (granted or renewed).
    pub expires_ms: Millis,
    /// The time the call was judged at.
    pub now_ms: Millis,
    /// The live leases after the call.
    pub held: u32,
    /// The first hundred live leases, soonest to run out first.
    pub leases: Vec<Lease>,
}

impl Remote {
    /// One permit operation (`acquire`, `renew`, `release`, or `status`, which changes
    /// nothing) on `key`, by the server's clock.
    pub fn permit(
        &mut self,
        op: &str,
        key: &str,
        id: &str,
        limits: PermitLimits,
    ) -> Result<PermitReply, RemoteError> {
        let mut inv = permit_script().prepare_invoke();
        inv.key(self.key(&format!("permits:{key}")))
            .key(self.key(PERMIT_INDEX))
            .arg(op)
            .arg(id)
            .arg(limits.max)
            .arg(limits.lease_ms)
            .arg(key);
        let reply: Vec<Value> = self.invoke("a permit call", &inv)?;
        let bad = || RemoteError::protocol(&self.config.target, "permit");
        let num = |i: usize| reply.get(i).and_then(int).ok_or_else(bad);
        let mut leases = Vec::new();
        for pair in reply.get(4..).unwrap_or_default().chunks(2) {
            let [id, score] = pair else { break };
            let (Some(id), Some(score)) = (text(id), text(score)) else {
                continue;
            };
            leases.push(Lease {
                id,
                expires_ms: score.parse::<f64>().map_or(0, |s| s as i64),
                holder: None,
            });
        }
        Ok(PermitReply {
            done: num(0)? == 1,
            expires_ms: num(1)?,
            now_ms: num(2)?,
            held: u32::try_from(num(3)?).unwrap_or(u32::MAX),
            leases,
        })
    }

    /// Every key that has had a permit, sorted.
    pub fn permit_keys(&mut self) -> Result<Vec<String>, RemoteError> {
        self.index(PERMIT_INDEX, "listing permits")
    }

    /// Every key that has a budget, sorted.
    pub fn budget_keys(&mut self) -> Result<Vec<String>, RemoteError> {
        self.index(BUDGET_INDEX, "listing budgets")
    }

    fn index(&mut self, name: &str, doing: &str) -> Result<Vec<String>, RemoteError> {
        let mut keys: Vec<String> =
            self.query(doing, redis::cmd("SMEMBERS").arg(self.key(name)))?;
        keys.sort();
        Ok(keys)
    }

    /// One budget operation on `key`: the tokens (thousandths) after it.
    pub fn budget(
        &mut self,
        op: BudgetOp,
        key: &str,
        limits: BudgetLimits,
        nonce: Option<&str>,
    ) -> Result<u64, RemoteError> {
        self.budget_applied(op, key, limits, nonce).map(|(t, _)| t)
    }

    /// One budget operation on `key`: the tokens (thousandths) after it, and whether it was
    /// applied (a record with a `nonce` already applied, its answer lost to a timeout and then
    /// pushed again, changes nothing).
    pub fn budget_applied(
        &mut self,
        op: BudgetOp,
        key: &str,
        limits: BudgetLimits,
        nonce: Option<&str>,
    ) -> Result<(u64, bool), RemoteError> {
        let op = match op {
            BudgetOp::Check => "check",
            BudgetOp::Failure => "failure",
            BudgetOp::Success => "success",
        };
        let mut inv = budget_script().prepare_invoke();
        inv.key(self.key(&format!("budget:{key}")))
            .key(self.key(BUDGET_INDEX))
            .key(self.key(&format!("budget-nonce:{}", nonce.unwrap_or(""))))
            .arg(op)
            .arg(limits.max_milli)
            .arg(limits.ratio_milli)
            .arg(key)
            .arg(nonce.unwrap_or(""))
            .arg(super::NONCE_TTL_S);
        let reply: Vec<Value> = self.invoke("a budget call", &inv)?;
        let tokens = reply
            .first()
            .and_then(int)
            .and_then(|n| u64::try_from(n).ok());
        let applied = reply.get(1).and_then(int);
        match (tokens, applied) {
            (Some(t), Some(a)) => Ok((t, a == 1)),
            _ => Err(RemoteError::protocol(&self.config.target, "budget")),
        }
    }
}
