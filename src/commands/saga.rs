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

use crate::commands::state_read::{checkpoint_dir, recover};
use crate::context::{Context, Outcome};
use crate::core::attempt_plan::End;
use crate::core::saga::{CompensationRecord, Ended, Saga, SagaStatus};
use crate::core::state::Validation;
use crate::exec::child::{self, Interrupts, Spec};
use crate::exit::Failure;
use crate::store::files::{self, Backup};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Arguments of `triage saga`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage saga begin review-42\n  \
    triage saga step review-42 outline --stage 3 --compensate 'rm -f outline.md'\n  \
    triage saga compensate review-42 --reason 'user rejected the outline twice'\n  \
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
    /// Run the recorded compensations newest first; resumes a run that was cut off
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
pub fn run(args: &Args, cx: &Context) -> Result<Outcome, Failure> {
    match &args.action {
        Action::Begin(t) => begin(t, cx),
        Action::Step(a) => step(a, cx),
        Action::Compensate(a) => compensate(a, cx),
        Action::Status(t) => status(t, cx),
    }
}

impl Target {
    fn file(&self, cx: &Context) -> Result<PathBuf, Failure> {
        if self.workflow.trim().is_empty() {
            return Err(Failure::usage(
                "the workflow id is empty; name the workflow",
            ));
        }
        Ok(match &self.state {
            Some(f) => f.clone(),
            None => cx
                .state_root()
                .join("sagas")
                .join(format!("{}.json", files::escape_key(&self.workflow))),
        })
    }
}

