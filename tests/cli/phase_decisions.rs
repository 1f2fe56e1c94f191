//! Decisions that finish: a phase that stops waits for a person with options, a default and a
//! deadline (seed 002's escalation format and "User Response Handling"); `phase wait` applies
//! the default at the deadline; seed 000's abort thresholds stop a phase.

use crate::common::Sandbox;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Two attempts, no wait between them.
const POLICY: &str = "[retry]\nschedule = [\"0s\"]\nmax_attempts = 2\n";

/// A critical item that fails and one that completes: the phase stops.
const PLAN: &str = "[[items]]\nid = \"stats\"\ncommand = \"echo 'no statistics today' >&2; exit 3\"\n[[items]]\nid = \"planner\"\ncommand = \"echo planned\"\n";

const AT: &str = "2026-02-04T14:30:00Z";

fn sandbox(policy: &str) -> Sandbox {
    let s = Sandbox::new();
    s.write(".triage.toml", policy);
    s.write("plan.toml", PLAN);
    s
}

fn run_phase(s: &Sandbox, w: &str) -> (i32, Value) {
    let out = s
        .triage(["phase", "run", "plan.toml", "--workflow", w, "--phase", "2"])
        .env("TRIAGE_NOW", AT)
        .run();
    (out.code().unwrap_or(-1), out.stdout_json())
}

fn status(s: &Sandbox, w: &str, now: &str) -> Value {
    s.triage(["phase", "status", "--workflow", w, "--phase", "2"])
        .env("TRIAGE_NOW", now)
        .run()
        .status(0)
        .stdout_json()
}

fn status_text(s: &Sandbox, w: &str, now: &str) -> String {
    s.triage(["phase", "status", "--workflow", w, "--phase", "2", "--text"])
        .env("TRIAGE_NOW", now)
        .run()
        .status(0)
        .stdout()
}

fn wait(s: &Sandbox, w: &str, now: &str, extra: &[&str]) -> (i32, Value, Duration) {
    let mut args = vec!["phase", "wait", "--workflow", w, "--phase", "2"];
    args.extend_from_slice(extra);
    let t = Instant::now();
    let out = s.triage(args).env("TRIAGE_NOW", now).run();
    (out.code().unwrap_or(-1), out.stdout_json(), t.elapsed())
}

