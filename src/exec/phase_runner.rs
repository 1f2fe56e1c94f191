//! The runner of `triage phase run` and `resume`: each work item's `triage run` attempt loop
//! on a thread of its own (breaker gate, timeout, classified retries, output checks, error
//! records), at most `concurrency` at once, within the phase's time budget. The manifest is
//! written (atomically, by this thread only) whenever an item changes state, so a runner
//! killed outright leaves a file `resume` can trust.
//!
//! SIGINT/SIGTERM: each item watches flags of its own, and the runner raises them all, so
//! every running item's process group gets the signal (and SIGKILL after the grace period);
//! items not started yet stay not started. A second signal kills the groups at once.
//!
//! An item with side effects starts only once a durable write has filed it as running (a
//! person's leave to run it again used up in the same write), and its end is written at once:
//! whatever kills the runner, `resume` can tell it may have run, and asks before running it
//! again (seed 001).

mod answer;
mod item;

use crate::core::phase::plan::{self, Item, PhasePlan};
use crate::core::phase::{self as model, GroupProof, ItemState, Manifest, PhaseStatus};
use crate::core::policy::Policy;
use crate::exec::child::Interrupts;
use crate::exec::group_proof::{self, Stopped};
use crate::exit::Failure;
use crate::store::files;
use crate::store::ground::Ground;
use crate::store::manifests;
use crate::store::phase_seal;
use item::{not_reached, run_item, settle, unfiled, ItemRun, Shared};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Which phase of which workflow a run is, and how its items are stopped.
pub struct Target<'a> {
    /// The workflow's id.
    pub workflow: &'a str,
    /// The phase (number or name).
    pub phase: &'a str,
    /// The session id, for the error log.
    pub session: Option<&'a str>,
    /// The seed of the retry delays' jitter, every item's.
    pub seed: u64,
    /// After forwarding SIGINT/SIGTERM to the items, SIGKILL what is left this long after.
    pub grace: Duration,
    /// SIGKILL an item this long after its timeout's SIGTERM.
    pub kill_after: Duration,
    /// How many items run at once: `--jobs`, else the plan's `concurrency`, else the
    /// policy's `[run] jobs`, else `default_jobs`.
    pub jobs: Option<usize>,
    /// The machine's default bound (four per CPU), when nothing else says.
    pub default_jobs: usize,
    /// The policy file named by `--config`, for the commands the answer suggests.
    pub config: Option<&'a str>,
    /// The user's key that seals the manifest; `Err`: why there is none.
    pub seal_key: Result<Vec<u8>, String>,
    /// `resume --trust-plan`: a person checked what a manifest this user cannot show is
    /// theirs would run.
    pub trust_plan: bool,
}

/// Where `phase run`'s plan came from: its file (absolute) and the SHA-256 of its bytes.
pub struct PlanSource {
    /// The file, when not stdin.
    pub file: Option<String>,
    /// The digest of the bytes read.
    pub sha256: String,
}

/// Who watches the items start and end (`phase run` draws their progress on a terminal).
pub trait Watch {
    /// Item `i` was filed as running.
    fn started(&mut self, i: usize);
    /// Item `i` started an attempt.
    fn attempt(&mut self, i: usize);
    /// Item `i` waits `delay` before attempt `next` (of at most `max`).
    fn waiting(&mut self, _i: usize, _delay: Duration, _next: u32, _max: Option<u32>) {}
    /// Item `i` ended.
    fn ended(&mut self, i: usize);
    /// Shows the manifest's state (`last`: the phase has ended).
    fn draw(&mut self, m: &Manifest, last: bool);
}

/// Makes the watcher of a phase of that many items, if anyone watches.
pub type Watcher = fn(usize) -> Option<Box<dyn Watch>>;

/// What a run or resume answers: its JSON document and the exit status.
pub struct Answered {
    /// The JSON document (`phase run`'s answer), its `items` left null: they are [`items`],
    /// written out one by one ([`Answered::json`]).
    pub doc: Value,
    /// Every item, as the answer shows it.
    pub items: Vec<answer::ItemOut>,
    /// The exit status of the decision.
    pub status: u8,
}

