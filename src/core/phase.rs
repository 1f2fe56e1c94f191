//! `triage phase`'s core: the [`plan`] of a phase, the manifest that records each work item's
//! state as it changes (so an interrupt, or a runner killed outright, loses nothing), and the
//! one decision taken when every item has ended (seed 000's fan-out rules: wait for all, more
//! than half failed or a critical item failed → stop and ask once; optional failures only →
//! proceed degraded), and seed 001's rule at resume: an item with side effects that may have
//! begun its work is never started again without a person's decision ([`Manifest::hold`]).
//! Pure: no clock, no file, no process.

mod choice;
pub mod plan;

pub use choice::{choice, deadline, is_pending, pending, Applied, BY_DEFAULT};

use crate::core::vocab::Criticality;
use plan::PhasePlan;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a work item stands (seed 002's COMPLETE / PARTIAL / NOT_STARTED, and the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemState {
    /// Not run yet.
    NotStarted,
    /// Its command is running (or was, when the runner died).
    Running,
    /// It succeeded; its output is kept.
    Complete,
    /// It was interrupted; what it printed is kept as a partial output.
    Partial,
    /// It failed for good (retries spent or not allowed, timed out, breaker open, output
    /// rejected).
    Failed,
    /// A person decided to go on without it.
    Skipped,
    /// It has side effects and may have begun its work (it was running when the runner died,
    /// was interrupted, or failed after it started): `resume` does not start it again until a
    /// person decides (`phase resume --rerun ID`, `phase decide`).
    NeedsDecision,
}

impl ItemState {
    /// Whether `phase resume` runs it again (after [`Manifest::hold`] has held what it must).
    pub fn unfinished(self) -> bool {
        !matches!(
            self,
            ItemState::Complete | ItemState::Skipped | ItemState::NeedsDecision
        )
    }

    /// The word, as in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            ItemState::NotStarted => "not_started",
            ItemState::Running => "running",
            ItemState::Complete => "complete",
            ItemState::Partial => "partial",
            ItemState::Failed => "failed",
            ItemState::Skipped => "skipped",
            ItemState::NeedsDecision => "needs_decision",
        }
    }
}

/// Where the phase stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseStatus {
    /// A runner is at work (or died at work: `resume` re-checks).
    Running,
    /// Interrupted: `resume` continues it.
    Paused,
    /// Every item ended and the decision was taken.
    Decided,
}

/// One item in the manifest.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ItemEntry {
    /// The plan's id.
    pub id: String,
    /// The agent.
    pub agent: String,
    /// Critical or optional, as the plan and policy say.
    pub criticality: Option<Criticality>,
    /// `side_effects = true` in the plan or its agent's policy, when the phase was run (resume
    /// also asks the policy of the day: either one holds the item).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub side_effects: bool,
    /// A person's leave to start this item again although it may have run (who gave it, and
    /// when); used up by the write that files the item as running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<String>,
    /// Where it stands.
    pub state: Option<ItemState>,
    /// Attempts made by its last run.
    #[serde(default)]
    pub attempts: u32,
    /// `triage run`'s outcome word (`succeeded`, `timed_out`, `breaker_open`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Its breaker was open, so its fallback ran in its place: complete, but degraded (seed
    /// 002's `proceed_without_section`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    /// The kind of its last failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its exit status, as `triage run` would end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<u8>,
    /// The error records its failures made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_ids: Vec<String>,
    /// Its output (a complete item's stdout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Partial outputs kept from failed or interrupted attempts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partials: Vec<String>,
    /// Its stderr, kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// The process group of its running attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pgid: Option<u32>,
    /// What shows that the group named by `pgid` is the one this item started: `resume`
    /// signals a group only when it can show it ([`GroupProof`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupProof>,
    /// When its last run started and ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When its last run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// How long its last run took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Why it stands where it does, when that is not plain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What identifies the process group an item's attempt started, so that a later `resume`
/// never signals a group that is not the item's: the group leader's start time (clock ticks
/// since boot, as the kernel counts them), the boot it started in, and a random token every
/// process of the group carries in its environment (`TRIAGE_ITEM_TOKEN`), which shows a
/// member is the item's after its leader exited. A process id can be reused; the three
/// together cannot be, and none of them can be guessed by a manifest written elsewhere.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GroupProof {
    /// The leader's start time, in clock ticks since boot.
    pub leader_start: u64,
    /// The boot it started in (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
    /// The token in its members' environment.
    pub token: String,
}

