//! `report --prune`: the local log's records older than a cutoff moved to
//! `logs/archive/errors-<stamp>.jsonl` under the log's lock, losing nothing, and the counters
//! rebuilt for the log that is left. A fleet's stream is not pruned here: its retention is
//! the `XADD` trim (`[store] log_max_len`); what this host kept locally is.

use crate::core::error_record::LogLine;
use crate::exit::Failure;
use crate::store::files;
use crate::store::ground::Ground;
use chrono::{DateTime, Utc};
use std::path::{Path, PathBuf};

/// What a prune did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Records moved to the archive.
    pub moved: u64,
    /// Lines left in the log.
    pub kept: u64,
    /// The archive, when something was moved.
    pub archive: Option<PathBuf>,
}

/// Moves the records older than `cutoff` from the log under `root` to a new archive file.
pub fn prune(g: &Ground, root: &Path, cutoff: DateTime<Utc>) -> Result<Pruned, Failure> {
    let log = super::log_path(root);
    let archive_dir = root.join("logs").join("archive");
    files::ensure_dir(&archive_dir)?;
    let archive = archive_dir.join(format!("errors-{}.jsonl", g.stamp()));
    let lock = files::lock(&log, g.lock_wait())?;
    let moved = files::move_lines(&log, &archive, |bytes| {
        LogLine::parse(bytes)
            .and_then(|l| {
                l.timestamp
                    .as_deref()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            })
            .is_some_and(|t| t.with_timezone(&Utc) < cutoff)
    })?;
    drop(lock);
    // The log is another file now: rebuild its counters here, without the lock, rather than
    // in the next hook.
    if let Err(f) = super::refresh_counters(g, root) {
        g.warn(&format!(
            "the counters were not rebuilt after the prune: {f}"
        ));
    }
    Ok(Pruned {
        moved: moved.moved,
        kept: moved.kept,
        archive: (moved.moved > 0).then_some(archive),
    })
}
