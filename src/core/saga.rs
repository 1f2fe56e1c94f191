//! The saga of one workflow (seed 002 "Compensation Matrix (Saga Pattern)"): forward steps as
//! they complete, each with the command that undoes it, and the compensation of those steps
//! in reverse order, each checkpointed as started / succeeded / failed so that a run cut off
//! by a crash resumes where it stopped.
//!
//! Pure: handed `now`, never touches a file or a process. `commands::saga` persists it under
//! the `saga` key of the workflow's state document and runs the commands.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// Where a saga is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SagaStatus {
    /// Steps are being recorded.
    Open,
    /// Compensation began and has not finished (or was cut off).
    Compensating,
    /// Every compensation succeeded.
    Compensated,
    /// Compensation ran and at least one compensation failed; running it again retries those.
    CompensationFailed,
}

/// Where one step's compensation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompensationStatus {
    /// Not run yet.
    Pending,
    /// Started and not known to have finished: a crash cut it off, so it runs again.
    Started,
    /// Finished with status 0: never run again.
    Succeeded,
    /// Finished otherwise: run again by the next `compensate`.
    Failed,
    /// The step has nothing to undo.
    None,
}

/// One step's compensation, as checkpointed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compensation {
    /// Where it is.
    pub status: CompensationStatus,
    /// How many times it was started.
    #[serde(default)]
    pub attempts: u32,
    /// When the last attempt started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When the last attempt finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// The last attempt's exit status, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    /// Why the last attempt failed, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A completed forward step and how to undo it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// The step's name, unique in its saga.
    pub name: String,
    /// The seed's stage number or name, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The shell command that undoes it, if anything needs undoing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensate: Option<String>,
    /// When it was recorded as complete.
    pub completed_at: String,
    /// Its compensation.
    pub compensation: Compensation,
}

/// A saga: the steps of one workflow, in the order they completed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saga {
    /// The workflow it belongs to.
    pub workflow_id: String,
    /// Where it is.
    pub status: SagaStatus,
    /// When it began.
    pub began_at: String,
    /// Why compensation was started, once it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The copy of the state taken before compensation started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_archived: Option<String>,
    /// The step a partial compensation undoes back to (kept; the steps after it are undone),
    /// while one is under way; none for a whole compensation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensate_to: Option<String>,
    /// The steps, oldest first.
    pub steps: Vec<Step>,
    /// Partial rollbacks that finished, oldest first: their steps left the saga, which stayed
    /// open to continue.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rollbacks: Vec<Rollback>,
}

/// A finished partial rollback (`saga compensate --to STEP`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollback {
    /// The step it undid back to; that step and those before it stayed.
    pub to: String,
    /// Why it was rolled back.
    pub reason: String,
    /// The copy of the state taken before it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_archived: Option<String>,
    /// The steps it undid, oldest first, with their compensations.
    pub steps: Vec<Step>,
}

/// Seed 002's `compensation_record`, one per compensation run, plus what happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompensationRecord {
    /// When it finished.
    pub timestamp: String,
    /// The step's stage, else its name.
    pub stage: String,
    /// The step.
    pub step: String,
    /// Why compensation was started.
    pub reason: String,
    /// The command that was run, and how it ended.
    pub action_taken: String,
    /// `succeeded` or `failed`.
    pub outcome: CompensationStatus,
    /// The copy of the state taken before compensation started.
    pub state_archived: Option<String>,
    /// Whether a person saw the notice (stderr was a terminal).
    pub user_notified: bool,
}

/// How one compensation command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    /// Its exit status, if it exited.
    pub exit_status: Option<i32>,
    /// Why it did not succeed, if it did not.
    pub failure: Option<String>,
}

