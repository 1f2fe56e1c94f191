//! `triage phase`: run a phase's work items in parallel through `triage run`'s machinery, wait
//! for all, decide once (seed 000's fan-out rules), survive an interrupt or a killed runner
//! (seed 002's COMPLETE / PARTIAL / NOT_STARTED manifest and resume), and record one person's
//! decision on every open error of the phase at once.
//!
//! `run` and `resume` hold the manifest's lock while they work: a second runner of the same
//! phase is refused (75, a busy resource, with its JSON line), and a manifest that says
//! `running` while its lock is free was left by a runner that died — `resume` re-checks its
//! items instead of trusting that word. An item with side effects that may have begun its work
//! is never started again by `resume` without a person's decision (seed 001): it waits as
//! `needs_decision` until `phase decide` or `phase resume --rerun ID`.

mod answer;
mod progress;
mod runner;

use crate::context::{Context, Outcome};
use crate::core::duration::Dur;
use crate::core::error_record::Resolution;
use crate::core::phase::plan::{self, Format, PhasePlan};
use crate::core::phase::{self as core, ItemState, Manifest, PhaseStatus};
use crate::core::policy::Policy;
use crate::exit::{Failure, FailureClass};
use crate::store::error_log::{self, Selection};
use crate::store::files::{self, Backup};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `phase run`/`resume` could not do their job (like `triage run`'s 125).
const OWN_FAILURE: u8 = 125;
/// Another process holds the phase (EX_TEMPFAIL: try again later).
const BUSY: u8 = 75;

/// Arguments of `triage phase`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage phase run examples/phase2/plan.toml --workflow review-42 --phase 2 --text\n  \
    triage phase status --workflow review-42 --phase 2 --text\n  \
    triage phase resume --workflow review-42 --phase 2\n  \
    triage phase decide --workflow review-42 --phase 2 --choice B\n\n\
Exit status of run and resume: 0 every item completed, or the phase may go on (optional items\n\
failed, not more than the abort ratio: proceed_degraded; a conditional phase that failed:\n\
skip); 1 stop: more than the abort ratio failed, or a critical item failed (the answer\n\
carries the escalation text), or an item with side effects waits for a decision\n\
(needs_decision); 130 interrupted (the manifest says paused); 75 another runner holds the\n\
phase (a JSON line says so); 125 triage itself failed; 64 usage error or an invalid plan.")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The phase actions.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Run a plan's items in parallel, wait for all, decide once
    Run(RunArgs),
    /// Run again what a paused or killed run left unfinished, keeping completed outputs; an
    /// item with side effects that may have run waits for a decision (needs_decision)
    Resume(ResumeArgs),
    /// Print the manifest: every item's state
    Status(Which),
    /// Record a person's choice on every open error of the phase, and skip its failed items
    Decide(DecideArgs),
}

/// Which phase of which workflow.
#[derive(clap::Args, Debug)]
pub struct Which {
    /// The workflow's id
    #[arg(long, value_name = "ID")]
    pub workflow: String,
    /// The phase (number or name)
    #[arg(long, value_name = "N")]
    pub phase: String,
}

/// How items are stopped.
#[derive(clap::Args, Debug)]
pub struct Stopping {
    /// The session id, for the error log
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// After forwarding SIGINT/SIGTERM to the items, SIGKILL what is left this long after
    #[arg(long, value_name = "DUR", default_value = "30s")]
    pub grace: Dur,
    /// SIGKILL an item this long after its timeout's SIGTERM
    #[arg(long, value_name = "DUR", default_value = "10s")]
    pub kill_after: Dur,
}

/// Arguments of `triage phase run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The plan: a TOML or JSON file; `-` or nothing reads it from stdin
    #[arg(value_name = "PLAN")]
    pub plan: Option<PathBuf>,
    #[command(flatten)]
    pub which: Which,
    #[command(flatten)]
    pub stopping: Stopping,
    /// Start over even when an earlier run of this phase was left unfinished
    #[arg(long)]
    pub fresh: bool,
}

/// Arguments of `triage phase resume`.
#[derive(clap::Args, Debug)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub which: Which,
    #[command(flatten)]
    pub stopping: Stopping,
    /// Run item ID again although it has side effects and may have run in part (it is
    /// needs_decision, or would be); repeat for several. Without it such an item is never
    /// started again
    #[arg(long, value_name = "ID")]
    pub rerun: Vec<String>,
}

