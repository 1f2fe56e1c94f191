//! A project's `.triage/` may have come in a tarball or a zip, and unpacking one makes every
//! file in it the user's own and keeps its mode 0600: nothing a project brings may change what
//! a rule decides. A compiled-policy cache is the sharpest case — it stands for the policy text
//! and is opaque — so a cache planted in the state root, built from another pattern and
//! re-signed for this policy's text (the header's text swapped, the entry renamed, the unkeyed
//! checksum recomputed, this build's id copied from any cache file), is never read.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// The rule the project's policy really has.
const RULE: &str = "(?i)corpus index .* not found";
/// The pattern whose automata the forged cache carries under the rule's name.
const DECOY: &str = "xyzzy plugh";

const REAL_ERROR: &str = "Corpus index at docs/index.json NOT FOUND";

fn policy(pattern: &str) -> String {
    format!(
        "[[classify.rules]]\nname = \"corpus-missing\"\nmatch = '{pattern}'\nkind = \"corpus_error\"\n"
    )
}

/// A length-prefixed string as the cache writes it.
fn string(s: &str) -> Vec<u8> {
    let mut out = (s.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}

/// The `policy-*.bin` files a run left, wherever the build under test keeps them: the user's
/// cache folder, or (older builds) the state root's `cache/`.
fn caches(s: &Sandbox) -> Vec<PathBuf> {
    [s.cache_dir(), s.root().join("cache")]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("policy-") && name.ends_with(".bin")
        })
        .collect()
}

/// `bytes`, the cache of the policy text `from`, made to pass for the cache of `to`: the text
/// in its header replaced, the entry of `DECOY` renamed `RULE` (keeping the decoy's automata)
/// and a checksum that fits.
fn resign(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    // MAGIC (16 bytes), FORMAT (4), the build id, the policy text, the entries, the checksum.
    let build_at = 16 + 4;
    let build_len = u32::from_le_bytes(bytes[build_at..build_at + 4].try_into().unwrap());
    let text_at = build_at + 4 + build_len as usize;
    let old_text = string(from);
    assert_eq!(
        &bytes[text_at..text_at + old_text.len()],
        old_text.as_slice()
    );
    let entries = &bytes[text_at + old_text.len()..bytes.len() - 8];
    let decoy = string(DECOY);
    let at = entries
        .windows(decoy.len())
        .position(|w| w == decoy.as_slice())
        .expect("the decoy's entry");
    let mut out = bytes[..text_at].to_vec();
    out.extend_from_slice(&string(to));
    out.extend_from_slice(&entries[..at]);
    out.extend_from_slice(&string(RULE));
    out.extend_from_slice(&entries[at + decoy.len()..]);
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn matched_rule(s: &Sandbox, message: &str) -> serde_json::Value {
    let out = s.cmd(&["classify", "--message", message]).output().unwrap();
    json_out(&out)["matched_rule"].clone()
}

#[test]
fn a_resigned_cache_shipped_in_a_projects_state_root_never_changes_what_a_rule_decides() {
    // The attacker's own run, with a policy whose rule matches the decoy (a state root exists,
    // so even a build that kept its cache there writes one).
    let forge = Sandbox::new();
    let decoy_policy = policy(DECOY);
    forge.write(".triage.toml", &decoy_policy);
    std::fs::create_dir(forge.root()).unwrap();
    assert_eq!(matched_rule(&forge, DECOY), "config:corpus-missing");
    let made = caches(&forge);
    assert_eq!(made.len(), 1, "{made:?}");
    let real = policy(RULE);
    let forged = resign(&std::fs::read(&made[0]).unwrap(), &decoy_policy, &real);

    // The victim: a fresh project as an archive unpacks it, the forged file in its state root
    // under the real policy's name, the user's own, 0600, in folders 0700.
    let s = Sandbox::new();
    s.write(".triage.toml", &real);
    let dir = s.root().join("cache");
    std::fs::create_dir_all(&dir).unwrap();
    for d in [s.root(), dir.clone()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let planted = cache_file(&dir, &real);
    std::fs::write(&planted, &forged).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o600)).unwrap();

    // The rule decides as the policy says, call after call (the second one from a cache).
    for _ in 0..2 {
        assert_eq!(matched_rule(&s, REAL_ERROR), "config:corpus-missing");
        assert_ne!(matched_rule(&s, DECOY), "config:corpus-missing");
    }
    // The planted file is left as it was, and nothing else is written beside it.
    assert_eq!(std::fs::read(&planted).unwrap(), forged);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);

    // The forgery itself is sound — it passes every check a cache file gets (this build's id,
    // this text, a checksum that fits), so the cache reader would take it, with the decoy's
    // automata — so it is only where it lies that keeps it out.
    // Planted in the user's own cache folder, where a cache is read, it is taken: the rule
    // then decides with the decoy's automata.
    let own = Sandbox::new();
    own.write(".triage.toml", &real);
    let at = cache_file(&own.cache_dir(), &real);
    assert_eq!(at.file_name(), planted.file_name());
    std::fs::create_dir_all(own.cache_dir()).unwrap();
    std::fs::set_permissions(own.cache_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(&at, &forged).unwrap();
    std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        matched_rule(&own, DECOY),
        "config:corpus-missing",
        "the decoy's automata"
    );
    assert_ne!(matched_rule(&own, REAL_ERROR), "config:corpus-missing");
}

