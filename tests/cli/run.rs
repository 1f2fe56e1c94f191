//! `triage run`: retries on the policy's schedule, timeouts that kill the whole process group,
//! `timeout(1)`'s exit statuses, interrupts forwarded with the partial output kept.

use crate::common::Sandbox;
use serde_json::Value;
use std::time::{Duration, Instant};

const POLICY: &str = "[retry]\nschedule = [\"10ms\", \"30ms\"]\nmax_attempts = 3\n\n\
[retry.kinds.tool_failure]\nmax_attempts = 3\n\n\
[agents.mailer]\nside_effects = true\n\n[breaker.flaky]\nfailure_threshold = 3\n";

/// Every line of `logs/errors.jsonl`.
fn lines(s: &Sandbox) -> Vec<Value> {
    let path = s.root().join("logs/errors.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The error records in `logs/errors.jsonl` (not the resolution lines).
fn errors(s: &Sandbox) -> Vec<Value> {
    lines(s)
        .into_iter()
        .filter(|l| l.get("resolves").is_none())
        .collect()
}

/// The resolution lines in `logs/errors.jsonl`.
fn resolutions(s: &Sandbox) -> Vec<Value> {
    lines(s)
        .into_iter()
        .filter(|l| l.get("resolves").is_some())
        .collect()
}

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
        .triage([
            "run",
            "--preserve-partial",
            "scratch",
            "--name",
            "flaky",
            "--",
            "sh",
            "flaky.sh",
        ])
        .stdin("input line\n")
        .run()
        .status(0);
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
        .triage([
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
        .run();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let out = out.status(124);
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
    let recs = errors(&s);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["kind"], "timeout");
    assert_eq!(recs[0]["agent"], "mailer");
    assert_eq!(recs[0]["context"]["exit_code"], 124);
    assert_eq!(r["attempts"][0]["error_id"], recs[0]["error_id"]);
}

#[test]
fn a_group_that_obeys_sigterm_is_reported_as_stopped_not_killed() {
    let s = sandbox();
    // The leader and its child both die of SIGTERM; the child may linger as a zombie until
    // its new parent reaps it, which must not count as a survivor.
    let out = s
        .triage([
            "run",
            "--agent",
            "mailer",
            "--timeout",
            "200ms",
            "--kill-after",
            "5s",
            "--",
            "sh",
            "-c",
            "sleep 30 & sleep 30",
        ])
        .run()
        .status(124);
    let r = report(&out.stderr);
    assert_eq!(r["attempts"][0]["end"], "timed out (stopped by SIGTERM)");
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
        .triage(["run", "--report", "r/report.json", "--", "echo", "hi"])
        .run()
        .status(0);
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
        .triage([
            "run",
            "--grace",
            "2s",
            "--session",
            "s1",
            "--",
            "sh",
            "-c",
            script,
        ])
        .spawn();
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
    let out = child.wait().status(130);
    let r = report(&out.stderr);
    assert_eq!(r["outcome"], "interrupted");
    assert_eq!(r["attempts"][0]["kind"], "interrupted");
    let kept = r["preserved_outputs"][0].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(s.path().join(kept)).unwrap(),
        "partial-line\n"
    );
    let recs = errors(&s);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["kind"], "interrupted");
    assert_eq!(recs[0]["session_id"], "s1");
    assert_eq!(recs[0]["preserved_outputs"], serde_json::json!([kept]));
}

