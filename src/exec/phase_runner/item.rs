//! One work item of a phase: its `triage run` attempt loop wired to its own files and flags,
//! and its end filed in the manifest (an item that never ran is recorded in the error log, so
//! the texts name it).

use super::Job;
use crate::core::phase::plan::{Item, Limits, PERMIT_WAIT};
use crate::core::phase::{ItemState, Manifest};
use crate::core::policy::Policy;
use crate::exec::attempts::{self, Request};
use crate::exec::child::{scratch, Interrupts};
use crate::exec::group_proof;
use crate::exec::wiring::Wiring;
use crate::exit::Failure;
use crate::store::files::{self, Backup};
use crate::store::ground::Ground;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::io::{Read, Seek};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An item with side effects that could not be filed as running (`why`) is not started: a
/// runner killed while it ran would leave `resume` no trace of it, and it would run twice.
/// Filed as a failure that never ran (a `leave` it had is kept). Returns true.
pub(super) fn unfiled(
    job: &Job,
    m: &mut Manifest,
    i: usize,
    leave: Option<String>,
    why: &Failure,
) -> bool {
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

pub(super) struct ItemRun {
    pub(super) result: Result<(u8, Value), Failure>,
    pub(super) elapsed: Duration,
    /// Where a complete item's output was kept (or why it could not be).
    pub(super) out: Option<Result<String, String>>,
    /// Where its stderr was kept, when it said anything.
    pub(super) err: Option<Result<String, String>>,
}

/// What every item's thread reads of the job (the job's ground stays on the runner's thread:
/// each item has its own).
pub(super) struct Shared<'a> {
    pub(super) seed: u64,
    pub(super) files: &'a std::path::Path,
    pub(super) kill_after: Duration,
    pub(super) grace: Duration,
    pub(super) phase: &'a str,
    pub(super) session: Option<&'a str>,
    pub(super) workflow: &'a str,
    pub(super) retry: bool,
    /// The plan's `[defaults]` for every item's fallback, deadline, idle timeout, permit and
    /// budget.
    pub(super) defaults: &'a Limits,
}

