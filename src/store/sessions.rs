//! What the hooks keep per session between events, under `<root>/sessions/`: the one seam for
//! that state (the hook command only calls these). Kept per host even with a fleet store: a
//! session's hooks all run where the session runs, and these files live for one call.
//!
//! - `<session>/<tool_use_id>.start`: when a guarded call started, its breaker key and probe
//!   ticket. One small file per call, created by PreToolUse and taken by PostToolUse, so that
//!   parallel calls never contend for a lock. A lost one only costs the timeout check.
//! - `<session>/agent-<agent_id>.start` and `agent-<agent_id>.done`: the two halves of a
//!   subagent's call that meet by its `agent_id`. PostToolUse(Agent) knows the call (its
//!   `tool_use_id`, so its start and probe ticket) and the `agentId`; SubagentStop knows the
//!   `agent_id` and how the subagent ended. In the background the call's half comes first
//!   (`async_launched`), in the foreground the end comes first; whichever comes second finds
//!   the other's file and completes the call, under the session's agents lock so that it is
//!   completed exactly once.
//! - `<session>/call-<tool_use_id>.failed`: a foreground subagent call whose failure its
//!   PostToolUseFailure recorded and charged, left for the subagent's StopFailure (the API
//!   failed it) that may come after; the StopFailure that comes first leaves the subagent's
//!   `agent-<agent_id>.done` instead. They meet by agent type within [`JOIN_WINDOW_MS`].
//! - `<session>.json`: the thresholds already announced, read and written under its lock, so
//!   that of many hooks crossing a threshold at once exactly one announces it.

use crate::core::breaker::sane::CLOCK_SKEW_MS;
use crate::core::output_check::Final;
use crate::exit::Failure;
use crate::store::files::{self, Backup};
use crate::store::ground::Ground;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The session used when a payload has none.
const NO_SESSION: &str = "no-session";

/// A guarded call in flight.
#[derive(Debug, Serialize, Deserialize)]
pub struct Start {
    /// The breaker key.
    pub key: String,
    /// The probe ticket `check` gave, to hand back with the outcome.
    pub ticket: Option<String>,
    /// When PreToolUse allowed it, in Unix milliseconds.
    pub at_ms: i64,
}

fn session_dir(g: &Ground, session: Option<&str>) -> PathBuf {
    g.root
        .join("sessions")
        .join(files::escape_key(session.unwrap_or(NO_SESSION)))
}

fn start_name(tool_use_id: &str) -> String {
    format!("{}.start", files::escape_key(tool_use_id))
}

/// Remembers that call `tool_use_id` started now.
pub fn remember_start(
    g: &Ground,
    session: Option<&str>,
    tool_use_id: &str,
    start: &Start,
) -> Result<(), Failure> {
    // One stat on the hot path: ensure_dir creates the root and `sessions/` with it (0700).
    let dir = session_dir(g, session);
    files::ensure_dir(&dir)?;
    let bytes = serde_json::to_vec(start)
        .map_err(|e| Failure::data(format!("cannot serialize the start: {e}")))?;
    // A cache in the store's sense: nobody else writes this call's file, and a torn one is
    // read as missing.
    files::overwrite_cache(&dir.join(start_name(tool_use_id)), &bytes)?;
    Ok(())
}

/// Takes (reads and removes) the start of call `tool_use_id`, if it was kept.
pub fn take_start(g: &Ground, session: Option<&str>, tool_use_id: &str) -> Option<Start> {
    let path = session_dir(g, session).join(start_name(tool_use_id));
    let bytes = match files::read_optional(&path) {
        Ok(b) => b?,
        Err(e) => {
            g.warn(&format!("the call's start time is unusable: {e}"));
            return None;
        }
    };
    if let Err(e) = files::remove(&path) {
        g.trace("warning", &e.to_string());
    }
    let mut start: Start = serde_json::from_slice(&bytes).ok()?;
    // A start in the future is none PreToolUse wrote: the call is taken to have started now.
    let now = g.now.timestamp_millis();
    if start.at_ms > now.saturating_add(CLOCK_SKEW_MS) {
        g.warn(&format!(
            "{} says the call started in the future; taken as started now",
            path.display()
        ));
        start.at_ms = now;
    }
    Some(start)
}

