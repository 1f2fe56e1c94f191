//! How often each failure came back in a session (issue 29): one small file per session,
//! `<root>/sessions/<session>.repeats.json`, beside the session's other files (see
//! [`crate::store::sessions`]), read and replaced under its lock. It maps a failure's
//! fingerprint ([`crate::core::repeat::fingerprint`]) to how many times it was seen, when
//! last, and whether the "same command failed the same way 3 times" line was said.
//!
//! Bounded: at most [`MAX_ENTRIES`] fingerprints (the least recently seen go first), and a
//! file larger than [`MAX_BYTES`] or unreadable as JSON is started afresh (a lost count only
//! costs a repeat being taken for a first occurrence). Files of sessions not seen for a day
//! are removed at SessionStart ([`prune`]).

use crate::core::breaker::sane::CLOCK_SKEW_MS;
use crate::exit::Failure;
use crate::store::files::{self, Backup};
use crate::store::ground::Ground;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The most fingerprints kept per session.
pub const MAX_ENTRIES: usize = 200;

/// A file larger than this is not read (it cannot have been written by triage).
const MAX_BYTES: u64 = 64 * 1024;

/// How long a session's file is kept after it was last written.
const TTL_MS: i64 = 24 * 3600 * 1000;

const SUFFIX: &str = ".repeats.json";

/// One fingerprint's count.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Entry {
    /// Times seen in the session, this one included.
    n: u32,
    /// When last seen, Unix milliseconds.
    at_ms: i64,
    /// Whether the third-time line was said.
    #[serde(default)]
    said: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct RepeatsFile {
    #[serde(default)]
    seen: BTreeMap<String, Entry>,
}

/// What [`note`] found: how many times the failure has now been seen in the session, and
/// whether this is the time to say the repeat line (once per fingerprint).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// Times seen, this one included (1 the first time).
    pub count: u32,
    /// True exactly once per fingerprint: the first time `count` reaches `say_at`.
    pub say_now: bool,
}

fn path(g: &Ground, session: &str) -> PathBuf {
    g.root
        .join("sessions")
        .join(format!("{}{SUFFIX}", files::escape_key(session)))
}

/// Counts one more occurrence of `fingerprint` in `session`; says whether the repeat line is
/// due (the `say_at`th occurrence, once).
pub fn note(g: &Ground, session: &str, fingerprint: &str, say_at: u32) -> Result<Seen, Failure> {
    let root = g.ensure_root()?;
    files::ensure_dir(&root.join("sessions"))?;
    let path = path(g, session);
    let _lock = files::lock(&path, g.lock_wait())?;
    let mut file = read(g, &path);
    let now = g.now.timestamp_millis();
    let e = file.seen.entry(fingerprint.to_string()).or_default();
    e.n = e.n.saturating_add(1);
    e.at_ms = now;
    let say_now = !e.said && e.n >= say_at;
    e.said |= say_now;
    let seen = Seen {
        count: e.n,
        say_now,
    };
    while file.seen.len() > MAX_ENTRIES {
        let oldest = file
            .seen
            .iter()
            .filter(|(k, _)| k.as_str() != fingerprint)
            .min_by_key(|(_, e)| e.at_ms)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => file.seen.remove(&k),
            None => break,
        };
    }
    let bytes = serde_json::to_vec(&file)
        .map_err(|e| Failure::data(format!("cannot serialize the repeats file: {e}")))?;
    // A count lost to a power cut only takes a repeat for a first occurrence: no fsync.
    files::replace_unsynced(&path, &bytes, Backup::Skip)?;
    Ok(seen)
}

