//! What a phase plan's item gets of `triage run` beyond its attempts: a fallback when its
//! breaker is open, a deadline, an idle timeout, a permit held while it runs and a retry
//! budget — each an item's own key or the plan's `[defaults]`.

use crate::common::Sandbox;
use serde_json::Value;
use std::time::{Duration, Instant};

const NOW: &str = "2026-02-04T14:35:00Z";

/// No wait between attempts, so the tests stay fast.
const RETRY: &str = "[retry]\nschedule = [\"0s\"]\nmax_attempts = 3\n";

/// `phase run plan.toml --workflow w --phase N` at [`NOW`]: exit status, answer, stderr.
fn run_phase(s: &Sandbox, plan: &str, n: &str, extra: &[&str]) -> (i32, Value, String) {
    s.write("plan.toml", plan);
    let mut args = vec!["phase", "run", "plan.toml", "--workflow", "w", "--phase", n];
    args.extend_from_slice(extra);
    let out = s.triage(args).env("TRIAGE_NOW", NOW).run();
    let err = out.stderr();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.code().unwrap_or(-1), doc, err)
}

fn item<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["items"]
        .as_array()
        .and_then(|v| v.iter().find(|i| i["id"] == id))
        .unwrap_or_else(|| panic!("no item {id} in {doc}"))
}

/// Seed 002, Stage 5 Circuit Breaker: `action_when_open: proceed_without_section`. The
/// section writer's breaker is open, so its fallback stands in for the section: the item is
/// complete but degraded, and the phase proceeds degraded — not failed, not a full success.
#[test]
fn an_item_whose_breaker_is_open_runs_its_fallback_and_the_phase_proceeds_degraded() {
    let s = Sandbox::new();
    s.write(".triage.toml", RETRY);
    s.cmd(&["breaker", "trip", "section-writer-3", "--for", "10m"])
        .env("TRIAGE_NOW", "2026-02-04T14:30:00Z")
        .assert()
        .success();
    let plan = r#"
[[items]]
id = "section-2"
command = "echo section 2"

[[items]]
id = "section-3"
agent = "section-writer-3"
command = "touch wrote-3; echo section 3"
fallback = "echo 'section 3 omitted: writer unavailable'"
"#;
    let (code, doc, err) = run_phase(&s, plan, "5", &[]);
    assert_eq!(code, 0, "{err}\n{doc}");
    assert!(!s.exists("wrote-3"), "the section's command must not run");
    assert_eq!(doc["decision"], "proceed_degraded", "{doc}");
    assert!(
        doc["reason"]
            .as_str()
            .unwrap()
            .contains("section-3 is degraded"),
        "{doc}"
    );
    assert_eq!(doc["degraded"], serde_json::json!(["section-3"]));
    assert_eq!(doc["complete"], serde_json::json!(["section-2"]));
    assert_eq!(doc["failed"], serde_json::json!([]));
    assert_eq!(doc["counts"]["degraded"], 1);
    assert_eq!(doc["counts"]["complete"], 1);
    assert_eq!(doc["counts"]["failed"], 0);
    let i = item(&doc, "section-3");
    assert_eq!(i["state"], "complete", "{i}");
    assert_eq!(i["outcome"], "fallback");
    assert_eq!(i["degraded"], true);
    assert!(
        i["note"]
            .as_str()
            .unwrap()
            .contains("section-writer-3 is open"),
        "{i}"
    );
    assert_eq!(
        std::fs::read_to_string(s.path().join(i["output"].as_str().unwrap())).unwrap(),
        "section 3 omitted: writer unavailable\n"
    );

    // A fallback that fails leaves the item failed, never degraded.
    let failing = plan.replace(
        "fallback = \"echo 'section 3 omitted: writer unavailable'\"",
        "fallback = \"exit 3\"\ncriticality = \"optional\"",
    );
    let (_, doc, err) = run_phase(&s, &failing, "6", &[]);
    let i = item(&doc, "section-3");
    assert_eq!(i["state"], "failed", "{err}\n{i}");
    assert_eq!(i["outcome"], "fallback_failed");
    assert_eq!(doc["degraded"], serde_json::json!([]));
}

