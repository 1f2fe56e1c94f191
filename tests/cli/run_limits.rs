//! Where `triage run` stops or gives way: `--deadline` (the whole run's time, attempts and
//! waits together), `--idle-timeout` (a command that writes nothing for so long is hung) and
//! `--fallback` (what runs instead when the breaker refuses).

use crate::common::Sandbox;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The report: the last line of stderr.
fn report(stderr: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stderr);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no report ({e}): {text}"))
}

/// Seed 004, Error Escalation Matrix: "Worker unresponsive (T2 threshold) → alert Lead for
/// re-spawn". A worker that has gone quiet is stopped as hung, recorded as `unresponsive`
/// and escalated, not retried; one that keeps writing runs past the same threshold.
#[test]
fn a_command_that_writes_nothing_for_the_idle_timeout_is_stopped_as_unresponsive() {
    let s = Sandbox::new();
    let t0 = Instant::now();
    let out = s
        .triage([
            "run",
            "--idle-timeout",
            "300ms",
            "--kill-after",
            "100ms",
            "--retries",
            "2",
            "--delay",
            "10ms",
            "--",
            "sh",
            "-c",
            "echo working; sleep 30",
        ])
        .run();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let out = out.status(124);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "working\n");
    let r = report(&out.stderr);
    assert_eq!(r["outcome"], "idle", "{r}");
    let attempts = r["attempts"].as_array().unwrap();
    assert_eq!(
        attempts.len(),
        1,
        "an unresponsive worker is escalated, not retried: {r}"
    );
    assert_eq!(attempts[0]["kind"], "unresponsive");
    assert!(
        attempts[0]["end"]
            .as_str()
            .unwrap()
            .contains("no output for 300ms"),
        "{r}"
    );
    let log = s.read(".triage/logs/errors.jsonl");
    assert!(log.contains("\"unresponsive\""), "{log}");

    // Output every 100 ms keeps it alive past its idle time in all (1.5 s: a loaded machine
    // may leave a gap of several hundred ms between two lines).
    let out = s
        .triage([
            "run",
            "--idle-timeout",
            "1500ms",
            "--",
            "sh",
            "-c",
            "for i in $(seq 25); do echo $i >&2; sleep 0.1; done; echo done",
        ])
        .run()
        .status(0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
}

/// Seed 002, Compensation Protocol for Stage 6c: a section's review has a total time limit
/// (`timeout_exceeded # >30 min per section`) and a crashed agent is retried once within
/// it. `--deadline` is that total: a retry that would start after it is not started.
#[test]
fn a_retry_that_would_start_after_the_deadline_is_not_started() {
    let s = Sandbox::new();
    let t0 = Instant::now();
    let out = s
        .triage([
            "run",
            "--deadline",
            "1s",
            "--retries",
            "3",
            "--delay",
            "5s",
            "--",
            "sh",
            "-c",
            "echo crashed >&2; exit 1",
        ])
        .run();
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    let out = out.status(1);
    let r = report(&out.stderr);
    let attempts = r["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{r}");
    assert!(
        attempts[0]["stopped"]
            .as_str()
            .unwrap()
            .contains("the run's deadline (1s) ends before attempt 2 could start"),
        "{r}"
    );
}

#[test]
fn an_attempt_still_running_at_the_deadline_is_stopped_as_a_timeout() {
    let s = Sandbox::new();
    let t0 = Instant::now();
    let out = s
        .triage([
            "run",
            "--deadline",
            "500ms",
            "--timeout",
            "1m",
            "--kill-after",
            "100ms",
            "--",
            "sleep",
            "30",
        ])
        .run();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let out = out.status(124);
    let r = report(&out.stderr);
    assert_eq!(r["outcome"], "timed_out", "{r}");
    assert_eq!(r["attempts"].as_array().unwrap().len(), 1, "{r}");
}

#[test]
fn deadline_and_idle_timeout_take_durations() {
    let s = Sandbox::new();
    s.cmd(&["run", "--deadline", "soon", "--", "true"])
        .assert()
        .code(64)
        .stderr(predicates::str::contains("--deadline"));
    s.cmd(&[
        "run",
        "--idle-timeout",
        "0",
        "--deadline",
        "0",
        "--",
        "true",
    ])
    .assert()
    .code(0);
}