/// Arguments of `triage phase decide`.
#[derive(clap::Args, Debug)]
pub struct DecideArgs {
    #[command(flatten)]
    pub which: Which,
    /// The option chosen in the escalation text: A retry (items with side effects included),
    /// B proceed without the failed and needs_decision items, C abort the phase (after one
    /// item failed: give its output by hand), D abort the workflow; or its word
    /// (retry, proceed_without, abort_phase, manual_input, abort_workflow)
    #[arg(long, value_name = "CHOICE")]
    pub choice: String,
}

/// Runs `triage phase`.
pub fn run(args: &Args, cx: &Context) -> Result<Outcome, Failure> {
    let done = match &args.action {
        Action::Run(a) => run_phase(a, cx),
        Action::Resume(a) => resume(a, cx),
        Action::Status(w) => return status(w, cx),
        Action::Decide(a) => return decide(a, cx),
    };
    match done {
        Ok(o) => Ok(o),
        Err(f) if f.class == FailureClass::Usage => Err(f),
        Err(f) => {
            say!("triage phase: {}", f.message);
            cx.trace(f.class_name(), &f.message);
            Ok(Outcome::nothing().exit(OWN_FAILURE))
        }
    }
}

/// What the runner needs of one phase run.
pub struct Job<'a> {
    cx: &'a Context,
    plan: &'a PhasePlan,
    /// The policy with the plan's phase settings (items are laid over it one by one).
    policy: Policy,
    workflow: &'a str,
    phase: &'a str,
    session: Option<&'a str>,
    grace: Duration,
    kill_after: Duration,
    budget: Option<Duration>,
    manifest: &'a Path,
    files: PathBuf,
    fixed_clock: bool,
}

impl Job<'_> {
    /// Now, as the manifest writes it (`TRIAGE_NOW` when set).
    fn stamp(&self) -> String {
        let now = if self.fixed_clock {
            self.cx.now
        } else {
            chrono::Utc::now()
        };
        crate::core::saga::stamp(now)
    }
}

impl Which {
    fn check(&self) -> Result<(), Failure> {
        for (what, v) in [("--workflow", &self.workflow), ("--phase", &self.phase)] {
            if v.trim().is_empty() {
                return Err(Failure::usage(format!("{what} is empty; name it")));
            }
        }
        Ok(())
    }

    fn manifest(&self, cx: &Context) -> PathBuf {
        cx.state_root()
            .join("workflows")
            .join(files::escape_key(&self.workflow))
            .join(format!("phase-{}.json", files::escape_key(&self.phase)))
    }
}

/// Reads the plan from the file or stdin.
fn read_plan(a: &RunArgs, cx: &Context) -> Result<PhasePlan, Failure> {
    let (name, bytes) = match a.plan.as_deref().filter(|p| *p != Path::new("-")) {
        Some(p) => {
            let bytes = files::read_named(p)
                .map_err(|e| Failure::usage(format!("cannot read the plan: {e}")))?
                .ok_or_else(|| {
                    Failure::usage(format!("the plan {} does not exist", p.display()))
                })?;
            (p.display().to_string(), bytes)
        }
        None => {
            let bytes = cx.read_stdin()?.ok_or_else(|| {
                Failure::usage("no plan: name a TOML or JSON file, or give one on stdin")
            })?;
            ("<stdin>".to_string(), bytes)
        }
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| Failure::usage(format!("{name}: the plan is not UTF-8 text")))?;
    plan::parse(&name, &text, Format::guess(&name, &text))
        .map_err(|problems| Failure::usage(problems.join("\n")))
}

fn run_phase(a: &RunArgs, cx: &Context) -> Result<Outcome, Failure> {
    a.which.check()?;
    let plan = read_plan(a, cx)?;
    let path = a.which.manifest(cx);
    let _lock = match hold(cx, &path, &a.which)? {
        Held::Lock(l) => l,
        Held::Busy(refusal) => return Ok(refusal),
    };
    if let (Some((old, _)), false) = (read_manifest(&path)?, a.fresh) {
        if old.status != PhaseStatus::Decided {
            return Err(Failure::usage(format!(
                "phase {} of workflow {} was left {} ({}); continue it with `triage phase resume --workflow {} --phase {}`, or start over with --fresh",
                a.which.phase,
                a.which.workflow,
                match old.status { PhaseStatus::Paused => "paused", _ => "running by a runner that died" },
                path.display(),
                a.which.workflow,
                a.which.phase,
            )));
        }
    }
    let policy = phase_settings(cx.policy()?, &plan, &a.which.phase);
    let mut m = Manifest::new(
        &a.which.workflow,
        &a.which.phase,
        plan.clone(),
        |item| {
            (
                policy.agent(item.agent()).criticality,
                plan::side_effects(&policy, item),
            )
        },
        &crate::core::saga::stamp(cx.now),
    );
    let todo: Vec<usize> = (0..plan.items.len()).collect();
    go(
        cx,
        &a.which,
        &a.stopping,
        &plan,
        policy,
        &path,
        &mut m,
        todo,
        None,
    )
}