/// A call the client moved to the background at its timeout, kept under its task id until
/// the client reports its end.
#[derive(Debug, Serialize, Deserialize)]
pub struct Task {
    /// The call's `tool_use_id` (the task notification names it too).
    pub tool_use_id: String,
    /// The tool (`Bash`).
    pub tool_name: String,
    /// What it was called with.
    pub tool_input: serde_json::Value,
    /// The timeout it ran past.
    pub timeout_ms: u64,
    /// When it was moved, in Unix milliseconds.
    pub at_ms: i64,
}

fn task_file(g: &Ground, session: Option<&str>, task_id: &str) -> PathBuf {
    session_dir(g, session).join(format!("task-{}.json", files::escape_key(task_id)))
}

/// Remembers the call the client moved to the background as task `task_id`.
pub fn remember_task(
    g: &Ground,
    session: Option<&str>,
    task_id: &str,
    task: &Task,
) -> Result<(), Failure> {
    let dir = session_dir(g, session);
    files::ensure_dir(&dir)?;
    let bytes = serde_json::to_vec(task)
        .map_err(|e| Failure::data(format!("cannot serialize the task: {e}")))?;
    files::overwrite_cache(&task_file(g, session, task_id), &bytes)?;
    Ok(())
}

/// Takes (reads and removes) the call kept as task `task_id`, if any.
pub fn take_task(g: &Ground, session: Option<&str>, task_id: &str) -> Option<Task> {
    take_file(g, &task_file(g, session, task_id))
}

fn agent_file(g: &Ground, session: Option<&str>, agent_id: &str, ext: &str) -> PathBuf {
    session_dir(g, session).join(format!("agent-{}.{ext}", files::escape_key(agent_id)))
}