impl Answered {
    /// The JSON document whole, its items in their place, each made a tree only while it is
    /// written.
    pub fn json(&self) -> answer::Document<'_> {
        answer::Document {
            doc: &self.doc,
            items: &self.items,
        }
    }

    /// The JSON document as one tree (for the text rendering).
    pub fn tree(mut self) -> Value {
        if let Some(o) = self.doc.as_object_mut() {
            let items: Vec<Value> = self.items.iter().map(|i| json!(i)).collect();
            o.insert("items".into(), items.into());
        }
        self.doc
    }
}

/// Refuses to resume a manifest whose plan file no longer holds the plan that was run, or
/// whose seal this user's key does not give (from a clone, another machine or user, an older
/// triage, or edited) unless a person said `--trust-plan`, which seals it anew.
fn bound_to_its_plan(g: &Ground, m: &mut Manifest, t: &Target) -> Result<(), Failure> {
    let which = format!(
        "--workflow {} --phase {}",
        model::shell_word(&m.workflow_id),
        model::shell_word(&m.phase)
    );
    if let (Some(file), Some(was)) = (&m.plan_file, &m.plan_sha256) {
        if let Ok(Some(bytes)) = files::read_named(Path::new(file)) {
            let now = phase_seal::digest(&bytes);
            if &now != was {
                return Err(Failure::usage(format!(
                    "the plan {file} changed since the phase was run (its SHA-256 was {}…, it is {}…), and resume runs the plan as it was run; put the file back as it was, or start the phase over with `triage phase run {} {which} --fresh`",
                    was.get(..12).unwrap_or(was),
                    now.get(..12).unwrap_or(&now),
                    model::shell_word(file),
                )));
            }
        }
    }
    let holds = t
        .seal_key
        .as_ref()
        .is_ok_and(|key| phase_seal::holds(key, m));
    if holds {
        return Ok(());
    }
    if !t.trust_plan {
        let why = match &t.seal_key {
            Err(why) => format!("it cannot be checked: {why}"),
            Ok(_) if m.seal.is_none() => "it carries no seal (written by an older triage, or edited)".to_string(),
            Ok(_) => "its seal is not yours (it comes from another machine or user, a clone or a tarball, or was edited)".to_string(),
        };
        return Err(Failure::usage(format!(
            "will not resume phase {} of workflow {}: triage cannot show this manifest is one you ran, since {why}; see the commands it would run with `triage phase status {which} --text`, then resume with --trust-plan if they are yours",
            m.phase, m.workflow_id
        )));
    }
    match &t.seal_key {
        Ok(key) => m.seal = Some(phase_seal::seal(key, m)),
        Err(why) => g.warn(&format!("the manifest is not sealed ({why})")),
    }
    Ok(())
}

/// What the runner needs of one phase run.
pub struct Job<'a> {
    ground: &'a Ground<'a>,
    /// The policy in force (an item that never ran is classified and recorded by it).
    base: &'a Policy,
    plan: &'a PhasePlan,
    /// The policy with the plan's phase settings (items are laid over it one by one).
    policy: Policy,
    workflow: &'a str,
    phase: &'a str,
    session: Option<&'a str>,
    seed: u64,
    grace: Duration,
    kill_after: Duration,
    budget: Option<Duration>,
    /// How many items run at once.
    jobs: usize,
    manifest: &'a Path,
    files: PathBuf,
}

impl Job<'_> {
    /// Now, as the manifest writes it (`TRIAGE_NOW` when set).
    fn stamp(&self) -> String {
        crate::core::saga::stamp(self.ground.clock())
    }
}