/// One item's `triage run` under its own ground and `policy`, wired to its own files and flags.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_item(
    job: &Shared,
    item: &Item,
    g: &Ground,
    policy: &Policy,
    flags: &Interrupts,
    cascade: &AtomicBool,
    deadline: Option<Instant>,
    told: &(dyn Fn(u32) + Sync),
    waits: &(dyn Fn(Duration, u32, Option<u32>) + Sync),
    token: &str,
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
    let checks = item.output.is_some() || policy.agent(item.agent()).output != Default::default();
    let limits = item.limits(job.defaults);
    // An item waits its turn for a permit the items before it hold, but never past the
    // phase's budget.
    let permit_wait = limits.permit.as_ref().map(|_| {
        let wait = limits.permit_wait.map_or(PERMIT_WAIT, |d| d.0);
        crate::core::duration::Dur(deadline.map_or(wait, |d| {
            wait.min(d.saturating_duration_since(Instant::now()))
        }))
    });
    let request = Request {
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
        command: item
            .command
            .argv()
            .into_iter()
            .map(OsString::from)
            .collect(),
        no_retry: !job.retry,
        deadline: limits.deadline,
        idle_timeout: limits.idle_timeout,
        fallback: limits.fallback,
        permit: limits.permit,
        permit_wait,
        budget: limits.budget,
        // Each attempt's end is in the item's report; the phase's stderr stays readable.
        quiet: true,
        ..Request::default()
    };
    let wiring = Wiring {
        stdin: item.stdin.as_ref().map(|s| Arc::new(s.as_bytes().to_vec())),
        interrupts: flags,
        stdout: Some(&files.0),
        stderr_to: Some(&files.1),
        cwd: None,
        on_spawn: Some(told),
        on_wait: Some(waits),
        deadline,
        cascade: Some(cascade),
        seed: job.seed,
        env: &[(group_proof::TOKEN_VAR.to_string(), token.to_string())],
    };
    let result = attempts::run(&request, g, policy, &wiring);
    let elapsed = started.elapsed();
    // Kept here, on the item's own thread, so the items' fsyncs overlap (one journal commit
    // serves many) instead of queueing on the runner's thread. The folder is fsynced once, by
    // the runner, before a manifest that names these files is written.
    // A fallback that ran in its place gives the item its output (degraded).
    let complete = result
        .as_ref()
        .is_ok_and(|(_, doc)| doc["outcome"] == "succeeded" || doc["outcome"] == "fallback");
    // What an item printed is outside text like any command's: kept with its credentials
    // replaced by markers.
    let redactor = policy.redact.redactor();
    let out = complete.then(|| {
        let bytes = read_whole(files.0);
        keep(job.files, &item.id, "out", &redactor.bytes(&bytes))
    });
    let stderr = redactor.bytes(&read_whole(files.1)).into_owned();
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
pub(super) fn settle(job: &Job, m: &mut Manifest, i: usize, r: ItemRun) {
    let kept = |k: &Option<Result<String, String>>| match k {
        Some(Ok(path)) => Some(path.clone()),
        Some(Err(why)) => {
            job.ground.warn(why);
            None
        }
        None => None,
    };
    let e = &mut m.items[i];
    e.pgid = None;
    e.group = None;
    e.ended_at = Some(job.stamp());
    e.duration_ms = Some(u64::try_from(r.elapsed.as_millis()).unwrap_or(u64::MAX));
    e.output = None;
    e.degraded = false;
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
                "succeeded" | "fallback" => ItemState::Complete,
                "interrupted" => ItemState::Partial,
                _ => ItemState::Failed,
            });
            e.degraded = outcome == "fallback";
            // Interrupted while it waited for its permit: it never ran, so nothing of it is
            // partial (and an item with side effects needs no decision).
            if outcome == "interrupted" && doc["permit"]["acquired"] == false {
                e.state = Some(ItemState::NotStarted);
                e.note = Some(format!(
                    "not started: interrupted while it waited for a permit of `{}`",
                    doc["permit"]["key"].as_str().unwrap_or_default()
                ));
            }
            e.kind = match e.state() {
                ItemState::Complete => None,
                _ => attempts
                    .last()
                    .and_then(|a| a["kind"].as_str().map(str::to_string))
                    .or_else(|| (outcome == "breaker_open").then(|| "breaker_open".into())),
            };
            let open = || {
                format!(
                    "its breaker {} is open (retry after {})",
                    doc["breaker"]["key"].as_str().unwrap_or(&e.agent),
                    doc["breaker"]["retry_at"].as_str().unwrap_or("a reset")
                )
            };
            match outcome.as_str() {
                // Refused before it ran: nothing of it failed. It waits, not started, for the
                // breaker to let it through (a resume runs it then).
                "breaker_open" => {
                    e.state = Some(ItemState::NotStarted);
                    e.kind = None;
                    e.note = Some(format!(
                        "not started: {}; `phase resume` runs it once the breaker lets it",
                        open()
                    ));
                }
                // Seed 002's `proceed_without_section`: what stands in for it is its output.
                "fallback" => {
                    e.note = Some(format!(
                        "degraded: {}, so its fallback ran in its place",
                        open()
                    ));
                }
                "fallback_failed" => {
                    let why = format!(
                        "not run: {}, and its fallback {}",
                        open(),
                        doc["fallback"]["end"].as_str().unwrap_or("failed")
                    );
                    e.kind = Some("output_missing".into());
                    record_unrun(job, e, "output_missing", &why);
                    e.note = Some(why);
                }
                "permit_busy" => {
                    let p = &doc["permit"];
                    let why = format!(
                        "not run: no permit of `{}` was free ({} of {} held) after waiting {}",
                        p["key"].as_str().unwrap_or_default(),
                        p["held"],
                        p["max"],
                        p["waited"].as_str().unwrap_or("0s")
                    );
                    e.kind = Some("overloaded".into());
                    record_unrun(job, e, "overloaded", &why);
                    e.note = Some(why);
                }
                _ => {}
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
pub(super) fn not_reached(job: &Job, m: &mut Manifest, i: usize) {
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
    let input = json!({ "kind": kind, "message": why });
    let mut rec = crate::core::error_record::classified_record(&input, job.base, Some(0));
    rec.session_id = job.session.map(str::to_string);
    rec.workflow_id = Some(job.workflow.to_string());
    rec.phase = Some(crate::core::error_record::Phase::parse(job.phase));
    rec.agent = Some(e.agent.clone());
    rec.task_id = Some(e.id.clone());
    match crate::store::error_log::record(
        job.ground,
        job.base,
        rec,
        Some(job.plan.items.len() as u32),
    ) {
        Ok(done) => e.error_ids.push(done.record.error_id),
        Err(f) => job.ground.warn(&format!(
            "could not record item `{}` in the error log: {f}",
            e.id
        )),
    }
}