/// An RFC 3339 timestamp with milliseconds.
pub fn stamp(now: DateTime<Utc>) -> String {
    now.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl Saga {
    /// A new saga with no steps.
    pub fn begin(workflow_id: &str, now: DateTime<Utc>) -> Saga {
        Saga {
            workflow_id: workflow_id.to_string(),
            status: SagaStatus::Open,
            began_at: stamp(now),
            reason: None,
            state_archived: None,
            compensate_to: None,
            steps: Vec::new(),
            rollbacks: Vec::new(),
        }
    }

    /// Records a completed forward step.
    pub fn add_step(
        &mut self,
        name: &str,
        stage: Option<&str>,
        compensate: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<(), String> {
        if self.status != SagaStatus::Open {
            return Err(format!(
                "saga `{}` is {}, so it takes no more steps; begin a new saga under another name",
                self.workflow_id,
                status_word(self.status)
            ));
        }
        if name.trim().is_empty() {
            return Err("the step name is empty; name the step".into());
        }
        if self.steps.iter().any(|s| s.name == name) {
            return Err(format!(
                "saga `{}` already has a step `{name}`; give each step its own name",
                self.workflow_id
            ));
        }
        let compensate = compensate.filter(|c| !c.trim().is_empty());
        self.steps.push(Step {
            name: name.to_string(),
            stage: stage.map(str::to_string),
            compensate: compensate.map(str::to_string),
            completed_at: stamp(now),
            compensation: Compensation {
                status: if compensate.is_some() {
                    CompensationStatus::Pending
                } else {
                    CompensationStatus::None
                },
                attempts: 0,
                started_at: None,
                finished_at: None,
                exit_status: None,
                detail: None,
            },
        });
        Ok(())
    }

    /// Whether compensation already began (this run resumes it).
    pub fn compensation_began(&self) -> bool {
        self.status != SagaStatus::Open
    }

    /// Starts (or resumes) compensation: of every step (`to` none), or of the steps after
    /// step `to` only, which leaves the saga open to continue once they are undone (seed
    /// 002's "Delete outline, return to Stage 2"). The first reason and archive are kept on
    /// resume. Refused when `to` names no step, or when a compensation under way already
    /// undid a step that `to` would keep.
    pub fn start_compensation(
        &mut self,
        reason: &str,
        archived: Option<String>,
        to: Option<&str>,
    ) -> Result<(), String> {
        let keep = match to {
            None => 0,
            Some(name) => {
                let Some(k) = self.steps.iter().position(|s| s.name == name) else {
                    let names: Vec<&str> = self.steps.iter().map(|s| s.name.as_str()).collect();
                    return Err(format!(
                        "saga `{}` has no step `{name}` to roll back to; its steps are: {}",
                        self.workflow_id,
                        if names.is_empty() {
                            "none yet".to_string()
                        } else {
                            names.join(", ")
                        }
                    ));
                };
                k + 1
            }
        };
        if let Some(kept) = self.steps[..keep].iter().find(|s| {
            s.compensation.status != CompensationStatus::Pending
                && s.compensation.status != CompensationStatus::None
        }) {
            return Err(format!(
                "step `{}` of saga `{}` is already being compensated, so it cannot be kept; run `triage saga compensate {}` without --to to finish rolling back, or --to an earlier step",
                kept.name, self.workflow_id, self.workflow_id
            ));
        }
        self.status = SagaStatus::Compensating;
        self.compensate_to = to.map(str::to_string);
        if self.reason.is_none() {
            self.reason = Some(reason.to_string());
        }
        if self.state_archived.is_none() {
            self.state_archived = archived;
        }
        Ok(())
    }

    /// How many steps, oldest first, this compensation keeps.
    fn kept(&self) -> usize {
        self.compensate_to
            .as_ref()
            .and_then(|to| self.steps.iter().position(|s| &s.name == to))
            .map_or(0, |k| k + 1)
    }

    /// The steps to compensate in this run, newest first (LIFO): those after the step a partial
    /// compensation keeps, but not those that succeeded or have nothing to undo.
    pub fn plan(&self) -> Vec<usize> {
        (self.kept()..self.steps.len())
            .rev()
            .filter(|&i| {
                !matches!(
                    self.steps[i].compensation.status,
                    CompensationStatus::Succeeded | CompensationStatus::None
                )
            })
            .collect()
    }

    /// Checkpoints that step `i`'s compensation started.
    pub fn mark_started(&mut self, i: usize, now: DateTime<Utc>) {
        if let Some(step) = self.steps.get_mut(i) {
            let c = &mut step.compensation;
            c.status = CompensationStatus::Started;
            c.attempts += 1;
            c.started_at = Some(stamp(now));
            c.finished_at = None;
            c.exit_status = None;
            c.detail = None;
        }
    }

    /// Checkpoints how step `i`'s compensation ended, and returns its record.
    pub fn mark_finished(
        &mut self,
        i: usize,
        ended: &Ended,
        user_notified: bool,
        now: DateTime<Utc>,
    ) -> Option<CompensationRecord> {
        let reason = self.reason.clone().unwrap_or_default();
        let archived = self.state_archived.clone();
        let step = self.steps.get_mut(i)?;
        let c = &mut step.compensation;
        c.status = match ended.failure {
            None => CompensationStatus::Succeeded,
            Some(_) => CompensationStatus::Failed,
        };
        c.finished_at = Some(stamp(now));
        c.exit_status = ended.exit_status;
        c.detail = ended.failure.clone();
        let how = match &ended.failure {
            None => "succeeded".to_string(),
            Some(why) => format!("failed: {why}"),
        };
        Some(CompensationRecord {
            timestamp: stamp(now),
            stage: step.stage.clone().unwrap_or_else(|| step.name.clone()),
            step: step.name.clone(),
            reason,
            action_taken: format!("ran `{}` ({how})", step.compensate.as_deref().unwrap_or("")),
            outcome: c.status,
            state_archived: archived,
            user_notified,
        })
    }

    /// Ends a compensation run: compensated when every step is undone, else failed. A partial
    /// compensation that undid all it meant to moves those steps into `rollbacks` and leaves
    /// the saga open, ready for new steps (a compensated step may be done again by name).
    pub fn finish(&mut self) {
        if !self.plan().is_empty() {
            self.status = SagaStatus::CompensationFailed;
            return;
        }
        let Some(to) = self.compensate_to.take() else {
            self.status = SagaStatus::Compensated;
            return;
        };
        let keep = self
            .steps
            .iter()
            .position(|s| s.name == to)
            .map_or(0, |k| k + 1);
        let undone = self.steps.split_off(keep);
        self.rollbacks.push(Rollback {
            to,
            reason: self.reason.take().unwrap_or_default(),
            state_archived: self.state_archived.take(),
            steps: undone,
        });
        self.status = SagaStatus::Open;
    }

    /// A table for people.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "saga {}: {} (began {})\n",
            self.workflow_id,
            status_word(self.status),
            self.began_at
        );
        if let Some(r) = &self.reason {
            out.push_str(&format!("reason: {r}\n"));
        }
        if let Some(a) = &self.state_archived {
            out.push_str(&format!("state archived as {a}\n"));
        }
        let width = self
            .steps
            .iter()
            .map(|s| s.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        out.push_str(&format!(
            "{:<width$}  {:<12}  {:>8}  compensate\n",
            "step", "compensation", "attempts"
        ));
        for s in &self.steps {
            out.push_str(&format!(
                "{:<width$}  {:<12}  {:>8}  {}\n",
                s.name,
                comp_word(s.compensation.status),
                s.compensation.attempts,
                s.compensate.as_deref().unwrap_or("-")
            ));
        }
        if let Some(to) = &self.compensate_to {
            out.push_str(&format!("rolling back to step {to}\n"));
        }
        for r in &self.rollbacks {
            let names: Vec<&str> = r.steps.iter().map(|s| s.name.as_str()).collect();
            out.push_str(&format!(
                "rolled back to {}: undid {} ({})\n",
                r.to,
                names.join(", "),
                r.reason
            ));
        }
        out
    }
}

/// The wire word of a saga status.
pub fn status_word(s: SagaStatus) -> &'static str {
    match s {
        SagaStatus::Open => "open",
        SagaStatus::Compensating => "compensating",
        SagaStatus::Compensated => "compensated",
        SagaStatus::CompensationFailed => "compensation_failed",
    }
}

