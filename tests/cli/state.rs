//! `state-write` and `state-read` (issue 2): atomic replacement, recovery, concurrency,
//! crashes, full disks and bad input.

use crate::common::{bin, json_out, Sandbox};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

fn write(s: &Sandbox, file: &str, doc: &str) {
    let out = s.triage(["state-write", file]).stdin(doc).run().status(0);
    assert_eq!(json_out(&out)["written"], true);
}

fn read(s: &Sandbox, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["state-read"];
    a.extend_from_slice(args);
    let out = s.triage(&a).run().status(0);
    json_out(&out)
}

fn corrupt_files(s: &Sandbox, dir: &str, prefix: &str) -> Vec<String> {
    std::fs::read_dir(s.path().join(dir))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[test]
fn write_reports_path_size_digest_and_backup() {
    let s = Sandbox::new();
    let out = s
        .triage(["state-write", "run/s.json", "--require", "stage"])
        .stdin("{\"stage\":2}")
        .run();
    let v = json_out(&out);
    assert_eq!(v["written"], true);
    assert_eq!(v["bytes"], 11);
    assert_eq!(v["backup"], serde_json::Value::Null);
    let expected = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(b"{\"stage\":2}");
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    assert_eq!(v["sha256"], expected);
    write(&s, "run/s.json", "{\"stage\":3}");
    assert_eq!(s.read("run/s.json.bak"), "{\"stage\":2}");
    assert_eq!(read(&s, &["run/s.json"])["data"]["stage"], 3);
}

#[test]
fn concurrent_updates_never_lose_one() {
    let s = Sandbox::new();
    write(&s, "s.json", "{\"n\":0}");
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let mut c = s.triage(["state-write", "s.json", "--update", ".n += 1", "--strict"]);
            c.env("TRIAGE_LOCK_TIMEOUT", "60s").stdin_null();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    c.run().status(0);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(read(&s, &["s.json"])["data"]["n"], 400);
}

#[test]
fn update_starts_from_an_empty_object() {
    let s = Sandbox::new();
    let out = s
        .triage(["state-write", "new.json", "--update", ".n += 1"])
        .run();
    assert_eq!(json_out(&out)["written"], true);
    assert_eq!(read(&s, &["new.json"])["data"]["n"], 1);
}

#[test]
fn invalid_input_leaves_file_and_backup_byte_for_byte() {
    let s = Sandbox::new();
    write(&s, "s.json", "{\"v\":1}");
    write(&s, "s.json", "{\"v\":2}");
    let before = (s.read("s.json"), s.read("s.json.bak"));
    let deep = "[".repeat(100_000);
    let big = format!("{{\"x\":\"{}\"}}", "a".repeat(20 * 1024 * 1024));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("invalid UTF-8", b"{\"a\":\"\xff\xfe\"}".to_vec()),
        ("truncated", b"{\"a\": [1, 2".to_vec()),
        ("NUL bytes", b"{\"a\":\0}".to_vec()),
        ("deep nesting", deep.into_bytes()),
        ("20 MB", big.into_bytes()),
        ("not an object", b"[1,2]".to_vec()),
        ("two documents", b"{} {}".to_vec()),
        ("empty", Vec::new()),
    ];
    for (what, input) in cases {
        let out = s
            .triage(["state-write", "s.json"])
            .stdin(input.clone())
            .run()
            .context(what)
            .status(0);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("triage state-write: "), "{what}: {err}");
        assert_eq!(json_out(&out)["written"], false, "{what}");
        s.triage(["state-write", "s.json", "--strict"])
            .stdin(input)
            .run()
            .context(what)
            .status(65);
        assert_eq!((s.read("s.json"), s.read("s.json.bak")), before, "{what}");
    }
    // Every degradation leaves a trace.
    let log = s.read(".triage/logs/triage.log");
    assert!(log.lines().count() >= 8, "{log}");
}

#[test]
fn failed_require_or_check_writes_nothing() {
    let s = Sandbox::new();
    write(&s, "s.json", "{\"stage\":1}");
    let out = s
        .triage([
            "state-write",
            "s.json",
            "--require",
            "workflow_id",
            "--strict",
        ])
        .stdin("{\"stage\":2}")
        .run()
        .status(65);
    assert!(String::from_utf8_lossy(&out.stderr).contains("workflow_id"));
    s.triage(["state-write", "s.json", "--check", ".stage < 2", "--strict"])
        .stdin("{\"stage\":2}")
        .run()
        .status(65);
    assert_eq!(s.read("s.json"), "{\"stage\":1}");
    // A filter that does not compile is a usage error.
    s.cmd(&["state-write", "s.json", "--check", ".a |"])
        .write_stdin("{}")
        .assert()
        .code(64);
}

