//! Words for the model that could not be given when they arose (a background subagent's
//! rejection: its end is seen at SubagentStop, whose answer goes to the subagent and the
//! user, never to the model that launched it), kept per session until the next hook answer
//! that reaches the model takes them, once.
//!
//! `<root>/sessions/<session>/pending.json`: `{"words": [...]}`, read and written under the
//! lock `sessions/<session>.pending.lock` (beside the folder, which stays empty once every
//! call is complete and every word given), replaced atomically, bounded ([`MAX_WORDS`] entries of at most [`MAX_CHARS`]
//! characters, the oldest dropped first). A file that cannot be read is taken as empty.

use crate::exit::Failure;
use crate::store::files::{self, Backup};
use crate::store::ground::Ground;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Entries kept at most per session.
pub const MAX_WORDS: usize = 8;
/// Characters kept at most per entry.
pub const MAX_CHARS: usize = 2000;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Pending {
    #[serde(default)]
    words: Vec<String>,
}

fn path(g: &Ground, session: &str) -> PathBuf {
    g.root
        .join("sessions")
        .join(files::escape_key(session))
        .join("pending.json")
}

fn lock(g: &Ground, session: &str) -> Result<files::Lock, Failure> {
    let name = format!("{}.pending", files::escape_key(session));
    Ok(files::lock(
        &g.root.join("sessions").join(name),
        g.lock_wait(),
    )?)
}

/// Queues `text` for the model of `session`.
pub fn push(g: &Ground, session: &str, text: &str) -> Result<(), Failure> {
    g.ensure_root()?;
    let path = path(g, session);
    if let Some(dir) = path.parent() {
        files::ensure_dir(dir)?;
    }
    let _lock = lock(g, session)?;
    let mut p: Pending = files::read_optional(&path)
        .or_else(|e| files::unusable(e, |why| g.warn(&format!("{why}; starting it afresh"))))?
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut text: String = text.chars().take(MAX_CHARS).collect();
    if text.chars().count() == MAX_CHARS {
        text.push('…');
    }
    if !p.words.contains(&text) {
        p.words.push(text);
    }
    let over = p.words.len().saturating_sub(MAX_WORDS);
    p.words.drain(..over);
    let bytes = serde_json::to_vec(&p)
        .map_err(|e| Failure::data(format!("cannot serialize the pending words: {e}")))?;
    files::replace(&path, &bytes, Backup::Skip)?;
    Ok(())
}

/// Takes (reads and clears) what is queued for the model of `session`, oldest first.
pub fn take(g: &Ground, session: &str) -> Result<Vec<String>, Failure> {
    let path = path(g, session);
    // The hot path: most answers have nothing queued, and need no lock (nor a read) to know it.
    if files::file_len(&path)?.is_none() {
        return Ok(Vec::new());
    }
    let _lock = lock(g, session)?;
    let bytes = match files::read_optional(&path) {
        Ok(None) => return Ok(Vec::new()),
        Ok(Some(b)) => b,
        // As a corrupt one: removed, nothing taken.
        Err(e) if e.is_too_large() => {
            g.warn(&format!("{e}; dropped it"));
            Vec::new()
        }
        Err(e) => return Err(e.into()),
    };
    files::remove(&path)?;
    let p: Pending = serde_json::from_slice(&bytes).unwrap_or_default();
    // Within the bounds `push` keeps, however the file came to hold more.
    let over = p.words.len() > MAX_WORDS
        || p.words
            .iter()
            .any(|w| w.chars().nth(MAX_CHARS + 1).is_some());
    if over {
        g.warn(&format!(
            "{} held more than {MAX_WORDS} entries of {MAX_CHARS} characters; kept within them",
            path.display()
        ));
    }
    Ok(p.words
        .into_iter()
        .filter(|w| !w.trim().is_empty())
        .take(MAX_WORDS)
        .map(|w| bounded(&w))
        .collect())
}

/// `text` as `push` keeps it: at most [`MAX_CHARS`] characters and the `…` that marks a cut.
fn bounded(text: &str) -> String {
    if text.chars().nth(MAX_CHARS + 1).is_none() {
        return text.to_string();
    }
    let mut out: String = text.chars().take(MAX_CHARS).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::ground::testing::ground;
    use std::time::Duration;

    #[test]
    fn planted_words_are_given_within_the_bounds_push_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let g = ground(dir.path().join(".triage"), Duration::from_secs(5));
        push(&g, "s", &"w".repeat(MAX_CHARS + 10)).unwrap();
        let kept = take(&g, "s").unwrap();
        assert_eq!(kept[0].chars().count(), MAX_CHARS + 1);
        let planted = Pending {
            words: (0..20)
                .map(|i| format!("{i}{}", "x".repeat(100_000)))
                .collect(),
        };
        files::replace(
            &path(&g, "s"),
            &serde_json::to_vec(&planted).unwrap(),
            Backup::Skip,
        )
        .unwrap();
        let given = take(&g, "s").unwrap();
        assert_eq!(given.len(), MAX_WORDS);
        assert!(given
            .iter()
            .all(|w| w.chars().count() == MAX_CHARS + 1 && w.ends_with('…')));
        assert!(given[0].starts_with('0'));
    }
}