/// Seed 002, Compensation Protocol for Stage 6c: `timeout_exceeded  # >30 min per section`.
/// A section past its own deadline is stopped as `run --deadline` stops a command (timed out,
/// exit 124), recorded, and the phase goes on with the other sections.
#[test]
fn an_item_past_its_deadline_is_stopped_and_the_phase_goes_on_with_the_rest() {
    let s = Sandbox::new();
    s.write(".triage.toml", RETRY);
    let plan = r#"
[[items]]
id = "section-1"
command = "echo section 1"

[[items]]
id = "section-2"
command = "sleep 30"
deadline = "1s"
criticality = "optional"

[[items]]
id = "section-3"
command = "echo section 3"
"#;
    let t0 = Instant::now();
    let (code, doc, err) = run_phase(&s, plan, "6", &["--kill-after", "100ms"]);
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    assert_eq!(code, 0, "{err}\n{doc}");
    assert_eq!(doc["decision"], "proceed_degraded", "{doc}");
    let i = item(&doc, "section-2");
    assert_eq!(i["state"], "failed", "{i}");
    assert_eq!(i["outcome"], "timed_out");
    assert_eq!(i["kind"], "timeout");
    assert_eq!(i["exit_status"], 124);
    // One attempt: no retry starts after the deadline.
    assert_eq!(i["attempts"], 1, "{i}");
    assert_eq!(i["error_ids"].as_array().unwrap().len(), 1, "{i}");
    for id in ["section-1", "section-3"] {
        assert_eq!(item(&doc, id)["state"], "complete");
    }
}

/// Seed 004, Error Escalation Matrix: "Worker unresponsive (T2 threshold) → alert Lead for
/// re-spawn". A worker of the phase that goes quiet for its idle timeout is stopped as hung
/// (`unresponsive`, exit 124, as `run --idle-timeout` does), and the others finish.
#[test]
fn an_item_silent_for_its_idle_timeout_is_stopped_as_unresponsive() {
    let s = Sandbox::new();
    s.write(".triage.toml", RETRY);
    let plan = r#"
[defaults]
idle_timeout = "500ms"

[[items]]
id = "worker-1"
command = "echo started; sleep 30"
criticality = "optional"

[[items]]
id = "worker-2"
command = "echo done"

[[items]]
id = "worker-3"
command = "sleep 1; echo slow but fine"
idle_timeout = "0"
"#;
    let t0 = Instant::now();
    let (code, doc, err) = run_phase(&s, plan, "2", &["--kill-after", "100ms"]);
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    assert_eq!(code, 0, "{err}\n{doc}");
    let i = item(&doc, "worker-1");
    assert_eq!(i["state"], "failed", "{i}");
    assert_eq!(i["outcome"], "idle");
    assert_eq!(i["kind"], "unresponsive");
    assert_eq!(i["exit_status"], 124);
    assert_eq!(i["attempts"], 1, "unresponsive is not retried: {i}");
    // An item's own 0 turns the plan's default off.
    assert_eq!(item(&doc, "worker-3")["state"], "complete", "{doc}");
    assert_eq!(item(&doc, "worker-2")["state"], "complete");
}

