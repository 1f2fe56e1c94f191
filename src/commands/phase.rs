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

mod busy;
mod progress;
mod text;
mod wait;

use crate::context::{Answer, Context};
use crate::core::duration::Dur;
use crate::core::phase::plan::{self, Format, PhasePlan};
use crate::core::phase::{choice, Manifest, PhaseStatus};
use crate::exec::phase_runner::{self, Answered, PlanSource, Target, Watch};
use crate::exit::{Failure, FailureClass};
use crate::store::files;
use crate::store::manifests;
use crate::store::phase_seal;
use busy::{hold, Held};
use serde_json::json;
use std::path::{Path, PathBuf};

/// `phase run`/`resume` could not do their job (like `triage run`'s 125).
const OWN_FAILURE: u8 = 125;

/// Arguments of `triage phase`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage phase run examples/phase2/plan.toml --workflow review-42 --phase 2 --text\n  \
    triage phase status --workflow review-42 --phase 2 --text\n  \
    triage phase resume --workflow review-42 --phase 2\n  \
    triage phase decide --workflow review-42 --phase 2 --choice B\n  \
    triage phase wait --workflow review-42 --phase 2 --timeout 10m\n\n\
Exit status of run and resume: 0 every item completed, or the phase may go on (optional items\n\
failed, not more than the abort ratio: proceed_degraded; a conditional phase that failed:\n\
skip); 1 stop: more than the abort ratio failed, or a critical item failed (the answer\n\
carries the escalation text), or an item with side effects waits for a decision\n\
(needs_decision); 130 interrupted (the manifest says paused); 75 another runner holds the\n\
phase (a JSON line says so); 125 triage itself failed; 64 usage error or an invalid plan.\n\
Exit status of wait: 0 the decision was taken (by a person, or its default at the deadline);\n\
75 --timeout ended first and the decision is still pending.")]
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
    /// Wait for the decision a stopped phase waits for: until a person takes it (`phase
    /// decide` in another terminal) or its deadline passes, then apply its default as
    /// `phase decide` would
    Wait(WaitArgs),
}

/// Arguments of `triage phase wait`.
#[derive(clap::Args, Debug)]
pub struct WaitArgs {
    #[command(flatten)]
    pub which: Which,
    /// Wait at most this long: if it ends before the decision's deadline, the decision stays
    /// pending and wait exits 75 (try again later)
    #[arg(long, value_name = "DUR")]
    pub timeout: Option<Dur>,
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
    /// Run at most N items at once (default: the plan's `concurrency`, else the policy's
    /// `[run] jobs`, else four per CPU)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
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
    /// Resume although triage cannot show the manifest is one you ran (another machine or
    /// user, a clone, an older triage, or edited): only after `phase status --text` showed
    /// the commands it would run are yours. It is sealed as yours from then on
    #[arg(long)]
    pub trust_plan: bool,
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
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    let done = match &args.action {
        Action::Run(a) => run_phase(a, cx),
        Action::Resume(a) => resume(a, cx),
        Action::Status(w) => return status(w, cx),
        Action::Decide(a) => return decide(a, cx),
        Action::Wait(a) => return wait::wait(a, cx),
    };
    match done {
        Ok(o) => Ok(o),
        Err(f) if f.class == FailureClass::Usage => Err(f),
        Err(f) => {
            say!("triage phase: {}", f.message);
            cx.trace(f.class_name(), &f.message);
            Ok(Answer::nothing().exit(OWN_FAILURE))
        }
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
        manifests::path(&cx.state_root(), &self.workflow, &self.phase)
    }

    fn target<'a>(
        &'a self,
        stopping: &'a Stopping,
        seed: u64,
        config: Option<&'a str>,
    ) -> Target<'a> {
        Target {
            workflow: &self.workflow,
            phase: &self.phase,
            session: stopping.session.as_deref(),
            seed,
            grace: stopping.grace.0,
            kill_after: stopping.kill_after.0,
            jobs: stopping
                .jobs
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            default_jobs: std::thread::available_parallelism().map_or(4, |n| n.get()) * 4,
            config,
            seal_key: Err(String::new()),
            trust_plan: false,
        }
    }
}

/// Reads the plan from the file or stdin, and says where it came from.
fn read_plan(a: &RunArgs, cx: &Context) -> Result<(PhasePlan, PlanSource), Failure> {
    let file = a
        .plan
        .as_deref()
        .filter(|p| *p != Path::new("-"))
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()));
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
    let source = PlanSource {
        file: file.map(|f| f.display().to_string()),
        sha256: phase_seal::digest(&bytes),
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| Failure::usage(format!("{name}: the plan is not UTF-8 text")))?;
    let plan = plan::parse(&name, &text, Format::guess(&name, &text))
        .map_err(|problems| Failure::usage(problems.join("\n")))?;
    Ok((plan, source))
}

fn run_phase(a: &RunArgs, cx: &Context) -> Result<Answer, Failure> {
    a.which.check()?;
    let (plan, source) = read_plan(a, cx)?;
    let path = a.which.manifest(cx);
    let _lock = match hold(cx, &path, &a.which)? {
        Held::Lock(l) => l,
        Held::Busy(refusal) => return Ok(refusal),
    };
    let config = cx.global.config.as_deref().and_then(Path::to_str);
    let mut t = a.which.target(&a.stopping, cx.jitter_seed(), config);
    t.seal_key = cx.phase_seal_key();
    let policy = || cx.policy();
    let done = phase_runner::start(
        &cx.ground(),
        policy,
        &t,
        (&plan, &source),
        a.fresh,
        &path,
        watcher,
    )?;
    drop(_lock);
    let done = auto_proceed(cx, &a.which, &path, done)?;
    Ok(answer(cx, done))
}

