//! `triage saga`: steps with compensations, undone in reverse, checkpointed so that a run cut
//! off by SIGKILL resumes without repeating what succeeded.

use crate::common::{json_out, Sandbox};
use serde_json::Value;

const NOW: &str = "2026-01-02T03:04:05Z";

fn ok(s: &Sandbox, args: &[&str]) -> Value {
    let out = s.triage(args).env("TRIAGE_NOW", NOW).run().status(0);
    json_out(&out)
}

/// Begins `w1` with steps a, b, c whose compensations append their name to `log`.
fn three_steps(s: &Sandbox, b_compensation: &str) {
    ok(s, &["saga", "begin", "w1"]);
    ok(
        s,
        &[
            "saga",
            "step",
            "w1",
            "a",
            "--stage",
            "1",
            "--compensate",
            "echo a >> log",
        ],
    );
    ok(
        s,
        &[
            "saga",
            "step",
            "w1",
            "b",
            "--stage",
            "2",
            "--compensate",
            b_compensation,
        ],
    );
    ok(
        s,
        &[
            "saga",
            "step",
            "w1",
            "c",
            "--stage",
            "3",
            "--compensate",
            "echo c >> log",
        ],
    );
}

fn state(s: &Sandbox) -> Value {
    serde_json::from_str(&s.read(".triage/sagas/w1.json")).unwrap()
}

#[test]
fn compensate_runs_the_steps_in_reverse_and_archives_the_state() {
    let s = Sandbox::new();
    three_steps(&s, "echo b >> log");
    let out = ok(&s, &["saga", "compensate", "w1", "--reason", "user abort"]);
    assert_eq!(s.read("log"), "c\nb\na\n");
    assert_eq!(out["status"], "compensated");
    assert_eq!(out["compensated"], serde_json::json!(["c", "b", "a"]));
    assert_eq!(out["resumed"], false);
    let doc = state(&s);
    let history = doc["compensation_history"].as_array().unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(history[0]["stage"], "3");
    assert_eq!(history[0]["reason"], "user abort");
    assert_eq!(history[0]["user_notified"], false);
    assert!(history[0]["action_taken"]
        .as_str()
        .unwrap()
        .contains("echo c"));
    // The state before compensation is archived: every step still pending there.
    let archived = out["state_archived"].as_str().unwrap();
    let old: Value =
        serde_json::from_str(&std::fs::read_to_string(s.path().join(archived)).unwrap()).unwrap();
    assert_eq!(old["saga"]["status"], "open");
    assert!(s.exists(".triage/sagas/w1.json.bak"));
    // A second run has nothing left to do and repeats nothing.
    let again = ok(&s, &["saga", "compensate", "w1"]);
    assert_eq!(again["compensated"], serde_json::json!([]));
    assert_eq!(s.read("log"), "c\nb\na\n");
}

#[test]
fn compensation_killed_mid_run_resumes_without_repeating_what_succeeded() {
    let s = Sandbox::new();
    // b's first run kills `triage` itself (its parent) with SIGKILL before doing its work.
    three_steps(
        &s,
        "if [ ! -e killed ]; then touch killed; kill -KILL $PPID; exit 1; fi; echo b >> log",
    );
    let out = s
        .triage(["saga", "compensate", "w1"])
        .env("TRIAGE_NOW", NOW)
        .run();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "triage was killed mid-run");
    assert_eq!(s.read("log"), "c\n");
    let doc = state(&s);
    assert_eq!(doc["saga"]["status"], "compensating");
    assert_eq!(doc["saga"]["steps"][1]["compensation"]["status"], "started");

    let resumed = ok(&s, &["saga", "compensate", "w1"]);
    assert_eq!(resumed["resumed"], true);
    assert_eq!(resumed["already_compensated"], serde_json::json!(["c"]));
    assert_eq!(resumed["compensated"], serde_json::json!(["b", "a"]));
    assert_eq!(
        s.read("log"),
        "c\nb\na\n",
        "c not repeated, b retried, then a"
    );
    let doc = state(&s);
    assert_eq!(doc["saga"]["steps"][1]["compensation"]["attempts"], 2);
    assert_eq!(doc["saga"]["steps"][2]["compensation"]["attempts"], 1);
}