impl ItemEntry {
    /// Its state (a manifest without one says not started).
    pub fn state(&self) -> ItemState {
        self.state.unwrap_or(ItemState::NotStarted)
    }

    /// Whether its command may have started, so its side effects may have happened: anything
    /// but not started, complete, skipped, and the failures that never ran it (breaker open,
    /// the budget ended first, the command could not be executed).
    pub fn may_have_run(&self) -> bool {
        match self.state() {
            ItemState::NotStarted | ItemState::Complete | ItemState::Skipped => false,
            ItemState::Failed => !matches!(
                self.outcome.as_deref(),
                Some(
                    "breaker_open"
                        | "not_started"
                        | "cannot_run"
                        | "permit_busy"
                        | "fallback_failed"
                )
            ),
            ItemState::Running | ItemState::Partial | ItemState::NeedsDecision => true,
        }
    }
}

/// `<root>/workflows/<W>/phase-<N>.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// The workflow.
    pub workflow_id: String,
    /// The phase, as given.
    pub phase: String,
    /// Where the phase stands.
    pub status: PhaseStatus,
    /// The runner's process id (for people: the lock says whether it lives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_pid: Option<u32>,
    /// When it was first run.
    pub started_at: String,
    /// When this file was last written.
    pub updated_at: String,
    /// Resumes so far.
    #[serde(default)]
    pub resumes: u32,
    /// The plan, as read (resume needs no file).
    pub plan: PhasePlan,
    /// The plan file it was read from (absolute), when it came from a file: `resume` refuses
    /// to go on once that file no longer holds the plan that was run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_file: Option<String>,
    /// The SHA-256 of the plan's bytes as read at `run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_sha256: Option<String>,
    /// An HMAC of the phase, its plan and where the plan came from, under a key only the user
    /// who ran it holds (outside any project): a manifest from a clone, a tarball or an editor
    /// does not carry it, and `resume` will not run its commands unasked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<String>,
    /// Every item.
    pub items: Vec<ItemEntry>,
    /// Seed 002's "Workflow paused. Resume with …", when paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The last decision, and a person's choice on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Value>,
    /// While a runner is at work: the generation of the journal beside this file
    /// (`phase-<N>.json.journal`), whose lines bring items up to date. A journal of another
    /// generation is stale and not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<u64>,
}

impl Manifest {
    /// A new manifest: every item not started, with its criticality and whether it has side
    /// effects (`settings`).
    pub fn new(
        workflow: &str,
        phase: &str,
        plan: PhasePlan,
        settings: impl Fn(&plan::Item) -> (Criticality, bool),
        at: &str,
    ) -> Manifest {
        let items = plan
            .items
            .iter()
            .map(|i| {
                let (criticality, side_effects) = settings(i);
                ItemEntry {
                    id: i.id.clone(),
                    agent: i.agent().to_string(),
                    criticality: Some(criticality),
                    side_effects,
                    state: Some(ItemState::NotStarted),
                    ..ItemEntry::default()
                }
            })
            .collect();
        Manifest {
            workflow_id: workflow.to_string(),
            phase: phase.to_string(),
            status: PhaseStatus::Running,
            runner_pid: None,
            started_at: at.to_string(),
            updated_at: at.to_string(),
            resumes: 0,
            plan,
            plan_file: None,
            plan_sha256: None,
            seal: None,
            items,
            message: None,
            decision: None,
            journal: None,
        }
    }

    /// The ids of the items in `state`.
    pub fn ids(&self, state: ItemState) -> Vec<String> {
        self.items
            .iter()
            .filter(|i| i.state() == state)
            .map(|i| i.id.clone())
            .collect()
    }

    /// `line`'s `triage phase` commands with `--config FILE` when the phase ran under one:
    /// a hint that left it out would resume under another policy.
    pub fn with_config(line: &str, config: Option<&str>) -> String {
        match config {
            Some(c) => line.replace(
                "triage phase ",
                &format!("triage --config {} phase ", shell_word(c)),
            ),
            None => line.to_string(),
        }
    }

    /// Seed 002's resume line.
    pub fn resume_line(&self) -> String {
        format!(
            "Workflow paused. Resume with: triage phase resume {}",
            self.which()
        )
    }