fn resume(a: &ResumeArgs, cx: &Context) -> Result<Answer, Failure> {
    a.which.check()?;
    let path = a.which.manifest(cx);
    let _lock = match hold(cx, &path, &a.which)? {
        Held::Lock(l) => l,
        Held::Busy(refusal) => return Ok(refusal),
    };
    let config = cx.global.config.as_deref().and_then(Path::to_str);
    let mut t = a.which.target(&a.stopping, cx.jitter_seed(), config);
    t.seal_key = cx.phase_seal_key();
    t.trust_plan = a.trust_plan;
    let policy = || cx.policy();
    let done = phase_runner::resume(&cx.ground(), policy, &t, &a.rerun, &path, watcher)?;
    drop(_lock);
    let done = auto_proceed(cx, &a.which, &path, done)?;
    Ok(answer(cx, done))
}

/// Seed 002's `auto_proceed_after`: with `[phase] auto_proceed_after` set, a phase that
/// stopped waits (its lock released, so `phase decide` from another terminal gets in) until a
/// person decides or the deadline it set passes, then applies the default as `phase wait`
/// does. The answer carries what happened (`waited`); it exits 0 when the phase goes on
/// without its failed items, else 1 (retry needs a resume; abort stops).
fn auto_proceed(
    cx: &Context,
    w: &Which,
    path: &Path,
    mut done: Answered,
) -> Result<Answered, Failure> {
    if done.status != 1 || cx.policy()?.phase.auto_proceed_after.is_none() {
        return Ok(done);
    }
    let pending = manifests::read(path, &|_| ())?.and_then(|(m, _)| {
        m.decision
            .filter(|d| crate::core::phase::is_pending(Some(d)))
    });
    let Some(d) = pending else {
        return Ok(done);
    };
    say!(
        "triage phase: waiting for a decision until {} (auto_proceed_after); decide with `triage phase decide --workflow {} --phase {} --choice LETTER`",
        d["deadline"].as_str().unwrap_or("the deadline"),
        w.workflow,
        w.phase
    );
    let (waited, status) = wait::wait_for(cx, w, path, None)?;
    let goes_on = status == 0
        && matches!(
            waited["action"].as_str(),
            Some("proceed_without" | "manual_input")
        );
    done.status = if goes_on { 0 } else { 1 };
    if let Some(o) = done.doc.as_object_mut() {
        o.insert("waited".into(), waited);
        o.insert("exit_status".into(), done.status.into());
    }
    Ok(done)
}

/// The items' progress, drawn on stderr when it is a terminal.
fn watcher(items: usize) -> Option<Box<dyn Watch>> {
    progress::Progress::on_stderr(items).map(|p| Box::new(p) as Box<dyn Watch>)
}

fn answer(cx: &Context, done: Answered) -> Answer {
    let status = done.status;
    let out = if cx.global.text {
        Answer::text(text::text(&done.tree()))
    } else {
        Answer::json(&done.json())
    };
    out.exit(status)
}

fn status(w: &Which, cx: &Context) -> Result<Answer, Failure> {
    w.check()?;
    let path = w.manifest(cx);
    let (m, _) = manifests::read(&path, &|w| cx.warn(w))?.ok_or_else(|| {
        Failure::usage(format!(
            "no manifest for phase {} of workflow {} ({})",
            w.phase,
            w.workflow,
            path.display()
        ))
    })?;
    if cx.global.text {
        let sealed = cx
            .phase_seal_key_if_any()
            .is_some_and(|key| phase_seal::holds(&key, &m));
        let mut out = text::status_text(&m, cx.ground().now);
        if m.status != PhaseStatus::Decided {
            out.push_str("\n\n");
            out.push_str(&text::resume_would_run(&m, sealed));
        }
        return Ok(Answer::text(out));
    }
    Ok(Answer::json(&m))
}

fn decide(a: &DecideArgs, cx: &Context) -> Result<Answer, Failure> {
    a.which.check()?;
    let path = a.which.manifest(cx);
    let _lock = match hold(cx, &path, &a.which)? {
        Held::Lock(l) => l,
        Held::Busy(refusal) => return Ok(refusal),
    };
    let (mut m, _) = manifests::read(&path, &|w| cx.warn(w))?.ok_or_else(|| {
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
    let doc = settle(cx, &a.which, &path, &mut m, (letter, action), "person")?;
    if cx.global.text {
        return Ok(Answer::text(text::decided(&doc)));
    }
    Ok(Answer::json(&doc))
}

/// Records choice `letter` (`action`), taken `by` a person or by default, on the phase (the
/// caller holds its lock), and answers what it did and what comes next.
fn settle(
    cx: &Context,
    w: &Which,
    path: &Path,
    m: &mut Manifest,
    (letter, action): (&str, &str),
    by: &str,
) -> Result<serde_json::Value, Failure> {
    let which = (w.workflow.as_str(), w.phase.as_str());
    let done = manifests::decide(&cx.ground(), which, path, m, (letter, action), by)?;
    let skips = matches!(action, "proceed_without" | "manual_input");
    // Retry runs through resume; so does going on without items that waited for a decision
    // (the phase stayed paused for them: resume decides it).
    let next = (action == "retry" || skips && m.status == PhaseStatus::Paused).then(|| {
        Manifest::with_config(
            &format!(
                "triage phase resume --workflow {} --phase {}",
                w.workflow, w.phase
            ),
            cx.global.config.as_deref().and_then(Path::to_str),
        )
    });
    Ok(json!({
        "workflow_id": w.workflow, "phase": w.phase,
        "choice": letter, "action": action, "decided_by": by,
        "resolved": done.resolved, "already_resolved": done.already_resolved,
        "skipped": done.items.skipped, "rerun": done.items.rerun, "next": next,
    }))
}