/// `phase run`: runs every item of `plan` under the policy (`policy` reads it, once the phase
/// is known to start), decides, and writes the manifest at `path` (the caller holds its lock).
/// A phase left unfinished is continued with `resume`, not run again, unless `fresh`.
pub fn start<'p>(
    g: &Ground,
    policy: impl FnOnce() -> Result<&'p Policy, Failure>,
    t: &Target,
    (plan, source): (&PhasePlan, &PlanSource),
    fresh: bool,
    path: &Path,
    watcher: Watcher,
) -> Result<Answered, Failure> {
    if let (Some((old, _)), false) = (manifests::read(path, &|w| g.warn(w))?, fresh) {
        if old.status != PhaseStatus::Decided {
            return Err(Failure::usage(format!(
                "phase {} of workflow {} was left {} ({}); continue it with `triage phase resume --workflow {} --phase {}`, or start over with --fresh",
                t.phase,
                t.workflow,
                match old.status { PhaseStatus::Paused => "paused", _ => "running by a runner that died" },
                path.display(),
                t.workflow,
                t.phase,
            )));
        }
    }
    let base = policy()?;
    let policy = plan::phase_settings(base, plan, t.phase);
    let mut m = Manifest::new(
        t.workflow,
        t.phase,
        plan.clone(),
        |item| {
            (
                policy.agent(item.agent()).criticality,
                plan::side_effects(&policy, item),
            )
        },
        &crate::core::saga::stamp(g.now),
    );
    m.plan_file.clone_from(&source.file);
    m.plan_sha256 = Some(source.sha256.clone());
    match &t.seal_key {
        Ok(key) => m.seal = Some(phase_seal::seal(key, &m)),
        Err(why) => g.warn(&format!(
            "the manifest is not sealed ({why}): `phase resume` will ask for --trust-plan"
        )),
    }
    let todo: Vec<usize> = (0..plan.items.len()).collect();
    go(g, base, t, plan, policy, path, &mut m, todo, None, watcher)
}

/// `phase resume`: runs again what a paused or killed run left unfinished (`rerun`: items
/// with side effects a person gave leave to run again) under the policy (`policy` reads it,
/// once what the last run left is known and stopped), decides, and writes the manifest at
/// `path` (the caller holds its lock).
pub fn resume<'p>(
    g: &Ground,
    policy: impl FnOnce() -> Result<&'p Policy, Failure>,
    t: &Target,
    rerun: &[String],
    path: &Path,
    watcher: Watcher,
) -> Result<Answered, Failure> {
    let (mut m, from_backup) = manifests::read(path, &|w| g.warn(w))?.ok_or_else(|| {
        Failure::usage(format!(
            "no manifest for phase {} of workflow {} ({}); start it with `triage phase run PLAN --workflow {} --phase {}`",
            t.phase, t.workflow, path.display(), t.workflow, t.phase
        ))
    })?;
    bound_to_its_plan(g, &mut m, t)?;
    let rerun = m
        .leave_to_rerun(rerun, &crate::core::saga::stamp(g.now))
        .map_err(Failure::usage)?;
    let died = m.status == PhaseStatus::Running;
    let mut not_signalled = Vec::new();
    // Items a dead runner left running: their groups may live on. Stop what is left; they run
    // again (their result was never filed), unless they have side effects (held below).
    for e in m
        .items
        .iter_mut()
        .filter(|e| e.state() == ItemState::Running)
    {
        let left = e
            .pgid
            .map(|pg| (pg, group_proof::stop(pg, e.group.as_ref(), t.grace)));
        e.note = Some(match left {
            Some((_, Stopped::Ended)) => "was running when the runner died; its process group was still alive and was stopped".into(),
            Some((pg, Stopped::LeftAlone(why))) => {
                let said = format!(
                    "process group {pg} not signalled: cannot show it is item {}'s ({why})",
                    e.id
                );
                g.warn(&said);
                not_signalled.push(e.id.clone());
                format!("was running when the runner died; its result is unknown; {said}")
            }
            _ => "was running when the runner died; its result is unknown".into(),
        });
        e.state = Some(ItemState::Partial);
        e.pgid = None;
        e.group = None;
    }
    let plan = m.plan.clone();
    let base = policy()?;
    let policy = plan::phase_settings(base, &plan, t.phase);
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
        "not_signalled": not_signalled,
    });
    // What never ran goes first, then what was cut short, and what already failed last: an
    // item known to fail must not open a shared breaker before the healthy ones had a turn.
    let mut todo: Vec<usize> = m
        .items
        .iter()
        .enumerate()
        .filter(|(_, e)| e.state().unfinished())
        .map(|(i, _)| i)
        .collect();
    todo.sort_by_key(|i| match m.items[*i].state() {
        ItemState::NotStarted => 0,
        ItemState::Running | ItemState::Partial => 1,
        _ => 2,
    });
    m.resumes += 1;
    m.status = PhaseStatus::Running;
    m.message = None;
    go(
        g,
        base,
        t,
        &plan,
        policy,
        path,
        &mut m,
        todo,
        Some(summary),
        watcher,
    )
}

