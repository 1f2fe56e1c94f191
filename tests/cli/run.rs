//! `triage run`: retries on the policy's schedule, timeouts that kill the whole process group,
//! `timeout(1)`'s exit statuses, interrupts forwarded with the partial output kept.

use crate::common::Sandbox;
use serde_json::Value;
use std::time::{Duration, Instant};

const POLICY: &str = "[retry]\nschedule = [\"10ms\", \"30ms\"]\nmax_attempts = 3\n\n\
[agents.mailer]\nside_effects = true\n";

fn sandbox() -> Sandbox {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    s
}

/// The report: the last line of stderr.
fn report(stderr: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stderr);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no report ({e}): {text}"))
}

/// A script that fails until its third attempt, printing its attempt number and its stdin.
const FLAKY: &str = "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count\n\
echo \"out $n\"; cat; [ $n -ge 3 ] || { echo \"fail $n\" >&2; exit 1; }\n";

#[test]
fn fails_twice_then_succeeds_with_the_third_attempts_stdout_only() {
    let s = sandbox();
    s.write("flaky.sh", FLAKY);
    let out = s
        .cmd(&[
            "run",
            "--preserve-partial",
            "scratch",
            "--name",
            "flaky",
            "--",
            "sh",
            "flaky.sh",
        ])
        .write_stdin("input line\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out 3\ninput line\n");
    let r = report(&out.stderr);
    assert_eq!(r["outcome"], "succeeded");
    let delays: Vec<u64> = r["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["delay_before_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(delays, vec![0, 10, 30], "the schedule's delays");
    // Earlier attempts' stdout (stdin replayed to each) is kept as _partial files.
    assert_eq!(s.read("scratch/flaky-1_partial"), "out 1\ninput line\n");
    assert_eq!(s.read("scratch/flaky-2_partial"), "out 2\ninput line\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("fail 2"),
        "stderr passed through"
    );
}

#[test]
fn a_hung_command_is_killed_with_its_children_and_exits_124() {
    let s = sandbox();
    // A child that ignores SIGTERM, in the background; the leader ignores it too.
    let script = "trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > child.pid; exec sleep 60' & \
                  while [ ! -s child.pid ]; do :; done; echo started; sleep 60; wait";
    let t0 = Instant::now();
    let out = s
        .cmd(&[
            "run",
            "--agent",
            "mailer",
            "--timeout",
            "200ms",
            "--kill-after",
            "100ms",
            "--",
            "sh",
            "-c",
            script,
        ])
        .output()
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(out.status.code(), Some(124));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "started\n");
    let r = report(&out.stderr);
    assert_eq!(r["outcome"], "timed_out");
    assert_eq!(
        r["attempts"].as_array().unwrap().len(),
        1,
        "side effects: never retried"
    );
    assert_eq!(r["attempts"][0]["kind"], "timeout");
    let pid = s.read("child.pid").trim().to_string();
    let alive = std::process::Command::new("kill")
        .args(["-0", &pid])
        .status()
        .unwrap()
        .success();
    // Killed; at most a zombie waiting for its new parent to reap it.
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        !alive || state.contains(") Z"),
        "child {pid} survived: {state}"
    );
}

#[test]
fn exit_statuses_follow_timeout_1() {
    let s = sandbox();
    s.cmd(&["run", "--", "no-such-command-here"])
        .assert()
        .code(127);
    s.write("not-exec.sh", "echo hi\n");
    s.cmd(&["run", "--", "./not-exec.sh"]).assert().code(126);
    s.cmd(&["run", "--agent", "mailer", "--", "sh", "-c", "exit 7"])
        .assert()
        .code(7);
    s.cmd(&[
        "run",
        "--agent",
        "mailer",
        "--",
        "sh",
        "-c",
        "kill -TERM $$",
    ])
    .assert()
    .code(143);
    s.cmd(&["run"]).assert().code(64);
}

#[test]
fn the_report_can_go_to_a_file() {
    let s = sandbox();
    let out = s
        .cmd(&["run", "--report", "r/report.json", "--", "echo", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_str(&s.read("r/report.json")).unwrap();
    assert_eq!(r["command"], serde_json::json!(["echo", "hi"]));
}

#[test]
fn sigint_is_forwarded_and_the_partial_output_kept() {
    let s = sandbox();
    let script = "echo partial-line; touch started; while :; do sleep 0.05; done";
    let child = s
        .std_cmd(&["run", "--grace", "2s", "--", "sh", "-c", script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !s.exists("started") {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the command never started"
        );
        std::thread::yield_now();
    }
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let r = report(&out.stderr);
    assert_eq!(r["outcome"], "interrupted");
    assert_eq!(r["attempts"][0]["kind"], "interrupted");
    let kept = r["preserved_outputs"][0].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(s.path().join(kept)).unwrap(),
        "partial-line\n"
    );
}