fn resume(a: &ResumeArgs, cx: &Context) -> Result<Outcome, Failure> {
    a.which.check()?;
    let path = a.which.manifest(cx);
    let _lock = match hold(cx, &path, &a.which)? {
        Held::Lock(l) => l,
        Held::Busy(refusal) => return Ok(refusal),
    };
    let (mut m, from_backup) = read_manifest(&path)?.ok_or_else(|| {
        Failure::usage(format!(
            "no manifest for phase {} of workflow {} ({}); start it with `triage phase run PLAN --workflow {} --phase {}`",
            a.which.phase, a.which.workflow, path.display(), a.which.workflow, a.which.phase
        ))
    })?;
    let rerun = leave_to_rerun(&mut m, &a.rerun, &crate::core::saga::stamp(cx.now))?;
    let died = m.status == PhaseStatus::Running;
    // Items a dead runner left running: their groups may live on. Stop what is left; they run
    // again (their result was never filed), unless they have side effects (held below).
    for e in m
        .items
        .iter_mut()
        .filter(|e| e.state() == ItemState::Running)
    {
        let left = e.pgid.map(|g| stop_group(g, a.stopping.grace.0));
        e.note = Some(match left {
            Some(true) => "was running when the runner died; its process group was still alive and was stopped".into(),
            _ => "was running when the runner died; its result is unknown".into(),
        });
        e.state = Some(ItemState::Partial);
        e.pgid = None;
    }
    let plan = m.plan.clone();
    let policy = phase_settings(cx.policy()?, &plan, &a.which.phase);
    // The policy of the day may say side effects where the manifest did not: either holds.
    for (e, item) in m.items.iter_mut().zip(&plan.items) {
        e.side_effects |= plan::side_effects(&policy, item);
    }
    let held = m.hold(from_backup);
    let summary = json!({
        "runner_died": died,
        "read_from_backup": from_backup,
        "complete": m.ids(ItemState::Complete),
        "partial": m.ids(ItemState::Partial),
        "not_started": m.ids(ItemState::NotStarted),
        "failed": m.ids(ItemState::Failed),
        "skipped": m.ids(ItemState::Skipped),
        "needs_decision": held,
        "rerun": rerun,
    });
    let todo: Vec<usize> = m
        .items
        .iter()
        .enumerate()
        .filter(|(_, e)| e.state().unfinished())
        .map(|(i, _)| i)
        .collect();
    m.resumes += 1;
    m.status = PhaseStatus::Running;
    m.message = None;
    go(
        cx,
        &a.which,
        &a.stopping,
        &plan,
        policy,
        &path,
        &mut m,
        todo,
        Some(summary),
    )
}

/// `--rerun ID...`: a person's leave to start those items again (recorded on each, used up
/// when it starts). An id the phase does not have, or an item that is complete or skipped,
/// is a usage error before anything runs.
fn leave_to_rerun(m: &mut Manifest, ids: &[String], at: &str) -> Result<Vec<String>, Failure> {
    let mut given = Vec::new();
    for id in ids {
        let Some(e) = m.items.iter_mut().find(|e| &e.id == id) else {
            let known: Vec<&str> = m.items.iter().map(|e| e.id.as_str()).collect();
            return Err(Failure::usage(format!(
                "--rerun `{id}`: phase {} of workflow {} has no such item (its items: {})",
                m.phase,
                m.workflow_id,
                known.join(", ")
            )));
        };
        if matches!(e.state(), ItemState::Complete | ItemState::Skipped) {
            return Err(Failure::usage(format!(
                "--rerun `{id}`: the item is {}; resume runs only what is unfinished",
                e.state().as_str()
            )));
        }
        e.rerun = Some(format!("`phase resume --rerun` at {at}"));
        if !given.contains(id) {
            given.push(id.clone());
        }
    }
    Ok(given)
}