#[test]
fn mode_of_an_existing_file_survives() {
    let s = Sandbox::new();
    let p = s.write("s.json", "{}");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    write(&s, "s.json", "{\"a\":1}");
    let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}

#[test]
fn checkpoint_keeps_a_copy() {
    let s = Sandbox::new();
    let out = s
        .triage([
            "state-write",
            "run/s.json",
            "--checkpoint",
            "stage_1_complete.json",
        ])
        .stdin("{\"stage\":1}")
        .run();
    assert!(json_out(&out)["checkpoint"]
        .as_str()
        .unwrap()
        .ends_with("run/checkpoints/s.json/stage_1_complete.json"));
    assert_eq!(
        s.read("run/checkpoints/s.json/stage_1_complete.json"),
        "{\"stage\":1}"
    );
    s.cmd(&["state-write", "run/s.json", "--checkpoint", "../x"])
        .write_stdin("{}")
        .assert()
        .code(64);
}

#[test]
fn corrupt_file_is_recovered_from_backup_and_kept() {
    for (what, garbage) in [
        ("empty", ""),
        ("truncated", "{\"stage\": 2, \"wor"),
        ("garbage", "\u{0}\u{1}PK binary"),
    ] {
        let s = Sandbox::new();
        write(&s, "s.json", "{\"stage\":1}");
        write(&s, "s.json", "{\"stage\":2}");
        s.write("s.json", garbage);
        let v = read(&s, &["s.json", "--require", "stage"]);
        assert_eq!(v["recovered_from"], "backup", "{what}");
        assert_eq!(v["recovered_path"], "s.json.bak", "{what}");
        assert_eq!(v["data"]["stage"], 1, "{what}");
        assert_eq!(v["tried"][0]["source"], "primary", "{what}");
        assert_eq!(v["repaired"], true, "{what}");
        let kept = corrupt_files(&s, ".", "s.json.corrupt-");
        assert_eq!(kept.len(), 1, "{what}");
        assert_eq!(s.read(&kept[0]), garbage, "{what}");
        // Repaired: the next read finds the file itself, and warns of nothing.
        assert_eq!(s.read("s.json"), "{\"stage\":1}", "{what}");
        let out = s.triage(["state-read", "s.json"]).run();
        assert_eq!(json_out(&out)["recovered_from"], "primary", "{what}");
        assert!(
            out.stderr.is_empty(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A valid document that only fails the reader's --require is not corrupt: the backup is
    // returned, but the file is neither moved aside nor rewritten.
    let s = Sandbox::new();
    write(&s, "s.json", "{\"stage\":1}");
    write(&s, "s.json", "{\"other\":true}");
    let v = read(&s, &["s.json", "--require", "stage"]);
    assert_eq!(v["recovered_from"], "backup");
    assert_eq!(v["data"]["stage"], 1);
    assert!(v.get("repaired").is_none());
    assert!(corrupt_files(&s, ".", "s.json.corrupt-").is_empty());
    assert_eq!(s.read("s.json"), "{\"other\":true}");
}

#[test]
fn recovery_falls_back_to_the_newest_checkpoint() {
    let s = Sandbox::new();
    for (stage, name) in [(1, "a.json"), (2, "b.json")] {
        s.cmd(&["state-write", "run/s.json", "--checkpoint", name])
            .write_stdin(format!("{{\"stage\":{stage}}}"))
            .assert()
            .code(0);
    }
    // Make the older checkpoint clearly older, whatever the file system's time resolution.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(s.path().join("run/checkpoints/s.json/a.json"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    s.write("run/s.json", "garbage");
    s.write("run/s.json.bak", "{\"broken\":");
    let v = read(&s, &["run/s.json"]);
    assert_eq!(v["recovered_from"], "checkpoint:b.json");
    assert_eq!(v["data"]["stage"], 2);
}

#[test]
fn nothing_valid_lists_what_was_tried() {
    let s = Sandbox::new();
    s.write("s.json", "garbage");
    let out = s.triage(["state-read", "s.json"]).run().status(0);
    let v = json_out(&out);
    assert_eq!(v["recovered_from"], serde_json::Value::Null);
    assert_eq!(v["tried"].as_array().unwrap().len(), 2);
    s.cmd(&["state-read", "s.json", "-e"]).assert().code(1);
    s.write("s.json", "garbage");
    s.cmd(&["state-read", "s.json", "--strict"])
        .assert()
        .code(65);
}

#[test]
fn update_of_a_corrupt_file_uses_the_backup() {
    let s = Sandbox::new();
    write(&s, "s.json", "{\"n\":1}");
    write(&s, "s.json", "{\"n\":2}");
    s.write("s.json", "{\"n\":");
    s.cmd(&["state-write", "s.json", "--update", ".n += 10"])
        .assert()
        .code(0);
    assert_eq!(read(&s, &["s.json"])["data"]["n"], 11);
    assert_eq!(corrupt_files(&s, ".", "s.json.corrupt-").len(), 1);
    // The good backup was not replaced by the corrupt file.
    assert_eq!(s.read("s.json.bak"), "{\"n\":1}");
}

/// Starts a write that stops at `step` (a test-only fault point), kills it with SIGKILL, and
/// checks that the file is the old or the new document and that the next write cleans up.
fn kill_at(step: &str) {
    let s = Sandbox::new();
    write(&s, "s.json", "{\"v\":\"old\"}");
    let mut child = s
        .std_cmd(&["state-write", "s.json"])
        .env("TRIAGE_FAULT", format!("{step}:sleep"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"v\":\"new\"}")
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = lines.next().unwrap().unwrap();
    assert_eq!(ready, format!("READY {step}"));
    child.kill().unwrap();
    child.wait().unwrap();
    let now = s.read("s.json");
    assert!(
        now == "{\"v\":\"old\"}" || now == "{\"v\":\"new\"}",
        "{step}: torn: {now:?}"
    );
    write(&s, "s.json", "{\"v\":\"later\"}");
    let temps: Vec<String> = corrupt_files(&s, ".", ".s.json.tmp-");
    assert!(temps.is_empty(), "{step}: temp files left: {temps:?}");
    assert_eq!(s.read("s.json"), "{\"v\":\"later\"}");
}

#[test]
fn sigkill_after_the_temp_write_leaves_the_old_document() {
    kill_at("after-temp-write");
}

#[test]
fn sigkill_before_the_rename_leaves_the_old_document() {
    kill_at("before-rename");
}

#[test]
fn sigkill_before_the_folder_fsync_leaves_old_or_new() {
    kill_at("before-dir-fsync");
}

#[test]
fn failed_fsync_is_never_a_success() {
    let s = Sandbox::new();
    write(&s, "s.json", "{\"v\":1}");
    let out = s
        .triage(["state-write", "s.json", "--strict"])
        .env("TRIAGE_FAULT", "fsync:eio")
        .stdin("{\"v\":2}")
        .run()
        .status(74);
    assert_eq!(json_out(&out)["written"], false);
    assert_eq!(s.read("s.json"), "{\"v\":1}");
    assert!(corrupt_files(&s, ".", ".s.json.tmp-").is_empty());
}

#[test]
fn lock_held_elsewhere_times_out_without_hanging() {
    let s = Sandbox::new();
    write(&s, "s.json", "{\"v\":1}");
    let lock = std::fs::File::create(s.path().join("s.json.lock")).unwrap();
    lock.lock().unwrap();
    s.triage(["state-write", "s.json", "--strict"])
        .env("TRIAGE_LOCK_TIMEOUT", "50ms")
        .stdin("{\"v\":2}")
        .run()
        .status(75);
    let out = s
        .triage(["state-write", "s.json"])
        .env("TRIAGE_LOCK_TIMEOUT", "50ms")
        .stdin("{\"v\":2}")
        .run()
        .status(0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("TRIAGE_LOCK_TIMEOUT"));
    assert_eq!(s.read("s.json"), "{\"v\":1}");
}

// --- A full disk: a 64 KiB tmpfs in a user and mount namespace. ---------------------------

const NOSPACE_DIR: &str = "TRIAGE_TEST_NOSPACE_DIR";

/// Runs this test binary's `full_disk_child` inside `unshare -Urm` with a 64 KiB tmpfs.
#[test]
fn full_disk_changes_nothing() {
    crate::common::in_small_tmpfs("state::full_disk_child", NOSPACE_DIR);
}

#[test]
#[ignore = "runs only inside full_disk_changes_nothing's namespace"]
fn full_disk_child() {
    let Ok(dir) = std::env::var(NOSPACE_DIR) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let run = |args: &[&str], input: &[u8]| {
        crate::common::command(bin())
            .args(args)
            .current_dir(&dir)
            .env("TRIAGE_DIR", dir.join(".triage"))
            .stdin(input)
            .run()
    };
    // A small state and its backup fit.
    run(&["state-write", "F"], b"{\"v\":1}").status(0);
    run(&["state-write", "F"], b"{\"v\":2}").status(0);
    let before = (
        std::fs::read(dir.join("F")).unwrap(),
        std::fs::read(dir.join("F.bak")).unwrap(),
    );
    // A document larger than the disk does not.
    let big = format!("{{\"x\":\"{}\"}}", "a".repeat(100 * 1024));
    let out = run(&["state-write", "F"], big.as_bytes()).status(0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning") || !out.stderr.is_empty());
    run(&["state-write", "F", "--strict"], big.as_bytes()).status(74);
    let after = (
        std::fs::read(dir.join("F")).unwrap(),
        std::fs::read(dir.join("F.bak")).unwrap(),
    );
    assert_eq!(before, after);
    let temps = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".F.tmp-"))
        .count();
    assert_eq!(temps, 0);

    // An append that runs out of space leaves no partial line: records of 8 KB each until
    // the disk is full (74 with --strict), and the log holds whole lines only.
    let detail = "b".repeat(8000);
    let mut ok = 0;
    let err = loop {
        let out = run(
            &[
                "record-error",
                "--kind",
                "timeout",
                "--detail",
                &detail,
                "--strict",
            ],
            b"",
        );
        if out.code() == Some(0) {
            ok += 1;
            assert!(ok < 100, "the disk never filled");
            continue;
        }
        assert_eq!(out.code(), Some(74), "{}", out.stderr());
        break out.stderr();
    };
    assert!(err.contains("No space left on device"), "{err}");
    let text = std::fs::read_to_string(dir.join(".triage/logs/errors.jsonl")).unwrap();
    assert!(text.ends_with('\n'));
    assert!(
        text.lines().count() >= ok,
        "{} lines, {ok} records",
        text.lines().count()
    );
    assert!(text
        .lines()
        .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
}

// --- Issue 14: recovery stays with its file and workflow; names; limits. ---------------------

fn write_args(s: &Sandbox, args: &[&str], doc: &str) {
    let mut a = vec!["state-write"];
    a.extend_from_slice(args);
    let out = s.triage(&a).stdin(doc.to_string()).run();
    assert_eq!(
        json_out(&out)["written"],
        true,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn recovery_never_takes_another_files_or_another_workflows_document() {
    let s = Sandbox::new();
    write_args(
        &s,
        &["run/a.json", "--checkpoint", "cp.json"],
        r#"{"workflow_id":"A","stage":1}"#,
    );
    // Workflow B's file, corrupt and without a backup: A's checkpoint is not its own.
    s.write("run/b.json", r#"{"workflow_id": "B", "sta"#);
    let v = read(&s, &["run/b.json"]);
    assert!(v["data"].is_null(), "{v}");
    assert!(v["recovered_from"].is_null(), "{v}");
    // A file that never existed recovers nothing either.
    let v = read(&s, &["run/never.json"]);
    assert!(v["data"].is_null(), "{v}");

    // One file that held workflow A before B: its backup and checkpoint are A's, and the
    // corrupt file still names B, so neither is returned, unless A is asked for.
    write_args(
        &s,
        &["run/s.json", "--checkpoint", "cp.json"],
        r#"{"workflow_id":"A","stage":1}"#,
    );
    write_args(&s, &["run/s.json"], r#"{"workflow_id":"B","stage":1}"#);
    s.write("run/s.json", r#"{"workflow_id":"B","stage":"#);
    let out = s.triage(["state-read", "run/s.json"]).run();
    let v = json_out(&out);
    assert!(v["data"].is_null(), "{v}");
    let tried = v["tried"].to_string();
    assert!(
        tried.contains("belongs to workflow `A`, not `B`"),
        "{tried}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no valid state"));
    let v = read(&s, &["run/s.json", "--workflow", "A"]);
    assert_eq!(v["data"]["workflow_id"], "A", "{v}");
}

#[test]
fn the_newest_valid_of_backup_and_checkpoints_is_recovered_and_named() {
    let s = Sandbox::new();
    write_args(&s, &["s.json", "--checkpoint", "c1.json"], r#"{"stage":1}"#);
    write_args(&s, &["s.json"], r#"{"stage":2}"#);
    write_args(&s, &["s.json", "--checkpoint", "c3.json"], r#"{"stage":3}"#);
    // The backup (stage 2) is older than checkpoint c3 (stage 3), c1 older still.
    let hours_ago =
        |h: u64| std::time::SystemTime::now() - std::time::Duration::from_secs(3600 * h);
    let touch = |rel: &str, at| {
        std::fs::File::options()
            .write(true)
            .open(s.path().join(rel))
            .unwrap()
            .set_modified(at)
            .unwrap()
    };
    touch("checkpoints/s.json/c1.json", hours_ago(3));
    touch("s.json.bak", hours_ago(2));
    touch("checkpoints/s.json/c3.json", hours_ago(1));
    s.write("s.json", "{\"stage\":");
    let v = read(&s, &["s.json"]);
    assert_eq!(v["recovered_from"], "checkpoint:c3.json", "{v}");
    assert_eq!(v["recovered_path"], "checkpoints/s.json/c3.json");
    assert_eq!(v["data"]["stage"], 3);
    // An invalid newest candidate gives way to the next newest.
    s.write("checkpoints/s.json/c3.json", "{");
    touch("checkpoints/s.json/c3.json", hours_ago(1));
    s.write("s.json", "{\"stage\":");
    let v = read(&s, &["s.json"]);
    assert_eq!(v["recovered_from"], "backup", "{v}");
    assert_eq!(v["data"]["stage"], 2);
}

#[test]
fn a_state_file_with_a_long_name_can_still_be_moved_aside_and_recovered() {
    for len in [231usize, 238, 245] {
        let s = Sandbox::new();
        let name = format!("{}.json", "s".repeat(len - 5));
        write(&s, &name, "{\"v\":1}");
        write(&s, &name, "{\"v\":2}");
        s.write(&name, "{\"v\":");
        // The writer moves the corrupt version aside, keeping the good backup.
        write(&s, &name, "{\"v\":3}");
        s.write(&name, "{\"v\":");
        let v = read(&s, &[&name]);
        assert_eq!(v["data"]["v"], 1, "{len}: {v}");
        assert_eq!(v["recovered_from"], "backup");
        let kept = corrupt_files(&s, ".", &name[..100]);
        let moved: Vec<&String> = kept.iter().filter(|n| n.contains(".corrupt-")).collect();
        assert_eq!(moved.len(), 2, "{len}: {kept:?}");
        assert!(moved.iter().all(|n| n.len() <= 255));
        assert_eq!(s.read(&name), "{\"v\":1}", "repaired from the backup");
    }
}

#[test]
fn update_refuses_a_document_deeper_than_the_reader_accepts() {
    let s = Sandbox::new();
    write(&s, "s.json", "{\"n\":1}");
    let deep = |levels: u32| format!(".a = (reduce range({levels}) as $i ([]; [.]))");
    // The object and 127 arrays: 128 levels of containers, which jq may yield but state-read
    // does not accept; and far deeper.
    for (levels, says) in [(126, "deeper than 127"), (200, "deep")] {
        let out = s
            .triage([
                "state-write",
                "s.json",
                "--update",
                &deep(levels),
                "--strict",
            ])
            .run()
            .status(65);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{levels}: {err}");
        assert_eq!(s.read("s.json"), "{\"n\":1}");
    }
    // Within the limit, the document is written and reads back as written.
    let out = s
        .triage(["state-write", "s.json", "--update", &deep(120)])
        .run();
    assert_eq!(json_out(&out)["written"], true);
    let v = read(&s, &["s.json"]);
    assert_eq!(v["recovered_from"], "primary");
}

/// A read, or a call with nothing to record, leaves no state root behind where it ran: the
/// warning is on stderr, and `.triage/` is not created for its trace.
#[test]
fn a_read_or_an_empty_record_creates_no_state_root() {
    let s = crate::common::Sandbox::new();
    let out = s.triage(["state-read", "nope.json"]).run().status(0);
    assert!(out.stderr().contains("no valid state"), "{}", out.stderr());
    assert!(!s.root().exists(), "state-read created the state root");
    let out = s.triage(["record-error"]).stdin_null().run().status(0);
    assert!(out.stderr().contains("stdin is empty"), "{}", out.stderr());
    assert!(!s.root().exists(), "record-error created the state root");
    // Once the root exists, the trace is kept there.
    std::fs::create_dir(s.root()).unwrap();
    s.triage(["state-read", "nope.json"]).run().status(0);
    assert!(s.exists(".triage/logs/triage.log"));
}
