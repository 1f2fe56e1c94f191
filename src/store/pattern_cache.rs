//! A policy's regexes compiled once per policy content, not once per call: their automata
//! ([`crate::core::pattern`]) are kept in `policy-<hash>.bin` in the user's own cache folder
//! ([`user_dir`]: `$XDG_CACHE_HOME/triage`, else `~/.cache/triage`), named by a hash of the policy
//! text and holding the text itself, and read back by the next call, which then compiles nothing it
//! has seen before.
//!
//! The file also stands for "this policy text loaded without a problem", so a call that finds
//! it skips the policy's validation (parsing every regex, compiling every jq filter and glob)
//! and only parses the TOML. It is trusted only when everything checks: written by this build
//! (a build id), for this very text (compared byte for byte), whole (a checksum), by this user and
//! closed to others (0600, read through the store without following links). Anything else —
//! stale, cut short, corrupt, foreign — is ignored and written anew: a cache can make a call
//! faster, never wrong.
//!
//! None of those checks tells a file triage wrote from one made to pass them: the checksum has
//! no key, the build id can be read from any cache file, and unpacking a tarball or a zip makes
//! its files the user's own and keeps their 0600. So the cache is never kept where a project
//! can bring one: not in the state root (`.triage/` may come in an archive), only in a folder
//! of the user's that no project names — opened without following a link, and refused when
//! it is not the user's or is writable by group or others. Without a usable folder (no `HOME`,
//! a refused one) a call has no cache: it checks and compiles the policy itself, slower and
//! as right. The text's hash only names the file; it is not a defence.
//!
//! Which patterns are matched is the core's business ([`crate::core::pattern`], which knows
//! each pattern's matcher); loading and saving the file is this module's ([`load`], [`save`]).

use crate::core::dfa::Encoded;
use crate::core::pattern::{self, Matcher, Pair, Tier, BUILT};
use crate::store::files;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};

const MAGIC: &[u8; 16] = b"triage-patterns\n";
const FORMAT: u32 = 2;

/// What this build writes into the files it makes: a file from another build (another
/// version, other rules for what a valid policy is, another DFA layout) is stale.
const BUILD_ID: &str = env!("TRIAGE_BUILD_ID");

/// The policy the patterns known in this process belong to.
#[derive(Default)]
struct Registry {
    /// The policy text in force, once it loaded without a problem: only then is the cache
    /// written.
    policy: Option<PolicyText>,
    /// The file was missing or unusable: write it even if no pattern was built.
    fresh: bool,
}

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    let m = R.get_or_init(Mutex::default);
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A policy text as the cache knows it: a hash names its file, and the text itself, kept in
/// the file, is what a file is checked against (a hash collision is a miss, never a hit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyText {
    text: String,
    hash: u64,
}

/// The cache's name for `text`.
pub fn identify(text: &str) -> PolicyText {
    PolicyText {
        text: text.to_string(),
        hash: checksum(text.as_bytes()),
    }
}

/// The user's own cache folder for triage: `$XDG_CACHE_HOME/triage`, else
/// `$HOME/.cache/triage` (the XDG base directory rule: a relative or empty value is ignored);
/// `None` when neither names an absolute folder, and then no call has a cache. A project
/// cannot choose it: both come from the user's environment, never from a file.
pub fn user_dir(xdg_cache_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(xdg_cache_home)
        .or_else(|| absolute(home).map(|h| h.join(".cache")))
        .map(|d| d.join("triage"))
}

/// Where the cache of `policy` lives in the cache folder `dir` (see [`user_dir`]).
pub fn path(dir: &Path, policy: &PolicyText) -> PathBuf {
    dir.join(format!("policy-{:016x}.bin", policy.hash))
}

/// Reads the cache of the policy text `policy` from the cache folder `dir`. `Ok(true)` when
/// it was there and sound: the policy is known to load without a problem, and its automata
/// are installed. `Ok(false)` when it must be made again (missing, stale, cut short,
/// corrupt); `Err` when the store refused what is there (a link, a folder or file of another
/// user's or open to others), which the caller warns about. Then [`policy_loaded`] says
/// whether to write a new one.
pub fn load(dir: &Path, policy: &PolicyText) -> Result<bool, String> {
    let entries = match files::read_private(&path(dir, policy)) {
        Ok(Some(bytes)) => decode(&bytes, policy),
        Ok(None) => None,
        Err(e) if e.is_refused() => return Err(e.to_string()),
        Err(_) => None,
    };
    let Some(entries) = entries else {
        return Ok(false);
    };
    let mut r = registry();
    for e in entries {
        let m = Matcher::new(&e.pattern);
        if let Some(u) = e.usable {
            let _ = m.usable.set(u);
        }
        set(&m.ascii, e.ascii);
        set(&m.unicode, e.unicode);
        pattern::install(m);
    }
    r.policy = Some(policy.clone());
    r.fresh = false;
    Ok(true)
}

fn set(tier: &Tier, value: Option<Option<Pair>>) {
    if let Some(v) = value {
        let _ = tier.set(v);
    }
}

/// The policy text `policy` loaded without a problem, and had no usable cache: one is
/// written at the end of the call ([`save`]).
pub fn policy_loaded(policy: PolicyText) {
    let mut r = registry();
    r.policy = Some(policy);
    r.fresh = true;
}

/// Whether [`save`] has something to write.
pub fn pending() -> bool {
    let r = registry();
    r.policy.is_some() && (r.fresh || BUILT.load(Ordering::Relaxed))
}