/// A command that gets the forwarded signal, carries on and ends with success did its work:
/// its result stands, whenever the signal came.
#[test]
fn a_command_that_finishes_after_the_forwarded_sigterm_succeeds() {
    let s = sandbox();
    let script = "trap 'touch got-term' TERM; touch started; \
                  while [ ! -e release ]; do sleep 0.02; done; echo finished";
    let child = s
        .triage(["run", "--grace", "20s", "--", "sh", "-c", script])
        .spawn();
    let t0 = Instant::now();
    let wait = |name: &str| {
        while !s.exists(name) {
            assert!(t0.elapsed() < Duration::from_secs(20), "no {name}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    wait("started");
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    // The command has the signal before it finishes.
    wait("got-term");
    s.write("release", "");
    let out = child.wait().status(0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "finished\n");
    let r = report(&out.stderr);
    assert_eq!(r["outcome"], "succeeded", "{r:#}");
    assert!(errors(&s).is_empty());
}

#[test]
fn failures_are_recorded_and_the_breaker_sees_the_success() {
    let s = sandbox();
    s.write("flaky.sh", FLAKY);
    s.triage([
        "run",
        "--agent",
        "flaky",
        "--session",
        "s1",
        "--workflow",
        "w1",
        "--phase",
        "2",
        "--",
        "sh",
        "flaky.sh",
    ])
    .run()
    .status(0);
    let recs = errors(&s);
    assert_eq!(recs.len(), 2, "one record per failed attempt: {recs:?}");
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r["kind"], "tool_failure", "{r}");
        assert_eq!(r["retry_count"], i as u64);
        assert_eq!(
            (
                &r["agent"],
                &r["session_id"],
                &r["workflow_id"],
                &r["phase"]
            ),
            (
                &Value::from("flaky"),
                &Value::from("s1"),
                &Value::from("w1"),
                &Value::from(2)
            )
        );
        assert_eq!(r["context"]["attempt"], i as u64 + 1);
        assert!(
            r["detail"]
                .as_str()
                .unwrap()
                .contains(&format!("fail {}", i + 1)),
            "{r}"
        );
    }
    let status = s.triage(["breaker", "status", "flaky"]).run().stdout_json();
    let b = &status["breakers"][0];
    assert_eq!(b["state"], "closed");
    assert_eq!(b["consecutive_failures"], 0, "the success reset the count");
    assert_eq!(b["totals"]["failures"], 2);
    assert_eq!(b["totals"]["successes"], 1);
}

#[test]
fn an_open_breaker_stops_run_before_the_command_starts() {
    let s = sandbox();
    let t0 = "2026-02-04T14:30:00Z";
    s.cmd(&["breaker", "trip", "researcher", "--for", "10m"])
        .env("TRIAGE_NOW", t0)
        .assert()
        .success();
    let out = s
        .triage(["run", "--agent", "researcher", "--", "touch", "marker"])
        .env("TRIAGE_NOW", "2026-02-04T14:35:00Z")
        .run()
        .status(75);
    assert!(!s.exists("marker"), "the command must not have run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "triage run: breaker researcher is open; retry after 2026-02-04T14:40:00Z (in 300s)"
        ),
        "{err}"
    );
    assert!(
        err.contains("[CIRCUIT BREAKER] researcher"),
        "Template 4: {err}"
    );
    let r = report(&out.stderr);
    assert_eq!(r["outcome"], "breaker_open");
    assert_eq!(r["attempts"], serde_json::json!([]));
    assert!(errors(&s).is_empty(), "nothing ran, nothing failed");
    // After the open period the breaker lets a probe through; its success closes it.
    s.cmd(&["run", "--agent", "researcher", "--", "touch", "marker"])
        .env("TRIAGE_NOW", "2026-02-04T14:41:00Z")
        .assert()
        .code(0);
    assert!(s.exists("marker"));
    let status = s
        .triage(["breaker", "status", "researcher"])
        .run()
        .stdout_json();
    assert_eq!(status["breakers"][0]["state"], "closed");
}

#[test]
fn a_breaker_the_runs_own_failures_opened_lets_its_retry_run_and_closes_on_its_success() {
    let s = sandbox();
    s.write("flaky.sh", FLAKY);
    // The default breaker opens after 2 consecutive failures, before the third attempt: within
    // one run the retry decision comes first (issue 17 item 10).
    let out = s
        .triage(["run", "--agent", "researcher", "--", "sh", "flaky.sh"])
        .run()
        .status(0);
    assert_eq!(s.read("count").trim(), "3");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out 3\n");
    let r = report(&out.stderr);
    assert_eq!(r["attempts"][1]["breaker"]["transition"]["to"], "open");
    assert_eq!(r["attempts"][2]["breaker"]["state"], "closed");
    assert_eq!(errors(&s).len(), 2);
    assert_eq!(resolutions(&s).len(), 2, "both failures recovered");
    let st = s
        .triage(["breaker", "status", "researcher"])
        .run()
        .stdout_json();
    assert_eq!(st["breakers"][0]["state"], "closed");
    assert_eq!(st["breakers"][0]["totals"]["opened"], 1);
}

