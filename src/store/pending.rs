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
    Ok(p.words
        .into_iter()
        .filter(|w| !w.trim().is_empty())
        .take(MAX_WORDS)
        .collect())
}
