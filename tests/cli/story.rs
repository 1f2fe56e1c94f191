//! Issue 17's end-to-end test: the orchestrator story of seed 000, told through `triage run`
//! as a bash orchestrator would. Three consultants run in parallel in phase 2: one recovers on
//! retry, one (critical) fails for good, one (optional) times out on every attempt. Then
//! phase 3's reviewer is interrupted and resumed. Every threshold, every template's text and
//! the report's counts are checked against what happened.

use crate::common::{json_out, Sandbox, TestCommand};
use serde_json::{json, Value};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const NOW: &str = "2026-02-04T14:30:22Z";
const S: &str = "sess-story";
const W: &str = "wf-story";

const POLICY: &str = r#"
[retry]
schedule = ["10ms", "10ms"]

[phases.2]
name = "Subsection planning"
size = 3

[phases.3]
name = "Structure review"

[agents.mathematician-consultant]
criticality = "optional"

[agents.programmer-consultant]
criticality = "optional"
"#;

/// Waits (in the agent's own shell) until the programmer's recovery is in the log, so the
/// story is the same however the three are scheduled; bounded, never a hang.
const AFTER_RECOVERY: &str =
    "i=0; until grep -q recovered_by_retry .triage/logs/errors.jsonl 2>/dev/null; \
do i=$((i+1)); [ $i -gt 400 ] && break; sleep 0.05; done; ";

fn run_cmd(s: &Sandbox, agent: &str, phase: &str, extra: &[&str], script: &str) -> TestCommand {
    let mut args = vec![
        "run",
        "--agent",
        agent,
        "--session",
        S,
        "--workflow",
        W,
        "--phase",
        phase,
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let mut c = s.triage(&args);
    c.env("TRIAGE_NOW", NOW).stdin_null();
    c
}

/// The run's JSON report: the last line of its stderr.
fn report(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stderr);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no report ({e}): {text}"))
}

fn triage(s: &Sandbox, args: &[&str]) -> Value {
    let out = s.triage(args).env("TRIAGE_NOW", NOW).run().status(0);
    json_out(&out)
}

