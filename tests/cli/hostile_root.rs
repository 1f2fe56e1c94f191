//! Issue 14, the store half: the state root as hostile ground. Links planted for every file
//! and folder the store touches, a root owned by someone else or writable by others, FIFOs
//! where files are expected, file modes under any umask, busy locks, torn appends. Nothing
//! outside the root may change, the hook exits 0, and a warning says what was refused.

use crate::common::{bin, json_out, Run, Sandbox};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const T0: &str = "2026-11-23T10:00:00Z";

/// A hook payload for session `s1` and the subagent `researcher`.
fn payload(event: &str, tool_use_id: &str) -> String {
    format!(
        r#"{{"hook_event_name":"{event}","session_id":"s1","tool_name":"Agent","tool_use_id":"{tool_use_id}","tool_input":{{"subagent_type":"researcher"}},"error":"boom","source":"startup"}}"#
    )
}

/// A hook run on `input` in `s`, with a clean environment.
fn hook(s: &Sandbox, input: &str) -> Run {
    s.triage(["hook"])
        .env("TRIAGE_NOW", T0)
        .stdin(input.to_string())
        .run()
}

/// Every kind of call a session makes: SessionStart (prunes starts, lists and repairs
/// breakers), two guarded calls that fail (starts, error log, counters, breaker, its events
/// when it opens, the session's announcements), `breaker status`, and StopFailure.
fn scenario(s: &Sandbox) -> Vec<Run> {
    let mut outs = vec![hook(s, &payload("SessionStart", "-"))];
    for t in ["t1", "t2"] {
        outs.push(hook(s, &payload("PreToolUse", t)));
        outs.push(hook(s, &payload("PostToolUseFailure", t)));
    }
    outs.push(s.triage(["breaker", "status"]).env("TRIAGE_NOW", T0).run());
    outs.push(hook(
        s,
        r#"{"hook_event_name":"StopFailure","session_id":"s1","error":"rate_limit"}"#,
    ));
    outs
}

/// The policy and the earlier state the scenario works on: a stale start of an old session
/// and a corrupt breaker state (each skipped where a link takes its place).
fn prepare(s: &Sandbox, link_at: &str) {
    s.write(".triage.toml", POLICY);
    let plant = |rel: &str, body: &str| {
        let under_link =
            !link_at.is_empty() && (rel == link_at || rel.starts_with(&format!("{link_at}/")));
        if link_at.is_empty() || under_link {
            return;
        }
        let p = s.root().join(rel);
        mkdirs(p.parent().unwrap());
        std::fs::write(p, body).unwrap();
    };
    plant(
        "sessions/s0/old.start",
        r#"{"key":"x","ticket":null,"at_ms":0}"#,
    );
    plant("breakers/broken.json", "{");
}

fn mkdirs(dir: &Path) {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .unwrap();
}

/// Everything under `dir`, links not followed: path → kind, mode, and content or target.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let mode = m.permissions().mode();
        let what = if m.file_type().is_symlink() {
            format!("link {:?}", std::fs::read_link(&p).unwrap())
        } else if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
            "dir".to_string()
        } else if m.is_file() {
            use std::hash::{Hash, Hasher};
            let bytes = std::fs::read(&p).unwrap();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut h);
            let text = String::from_utf8_lossy(&bytes);
            let head: String = text.chars().take(80).collect();
            format!("file {} bytes #{:x} {head:?}", bytes.len(), h.finish())
        } else {
            "other".to_string()
        };
        out.insert(
            p.strip_prefix(dir).unwrap().to_path_buf(),
            format!("{mode:o} {what}"),
        );
    }
    out
}

