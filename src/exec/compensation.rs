//! `triage saga compensate`: the recorded compensations run newest first, the way `triage run`
//! runs an attempt (a process group of its own, the timeout, signals forwarded), each
//! checkpointed in the saga before and after it runs ([`crate::store::sagas`]).

use crate::core::attempt_plan::End;
use crate::core::saga::{CompensationStatus, Ended, Saga, SagaStatus};
use crate::exec::child::{self, Interrupts, Spec};
use crate::exit::Failure;
use crate::store::files;
use crate::store::ground::Ground;
use crate::store::sagas::{archive, checkpoint, not_begun, push_record, put, saga_of, update};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::Path;

/// What a compensate run did.
pub struct Compensation {
    /// The saga afterwards.
    pub saga: Saga,
    /// Whether an earlier run had begun compensating (this one resumed it).
    pub resumed: bool,
    /// The steps compensated by this run.
    pub done: Vec<String>,
    /// The steps compensated before it.
    pub already: Vec<String>,
    /// The compensations that failed: `{step, detail, exit_status}`.
    pub failed: Vec<Value>,
}

/// Runs the recorded compensations of `workflow`'s saga in `file`, newest first, each
/// checkpointed as started before it runs and as succeeded or failed after, so a run cut off
/// by a crash resumes where it stopped. The caller holds the saga's own lock.
pub fn compensate(
    g: &Ground,
    file: &Path,
    workflow: &str,
    reason: &str,
    to: Option<&str>,
    limits: &Limits,
) -> Result<Compensation, Failure> {
    let (mut saga, resumed) = update(file, g, |doc| {
        let mut doc = doc.ok_or_else(|| not_begun(workflow, file))?;
        let mut saga = saga_of(&doc, workflow, file)?.ok_or_else(|| not_begun(workflow, file))?;
        let resumed = saga.compensation_began();
        if saga.status != SagaStatus::Compensated {
            let mut trial = saga.clone();
            trial
                .start_compensation(reason, None, to)
                .map_err(Failure::data)?;
            if to.is_some() && trial.plan().is_empty() && !resumed {
                // Nothing after the step to undo: the saga stays as it is, unarchived.
                return Ok((doc, (saga, resumed)));
            }
            let archived = match &saga.state_archived {
                Some(_) => None,
                None => Some(archive(file, &doc, g)?.display().to_string()),
            };
            saga.start_compensation(reason, archived, to)
                .map_err(Failure::data)?;
            put(&mut doc, &saga)?;
        }
        Ok((doc, (saga, resumed)))
    })?;
    let already: Vec<String> = saga
        .steps
        .iter()
        .filter(|s| s.compensation.status == CompensationStatus::Succeeded)
        .map(|s| s.name.clone())
        .collect();
    let notified = std::io::stderr().is_terminal();
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    // An open saga here had nothing after `to` to undo.
    let plan = if saga.compensation_began() {
        saga.plan()
    } else {
        Vec::new()
    };
    for i in plan {
        let Some(s) = saga.steps.get(i).cloned() else {
            continue;
        };
        say!(
            "triage saga: rolling back step {}{}. Reason: {}",
            s.name,
            s.stage
                .as_deref()
                .map(|g| format!(" (stage {g})"))
                .unwrap_or_default(),
            saga.reason.as_deref().unwrap_or(reason)
        );
        // Each checkpoint at the time it is made: a long compensation run's records carry
        // their own times.
        checkpoint(file, g, workflow, |saga, _| {
            saga.mark_started(i, g.clock());
            Ok(())
        })?;
        let Compensated { ended, interrupted } = run_compensation(
            s.compensate.as_deref().unwrap_or("true"),
            workflow,
            &s.name,
            limits,
        );
        saga = checkpoint(file, g, workflow, |saga, doc| {
            if let Some(rec) = saga.mark_finished(i, &ended, notified, g.clock()) {
                push_record(doc, &rec);
            }
            Ok(())
        })?;
        match &ended.failure {
            None => done.push(s.name.clone()),
            Some(why) => {
                g.warn(&format!("compensation of step `{}` {why}", s.name));
                failed
                    .push(json!({"step": s.name, "detail": why, "exit_status": ended.exit_status}));
            }
        }
        if interrupted {
            // The rest stays to do: the next compensate resumes there.
            break;
        }
    }
    if saga.compensation_began() {
        saga = checkpoint(file, g, workflow, |saga, _| {
            saga.finish();
            Ok(())
        })?;
    }
    Ok(Compensation {
        saga,
        resumed,
        done,
        already,
        failed,
    })
}

