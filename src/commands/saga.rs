//! `triage saga`: record a workflow's completed steps with the commands that undo them, and
//! undo them in reverse (seed 002 "Compensation Matrix (Saga Pattern)").
//!
//! The saga lives under the `saga` key of the workflow's state document, written with
//! `state-write`'s protocol (lock, temp file, fsync, `.bak`, rename). Each compensation is
//! checkpointed as started before it runs and as succeeded or failed after, so a compensate
//! run cut off by a crash resumes: what succeeded is skipped, what was cut off runs again
//! (compensations must therefore be safe to repeat). The state document is unlocked while a
//! compensation runs, so the command may update it with `triage state-write` itself; a second
//! `compensate` of the same saga is kept out by a lock of its own (`FILE.saga.lock`).

use crate::context::{Answer, Context};
use crate::core::saga::{Saga, SagaStatus};
use crate::core::state::Validation;
use crate::exec::child::Interrupts;
use crate::exec::compensation::{self, inherit, Limits};
use crate::exit::Failure;
use crate::store::files;
use crate::store::recovery::{checkpoint_dir, recover};
use crate::store::sagas::{self, not_begun, put, saga_of, update};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Arguments of `triage saga`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage saga begin review-42\n  \
    triage saga step review-42 outline --stage 3 --compensate 'rm -f outline.md'\n  \
    triage saga compensate review-42 --to reviews --reason 'user rejected the outline twice'\n  \
    triage saga compensate review-42 --reason 'user abort'\n  \
    triage saga status review-42 --text\n\n\
Exit status: as every subcommand; with -e, 1 when a compensation failed (run compensate again to retry it).")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The saga actions.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Begin the saga of a workflow
    Begin(Target),
    /// Record a completed forward step and the command that undoes it
    Step(StepArgs),
    /// Run the recorded compensations newest first (all, or back to a step with --to);
    /// resumes a run that was cut off
    Compensate(CompensateArgs),
    /// Show the steps and their compensations
    Status(Target),
}

/// The workflow and its state file.
#[derive(clap::Args, Debug)]
pub struct Target {
    /// The workflow's id
    pub workflow: String,
    /// The workflow's state file [default: <dir>/sagas/WORKFLOW.json]
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
}

/// Arguments of `triage saga step`.
#[derive(clap::Args, Debug)]
pub struct StepArgs {
    #[command(flatten)]
    target: Target,
    /// The step's name, unique in the saga
    pub name: String,
    /// The shell command that undoes the step (run with `sh -c`; must be safe to repeat)
    #[arg(long, value_name = "COMMAND")]
    pub compensate: Option<String>,
    /// The workflow's stage (number or name), for the compensation record
    #[arg(long, value_name = "STAGE")]
    pub stage: Option<String>,
}

/// Arguments of `triage saga compensate`.
#[derive(clap::Args, Debug)]
pub struct CompensateArgs {
    #[command(flatten)]
    target: Target,
    /// Why the workflow is rolled back
    #[arg(long, value_name = "REASON", default_value = "compensation requested")]
    pub reason: String,
    /// Undo only the steps recorded after STEP (newest first); STEP and those before it stay,
    /// and the saga stays open to take new steps (the undone ones may be done again)
    #[arg(long, value_name = "STEP")]
    pub to: Option<String>,
    /// Stop one compensation after this long, as `triage run` does (SIGTERM to its process
    /// group, SIGKILL after --kill-after); 0 for no limit [default: the policy's
    /// saga.compensation_timeout, 10m]
    #[arg(long, value_name = "DUR")]
    pub timeout: Option<crate::core::duration::Dur>,
    /// SIGKILL this long after the timeout's SIGTERM
    #[arg(long, value_name = "DUR", default_value = "10s")]
    pub kill_after: crate::core::duration::Dur,
}

/// Runs `triage saga`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    match &args.action {
        Action::Begin(t) => begin(t, cx),
        Action::Step(a) => step(a, cx),
        Action::Compensate(a) => compensate(a, cx),
        Action::Status(t) => status(t, cx),
    }
}

impl Target {
    fn file(&self, cx: &Context) -> Result<PathBuf, Failure> {
        sagas::state_file(&cx.ground(), &self.workflow, self.state.as_deref())
    }
}