fn text(s: &Sandbox, args: &[&str]) -> String {
    let mut a = args.to_vec();
    a.push("--text");
    let out = s.triage(&a).env("TRIAGE_NOW", NOW).run().status(0);
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn warning_names(r: &Value) -> Vec<String> {
    r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_orchestrator_story_three_consultants_an_interrupt_and_a_resume() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    std::fs::create_dir_all(s.root()).unwrap();

    // ---- Phase 2: three consultants in parallel. ----
    let programmer = run_cmd(
        &s,
        "programmer-consultant",
        "2",
        &[],
        "c=$(cat prog 2>/dev/null || echo 0); c=$((c+1)); echo $c > prog; \
         [ $c -ge 2 ] || { echo 'connection reset by peer' >&2; exit 1; }; echo code-plan",
    )
    .spawn();
    let statistician = run_cmd(
        &s,
        "statistician-consultant",
        "2",
        &[],
        &format!("{AFTER_RECOVERY} echo 'cannot fit the model' >&2; exit 1"),
    )
    .spawn();
    let mathematician = run_cmd(
        &s,
        "mathematician-consultant",
        "2",
        &["--timeout", "1s", "--kill-after", "1s"],
        &format!("{AFTER_RECOVERY} exec sleep 30"),
    )
    .spawn();
    let prog = programmer.wait().status(0);
    let stat = statistician.wait().status(1);
    let math = mathematician.wait().status(124);

    // The programmer failed once and recovered on its retry: its failure is resolved.
    assert_eq!(String::from_utf8_lossy(&prog.stdout), "code-plan\n");
    let rp = report(&prog);
    assert_eq!(rp["outcome"], "succeeded");
    assert_eq!(rp["attempts"].as_array().unwrap().len(), 2);
    assert_eq!(
        rp["attempts"][1]["resolved"],
        json!([rp["attempts"][0]["error_id"]])
    );

    // The statistician (critical) failed for good: a tool failure is retried once, then it
    // escalates (Template 1). Its breaker opened on the second failure.
    let rs = report(&stat);
    assert_eq!(rs["outcome"], "failed");
    assert_eq!(rs["action"], "escalate");
    assert_eq!(rs["attempts"].as_array().unwrap().len(), 2);
    assert_eq!(rs["attempts"][1]["kind"], "tool_failure");
    assert_eq!(rs["attempts"][1]["breaker"]["transition"]["to"], "open");

    // The mathematician (optional) timed out on all 3 attempts: its breaker opened after the
    // second, and the third still ran (within one run the retry decision comes first); it
    // ends degraded, not refused.
    let rm = report(&math);
    assert_eq!(rm["outcome"], "timed_out");
    assert_eq!(rm["action"], "proceed_degraded");
    let attempts = rm["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3);
    assert!(attempts.iter().all(|a| a["kind"] == "timeout"), "{rm}");
    assert_eq!(attempts[1]["breaker"]["transition"]["to"], "open");

    // The thresholds the runs crossed: the phase (2 of 3 failing), the session (5
    // unresolved failures: the recovered one is not counted) and the mathematician's third
    // failure in the workflow (seed 000: "same agent fails 3+ times"); never the cascade
    // (only 2 agents are failing once the programmer recovered).
    let mut crossed: Vec<String> = [&rp, &rs, &rm]
        .iter()
        .flat_map(|r| warning_names(r))
        .collect();
    crossed.sort();
    crossed.dedup();
    assert_eq!(
        crossed,
        [
            "agent_failure_threshold",
            "phase_failure_ratio",
            "session_failure_threshold"
        ],
        "{rs}\n{rm}"
    );
    let session_warning = [&rs, &rm]
        .iter()
        .flat_map(|r| r["warnings"].as_array().unwrap().clone())
        .find(|w| w["name"] == "session_failure_threshold")
        .unwrap();
    assert_eq!(session_warning["count"], 5);

    // ---- Phase 3: the reviewer is interrupted, then resumed. ----
    let reviewer = run_cmd(
        &s,
        "structure-reviewer",
        "3",
        &["--preserve-partial", "scratch"],
        "echo 'reviewed 2 of 4 sections'; touch started; exec sleep 30",
    )
    .spawn();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !s.exists("started") {
        assert!(Instant::now() < deadline, "the reviewer never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    Command::new("kill")
        .args(["-INT", &reviewer.id().to_string()])
        .status()
        .unwrap();
    let out = reviewer.wait().status(130);
    let ri: Value = serde_json::from_str(out.stderr().lines().last().unwrap()).unwrap();
    assert_eq!(ri["outcome"], "interrupted");
    assert_eq!(ri["warnings"], json!([]), "an interrupt crosses nothing");
    let interrupt_id = ri["attempts"][0]["error_id"].clone();
    assert_eq!(
        s.read("scratch/structure-reviewer-1_partial"),
        "reviewed 2 of 4 sections\n"
    );
    let resumed = run_cmd(&s, "structure-reviewer", "3", &[], "echo 'review done'")
        .run()
        .status(0);
    assert_eq!(
        report(&resumed)["attempts"][0]["resolved"],
        json!([interrupt_id])
    );

    // The statistician's breaker stops its next run: not run, exit 75.
    let again = run_cmd(&s, "statistician-consultant", "2", &[], "touch ran-again")
        .run()
        .status(75);
    assert!(!s.exists("ran-again"));
    assert_eq!(report(&again)["outcome"], "breaker_open");

    // ---- The report's counts: what happened. ----
    let rep = triage(&s, &["report", "--workflow", W]);
    assert_eq!(
        rep["records"], 7,
        "2 + 1 + 3 failures and 1 interrupt: {rep}"
    );
    assert_eq!(rep["resolutions"], 2, "the recovery and the resume");
    assert_eq!(rep["resolution_rate"], 0.286);
    let thresholds: Vec<(String, String, u64)> = rep["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().into(),
                c["scope"].as_str().unwrap().into(),
                c["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        thresholds,
        [
            ("phase_failure_ratio".into(), format!("{W}/2"), 2),
            ("session_failure_threshold".into(), S.into(), 5),
        ]
    );
    let open: Vec<(String, String, u64)> = rep["breakers_open"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["key"].as_str().unwrap().into(),
                b["state"].as_str().unwrap().into(),
                b["opened"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        open,
        [
            ("mathematician-consultant".into(), "open".into(), 1),
            ("statistician-consultant".into(), "open".into(), 1),
        ]
    );
    let group = |agent: &str| {
        rep["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["key"] == agent)
            .unwrap()
            .clone()
    };
    assert_eq!(group("programmer-consultant")["resolution_rate"], 1.0);
    assert_eq!(group("mathematician-consultant")["count"], 3);
    assert_eq!(group("statistician-consultant")["resolution_rate"], 0.0);

    // The counters kept incrementally are what a rebuild from the log gives.
    let kept: Value = serde_json::from_str(&s.read(".triage/logs/errors.counters.json")).unwrap();
    std::fs::remove_file(s.root().join("logs/errors.counters.json")).unwrap();
    triage(&s, &["report", "prune", "--older-than", "36500d"]);
    let rebuilt: Value =
        serde_json::from_str(&s.read(".triage/logs/errors.counters.json")).unwrap();
    for key in ["seq", "sessions", "units", "interrupts"] {
        assert_eq!(kept.get(key), rebuilt.get(key), "{key}");
    }
    assert_eq!(kept["sessions"][S], 5);

    // ---- Every template, from the same log. ----
    let t1 = text(
        &s,
        &[
            "report",
            "--agent",
            "statistician-consultant",
            "--template",
            "agent-failure",
        ],
    );
    assert!(
        t1.starts_with(
            "[AGENT FAILURE] statistician-consultant failed after 2 attempts\n\n\
             Phase: 2 (Subsection planning)\nError: tool_failure - "
        ),
        "{t1}"
    );
    assert!(t1.contains("Impact: statistician-consultant is critical: phase 2 cannot complete without its output"), "{t1}");
    assert!(
        t1.contains("(A) Retry statistician-consultant (attempt 3)"),
        "{t1}"
    );

    let t2 = text(
        &s,
        &[
            "report",
            "--workflow",
            W,
            "--phase",
            "2",
            "--template",
            "multiple-failures",
        ],
    );
    assert!(
        t2.starts_with("[MULTIPLE FAILURES] 2 agents failed in Phase 2\n"),
        "{t2}"
    );
    assert!(
        t2.contains("  - statistician-consultant: tool_failure\n"),
        "{t2}"
    );
    assert!(
        t2.contains("  - mathematician-consultant: timeout\n"),
        "{t2}"
    );
    assert!(
        t2.contains("Working agents:\n  - programmer-consultant: completed successfully\n"),
        "{t2}"
    );
    assert!(t2.contains("(B) Proceed with 1 available outputs"), "{t2}");
    assert!(t2.contains("(C) Abort phase and return to Phase 1"), "{t2}");

    let t4 = text(
        &s,
        &[
            "report",
            "--agent",
            "statistician-consultant",
            "--template",
            "breaker-open",
        ],
    );
    assert!(
        t4.starts_with(
            "[CIRCUIT BREAKER] statistician-consultant circuit breaker opened\n\n\
             Consecutive failures: 2\nLast error: “tool_failure - "
        ),
        "{t4}"
    );
    assert!(
        t4.contains("Time since last success: none recorded\nTimes opened: 1\n"),
        "{t4}"
    );
    assert!(t4.contains("(A) Wait 60 seconds and retry"), "{t4}");
    // The programmer's breaker is closed: no Template 4 for it.
    let refused = s
        .triage([
            "report",
            "--agent",
            "programmer-consultant",
            "--template",
            "breaker-open",
        ])
        .env("TRIAGE_NOW", NOW)
        .run();
    // A refusal is its one JSON line, never a template.
    assert_eq!(json_out(&refused)["ok"], false);
    assert!(!String::from_utf8_lossy(&refused.stdout).contains("CIRCUIT BREAKER"));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is closed, not open"));

    let t5 = text(
        &s,
        &["report", "--session", S, "--template", "stability-warning"],
    );
    assert!(
        t5.starts_with(
            "[WORKFLOW STABILITY WARNING]\n\nThis session has encountered 5 failures across phases.\n\
             Not counted: 1 resolved since, 1 interrupt.\n\
             Failure rate: unknown (the log records failures, not runs)\n"
        ),
        "{t5}"
    );
    let t5 = triage(
        &s,
        &[
            "report",
            "--session",
            S,
            "--template",
            "stability-warning",
            "--runs",
            "10",
        ],
    );
    assert_eq!(t5["failure_rate"], 60, "6 failed attempts in 10 runs");

    let deg = text(
        &s,
        &[
            "report",
            "--workflow",
            W,
            "--template",
            "degradation",
            "--completed",
            "structure-reviewer",
        ],
    );
    assert!(
        deg.starts_with("Workflow Incomplete (a critical agent failed)\n"),
        "{deg}"
    );
    assert!(
        deg.contains(
            "- Phase 2: no statistician-consultant output (tool_failure; critical, unresolved)\n"
        ),
        "{deg}"
    );
    assert!(
        deg.contains(
            "- Phase 2: no mathematician-consultant output (timeout; optional, unresolved)\n"
        ),
        "{deg}"
    );
    assert!(deg.contains("- 2 of 4 agents completed\n"), "{deg}");

    let par = text(
        &s,
        &[
            "report",
            "--workflow",
            W,
            "--phase",
            "2",
            "--template",
            "parallel-status",
        ],
    );
    assert!(
        par.starts_with("Parallel Execution Status: PARTIAL SUCCESS (1/3 completed)\n"),
        "{par}"
    );
    assert!(par.contains("- [x] programmer-consultant\n"), "{par}");

    let cascade = s
        .triage(["report", "--workflow", W, "--template", "cascade"])
        .env("TRIAGE_NOW", NOW)
        .run();
    assert_eq!(json_out(&cascade)["ok"], false, "no cascade happened");
    assert!(String::from_utf8_lossy(&cascade.stderr).contains("2 agents are failing"));

    let stage = text(
        &s,
        &[
            "report",
            "--workflow",
            W,
            "--phase",
            "2",
            "--template",
            "stage-failed",
        ],
    );
    assert!(
        stage.starts_with("Stage 2 failed 6 times. Proceeding with partial results.\n"),
        "{stage}"
    );

    let summary = triage(
        &s,
        &["report", "--session", S, "--template", "session-summary"],
    );
    assert_eq!(summary["phase"], "2");
    assert!(
        ["statistician-consultant", "mathematician-consultant"]
            .contains(&summary["agent"].as_str().unwrap()),
        "{summary}"
    );
    assert_eq!(summary["completed_list"], json!([]));
    assert!(summary["saved_artifacts"]
        .as_array()
        .unwrap()
        .contains(&json!("scratch/structure-reviewer-1_partial")));
    assert_eq!(summary["start_fresh"], "claude");
}