/// How long a compensation may run, and the signals to forward to it.
pub struct Limits {
    /// Stop one compensation after this long (zero: no limit).
    pub timeout: std::time::Duration,
    /// SIGKILL this long after the timeout's SIGTERM.
    pub kill_after: std::time::Duration,
    /// The signals to forward.
    pub interrupts: Interrupts,
}

/// Lets child processes inherit the lock's descriptor (it is close-on-exec by default).
pub fn inherit(lock: &files::Lock) -> Result<(), Failure> {
    use std::os::fd::AsFd;
    rustix::io::fcntl_setfd(lock.as_fd(), rustix::io::FdFlags::empty()).map_err(|e| {
        Failure::io(format!(
            "cannot hand the saga's lock to its compensations: {e}"
        ))
    })
}

/// One compensation's end, as the saga records it, and whether we were interrupted.
struct Compensated {
    ended: Ended,
    interrupted: bool,
}

/// Runs one compensation with `sh -c` the way `triage run` runs an attempt: in a process
/// group of its own, SIGTERM to the group at the timeout and SIGKILL after `kill_after`,
/// SIGINT/SIGTERM forwarded. No stdin; its stdout goes onto our stderr afterwards (stdout
/// carries the one JSON answer); told which workflow and step through the environment.
fn run_compensation(command: &str, workflow: &str, step: &str, limits: &Limits) -> Compensated {
    let argv = [OsString::from("sh"), "-c".into(), command.into()];
    let spec = Spec {
        command: &argv,
        stdin: None,
        timeout: (!limits.timeout.is_zero()).then_some(limits.timeout),
        kill_after: limits.kill_after,
        grace: limits.kill_after,
        env: vec![
            ("TRIAGE_SAGA_WORKFLOW".into(), workflow.to_string()),
            ("TRIAGE_SAGA_STEP".into(), step.to_string()),
        ],
        ..Spec::default()
    };
    let ended = |exit_status, failure: Option<String>| Ended {
        exit_status,
        failure,
    };
    let attempt = match child::run(&spec, &limits.interrupts) {
        Ok(a) => a,
        Err(e) => {
            return Compensated {
                ended: ended(None, Some(format!("could not be started: {e}"))),
                interrupted: false,
            }
        }
    };
    let mut out = attempt.stdout;
    let _ = std::io::copy(&mut out, &mut std::io::stderr());
    let dur = crate::core::duration::Dur(limits.timeout);
    let (ended, interrupted) = match attempt.end {
        End::Exited(0) => (ended(Some(0), None), false),
        End::Exited(c) => (
            ended(Some(c), Some(format!("exited with status {c}"))),
            false,
        ),
        End::Signaled(sig) => (
            ended(None, Some(format!("was killed by signal {sig}"))),
            false,
        ),
        End::TimedOut { killed } => (
            ended(
                None,
                Some(if killed {
                    format!("timed out after {dur} and was killed (it ignored SIGTERM)")
                } else {
                    format!("timed out after {dur} and was stopped with SIGTERM")
                }),
            ),
            false,
        ),
        End::Idle { .. } => (ended(None, Some(attempt.end.describe())), false),
        End::Interrupted(sig) => (
            ended(None, Some(format!("was interrupted (signal {sig})"))),
            true,
        ),
        End::CannotRun { detail, .. } => (
            ended(None, Some(format!("could not be started: {detail}"))),
            false,
        ),
    };
    Compensated { ended, interrupted }
}