    /// `--workflow W --phase N`, as a shell reads it back.
    fn which(&self) -> String {
        format!(
            "--workflow {} --phase {}",
            shell_word(&self.workflow_id),
            shell_word(&self.phase)
        )
    }

    /// What a person does about the items in `needs_decision`.
    pub fn decision_line(&self) -> Option<String> {
        let ids = self.ids(ItemState::NeedsDecision);
        if ids.is_empty() {
            return None;
        }
        let (them, s, are) = if ids.len() == 1 {
            ("it", "", "is")
        } else {
            ("them", "s", "are")
        };
        let rerun: Vec<String> = ids
            .iter()
            .map(|id| format!("--rerun {}", shell_word(id)))
            .collect();
        Some(format!(
            "Side effects: item{s} {} may have run in part and {are} not started again without your decision. Run {them} again with: triage phase resume {} {}; or go on without {them}: triage phase decide {} --choice B",
            ids.join(", "),
            self.which(),
            rerun.join(" "),
            self.which(),
        ))
    }

    /// Seed 001's rule at resume ("never retry automatically: skills that have side effects"):
    /// every item with side effects whose command may have started (see
    /// [`ItemEntry::may_have_run`]) and that no person gave leave to run again is filed as
    /// needing a decision, with a note saying why; an item with leave is filed to run again.
    /// `lost_starts`: the manifest was read from its `.bak`, which may predate the write that
    /// filed an item as running, so an item it says was not started may have been. Returns the
    /// ids held.
    pub fn hold(&mut self, lost_starts: bool) -> Vec<String> {
        let which = self.which();
        let mut held = Vec::new();
        for e in self.items.iter_mut() {
            let state = e.state();
            if e.rerun.is_some() {
                if state == ItemState::NeedsDecision {
                    e.state = Some(ItemState::Partial);
                }
                continue;
            }
            // Held once, held until a person decides (whatever the policy says since).
            if state == ItemState::NeedsDecision {
                held.push(e.id.clone());
                continue;
            }
            let unsure = lost_starts && state == ItemState::NotStarted;
            if !e.side_effects || !(e.may_have_run() || unsure) {
                continue;
            }
            held.push(e.id.clone());
            let what = match (state, e.note.as_deref()) {
                (ItemState::NotStarted, _) => {
                    "the manifest was read from its .bak, which may not show that it started"
                        .to_string()
                }
                (_, Some(n)) => n.to_string(),
                (ItemState::Partial, None) => "it was interrupted".to_string(),
                _ => format!("it {} after it started", state.as_str()),
            };
            e.note = Some(format!(
                "{what}; it has side effects, so it is not started again without a decision: `triage phase resume {which} --rerun {}`, or `triage phase decide {which} --choice B` to go on without it",
                shell_word(&e.id)
            ));
            e.state = Some(ItemState::NeedsDecision);
            e.pgid = None;
            e.group = None;
        }
        held
    }
}

/// A word as a shell reads it back: quoted when it holds anything but plain characters.
pub fn shell_word(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/+=@".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// The phase's one decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every item complete.
    Proceed,
    /// Some items failed, none critical, not more than the ratio: go on, with warnings.
    ProceedDegraded,
    /// More than the ratio failed, or a critical item failed: ask the user once.
    Stop,
    /// A conditional phase that would stop: skip it (seed 004).
    Skip,
    /// Interrupted: resume later.
    Paused,
}

impl Verdict {
    /// The exit status of `phase run` and `phase resume`: 0 go on (proceed, degraded, skip),
    /// 1 stop and ask, 130 paused.
    pub fn exit_status(self) -> u8 {
        match self {
            Verdict::Proceed | Verdict::ProceedDegraded | Verdict::Skip => 0,
            Verdict::Stop => 1,
            Verdict::Paused => 130,
        }
    }
}

/// The decision and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decision {
    /// What to do.
    pub decision: Verdict,
    /// Why, in a sentence.
    pub reason: String,
    /// The failed items.
    pub failed: Vec<String>,
    /// The failed items that are critical.
    pub critical_failed: Vec<String>,
    /// The complete items (the degraded ones left out).
    pub complete: Vec<String>,
    /// The items whose fallback ran in their place, their breaker open.
    pub degraded: Vec<String>,
    /// Failed items over items (skipped ones left out of both).
    pub failure_ratio: f64,
    /// The items with side effects that wait for a person's decision.
    pub needs_decision: Vec<String>,
    /// The abort thresholds crossed ([`abort_on`]).
    pub thresholds: Vec<String>,
}

