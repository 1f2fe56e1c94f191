//! A phase is run, resumed or decided by one process at a time: the manifest's lock, or the
//! answer of a process that found it held (75, a busy resource, with its JSON line).

use super::Which;
use crate::context::{Answer, Context};
use crate::exit::Failure;
use crate::store::files::Lock;
use crate::store::manifests;
use serde_json::json;
use std::path::Path;

/// Another process holds the phase (EX_TEMPFAIL: try again later).
const BUSY: u8 = 75;

/// The manifest's lock, or the answer of a process that could not take it.
pub enum Held {
    /// Held for the whole run.
    Lock(Lock),
    /// Another process holds it: the refusal to print (exit 75).
    Busy(Answer),
}

/// Takes the manifest's lock for the whole run. A second runner (or a `decide` while one
/// runs) is refused as a busy resource: exit 75 (EX_TEMPFAIL: try again later), its one JSON
/// line on stdout, the reason on stderr.
pub fn hold(cx: &Context, path: &Path, which: &Which) -> Result<Held, Failure> {
    Ok(match manifests::hold(path, cx.lock_wait())? {
        Some(lock) => Held::Lock(lock),
        None => Held::Busy(busy(cx, path, which)),
    })
}

/// The refusal of a process that found the phase's lock held.
fn busy(cx: &Context, path: &Path, which: &Which) -> Answer {
    // For people only: the pid is what the manifest says, and the manifest is not trusted.
    let pid = manifests::read(path, &|_| ())
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
        Answer::text(reason)
    } else {
        say!("triage phase: {}", crate::core::text::printable(&reason));
        Answer::json(&json!({
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