/// How many items run at once: `--jobs`, else the plan's `concurrency`, else `[run] jobs`,
/// else the machine's default. Never unbounded: a plan of 10,000 items must not start
/// 10,000 processes (and their buffers) at once.
fn jobs(t: &Target, plan: &PhasePlan, policy: &Policy) -> usize {
    let of = |n: u32| usize::try_from(n).unwrap_or(usize::MAX);
    t.jobs
        .or(plan.concurrency.map(of))
        .or(policy.run.jobs.map(|n| of(n.get())))
        .unwrap_or(t.default_jobs)
        .max(1)
}

/// Runs `todo`, decides, writes the manifest and answers.
#[allow(clippy::too_many_arguments)]
fn go(
    g: &Ground,
    base: &Policy,
    t: &Target,
    plan: &PhasePlan,
    policy: Policy,
    path: &Path,
    m: &mut Manifest,
    todo: Vec<usize>,
    resumed: Option<Value>,
    watcher: Watcher,
) -> Result<Answered, Failure> {
    let budget = plan
        .timeout
        .or_else(|| policy.phase(t.phase).and_then(|p| p.timeout))
        .map(|d| d.0);
    let abort_ratio = plan
        .abort_ratio
        .unwrap_or(policy.thresholds.phase_failure_ratio);
    let jobs = jobs(t, plan, &policy);
    let unset = plan::unset_keys(plan, &policy);
    if !unset.is_empty() {
        let named: Vec<String> = unset.iter().map(|u| format!("the plan: {u}")).collect();
        return Err(Failure::usage(named.join("\n")));
    }
    let job = Job {
        ground: g,
        base,
        plan,
        policy,
        workflow: t.workflow,
        phase: t.phase,
        session: t.session,
        seed: t.seed,
        grace: t.grace,
        kill_after: t.kill_after,
        budget,
        jobs,
        manifest: path,
        files: manifests::files_dir(&g.root, t.workflow, t.phase),
    };
    m.runner_pid = Some(std::process::id());
    m.status = PhaseStatus::Running;
    m.updated_at = job.stamp();
    // The runner's first write (items filed as running) must work; with nothing to run, this
    // one must.
    if todo.is_empty() {
        manifests::write(path, m)?;
    }
    let ran = run(&job, m, todo, watcher)?;
    let d = model::abort_on(
        model::decide(&m.items, abort_ratio, plan.mandatory),
        &ran.crossed,
    );
    m.runner_pid = None;
    // Items waiting for a decision keep the phase open: `phase run` without --fresh refuses to
    // start it over (which would run them again), and `resume --rerun` continues it.
    let config = |l: String| Manifest::with_config(&l, t.config);
    let waiting = m.decision_line().map(config);
    let paused = (d.decision == model::Verdict::Paused).then(|| config(m.resume_line()));
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
    let template = texts
        .template
        .as_ref()
        .and_then(|t| t.get("template").cloned());
    let mut decision = json!({
        "decision": d.decision,
        "reason": d.reason,
        "template": template,
        "at": job.stamp(),
    });
    if d.decision == model::Verdict::Stop {
        // Seed 002's escalation: the options, the default and when it applies.
        let asked = &job.policy.phase;
        let pending = model::pending(
            template.as_ref().and_then(|t| t.as_str()),
            texts.template.as_ref().map(|t| &t["options"]),
            asked.default_action,
            job.ground.clock(),
            asked.auto_proceed_after.unwrap_or(asked.decision_timeout).0,
        );
        if let (Some(o), Some(p)) = (decision.as_object_mut(), pending.as_object()) {
            o.extend(p.clone());
            if !d.thresholds.is_empty() {
                o.insert("thresholds".into(), json!(d.thresholds));
            }
        }
    }
    m.decision = Some(decision);
    job.save(m);
    if let Some(msg) = &m.message {
        say!("{msg}");
    }
    let mut doc = answer::document(&job, m, &d, &ran, texts, abort_ratio, resumed);
    if let (Some(o), Some(p)) = (
        doc.as_object_mut(),
        m.decision.as_ref().filter(|d| model::is_pending(Some(d))),
    ) {
        o.insert("pending_decision".into(), p.clone());
    }
    let items = answer::items(std::mem::take(&mut m.items), ran.reports);
    Ok(Answered {
        doc,
        items,
        status: d.decision.exit_status(),
    })
}