fn read(g: &Ground, path: &std::path::Path) -> RepeatsFile {
    match files::file_len(path) {
        Ok(Some(len)) if len > MAX_BYTES => {
            g.warn(&format!(
                "{} is larger than {MAX_BYTES} bytes; the session's repeat counts start afresh",
                path.display()
            ));
            return RepeatsFile::default();
        }
        Ok(_) => {}
        Err(e) => {
            g.warn(&format!("the session's repeat counts start afresh: {e}"));
            return RepeatsFile::default();
        }
    }
    match files::read_optional(path) {
        Ok(Some(bytes)) => match serde_json::from_slice::<RepeatsFile>(&bytes) {
            Ok(mut file) => {
                // A count seen in the future, or never seen, is none triage wrote: it would
                // never age out, and would speak of repeats that did not happen.
                let ahead = g.now.timestamp_millis().saturating_add(CLOCK_SKEW_MS);
                let before = file.seen.len();
                file.seen.retain(|_, e| e.n > 0 && e.at_ms <= ahead);
                if file.seen.len() < before {
                    g.warn(&format!(
                        "{} held {} repeat counts no call made (dated in the future, or of no occurrence); dropped them",
                        path.display(),
                        before - file.seen.len()
                    ));
                }
                file
            }
            Err(e) => {
                g.warn(&format!(
                    "{} is not a repeats file ({e}); the session's repeat counts start afresh",
                    path.display()
                ));
                RepeatsFile::default()
            }
        },
        Ok(None) => RepeatsFile::default(),
        Err(e) => {
            g.warn(&format!("the session's repeat counts start afresh: {e}"));
            RepeatsFile::default()
        }
    }
}

/// Removes the repeats files of sessions whose last failure is more than a day old (and any
/// that cannot be read); returns how many. Run at SessionStart.
pub fn prune(g: &Ground) -> usize {
    let sessions = g.root.join("sessions");
    let Ok(entries) = files::list_dir(&sessions) else {
        return 0;
    };
    let now = g.now.timestamp_millis();
    let mut removed = 0;
    for e in entries {
        if !e.name.to_string_lossy().ends_with(SUFFIX) {
            continue;
        }
        let path = sessions.join(&e.name);
        let stale = e.kind != files::Kind::File || {
            let file: Option<RepeatsFile> = files::file_len(&path)
                .ok()
                .flatten()
                .filter(|len| *len <= MAX_BYTES)
                .and_then(|_| files::read_optional(&path).ok().flatten())
                .and_then(|b| serde_json::from_slice(&b).ok());
            file.is_none_or(|f| {
                f.seen.values().all(|e| {
                    now.saturating_sub(e.at_ms) > TTL_MS
                        || e.at_ms > now.saturating_add(CLOCK_SKEW_MS)
                })
            })
        };
        if stale && files::remove(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::ground::testing::ground;
    use std::time::Duration;

    #[test]
    fn planted_counts_dated_in_the_future_are_dropped_and_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let g = ground(dir.path().join(".triage"), Duration::from_secs(5));
        note(&g, "s", "aaaa", 3).unwrap();
        let far = g.now.timestamp_millis() + 3650 * 86_400_000;
        let planted = serde_json::json!({"seen": {
            "aaaa": {"n": 1, "at_ms": g.now.timestamp_millis()},
            "bbbb": {"n": 4_000_000_000u32, "at_ms": far, "said": true},
            "cccc": {"n": 0, "at_ms": 0}
        }});
        files::replace(&path(&g, "s"), planted.to_string().as_bytes(), Backup::Skip).unwrap();
        // The planted count is not taken: the failure is seen for the first time.
        let seen = note(&g, "s", "bbbb", 3).unwrap();
        assert_eq!(seen.count, 1);
        assert_eq!(note(&g, "s", "aaaa", 3).unwrap().count, 2);

        // A file whose only count lies in the future is pruned, not kept for ever.
        let planted = serde_json::json!({"seen": {"dddd": {"n": 1, "at_ms": far}}});
        files::replace(&path(&g, "t"), planted.to_string().as_bytes(), Backup::Skip).unwrap();
        assert_eq!(prune(&g), 1);
        assert!(!path(&g, "t").exists());
        assert!(path(&g, "s").exists());
    }
}