/// Everything under `dir`, links not followed: path → content or link target.
fn snapshot(dir: &std::path::Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let what = if m.file_type().is_symlink() {
            format!("link {:?}", std::fs::read_link(&p).unwrap())
        } else if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
            format!("dir {:o}", m.permissions().mode())
        } else {
            format!("file {:?}", std::fs::read(&p).unwrap())
        };
        out.push((p, what));
    }
    out.sort();
    out
}

#[test]
fn a_link_in_place_of_the_users_cache_folder_or_file_changes_nothing_outside() {
    let real = policy(RULE);
    let name = cache_file(std::path::Path::new(""), &real);
    // Links to a file and to a folder outside, in place of the cache folder and of the file.
    for (link_at, to_folder) in [("", true), ("", false), ("f", false), ("f", true)] {
        let s = Sandbox::new();
        s.write(".triage.toml", &real);
        let o = tempfile::tempdir().unwrap();
        let victim_dir = o.path().join("victim-dir");
        std::fs::create_dir(&victim_dir).unwrap();
        std::fs::set_permissions(&victim_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(victim_dir.join(&name), b"keep me").unwrap();
        std::fs::write(o.path().join("victim"), b"keep me").unwrap();
        let target = if to_folder {
            victim_dir.clone()
        } else {
            o.path().join("victim")
        };
        let link = if link_at.is_empty() {
            s.cache_dir()
        } else {
            std::fs::create_dir(s.cache_dir()).unwrap();
            s.cache_dir().join(&name)
        };
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let before = snapshot(o.path());
        let case = format!("{} -> {}", link.display(), target.display());
        let mut stderr = String::new();
        for _ in 0..2 {
            let out = s
                .cmd(&["classify", "--message", REAL_ERROR])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{case}");
            assert_eq!(
                json_out(&out)["matched_rule"],
                "config:corpus-missing",
                "{case}"
            );
            stderr.push_str(&String::from_utf8_lossy(&out.stderr));
        }
        assert_eq!(
            before,
            snapshot(o.path()),
            "{case}: something outside changed"
        );
        assert!(
            stderr.contains("refusing") && stderr.contains("symbolic link"),
            "{case}: no warning names the link:\n{stderr}"
        );
    }
}

/// The error log's counters are a cache of the log too: counters planted beside a missing log
/// (as a tarball would bring them) start no session over its threshold. Failed on 9aa153f:
/// one record then warned "session s1 has 41 unresolved failures".
#[test]
fn planted_counters_beside_an_empty_log_count_for_nothing() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.root().join("logs")).unwrap();
    for d in [s.root(), s.root().join("logs")] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let planted = s.write(
        ".triage/logs/errors.counters.json",
        r#"{"version":2,"log_len":0,"log_ino":0,"seq":7,"sessions":{"s1":40},"units":{}}"#,
    );
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = s
        .cmd(&["record-error", "--session", "s1", "--agent", "a"])
        .write_stdin("connection reset by peer")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_out(&out);
    let said = format!("{v}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        !said.contains("41 unresolved") && v["warnings"].as_array().is_some_and(|w| w.is_empty()),
        "planted counters were believed: {said}"
    );
    assert_eq!(s.session_open("s1"), Some(1), "{said}");
}
