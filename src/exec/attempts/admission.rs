//! `run --permit KEY` and `run --budget KEY` (issue 33): a permit held around the whole run,
//! renewed while it lasts longer than a lease and released at the end; a retry budget asked
//! before each retry and told of each attempt's outcome.

use super::report::{finish, Report};
use super::Request;
use crate::core::admission::{retry_allowed, BudgetOp};
use crate::core::attempt_plan::Next;
use crate::core::policy::Policy;
use crate::exec::child::Interrupts;
use crate::exit::Failure;
use crate::store::ground::Ground;
use crate::store::{budget, permits};
use serde_json::{json, Value};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// No permit was free after the wait: the command was not run (EX_TEMPFAIL).
const PERMIT_BUSY: u8 = 75;

/// How long one look for a free permit waits before the run's interrupts are checked: a
/// Ctrl+C (or a phase pausing) ends a long `--permit-wait` this soon.
const WAIT_SLICE: Duration = Duration::from_millis(200);

/// Runs `inner` holding a permit of `--permit KEY` (or directly without one). A signal while
/// it waits for the permit ends the run as interrupted, the command not run.
pub(super) fn with_permit(
    args: &Request,
    g: &Ground,
    policy: &Policy,
    interrupts: &Interrupts,
    inner: impl FnOnce() -> Result<(u8, Value), Failure>,
) -> Result<(u8, Value), Failure> {
    let Some(key) = args.permit.as_deref() else {
        return inner();
    };
    crate::core::admission::check_key(key)
        .map_err(|why| Failure::usage(format!("--permit: bad key: {why}")))?;
    let limits = policy.permits_for(key).ok_or_else(|| {
        Failure::usage(format!(
            "--permit {key}: the policy sets no permits for it; add `[permits.{key}] max = 8`"
        ))
    })?;
    let wait = args.permit_wait.map_or(Duration::ZERO, |d| d.0);
    let until = Instant::now() + wait;
    let (out, lease) = loop {
        let left = until.saturating_duration_since(Instant::now());
        let later = g.at(g.clock());
        let (out, lease) = permits::acquire(&later, key, limits, left.min(WAIT_SLICE))?;
        if lease.is_some() || left <= WAIT_SLICE {
            break (out, lease);
        }
        if let Some(sig) = interrupts.take() {
            let message = format!(
                "triage run: interrupted (signal {sig}) while waiting for a permit of `{key}`; the command was not run"
            );
            say!("{}", crate::core::text::printable(&message));
            let mut report = Report::new(args, key, None);
            report.outcome = "interrupted";
            report.note = Some(message);
            let (status, mut doc) = finish(g, &report, 130)?;
            doc["permit"] =
                json!({"key": key, "acquired": false, "held": out.held, "max": limits.max});
            return Ok((status, doc));
        }
    };
    let Some(lease) = lease else {
        let waited = if wait.is_zero() {
            String::new()
        } else {
            format!(" after waiting {}", crate::core::duration::Dur(wait))
        };
        let message = match &out.unavailable {
            Some(why) => format!(
                "triage run: no permit of `{key}` was granted{waited}: {why}; the command was not run"
            ),
            None => format!(
                "triage run: no permit of `{key}` is free ({} of {} held{waited}); the command was not run",
                out.held, limits.max
            ),
        };
        say!("{}", crate::core::text::printable(&message));
        let mut report = Report::new(args, key, None);
        report.outcome = "permit_busy";
        report.note = Some(message);
        let (status, mut doc) = finish(g, &report, PERMIT_BUSY)?;
        doc["permit"] = json!({
            "key": key,
            "acquired": false,
            "held": out.held,
            "max": limits.max,
            "waited": crate::core::duration::Dur(wait).to_string(),
        });
        return Ok((status, doc));
    };
    let (stop, stopped) = mpsc::channel::<()>();
    let every = Duration::from_millis((limits.lease_ms / 3).max(50));
    let result = std::thread::scope(|s| {
        let lease = &lease;
        let renewer = s.spawn(move || {
            let mut lost = false;
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                let now = g.at(g.clock());
                let renewed = permits::call(&now, key, limits, &permits::Op::Renew(lease.clone()));
                match renewed {
                    Ok(o) if o.done => {}
                    Ok(o) if o.unavailable.is_some() => g.warn(&format!(
                        "cannot renew permit `{key}`: {}",
                        o.unavailable.as_deref().unwrap_or_default()
                    )),
                    Ok(_) if !lost => {
                        lost = true;
                        g.warn(&format!(
                            "the permit lease {lease} of `{key}` ran out before it was renewed; the run goes on without it"
                        ));
                    }
                    Ok(_) => {}
                    Err(e) => g.warn(&format!("cannot renew permit `{key}`: {e}")),
                }
            }
        });
        let r = inner();
        let _ = stop.send(());
        let _ = renewer.join();
        r
    });
    let end = g.at(g.clock());
    if let Err(e) = permits::call(&end, key, limits, &permits::Op::Release(lease.clone())) {
        g.warn(&format!(
            "cannot release permit `{key}` ({e}); it frees itself when its lease runs out"
        ));
    }
    result.map(|(status, mut doc)| {
        doc["permit"] = json!({"key": key, "acquired": true, "lease": lease});
        (status, doc)
    })
}

/// Tells `--budget KEY` of an attempt's outcome; a failure (not an interrupt) costs a token.
/// When the run would retry and the budget is spent, the reason to stop instead.
pub(super) fn budget_after(
    args: &Request,
    g: &Ground,
    policy: &Policy,
    failed: bool,
    next: Option<&Next>,
) -> Option<String> {
    let key = args.budget.as_deref()?;
    let Some(limits) = policy.budget_for(key) else {
        g.warn(&format!(
            "--budget {key}: the policy sets no retry budget for it (add `[budget.{key}] max_tokens = 10`); retries are not limited by one"
        ));
        return None;
    };
    let op = if failed {
        BudgetOp::Failure
    } else {
        BudgetOp::Success
    };
    let tokens = match budget::call(g, key, limits, op) {
        Ok((t, _)) => t,
        Err(e) => {
            g.warn(&format!("retry budget `{key}`: {e}"));
            return None;
        }
    };
    match next {
        Some(Next::Retry(_)) if !retry_allowed(limits, tokens) => Some(format!(
            "the fleet's retry budget for `{key}` is spent: fail fast ({} of {} tokens left; retries resume above half)",
            tokens as f64 / 1000.0,
            limits.max_milli as f64 / 1000.0
        )),
        _ => None,
    }
}