/// Seed 002, Stage 5 Circuit Breaker: `action_when_open: proceed_without_section`. With the
/// section writer's breaker open, `--fallback` runs what stands in for the section, and the
/// run is reported degraded rather than failed fast.
#[test]
fn an_open_breaker_runs_the_fallback_and_reports_the_run_degraded() {
    let s = Sandbox::new();
    s.cmd(&["breaker", "trip", "writer", "--for", "10m"])
        .env("TRIAGE_NOW", "2026-02-04T14:30:00Z")
        .assert()
        .success();
    let out = s
        .triage([
            "run",
            "--agent",
            "writer",
            "--fallback",
            "echo 'section 3 omitted: writer unavailable'",
            "--",
            "touch",
            "section-3.md",
        ])
        .env("TRIAGE_NOW", "2026-02-04T14:35:00Z")
        .run()
        .status(0);
    assert!(!s.exists("section-3.md"), "the command must not have run");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "section 3 omitted: writer unavailable\n"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("running the fallback instead"), "{err}");
    let r = report(&out.stderr);
    assert_eq!(r["outcome"], "fallback", "{r}");
    assert_eq!(r["degraded"], true);
    assert_eq!(r["fallback"]["exit_status"], 0);
    assert_eq!(r["attempts"], serde_json::json!([]));

    // A fallback that fails ends the run with its status.
    let out = s
        .triage([
            "run",
            "--agent",
            "writer",
            "--fallback",
            "exit 3",
            "--",
            "true",
        ])
        .env("TRIAGE_NOW", "2026-02-04T14:36:00Z")
        .run()
        .status(3);
    assert_eq!(report(&out.stderr)["outcome"], "fallback_failed");

    // A closed breaker never runs the fallback.
    let out = s
        .triage([
            "run",
            "--agent",
            "writer",
            "--fallback",
            "touch fell-back",
            "--",
            "true",
        ])
        .env("TRIAGE_NOW", "2026-02-04T14:50:00Z")
        .run()
        .status(0);
    assert!(!s.exists("fell-back"));
    assert_eq!(report(&out.stderr)["outcome"], "succeeded");
}

/// Seed 000, "When to Retry vs Abort": abort when the same agent fails 3+ times. `run`'s
/// report carries the warning at the agent's third unresolved failure in the workflow (its
/// explicit `--retries` still stand; a phase stops the item's retries there).
#[test]
fn the_third_failure_of_one_agent_in_a_workflow_warns_to_abort() {
    let s = Sandbox::new();
    let out = s
        .triage([
            "run",
            "--agent",
            "writer",
            "--workflow",
            "w1",
            "--retries",
            "3",
            "--delay",
            "10ms",
            "--",
            "sh",
            "-c",
            "echo 'connection reset by peer' >&2; exit 1",
        ])
        .run()
        .status(1);
    let r = report(&out.stderr);
    assert_eq!(r["attempts"].as_array().unwrap().len(), 4, "{r}");
    let w = r["warnings"].as_array().unwrap();
    let abort = w
        .iter()
        .find(|w| w["name"] == "agent_failure_threshold")
        .unwrap_or_else(|| panic!("no abort warning: {r}"));
    assert!(abort["message"]
        .as_str()
        .unwrap()
        .contains("agent writer has failed 4 times in workflow w1"));
    // `[thresholds] agent_failures = 0` turns the rule off.
    s.write(".triage.toml", "[thresholds]\nagent_failures = 0\n");
    let out = s
        .triage([
            "run",
            "--agent",
            "editor",
            "--workflow",
            "w2",
            "--retries",
            "3",
            "--delay",
            "10ms",
            "--",
            "sh",
            "-c",
            "echo 'connection reset by peer' >&2; exit 1",
        ])
        .run()
        .status(1);
    let r = report(&out.stderr);
    assert!(
        !r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["name"] == "agent_failure_threshold"),
        "{r}"
    );
}