fn comp_word(s: CompensationStatus) -> &'static str {
    match s {
        CompensationStatus::Pending => "pending",
        CompensationStatus::Started => "started",
        CompensationStatus::Succeeded => "succeeded",
        CompensationStatus::Failed => "failed",
        CompensationStatus::None => "none",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0)
            .single()
            .unwrap_or_default()
    }

    fn three() -> Saga {
        let mut s = Saga::begin("w1", t(0));
        s.add_step("scope", Some("1"), Some("rm scope.md"), t(1))
            .unwrap();
        s.add_step("reviews", Some("2"), None, t(2)).unwrap();
        s.add_step("outline", Some("3"), Some("rm outline.md"), t(3))
            .unwrap();
        s
    }

    const OK: Ended = Ended {
        exit_status: Some(0),
        failure: None,
    };

    #[test]
    fn plan_is_newest_first_and_skips_steps_with_nothing_to_undo() {
        assert_eq!(three().plan(), vec![2, 0]);
    }

    #[test]
    fn duplicate_or_late_steps_are_refused() {
        let mut s = three();
        assert!(s
            .add_step("scope", None, None, t(4))
            .unwrap_err()
            .contains("already"));
        s.start_compensation("user abort", None, None).unwrap();
        assert!(s
            .add_step("x", None, None, t(4))
            .unwrap_err()
            .contains("compensating"));
    }

    #[test]
    fn succeeded_compensations_leave_the_plan_and_started_ones_stay() {
        let mut s = three();
        s.start_compensation("user abort", Some("a.json".into()), None)
            .unwrap();
        s.mark_started(2, t(5));
        let rec = s.mark_finished(2, &OK, false, t(6)).unwrap();
        assert_eq!(rec.stage, "3");
        assert_eq!(rec.outcome, CompensationStatus::Succeeded);
        assert_eq!(rec.state_archived.as_deref(), Some("a.json"));
        s.mark_started(0, t(7));
        // Cut off here: the started one is planned again, the succeeded one is not.
        assert_eq!(s.plan(), vec![0]);
        assert_eq!(s.status, SagaStatus::Compensating);
    }

    #[test]
    fn a_failure_leaves_the_saga_failed_and_retries_only_it() {
        let mut s = three();
        s.start_compensation("r1", None, None).unwrap();
        for i in s.plan() {
            s.mark_started(i, t(5));
            let ended = if i == 0 {
                Ended {
                    exit_status: Some(3),
                    failure: Some("exit status 3".into()),
                }
            } else {
                OK
            };
            s.mark_finished(i, &ended, false, t(6));
        }
        s.finish();
        assert_eq!(s.status, SagaStatus::CompensationFailed);
        assert_eq!(s.plan(), vec![0]);
        s.start_compensation("r2", Some("b".into()), None).unwrap();
        assert_eq!(s.reason.as_deref(), Some("r1"), "the first reason is kept");
        s.mark_started(0, t(7));
        s.mark_finished(0, &OK, false, t(8));
        s.finish();
        assert_eq!(s.status, SagaStatus::Compensated);
        assert_eq!(s.steps[0].compensation.attempts, 2);
    }

    /// Seed 002, Compensation Matrix, stage 3: "Delete outline, return to Stage 2".
    #[test]
    fn a_partial_compensation_undoes_the_later_steps_and_leaves_the_saga_open() {
        let mut s = three();
        s.start_compensation("user rejected the outline twice", None, Some("reviews"))
            .unwrap();
        assert_eq!(s.plan(), vec![2]);
        s.mark_started(2, t(5));
        s.mark_finished(2, &OK, false, t(6));
        s.finish();
        assert_eq!(s.status, SagaStatus::Open);
        assert_eq!(s.steps.len(), 2);
        assert_eq!(s.rollbacks.len(), 1);
        assert_eq!(s.rollbacks[0].steps[0].name, "outline");
        assert!(s.reason.is_none() && s.compensate_to.is_none());
        s.add_step("outline", Some("3"), Some("rm outline.md"), t(7))
            .unwrap();
        assert_eq!(s.plan(), vec![2, 0]);
    }

    #[test]
    fn a_partial_compensation_names_a_step_and_keeps_none_already_undone() {
        let mut s = three();
        let e = s.start_compensation("r", None, Some("nope")).unwrap_err();
        assert!(
            e.contains("no step `nope`") && e.contains("scope, reviews, outline"),
            "{e}"
        );
        s.start_compensation("r", None, None).unwrap();
        s.mark_started(0, t(5));
        let e = s.start_compensation("r", None, Some("scope")).unwrap_err();
        assert!(e.contains("step `scope`"), "{e}");
    }

    #[test]
    fn round_trips_through_json() {
        let s = three();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["status"], "open");
        assert_eq!(v["steps"][1]["compensation"]["status"], "none");
        let back: Saga = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
        assert!(s.to_text().contains("outline"));
    }
}
