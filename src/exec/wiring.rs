//! How `triage run`'s attempt loop is attached to the world: where stdin comes from, which
//! interrupt flags it watches, where the final stdout and the commands' stderr go, and what
//! may stop its retries from outside. `triage run` wires it to its own process; `triage
//! phase` wires each work item to its own files, its own interrupt flags (raised when the
//! phase is interrupted), the phase's time budget and the phase-wide cascade flag. Either
//! hands it the jitter's seed, which the edge draws from the environment.

use super::child::Interrupts;
use crate::core::attempt_plan::Next;
use crate::core::error_record::Warning;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The attachments of one run of the attempt loop.
pub struct Wiring<'a> {
    /// Bytes replayed to every attempt's stdin.
    pub stdin: Option<Arc<Vec<u8>>>,
    /// The interrupt flags the attempts watch.
    pub interrupts: &'a Interrupts,
    /// Where the final attempt's stdout goes [default: our stdout].
    pub stdout: Option<&'a File>,
    /// Where the commands' stderr goes besides the kept tail [default: our stderr].
    pub stderr_to: Option<&'a File>,
    /// The folder the commands run in [default: ours].
    pub cwd: Option<&'a Path>,
    /// Told each attempt's process group id once it started.
    pub on_spawn: Option<&'a (dyn Fn(u32) + Sync)>,
    /// Told before a retry's wait: how long, the attempt that follows and of how many.
    pub on_wait: Option<&'a (dyn Fn(Duration, u32, Option<u32>) + Sync)>,
    /// No attempt runs past this instant (a phase's time budget).
    pub deadline: Option<Instant>,
    /// Raised when the cascade rule fires, here or in a sibling: retries stop everywhere.
    pub cascade: Option<&'a AtomicBool>,
    /// The seed of the retry delays' jitter (`TRIAGE_SEED`, else drawn from the clock).
    pub seed: u64,
    /// Environment every attempt's command gets besides its own (a phase item's token).
    pub env: &'a [(String, String)],
}

impl<'a> Wiring<'a> {
    /// `triage run`'s own wiring: its stdin, its signals, its stdout and stderr, and the
    /// jitter's `seed`.
    pub fn own(stdin: Option<Arc<Vec<u8>>>, interrupts: &'a Interrupts, seed: u64) -> Wiring<'a> {
        Wiring {
            stdin,
            interrupts,
            stdout: None,
            stderr_to: None,
            cwd: None,
            on_spawn: None,
            on_wait: None,
            deadline: None,
            cascade: None,
            seed,
            env: &[],
        }
    }

    /// An attempt's timeout, shortened to what is left of the budget.
    pub fn clamp(&self, timeout: Option<Duration>) -> Option<Duration> {
        let Some(deadline) = self.deadline else {
            return timeout;
        };
        let left = deadline.saturating_duration_since(Instant::now());
        Some(timeout.map_or(left, |t| t.min(left)))
    }

    /// Why a retry the classifier advised must not happen, if it must not: the cascade rule
    /// fired (in this record's thresholds or, for a phase, in a sibling's), a phase's agent
    /// reached its abort threshold (the same agent failing 3+ times), or the wait would end
    /// past the budget.
    pub fn veto(&self, next: &Next, crossed: &[Warning]) -> Option<String> {
        let Next::Retry(delay) = next else {
            return None;
        };
        if let Some(w) = crossed.iter().find(|w| w.name == "cascade") {
            if let Some(flag) = self.cascade {
                flag.store(true, Ordering::SeqCst);
            }
            return Some(format!(
                "the cascade rule fired ({} agents failing in the workflow, more than {}): automatic retries stop and the failures go to the user",
                w.count, w.threshold
            ));
        }
        // In a phase (which has the cascade flag), not in a lone `run`: there `--retries` is
        // the caller's explicit choice and the warning is in the report.
        if let Some(w) = crossed
            .iter()
            .find(|w| w.name == "agent_failure_threshold" && self.cascade.is_some())
        {
            return Some(format!(
                "{} failures of {} without a success reach the abort threshold ({}): automatic retries stop",
                w.count,
                w.agents.first().map_or("the agent", String::as_str),
                w.threshold
            ));
        }
        if self.cascade.is_some_and(|f| f.load(Ordering::SeqCst)) {
            return Some(
                "the cascade rule fired in this phase: automatic retries stop and the failures go to the user"
                    .into(),
            );
        }
        if self.deadline.is_some_and(|d| Instant::now() + *delay >= d) {
            return Some("the phase's time budget ends before the retry could run".into());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warning(name: &str) -> Warning {
        Warning {
            name: name.into(),
            message: String::new(),
            count: 3,
            threshold: 2.0,
            agents: Vec::new(),
        }
    }

    #[test]
    fn cascade_in_one_item_stops_the_retries_of_its_siblings() {
        let flag = AtomicBool::new(false);
        let i = Interrupts::detached();
        let mut w = Wiring::own(None, &i, 0);
        w.cascade = Some(&flag);
        let retry = Next::Retry(Duration::ZERO);
        assert_eq!(w.veto(&retry, &[]), None);
        assert!(w.veto(&retry, &[warning("cascade")]).is_some());
        assert!(flag.load(Ordering::SeqCst));
        assert!(w.veto(&retry, &[]).unwrap_or_default().contains("cascade"));
        assert_eq!(w.veto(&Next::Stop("x".into()), &[]), None);
    }

    #[test]
    fn the_budget_shortens_timeouts_and_vetoes_late_retries() {
        let i = Interrupts::detached();
        let mut w = Wiring::own(None, &i, 0);
        assert_eq!(
            w.clamp(Some(Duration::from_secs(5))),
            Some(Duration::from_secs(5))
        );
        w.deadline = Some(Instant::now() + Duration::from_secs(60));
        let t = w.clamp(Some(Duration::from_secs(3600))).unwrap_or_default();
        assert!(t <= Duration::from_secs(60) && t > Duration::from_secs(50));
        assert_eq!(
            w.clamp(Some(Duration::from_secs(1))),
            Some(Duration::from_secs(1))
        );
        assert!(w.clamp(None).is_some());
        assert!(w
            .veto(&Next::Retry(Duration::from_secs(120)), &[])
            .is_some());
        assert_eq!(w.veto(&Next::Retry(Duration::from_secs(1)), &[]), None);
    }
}