/// How often the runner looks for ended items and signals.
const POLL: Duration = Duration::from_millis(10);

/// What the runner did.
#[derive(Default)]
pub struct Ran {
    /// The signal that interrupted the phase, if one did.
    pub interrupted: Option<i32>,
    /// Whether the phase's time budget ended with items left.
    pub budget_ended: bool,
    /// The abort thresholds the items' records crossed (name, message), each once.
    pub crossed: Vec<(String, String)>,
    /// What the answer keeps of each item's `triage run` report (its attempts and
    /// warnings, as compact JSON text: a phase of 10,000 items keeps no tree of them), by id.
    pub reports: HashMap<String, answer::Kept>,
}

/// The warnings of seed 000's "Abort when" that stop a phase.
const ABORTS: [&str; 2] = ["agent_failure_threshold", "breaker_reopened"];

impl Ran {
    /// Notes the abort thresholds an item's report says its records crossed.
    fn note_aborts(&mut self, report: &Value) {
        for w in report["warnings"].as_array().into_iter().flatten() {
            let (Some(name), Some(message)) = (w["name"].as_str(), w["message"].as_str()) else {
                continue;
            };
            if ABORTS.contains(&name) && !self.crossed.iter().any(|(_, m)| m == message) {
                self.crossed.push((name.to_string(), message.to_string()));
            }
        }
    }
}

enum Msg {
    /// Item `i`'s attempt started in group `pgid`, identified by the proof.
    Spawned(usize, u32, Option<GroupProof>),
    /// Item `i` waits this long before attempt `n` of `m`.
    Waiting(usize, Duration, u32, Option<u32>),
    Done(usize, Box<ItemRun>),
}

/// How often, at most, the manifest is written while items end (it is always written before
/// items start and when the phase ends). An item that ended since the last write is filed as
/// running: a runner killed now leaves it to `resume`, which runs it again — never lost.
const SAVE_EVERY: Duration = Duration::from_millis(100);

/// How long a running item's process group may go unrecorded in the manifest. Until it is, a
/// runner killed outright leaves that group to run on unseen by `resume` (which runs the item
/// again); the window was a manifest write's length before, and most items of a fan-out of
/// short commands end within it, so they never need the write.
const GROUP_GRACE: Duration = Duration::from_millis(20);

