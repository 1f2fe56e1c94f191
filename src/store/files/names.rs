//! File names: a key escaped into one safe name, and the names the store derives from a file's
//! own (`.lock`, `.bak`, temp files, `.corrupt-<stamp>`), kept within the 255 bytes a Linux
//! file system allows for one name, so a long state file name can still be locked, backed up
//! and moved aside.

use sha2::{Digest, Sha256};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// The longest file name (one path component) Linux file systems accept, in bytes.
pub const NAME_MAX: usize = 255;

/// Escapes any text into one safe file name: no key can name a path outside its folder.
///
/// Letters, digits, `-` and `_` stay; everything else (including `.`, `/` and bytes of
/// non-ASCII text) becomes `%XX`. A very long key is cut and ends in a hash of the whole key,
/// so two keys never share a file.
pub fn escape_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        return "%".into();
    }
    if out.len() > 180 {
        out.truncate(140);
        // Keep a `%XX` escape whole so the name stays readable.
        while out.len() > 137 && out.as_bytes()[out.len() - 3] == b'%' {
            out.truncate(out.len() - 3);
        }
        out.push('~');
        out.push_str(&hash_hex(key.as_bytes()));
    }
    out
}

/// Undoes [`escape_key`] for keys that were not shortened.
pub fn unescape_key(name: &str) -> Option<String> {
    if name.contains('~') {
        return None;
    }
    if name == "%" {
        return Some(String::new());
    }
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = name.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// 32 hex digits of the SHA-256 of `bytes`.
fn hash_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `name` followed by `suffix`, in at most [`NAME_MAX`] − `reserve` bytes.
///
/// A name that fits is simply `name` + `suffix`, so existing files keep their names. One that
/// does not is cut (at a character boundary when it is text) and followed by `~` and a hash of
/// the whole name before the suffix, so two long names never share a derived file.
pub fn derived(name: &OsStr, suffix: &str, reserve: usize) -> OsString {
    let room = NAME_MAX.saturating_sub(reserve);
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(room);
    if bytes.len() + suffix.len() <= room {
        out.extend_from_slice(bytes);
    } else {
        let hash = hash_hex(bytes);
        let mut keep = room.saturating_sub(suffix.len() + 1 + hash.len());
        // Step back to a character boundary so the cut name stays valid UTF-8 when it was.
        if std::str::from_utf8(bytes).is_ok() {
            while keep > 0 && std::str::from_utf8(&bytes[..keep]).is_err() {
                keep -= 1;
            }
        }
        out.extend_from_slice(&bytes[..keep.min(bytes.len())]);
        out.push(b'~');
        out.extend_from_slice(hash.as_bytes());
    }
    out.extend_from_slice(suffix.as_bytes());
    OsString::from_vec(out)
}

/// The prefix of the temp files that replace `name` (a random part of [`TEMP_RANDOM`] bytes
/// follows it).
pub fn temp_prefix(name: &OsStr) -> OsString {
    let mut dotted = OsString::from(".");
    dotted.push(name);
    derived(&dotted, ".tmp-", TEMP_RANDOM)
}

/// The length of a temp file's random part.
pub const TEMP_RANDOM: usize = 8;

/// Whether `name` is one plain file name: not empty, not `.` or `..`, no `/` and no NUL.
pub fn is_plain(name: &OsStr) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && b != b"." && b != b".." && !b.contains(&b'/') && !b.contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_keys_stay_in_their_folder() {
        for key in [
            "../../etc/passwd",
            "/abs",
            ".",
            "..",
            "a/b",
            "Agent:researcher",
            "",
            "é",
        ] {
            let name = escape_key(key);
            assert!(
                !name.contains('/') && !name.starts_with('.'),
                "{key:?} -> {name}"
            );
            assert_eq!(unescape_key(&name).as_deref(), Some(key));
        }
        assert_eq!(
            escape_key("mcp__github__create_issue"),
            "mcp__github__create_issue"
        );
    }

    #[test]
    fn long_keys_are_shortened_without_collisions() {
        let a = "x".repeat(300);
        let b = format!("{}y", "x".repeat(299));
        assert!(escape_key(&a).len() <= 180);
        assert_ne!(escape_key(&a), escape_key(&b));
        assert_eq!(unescape_key(&escape_key(&a)), None);
    }

    #[test]
    fn derived_names_fit_and_stay_apart() {
        let short = OsStr::new("state.json");
        assert_eq!(derived(short, ".bak", 0), "state.json.bak");
        for len in [200usize, 231, 245, 250, 255] {
            let a = OsString::from("é".repeat(len / 2) + "x");
            let b = OsString::from("é".repeat(len / 2) + "y");
            for suffix in [".lock", ".bak", ".bak.tmp", ".corrupt-20260102T030405Z-17"] {
                let da = derived(&a, suffix, 0);
                assert!(da.len() <= NAME_MAX, "{len} {suffix}: {}", da.len());
                assert!(da.to_str().is_some(), "cut inside a character");
                assert!(da.to_string_lossy().ends_with(suffix));
                assert_ne!(da, derived(&b, suffix, 0));
            }
            assert!(temp_prefix(&a).len() + TEMP_RANDOM <= NAME_MAX);
        }
    }
}