/// Writes the cache when this call built automata or found none: in the cache folder `dir`
/// (made 0700 if missing), atomically, 0600. Older caches of other policies beyond the last
/// few are removed. Never fails a call: `Err` says why it was not written, and whether the
/// store refused the place (a link, a loose folder).
pub fn save(dir: &Path) -> Result<(), files::StoreError> {
    let (target, bytes) = {
        let r = registry();
        let Some(policy) = &r.policy else {
            return Ok(());
        };
        if !r.fresh && !BUILT.load(Ordering::Relaxed) {
            return Ok(());
        }
        (path(dir, policy), encode(policy, pattern::all()))
    };
    files::write_cache(&target, &bytes)?;
    BUILT.store(false, Ordering::Relaxed);
    registry().fresh = false;
    prune(&target);
    Ok(())
}

/// Keeps the newest caches (the policies of the user's other projects, an edit undone) and
/// removes the rest, and the temp files of writers killed before their rename (a hook past
/// its deadline) once they are a minute old: a younger one may be another call's, still being
/// written.
fn prune(keep: &Path) {
    const KEEP: usize = 32;
    const TEMP_AGE_NS: i128 = 60 * 1_000_000_000;
    let Some(dir) = keep.parent() else {
        return;
    };
    let Ok(entries) = files::list_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    for e in entries.iter().filter(|e| e.kind == files::Kind::File) {
        let Some(name) = e.name.to_str() else {
            continue;
        };
        if !(name.starts_with(".policy-") && name.contains(".bin.tmp-")) {
            continue;
        }
        let p = dir.join(name);
        if files::modified_ns(&p).is_ok_and(|m| m.is_some_and(|m| now - m > TEMP_AGE_NS)) {
            let _ = files::remove(&p);
        }
    }
    let mut caches: Vec<(i128, PathBuf)> = entries
        .iter()
        .filter(|e| e.kind == files::Kind::File)
        .filter_map(|e| {
            let name = e.name.to_str()?;
            (name.starts_with("policy-") && name.ends_with(".bin")).then(|| dir.join(name))
        })
        .filter(|p| p != keep)
        .filter_map(|p| Some((files::modified_ns(&p).ok()??, p)))
        .collect();
    if caches.len() < KEEP {
        return;
    }
    caches.sort();
    for (_, p) in &caches[..caches.len() + 1 - KEEP] {
        let _ = files::remove(p);
    }
}

// ---------------------------------------------------------------------------------------------
// The file: MAGIC, FORMAT, the build id, the policy text, the entries, a checksum.

fn header(policy: &PolicyText) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    string(&mut out, BUILD_ID);
    string(&mut out, &policy.text);
    out
}

fn encode(policy: &PolicyText, mut patterns: Vec<(String, Arc<Matcher>)>) -> Vec<u8> {
    let mut out = header(policy);
    patterns.sort_by(|a, b| a.0.cmp(&b.0));
    out.extend_from_slice(&(patterns.len() as u32).to_le_bytes());
    for (p, m) in patterns {
        string(&mut out, &p);
        match m.usable.get() {
            None => out.push(0),
            Some(Ok(())) => out.push(1),
            Some(Err(why)) => {
                out.push(2);
                string(&mut out, why);
            }
        }
        for tier in [&m.ascii, &m.unicode] {
            match tier.get() {
                None => out.push(0),
                Some(None) => out.push(1),
                Some(Some(pair)) => {
                    out.push(2);
                    pair.fwd.write(&mut out);
                    pair.rev.write(&mut out);
                }
            }
        }
    }
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn string_at(b: &[u8]) -> Option<(String, &[u8])> {
    let (len, rest) = u32_at(b)?;
    let (s, rest) = rest.split_at_checked(len as usize)?;
    Some((std::str::from_utf8(s).ok()?.to_string(), rest))
}

/// One entry as stored (`None`: not known yet).
struct Entry {
    pattern: String,
    usable: Option<Result<(), String>>,
    ascii: Option<Option<Pair>>,
    unicode: Option<Option<Pair>>,
}

fn decode(bytes: &[u8], policy: &PolicyText) -> Option<Vec<Entry>> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(8)?)?;
    if checksum(body) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    let rest = body.strip_prefix(header(policy).as_slice())?;
    let (count, mut rest) = u32_at(rest)?;
    let mut entries = Vec::new();
    for _ in 0..count {
        let (pattern, r) = string_at(rest)?;
        let (&tag, r) = r.split_first()?;
        rest = r;
        let usable = match tag {
            0 => None,
            1 => Some(Ok(())),
            2 => {
                let (why, r) = string_at(rest)?;
                rest = r;
                Some(Err(why))
            }
            _ => return None,
        };
        let mut tiers = [None, None];
        for t in &mut tiers {
            let (&tag, r) = rest.split_first()?;
            rest = r;
            *t = match tag {
                0 => None,
                1 => Some(None),
                2 => {
                    let (fwd, r) = Encoded::read(rest)?;
                    let (rev, r) = Encoded::read(r)?;
                    rest = r;
                    Some(Some(Pair { fwd, rev }))
                }
                _ => return None,
            };
        }
        let [ascii, unicode] = tiers;
        entries.push(Entry {
            pattern,
            usable,
            ascii,
            unicode,
        });
    }
    rest.is_empty().then_some(entries)
}

fn u32_at(b: &[u8]) -> Option<(u32, &[u8])> {
    let (n, rest) = b.split_at_checked(4)?;
    Some((u32::from_le_bytes(n.try_into().ok()?), rest))
}

/// A fast 64-bit hash: a file's checksum (against a torn or damaged file; not a defence
/// against an attacker, who can compute it too: the cache folder being the user's own is),
/// and a policy text's name.
fn checksum(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: u64 = bytes.len() as u64 ^ K;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h ^ w).wrapping_mul(K).rotate_left(29);
    }
    for &b in chunks.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(K).rotate_left(29);
    }
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests;