fn begin(t: &Target, cx: &Context) -> Result<Outcome, Failure> {
    let file = t.file(cx)?;
    let saga = update(&file, cx, |doc| {
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

fn step(a: &StepArgs, cx: &Context) -> Result<Outcome, Failure> {
    let t = &a.target;
    let file = t.file(cx)?;
    let saga = update(&file, cx, |doc| {
        let mut doc = doc.ok_or_else(|| not_begun(t, &file))?;
        let mut saga = saga_of(&doc, &t.workflow, &file)?.ok_or_else(|| not_begun(t, &file))?;
        saga.add_step(&a.name, a.stage.as_deref(), a.compensate.as_deref(), cx.now)
            .map_err(Failure::data)?;
        put(&mut doc, &saga)?;
        Ok((doc, saga))
    })?;
    answer(cx, &file, &saga, json!({"step": a.name}), false)
}

fn compensate(a: &CompensateArgs, cx: &Context) -> Result<Outcome, Failure> {
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
    let (mut saga, resumed) = update(&file, cx, |doc| {
        let mut doc = doc.ok_or_else(|| not_begun(t, &file))?;
        let mut saga = saga_of(&doc, &t.workflow, &file)?.ok_or_else(|| not_begun(t, &file))?;
        let resumed = saga.compensation_began();
        if saga.status != SagaStatus::Compensated {
            let archived = match &saga.state_archived {
                Some(_) => None,
                None => Some(archive(&file, &doc, cx)?.display().to_string()),
            };
            saga.start_compensation(&a.reason, archived);
            put(&mut doc, &saga)?;
        }
        Ok((doc, (saga, resumed)))
    })?;
    let already: Vec<String> = saga
        .steps
        .iter()
        .filter(|s| s.compensation.status == crate::core::saga::CompensationStatus::Succeeded)
        .map(|s| s.name.clone())
        .collect();
    let notified = std::io::stderr().is_terminal();
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for i in saga.plan() {
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
            saga.reason.as_deref().unwrap_or(&a.reason)
        );
        checkpoint(&file, cx, t, |saga, _| {
            saga.mark_started(i, now(cx));
            Ok(())
        })?;
        let Compensated { ended, interrupted } = run_compensation(
            s.compensate.as_deref().unwrap_or("true"),
            t,
            &s.name,
            &limits,
        );
        saga = checkpoint(&file, cx, t, |saga, doc| {
            if let Some(rec) = saga.mark_finished(i, &ended, notified, now(cx)) {
                push_record(doc, &rec);
            }
            Ok(())
        })?;
        match &ended.failure {
            None => done.push(s.name.clone()),
            Some(why) => {
                cx.warn(&format!("compensation of step `{}` {why}", s.name));
                failed
                    .push(json!({"step": s.name, "detail": why, "exit_status": ended.exit_status}));
            }
        }
        if interrupted {
            // The rest stays to do: the next compensate resumes there.
            break;
        }
    }
    saga = checkpoint(&file, cx, t, |saga, _| {
        saga.finish();
        Ok(())
    })?;
    let extra = json!({
        "resumed": resumed,
        "compensated": done,
        "already_compensated": already,
        "failed": failed,
    });
    answer(cx, &file, &saga, extra, !failed.is_empty())
}

fn status(t: &Target, cx: &Context) -> Result<Outcome, Failure> {
    let file = t.file(cx)?;
    let rules = Validation::shape_only(false);
    let found = recover(&file, &rules, &checkpoint_dir(&file, None), None)?;
    let doc = found.data.ok_or_else(|| not_begun(t, &file))?;
    let saga = saga_of(&doc, &t.workflow, &file)?.ok_or_else(|| not_begun(t, &file))?;
    if cx.global.text {
        return Ok(Outcome::text(saga.to_text()));
    }
    let history = doc
        .get("compensation_history")
        .cloned()
        .unwrap_or(json!([]));
    Ok(Outcome::json(&json!({
        "state": file,
        "saga": saga,
        "compensation_history": history,
    })))
}

/// The time of a checkpoint: `TRIAGE_NOW` when set (tests), else the clock, so that records
/// of a long compensation run carry their own times.
fn now(cx: &Context) -> chrono::DateTime<chrono::Utc> {
    if cx.fixed_now {
        cx.now
    } else {
        chrono::Utc::now()
    }
}

fn not_begun(t: &Target, file: &Path) -> Failure {
    Failure::data(format!(
        "no saga `{}` in {}; begin it with `triage saga begin {}`",
        t.workflow,
        file.display(),
        t.workflow
    ))
}

/// The saga in `doc`, if any; one of another workflow is refused.
fn saga_of(doc: &Value, workflow: &str, file: &Path) -> Result<Option<Saga>, Failure> {
    let Some(v) = doc.get("saga") else {
        return Ok(None);
    };
    let saga: Saga = serde_json::from_value(v.clone()).map_err(|e| {
        Failure::data(format!(
            "the `saga` of {} is not a saga ({e}); repair the file or restore {}.bak",
            file.display(),
            file.display()
        ))
    })?;
    if saga.workflow_id != workflow {
        return Err(Failure::data(format!(
            "{} holds the saga of workflow `{}`, not `{workflow}`; name that workflow or another --state file",
            file.display(),
            saga.workflow_id
        )));
    }
    Ok(Some(saga))
}

fn put(doc: &mut Value, saga: &Saga) -> Result<(), Failure> {
    let obj = doc.as_object_mut().ok_or_else(|| {
        Failure::data("the workflow state is not a JSON object; a saga needs an object to live in")
    })?;
    let v = serde_json::to_value(saga)
        .map_err(|e| Failure::data(format!("cannot serialize the saga: {e}")))?;
    obj.insert("saga".into(), v);
    obj.entry("compensation_history").or_insert(json!([]));
    Ok(())
}

fn push_record(doc: &mut Value, rec: &CompensationRecord) {
    let Some(obj) = doc.as_object_mut() else {
        return;
    };
    let entry = obj.entry("compensation_history").or_insert(json!([]));
    if !entry.is_array() {
        *entry = json!([]);
    }
    if let (Some(list), Ok(v)) = (entry.as_array_mut(), serde_json::to_value(rec)) {
        list.push(v);
    }
}

/// Read-modify-write of the state document under its lock, with `state-write`'s protocol:
/// a corrupt primary is quarantined and the last good version (`.bak`, checkpoint) used.
fn update<T>(
    file: &Path,
    cx: &Context,
    f: impl FnOnce(Option<Value>) -> Result<(Value, T), Failure>,
) -> Result<T, Failure> {
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        files::ensure_dir(dir)?;
    }
    let _lock = files::lock(file, cx.lock_wait())?;
    let found = recover(
        file,
        &Validation::shape_only(false),
        &checkpoint_dir(file, None),
        Some(&cx.stamp()),
    )?;
    if found.all_invalid() {
        return Err(Failure::data(format!(
            "no valid version of {}; repair it with `triage state-read {}`",
            file.display(),
            file.display()
        )));
    }
    if let Some(src) = found.recovered_from.as_deref().filter(|s| *s != "primary") {
        cx.warn(&format!("{} was recovered from {src}", file.display()));
    }
    let (doc, out) = f(found.data)?;
    let mut bytes = serde_json::to_vec_pretty(&doc)
        .map_err(|e| Failure::data(format!("cannot serialize the state: {e}")))?;
    bytes.push(b'\n');
    files::replace(file, &bytes, Backup::Keep)?;
    Ok(out)
}

/// Re-reads the saga under the lock, applies one checkpoint, writes it back.
fn checkpoint(
    file: &Path,
    cx: &Context,
    t: &Target,
    f: impl FnOnce(&mut Saga, &mut Value) -> Result<(), Failure>,
) -> Result<Saga, Failure> {
    update(file, cx, |doc| {
        let mut doc = doc.ok_or_else(|| not_begun(t, file))?;
        let mut saga = saga_of(&doc, &t.workflow, file)?.ok_or_else(|| not_begun(t, file))?;
        f(&mut saga, &mut doc)?;
        put(&mut doc, &saga)?;
        Ok((doc, saga))
    })
}

/// Keeps a copy of the state as it was before compensation: `archive/NAME.STAMP` beside it.
fn archive(file: &Path, doc: &Value, cx: &Context) -> Result<PathBuf, Failure> {
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("archive");
    files::ensure_dir(&dir)?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "state".into());
    let mut path = dir.join(format!("{name}.{}", cx.stamp()));
    let mut n = 1;
    while path.exists() {
        path = dir.join(format!("{name}.{}-{n}", cx.stamp()));
        n += 1;
    }
    let mut bytes = serde_json::to_vec_pretty(doc)
        .map_err(|e| Failure::data(format!("cannot serialize the state: {e}")))?;
    bytes.push(b'\n');
    files::replace(&path, &bytes, Backup::Skip)?;
    Ok(path)
}

/// How long a compensation may run, and the signals to forward to it.
struct Limits {
    timeout: std::time::Duration,
    kill_after: std::time::Duration,
    interrupts: Interrupts,
}

/// Lets child processes inherit the lock's descriptor (it is close-on-exec by default).
fn inherit(lock: &files::Lock) -> Result<(), Failure> {
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
fn run_compensation(command: &str, t: &Target, step: &str, limits: &Limits) -> Compensated {
    let argv = [OsString::from("sh"), "-c".into(), command.into()];
    let spec = Spec {
        command: &argv,
        stdin: None,
        timeout: (!limits.timeout.is_zero()).then_some(limits.timeout),
        kill_after: limits.kill_after,
        grace: limits.kill_after,
        env: vec![
            ("TRIAGE_SAGA_WORKFLOW".into(), t.workflow.clone()),
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

fn answer(
    cx: &Context,
    file: &Path,
    saga: &Saga,
    extra: Value,
    negative: bool,
) -> Result<Outcome, Failure> {
    if cx.global.text {
        return Ok(Outcome::text(saga.to_text()).negative(negative));
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
    Ok(Outcome::json(&out).negative(negative))
}