/// Runs `todo`, decides, writes the manifest and answers.
#[allow(clippy::too_many_arguments)]
fn go(
    cx: &Context,
    which: &Which,
    stopping: &Stopping,
    plan: &PhasePlan,
    policy: Policy,
    path: &Path,
    m: &mut Manifest,
    todo: Vec<usize>,
    resumed: Option<Value>,
) -> Result<Outcome, Failure> {
    let budget = plan
        .timeout
        .or_else(|| policy.phase(&which.phase).and_then(|p| p.timeout))
        .map(|d| d.0);
    let abort_ratio = plan
        .abort_ratio
        .unwrap_or(policy.thresholds.phase_failure_ratio);
    let job = Job {
        cx,
        plan,
        policy,
        workflow: &which.workflow,
        phase: &which.phase,
        session: stopping.session.as_deref(),
        grace: stopping.grace.0,
        kill_after: stopping.kill_after.0,
        budget,
        manifest: path,
        files: runner::files_dir(&cx.state_root(), &which.workflow, &which.phase),
        fixed_clock: cx.fixed_now,
    };
    m.runner_pid = Some(std::process::id());
    m.status = PhaseStatus::Running;
    m.updated_at = job.stamp();
    // The runner's first write (items filed as running) must work; with nothing to run, this
    // one must.
    if todo.is_empty() {
        write_manifest(path, m)?;
    }
    let ran = runner::run(&job, m, todo)?;
    let d = core::decide(&m.items, abort_ratio, plan.mandatory);
    m.runner_pid = None;
    // Items waiting for a decision keep the phase open: `phase run` without --fresh refuses to
    // start it over (which would run them again), and `resume --rerun` continues it.
    let waiting = m.decision_line();
    let paused = (d.decision == core::Verdict::Paused).then(|| m.resume_line());
    m.message = match (paused, waiting) {
        (Some(p), Some(w)) => Some(format!("{p}\n{w}")),
        (p, w) => p.or(w),
    };
    m.status = if m.message.is_some() {
        PhaseStatus::Paused
    } else {
        PhaseStatus::Decided
    };
    let texts = answer::texts(&job, m, &d)?;
    m.decision = Some(json!({
        "decision": d.decision,
        "reason": d.reason,
        "template": texts.template.as_ref().and_then(|t| t.get("template").cloned()),
        "at": job.stamp(),
    }));
    job.save(m);
    if let Some(msg) = &m.message {
        say!("{msg}");
    }
    let doc = answer::document(&job, m, &d, &ran, texts, abort_ratio, resumed);
    let status = d.decision.exit_status();
    let out = if cx.global.text {
        Outcome::text(answer::text(&doc))
    } else {
        Outcome::json(&doc)
    };
    Ok(out.exit(status))
}

/// The policy with the plan's phase name, budget and size, and every item's settings.
fn phase_settings(base: &Policy, plan: &PhasePlan, phase: &str) -> Policy {
    let mut p = plan::phase_policy(base, plan);
    let entry = p.phases.entry(phase.to_string()).or_default();
    if plan.name.is_some() {
        entry.name = plan.name.clone();
    }
    if plan.timeout.is_some() {
        entry.timeout = plan.timeout;
    }
    entry.size = Some(u32::try_from(plan.items.len()).unwrap_or(u32::MAX));
    p
}

/// The manifest's lock, or the answer of a process that could not take it.
enum Held {
    /// Held for the whole run.
    Lock(files::Lock),
    /// Another process holds it: the refusal to print (exit 75).
    Busy(Outcome),
}

/// Takes the manifest's lock for the whole run. A second runner (or a `decide` while one
/// runs) is refused as a busy resource: exit 75 (EX_TEMPFAIL: try again later), its one JSON
/// line on stdout, the reason on stderr.
fn hold(cx: &Context, path: &Path, which: &Which) -> Result<Held, Failure> {
    if let Some(dir) = path.parent() {
        files::create_dirs(dir)?;
    }
    match files::lock(path, cx.lock_wait()) {
        Ok(lock) => Ok(Held::Lock(lock)),
        Err(e) if e.is_lock_timeout() => Ok(Held::Busy(busy(cx, path, which))),
        Err(e) => Err(e.into()),
    }
}

