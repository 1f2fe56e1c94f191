//! `triage phase`: a phase's items in parallel through `triage run`'s machinery, one decision
//! (seed 000's fan-out rules and templates), the manifest through interrupts and a killed
//! runner, resume, and one decision for every open error of the phase.

use crate::common::Sandbox;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Seed 000: 2 attempts; no wait between them, so the tests stay fast.
const POLICY: &str = "[retry]\nschedule = [\"0s\"]\nmax_attempts = 2\n";

fn sandbox() -> Sandbox {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    s
}

/// Every line of `logs/errors.jsonl`.
fn lines(s: &Sandbox) -> Vec<Value> {
    std::fs::read_to_string(s.root().join("logs/errors.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn records(s: &Sandbox) -> Vec<Value> {
    lines(s)
        .into_iter()
        .filter(|l| l.get("resolves").is_none())
        .collect()
}

fn resolutions(s: &Sandbox) -> Vec<Value> {
    lines(s)
        .into_iter()
        .filter(|l| l.get("resolves").is_some())
        .collect()
}

/// The manifest as its readers see it (`phase status`: the file and its journal).
fn manifest(s: &Sandbox, w: &str, n: &str) -> Value {
    status(s, w, n).unwrap_or_else(|| panic!("no manifest for phase {n} of {w}"))
}

fn status(s: &Sandbox, w: &str, n: &str) -> Option<Value> {
    let out = s
        .std_cmd(&["phase", "status", "--workflow", w, "--phase", n])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

fn states(m: &Value) -> Vec<(String, String)> {
    m["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["id"].as_str().unwrap().to_string(),
                i["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// `phase run PLAN --workflow W --phase N`: exit status and the JSON answer.
fn run_phase(s: &Sandbox, plan: &str, w: &str, n: &str) -> (i32, Value, String) {
    s.write("plan.toml", plan);
    let out = s
        .triage(["phase", "run", "plan.toml", "--workflow", w, "--phase", n])
        .env("TRIAGE_NOW", "2026-02-04T14:30:00Z")
        .run();
    (out.code().unwrap_or(-1), out.stdout_json(), out.stderr())
}

/// Seed 000's Phase 2: one succeeds, one recovers on retry, an optional one times out, a
/// critical one fails for good.
const FOUR: &str = r#"
name = "Subsection planning"

[[items]]
id = "analysis-planner"
command = "echo planned"

[[items]]
id = "programmer-consultant"
command = "if [ -e retried ]; then echo code; else touch retried; echo 'connection reset by peer' >&2; exit 1; fi"
criticality = "optional"

[[items]]
id = "mathematician-consultant"
command = ["sleep", "30"]
timeout = "100ms"
criticality = "optional"

[[items]]
id = "statistician-consultant"
command = "echo 'no statistics today' >&2; exit 3"
criticality = "critical"
"#;

#[test]
fn four_items_one_recovers_an_optional_times_out_a_critical_fails_template_2_and_the_log() {
    let s = sandbox();
    let (code, doc, _) = run_phase(&s, FOUR, "w1", "2");
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["decision"], "stop");
    assert_eq!(
        doc["reason"],
        "critical item failed: statistician-consultant"
    );
    assert_eq!(
        doc["failed"],
        json!(["mathematician-consultant", "statistician-consultant"])
    );
    assert_eq!(
        doc["complete"],
        json!(["analysis-planner", "programmer-consultant"])
    );
    let items = doc["items"].as_array().unwrap();
    let attempts: Vec<u64> = items
        .iter()
        .map(|i| i["attempts"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 2, 2]);
    assert_eq!(items[2]["kind"], "timeout");
    assert_eq!(items[3]["kind"], "tool_failure");
    assert_eq!(items[1]["attempt_log"].as_array().unwrap().len(), 2);
    let out = items[0]["output"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(s.path().join(out)).unwrap(),
        "planned\n"
    );
    assert_eq!(
        doc["text"],
        "[MULTIPLE FAILURES] 2 agents failed in Phase 2\n\n\
Failed agents:\n  - statistician-consultant: tool_failure\n  - mathematician-consultant: timeout\n\n\
Working agents:\n  - programmer-consultant: completed successfully\n  - analysis-planner: completed successfully\n\n\
Options:\n  (A) Retry all failed agents\n  (B) Proceed with 2 available outputs\n  (C) Abort phase and return to Phase 1\n  (D) Abort workflow"
    );
    assert_eq!(
        doc["degradation"]["text"],
        "Workflow Incomplete (a critical agent failed)\n\n\
Warnings:\n- Phase 2: no statistician-consultant output (tool_failure; critical, unresolved)\n\
- Phase 2: no mathematician-consultant output (timeout; optional, unresolved)\n\n\
Generated outputs:\n- 2 of 4 agents completed\n\n\
Recommendation: Resolve statistician-consultant first: the workflow is not complete without it. Manually review the work that ran without mathematician-consultant."
    );
    // The log: every failed attempt, with workflow, phase, agent and task; the retry that
    // worked resolved its agent's failure.
    let recs = records(&s);
    let mut seen: Vec<(String, u64)> = recs
        .iter()
        .map(|r| {
            assert_eq!(r["workflow_id"], "w1");
            assert_eq!(r["phase"], 2);
            assert_eq!(r["task_id"], r["agent"]);
            (
                r["agent"].as_str().unwrap().to_string(),
                r["retry_count"].as_u64().unwrap(),
            )
        })
        .collect();
    seen.sort();
    // Each attempt's own stderr, kept in its record (the second attempt's tail holds only its
    // own line), and classified: the reset connection is a network error.
    let tails = |agent: &str| -> Vec<(String, String)> {
        recs.iter()
            .filter(|r| r["agent"] == agent)
            .map(|r| {
                (
                    r["kind"].as_str().unwrap().to_string(),
                    r["context"]["stderr_tail"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let stats = (
        "tool_failure".to_string(),
        "no statistics today".to_string(),
    );
    assert_eq!(tails("statistician-consultant"), [stats.clone(), stats]);
    assert_eq!(
        tails("programmer-consultant"),
        [(
            "network_error".to_string(),
            "connection reset by peer".to_string()
        )]
    );
    assert_eq!(
        seen,
        [
            ("mathematician-consultant".to_string(), 0),
            ("mathematician-consultant".to_string(), 1),
            ("programmer-consultant".to_string(), 0),
            ("statistician-consultant".to_string(), 0),
            ("statistician-consultant".to_string(), 1),
        ]
    );
    let res = resolutions(&s);
    assert_eq!(res.len(), 1, "{res:?}");
    assert_eq!(res[0]["agent"], "programmer-consultant");
    assert_eq!(res[0]["resolution"]["action_taken"], "recovered_by_retry");
    // The manifest says the same.
    let m = manifest(&s, "w1", "2");
    assert_eq!(m["status"], "decided");
    assert_eq!(
        states(&m),
        pairs(&[
            ("analysis-planner", "complete"),
            ("programmer-consultant", "complete"),
            ("mathematician-consultant", "failed"),
            ("statistician-consultant", "failed"),
        ])
    );
}

fn optional_items(failing: usize, total: usize, retry: bool) -> String {
    let mut p = format!("retry = {retry}\n");
    for i in 0..total {
        let cmd = if i < failing {
            "echo 'connection reset by peer' >&2; exit 1"
        } else {
            "echo ok"
        };
        p.push_str(&format!(
            "[[items]]\nid = \"c{i}\"\ncommand = \"{cmd}\"\ncriticality = \"optional\"\n"
        ));
    }
    p
}

#[test]
fn the_half_rule_on_both_sides_of_the_line() {
    let s = sandbox();
    let (code, doc, _) = run_phase(&s, &optional_items(2, 4, true), "half", "4");
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["decision"], "proceed_degraded");
    assert_eq!(doc["failure_ratio"], 0.5);
    assert_eq!(doc["text"], Value::Null);
    let deg = doc["degradation"]["text"].as_str().unwrap();
    assert!(
        deg.starts_with("Workflow Complete (with degradation)"),
        "{deg}"
    );
    assert!(deg.contains("- 2 of 4 agents completed"), "{deg}");

    let s = sandbox();
    let (code, doc, _) = run_phase(&s, &optional_items(3, 4, true), "over", "4");
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["decision"], "stop");
    assert_eq!(
        doc["reason"],
        "3 of 4 items failed (75%), more than the 50% the phase allows"
    );
    let text = doc["text"].as_str().unwrap();
    assert!(
        text.starts_with("[MULTIPLE FAILURES] 3 agents failed in Phase 4"),
        "{text}"
    );
    assert!(text.contains("  - c3: completed successfully"), "{text}");
}

#[test]
fn a_phase_stopped_over_the_half_rule_is_not_called_complete() {
    let s = sandbox();
    let (code, doc, _) = run_phase(&s, &optional_items(3, 4, true), "over", "4");
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["decision"], "stop");
    assert_eq!(doc["degradation"]["complete"], false, "{doc:#}");
    let deg = doc["degradation"]["text"].as_str().unwrap();
    assert!(
        deg.starts_with("Workflow Incomplete (the phase stopped)"),
        "{deg}"
    );
    let out = s
        .triage([
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "over2",
            "--phase",
            "4",
            "--text",
        ])
        .run();
    assert!(
        !out.stdout().contains("Workflow Complete"),
        "{}",
        out.stdout()
    );
}

#[test]
fn a_terminal_phase_retries_nothing() {
    let s = sandbox();
    let (code, doc, _) = run_phase(&s, &optional_items(1, 2, false), "t", "0");
    assert_eq!(code, 0);
    assert_eq!(doc["items"][0]["attempts"], 1, "{doc:#}");
    assert_eq!(records(&s).len(), 1);
    // The same item in a phase that retries gets its second attempt.
    let s = sandbox();
    let (_, doc, _) = run_phase(&s, &optional_items(1, 2, true), "t", "1");
    assert_eq!(doc["items"][0]["attempts"], 2);
}

#[test]
fn the_phase_budget_ends_slow_items_and_what_never_started() {
    let s = sandbox();
    let plan = r#"
timeout = "300ms"
concurrency = 1
[[items]]
id = "slow"
command = ["sleep", "30"]
criticality = "optional"
[[items]]
id = "never"
command = "echo never > never-ran"
criticality = "optional"
"#;
    let t0 = Instant::now();
    let (code, doc, _) = run_phase(&s, plan, "budget", "5");
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["budget_ended"], true);
    let items = doc["items"].as_array().unwrap();
    assert_eq!(items[0]["state"], "failed");
    assert_eq!(items[0]["kind"], "timeout");
    assert_eq!(
        items[0]["attempts"], 1,
        "the budget leaves no time for a retry"
    );
    assert_eq!(items[1]["state"], "failed");
    assert_eq!(items[1]["outcome"], "not_started");
    assert!(!s.exists("never-ran"));
    // Both are in the log, so the texts name them.
    let agents: Vec<String> = records(&s)
        .iter()
        .map(|r| r["agent"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(agents, ["slow", "never"]);
}

/// Waits until every file in `names` exists under the sandbox.
fn wait_for(s: &Sandbox, names: &[&str]) {
    let t0 = Instant::now();
    while !names.iter().all(|n| s.exists(n)) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "never started: {names:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// An item that prints a line, says it started, and on SIGINT writes `<id>.int` and exits.
fn trapping(id: &str) -> String {
    format!(
        "[[items]]\nid = \"{id}\"\ncommand = \"trap 'echo int > {id}.int; exit 130' INT; echo partial-{id}; touch {id}.started; while :; do sleep 0.02; done\"\n"
    )
}

#[test]
fn the_resume_hint_of_a_phase_run_under_config_names_the_config() {
    let s = Sandbox::new();
    s.write("my policy.toml", POLICY);
    s.write("plan.toml", trapping("a"));
    let child = s
        .triage([
            "--config",
            "my policy.toml",
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "wc",
            "--phase",
            "1",
        ])
        .spawn();
    wait_for(&s, &["a.started"]);
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait().status(130);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let hint = "Resume with: triage --config 'my policy.toml' phase resume --workflow wc --phase 1";
    assert!(stderr.contains(hint), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["message"].as_str().unwrap_or("").contains(hint),
        "{doc:#}"
    );
}

/// An item that outlives the phase's SIGTERM and ends with success is complete: the phase
/// pauses, and its resume does not run it again.
#[test]
fn an_item_that_finishes_after_the_phases_sigterm_is_complete_and_not_run_again() {
    let s = sandbox();
    s.write(
        "plan.toml",
        "concurrency = 1\n\
         [[items]]\nid = \"a\"\ncommand = \"echo run >> a.runs; trap 'touch a.term' TERM; touch a.started; while [ ! -e release ]; do sleep 0.02; done; echo a-out\"\n\
         [[items]]\nid = \"b\"\ncommand = \"echo run >> b.runs\"\n",
    );
    let args = ["--workflow", "wt", "--phase", "1", "--grace", "20s"];
    let child = s
        .triage(["phase", "run", "plan.toml"].iter().chain(&args))
        .spawn();
    wait_for(&s, &["a.started"]);
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    wait_for(&s, &["a.term"]);
    s.write("release", "");
    child.wait().status(130);
    let m = manifest(&s, "wt", "1");
    assert_eq!(m["status"], "paused");
    assert_eq!(
        states(&m),
        pairs(&[("a", "complete"), ("b", "not_started")])
    );
    s.triage(["phase", "resume"].iter().chain(&args))
        .run()
        .status(0);
    assert_eq!(
        s.read("a.runs"),
        "run\n",
        "resume ran the finished item again"
    );
    assert_eq!(s.read("b.runs"), "run\n");
}

#[test]
fn sigint_signals_every_items_group_pauses_and_keeps_partials() {
    let s = sandbox();
    let mut plan = String::from("concurrency = 3\n");
    for id in ["a", "b", "c"] {
        plan.push_str(&trapping(id));
    }
    plan.push_str("[[items]]\nid = \"d\"\ncommand = \"echo d\"\n");
    s.write("plan.toml", &plan);
    let child = s
        .triage([
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "wi",
            "--phase",
            "5",
            "--grace",
            "5s",
        ])
        .spawn();
    wait_for(&s, &["a.started", "b.started", "c.started"]);
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait().status(130);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("Workflow paused. Resume with: triage phase resume --workflow wi --phase 5"),
        "{stderr}"
    );
    for id in ["a", "b", "c"] {
        assert!(
            s.exists(&format!("{id}.int")),
            "item {id}'s group never got SIGINT"
        );
    }
    let m = manifest(&s, "wi", "5");
    assert_eq!(m["status"], "paused");
    assert_eq!(
        states(&m),
        pairs(&[
            ("a", "partial"),
            ("b", "partial"),
            ("c", "partial"),
            ("d", "not_started")
        ])
    );
    for (n, id) in ["a", "b", "c"].iter().enumerate() {
        let kept = m["items"][n]["partials"][0].as_str().unwrap();
        assert_eq!(
            std::fs::read_to_string(s.path().join(kept)).unwrap(),
            format!("partial-{id}\n")
        );
    }
    // An interrupt is not the agents' failure: nothing for a person to decide.
    assert_eq!(m["decision"]["decision"], "paused");
}

#[test]
fn kill_9_of_the_runner_then_resume_reruns_only_what_was_unfinished() {
    let s = sandbox();
    let plan = r#"
[[items]]
id = "a"
command = "echo run >> a.runs; echo a-out"
[[items]]
id = "b"
command = "echo run >> b.runs; if [ -e b.started ]; then echo b-out; else touch b.started; exec sleep 30; fi"
[[items]]
id = "c"
command = "echo run >> c.runs; echo c-out"
"#;
    s.write("plan.toml", plan);
    let mut child = s
        .std_cmd(&[
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "wk",
            "--phase",
            "2",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Until the manifest says a and c are complete and b runs in its group.
    let t0 = Instant::now();
    let pgid = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the items never got going"
        );
        {
            if let Some(m) = status(&s, "wk", "2") {
                let st = states(&m);
                if st == pairs(&[("a", "complete"), ("b", "running"), ("c", "complete")]) {
                    if let Some(g) = m["items"][1]["pgid"].as_u64() {
                        if s.exists("b.started") {
                            break g;
                        }
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(manifest(&s, "wk", "2")["status"], "running");
    // b's group outlived the runner.
    let alive = |g: u64| {
        std::process::Command::new("kill")
            .args(["-0", "--", &format!("-{g}")])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    assert!(alive(pgid));
    let out = s
        .triage([
            "phase",
            "resume",
            "--workflow",
            "wk",
            "--phase",
            "2",
            "--grace",
            "2s",
        ])
        .run()
        .status(0);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["decision"], "proceed");
    assert_eq!(doc["resumed"]["runner_died"], true);
    assert_eq!(doc["resumed"]["complete"], json!(["a", "c"]));
    assert_eq!(doc["resumed"]["partial"], json!(["b"]));
    assert!(!alive(pgid), "the dead runner's item was left running");
    assert_eq!(s.read("a.runs"), "run\n");
    assert_eq!(s.read("c.runs"), "run\n");
    assert_eq!(s.read("b.runs"), "run\nrun\n");
    let m = manifest(&s, "wk", "2");
    assert_eq!(m["resumes"], 1);
    assert_eq!(
        states(&m),
        pairs(&[("a", "complete"), ("b", "complete"), ("c", "complete")])
    );
    let b_out = m["items"][1]["output"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(s.path().join(b_out)).unwrap(),
        "b-out\n"
    );
}

#[test]
fn decide_resolves_exactly_the_phases_open_errors_and_skips_its_failed_items() {
    let s = sandbox();
    // Four failing agents in one workflow: keep the cascade rule out of this test.
    s.write(
        ".triage.toml",
        format!("{POLICY}\n[thresholds]\ncascade_agents = 10\n"),
    );
    // Open errors elsewhere: another phase of the workflow, another workflow.
    for (w, p) in [("wd", "3"), ("other", "2")] {
        s.cmd(&[
            "record-error",
            "--workflow",
            w,
            "--phase",
            p,
            "--agent",
            "x",
            "--kind",
            "timeout",
        ])
        .assert()
        .success();
    }
    let (code, doc, _) = run_phase(&s, FOUR, "wd", "2");
    assert_eq!(code, 1);
    // Its open errors: every record of the phase but the one a retry that worked resolved.
    let mut open: Vec<String> = records(&s)
        .iter()
        .filter(|r| r["workflow_id"] == "wd" && r["phase"] == 2)
        .filter(|r| r["agent"] != "programmer-consultant")
        .map(|r| r["error_id"].as_str().unwrap().to_string())
        .collect();
    open.sort();
    assert_eq!(open.len(), 4);
    let out = s
        .triage([
            "phase",
            "decide",
            "--workflow",
            "wd",
            "--phase",
            "2",
            "--choice",
            "B",
        ])
        .run()
        .status(0);
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut resolved: Vec<String> = d["resolved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    resolved.sort();
    assert_eq!(resolved, open);
    assert_eq!(
        d["skipped"],
        json!(["mathematician-consultant", "statistician-consultant"])
    );
    for r in resolutions(&s)
        .iter()
        .filter(|r| open.contains(&r["resolves"].as_str().unwrap().to_string()))
    {
        assert_eq!(r["resolution"]["user_choice"], "B");
        assert_eq!(r["resolution"]["action_taken"], "proceed_without");
    }
    // The other errors stay open.
    let closed: Vec<String> = resolutions(&s)
        .iter()
        .map(|r| r["resolves"].as_str().unwrap().to_string())
        .collect();
    let still_open: Vec<String> = records(&s)
        .iter()
        .filter(|r| !closed.contains(&r["error_id"].as_str().unwrap().to_string()))
        .map(|r| r["workflow_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(still_open, ["wd", "other"]);
    let m = manifest(&s, "wd", "2");
    assert_eq!(m["items"][3]["state"], "skipped");
    assert_eq!(m["decision"]["choice"]["choice"], "B");
    // A second decision finds nothing open.
    let again: Value = serde_json::from_slice(
        &s.triage([
            "phase",
            "decide",
            "--workflow",
            "wd",
            "--phase",
            "2",
            "--choice",
            "D",
        ])
        .run()
        .stdout,
    )
    .unwrap();
    assert_eq!(again["resolved"], json!([]));
    let _ = doc;
}

#[test]
fn a_bad_plan_is_a_usage_error_naming_the_line() {
    let s = sandbox();
    s.write(
        "plan.toml",
        "concurrency = 0\n[[items]]\nid = \"a\"\ncommand = \"true\"\ncriticalty = \"optional\"\n",
    );
    let out = s
        .triage([
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "w",
            "--phase",
            "1",
        ])
        .run()
        .status(64);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("triage phase: plan.toml:5:1: unknown field `criticalty`"),
        "{err}"
    );
    // A plan on stdin, as JSON.
    let out = s
        .triage(["phase", "run", "--workflow", "w", "--phase", "1"])
        .stdin(r#"{"items": [{"id": "a", "command": ["true"]}, {"id": "a", "command": "true"}]}"#)
        .run()
        .status(64);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("triage phase: <stdin>:1: item 2 (`a`): the id is used twice"),
        "{err}"
    );
    assert!(!s.exists(".triage/workflows/w/phase-1.json"));
}

#[test]
fn status_prints_the_manifest_and_a_second_run_of_an_unfinished_phase_is_refused() {
    let s = sandbox();
    let (code, _, _) = run_phase(&s, &optional_items(0, 2, true), "st", "1");
    assert_eq!(code, 0);
    let out = s
        .triage(["phase", "status", "--workflow", "st", "--phase", "1"])
        .run();
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["status"], "decided");
    let text = s
        .triage([
            "--text",
            "phase",
            "status",
            "--workflow",
            "st",
            "--phase",
            "1",
        ])
        .run();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.starts_with("Phase 1 of workflow st: decided (proceed)"),
        "{text}"
    );
    assert!(text.contains("c0    complete"), "{text}");
    // A paused manifest: `run` again is refused, pointing at resume.
    let mut m = m;
    m["status"] = json!("paused");
    s.write(".triage/workflows/st/phase-1.json", m.to_string());
    let out = s
        .triage([
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "st",
            "--phase",
            "1",
        ])
        .run()
        .status(64);
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("triage phase resume --workflow st --phase 1"));
}

#[test]
fn the_cascade_rule_stops_retries_across_the_phase() {
    let s = sandbox();
    s.write(
        ".triage.toml",
        "[retry]\nschedule = [\"0s\"]\nmax_attempts = 4\n[retry.kinds.network_error]\nmax_attempts = 4\n",
    );
    // Two agents of the workflow already failing: the phase's first failure is the third.
    for agent in ["x", "y"] {
        s.cmd(&[
            "record-error",
            "--workflow",
            "wc",
            "--phase",
            "1",
            "--agent",
            agent,
            "--kind",
            "timeout",
        ])
        .assert()
        .success();
    }
    let (_, doc, _) = run_phase(&s, &optional_items(2, 2, true), "wc", "2");
    let items = doc["items"].as_array().unwrap();
    let stopped: Vec<String> = items
        .iter()
        .map(|i| {
            let log = i["attempt_log"].as_array().unwrap();
            log.last().unwrap()["stopped"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    // Without the rule each would run 4 attempts; the item whose failure fired it stops at
    // once, its sibling at its next failure at the latest.
    for i in items {
        assert!(i["attempts"].as_u64().unwrap() <= 2, "{doc:#}");
    }
    assert!(
        stopped.iter().all(|w| w.contains("cascade rule fired")),
        "{stopped:?}"
    );
}

/// `examples/phase2`: seed 000's Phase 2 with stub consultants, run as the README says (the
/// 30 s wait before a retry shortened to none), and its policy valid.
#[test]
fn the_example_phase_runs_with_its_stub_agents() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/phase2");
    let s = Sandbox::new();
    let policy = std::fs::read_to_string(repo.join("policy.toml")).unwrap();
    assert!(policy.contains("schedule = [\"30s\"]"));
    s.write(
        "policy.toml",
        policy.replace("schedule = [\"30s\"]", "schedule = [\"0s\"]"),
    );
    s.write("plan.toml", std::fs::read(repo.join("plan.toml")).unwrap());
    let stub = s.write(
        "agents/consultant.sh",
        std::fs::read(repo.join("agents/consultant.sh")).unwrap(),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    s.triage([
        "config",
        "check",
        &repo.join("policy.toml").display().to_string(),
    ])
    .run()
    .status(0);
    let out = s
        .triage([
            "--config",
            "policy.toml",
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "demo",
            "--phase",
            "2",
        ])
        .env("STUB_MATHEMATICIAN", "flaky")
        .env("STUB_PROGRAMMER", "fail")
        .run()
        .status(0);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["name"], "Subsection planning");
    assert_eq!(doc["decision"], "proceed_degraded");
    assert_eq!(doc["failed"], json!(["programmer-consultant"]));
    let attempts: Vec<u64> = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["attempts"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 2]);
    let out = doc["items"][0]["output"].as_str().unwrap();
    assert!(std::fs::read_to_string(s.path().join(out))
        .unwrap()
        .starts_with("## statistician guidance"));
}

/// `phase run` of `plan` through util-linux `script(1)`, so its stderr is a terminal (stdout
/// goes to `answer.json`): what the terminal showed, or None where `script` cannot run.
fn on_a_terminal(s: &Sandbox, env: &[(&str, &str)]) -> Option<String> {
    if !crate::common::skip_unless_script() {
        return None;
    }
    // Each run starts from closed breakers (the failing item's opens after its 2 failures)
    // and an empty log (its third failure in the workflow would stop its retries).
    let _ = std::fs::remove_dir_all(s.root().join("breakers"));
    let _ = std::fs::remove_dir_all(s.root().join("logs"));
    let line = format!(
        "'{}' phase run plan.toml --workflow w --phase 1 --fresh > answer.json",
        crate::common::bin().display()
    );
    let mut c = s.command("script");
    c.args(["-qec", &line, "/dev/null"])
        .env_remove("NO_COLOR")
        .env("SHELL", "/bin/sh")
        .env("TERM", "xterm")
        .stdin_null();
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.run();
    let answer: Value = serde_json::from_str(&s.read("answer.json")).unwrap();
    assert_eq!(answer["counts"]["complete"], 1, "{answer:#}");
    Some(String::from_utf8_lossy(&out.stdout).replace('\r', ""))
}

#[test]
fn a_terminal_gets_a_live_line_per_item_and_a_pipe_gets_none() {
    let s = sandbox();
    let plan = r#"
[[items]]
id = "quick-one"
command = "echo done"
[[items]]
id = "broken"
command = "exit 3"
criticality = "optional"
"#;
    // Piped: the answer on stdout, nothing at all on stderr.
    let (code, doc, stderr) = run_phase(&s, plan, "w", "1");
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(stderr, "", "progress went to a pipe");
    let Some(tty) = on_a_terminal(&s, &[]) else {
        return;
    };
    // Drawn as the items start, redrawn in place (cursor up, clear) as they change.
    assert!(tty.contains("quick-one  \x1b[1mrunning\x1b[0m"), "{tty:?}");
    assert!(tty.contains("\x1b[2A\x1b[J"), "{tty:?}");
    // The last drawing: each item's final state, its attempt and its time.
    let last = tty.rsplit("\x1b[J").next().unwrap();
    let rows: Vec<&str> = last.lines().collect();
    assert_eq!(rows.len(), 2, "{tty:?}");
    assert!(
        rows[0].starts_with("quick-one  \x1b[32mcomplete\x1b[0m     attempt 1   ")
            && rows[0].ends_with('s'),
        "{rows:?}"
    );
    assert!(
        rows[1].starts_with("broken     \x1b[1;31mfailed\x1b[0m       attempt 2   "),
        "{rows:?}"
    );
    // NO_COLOR: the same lines without colour. TERM=dumb: no cursor movement, a new line
    // for each change instead.
    let plain = on_a_terminal(&s, &[("NO_COLOR", "1")]).unwrap();
    assert!(
        plain.contains("quick-one  complete     attempt 1"),
        "{plain:?}"
    );
    assert!(!plain.contains("\x1b[1"), "{plain:?}");
    let dumb = on_a_terminal(&s, &[("TERM", "dumb")]).unwrap();
    assert!(!dumb.contains('\x1b'), "{dumb:?}");
    let dumb: Vec<&str> = dumb.lines().collect();
    assert!(dumb.contains(&"quick-one  running"), "{dumb:?}");
    assert!(
        dumb.iter()
            .any(|l| l.starts_with("broken     failed       attempt 2   ")),
        "{dumb:?}"
    );
}