/// Outside the root: a file and a folder that looks like the store's own.
fn outside() -> tempfile::TempDir {
    let o = tempfile::tempdir().unwrap();
    std::fs::write(o.path().join("victim"), "keep me\n").unwrap();
    let d = o.path().join("victim-dir");
    std::fs::create_dir(&d).unwrap();
    for (name, body) in [
        ("old.start", r#"{"key":"x","ticket":null,"at_ms":0}"#),
        (
            "t1.start",
            r#"{"key":"researcher","ticket":null,"at_ms":0}"#,
        ),
        ("broken.json", "{"),
        ("researcher.json", "{"),
        ("s1.json", "{"),
        ("errors.jsonl", "{\"error_id\":\"e\"}\n"),
        (
            "err-20200101T000000000Z-p1x1.json",
            "{\"error_id\":\"p\"}\n",
        ),
    ] {
        std::fs::write(d.join(name), body).unwrap();
    }
    o
}

/// Files the store touches in the scenario, relative to the root.
const FILES: &[&str] = &[
    "logs/errors.jsonl",
    "logs/errors.jsonl.lock",
    "logs/errors.counters.json",
    "logs/triage.log",
    "logs/triage.log.lock",
    "logs/breaker-events.jsonl",
    "logs/breaker-events.jsonl.lock",
    "breakers/researcher.json",
    "breakers/researcher.json.lock",
    "breakers/broken.json",
    "breakers/broken.json.lock",
    // The API's breaker hears of every subagent call.
    "breakers/api.json",
    "breakers/api.json.lock",
    "sessions/s1.json",
    "sessions/s1.json.lock",
    // How often each failure came back in the session.
    "sessions/s1.repeats.json",
    "sessions/s1.repeats.json.lock",
    // A subagent call's two halves meet under it (PostToolUseFailure of the Agent tool).
    "sessions/s1.agents.lock",
    "sessions/s1/t1.start",
    // The failed subagent call's mark, for its StopFailure still to come.
    "sessions/s1/call-t1.failed",
    "sessions/s1/call-t2.failed",
    "sessions/s0/old.start",
];

const POLICY: &str = "[thresholds]\nsession_failures = 1\n";

/// Folders the store touches in the scenario ("" is the root itself). (No `cache/`: compiled
/// policies are kept in the user's cache folder, see `hostile_cache.rs`.)
const DIRS: &[&str] = &[
    "",
    "logs",
    "breakers",
    "sessions",
    "sessions/s1",
    "sessions/s0",
    "logs/errors.pending",
];

#[test]
fn the_matrix_covers_every_file_and_folder_the_scenario_touches() {
    let s = Sandbox::new();
    prepare(&s, "-");
    for out in scenario(&s) {
        out.status(0);
    }
    for (rel, what) in snapshot(&s.root()) {
        let rel = rel.to_string_lossy().into_owned();
        // The root's own `.gitignore` is only ever made where nothing is (see
        // `state_root_git.rs`): whatever is there, a link included, is left alone.
        if rel.contains(".corrupt-") || rel == ".gitignore" {
            continue;
        }
        let listed = if what.contains(" dir") {
            DIRS.contains(&rel.as_str())
        } else {
            FILES.contains(&rel.as_str())
        };
        assert!(
            listed,
            "{rel} ({what}) is touched but not in the link matrix"
        );
    }
}

fn run_with_link(link_at: &str, to_folder: bool) {
    let s = Sandbox::new();
    let o = outside();
    prepare(&s, link_at);
    let link = if link_at.is_empty() {
        s.root()
    } else {
        s.root().join(link_at)
    };
    mkdirs(link.parent().unwrap());
    linked_run(&o, &link, to_folder, || scenario(&s));
}

/// Plants a link at `link` to the file (or folder) outside, runs `run`, and checks that every
/// command exited 0, nothing outside changed and a warning named the link.
fn linked_run(o: &tempfile::TempDir, link: &Path, to_folder: bool, run: impl FnOnce() -> Vec<Run>) {
    let target = o
        .path()
        .join(if to_folder { "victim-dir" } else { "victim" });
    symlink(&target, link).unwrap();
    let before = snapshot(o.path());
    let case = format!("{} -> {}", link.display(), target.display());
    let mut stderr = String::new();
    for out in run() {
        stderr.push_str(&out.context(&case).status(0).stderr());
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

#[test]
fn a_link_in_place_of_any_file_changes_nothing_outside() {
    for rel in FILES {
        run_with_link(rel, false);
        run_with_link(rel, true);
    }
}

#[test]
fn a_link_in_place_of_any_folder_changes_nothing_outside() {
    for rel in DIRS {
        run_with_link(rel, true);
        run_with_link(rel, false);
    }
}

#[test]
fn a_state_root_named_with_dir_may_be_a_link_the_user_chose() {
    let s = Sandbox::new();
    let real = s.path().join("real-root");
    mkdirs(&real);
    symlink(&real, s.path().join("chosen")).unwrap();
    let out = s
        .triage(["hook"])
        .env("TRIAGE_DIR", s.path().join("chosen"))
        .env("TRIAGE_NOW", T0)
        .stdin(payload("PostToolUseFailure", "t1"))
        .run()
        .status(0);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(real.join("logs/errors.jsonl").is_file());
}

// --- State files. ------------------------------------------------------------------------------

/// `state-write` (plain, with a checkpoint, `--update`) and `state-read` of `run/s.json`.
fn state_scenario(s: &Sandbox) -> Vec<Run> {
    let w = |args: &[&str], input: &str| {
        s.triage([&["state-write", "run/s.json"], args].concat())
            .stdin(input.to_string())
            .run()
    };
    vec![
        w(&[], r#"{"workflow_id":"w","stage":1}"#),
        w(
            &["--checkpoint", "cp1.json"],
            r#"{"workflow_id":"w","stage":2}"#,
        ),
        w(&["--update", ".stage += 1"], ""),
        s.triage(["state-read", "run/s.json"]).run(),
    ]
}

#[test]
fn a_link_in_place_of_any_state_file_or_folder_changes_nothing_outside() {
    let files = [
        "run/s.json",
        "run/s.json.bak",
        "run/s.json.lock",
        "run/checkpoints/s.json/cp1.json",
    ];
    let dirs = ["run/checkpoints", "run/checkpoints/s.json"];
    let cases = files
        .iter()
        .flat_map(|f| [(*f, false), (*f, true)])
        .chain(dirs.iter().flat_map(|d| [(*d, true), (*d, false)]));
    for (rel, to_folder) in cases {
        let s = Sandbox::new();
        let o = outside();
        let link = s.path().join(rel);
        mkdirs(link.parent().unwrap());
        if rel == "run/s.json.bak" {
            // A backup is only made of an existing file.
            s.write("run/s.json", r#"{"workflow_id":"w","stage":0}"#);
        }
        linked_run(&o, &link, to_folder, || state_scenario(&s));
    }
}

#[test]
fn a_state_file_in_a_linked_folder_the_user_named_is_written_there() {
    // The user's own path may go through links they made; only what the store derives
    // below the named folder must not.
    let s = Sandbox::new();
    mkdirs(&s.path().join("real"));
    symlink(s.path().join("real"), s.path().join("run")).unwrap();
    let out = s
        .triage(["state-write", "run/s.json", "--checkpoint", "c.json"])
        .stdin("{}")
        .run();
    assert_eq!(json_out(&out)["written"], true);
    assert!(s.path().join("real/s.json").is_file());
    assert!(s.path().join("real/checkpoints/s.json/c.json").is_file());
}

// --- The root's owner and mode. ----------------------------------------------------------------

/// Runs a failing guarded call against a root prepared by `spoil`; the hook must exit 0,
/// warn with `expect`, and write nothing in the refused folder `watched` (of the root).
fn refused_root(spoil: impl FnOnce(&Path), expect: &str, watched: &str) {
    let s = Sandbox::new();
    mkdirs(&s.root());
    spoil(&s.root());
    let watched = s.root().join(watched);
    let before = snapshot(&watched);
    let out = hook(&s, &payload("PostToolUseFailure", "t1")).status(0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(expect), "{err}");
    assert_eq!(before, snapshot(&watched), "something was written: {err}");
    let out = s.triage(["breaker", "check", "researcher"]).run().status(0);
    assert_eq!(json_out(&out)["allowed"], true, "fails open");
}

#[test]
fn a_root_or_folder_writable_by_others_is_refused() {
    let chmod = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    refused_root(|r| chmod(r, 0o777), "writable by others (mode 0777)", "");
    // A root of yours writable only by its group is repaired instead (see `umask.rs`); a
    // folder below it writable by others is still refused.
    refused_root(
        |r| {
            mkdirs(&r.join("logs"));
            chmod(&r.join("logs"), 0o772);
        },
        "logs: it is writable by others",
        "logs",
    );
    refused_root(
        |r| {
            mkdirs(&r.join("logs"));
            chmod(&r.join("logs"), 0o757);
        },
        "logs: it is writable by others",
        "logs",
    );
}

#[test]
fn a_root_owned_by_another_user_is_refused() {
    let me = rustix_euid();
    if me != Some(0) {
        eprintln!(
            "skipped: changing a folder's owner needs root, and this runs as uid {me:?} (a user namespace maps only one uid)"
        );
        return;
    }
    refused_root(
        |r| {
            std::os::unix::fs::chown(r, Some(12345), Some(12345)).unwrap();
        },
        "owned by uid 12345",
        "",
    );
    refused_root(
        |r| {
            mkdirs(&r.join("breakers"));
            std::os::unix::fs::chown(r.join("breakers"), Some(12345), None).unwrap();
        },
        "owned by uid 12345",
        "breakers",
    );
}

fn rustix_euid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// `triage ARGS` in `s` under `umask`, stdin `input`, with a clean environment.
fn under_umask(s: &Sandbox, umask: &str, args: &[&str], input: &str) -> Run {
    s.command("sh")
        .args(["-c", &format!("umask {umask}; exec \"$@\""), "sh"])
        .arg(bin())
        .args(args)
        .env("TRIAGE_NOW", T0)
        .stdin(input)
        .run()
}

#[test]
fn files_are_0600_and_folders_0700_whatever_the_umask() {
    for umask in ["000", "077", "022"] {
        let s = Sandbox::new();
        under_umask(&s, umask, &["hook"], &payload("PostToolUseFailure", "t1")).status(0);
        under_umask(
            &s,
            umask,
            &[
                "state-write",
                ".triage/run/s.json",
                "--checkpoint",
                "c.json",
            ],
            "{}",
        )
        .status(0);
        let all = snapshot(&s.root());
        assert!(all.len() > 8, "{all:?}");
        for (rel, what) in all {
            let want = if what.contains(" dir") {
                "40700 "
            } else {
                "100600 "
            };
            assert!(
                what.starts_with(want),
                "umask {umask}: {} is {what}",
                rel.display()
            );
        }
    }
    // A replaced file keeps the mode it had.
    let s = Sandbox::new();
    s.write("s.json", "{}");
    std::fs::set_permissions(
        s.path().join("s.json"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    under_umask(&s, "077", &["state-write", "s.json"], "{\"a\":1}").status(0);
    let mode = std::fs::metadata(s.path().join("s.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
}

// --- FIFOs where files are expected. -----------------------------------------------------------

fn mkfifo(p: &Path) {
    mkdirs(p.parent().unwrap());
    let ok = Command::new("mkfifo").arg(p).status().unwrap().success();
    assert!(ok, "mkfifo {}", p.display());
}

/// Starts `c` with `input` on its stdin (then closed) and its output captured.
fn spawn_with(c: &mut Command, input: &str) -> Child {
    use std::io::Write;
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    child
}

/// Waits for `child` at most `limit`; kills it and fails when it is still running then.
fn finishes(mut child: Child, limit: Duration, what: &str) -> Run {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return Run {
                output: child.wait_with_output().unwrap(),
                what: what.to_string(),
            };
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?} (hung on a FIFO)");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_fifo_where_a_file_is_expected_is_refused_without_hanging() {
    let cases: &[(&str, &str)] = &[
        (".triage/breakers/researcher.json", "check"),
        (".triage/breakers/researcher.json.lock", "check"),
        (".triage/logs/errors.jsonl", "failure"),
        (".triage/logs/errors.jsonl.lock", "failure"),
        (".triage/logs/errors.counters.json", "failure"),
        (".triage/logs/triage.log", "trace"),
        (".triage/sessions/s1/t1.start", "post"),
        ("policy.toml", "config"),
        ("transcript.jsonl", "stop"),
    ];
    for (rel, run) in cases {
        let s = Sandbox::new();
        mkfifo(&s.path().join(rel));
        let (args, input): (&[&str], String) = match *run {
            "check" | "config" => (&["breaker", "check", "researcher"], String::new()),
            "failure" => (&["hook"], payload("PostToolUseFailure", "t1")),
            // An empty payload is traced to triage.log.
            "trace" => (&["hook"], String::new()),
            "post" => (
                &["hook"],
                payload("PostToolUse", "t1").replace("\"error\":\"boom\",", ""),
            ),
            _ => (
                &["hook"],
                format!(
                    r#"{{"hook_event_name":"SubagentStop","session_id":"s1","agent_type":"researcher","agent_transcript_path":"{}"}}"#,
                    s.path().join(rel).display()
                ),
            ),
        };
        let mut cmd = s.std_cmd(args);
        if *run == "config" {
            cmd.env("TRIAGE_CONFIG", s.path().join(rel));
        }
        let child = spawn_with(cmd.env("TRIAGE_NOW", T0), &input);
        let out = finishes(child, Duration::from_secs(20), rel).status(0);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("FIFO"),
            "{rel}: no warning names the FIFO: {err}"
        );
    }
}

// --- The breaker never depends on the log's lock; one deadline for all waits. ----------------

fn hold(path: &Path) -> std::fs::File {
    mkdirs(path.parent().unwrap());
    let f = std::fs::File::create(path).unwrap();
    f.lock().unwrap();
    f
}

fn pending(s: &Sandbox) -> Vec<PathBuf> {
    match std::fs::read_dir(s.root().join("logs/errors.pending")) {
        Ok(d) => d.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    }
}

fn log_lines(s: &Sandbox) -> Vec<Value> {
    std::fs::read_to_string(s.root().join("logs/errors.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn eight_hooks_with_the_log_lock_busy_still_record_their_breaker_outcomes_and_lose_nothing() {
    let s = Sandbox::new();
    // The policy opens the breaker only after 100 failures, so every outcome is counted.
    s.write(".triage.toml", "[breaker]\nfailure_threshold = 100\n");
    let held = hold(&s.root().join("logs/errors.jsonl.lock"));
    let children: Vec<Child> = (0..8)
        .map(|i| {
            spawn_with(
                s.std_cmd(&["hook"])
                    .env("TRIAGE_NOW", T0)
                    .env("TRIAGE_LOCK_TIMEOUT", "2s"),
                &payload("PostToolUseFailure", &format!("t{i}")),
            )
        })
        .collect();
    for c in children {
        let out = finishes(c, Duration::from_secs(30), "hook").status(0);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("next writer adds it"), "{err}");
    }
    let status = s
        .triage(["breaker", "status", "researcher"])
        .env("TRIAGE_NOW", T0)
        .run()
        .stdout_json();
    assert_eq!(status["breakers"][0]["totals"]["failures"], 8, "{status}");
    assert_eq!(pending(&s).len(), 8);
    let r = s.triage(["report"]).run().stdout_json();
    assert_eq!(r["records"], 8, "report counts spooled records: {r}");
    drop(held);
    // The next writer appends the spooled records, then its own.
    s.triage(["record-error", "--session", "s1", "--agent", "other"])
        .stdin("boom")
        .run()
        .status(0);
    let lines = log_lines(&s);
    assert_eq!(lines.len(), 9);
    assert!(pending(&s).is_empty());
    let mut ids: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["error_id"].as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 9, "ids are unique");
    let r = s.triage(["report"]).run().stdout_json();
    assert_eq!(r["records"], 9, "{r}");
}

#[test]
fn a_hook_with_both_locks_held_returns_within_its_deadline() {
    // PostToolUseFailure waits for the breaker's lock, then (the threshold crossed) for the
    // session's. Each took the whole TRIAGE_LOCK_TIMEOUT before; now they share it.
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    let _b = hold(&s.root().join("breakers/researcher.json.lock"));
    let _s = hold(&s.root().join("sessions/s1.json.lock"));
    let start = Instant::now();
    let out = s
        .triage(["hook"])
        .env("TRIAGE_NOW", T0)
        .env("TRIAGE_LOCK_TIMEOUT", "2s")
        .stdin(payload("PostToolUseFailure", "t1"))
        .run();
    let took = start.elapsed();
    let out = out.status(0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("breaker did not hear"), "{err}");
    assert!(err.contains("not announced"), "{err}");
    // Two waits of 2 s would be 4 s; one shared deadline is 2 s and some start-up (with
    // room for a loaded machine).
    assert!(took < Duration::from_millis(3500), "took {took:?}: {err}");
    assert_eq!(log_lines(&s).len(), 1, "the free log lock was still taken");
}

#[test]
fn stop_failure_spools_rather_than_waiting_for_a_busy_log() {
    let s = Sandbox::new();
    let _held = hold(&s.root().join("logs/errors.jsonl.lock"));
    let start = Instant::now();
    let out = s
        .triage(["hook"])
        .env("TRIAGE_NOW", T0)
        .env("TRIAGE_LOCK_TIMEOUT", "5s")
        .stdin(r#"{"hook_event_name":"StopFailure","session_id":"s1","error":"rate_limit"}"#)
        .run();
    let took = start.elapsed();
    out.status(0);
    assert_eq!(pending(&s).len(), 1);
    // It waited tens of milliseconds, not the 5 s the lock timeout allows.
    assert!(took < Duration::from_millis(2500), "took {took:?}");
}

// --- Torn lines, record size, sequence numbers. -----------------------------------------------

#[test]
fn a_writer_killed_mid_append_leaves_no_torn_line_once_the_next_one_appends() {
    let s = Sandbox::new();
    let record = |detail: &str| {
        s.triage(["record-error", "--session", "s1", "--agent", "a"])
            .stdin(format!(r#"{{"kind":"timeout","detail":"{detail}"}}"#))
            .run()
    };
    record("first").status(0);
    for round in 0..3 {
        // A record of 50 KB, half written, then SIGKILL.
        let big = format!(r#"{{"kind":"crash","detail":"{}"}}"#, "x".repeat(50_000));
        let mut child = spawn_with(
            s.std_cmd(&["record-error", "--session", "s1", "--agent", "a"])
                .env("TRIAGE_FAULT", "append:torn"),
            &big,
        );
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        assert_eq!(
            lines.next().unwrap().unwrap(),
            "READY append",
            "round {round}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let r = s.triage(["report"]).run().stdout_json();
        assert_eq!(
            r["skipped_lines"], 1,
            "round {round}: the torn tail is seen"
        );
        record(&format!("after {round}")).status(0);
        let r = s.triage(["report"]).run().stdout_json();
        assert_eq!(r["skipped_lines"], 0, "round {round}: {r}");
        assert_eq!(r["records"], round + 2, "round {round}");
    }
}

#[test]
fn a_huge_record_is_cut_to_fit_with_a_marker() {
    let s = Sandbox::new();
    let big = format!(
        r#"{{"kind":"crash","detail":"{}","context":{{"tool_response":"{}"}}}}"#,
        "d".repeat(3 << 20),
        "r".repeat(1 << 20)
    );
    let out = s
        .triage(["record-error", "--session", "s1"])
        .stdin(big)
        .run()
        .status(0);
    let text = std::fs::read_to_string(s.root().join("logs/errors.jsonl")).unwrap();
    assert!(text.len() <= 64 * 1024, "{} bytes", text.len());
    let line: Value = serde_json::from_str(text.trim()).unwrap();
    assert!(
        line["detail"].as_str().unwrap().contains("…[truncated"),
        "{line}"
    );
    assert_eq!(line["session_id"], "s1");
    assert_eq!(json_out(&out)["error_id"], line["error_id"]);
}

#[test]
fn a_sequence_at_its_maximum_never_wraps_to_an_id_given_before() {
    let s = Sandbox::new();
    s.write(
        ".triage/logs/errors.counters.json",
        format!(
            r#"{{"version":1,"log_len":0,"log_ino":0,"seq":{}}}"#,
            u64::MAX
        ),
    );
    let mut ids = Vec::new();
    for _ in 0..2 {
        let out = s
            .triage(["record-error", "--session", "s1"])
            .stdin("boom")
            .run()
            .status(0);
        ids.push(json_out(&out)["error_id"].as_str().unwrap().to_string());
    }
    assert_ne!(ids[0], ids[1]);
    assert!(ids.iter().all(|id| !id.ends_with("-000000")), "{ids:?}");
}

// --- `report prune` on a full disk: a 64 KiB tmpfs in a user and mount namespace. ----------

const NOSPACE_DIR: &str = "TRIAGE_TEST_PRUNE_NOSPACE_DIR";

#[test]
fn prune_on_a_full_disk_leaves_no_empty_archive() {
    crate::common::in_small_tmpfs("hostile_root::prune_full_disk_child", NOSPACE_DIR);
}

#[test]
#[ignore = "runs only inside prune_on_a_full_disk_leaves_no_empty_archive's namespace"]
fn prune_full_disk_child() {
    let Ok(dir) = std::env::var(NOSPACE_DIR) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let root = dir.join(".triage");
    mkdirs(&root.join("logs"));
    // 20 old records of about 1.8 KB: 36 KB to move.
    let mut log = String::new();
    for i in 0..20 {
        log.push_str(&format!(
            "{{\"error_id\":\"err-20200101T000000000Z-{i:06}\",\"timestamp\":\"2020-01-01T00:00:00.000Z\",\"kind\":\"crash\",\"detail\":\"{}\"}}\n",
            "x".repeat(1800)
        ));
    }
    std::fs::write(root.join("logs/errors.jsonl"), &log).unwrap();
    // Fill the disk, then free two pages: too little for the archive.
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(dir.join("filler")).unwrap();
        while filler.write_all(&[0u8; 4096]).is_ok() {}
        let len = filler.metadata().unwrap().len();
        filler.set_len(len.saturating_sub(8192)).unwrap();
    }
    let out = crate::common::command(bin())
        .args(["report", "prune", "--older-than", "1d"])
        .current_dir(&dir)
        .env("TRIAGE_DIR", &root)
        .env("TRIAGE_NOW", T0)
        .run()
        .status(0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("free some space"), "{err}");
    assert_eq!(
        std::fs::read_to_string(root.join("logs/errors.jsonl")).unwrap(),
        log
    );
    let left: Vec<_> = std::fs::read_dir(root.join("logs/archive"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "an archive was left behind: {left:?}");
    let temps: Vec<_> = std::fs::read_dir(root.join("logs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}
