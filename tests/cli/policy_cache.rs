//! A policy's regexes are compiled once per policy content, cached in the user's own cache
//! folder (`$XDG_CACHE_HOME/triage/policy-<hash>.bin`, never the state root), and a cache that
//! is stale, damaged or not the user's own is never trusted: the answer is always the one the
//! policy gives. (A cache a project ships is `hostile_cache.rs`'s.)

use crate::common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;

const POLICY: &str = r#"
[agents.researcher.output]
min_chars = 20
require_all = ['\[\d+\]|https?://|\bdoi:']
forbid = ['(?i)lorem ipsum', '\bTODO\b', '(?i)^\W*(I.m sorry|as an AI)']

[[classify.rules]]
name = "corpus-missing"
match = '(?i)corpus index .* not found'
kind = "corpus_error"
"#;

const OUTPUT: &str =
    r#"{"agent": "researcher", "output": "A review of membranes [1], see doi:10.1/x and more."}"#;

fn cache_files(s: &Sandbox) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(s.cache_dir())
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn check(s: &Sandbox, output: &str) -> (serde_json::Value, String) {
    let out = s
        .triage(["check-output", "--agent", "researcher"])
        .stdin(output.to_string())
        .run();
    (
        json_out(&out),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What a file is: its inode, change time and bytes (a rewrite changes the first two).
fn identity(p: &PathBuf) -> (u64, i64, i64, Vec<u8>) {
    let m = std::fs::metadata(p).unwrap();
    (
        m.ino(),
        m.ctime(),
        m.ctime_nsec(),
        std::fs::read(p).unwrap(),
    )
}

#[test]
fn the_first_call_writes_the_cache_and_the_next_one_only_reads_it() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    let (first, err) = check(&s, OUTPUT);
    assert_eq!(first["ok"], true, "{first}");
    assert!(err.is_empty(), "{err}");
    let files = cache_files(&s);
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("policy-") && name.ends_with(".bin"),
        "{name}"
    );
    let meta = std::fs::metadata(&files[0]).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let before = identity(&files[0]);
    // The second call finds every automaton it needs: it builds none, so it writes nothing.
    let (second, err) = check(&s, OUTPUT);
    assert_eq!(second, first);
    assert!(err.is_empty(), "{err}");
    assert_eq!(identity(&files[0]), before);
    // A forbidden word is still found through the cached automata.
    let (bad, _) = check(
        &s,
        r#"{"agent": "researcher", "output": "see [1]. Lorem Ipsum dolor sit amet"}"#,
    );
    assert_eq!(bad["ok"], false, "{bad}");
    assert!(bad.to_string().contains("Lorem Ipsum"), "{bad}");
}

#[test]
fn a_damaged_cache_is_ignored_and_written_anew() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    let (first, _) = check(&s, OUTPUT);
    let file = cache_files(&s).remove(0);
    let good = std::fs::read(&file).unwrap();
    for damage in [
        good[..good.len() / 2].to_vec(),
        Vec::new(),
        {
            let mut b = good.clone();
            let mid = b.len() / 2;
            b[mid] ^= 0x40;
            b
        },
        b"not a cache at all".to_vec(),
    ] {
        std::fs::write(&file, &damage).unwrap();
        let (again, err) = check(&s, OUTPUT);
        assert_eq!(again, first);
        assert!(err.is_empty(), "{err}");
        assert_eq!(std::fs::read(&file).unwrap(), good, "rewritten whole");
    }
}

#[test]
fn an_edited_policy_gets_a_cache_of_its_own() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    check(&s, OUTPUT);
    let old = cache_files(&s);
    // The old cache is stale for the new text: its answer must not leak in.
    s.write(
        ".triage.toml",
        POLICY.replace("min_chars = 20", "min_chars = 5000"),
    );
    let (v, _) = check(&s, OUTPUT);
    assert_eq!(v["ok"], false, "{v}");
    let now = cache_files(&s);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(now.contains(&old[0]));
}

#[test]
fn a_cache_under_another_policys_name_is_stale() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    check(&s, OUTPUT);
    let other = cache_files(&s).remove(0);
    // A bad policy is never cached, and a cache renamed to its hash is not believed: it is
    // still validated, still refused, with the same warning.
    let bad = "[[classify.rules]]\nname = \"x\"\nmatch = '(unclosed'\n";
    s.write(".triage.toml", bad);
    let planted = crate::common::cache_file(&s.cache_dir(), bad);
    std::fs::copy(&other, &planted).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = s.triage(["classify", "--message", "boom"]).run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad regex `(unclosed`") && err.contains("the whole rule is left out"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&planted).unwrap(),
        std::fs::read(&other).unwrap()
    );
}

#[test]
fn a_cache_others_could_write_is_not_read_and_the_user_is_told() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    let (first, _) = check(&s, OUTPUT);
    let file = cache_files(&s).remove(0);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (again, err) = check(&s, OUTPUT);
    assert_eq!(again, first);
    assert!(
        err.contains("policy cache not read") && err.contains("lets others in"),
        "{err}"
    );
    // Left as it is: triage does not fix what someone else may have planted.
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o666);
}