/// The abort thresholds of seed 000's "When to Retry vs Abort" that a phase's items crossed
/// (`agent_failure_threshold`: the same agent failed 3+ times in the workflow): the phase
/// stops for a decision, whatever the fan-out rule said (a conditional phase too: these
/// speak of the workflow, not of the phase). `crossed`: each warning's name and message, as the items' reports carry them.
pub fn abort_on(mut d: Decision, crossed: &[(String, String)]) -> Decision {
    if crossed.is_empty() || d.decision == Verdict::Paused {
        return d;
    }
    let what: Vec<String> = crossed
        .iter()
        .map(|(name, message)| format!("{name}: {message}"))
        .collect();
    let abort = format!(
        "an abort threshold was crossed ({}): the phase stops for a decision",
        what.join("; ")
    );
    d.reason = match d.decision {
        Verdict::Stop => format!("{}; besides, {abort}", d.reason),
        _ => format!("{abort}; besides, {}", d.reason),
    };
    d.decision = Verdict::Stop;
    d.thresholds = crossed.iter().map(|(name, _)| name.clone()).collect();
    d
}

/// The reason's words for the items whose fallback ran (after `sep`), or nothing.
fn fell_back(degraded: &[String], sep: &str) -> String {
    match degraded {
        [] => String::new(),
        [one] => format!("{sep}item {one} is degraded: its breaker is open, so its fallback ran"),
        _ => format!(
            "{sep}items {} are degraded: their breakers are open, so their fallbacks ran",
            degraded.join(", ")
        ),
    }
}