/// Seed 002, When to Escalate to User: "Resource limit reached → Agent queue timeout. {X}
/// agents waiting", and its checklist's "Resource limit reached -> queue behaves correctly".
/// Six items share `[permits.api] max = 2` with six jobs: never more than two run at once,
/// the rest wait their turn (none fails for want of a permit).
#[test]
fn items_naming_a_permit_never_run_more_at_once_than_it_allows_and_wait_their_turn() {
    let s = Sandbox::new();
    s.write(".triage.toml", format!("{RETRY}[permits.api]\nmax = 2\n"));
    std::fs::create_dir_all(s.path().join("running")).unwrap();
    std::fs::create_dir_all(s.path().join("seen")).unwrap();
    let mut plan = String::from("[defaults]\npermit = \"api\"\n");
    for n in 1..=6 {
        plan.push_str(&format!(
            "\n[[items]]\nid = \"call-{n}\"\ncommand = \"touch running/{n}; ls running | wc -l > seen/{n}; sleep 0.3; rm running/{n}\"\n"
        ));
    }
    let (code, doc, err) = run_phase(&s, &plan, "3", &["--jobs", "6"]);
    assert_eq!(code, 0, "{err}\n{doc}");
    assert_eq!(doc["counts"]["complete"], 6, "{doc}");
    for n in 1..=6 {
        let seen: u32 = s.read(&format!("seen/{n}")).trim().parse().unwrap();
        assert!((1..=2).contains(&seen), "item {n} saw {seen} items running");
    }
    assert_eq!(
        item(&doc, "call-1")["attempt_log"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// Seed 002, Recovery Actions: "Resource exhaustion | Queue timeout | Escalate | Wait or
/// abort". An item whose permit stays taken past its `permit_wait` is not run and fails
/// naming the key; the phase goes on with the rest.
#[test]
fn an_item_that_cannot_get_its_permit_in_time_fails_naming_the_key() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        format!("{RETRY}[permits.api]\nmax = 1\nlease = \"1h\"\n"),
    );
    s.triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0);
    let plan = r#"
[[items]]
id = "caller"
command = "touch called"
permit = "api"
permit_wait = "300ms"
criticality = "optional"

[[items]]
id = "local"
command = "echo local work"
"#;
    let t0 = Instant::now();
    let (code, doc, err) = run_phase(&s, plan, "4", &[]);
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    assert_eq!(code, 0, "{err}\n{doc}");
    assert!(
        !s.exists("called"),
        "the item must not run without its permit"
    );
    let i = item(&doc, "caller");
    assert_eq!(i["state"], "failed", "{i}");
    assert_eq!(i["outcome"], "permit_busy");
    assert_eq!(i["kind"], "overloaded");
    assert_eq!(i["exit_status"], 75);
    let note = i["note"].as_str().unwrap();
    assert!(
        note.contains("no permit of `api` was free (1 of 1 held)"),
        "{note}"
    );
    assert!(note.contains("after waiting 300ms"), "{note}");
    assert_eq!(i["error_ids"].as_array().unwrap().len(), 1, "{i}");
    assert_eq!(item(&doc, "local")["state"], "complete");
}

/// Seed 003, Rate Limiting: "`rate_limited`: API or service rate limit hit", and seed 001's
/// transient row (retry with backoff, skip after retries). Items sharing a retry budget
/// charge it with each failure and credit it with each success; once it is spent their
/// retries are refused with `run --budget`'s words.
#[test]
fn items_naming_a_budget_charge_it_credit_it_and_fail_fast_once_it_is_spent() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        format!("{RETRY}[budget.api]\nmax_tokens = 4\ntoken_ratio = 0.5\n"),
    );
    for _ in 0..2 {
        s.triage(["budget", "record", "api", "--outcome", "failure"])
            .run()
            .status(0);
    }
    let limited = "echo 'HTTP 429 Too Many Requests' >&2; exit 1";
    let plan = format!(
        r#"
[defaults]
budget = "api"

[[items]]
id = "fine"
command = "echo fine"

[[items]]
id = "limited"
command = "{limited}"
criticality = "optional"
"#
    );
    // One at a time: the success credits the budget before the failure charges it.
    let (code, doc, err) = run_phase(&s, &plan, "7", &["--jobs", "1"]);
    assert_eq!(code, 0, "{err}\n{doc}");
    let i = item(&doc, "limited");
    assert_eq!(i["state"], "failed", "{i}");
    // 4 tokens, 2 failures: 2; the success: 2.5; the item's failure: 1.5, not above half.
    assert_eq!(i["attempts"], 1, "{i}");
    let stopped = i["attempt_log"][0]["stopped"].as_str().unwrap_or_default();
    assert!(
        stopped.contains("the fleet's retry budget for `api` is spent: fail fast"),
        "{i}"
    );
    let v = s
        .triage(["budget", "check", "api", "-e"])
        .run()
        .status(1)
        .stdout_json();
    assert_eq!(v["tokens"], 1.5, "{v}");
}