#[test]
fn classify_rules_use_the_cache_too() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    let run = || {
        let out = s
            .triage([
                "classify",
                "--message",
                "Corpus index at docs/index.json NOT FOUND",
            ])
            .run();
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        json_out(&out)
    };
    let first = run();
    assert_eq!(first["matched_rule"], "config:corpus-missing");
    let file = cache_files(&s).remove(0);
    let before = identity(&file);
    assert_eq!(run(), first);
    assert_eq!(identity(&file), before);
}

#[test]
fn classify_leaves_no_state_root_and_caches_in_the_users_folder() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    s.cmd(&["classify", "--message", "boom"]).assert().success();
    assert!(!s.root().exists());
    assert_eq!(cache_files(&s).len(), 1);
}

#[test]
fn the_cache_folder_is_made_0700_and_a_command_that_writes_state_leaves_no_cache_in_its_root() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    let (first, err) = check(&s, OUTPUT);
    assert_eq!(first["ok"], true, "{first}");
    assert!(err.is_empty(), "{err}");
    let mode = std::fs::metadata(s.cache_dir())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    assert_eq!(cache_files(&s).len(), 1);
    s.cmd(&["breaker", "record", "api", "--outcome", "failure"])
        .assert()
        .success();
    assert!(s.root().is_dir());
    assert!(!s.root().join("cache").exists());
}

/// `check-output` with `XDG_CACHE_HOME` and `HOME` as given (`None`: unset).
fn check_with(
    s: &Sandbox,
    xdg: Option<&std::path::Path>,
    home: Option<&std::path::Path>,
) -> (serde_json::Value, String) {
    let mut c = s.cmd(&["check-output", "--agent", "researcher"]);
    c.env_remove("XDG_CACHE_HOME").env_remove("HOME");
    if let Some(x) = xdg {
        c.env("XDG_CACHE_HOME", x);
    }
    if let Some(h) = home {
        c.env("HOME", h);
    }
    let out = c.write_stdin(OUTPUT).output().unwrap();
    (
        json_out(&out),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn without_a_usable_cache_folder_a_call_is_as_right_and_writes_no_cache() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    let (want, _) = check(&s, OUTPUT);
    // No XDG_CACHE_HOME and no HOME (or only relative ones): no cache anywhere, not even in
    // the current folder, and nothing said.
    for rel in [None, Some(std::path::Path::new("rel"))] {
        let (v, err) = check_with(&s, rel, rel);
        assert_eq!(v, want);
        assert!(err.is_empty(), "{err}");
        assert!(!s.path().join("rel").exists());
        assert!(!s.root().exists());
    }
    // HOME alone: `~/.cache/triage`.
    let home = s.cache_home.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let (v, err) = check_with(&s, None, Some(&home));
    assert_eq!(v, want);
    assert!(err.is_empty(), "{err}");
    assert!(home.join(".cache/triage").is_dir());
    // The folder is a link (to a sound cache folder), or others may write in it: refused,
    // said, the answer the policy's, and nothing written there.
    let linked = s.cache_home.path().join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(home.join(".cache/triage"), linked.join("triage")).unwrap();
    let (v, err) = check_with(&s, Some(&linked), None);
    assert_eq!(v, want);
    assert!(
        err.contains("policy cache not read") && err.contains("symbolic link"),
        "{err}"
    );
    let loose = s.cache_home.path().join("loose");
    std::fs::create_dir_all(loose.join("triage")).unwrap();
    std::fs::set_permissions(loose.join("triage"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let (v, err) = check_with(&s, Some(&loose), None);
    assert_eq!(v, want);
    assert!(
        err.contains("policy cache not read") && err.contains("writable by others"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(loose.join("triage")).unwrap().count(), 0);
}

#[test]
fn a_cache_write_killed_before_its_rename_leaves_the_old_file_and_its_temp_is_cleared_later() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    let (first, _) = check(&s, OUTPUT);
    let file = cache_files(&s).remove(0);
    let good = std::fs::read(&file).unwrap();
    // Damaged, so the next call writes it anew; that call is killed before its rename.
    let damaged = good[..good.len() / 2].to_vec();
    std::fs::write(&file, &damaged).unwrap();
    let killed = s
        .triage(["check-output", "--agent", "researcher"])
        .env("TRIAGE_FAULT", "cache-before-rename:abort")
        .stdin(OUTPUT)
        .run();
    assert!(!killed.status.success(), "{killed:?}");
    // The file is the old one, whole: a reader sees the old bytes or the new ones, never a mix.
    assert_eq!(std::fs::read(&file).unwrap(), damaged);
    let temps: Vec<PathBuf> = std::fs::read_dir(s.cache_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".bin.tmp-"))
        .collect();
    assert_eq!(temps.len(), 1, "the killed writer's temp file: {temps:?}");
    // A young temp may be another call's, still being written: it stays.
    let (again, err) = check(&s, OUTPUT);
    assert_eq!(again, first);
    assert!(err.is_empty(), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), good, "rewritten whole");
    assert!(temps[0].exists());
    // Once it is a minute old, the next write removes it.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    std::fs::File::options()
        .write(true)
        .open(&temps[0])
        .unwrap()
        .set_modified(old)
        .unwrap();
    std::fs::write(&file, b"damaged").unwrap();
    let (third, _) = check(&s, OUTPUT);
    assert_eq!(third, first);
    assert!(!temps[0].exists(), "left behind");
    assert_eq!(std::fs::read(&file).unwrap(), good);
}