/// Runs the items at `todo` (indexes into the plan), writing the manifest as they change.
fn run(job: &Job, m: &mut Manifest, todo: Vec<usize>, watcher: Watcher) -> Result<Ran, Failure> {
    let interrupts = Interrupts::install()
        .map_err(|e| Failure::io(format!("cannot catch SIGINT/SIGTERM: {e}")))?;
    let cascade = AtomicBool::new(false);
    let started = Instant::now();
    let deadline = job.budget.map(|t| started + t);
    let limit = job.jobs;
    let mut ran = Ran::default();
    let (tx, rx) = mpsc::channel::<Msg>();
    let mut pending: VecDeque<usize> = todo.into();
    let mut running: HashMap<usize, Interrupts> = HashMap::new();
    let shared = Shared {
        seed: job.seed,
        files: &job.files,
        kill_after: job.kill_after,
        grace: job.grace,
        phase: job.phase,
        session: job.session,
        workflow: job.workflow,
        retry: job.plan.retry,
        defaults: &job.plan.defaults,
    };
    let shared = &shared;
    let mut progress = watcher(m.items.len());
    let mut book = Book::default();
    std::thread::scope(|s| -> Result<(), Failure> {
        loop {
            // Every item that may start now is filed as running in one write before any
            // starts: a runner killed after that leaves them for `resume` to re-check.
            let over = deadline.is_some_and(|d| Instant::now() >= d);
            let mut starting = Vec::new();
            while ran.interrupted.is_none() && !over && running.len() + starting.len() < limit {
                let Some(i) = pending.pop_front() else {
                    break;
                };
                if i >= job.plan.items.len() {
                    continue;
                }
                let e = &mut m.items[i];
                e.state = Some(ItemState::Running);
                e.started_at = Some(job.stamp());
                e.ended_at = None;
                let leave = e.rerun.take();
                e.note = leave.as_ref().map(|l| format!("run again by {l}"));
                starting.push((i, leave));
            }
            if !starting.is_empty() {
                book.dirty.extend(starting.iter().map(|(i, _)| *i));
                if book.journal.is_none() {
                    // The first write must work: without a manifest, an interrupt would lose
                    // the phase. It is the compaction of what a resume read, too.
                    book.sync_files(job)?;
                    m.updated_at = job.stamp();
                    book.journal = Some(manifests::Journal::start(job.manifest, m)?);
                    book.written = Some(Instant::now());
                    book.dirty.clear();
                } else if starting.iter().any(|(i, _)| m.items[*i].side_effects) {
                    if let Err(f) = book.save(job, m, true) {
                        starting.retain_mut(|(i, leave)| {
                            !m.items[*i].side_effects || !unfiled(job, m, *i, leave.take(), &f)
                        });
                    }
                }
                // Items without side effects are filed as running with the next append:
                // resume runs an item again that the manifest does not show running.
            }
            for (i, _) in starting {
                let Some(item) = job.plan.items.get(i) else {
                    continue;
                };
                if let Some(p) = progress.as_mut() {
                    p.started(i);
                }
                let flags = Interrupts::detached();
                running.insert(i, flags.clone());
                // Each item has a ground of its own (the lock waits of a new call) and its
                // policy: the plan's settings laid over the phase's.
                let ground = job.ground.at(job.ground.now);
                let policy = job.item_policy(item);
                let tx = tx.clone();
                let cascade = &cascade;
                s.spawn(move || {
                    // Every process of the item's group carries the token, and the leader's
                    // start time is read as it starts: what resume checks before a signal.
                    let token = group_proof::new_token();
                    let told = {
                        let tx = tx.clone();
                        let token = token.clone();
                        move |pid: u32| {
                            let proof = group_proof::record(pid, &token);
                            let _ = tx.send(Msg::Spawned(i, pid, proof));
                        }
                    };
                    let waits = {
                        let tx = tx.clone();
                        move |d: Duration, n: u32, m: Option<u32>| {
                            let _ = tx.send(Msg::Waiting(i, d, n, m));
                        }
                    };
                    let r = run_item(
                        shared, item, &ground, &policy, &flags, cascade, deadline, &told, &waits,
                        &token,
                    );
                    let _ = tx.send(Msg::Done(i, Box::new(r)));
                });
            }
            if let Some(p) = progress.as_mut() {
                p.draw(m, false);
            }
            let over = deadline.is_some_and(|d| Instant::now() >= d);
            if running.is_empty() && (pending.is_empty() || ran.interrupted.is_some() || over) {
                ran.budget_ended = over && !pending.is_empty();
                return Ok(());
            }
            let mut next = rx.recv_timeout(POLL).ok();
            while let Some(msg) = next {
                match msg {
                    Msg::Spawned(i, pid, proof) => {
                        book.dirty.insert(i);
                        m.items[i].pgid = Some(pid);
                        m.items[i].group = proof;
                        book.unsaved_groups.insert(i, Instant::now());
                        if let Some(p) = progress.as_mut() {
                            p.attempt(i);
                        }
                    }
                    Msg::Waiting(i, d, n, m) => {
                        if let Some(p) = progress.as_mut() {
                            p.waiting(i, d, n, m);
                        }
                    }
                    Msg::Done(i, r) => {
                        book.dirty.insert(i);
                        running.remove(&i);
                        book.unsaved_groups.remove(&i);
                        // Filed as ended at once: left as running, it would wait for a
                        // decision after a runner killed now.
                        book.urgent |= m.items[i].side_effects;
                        book.files_unsynced |= r.out.is_some() || r.err.is_some();
                        if let Some(p) = progress.as_mut() {
                            p.ended(i);
                        }
                        let id = m.items[i].id.clone();
                        if let Ok((_, doc)) = &r.result {
                            ran.note_aborts(doc);
                            ran.reports.insert(id, answer::Kept::of(doc));
                        }
                        settle(job, m, i, *r);
                    }
                }
                next = rx.try_recv().ok();
            }
            // What happened since the last write, written once: soon when a running item's
            // process group is not on file (a dead runner's `resume` must find it to stop
            // it) — after GROUP_GRACE, by when a short item has ended and needs no record of
            // it —, else at most every SAVE_EVERY, and not at all when the phase just ended
            // (its final write follows).
            let ending = running.is_empty() && pending.is_empty();
            let due = book.written.is_none_or(|t| t.elapsed() >= SAVE_EVERY);
            let group_due = book
                .unsaved_groups
                .values()
                .any(|t| t.elapsed() >= GROUP_GRACE);
            if !book.dirty.is_empty() && !ending && (group_due || due || book.urgent) {
                let durable = book.urgent;
                if let Err(f) = book.save(job, m, durable) {
                    job.ground.warn(&format!(
                        "cannot write the manifest's journal: {}",
                        f.message
                    ));
                }
            }
            if let Some(p) = progress.as_mut() {
                p.draw(m, false);
            }
            if let Some(sig) = interrupts.take() {
                ran.interrupted.get_or_insert(sig);
                for f in running.values() {
                    f.raise(sig);
                }
            }
        }
    })?;
    // The kept outputs are durable before the final manifest names them.
    if let Err(f) = book.sync_files(job) {
        job.ground
            .warn(&format!("cannot fsync the items' files: {}", f.message));
    }
    if ran.budget_ended && ran.interrupted.is_none() {
        for i in pending {
            not_reached(job, m, i);
        }
        job.save(m);
    }
    if let Some(p) = progress.as_mut() {
        p.draw(m, true);
    }
    Ok(ran)
}