/// Seed 002, Compensation Matrix, stage 3 ("Delete outline, return to Stage 2") and its
/// recovery checklist ("Stage 3 user rejects 2x -> compensation triggers, returns to Stage 2"):
/// `compensate --to` undoes only the steps after the named one, and the saga goes on.
#[test]
fn compensate_to_a_step_undoes_only_the_later_steps_and_the_saga_goes_on() {
    let s = Sandbox::new();
    three_steps(&s, "echo b >> log");
    let out = ok(
        &s,
        &[
            "saga",
            "compensate",
            "w1",
            "--to",
            "b",
            "--reason",
            "user rejected the outline twice",
        ],
    );
    assert_eq!(s.read("log"), "c\n", "only the step after b was undone");
    assert_eq!(out["status"], "open");
    assert_eq!(out["compensated"], serde_json::json!(["c"]));
    assert_eq!(out["to"], "b");
    let doc = state(&s);
    assert_eq!(doc["saga"]["steps"].as_array().unwrap().len(), 2);
    assert_eq!(doc["saga"]["rollbacks"][0]["to"], "b");
    assert_eq!(doc["saga"]["rollbacks"][0]["steps"][0]["name"], "c");
    assert_eq!(
        doc["saga"]["rollbacks"][0]["reason"],
        "user rejected the outline twice"
    );
    assert_eq!(doc["compensation_history"][0]["stage"], "3");
    // Back at stage 2: stage 3 is done again, and a later whole rollback undoes it all.
    ok(
        &s,
        &[
            "saga",
            "step",
            "w1",
            "c",
            "--stage",
            "3",
            "--compensate",
            "echo c2 >> log",
        ],
    );
    let all = ok(&s, &["saga", "compensate", "w1", "--reason", "user abort"]);
    assert_eq!(all["status"], "compensated");
    assert_eq!(s.read("log"), "c\nc2\nb\na\n");
}

#[test]
fn compensate_to_names_a_step_of_the_saga() {
    let s = Sandbox::new();
    three_steps(&s, "echo b >> log");
    let out = s
        .triage(["--strict", "saga", "compensate", "w1", "--to", "nope"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(65);
    let err = out.stderr();
    assert!(
        err.contains("triage saga:") && err.contains("no step `nope`") && err.contains("a, b, c"),
        "{err}"
    );
    assert!(!s.exists("log"), "nothing was undone");
    // To the newest step: nothing to undo, the saga stays open and unarchived.
    let out = ok(&s, &["saga", "compensate", "w1", "--to", "c"]);
    assert_eq!(out["status"], "open");
    assert_eq!(out["compensated"], serde_json::json!([]));
    assert!(!s.exists("log"));
}

#[test]
fn a_failed_compensation_is_reported_passed_and_retried_next_time() {
    let s = Sandbox::new();
    three_steps(&s, "test -e fixed && echo b >> log");
    let out = s
        .triage(["-e", "saga", "compensate", "w1"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(1); // a negative verdict under -e
    let report = json_out(&out);
    assert_eq!(report["status"], "compensation_failed");
    assert_eq!(report["failed"][0]["step"], "b");
    assert_eq!(report["failed"][0]["exit_status"], 1);
    assert_eq!(s.read("log"), "c\na\n", "continued past the failure");
    s.write("fixed", "");
    let again = ok(&s, &["saga", "compensate", "w1"]);
    assert_eq!(again["compensated"], serde_json::json!(["b"]));
    assert_eq!(again["status"], "compensated");
    assert_eq!(
        state(&s)["compensation_history"].as_array().unwrap().len(),
        4
    );
}

#[test]
fn the_saga_lives_in_an_existing_workflow_state_file() {
    let s = Sandbox::new();
    s.write("run/state.json", r#"{"workflow_id": "w9", "stage": 4}"#);
    ok(&s, &["saga", "begin", "w9", "--state", "run/state.json"]);
    ok(
        &s,
        &["saga", "step", "w9", "outline", "--state", "run/state.json"],
    );
    let doc: Value = serde_json::from_str(&s.read("run/state.json")).unwrap();
    assert_eq!(doc["stage"], 4, "other fields are kept");
    assert_eq!(doc["saga"]["steps"][0]["compensation"]["status"], "none");
    let st = ok(&s, &["saga", "status", "w9", "--state", "run/state.json"]);
    assert_eq!(st["saga"]["steps"][0]["name"], "outline");
    let text = s
        .triage([
            "saga",
            "status",
            "w9",
            "--state",
            "run/state.json",
            "--text",
        ])
        .run();
    assert!(String::from_utf8_lossy(&text.stdout).contains("outline"));
    // Another workflow's id is refused.
    s.cmd(&[
        "--strict",
        "saga",
        "status",
        "w1",
        "--state",
        "run/state.json",
    ])
    .assert()
    .code(65)
    .stderr(predicates::str::contains("holds the saga of workflow `w9`"));
}

#[test]
fn bad_requests_say_what_to_do() {
    let s = Sandbox::new();
    s.cmd(&["--strict", "saga", "step", "w1", "a"])
        .assert()
        .code(65)
        .stderr(predicates::str::starts_with("triage saga: no saga `w1`"))
        .stderr(predicates::str::contains("triage saga begin w1"));
    // Best effort: a warning and exit 0 without --strict.
    s.cmd(&["saga", "status", "w1"]).assert().code(0);
    ok(&s, &["saga", "begin", "w1"]);
    ok(&s, &["saga", "begin", "w1"]);
    ok(&s, &["saga", "step", "w1", "a"]);
    s.cmd(&["--strict", "saga", "step", "w1", "a"])
        .assert()
        .code(65)
        .stderr(predicates::str::contains("already has a step `a`"));
    s.cmd(&["--strict", "saga", "begin", "w1"])
        .assert()
        .code(65)
        .stderr(predicates::str::contains("already began"));
    s.cmd(&["saga", "frob", "w1"]).assert().code(64);
}