/// Decides once, when every item has ended (seed 000's "Fan-Out Failure Handling").
pub fn decide(items: &[ItemEntry], abort_ratio: f64, mandatory: bool) -> Decision {
    let with = |s: ItemState| -> Vec<String> {
        items
            .iter()
            .filter(|i| i.state() == s)
            .map(|i| i.id.clone())
            .collect()
    };
    let failed = with(ItemState::Failed);
    let skipped = with(ItemState::Skipped);
    let (degraded, complete): (Vec<&ItemEntry>, Vec<&ItemEntry>) = items
        .iter()
        .filter(|i| i.state() == ItemState::Complete)
        .partition(|i| i.degraded);
    let ids = |v: Vec<&ItemEntry>| -> Vec<String> { v.iter().map(|i| i.id.clone()).collect() };
    let (degraded, complete) = (ids(degraded), ids(complete));
    let needs_decision = with(ItemState::NeedsDecision);
    let critical_failed: Vec<String> = items
        .iter()
        .filter(|i| i.state() == ItemState::Failed && i.criticality != Some(Criticality::Optional))
        .map(|i| i.id.clone())
        .collect();
    let counted = items
        .iter()
        .filter(|i| i.state() != ItemState::Skipped)
        .count();
    let failure_ratio = if counted == 0 {
        0.0
    } else {
        failed.len() as f64 / counted as f64
    };
    let unfinished: Vec<&ItemEntry> = items
        .iter()
        .filter(|i| {
            matches!(
                i.state(),
                ItemState::NotStarted | ItemState::Running | ItemState::Partial
            )
        })
        .collect();
    let pct = |r: f64| format!("{:.0}%", r * 100.0);
    // Items an open breaker refused never started: they wait for it, nothing was interrupted.
    let waiting = unfinished
        .iter()
        .filter(|i| i.outcome.as_deref() == Some("breaker_open"))
        .count();
    let (decision, reason) = if !unfinished.is_empty() && waiting == unfinished.len() {
        (
            Verdict::Paused,
            format!(
                "{waiting} of {} items not started: an open breaker refused them; resume once it lets them",
                items.len()
            ),
        )
    } else if !unfinished.is_empty() {
        (
            Verdict::Paused,
            format!(
                "interrupted with {} of {} items unfinished",
                unfinished.len(),
                items.len()
            ),
        )
    } else if failure_ratio > abort_ratio {
        (
            Verdict::Stop,
            format!(
                "{} of {counted} items failed ({}), more than the {} the phase allows",
                failed.len(),
                pct(failure_ratio),
                pct(abort_ratio)
            ),
        )
    } else if !critical_failed.is_empty() {
        (
            Verdict::Stop,
            format!(
                "critical item{} failed: {}",
                if critical_failed.len() == 1 { "" } else { "s" },
                critical_failed.join(", ")
            ),
        )
    } else if !failed.is_empty() {
        (
            Verdict::ProceedDegraded,
            format!(
                "{} optional item{} failed ({}, not more than {}): going on without {}{}",
                failed.len(),
                if failed.len() == 1 { "" } else { "s" },
                pct(failure_ratio),
                pct(abort_ratio),
                failed.join(", "),
                fell_back(&degraded, "; ")
            ),
        )
    } else if !degraded.is_empty() {
        (Verdict::ProceedDegraded, fell_back(&degraded, ""))
    } else if !skipped.is_empty() {
        // A person chose to go on without them: the phase goes on, but not complete.
        (
            Verdict::ProceedDegraded,
            format!(
                "going on without {}, skipped by a decision",
                skipped.join(", ")
            ),
        )
    } else {
        (Verdict::Proceed, "every item completed".to_string())
    };
    // Only a person can say whether a side effect may happen twice: ask, whatever the rest
    // says (a conditional phase too: skipping it would not ask).
    let (decision, reason) = match decision {
        Verdict::Paused => (decision, reason),
        _ if !needs_decision.is_empty() => {
            let (s, have, they, wait) = if needs_decision.len() == 1 {
                ("", "has", "it", "waits")
            } else {
                ("s", "have", "they", "wait")
            };
            let asked = format!(
                "item{s} {} {have} side effects and may have run in part: {they} {wait} for a person's decision",
                needs_decision.join(", ")
            );
            let rest = match decision {
                Verdict::Proceed => String::new(),
                _ => format!("; besides, {reason}"),
            };
            (Verdict::Stop, format!("{asked}{rest}"))
        }
        Verdict::Stop if !mandatory => (
            Verdict::Skip,
            format!("{reason}; the phase is conditional (mandatory = false), so it is skipped"),
        ),
        d => (d, reason),
    };
    Decision {
        decision,
        reason,
        failed,
        critical_failed,
        complete,
        degraded,
        failure_ratio,
        needs_decision,
        thresholds: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(spec: &[(&str, ItemState, Criticality)]) -> Vec<ItemEntry> {
        spec.iter()
            .map(|(id, s, c)| ItemEntry {
                id: id.to_string(),
                agent: id.to_string(),
                criticality: Some(*c),
                state: Some(*s),
                ..ItemEntry::default()
            })
            .collect()
    }

    use Criticality::{Critical as C, Optional as O};
    use ItemState::{Complete as Ok_, Failed as F};

    #[test]
    fn the_half_rule_on_both_sides_of_the_line() {
        let two_of_four = items(&[("a", F, O), ("b", F, O), ("c", Ok_, C), ("d", Ok_, C)]);
        let d = decide(&two_of_four, 0.5, true);
        assert_eq!(d.decision, Verdict::ProceedDegraded, "{d:?}");
        let three_of_four = items(&[("a", F, O), ("b", F, O), ("c", F, O), ("d", Ok_, C)]);
        let d = decide(&three_of_four, 0.5, true);
        assert_eq!(d.decision, Verdict::Stop);
        assert!(
            d.reason.starts_with("3 of 4 items failed (75%)"),
            "{}",
            d.reason
        );
    }

    #[test]
    fn a_critical_failure_stops_and_a_conditional_phase_is_skipped() {
        let v = items(&[("a", F, C), ("b", Ok_, O), ("c", Ok_, O)]);
        assert_eq!(decide(&v, 0.5, true).decision, Verdict::Stop);
        assert_eq!(decide(&v, 0.5, false).decision, Verdict::Skip);
        let all = items(&[("a", Ok_, C)]);
        assert_eq!(decide(&all, 0.5, true).decision, Verdict::Proceed);
        let paused = items(&[("a", Ok_, C), ("b", ItemState::Partial, C)]);
        assert_eq!(decide(&paused, 0.5, true).decision, Verdict::Paused);
        // Skipped by a person's decision: the phase goes on, but it is not complete.
        let skipped = items(&[("a", Ok_, C), ("b", ItemState::Skipped, C)]);
        let d = decide(&skipped, 0.5, true);
        assert_eq!(d.decision, Verdict::ProceedDegraded);
        assert_eq!(d.reason, "going on without b, skipped by a decision");
    }

    fn manifest(items: Vec<ItemEntry>) -> Manifest {
        let plan = plan::PhasePlan {
            name: None,
            concurrency: None,
            timeout: None,
            retry: true,
            mandatory: false,
            abort_ratio: None,
            defaults: Default::default(),
            items: Vec::new(),
        };
        let mut m = Manifest::new("w", "3", plan, |_| (C, false), "t");
        m.items = items;
        m
    }

    #[test]
    fn resume_holds_side_effecting_items_that_may_have_run_and_nothing_else() {
        use ItemState::*;
        let mut v = items(&[
            ("was-running", Running, C),
            ("interrupted", Partial, C),
            ("failed", F, C),
            ("breaker-was-open", F, C),
            ("never-started", NotStarted, C),
            ("done", Ok_, C),
            ("no-side-effects", Partial, C),
            ("allowed", NeedsDecision, C),
        ]);
        v[3].outcome = Some("breaker_open".into());
        v[2].outcome = Some("failed".into());
        v[7].rerun = Some("`phase resume --rerun` at t".into());
        for e in v.iter_mut().filter(|e| e.id != "no-side-effects") {
            e.side_effects = true;
        }
        let mut m = manifest(v);
        let held = m.hold(false);
        assert_eq!(held, ["was-running", "interrupted", "failed"]);
        let st: Vec<&str> = m.items.iter().map(|e| e.state().as_str()).collect();
        assert_eq!(
            st,
            [
                "needs_decision",
                "needs_decision",
                "needs_decision",
                "failed",
                "not_started",
                "complete",
                "partial",
                "partial"
            ]
        );
        let note = m.items[1].note.clone().unwrap_or_default();
        assert!(
            note.starts_with("it was interrupted; it has side effects")
                && note.contains("triage phase resume --workflow w --phase 3 --rerun interrupted"),
            "{note}"
        );
        // Held again by the next resume, with the same note; the leave is still there to use.
        assert_eq!(m.hold(false), ["was-running", "interrupted", "failed"]);
        assert_eq!(m.items[1].note.as_deref(), Some(note.as_str()));
        assert!(m.items[7].rerun.is_some());
        // From a .bak, a side-effecting item filed as not started may have started.
        assert_eq!(m.hold(true).len(), 4);
        assert_eq!(m.items[4].state(), NeedsDecision);
        let line = m.decision_line().unwrap_or_default();
        assert!(
            line.contains(
                "--rerun was-running --rerun interrupted --rerun failed --rerun never-started"
            ),
            "{line}"
        );
    }

    #[test]
    fn items_waiting_for_a_decision_stop_the_phase_even_a_conditional_one() {
        use ItemState::NeedsDecision as N;
        let v = items(&[("a", Ok_, C), ("b", N, O)]);
        let d = decide(&v, 0.5, false);
        assert_eq!(d.decision, Verdict::Stop);
        assert_eq!(d.needs_decision, ["b"]);
        assert!(
            d.reason
                .starts_with("item b has side effects and may have run in part"),
            "{}",
            d.reason
        );
        let v = items(&[("a", F, C), ("b", N, O), ("c", N, O)]);
        let d = decide(&v, 0.9, true);
        assert!(d.reason.contains("items b, c have"), "{}", d.reason);
        assert!(
            d.reason.contains("; besides, critical item failed: a"),
            "{}",
            d.reason
        );
        // An interrupted resume is still paused: resume comes first.
        let v = items(&[("a", ItemState::Partial, C), ("b", N, O)]);
        assert_eq!(decide(&v, 0.5, true).decision, Verdict::Paused);
    }

    #[test]
    fn the_resume_line_quotes_what_a_shell_would_split() {
        let plan = plan::PhasePlan {
            name: None,
            concurrency: None,
            timeout: None,
            retry: true,
            mandatory: true,
            abort_ratio: None,
            defaults: Default::default(),
            items: Vec::new(),
        };
        let m = Manifest::new("my flow", "2", plan, |_| (C, false), "t");
        assert_eq!(
            m.resume_line(),
            "Workflow paused. Resume with: triage phase resume --workflow 'my flow' --phase 2"
        );
    }
}