/// What the runner has written, and what it owes the disk.
#[derive(Default)]
struct Book {
    /// The manifest's journal, once the run's first write has started it.
    journal: Option<manifests::Journal>,
    /// When the journal was last appended to by this runner.
    written: Option<Instant>,
    /// Items changed since (their entries are the next lines).
    dirty: BTreeSet<usize>,
    /// Items whose running process group is not on file yet, and since when.
    unsaved_groups: HashMap<usize, Instant>,
    /// Items' files were kept since the folder's last fsync.
    files_unsynced: bool,
    /// An item with side effects ended since the last write.
    urgent: bool,
}

impl Book {
    /// Makes kept files durable (one folder fsync for all of them).
    fn sync_files(&mut self, job: &Job) -> Result<(), Failure> {
        if self.files_unsynced {
            files::sync_dir(&job.files)?;
            self.files_unsynced = false;
        }
        Ok(())
    }

    /// Appends the changed items' entries to the journal, after the files they name;
    /// `durable`: fsynced (an item with side effects starts, or ended). The changes stay owed
    /// when the append fails.
    fn save(&mut self, job: &Job, m: &mut Manifest, durable: bool) -> Result<(), Failure> {
        self.sync_files(job)?;
        let Some(journal) = self.journal.as_mut() else {
            return Ok(());
        };
        journal.append(m, self.dirty.iter().copied(), durable)?;
        self.written = Some(Instant::now());
        self.dirty.clear();
        self.urgent = false;
        self.unsaved_groups.clear();
        Ok(())
    }
}

impl Job<'_> {
    /// The policy item `item` runs under.
    fn item_policy(&self, item: &Item) -> Policy {
        plan::item_policy(&self.policy, self.plan, item)
    }

    /// Writes the manifest whole (the journal compacted into it); a failure is a warning.
    pub fn save(&self, m: &mut Manifest) {
        m.updated_at = self.stamp();
        if let Err(f) = manifests::write(self.manifest, m) {
            self.ground
                .warn(&format!("cannot write the manifest: {}", f.message));
        }
    }
}
