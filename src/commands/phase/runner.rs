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

use super::{progress, Job};
use crate::commands::run::{self as run_cmd, Args as RunArgs};
use crate::context::Context;
use crate::core::phase::plan::{self, Item};
use crate::core::phase::{ItemState, Manifest};
use crate::exec::child::{scratch, Interrupts};
use crate::exec::wiring::Wiring;
use crate::exit::Failure;
use crate::store::files::{self, Backup};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::OsString;
use std::io::{Read, Seek};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How often the runner looks for ended items and signals.
const POLL: Duration = Duration::from_millis(10);

/// What the runner did.
#[derive(Default)]
pub struct Ran {
    /// The signal that interrupted the phase, if one did.
    pub interrupted: Option<i32>,
    /// Whether the phase's time budget ended with items left.
    pub budget_ended: bool,
    /// Each item's `triage run` report, by id.
    pub reports: BTreeMap<String, Value>,
}

enum Msg {
    Spawned(usize, u32),
    Done(usize, Box<ItemRun>),
}

struct ItemRun {
    result: Result<(u8, Value), Failure>,
    elapsed: Duration,
    /// Where a complete item's output was kept (or why it could not be).
    out: Option<Result<String, String>>,
    /// Where its stderr was kept, when it said anything.
    err: Option<Result<String, String>>,
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
pub fn run(job: &Job, m: &mut Manifest, todo: Vec<usize>) -> Result<Ran, Failure> {
    let interrupts = Interrupts::install()
        .map_err(|e| Failure::io(format!("cannot catch SIGINT/SIGTERM: {e}")))?;
    let cascade = AtomicBool::new(false);
    let started = Instant::now();
    let deadline = job.budget.map(|t| started + t);
    let limit = job
        .plan
        .concurrency
        .map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX));
    let mut ran = Ran::default();
    let (tx, rx) = mpsc::channel::<Msg>();
    let mut pending: VecDeque<usize> = todo.into();
    let mut running: HashMap<usize, Interrupts> = HashMap::new();
    let shared = Shared {
        files: &job.files,
        kill_after: job.kill_after,
        grace: job.grace,
        phase: job.phase,
        session: job.session,
        workflow: job.workflow,
        retry: job.plan.retry,
    };
    let shared = &shared;
    let mut progress = progress::Progress::on_stderr(m.items.len());
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
                if book.written.is_none() {
                    // The first write must work: without a manifest, an interrupt would lose
                    // the phase.
                    book.sync_files(job)?;
                    m.updated_at = job.stamp();
                    super::write_manifest(job.manifest, m)?;
                    book.written = Some(Instant::now());
                    book.dirty = false;
                } else if starting.iter().any(|(i, _)| m.items[*i].side_effects) {
                    if let Err(f) = book.save_durably(job, m) {
                        book.dirty = true;
                        starting.retain_mut(|(i, leave)| {
                            !m.items[*i].side_effects || !unfiled(job, m, *i, leave.take(), &f)
                        });
                    }
                } else {
                    book.save(job, m);
                }
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
                let cx = job.cx.with_policy(job.item_policy(item));
                let tx = tx.clone();
                let cascade = &cascade;
                s.spawn(move || {
                    let told = {
                        let tx = tx.clone();
                        move |pid: u32| {
                            let _ = tx.send(Msg::Spawned(i, pid));
                        }
                    };
                    let r = run_item(shared, item, &cx, &flags, cascade, deadline, &told);
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
                book.dirty = true;
                match msg {
                    Msg::Spawned(i, pid) => {
                        m.items[i].pgid = Some(pid);
                        book.unsaved_groups.insert(i, Instant::now());
                        if let Some(p) = progress.as_mut() {
                            p.attempt(i);
                        }
                    }
                    Msg::Done(i, r) => {
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
                            ran.reports.insert(id, doc.clone());
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
            if book.dirty && !ending && (group_due || due || book.urgent) {
                book.save(job, m);
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
        job.cx
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
    /// When the manifest was last written by this runner.
    written: Option<Instant>,
    /// The manifest changed since.
    dirty: bool,
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

    /// Writes the manifest after the files it names; a failure is a warning.
    fn save(&mut self, job: &Job, m: &mut Manifest) {
        if let Err(f) = self.sync_files(job) {
            job.cx
                .warn(&format!("cannot fsync the items' files: {}", f.message));
        }
        m.updated_at = job.stamp();
        if let Err(f) = super::write_manifest_as(job.manifest, m, false) {
            job.cx
                .warn(&format!("cannot write the manifest: {}", f.message));
        }
        self.written = Some(Instant::now());
        self.dirty = false;
        self.urgent = false;
        self.unsaved_groups.clear();
    }

    /// Writes the manifest durably (the folder fsynced too: not even a power cut loses it),
    /// before an item with side effects starts; a failure is the caller's to handle.
    fn save_durably(&mut self, job: &Job, m: &mut Manifest) -> Result<(), Failure> {
        self.sync_files(job)?;
        m.updated_at = job.stamp();
        super::write_manifest(job.manifest, m)?;
        self.written = Some(Instant::now());
        self.dirty = false;
        self.urgent = false;
        self.unsaved_groups.clear();
        Ok(())
    }
}

/// An item with side effects that could not be filed as running (`why`) is not started: a
/// runner killed while it ran would leave `resume` no trace of it, and it would run twice.
/// Filed as a failure that never ran (a `leave` it had is kept). Returns true.
fn unfiled(job: &Job, m: &mut Manifest, i: usize, leave: Option<String>, why: &Failure) -> bool {
    let e = &mut m.items[i];
    e.rerun = leave;
    e.state = Some(ItemState::Failed);
    e.outcome = Some("not_started".into());
    e.kind = Some("tool_failure".into());
    let note = format!(
        "not started: it has side effects, and the manifest could not record it as running ({})",
        why.message
    );
    record_unrun(job, e, "tool_failure", &note);
    e.note = Some(note);
    true
}

/// What every item's thread reads of the job (the job's context stays on the runner's thread:
/// each item has its own).
struct Shared<'a> {
    files: &'a std::path::Path,
    kill_after: Duration,
    grace: Duration,
    phase: &'a str,
    session: Option<&'a str>,
    workflow: &'a str,
    retry: bool,
}

/// One item's `triage run`, wired to its own files and flags.
fn run_item(
    job: &Shared,
    item: &Item,
    cx: &Context,
    flags: &Interrupts,
    cascade: &AtomicBool,
    deadline: Option<Instant>,
    told: &(dyn Fn(u32) + Sync),
) -> ItemRun {
    let started = Instant::now();
    let files = match (scratch(), scratch()) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => {
            return ItemRun {
                result: Err(Failure::io(format!("cannot make a temp file: {e}"))),
                elapsed: started.elapsed(),
                out: None,
                err: None,
            }
        }
    };
    let checks = item.output.is_some()
        || cx
            .policy()
            .is_ok_and(|p| p.agent(item.agent()).output != Default::default());
    let args = RunArgs {
        agent: Some(item.agent().to_string()),
        timeout: item.timeout,
        kill_after: job.kill_after.into(),
        grace: job.grace.into(),
        phase: Some(job.phase.to_string()),
        session: job.session.map(str::to_string),
        workflow: Some(job.workflow.to_string()),
        task: Some(item.id.clone()),
        breaker: None,
        preserve_partial: Some(job.files.join("partial")),
        name: Some(item.id.clone()),
        until_output_ok: checks,
        report: None,
        command: item
            .command
            .argv()
            .into_iter()
            .map(OsString::from)
            .collect(),
        no_retry: !job.retry,
        // Each attempt's end is in the item's report; the phase's stderr stays readable.
        quiet: true,
        ..RunArgs::default()
    };
    let wiring = Wiring {
        stdin: item.stdin.as_ref().map(|s| Arc::new(s.as_bytes().to_vec())),
        interrupts: flags,
        stdout: Some(&files.0),
        stderr_to: Some(&files.1),
        cwd: None,
        on_spawn: Some(told),
        deadline,
        cascade: Some(cascade),
    };
    let result = run_cmd::attempts(&args, cx, &wiring);
    let elapsed = started.elapsed();
    // Kept here, on the item's own thread, so the items' fsyncs overlap (one journal commit
    // serves many) instead of queueing on the runner's thread. The folder is fsynced once, by
    // the runner, before a manifest that names these files is written.
    let complete = result
        .as_ref()
        .is_ok_and(|(_, doc)| doc["outcome"] == "succeeded");
    let out = complete.then(|| keep(job.files, &item.id, "out", &read_whole(files.0)));
    let stderr = read_whole(files.1);
    let err = (!stderr.is_empty()).then(|| keep(job.files, &item.id, "stderr", &stderr));
    ItemRun {
        result,
        elapsed,
        out,
        err,
    }
}

/// Writes `<files>/<id>.<suffix>` (atomically, fsynced; the folder's fsync is the runner's).
fn keep(files: &std::path::Path, id: &str, suffix: &str, bytes: &[u8]) -> Result<String, String> {
    let path = files.join(format!("{}.{suffix}", files::escape_key(id)));
    files::ensure_dir(files)
        .and_then(|()| files::replace_deferred(&path, bytes, Backup::Skip).map(|_| ()))
        .map(|()| path.display().to_string())
        .map_err(|e| format!("cannot keep the {suffix} of item `{id}`: {e}"))
}

fn read_whole(mut f: std::fs::File) -> Vec<u8> {
    let mut bytes = Vec::new();
    if f.rewind().is_ok() {
        let _ = f.read_to_end(&mut bytes);
    }
    bytes
}

/// Files an ended item in the manifest: its state from `triage run`'s outcome, its output
/// kept when it completed, its stderr kept when it said anything.
fn settle(job: &Job, m: &mut Manifest, i: usize, r: ItemRun) {
    let kept = |k: &Option<Result<String, String>>| match k {
        Some(Ok(path)) => Some(path.clone()),
        Some(Err(why)) => {
            job.cx.warn(why);
            None
        }
        None => None,
    };
    let e = &mut m.items[i];
    e.pgid = None;
    e.ended_at = Some(job.stamp());
    e.duration_ms = Some(u64::try_from(r.elapsed.as_millis()).unwrap_or(u64::MAX));
    e.output = None;
    match &r.result {
        Ok((status, doc)) => {
            let outcome = doc["outcome"].as_str().unwrap_or("failed").to_string();
            let attempts = doc["attempts"].as_array().cloned().unwrap_or_default();
            e.exit_status = Some(*status);
            e.attempts = u32::try_from(attempts.len()).unwrap_or(u32::MAX);
            e.error_ids.extend(
                attempts
                    .iter()
                    .filter_map(|a| a["error_id"].as_str().map(str::to_string)),
            );
            e.partials = doc["preserved_outputs"]
                .as_array()
                .map(|v| {
                    v.iter()
                        .filter_map(|p| p.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            e.state = Some(match outcome.as_str() {
                "succeeded" => ItemState::Complete,
                "interrupted" => ItemState::Partial,
                _ => ItemState::Failed,
            });
            e.kind = match e.state() {
                ItemState::Complete => None,
                _ => attempts
                    .last()
                    .and_then(|a| a["kind"].as_str().map(str::to_string))
                    .or_else(|| (outcome == "breaker_open").then(|| "breaker_open".into())),
            };
            if outcome == "breaker_open" {
                let why = format!(
                    "not run: its breaker {} is open (retry after {})",
                    doc["breaker"]["key"].as_str().unwrap_or(&e.agent),
                    doc["breaker"]["retry_at"].as_str().unwrap_or("a reset")
                );
                e.kind = Some("output_missing".into());
                record_unrun(job, e, "output_missing", &why);
                e.note = Some(why);
            }
            e.outcome = Some(outcome);
        }
        Err(f) => {
            e.state = Some(ItemState::Failed);
            e.outcome = Some("own_failure".into());
            e.note = Some(format!("triage could not run it: {}", f.message));
        }
    }
    if e.state() == ItemState::Complete {
        e.output = kept(&r.out);
    }
    if r.err.is_some() {
        e.stderr = kept(&r.err);
    }
}

/// An item the phase's budget ended before: failed, with a record in the error log so the
/// texts name it.
fn not_reached(job: &Job, m: &mut Manifest, i: usize) {
    let e = &mut m.items[i];
    e.state = Some(ItemState::Failed);
    e.outcome = Some("not_started".into());
    e.kind = Some("timeout".into());
    e.note = Some("not started: the phase's time budget ended first".into());
    let why = format!("not started: phase {}'s time budget ended first", job.phase);
    record_unrun(job, e, "timeout", &why);
}

/// Records an item that never ran (its breaker open, the budget spent): its output is
/// missing as surely as a failed item's, and the texts are rendered from the log.
fn record_unrun(job: &Job, e: &mut crate::core::phase::ItemEntry, kind: &str, why: &str) {
    let Ok(policy) = job.cx.policy() else {
        return;
    };
    let input = json!({ "kind": kind, "message": why });
    let mut rec = crate::core::error_record::classified_record(&input, policy, Some(0));
    rec.session_id = job.session.map(str::to_string);
    rec.workflow_id = Some(job.workflow.to_string());
    rec.phase = Some(crate::core::error_record::Phase::parse(job.phase));
    rec.agent = Some(e.agent.clone());
    rec.task_id = Some(e.id.clone());
    match crate::store::error_log::record(job.cx, rec, Some(job.plan.items.len() as u32)) {
        Ok(done) => e.error_ids.push(done.record.error_id),
        Err(f) => job.cx.warn(&format!(
            "could not record item `{}` in the error log: {f}",
            e.id
        )),
    }
}

impl Job<'_> {
    /// The policy item `item` runs under.
    fn item_policy(&self, item: &Item) -> crate::core::policy::Policy {
        plan::item_policy(&self.policy, self.plan, item)
    }

    /// Writes the manifest; a failure is a warning (the items go on).
    pub fn save(&self, m: &mut Manifest) {
        m.updated_at = self.stamp();
        if let Err(f) = super::write_manifest(self.manifest, m) {
            self.cx
                .warn(&format!("cannot write the manifest: {}", f.message));
        }
    }
}

/// The folder of a phase's item files: `<root>/workflows/<W>/phase-<N>/`.
pub fn files_dir(root: &std::path::Path, workflow: &str, phase: &str) -> PathBuf {
    root.join("workflows")
        .join(files::escape_key(workflow))
        .join(format!("phase-{}", files::escape_key(phase)))
}