#[test]
fn a_rejected_output_is_a_validation_failure_and_not_retried() {
    let s = sandbox();
    s.write(
        "quiet.sh",
        "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count\n",
    );
    let out = s
        .triage([
            "run",
            "--until-output-ok",
            "--agent",
            "writer",
            "--",
            "sh",
            "quiet.sh",
        ])
        .run()
        .status(1);
    assert_eq!(s.read("count").trim(), "1", "not retried");
    let recs = errors(&s);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["kind"], "validation_failed");
    assert_eq!(recs[0]["retryable"], false);
    assert_eq!(recs[0]["context"]["check_kind"], "output_missing");
    let r = report(&out.stderr);
    assert_eq!(r["outcome"], "output_rejected");
    let status = s
        .triage(["breaker", "status", "writer"])
        .run()
        .stdout_json();
    assert_eq!(status["breakers"][0]["totals"]["failures"], 1);
    // A good output passes.
    s.cmd(&["run", "--until-output-ok", "--", "echo", "done"])
        .assert()
        .code(0)
        .stdout("done\n");
}

#[test]
fn an_agent_with_side_effects_is_never_retried() {
    let s = sandbox();
    s.write(
        "send.sh",
        "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count\n\
         echo 'Error: connect ECONNREFUSED 10.0.0.5:25' >&2; exit 1\n",
    );
    let out = s
        .triage(["run", "--agent", "mailer", "--", "sh", "send.sh"])
        .run()
        .status(1);
    assert_eq!(s.read("count").trim(), "1");
    let recs = errors(&s);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["kind"], "network_error", "retryable in itself");
    assert_eq!(recs[0]["action"], "ask_user");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not retried") && err.contains("side effects"),
        "{err}"
    );
}

#[test]
fn an_interrupt_while_waiting_to_retry_is_recorded_with_the_kept_outputs() {
    use std::io::BufRead;
    let s = Sandbox::new();
    s.write(".triage.toml", "[retry]\nschedule = [\"20s\"]\n");
    let mut child = s
        .std_cmd(&[
            "run",
            "--preserve-partial",
            "scratch",
            "--name",
            "step",
            "--",
            "sh",
            "-c",
            "echo half; echo 'fail' >&2; exit 1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("retrying in") {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "no retry: {seen}");
        seen.push_str(&line);
    }
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let r = report(rest.as_bytes());
    assert_eq!(r["outcome"], "interrupted");
    let recs = errors(&s);
    assert_eq!(recs.len(), 2, "{recs:?}");
    assert_eq!(recs[0]["kind"], "tool_failure");
    assert_eq!(recs[1]["kind"], "interrupted");
    assert_eq!(
        recs[1]["preserved_outputs"],
        serde_json::json!(["scratch/step-1_partial"])
    );
    assert_eq!(s.read("scratch/step-1_partial"), "half\n");
}

#[test]
fn an_unusable_breaker_fails_open_with_a_warning() {
    let s = sandbox();
    s.write(".triage/breakers", "not a folder");
    let out = s
        .triage(["run", "--agent", "researcher", "--", "touch", "marker"])
        .run()
        .status(0);
    assert!(s.exists("marker"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("triage run: warning: breaker `researcher` unavailable, allowing the call"),
        "{err}"
    );
}

/// A breaker opened by someone else while a run waited to retry stops the retry
/// (`breaker_opened`): the report's action is then `escalate`, not the earlier attempt's
/// `retry`, which did not happen.
#[test]
fn a_run_its_breaker_stopped_reports_escalate_not_retry() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[retry]\nschedule = [\"0s\"]\n");
    let trip = format!(
        "'{}' breaker trip a --for 5m >/dev/null; exit 1",
        crate::common::bin().display()
    );
    let out = s
        .triage([
            "run",
            "--agent",
            "a",
            "--retries",
            "2",
            "--",
            "sh",
            "-c",
            &trip,
        ])
        .run()
        .status(1);
    let report = report(&out.stderr);
    assert_eq!(report["outcome"], "breaker_opened", "{report}");
    assert_eq!(report["action"], "escalate", "{report}");
}
