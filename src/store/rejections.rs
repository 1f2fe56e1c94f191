//! The loop guard's counters (`check-output --hook`, the Stop and SubagentStop hooks): one
//! counter of consecutive rejections per session and agent, under
//! `<root>/rejections/<session>/<agent>.json`, read and written under its lock. Kept per host
//! even with a fleet store: a session's hooks run where the session runs.

use crate::exit::Failure;
use crate::store::files::{self, Backup};
use crate::store::ground::Ground;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Where the counter of `key` in `session` is.
pub fn counter_path(g: &Ground, session: &str, key: &str) -> PathBuf {
    g.root
        .join("rejections")
        .join(files::escape_key(session))
        .join(format!("{}.json", files::escape_key(key)))
}

/// The counter's value (0 when missing or unreadable).
pub fn read_count(path: &Path) -> Result<u32, Failure> {
    // One over its size bound is as unreadable as a corrupt one.
    Ok(files::read_optional(path)
        .or_else(|e| files::unusable(e, |_| {}))?
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v.get("count").and_then(Value::as_u64))
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)))
}

/// One more consecutive rejection, counted under the counter's lock.
pub fn bump(g: &Ground, path: &Path, agent: &str) -> Result<u32, Failure> {
    if let Some(dir) = path.parent() {
        g.ensure_root()?;
        files::ensure_dir(dir)?;
    }
    let _lock = files::lock(path, g.lock_wait())?;
    let count = read_count(path)?.saturating_add(1);
    let doc = json!({"agent": agent, "count": count, "updated": g.now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)});
    files::replace(path, doc.to_string().as_bytes(), Backup::Skip)?;
    Ok(count)
}

/// Back to zero (a passing output, or an agent let go). Nothing is written when it is zero.
pub fn reset(g: &Ground, path: &Path) -> Result<(), Failure> {
    if !path.exists() {
        return Ok(());
    }
    let _lock = files::lock(path, g.lock_wait())?;
    if read_count(path)? == 0 {
        return Ok(());
    }
    let doc =
        json!({"count": 0, "updated": g.now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)});
    files::replace(path, doc.to_string().as_bytes(), Backup::Skip)?;
    Ok(())
}