fn resolutions(s: &Sandbox) -> Vec<Value> {
    std::fs::read_to_string(s.root().join("logs/errors.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l.get("resolves").is_some())
        .collect()
}

/// Seed 002, "Escalation Format": `options` (label, action), `default_action`,
/// `auto_proceed_after`; "User Response Handling": `wait_seconds: 300`, and the
/// circuit-breaker default `proceed_with_partial`. A phase that stops records its decision as
/// pending with the options, the policy's default and the deadline; `phase status` says it in
/// words a person acts on.
#[test]
fn a_stopped_phase_records_a_pending_decision_with_options_a_default_and_a_deadline() {
    let s = sandbox(POLICY);
    let (code, doc) = run_phase(&s, "w1");
    assert_eq!(code, 1);
    // The answer of `run` carries it too.
    assert_eq!(
        doc["pending_decision"]["deadline"], "2026-02-04T14:35:00.000Z",
        "{doc:#}"
    );
    let m = status(&s, "w1", AT);
    let d = &m["decision"];
    assert_eq!(d["pending"], true, "{d:#}");
    assert_eq!(d["default_action"], "proceed_with_partial", "{d:#}");
    assert_eq!(d["default"]["choice"], "B");
    assert_eq!(d["default"]["action"], "proceed_without");
    assert_eq!(d["timeout_s"], 300);
    assert_eq!(d["deadline"], "2026-02-04T14:35:00.000Z");
    let actions: Vec<&str> = d["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["retry", "proceed_without", "manual_input", "abort_workflow"]
    );
    assert_eq!(d["options"][0]["text"], "Retry stats (attempt 3)");
    let t = status_text(&s, "w1", "2026-02-04T14:31:00Z");
    assert!(t.contains("stopped, waiting for a decision"), "{t}");
    assert!(
        t.contains(
            "(B) Proceed without stats output (may affect quality) [proceed_without] (the default)"
        ),
        "{t}"
    );
    assert!(
        t.contains("triage phase decide --workflow w1 --phase 2 --choice LETTER"),
        "{t}"
    );
    assert!(
        t.contains("applies at 2026-02-04T14:35:00.000Z (in 4m)"),
        "{t}"
    );
    assert!(
        t.contains("triage phase wait --workflow w1 --phase 2"),
        "{t}"
    );

    // The policy names the default and the timeout.
    let s = sandbox(&format!(
        "{POLICY}[phase]\ndefault_action = \"abort_workflow\"\ndecision_timeout = \"10m\"\n"
    ));
    run_phase(&s, "w2");
    let d = status(&s, "w2", AT)["decision"].clone();
    assert_eq!(d["default"]["choice"], "D", "{d:#}");
    assert_eq!(d["deadline"], "2026-02-04T14:40:00.000Z");
}

/// Seed 002, "User Response Handling": "If user doesn't respond within timeout: 1. Log 'User
/// response timeout' 2. Take default action (if safe) 3. Continue workflow with note in
/// state". A `phase wait` whose deadline has passed applies the default at once, exactly as
/// `phase decide` would (the item skipped, the phase's errors resolved), and records that the
/// default did it; a second wait finds it decided and applies nothing.
#[test]
fn phase_wait_past_the_deadline_applies_the_default_once_and_records_it() {
    let s = sandbox(POLICY);
    run_phase(&s, "w1");
    let late = "2026-02-04T14:36:00Z";
    let (code, doc, took) = wait(&s, "w1", late, &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(
        took < Duration::from_secs(3),
        "a passed deadline slept {took:?}"
    );
    assert_eq!(doc["applied_default"], true, "{doc:#}");
    assert_eq!(doc["decided_by"], "default after timeout");
    assert_eq!(doc["choice"], "B");
    assert_eq!(doc["skipped"][0], "stats");
    let m = status(&s, "w1", late);
    assert_eq!(m["decision"]["pending"], false);
    assert_eq!(
        m["decision"]["choice"]["decided_by"],
        "default after timeout"
    );
    assert_eq!(m["decision"]["choice"]["at"], "2026-02-04T14:36:00.000Z");
    let resolved = resolutions(&s).len();
    assert_eq!(resolved, 2, "both failed attempts resolved");
    assert!(resolutions(&s)
        .iter()
        .all(|r| r["resolution"]["action_taken"] == "proceed_without"));
    let t = status_text(&s, "w1", late);
    assert!(
        t.contains("Decided: (B) proceed_without by default after timeout"),
        "{t}"
    );
    // Decided already: a second wait applies nothing.
    let (code, doc, _) = wait(&s, "w1", late, &[]);
    assert_eq!(code, 0);
    assert_eq!(doc["applied_default"], false, "{doc:#}");
    assert_eq!(doc["decided_by"], "default after timeout");
    assert_eq!(resolutions(&s).len(), resolved);
}

/// Two `phase wait`s racing at the deadline: the manifest's lock lets one apply the default;
/// the other finds it taken.
#[test]
fn two_waits_at_the_deadline_apply_the_default_once() {
    let s = sandbox(POLICY);
    run_phase(&s, "w1");
    let late = "2026-02-04T14:36:00Z";
    let args = ["phase", "wait", "--workflow", "w1", "--phase", "2"];
    let a = s.triage(args).env("TRIAGE_NOW", late).spawn();
    let b = s.triage(args).env("TRIAGE_NOW", late).spawn();
    let (a, b) = (a.wait(), b.wait());
    let docs: Vec<Value> = [a, b]
        .into_iter()
        .map(|r| r.status(0).stdout_json())
        .collect();
    let applied = docs.iter().filter(|d| d["applied_default"] == true).count();
    assert_eq!(applied, 1, "{docs:#?}");
    assert_eq!(resolutions(&s).len(), 2, "resolved once");
}

/// Seed 002's `wait_seconds: 300`: a wait whose `--timeout` ends before the deadline leaves
/// the decision pending and exits 75 (EX_TEMPFAIL: try again later).
#[test]
fn a_wait_whose_timeout_ends_first_leaves_the_decision_pending_and_exits_75() {
    let s = sandbox(POLICY);
    run_phase(&s, "w1");
    let early = "2026-02-04T14:31:00Z";
    let (code, doc, took) = wait(&s, "w1", early, &["--timeout", "200ms"]);
    assert_eq!(code, 75, "{doc:#}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(doc["pending"], true);
    assert_eq!(doc["deadline"], "2026-02-04T14:35:00.000Z");
    assert_eq!(status(&s, "w1", early)["decision"]["pending"], true);
    assert!(resolutions(&s).is_empty());
}

/// Seed 002: the user's answer comes first. A wait ends when a person decides from another
/// terminal (`phase decide`), and records who did.
#[test]
fn a_wait_ends_when_a_person_decides_from_another_terminal() {
    let s = sandbox(POLICY);
    run_phase(&s, "w1");
    let early = "2026-02-04T14:31:00Z";
    let t = Instant::now();
    let waiting = s
        .triage([
            "phase",
            "wait",
            "--workflow",
            "w1",
            "--phase",
            "2",
            "--timeout",
            "60s",
        ])
        .env("TRIAGE_NOW", early)
        .spawn();
    s.triage([
        "phase",
        "decide",
        "--workflow",
        "w1",
        "--phase",
        "2",
        "--choice",
        "D",
    ])
    .env("TRIAGE_NOW", early)
    .run()
    .status(0);
    let doc = waiting.wait().status(0).stdout_json();
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert_eq!(doc["applied_default"], false, "{doc:#}");
    assert_eq!(doc["choice"], "D");
    assert_eq!(doc["decided_by"], "person");
}

/// Seed 002's `default_action_policy`: `quality_floor: "wait_for_user"  # Do NOT
/// auto-proceed`. With that default nothing is applied at the deadline: the wait goes on
/// until `--timeout`, and the decision stays pending.
#[test]
fn wait_for_user_applies_nothing_at_the_deadline() {
    let s = sandbox(&format!(
        "{POLICY}[phase]\ndefault_action = \"wait_for_user\"\n"
    ));
    run_phase(&s, "w1");
    let late = "2026-02-04T14:36:00Z";
    let (code, doc, _) = wait(&s, "w1", late, &["--timeout", "200ms"]);
    assert_eq!(code, 75, "{doc:#}");
    let m = status(&s, "w1", late);
    assert_eq!(m["decision"]["pending"], true);
    assert_eq!(m["decision"]["default"], Value::Null);
    let t = status_text(&s, "w1", late);
    assert!(t.contains("No default applies"), "{t}");
    assert!(resolutions(&s).is_empty());
}

/// Seed 002's `auto_proceed_after: 300  # 5 minutes`: with `[phase] auto_proceed_after`,
/// `phase run` itself waits that long for a person, then takes the default and goes on.
#[test]
fn auto_proceed_after_makes_run_wait_then_apply_the_default() {
    let s = sandbox(&format!(
        "{POLICY}[phase]\nauto_proceed_after = \"300ms\"\n"
    ));
    let t = Instant::now();
    let out = s
        .triage([
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "w1",
            "--phase",
            "2",
        ])
        .run();
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    let err = out.stderr();
    let doc = out.status(0).stdout_json();
    assert_eq!(doc["waited"]["applied_default"], true, "{doc:#}");
    assert_eq!(doc["waited"]["action"], "proceed_without");
    assert!(err.contains("waiting for a decision until"), "{err}");
}

/// `report --template stage-failed` (seed 002's circuit-breaker escalation) carries the
/// policy's `default_action`; the seed's `proceed_with_partial` when the policy is silent.
#[test]
fn stage_failed_takes_its_default_action_from_the_policy() {
    let s = sandbox(POLICY);
    run_phase(&s, "w1");
    let report = |s: &Sandbox| {
        s.triage(["report", "--workflow", "w1", "--template", "stage-failed"])
            .run()
            .status(0)
            .stdout_json()
    };
    assert_eq!(report(&s)["default_action"], "proceed_with_partial");
    s.write(
        ".triage.toml",
        format!("{POLICY}[phase]\ndefault_action = \"abort_workflow\"\n"),
    );
    let j = report(&s);
    assert_eq!(j["default_action"], "abort_workflow", "{j:#}");
    assert!(
        j["message"]
            .as_str()
            .unwrap()
            .ends_with("Aborting the workflow."),
        "{j:#}"
    );
}

/// Seed 000, "When to Retry vs Abort": "Abort when: Same agent fails 3+ times". One optional
/// item of four failing would let the phase go on degraded; its agent failing three times in
/// the workflow stops it for a decision instead.
#[test]
fn the_same_agent_failing_three_times_stops_the_phase_for_a_decision() {
    let policy = "[retry]\nschedule = [\"0s\"]\nmax_attempts = 5\n[retry.kinds.network_error]\nmax_attempts = 5\n";
    let plan = "[[items]]\nid = \"writer\"\ncriticality = \"optional\"\ncommand = \"echo 'connection reset by peer' >&2; exit 1\"\n\
        [[items]]\nid = \"b\"\ncommand = \"echo ok\"\n[[items]]\nid = \"c\"\ncommand = \"echo ok\"\n[[items]]\nid = \"d\"\ncommand = \"echo ok\"\n";
    let s = sandbox(policy);
    s.write("plan.toml", plan);
    let (code, doc) = run_phase(&s, "w1");
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["decision"], "stop");
    let reason = doc["reason"].as_str().unwrap();
    assert!(
        reason.contains("agent_failure_threshold")
            && reason.contains("agent writer has failed 3 times"),
        "{reason}"
    );
    let d = status(&s, "w1", AT)["decision"].clone();
    assert_eq!(d["pending"], true, "{d:#}");
    assert_eq!(d["thresholds"][0], "agent_failure_threshold");
    // `agent_failures = 0` turns the rule off: the phase goes on degraded.
    let s = sandbox(&format!("{policy}[thresholds]\nagent_failures = 0\n"));
    s.write("plan.toml", plan);
    let (code, doc) = run_phase(&s, "w1");
    assert_eq!(
        (code, doc["decision"].as_str()),
        (0, Some("proceed_degraded"))
    );
}

/// Seed 000, Recovery Best Practices, "When to Retry vs Abort": abort when the circuit
/// breaker opens twice. An item's breaker opened an hour before the phase; in the phase its
/// probe fails and the breaker opens again: the phase stops for a decision naming
/// `breaker_reopened`, even though the fan-out rule alone would go on degraded.
#[test]
fn a_breaker_opening_twice_stops_the_phase_for_a_decision() {
    let policy = "[retry]\nschedule = [\"0s\"]\nmax_attempts = 1\n[breaker.\"api\"]\nfailure_threshold = 1\ncooldown = \"30s\"\n";
    let plan = "[[items]]\nid = \"writer\"\ncriticality = \"optional\"\nbreaker_key = \"api\"\ncommand = \"echo 'connection reset by peer' >&2; exit 1\"\n\
        [[items]]\nid = \"b\"\ncommand = \"echo ok\"\n[[items]]\nid = \"c\"\ncommand = \"echo ok\"\n[[items]]\nid = \"d\"\ncommand = \"echo ok\"\n";
    let open_once = |s: &Sandbox| {
        s.triage(["record-error", "--agent", "writer", "--breaker", "api"])
            .env("TRIAGE_NOW", "2026-02-04T13:30:00Z")
            .stdin(r#"{"kind": "network_error", "detail": "connection reset by peer"}"#)
            .run()
            .status(0);
    };
    let s = sandbox(policy);
    s.write("plan.toml", plan);
    open_once(&s);
    let (code, doc) = run_phase(&s, "w1");
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["decision"], "stop", "{doc:#}");
    let reason = doc["reason"].as_str().unwrap();
    assert!(
        reason.contains("breaker_reopened") && reason.contains("breaker api has opened 2 times"),
        "{reason}"
    );
    let d = status(&s, "w1", AT)["decision"].clone();
    assert_eq!(d["pending"], true, "{d:#}");
    assert_eq!(d["thresholds"][0], "breaker_reopened", "{d:#}");
    // `breaker_opens = 0` turns the rule off: the phase goes on degraded.
    let s = sandbox(&format!("{policy}[thresholds]\nbreaker_opens = 0\n"));
    s.write("plan.toml", plan);
    open_once(&s);
    let (code, doc) = run_phase(&s, "w1");
    assert_eq!(
        (code, doc["decision"].as_str()),
        (0, Some("proceed_degraded")),
        "{doc:#}"
    );
}

/// Seed 002, Partial Completion Protocol: a person's "proceed without it" lets the workflow go
/// on with partial results; it never makes the phase complete. A resumed phase whose critical
/// item was skipped by decision B says it goes on degraded, naming the item.
#[test]
fn a_phase_going_on_without_a_skipped_critical_item_is_degraded_not_complete() {
    let s = sandbox("[retry]\nschedule = [\"0s\"]\nmax_attempts = 1\n");
    s.write(
        "plan.toml",
        "[[items]]\nid = \"crit\"\ncriticality = \"critical\"\ncommand = \"echo 'connection reset by peer' >&2; exit 1\"\n\
         [[items]]\nid = \"b\"\ncommand = \"echo ok\"\n",
    );
    let (code, doc) = run_phase(&s, "w1");
    assert_eq!(
        (code, doc["decision"].as_str()),
        (1, Some("stop")),
        "{doc:#}"
    );
    s.triage([
        "phase",
        "decide",
        "--workflow",
        "w1",
        "--phase",
        "2",
        "--choice",
        "B",
    ])
    .env("TRIAGE_NOW", AT)
    .run()
    .status(0);
    let out = s
        .triage(["phase", "resume", "--workflow", "w1", "--phase", "2"])
        .env("TRIAGE_NOW", AT)
        .run();
    let doc = out.stdout_json();
    assert_eq!(doc["decision"], "proceed_degraded", "{doc:#}");
    let reason = doc["reason"].as_str().unwrap();
    assert!(
        reason.contains("crit") && !reason.contains("every item completed"),
        "{reason}"
    );
}