/// How a subagent ended, kept by SubagentStop until its PostToolUse takes it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Ended {
    /// The verdict.
    pub last: Final,
    /// When it stopped, in Unix milliseconds.
    pub at_ms: i64,
    /// Its breaker key (`agent_type`), for a call that ends without its `agentId`.
    #[serde(default)]
    pub key: String,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Option<T> {
    files::read_optional(path)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

/// Reads and removes a hand-over file. One that is not there is the common case (the other
/// half has not come yet) and costs one open; anything else found under the name (unparsable,
/// a link, not a regular file) is removed as well, so it cannot stand in the way.
fn take_file<T: serde::de::DeserializeOwned>(g: &Ground, path: &std::path::Path) -> Option<T> {
    let found = match files::read_optional(path) {
        Ok(None) => return None,
        Ok(Some(bytes)) => serde_json::from_slice(&bytes).ok(),
        Err(_) => None,
    };
    if let Err(e) = files::remove(path) {
        g.trace("warning", &e.to_string());
    }
    found
}

fn agents_lock(g: &Ground, session: Option<&str>) -> Result<files::Lock, Failure> {
    let root = g.ensure_root()?;
    let dir = session_dir(g, session);
    files::ensure_dir(&dir)?;
    let name = format!(
        "{}.agents",
        files::escape_key(session.unwrap_or(NO_SESSION))
    );
    Ok(files::lock(
        &root.join("sessions").join(name),
        g.lock_wait(),
    )?)
}

/// PostToolUse(Agent)'s half: takes the end SubagentStop left for `agent_id`, if it came
/// first; else, when `park` is given (a background launch), leaves the call's start for
/// SubagentStop to take.
pub fn meet_end(
    g: &Ground,
    session: Option<&str>,
    agent_id: &str,
    park: Option<&Start>,
) -> Result<Option<Ended>, Failure> {
    let _lock = agents_lock(g, session)?;
    let done = agent_file(g, session, agent_id, "done");
    if let Some(ended) = take_file::<Ended>(g, &done) {
        return Ok(Some(ended));
    }
    if let Some(start) = park {
        let bytes = serde_json::to_vec(start)
            .map_err(|e| Failure::data(format!("cannot serialize the start: {e}")))?;
        files::overwrite_cache(&agent_file(g, session, agent_id, "start"), &bytes)?;
    }
    Ok(None)
}

/// SubagentStop's half: takes the call's start PostToolUse(Agent) parked for `agent_id` (a
/// background subagent: SubagentStop completes the call), or leaves the end for the
/// PostToolUse still to come (a foreground one).
pub fn meet_start(
    g: &Ground,
    session: Option<&str>,
    agent_id: &str,
    ended: &Ended,
) -> Result<Option<Start>, Failure> {
    let _lock = agents_lock(g, session)?;
    let parked = agent_file(g, session, agent_id, "start");
    if let Some(start) = take_file::<Start>(g, &parked) {
        return Ok(Some(start));
    }
    let bytes = serde_json::to_vec(ended)
        .map_err(|e| Failure::data(format!("cannot serialize the verdict: {e}")))?;
    files::overwrite_cache(&agent_file(g, session, agent_id, "done"), &bytes)?;
    Ok(None)
}

/// PostToolUseFailure of a subagent call, which carries no `agentId` (a foreground subagent
/// that said nothing ends as a tool failure, "No assistant messages found", after its
/// SubagentStop; one the API failed, "Agent terminated early due to an API error", after its
/// StopFailure): takes the oldest end SubagentStop or StopFailure left in the session for
/// `key`, so that the one failure is not recorded twice. When there is none and `mark` is
/// given (the call's `tool_use_id`), leaves a failed call's mark for `key` that the
/// subagent's StopFailure, should it come after, takes ([`meet_failure`]).
pub fn take_end_for_key(
    g: &Ground,
    session: Option<&str>,
    key: &str,
    mark: Option<&str>,
) -> Option<Ended> {
    let _lock = agents_lock(g, session).ok()?;
    let dir = session_dir(g, session);
    let oldest = list_agent_files(&dir, "done")
        .into_iter()
        .filter_map(|p| read_json::<Ended>(&p).map(|e| (p, e)))
        .filter(|(_, e)| e.key == key)
        .min_by_key(|(_, e)| e.at_ms);
    if let Some((path, _)) = oldest {
        return take_file::<Ended>(g, &path);
    }
    if let Some(tool_use_id) = mark {
        let now = g.now.timestamp_millis();
        sweep_marks(g, &dir, now);
        let m = Mark {
            key: key.to_string(),
            at_ms: now,
        };
        let written = serde_json::to_vec(&m)
            .map_err(|e| Failure::data(format!("cannot serialize the mark: {e}")))
            .and_then(|b| {
                Ok(files::overwrite_cache(
                    &dir.join(mark_name(tool_use_id)),
                    &b,
                )?)
            });
        if let Err(f) = written {
            g.warn(&format!(
                "the failed call was not marked for its subagent's StopFailure: {f}"
            ));
        }
    }
    None
}

/// How long the two reports of one subagent the API failed (its StopFailure, its parent's
/// PostToolUseFailure) are taken for the same failure: the client sends them within
/// moments of each other, whichever hook runs first.
pub const JOIN_WINDOW_MS: i64 = 120_000;

/// A failed subagent call already recorded and charged at its PostToolUseFailure, left for
/// the subagent's StopFailure still to come: `call-<tool_use_id>.failed`.
#[derive(Debug, Serialize, Deserialize)]
struct Mark {
    /// The breaker key (the agent type).
    key: String,
    /// When it failed, in Unix milliseconds.
    at_ms: i64,
}

fn mark_name(tool_use_id: &str) -> String {
    format!("call-{}.failed", files::escape_key(tool_use_id))
}

/// The regular files of `dir` named `<prefix>-….<ext>` (agent ends, call marks).
fn list_agent_files(dir: &std::path::Path, ext: &str) -> Vec<PathBuf> {
    let prefix = if ext == "failed" { "call-" } else { "agent-" };
    files::list_dir(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.kind == files::Kind::File)
        .map(|e| dir.join(e.name))
        .filter(|p| {
            p.extension().is_some_and(|e| e == ext)
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect()
}

/// Removes the marks older than [`JOIN_WINDOW_MS`] (no StopFailure came for them: a
/// subagent that failed otherwise), so the folder does not keep them.
fn sweep_marks(g: &Ground, dir: &std::path::Path, now: i64) {
    for path in list_agent_files(dir, "failed") {
        let stale = read_json::<Mark>(&path).is_none_or(|m| now - m.at_ms > JOIN_WINDOW_MS);
        if stale {
            if let Err(e) = files::remove(&path) {
                g.trace("warning", &e.to_string());
            }
        }
    }
}

/// What a subagent's StopFailure found of its call.
#[derive(Debug)]
pub enum FailureMet {
    /// The start its background launch parked: the call is completed at the StopFailure.
    Parked(Start),
    /// Its foreground call's PostToolUseFailure came first and recorded and charged the
    /// failure.
    Joined,
    /// Neither: its end is left for the PostToolUse or PostToolUseFailure still to come.
    Left,
}

/// A subagent's StopFailure (the API failed it; it carries `agent_id` and `agent_type`,
/// never the call's `tool_use_id`, and no SubagentStop follows): takes the start a
/// background launch parked for `agent_id`; else takes the newest mark a PostToolUseFailure
/// left for the same agent type within [`JOIN_WINDOW_MS`]; else leaves `ended` for the call's
/// half still to come, as SubagentStop does. One lock hold, so the two reports of one failure
/// meet exactly once, whichever comes first.
pub fn meet_failure(
    g: &Ground,
    session: Option<&str>,
    agent_id: &str,
    ended: &Ended,
) -> Result<FailureMet, Failure> {
    let _lock = agents_lock(g, session)?;
    let parked = agent_file(g, session, agent_id, "start");
    if let Some(start) = take_file::<Start>(g, &parked) {
        return Ok(FailureMet::Parked(start));
    }
    let dir = session_dir(g, session);
    let now = ended.at_ms;
    let newest = list_agent_files(&dir, "failed")
        .into_iter()
        .filter_map(|p| read_json::<Mark>(&p).map(|m| (p, m)))
        .filter(|(_, m)| m.key == ended.key && (now - m.at_ms).abs() <= JOIN_WINDOW_MS)
        .max_by_key(|(_, m)| m.at_ms);
    if let Some((path, _)) = newest {
        if let Err(e) = files::remove(&path) {
            g.trace("warning", &e.to_string());
        }
        return Ok(FailureMet::Joined);
    }
    let bytes = serde_json::to_vec(ended)
        .map_err(|e| Failure::data(format!("cannot serialize the verdict: {e}")))?;
    files::overwrite_cache(&agent_file(g, session, agent_id, "done"), &bytes)?;
    Ok(FailureMet::Left)
}

/// What every hand-over file of a session holds: when it was written.
#[derive(Deserialize)]
struct Stamped {
    at_ms: i64,
}

/// How long a call's start is kept when no PostToolUse takes it (a session that crashed, a
/// call another hook denied): longer than any agent runs.
const START_TTL_MS: i64 = 24 * 3600 * 1000;

/// Removes the starts (and subagent ends) that nothing took within [`START_TTL_MS`], and the
/// session folders left empty; returns how many it removed. Run at SessionStart, so the
/// folder does not grow with every crashed session.
pub fn prune_starts(g: &Ground) -> usize {
    let now = g.now.timestamp_millis();
    let sessions = g.root.join("sessions");
    // Under the state root a linked `sessions/` or session folder is refused by the store,
    // so nothing is ever deleted through a link.
    let folders = match files::list_dir(&sessions) {
        Ok(f) => f,
        Err(e) => {
            g.warn(&format!("call starts not pruned: {e}"));
            return 0;
        }
    };
    let mut removed = 0;
    // A link among them is listed so the store refuses it (with the warning below).
    let folders = folders
        .into_iter()
        .filter(|e| matches!(e.kind, files::Kind::Dir | files::Kind::Link));
    for folder in folders {
        let dir = sessions.join(&folder.name);
        let files = match files::list_dir(&dir) {
            Ok(f) => f,
            Err(e) => {
                g.warn(&format!("call starts not pruned: {e}"));
                continue;
            }
        };
        for file in files {
            let ext = std::path::Path::new(&file.name)
                .extension()
                .and_then(|e| e.to_str())
                .map(str::to_string);
            // A moved command's task whose end never came (the session ended first) goes
            // with the starts.
            let task =
                file.name.to_string_lossy().starts_with("task-") && ext.as_deref() == Some("json");
            if !task
                && !matches!(
                    ext.as_deref(),
                    Some("start" | "done" | "failed" | "stopped")
                )
            {
                continue;
            }
            let path = dir.join(&file.name);
            if file.kind != files::Kind::File {
                // Planted: a link or a FIFO. Its name goes (never what a link points to).
                if files::remove(&path).is_ok() {
                    let what = match file.kind {
                        files::Kind::Link => "a symbolic link",
                        _ => "not a regular file",
                    };
                    g.warn(&format!(
                        "refusing {}: it is {what}; removed it (a call start is a regular file)",
                        path.display()
                    ));
                }
                continue;
            }
            // Every one of them says when it was written.
            let at = read_json::<Stamped>(&path).map(|s| s.at_ms);
            // An unreadable start is as good as gone, and so is one dated in the future (none
            // that a hook wrote): it would never age out.
            let stale = at.is_none_or(|at| {
                now.saturating_sub(at) > START_TTL_MS || at > now.saturating_add(CLOCK_SKEW_MS)
            });
            if stale && files::remove(&path).is_ok() {
                removed += 1;
            }
        }
        // Fails, as it should, while the folder still holds a start.
        files::remove_empty_dir(&dir);
    }
    removed
}

/// The per-session file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct SessionFile {
    /// Threshold names already announced in this session.
    #[serde(default)]
    announced: Vec<String>,
}

/// Of `names`, those not announced before in `session`; they are marked announced.
pub fn first_announcements(
    g: &Ground,
    session: &str,
    names: &[&str],
) -> Result<Vec<String>, Failure> {
    let root = g.ensure_root()?;
    files::ensure_dir(&root.join("sessions"))?;
    let path = root
        .join("sessions")
        .join(format!("{}.json", files::escape_key(session)));
    let _lock = files::lock(&path, g.lock_wait())?;
    let mut file: SessionFile = files::read_optional(&path)
        .or_else(|e| files::unusable(e, |why| g.warn(&format!("{why}; starting it afresh"))))?
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let fresh: Vec<String> = names
        .iter()
        .filter(|n| !file.announced.iter().any(|a| a == *n))
        .map(|n| n.to_string())
        .collect();
    if fresh.is_empty() {
        return Ok(fresh);
    }
    file.announced.extend(fresh.iter().cloned());
    let bytes = serde_json::to_vec(&file)
        .map_err(|e| Failure::data(format!("cannot serialize the session file: {e}")))?;
    files::replace(&path, &bytes, Backup::Skip)?;
    Ok(fresh)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::ground::testing::ground;
    use std::time::Duration;

    #[test]
    fn a_start_dated_in_the_future_is_taken_as_now_and_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let g = ground(dir.path().join(".triage"), Duration::from_secs(5));
        let now = g.now.timestamp_millis();
        let far = now + 3650 * 86_400_000;
        let start = |at_ms| Start {
            key: "k".into(),
            ticket: None,
            at_ms,
        };
        remember_start(&g, Some("s"), "t1", &start(far)).unwrap();
        assert_eq!(take_start(&g, Some("s"), "t1").unwrap().at_ms, now);
        // Within the clock skew a start is taken as written.
        remember_start(&g, Some("s"), "t2", &start(now + 1000)).unwrap();
        assert_eq!(take_start(&g, Some("s"), "t2").unwrap().at_ms, now + 1000);

        remember_start(&g, Some("s"), "t3", &start(far)).unwrap();
        remember_start(&g, Some("s"), "t4", &start(now)).unwrap();
        assert_eq!(prune_starts(&g), 1);
        assert!(take_start(&g, Some("s"), "t3").is_none());
        assert!(take_start(&g, Some("s"), "t4").is_some());
    }
}
