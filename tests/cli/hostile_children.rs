//! Commands whose children misbehave: a background process the command never waits for must
//! not outlive the attempt (`triage run`) or the item (`triage phase`), and a timeout must not
//! wait on a zombie that the PID 1 of a container never reaps.

use crate::common::{json_out, Sandbox};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Starts a background process that would touch `late` after 5 s, writes its pid to `bg.pid`,
/// prints `early` and exits at once.
const LEAVES_A_CHILD: &str = "(sleep 5; touch late) & echo $! > bg.pid; echo early";

/// Whether process `pid` is still running (a zombie is not).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).is_ok_and(|stat| {
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next());
        !matches!(state, None | Some("Z" | "X"))
    })
}

/// The JSON report, the last line of stderr.
fn report(out: &std::process::Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no report ({e}): {stderr}"))
}

#[test]
fn run_ends_what_its_command_left_running_and_says_so() {
    let s = Sandbox::new();
    let out = s
        .cmd(&["run", "--no-retry", "--", "sh", "-c", LEAVES_A_CHILD])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "early\n");
    let pid = s.read("bg.pid");
    assert!(
        !running(&pid),
        "the background process {} is still running after triage run returned",
        pid.trim()
    );
    let doc = report(&out);
    let note = doc["attempts"][0]["leftovers"].as_str().unwrap_or_default();
    // The subshell and its `sleep`.
    assert_eq!(
        note, "ended 2 processes left running in its group after it exited",
        "{doc:#}"
    );
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("triage run: attempt 1: ended 2 processes left running in its group"));
    // A command that waits for its children leaves nothing to end, and gets no note.
    let out = s
        .cmd(&[
            "run",
            "--no-retry",
            "--",
            "sh",
            "-c",
            "(true) & wait; echo done",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc = report(&out);
    assert!(doc["attempts"][0].get("leftovers").is_none(), "{doc:#}");
}

#[test]
fn a_leftover_that_ignores_sigterm_is_killed() {
    let s = Sandbox::new();
    let out = s
        .cmd(&[
            "run",
            "--no-retry",
            "--",
            "sh",
            "-c",
            "(trap '' TERM; sleep 5; touch late) & echo $! > bg.pid",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let pid = s.read("bg.pid");
    assert!(!running(&pid), "{} is still running", pid.trim());
    let doc = report(&out);
    assert_eq!(
        doc["attempts"][0]["leftovers"],
        "ended 2 processes left running in its group after it exited (SIGTERM ignored, killed)",
        "{doc:#}"
    );
}

#[test]
fn what_ends_within_the_orphan_grace_is_waited_for_not_ended() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[run]\norphan_grace = \"5s\"\n");
    let out = s
        .cmd(&[
            "run",
            "--no-retry",
            "--",
            "sh",
            "-c",
            "(sleep 0.3; touch finished) & echo early",
        ])
        .output()
        .unwrap();
    let doc = report(&out);
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    assert!(
        s.exists("finished"),
        "the background process was not given its grace"
    );
    assert!(doc["attempts"][0].get("leftovers").is_none(), "{doc:#}");
}

#[test]
fn a_phase_item_is_decided_only_once_what_it_left_running_is_ended() {
    let s = Sandbox::new();
    let plan = format!("[[items]]\nid = \"bg\"\ncommand = {LEAVES_A_CHILD:?}\n");
    s.write("plan.toml", plan);
    let out = s
        .cmd(&[
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "w",
            "--phase",
            "1",
        ])
        .output()
        .unwrap();
    let doc = json_out(&out);
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    let pid = s.read("bg.pid");
    assert!(
        !running(&pid),
        "the background process {} is still running after the phase was decided",
        pid.trim()
    );
    let item = &doc["items"][0];
    assert_eq!(item["state"], "complete", "{doc:#}");
    assert_eq!(
        item["attempt_log"][0]["leftovers"],
        "ended 2 processes left running in its group after it exited",
        "{doc:#}"
    );
}

/// In most containers PID 1 never reaps the orphans reparented to it. Here PID 1 is `sleep`
/// (it never calls wait), and `triage run` is its grandchild: at the timeout the command's
/// `sh` and its `sleep 20` both die of SIGTERM, the `sleep` an orphan whose zombie nobody
/// but `triage` (their subreaper) can reap. `triage` must return after the 1 s timeout and
/// not wait on the zombie until `--kill-after`.
#[test]
fn a_timeout_returns_on_time_under_a_pid_1_that_never_reaps() {
    if !crate::common::pid_namespace_allowed() {
        return;
    }
    let s = Sandbox::new();
    // PID 1 starts the runner in the background, then becomes `sleep 30`, which never reaps.
    let script = "cd \"$2\" || exit 1
( \"$1\" run --no-retry --timeout 1s --kill-after 5s -- sh -c 'sleep 20; echo' >out 2>err
  echo $? > status.tmp && mv status.tmp status ) &
exec sleep 30";
    let mut cmd = std::process::Command::new("unshare");
    cmd.args([
        "-Urfp",
        "--mount-proc",
        "--kill-child",
        "sh",
        "-c",
        script,
        "sh",
    ])
    .arg(crate::common::bin())
    .arg(s.path())
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("TRIAGE_") || k.starts_with("CLAUDE_") {
            cmd.env_remove(k);
        }
    }
    let started = Instant::now();
    let mut ns = cmd.spawn().unwrap();
    while !s.exists("status") && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = started.elapsed();
    // Ends the namespace: its PID 1 dies with unshare (--kill-child), and all in it with it.
    let _ = ns.kill();
    let _ = ns.wait();
    assert!(s.exists("status"), "triage run never returned");
    assert_eq!(s.read("status").trim(), "124", "{}", s.read("err"));
    // 1 s of timeout, the default orphan_grace (100 ms) and a generous margin for a loaded
    // machine; waiting on the zombie takes the whole --kill-after (5 s) more.
    let bound = Duration::from_millis(1000 + 100 + 700);
    assert!(
        took < bound,
        "triage run --timeout 1s took {took:?} (more than {bound:?}): {}",
        s.read("err")
    );
    let err = s.read("err");
    let doc: Value = serde_json::from_str(err.lines().last().unwrap_or_default()).unwrap();
    assert_eq!(
        doc["attempts"][0]["end"], "timed out (stopped by SIGTERM)",
        "{doc:#}"
    );
}