fn begin(t: &Target, cx: &Context) -> Result<Answer, Failure> {
    let file = t.file(cx)?;
    let saga = update(&file, &cx.ground(), |doc| {
        let mut doc = doc.unwrap_or_else(|| json!({"workflow_id": t.workflow}));
        if let Some(existing) = saga_of(&doc, &t.workflow, &file)? {
            if existing.status == SagaStatus::Open && existing.steps.is_empty() {
                return Ok((doc, existing));
            }
            return Err(Failure::data(format!(
                "saga `{}` already began in {} and is {} with {} step(s); see `triage saga status {}`, or begin another workflow id",
                t.workflow,
                file.display(),
                crate::core::saga::status_word(existing.status),
                existing.steps.len(),
                t.workflow
            )));
        }
        let saga = Saga::begin(&t.workflow, cx.now);
        put(&mut doc, &saga)?;
        Ok((doc, saga))
    })?;
    answer(cx, &file, &saga, json!({}), false)
}

fn step(a: &StepArgs, cx: &Context) -> Result<Answer, Failure> {
    let t = &a.target;
    let file = t.file(cx)?;
    let saga = update(&file, &cx.ground(), |doc| {
        let mut doc = doc.ok_or_else(|| not_begun(&t.workflow, &file))?;
        let mut saga =
            saga_of(&doc, &t.workflow, &file)?.ok_or_else(|| not_begun(&t.workflow, &file))?;
        saga.add_step(&a.name, a.stage.as_deref(), a.compensate.as_deref(), cx.now)
            .map_err(Failure::data)?;
        put(&mut doc, &saga)?;
        Ok((doc, saga))
    })?;
    answer(cx, &file, &saga, json!({"step": a.name}), false)
}

fn compensate(a: &CompensateArgs, cx: &Context) -> Result<Answer, Failure> {
    let t = &a.target;
    let file = t.file(cx)?;
    let run_lock =
        files::lock(&files::with_suffix(&file, ".saga"), cx.lock_wait()).map_err(|e| {
            let mut f = Failure::from(e);
            f.message = format!(
                "{}; is another `triage saga compensate {}` running, or a compensation it started?",
                f.message, t.workflow
            );
            f
        })?;
    // The compensations inherit the lock: one whose triage was killed still holds it, so a
    // second compensate cannot start the same step while the first copy runs.
    inherit(&run_lock)?;
    let limits = Limits {
        timeout: match a.timeout {
            Some(d) => d.0,
            None => cx.policy()?.saga.compensation_timeout.0,
        },
        kill_after: a.kill_after.0,
        interrupts: Interrupts::install()
            .map_err(|e| Failure::io(format!("cannot catch SIGINT/SIGTERM: {e}")))?,
    };
    let c = compensation::compensate(
        &cx.ground(),
        &file,
        &t.workflow,
        &a.reason,
        a.to.as_deref(),
        &limits,
    )?;
    let extra = json!({
        "to": a.to,
        "resumed": c.resumed,
        "compensated": c.done,
        "already_compensated": c.already,
        "failed": c.failed,
    });
    answer(cx, &file, &c.saga, extra, !c.failed.is_empty())
}

fn status(t: &Target, cx: &Context) -> Result<Answer, Failure> {
    let file = t.file(cx)?;
    let rules = Validation::shape_only(false);
    let found = recover(&file, &rules, &checkpoint_dir(&file, None), None)?;
    let doc = found.data.ok_or_else(|| not_begun(&t.workflow, &file))?;
    let saga = saga_of(&doc, &t.workflow, &file)?.ok_or_else(|| not_begun(&t.workflow, &file))?;
    if cx.global.text {
        return Ok(Answer::text(saga.to_text()));
    }
    let history = doc
        .get("compensation_history")
        .cloned()
        .unwrap_or(json!([]));
    Ok(Answer::json(&json!({
        "state": file,
        "saga": saga,
        "compensation_history": history,
    })))
}

fn answer(
    cx: &Context,
    file: &Path,
    saga: &Saga,
    extra: Value,
    negative: bool,
) -> Result<Answer, Failure> {
    if cx.global.text {
        return Ok(Answer::text(saga.to_text()).negative(negative));
    }
    let mut out = json!({
        "workflow_id": saga.workflow_id,
        "state": file,
        "status": saga.status,
        "steps": saga.steps.len(),
    });
    if let (Some(o), Value::Object(e)) = (out.as_object_mut(), extra) {
        if saga.compensation_began() {
            o.insert("reason".into(), json!(saga.reason));
            o.insert("state_archived".into(), json!(saga.state_archived));
        }
        o.extend(e);
    }
    Ok(Answer::json(&out).negative(negative))
}