/// The refusal of a process that found the phase's lock held.
fn busy(cx: &Context, path: &Path, which: &Which) -> Outcome {
    // For people only: the pid is what the manifest says, and the manifest is not trusted.
    let pid = read_manifest(path)
        .ok()
        .flatten()
        .and_then(|(m, _)| m.runner_pid);
    let reason = format!(
        "phase {} of workflow {} is being run by another process{}; wait for it, or interrupt it and resume",
        which.phase,
        which.workflow,
        pid.map_or(String::new(), |p| format!(" (pid {p})"))
    );
    cx.trace("lock", &reason);
    let out = if cx.global.text {
        Outcome::text(reason)
    } else {
        say!("triage phase: {}", crate::context::printable(&reason));
        Outcome::json(&json!({
            "workflow_id": which.workflow,
            "phase": which.phase,
            "refused": "busy",
            "reason": reason,
            "runner_pid": pid,
            "exit_status": BUSY,
        }))
    };
    out.exit(BUSY)
}

/// Stops what is left of a process group a dead runner started: SIGTERM, SIGKILL after
/// `grace`. Returns whether anyone was left.
fn stop_group(pgid: u32, grace: Duration) -> bool {
    use rustix::process::{kill_process_group, test_kill_process_group, Pid, Signal};
    let Some(group) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    if test_kill_process_group(group).is_err() {
        return false;
    }
    let _ = kill_process_group(group, Signal::TERM);
    let until = std::time::Instant::now() + grace;
    while std::time::Instant::now() < until {
        if test_kill_process_group(group).is_err() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = kill_process_group(group, Signal::KILL);
    true
}

/// Reads the manifest; a torn or corrupt one falls back to its `.bak` (then `true`: a version
/// that may predate the last write).
fn read_manifest(path: &Path) -> Result<Option<(Manifest, bool)>, Failure> {
    let Some(bytes) = files::read_optional(path)? else {
        return Ok(None);
    };
    match serde_json::from_slice::<Manifest>(&bytes) {
        Ok(m) => Ok(Some((m, false))),
        Err(e) => {
            let bak = files::with_suffix(path, ".bak");
            if let Some(m) = files::read_optional(&bak)?
                .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
            {
                return Ok(Some((m, true)));
            }
            Err(Failure::data(format!(
                "the manifest {} is not readable ({e}) and has no readable .bak",
                path.display()
            )))
        }
    }
}

/// Writes the manifest atomically (temp file, fsync, rename, previous version as `.bak`).
/// The caller holds its lock.
pub fn write_manifest(path: &Path, m: &Manifest) -> Result<(), Failure> {
    write_manifest_as(path, m, true)
}

/// [`write_manifest`]; `durable: false` leaves out the folder's fsync (the file itself is
/// fsynced, so never torn): for the writes while items run, whose loss to a power cut only
/// means `resume` runs again what they had filed as ended.
pub fn write_manifest_as(path: &Path, m: &Manifest, durable: bool) -> Result<(), Failure> {
    let mut bytes = serde_json::to_vec_pretty(m)
        .map_err(|e| Failure::data(format!("cannot serialize the manifest: {e}")))?;
    bytes.push(b'\n');
    if durable {
        files::replace(path, &bytes, Backup::Keep)?;
    } else {
        files::replace_deferred(path, &bytes, Backup::Keep)?;
    }
    Ok(())
}

fn status(w: &Which, cx: &Context) -> Result<Outcome, Failure> {
    w.check()?;
    let path = w.manifest(cx);
    let (m, _) = read_manifest(&path)?.ok_or_else(|| {
        Failure::usage(format!(
            "no manifest for phase {} of workflow {} ({})",
            w.phase,
            w.workflow,
            path.display()
        ))
    })?;
    if cx.global.text {
        return Ok(Outcome::text(answer::status_text(&m)));
    }
    Ok(Outcome::json(&m))
}

/// A choice: its letter and the action recorded.
fn choice(word: &str, template: Option<&str>) -> Option<(&'static str, &'static str)> {
    let single = template == Some("agent-failure");
    Some(match word.trim().to_ascii_lowercase().as_str() {
        "a" | "retry" => ("A", "retry"),
        "b" | "proceed" | "proceed_without" | "skip" => ("B", "proceed_without"),
        "c" if single => ("C", "manual_input"),
        "manual_input" => ("C", "manual_input"),
        "c" | "abort_phase" => ("C", "abort_phase"),
        "d" | "abort" | "abort_workflow" => ("D", "abort_workflow"),
        _ => return None,
    })
}

fn decide(a: &DecideArgs, cx: &Context) -> Result<Outcome, Failure> {
    a.which.check()?;
    let path = a.which.manifest(cx);
    let _lock = match hold(cx, &path, &a.which)? {
        Held::Lock(l) => l,
        Held::Busy(refusal) => return Ok(refusal),
    };
    let (mut m, _) = read_manifest(&path)?.ok_or_else(|| {
        Failure::usage(format!(
            "no manifest for phase {} of workflow {} ({}); run the phase first",
            a.which.phase,
            a.which.workflow,
            path.display()
        ))
    })?;
    let template = m
        .decision
        .as_ref()
        .and_then(|d| d["template"].as_str().map(str::to_string));
    let (letter, action) = choice(&a.choice, template.as_deref()).ok_or_else(|| {
        Failure::usage(format!(
            "--choice `{}` is not an option; give A, B, C or D (or retry, proceed_without, abort_phase, manual_input, abort_workflow)",
            a.choice
        ))
    })?;
    let sel = Selection {
        workflow: Some(a.which.workflow.clone()),
        phase: Some(crate::core::error_record::Phase::parse(&a.which.phase).to_string()),
        ..Selection::default()
    };
    let resolution = Resolution {
        action_taken: Some(action.into()),
        user_choice: Some(letter.into()),
        ..Resolution::default()
    };
    let done = error_log::resolve(cx, &sel, resolution)?;
    let skips = matches!(action, "proceed_without" | "manual_input");
    let at = crate::core::saga::stamp(cx.now);
    let mut skipped = Vec::new();
    let mut rerun = Vec::new();
    for e in m.items.iter_mut() {
        let open = matches!(e.state(), ItemState::Failed | ItemState::NeedsDecision);
        if open && skips {
            e.state = Some(ItemState::Skipped);
            e.note = Some(format!("skipped by decision {letter} ({action})"));
            e.rerun = None;
            skipped.push(e.id.clone());
        } else if open
            && action == "retry"
            && (e.state() == ItemState::NeedsDecision || e.side_effects && e.may_have_run())
        {
            // Retry is a person's leave to start them again, side effects and all.
            e.rerun = Some(format!("decision {letter} ({action}) at {at}"));
            rerun.push(e.id.clone());
        }
    }
    let resolved: Vec<String> = done.lines.iter().map(|l| l.resolves.clone()).collect();
    let record = json!({
        "choice": letter, "action": action, "at": at,
        "resolved": resolved, "skipped": skipped, "rerun": rerun,
    });
    if let Some(d) = m.decision.as_mut().and_then(Value::as_object_mut) {
        d.insert("choice".into(), record.clone());
    } else {
        m.decision = Some(json!({ "choice": record }));
    }
    m.updated_at = crate::core::saga::stamp(cx.now);
    write_manifest(&path, &m)?;
    // Retry runs through resume; so does going on without items that waited for a decision
    // (the phase stayed paused for them: resume decides it).
    let next = (action == "retry" || skips && m.status == PhaseStatus::Paused).then(|| {
        format!(
            "triage phase resume --workflow {} --phase {}",
            a.which.workflow, a.which.phase
        )
    });
    let doc = json!({
        "workflow_id": a.which.workflow, "phase": a.which.phase,
        "choice": letter, "action": action,
        "resolved": resolved, "already_resolved": done.already_resolved,
        "skipped": skipped, "rerun": rerun, "next": next,
    });
    if cx.global.text {
        let mut t = format!(
            "Phase {} of {}: choice {letter} ({action}) recorded on {} open error{}",
            a.which.phase,
            a.which.workflow,
            resolved.len(),
            if resolved.len() == 1 { "" } else { "s" }
        );
        if !skipped.is_empty() {
            t.push_str(&format!("; skipped: {}", skipped.join(", ")));
        }
        if !rerun.is_empty() {
            t.push_str(&format!(
                "; may run again, side effects and all: {}",
                rerun.join(", ")
            ));
        }
        if let Some(n) = next {
            let what = match action {
                "retry" => "Retry the failed items",
                _ => "Go on with the phase",
            };
            t.push_str(&format!("\n{what} with: {n}"));
        }
        return Ok(Outcome::text(t));
    }
    Ok(Outcome::json(&doc))
}