/// Seed 000, Phase 0 (validate before anything runs) with `run --permit`'s rule: a plan that
/// names a permit or a retry budget the policy does not set is refused before any item
/// runs, with the TOML to add; a bad duration is named with its line.
#[test]
fn a_plan_naming_an_unset_permit_or_budget_or_a_bad_duration_is_refused_before_it_runs() {
    let s = Sandbox::new();
    s.write(".triage.toml", RETRY);
    let plan = r#"
[[items]]
id = "a"
command = "touch ran"
permit = "db"
budget = "llm"
"#;
    let (code, _, err) = run_phase(&s, plan, "1", &[]);
    assert_eq!(code, 64, "{err}");
    assert!(!s.exists("ran"));
    assert!(
        err.contains("permit `db`: the policy sets no permits for it; add `[permits.db] max = 8`"),
        "{err}"
    );
    assert!(
        err.contains("budget `llm`: the policy sets no retry budget for it; add `[budget.llm] max_tokens = 10`"),
        "{err}"
    );

    let plan = "[[items]]\nid = \"a\"\ncommand = \"touch ran\"\n\n[[items]]\nid = \"b\"\ncommand = \"true\"\ndeadline = \"5 parsecs\"\n";
    let (code, _, err) = run_phase(&s, plan, "1", &[]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("plan.toml:8:12: bad duration `5 parsecs`"),
        "{err}"
    );
    let plan = "[defaults]\nidle_timeout = \"soon\"\n\n[[items]]\nid = \"a\"\ncommand = \"touch ran\"\npermit_wait = \"1s\"\n";
    let (code, _, err) = run_phase(&s, plan, "1", &[]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("plan.toml:2:"), "{err}");
    let plan = "[[items]]\nid = \"a\"\ncommand = \"touch ran\"\npermit_wait = \"1s\"\n";
    let (code, _, err) = run_phase(&s, plan, "1", &[]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("plan.toml:2: item 1 (`a`): permit_wait without a permit"),
        "{err}"
    );
    assert!(!s.exists("ran"));
}

/// Seed 002, Stage 5 Parallel Execution Interrupt: "NOT_STARTED: Section queued, no
/// progress". A Ctrl+C while an item waits for its permit pauses the phase at once (not
/// after the wait), and the item is filed as not started: it never ran.
#[test]
fn an_interrupt_while_an_item_waits_for_its_permit_pauses_the_phase_at_once() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        format!("{RETRY}[permits.api]\nmax = 1\nlease = \"1h\"\n"),
    );
    s.triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0);
    s.write(
        "plan.toml",
        "[[items]]\nid = \"waiter\"\ncommand = \"touch waiter.ran\"\npermit = \"api\"\nside_effects = true\n\n[[items]]\nid = \"worker\"\ncommand = \"touch worker.started; while :; do sleep 0.02; done\"\n",
    );
    let t0 = Instant::now();
    let child = s
        .triage([
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "w",
            "--phase",
            "8",
        ])
        .env("TRIAGE_NOW", NOW)
        .spawn();
    let started = Instant::now();
    while !s.exists("worker.started") {
        assert!(started.elapsed() < Duration::from_secs(20), "never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait().status(130);
    // The wait for the permit is 10 minutes; the interrupt ends it.
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    assert!(!s.exists("waiter.ran"));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["decision"], "paused", "{doc}");
    let i = item(&doc, "waiter");
    assert_eq!(i["state"], "not_started", "{i}");
    assert!(
        i["note"]
            .as_str()
            .unwrap()
            .contains("waited for a permit of `api`"),
        "{i}"
    );
    assert_eq!(doc["needs_decision"], serde_json::json!([]));
}
