//! Issue 17: what the log and the escalation texts say must be true. One test (or a few) per
//! numbered item; each fails on the main of 210e890 (run the suite with `TRIAGE_TEST_BIN`
//! pointing at that build to see it).

use crate::backend::Backend;
use crate::common::{json_out, Sandbox};
use serde_json::{json, Value};

const NOW: &str = "2026-02-04T14:30:22Z";

/// Seed 000's consultants: a fan-out of 3 in phase 2, two optional agents, quick retries.
const POLICY: &str = r#"
[retry]
schedule = ["10ms", "10ms"]

[phases.2]
name = "Subsection planning"
size = 3

[agents.mathematician-consultant]
criticality = "optional"

[agents.programmer-consultant]
criticality = "optional"
"#;

/// A sandbox of the suite's backend (the files here, a Redis of its own in the fleet target)
/// with seed 000's policy; `None` when that backend cannot run here (the reason is printed).
fn sandbox() -> Option<Backend> {
    let s = crate::backend::sandbox()?;
    s.write(".triage.toml", POLICY);
    Some(s)
}

/// `triage ARGS` with `stdin`, at `NOW`; the JSON it printed (exit 0 required).
fn triage(s: &Sandbox, args: &[&str], stdin: &str) -> Value {
    let out = s
        .triage(args)
        .env("TRIAGE_NOW", NOW)
        .stdin(stdin)
        .run()
        .status(0);
    json_out(&out)
}

/// `triage ARGS --text`'s stdout.
fn text(s: &Sandbox, args: &[&str]) -> String {
    let mut a = args.to_vec();
    a.push("--text");
    let out = s.triage(&a).env("TRIAGE_NOW", NOW).run();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Records one failure of `agent` in workflow w1 / session s1 / phase 2.
fn fail(s: &Sandbox, agent: &str, kind: &str) -> Value {
    triage(
        s,
        &[
            "record-error",
            "--session",
            "s1",
            "--workflow",
            "w1",
            "--phase",
            "2",
            "--agent",
            agent,
            "--kind",
            kind,
        ],
        "",
    )
}

fn names(v: &Value) -> Vec<String> {
    v["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|w| w["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn lines(s: &Sandbox) -> Vec<Value> {
    s.log_lines()
}

fn run_report(stderr: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stderr);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no report ({e}): {text}"))
}

/// Fails until its `n`th attempt (counted in the file `count-NAME`), then prints "ok".
fn flaky(s: &Sandbox, name: &str, n: u32) -> String {
    s.write(
        &format!("{name}.sh"),
        format!(
            "c=$(cat count-{name} 2>/dev/null || echo 0); c=$((c+1)); echo $c > count-{name}\n\
             [ $c -ge {n} ] || {{ echo \"fail $c\" >&2; exit 1; }}\necho ok\n"
        ),
    );
    format!("{name}.sh")
}

// ---------------------------------------------------------------------------------------------
// 1. Failures that recover are not failures any more.

#[test]
fn an_agent_that_recovers_on_retry_is_not_counted_as_failed() {
    let Some(s) = sandbox() else { return };
    let script = flaky(&s, "stat", 2);
    let out = s
        .triage([
            "run",
            "--agent",
            "statistician-consultant",
            "--session",
            "s1",
            "--workflow",
            "w1",
            "--phase",
            "2",
            "--",
            "sh",
            &script,
        ])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0);
    let r = run_report(&out.stderr);
    let first_id = r["attempts"][0]["error_id"].clone();
    assert_eq!(r["attempts"][1]["resolved"], json!([first_id]));
    // Its failure is resolved in the log: automatic, with the success's time.
    let l = lines(&s);
    let res = l
        .iter()
        .find(|l| l["resolves"] == first_id)
        .expect("resolved");
    assert_eq!(res["resolution"]["action_taken"], "recovered_by_retry");
    assert_eq!(res["resolution"]["automatic"], true);
    assert_eq!(res["resolution"]["successful"], true);
    assert_eq!(res["timestamp"], "2026-02-04T14:30:22.000Z");
    assert_eq!(res["by"], "run");

    // Two more agents fail: two failing, not three.
    assert!(names(&fail(&s, "mathematician-consultant", "timeout")).is_empty());
    let v = fail(&s, "programmer-consultant", "rate_limited");
    assert_eq!(names(&v), ["phase_failure_ratio"], "{v}");
    assert_eq!(v["warnings"][0]["count"], 2, "2 of 3, not 3 of 3");
    assert!(!names(&v).contains(&"cascade".to_string()));

    let t2 = text(
        &s,
        &[
            "report",
            "--workflow",
            "w1",
            "--template",
            "multiple-failures",
        ],
    );
    assert!(
        t2.starts_with("[MULTIPLE FAILURES] 2 agents failed in Phase 2\n"),
        "{t2}"
    );
    assert!(
        t2.contains("  - statistician-consultant: completed successfully\n"),
        "{t2}"
    );
    assert!(t2.contains("(B) Proceed with 1 available outputs"), "{t2}");
    let deg = text(
        &s,
        &["report", "--workflow", "w1", "--template", "degradation"],
    );
    assert!(deg.contains("- 1 of 3 agents completed\n"), "{deg}");

    let rep = triage(&s, &["report", "--workflow", "w1"], "");
    let crossed: Vec<&str> = rep["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(crossed, ["phase_failure_ratio"], "{rep}");
    assert_eq!(rep["thresholds"][0]["count"], 2);
}

#[test]
fn a_run_that_does_not_say_who_it_is_resolves_nothing() {
    let Some(s) = sandbox() else { return };
    let run = |script: &str| {
        s.triage(["run", "--workflow", "w1", "--", "sh", "-c", script])
            .env("TRIAGE_NOW", NOW)
            .run()
    };
    run("echo 'cannot parse the data' >&2; exit 2");
    run("echo fine").status(0);
    // Two different `sh -c` commands share only the program's name: nothing is resolved.
    assert!(lines(&s).iter().all(|l| l.get("resolves").is_none()));
}

#[test]
fn a_hook_success_and_a_passing_subagent_stop_resolve_the_agents_failures() {
    let Some(s) = crate::backend::sandbox() else {
        return;
    };
    s.write(
        ".triage.toml",
        "[agents.researcher.output]\nmax_rejections = 0\n",
    );
    let hook = |at: &str, payload: Value| {
        s.cmd(&["hook"])
            .env("TRIAGE_NOW", at)
            .write_stdin(payload.to_string())
            .assert()
            .code(0);
    };
    let call = |event: &str, id: &str, response: Value| {
        json!({"hook_event_name": event, "session_id": "sess", "tool_name": "Agent",
               "tool_use_id": id, "tool_input": {"subagent_type": "researcher"},
               "error": "Agent timed out after 300 s", "tool_response": response})
    };
    let found =
        json!({"status": "completed", "content": [{"type": "text", "text": "Found [1] and [2]."}]});
    // A foreground call fails; the retry (a later call) succeeds.
    hook(
        "2026-02-04T14:00:00Z",
        call("PreToolUse", "t1", json!(null)),
    );
    hook(
        "2026-02-04T14:05:00Z",
        call("PostToolUseFailure", "t1", json!(null)),
    );
    assert_eq!(lines(&s).len(), 1);
    hook(
        "2026-02-04T14:06:00Z",
        call("PreToolUse", "t2", json!(null)),
    );
    hook(
        "2026-02-04T14:07:00Z",
        call("PostToolUse", "t2", found.clone()),
    );
    let l = lines(&s);
    assert_eq!(l.len(), 2, "{l:?}");
    assert_eq!(l[1]["resolves"], l[0]["error_id"]);
    assert_eq!(l[1]["by"], "hook PostToolUse");
    assert_eq!(l[1]["timestamp"], "2026-02-04T14:07:00.000Z");
    assert_eq!(
        l[1]["workflow_id"], "sess",
        "the session is the hook's workflow"
    );

    // A background subagent fails; the one launched after it passes at its SubagentStop.
    let launched = |id: &str, aid: &str| {
        call(
            "PostToolUse",
            id,
            json!({"isAsync": true, "status": "async_launched", "agentId": aid}),
        )
    };
    let stop = |aid: &str, text: &str| {
        json!({"hook_event_name": "SubagentStop", "session_id": "sess", "agent_id": aid,
               "agent_type": "researcher", "last_assistant_message": text})
    };
    hook(
        "2026-02-04T14:10:00Z",
        call("PreToolUse", "t3", json!(null)),
    );
    hook("2026-02-04T14:10:00Z", launched("t3", "a3"));
    hook("2026-02-04T14:12:00Z", stop("a3", ""));
    hook(
        "2026-02-04T14:13:00Z",
        call("PreToolUse", "t4", json!(null)),
    );
    hook("2026-02-04T14:13:00Z", launched("t4", "a4"));
    hook(
        "2026-02-04T14:15:00Z",
        stop("a4", "Found three sources [1] [2] [3]."),
    );
    let l = lines(&s);
    let failed = l
        .iter()
        .rfind(|r| r.get("error_id").is_some())
        .unwrap()
        .clone();
    let last = l.last().unwrap();
    assert_eq!(last["resolves"], failed["error_id"], "{l:?}");
    assert_eq!(last["by"], "hook SubagentStop");
    assert_eq!(s.session_open("sess"), None, "nothing open");

    // Siblings that ran side by side: one's success says nothing of the other's failure.
    hook(
        "2026-02-04T14:20:00Z",
        call("PreToolUse", "t5", json!(null)),
    );
    hook(
        "2026-02-04T14:20:00Z",
        call("PreToolUse", "t6", json!(null)),
    );
    hook(
        "2026-02-04T14:21:00Z",
        call("PostToolUseFailure", "t5", json!(null)),
    );
    hook("2026-02-04T14:22:00Z", call("PostToolUse", "t6", found));
    let after = lines(&s);
    assert!(
        after.last().unwrap().get("error_id").is_some(),
        "t5's failure stays open: {after:?}"
    );
}

#[test]
fn an_explicit_resolution_that_says_a_retry_worked_resolves_the_earlier_failures() {
    let Some(s) = sandbox() else { return };
    let a = fail(&s, "statistician-consultant", "timeout");
    let b = fail(&s, "statistician-consultant", "timeout");
    let c = fail(&s, "statistician-consultant", "timeout");
    let v = triage(
        &s,
        &[
            "record-error",
            "--resolve",
            b["error_id"].as_str().unwrap(),
            "--action-taken",
            "retry",
            "--successful",
            "true",
        ],
        "",
    );
    assert_eq!(v["resolved"], 1);
    assert_eq!(
        v["recovered"],
        json!([a["error_id"]]),
        "the earlier one, not the later"
    );
    let sum = triage(&s, &["report", "--session", "s1"], "");
    assert_eq!(sum["groups"][0]["resolved"], 2);
    let open: Vec<&Value> = lines(&s)
        .iter()
        .filter(|l| l["resolves"] == c["error_id"])
        .map(|_| &Value::Null)
        .collect();
    assert!(open.is_empty(), "the later failure stays open");
}

// ---------------------------------------------------------------------------------------------
// 2. One user decision covers many errors; a resolution is never counted twice.

#[test]
fn one_decision_resolves_every_open_error_it_selects_and_never_twice() {
    let Some(s) = sandbox() else { return };
    let a = fail(&s, "statistician-consultant", "timeout");
    fail(&s, "mathematician-consultant", "timeout");
    triage(
        &s,
        &[
            "record-error",
            "--session",
            "s1",
            "--workflow",
            "w1",
            "--phase",
            "3",
            "--agent",
            "structure-reviewer",
            "--kind",
            "crash",
        ],
        "",
    );
    let v = triage(
        &s,
        &[
            "record-error",
            "--resolve",
            "--workflow",
            "w1",
            "--phase",
            "2",
            "--action-taken",
            "user_escalation",
            "--user-choice",
            "proceed_without",
        ],
        "",
    );
    assert_eq!(v["resolved"], 2, "{v}");
    assert_eq!(v["already_resolved"], 0);
    assert_eq!(v["resolution"]["user_choice"], "proceed_without");
    // Again: nothing left to resolve there.
    let v = triage(
        &s,
        &[
            "record-error",
            "--resolve",
            "--workflow",
            "w1",
            "--phase",
            "2",
            "--user-choice",
            "proceed_without",
        ],
        "",
    );
    assert_eq!(
        (v["resolved"].as_u64(), v["already_resolved"].as_u64()),
        (Some(0), Some(2))
    );
    // One id resolved twice: the second changes nothing.
    let id = a["error_id"].as_str().unwrap();
    let before = lines(&s).len();
    let v = triage(
        &s,
        &[
            "record-error",
            "--resolve",
            id,
            "--action-taken",
            "retry",
            "--successful",
            "true",
        ],
        "",
    );
    assert_eq!(v["resolved"], 0);
    assert_eq!(v["already_resolved"], true);
    assert_eq!(lines(&s).len(), before, "no line appended");
    let rep = triage(&s, &["report"], "");
    assert_eq!(rep["resolutions"], 2);
    let t = text(&s, &["report"]);
    assert!(t.contains("2 resolutions"), "{t}");
    // The session's thresholds count the one unresolved error.
    assert_eq!(s.session_open("s1"), Some(1));
}

#[test]
fn an_agent_with_one_of_two_errors_resolved_is_half_resolved() {
    let Some(s) = sandbox() else { return };
    let a = fail(&s, "researcher", "timeout");
    fail(&s, "researcher", "timeout");
    for _ in 0..2 {
        triage(
            &s,
            &[
                "record-error",
                "--resolve",
                a["error_id"].as_str().unwrap(),
                "--action-taken",
                "skip",
                "--successful",
                "true",
            ],
            "",
        );
    }
    let rep = triage(&s, &["report", "--agent", "researcher"], "");
    assert_eq!(rep["groups"][0]["resolution_rate"], 0.5, "{rep}");
    assert_eq!(rep["resolutions"], 1);
}

// ---------------------------------------------------------------------------------------------
// 3. Interrupts are recorded but count toward nothing.

#[test]
fn interrupts_count_toward_no_threshold_and_no_failure_rate() {
    let Some(s) = sandbox() else { return };
    for _ in 0..19 {
        let v = fail(&s, "researcher", "interrupted");
        assert!(names(&v).is_empty(), "{v}");
    }
    let v = fail(&s, "researcher", "timeout");
    assert!(
        names(&v).is_empty(),
        "one real failure crosses nothing: {v}"
    );
    assert_eq!(lines(&s).len(), 20, "every interrupt is recorded");
    let rep = triage(&s, &["report"], "");
    assert_eq!(rep["thresholds"], json!([]));
    let t5 = text(
        &s,
        &[
            "report",
            "--session",
            "s1",
            "--template",
            "stability-warning",
            "--runs",
            "20",
        ],
    );
    assert!(
        t5.contains("This session has encountered 1 failure across"),
        "{t5}"
    );
    assert!(t5.contains("Failure rate: 5%"), "{t5}");
    assert!(t5.contains("19 interrupts"), "{t5}");
}

// ---------------------------------------------------------------------------------------------
// 4. Records keep what they were given (each seed's example, verbatim).

#[test]
fn a_flat_log_line_keeps_its_error_message_and_error_type() {
    let Some(s) = crate::backend::sandbox() else {
        return;
    };
    let v = triage(
        &s,
        &["record-error"],
        r#"{
  "timestamp": "2026-02-04T14:30:22Z",
  "session_id": "session-20260204-143022-12345",
  "phase": 2,
  "agent": "statistician-consultant",
  "error_type": "timeout",
  "error_message": "Agent exceeded 5 minute timeout",
  "retry_count": 2,
  "resolution": "user_escalation",
  "user_choice": "proceed_without"
}"#,
    );
    assert_eq!(v["detail"], "Agent exceeded 5 minute timeout");
    assert_eq!(v["kind"], "timeout");
    assert_eq!(v["retryable"], true, "a timeout is retryable");
    assert_eq!(v["resolution"]["action_taken"], "user_escalation");
    assert_eq!(v["resolution"]["user_choice"], "proceed_without");
    assert_eq!(v["error_type"], "timeout");
}

#[test]
fn a_yaml_error_context_and_log_entry_keep_every_field_and_their_error_types_map_to_kinds() {
    let Some(s) = crate::backend::sandbox() else {
        return;
    };
    let v = triage(
        &s,
        &["record-error"],
        r#"error_context:
  error_id: "err-abc123"
  error_type: SKILL_TIMEOUT | SKILL_ERROR | VALIDATION_FAILURE | QUALITY_FAILURE
  skill: "researcher"
  task_id: "T1"
  workflow_id: "workflow-xyz"

  message: "Skill timed out after 15 minutes"
  timestamp: "2026-02-03T14:15:00Z"

  context:
    last_progress: "Reading paper 5/8"
    elapsed_time: "15m"
    expected_duration: "10m"

  preserved_outputs:
    - "scratchpad/researcher/paper-notes_partial.md"

  recovery_options:
    - id: A
      action: retry
      description: "Retry with extended timeout (20m)"
    - id: B
      action: skip
      description: "Skip this skill, continue workflow"
    - id: C
      action: abort
      description: "Abort workflow, preserve outputs"
"#,
    );
    assert_eq!(v["agent"], "researcher");
    assert_eq!(v["task_id"], "T1");
    assert_eq!(v["workflow_id"], "workflow-xyz");
    assert_eq!(v["kind"], "timeout");
    assert_eq!(v["category"], "transient");
    assert_eq!(v["detail"], "Skill timed out after 15 minutes");
    assert_eq!(v["timestamp"], "2026-02-03T14:15:00.000Z");
    assert_eq!(v["context"]["last_progress"], "Reading paper 5/8");
    assert_eq!(v["context"]["expected_duration"], "10m");
    assert_eq!(
        v["context"]["error_id"], "err-abc123",
        "the caller's own id is kept"
    );
    assert_eq!(
        v["recovery_options"][2]["description"],
        "Abort workflow, preserve outputs"
    );
    assert_eq!(
        v["preserved_outputs"],
        json!(["scratchpad/researcher/paper-notes_partial.md"])
    );
    // The pipeline status shows its last progress.
    let t = text(
        &s,
        &[
            "report",
            "--template",
            "pipeline-status",
            "--pipeline",
            "researcher,synthesizer",
        ],
    );
    assert!(t.contains("Last progress: “Reading paper 5/8”"), "{t}");

    // The log entry of seed 001: a failure that succeeded on retry is born resolved.
    let v = triage(
        &s,
        &["record-error"],
        r#"# Append to /tmp/workflow-errors-{workflow_id}.log
- timestamp: "2026-02-03T14:15:00Z"
  error_id: "err-abc123"
  skill: researcher
  error_type: SKILL_TIMEOUT
  message: "Skill timed out after 15 minutes"
  resolution: "User selected: retry with narrower scope"
  outcome: "SUCCESS on retry"
"#,
    );
    assert_eq!(v["agent"], "researcher");
    assert_eq!(v["kind"], "timeout");
    assert_eq!(v["error_type"], "SKILL_TIMEOUT");
    assert_eq!(v["outcome"], "SUCCESS on retry");
    assert_eq!(v["resolution"]["successful"], true);
    assert_eq!(v["resolution"]["user_choice"], "retry with narrower scope");
    // Seed 001's other words, with their categories.
    for (word, kind, category) in [
        (
            "VALIDATION_FAILURE",
            "validation_failed",
            "validation_failure",
        ),
        ("QUALITY_FAILURE", "quality_failed", "quality_failure"),
        ("SKILL_ERROR", "crash", "skill_error"),
        ("TIMEOUT", "timeout", "transient"),
    ] {
        let v = triage(
            &s,
            &["record-error"],
            &json!({"skill": "calculator", "error_type": word, "message": "m"}).to_string(),
        );
        assert_eq!(
            (v["kind"].as_str(), v["category"].as_str()),
            (Some(kind), Some(category)),
            "{word}"
        );
    }
}

#[test]
fn a_nested_error_log_keeps_its_context_and_lifts_the_agent_and_stage() {
    let Some(s) = crate::backend::sandbox() else {
        return;
    };
    let v = triage(
        &s,
        &["record-error"],
        r#"error_log:
  timestamp: "2026-02-05T10:00:00Z"
  workflow_id: "lit-pm-42"
  stage: 6
  error_type: timeout_exceeded
  severity: warning
  message: "Stage 6c timeout for section 3"
  context:
    agent: "devils-advocate"
    section: "3"
    attempt: 2
  resolution:
    action_taken: "proceed_with_uncertainty"
    successful: true
"#,
    );
    assert_eq!(v["agent"], "devils-advocate");
    assert_eq!(v["phase"], 6);
    assert_eq!(v["kind"], "timeout");
    assert_eq!(v["severity"], "warning");
    assert_eq!(v["detail"], "Stage 6c timeout for section 3");
    assert_eq!(v["context"]["section"], "3");
    assert_eq!(v["context"]["attempt"], 2);
    assert_eq!(v["retry_count"], 1);
    assert_eq!(v["resolution"]["action_taken"], "proceed_with_uncertainty");
    assert_eq!(v["resolution"]["successful"], true);
}

// ---------------------------------------------------------------------------------------------
// 5. The report's breakers are the real ones, with how often each opened.

#[test]
fn report_lists_open_half_open_and_forced_open_breakers_with_their_openings() {
    let Some(s) = crate::backend::sandbox() else {
        return;
    };
    let at = |t: &str, args: &[&str]| {
        s.cmd(args).env("TRIAGE_NOW", t).assert().code(0);
    };
    let fail = ["breaker", "record", "researcher", "--outcome", "failure"];
    at("2026-02-04T14:00:00Z", &fail);
    at("2026-02-04T14:00:01Z", &fail);
    // After the cooldown a probe fails: open a second time.
    at("2026-02-04T14:02:00Z", &["breaker", "check", "researcher"]);
    at("2026-02-04T14:02:01Z", &fail);
    let cf = ["breaker", "record", "calculator", "--outcome", "failure"];
    at("2026-02-04T14:00:00Z", &cf);
    at("2026-02-04T14:00:00Z", &cf);
    at("2026-02-04T14:00:00Z", &["breaker", "trip", "editor"]);
    at(
        "2026-02-04T14:00:00Z",
        &["breaker", "record", "fact-checker", "--outcome", "success"],
    );
    let rep = s
        .triage(["report"])
        .env("TRIAGE_NOW", "2026-02-04T14:02:30Z")
        .run()
        .stdout_json();
    let open: Vec<(String, String, u64)> = rep["breakers_open"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["key"].as_str().unwrap().to_string(),
                b["state"].as_str().unwrap().to_string(),
                b["opened"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        open,
        [
            ("calculator".into(), "half_open".into(), 1),
            ("editor".into(), "forced_open".into(), 0),
            ("researcher".into(), "open".into(), 2),
        ],
        "{rep}"
    );
    assert_eq!(
        rep["breakers"].as_array().unwrap().len(),
        4,
        "closed ones too"
    );
    let st = s
        .triage(["breaker", "status", "researcher"])
        .env("TRIAGE_NOW", "2026-02-04T14:02:30Z")
        .run()
        .stdout_json();
    assert_eq!(st["breakers"][0]["totals"]["opened"], 2);
    s.cmd(&["record-error", "--agent", "researcher", "--kind", "timeout"])
        .env("TRIAGE_NOW", "2026-02-04T14:02:30Z")
        .assert()
        .code(0);
    let t = String::from_utf8(
        s.triage(["report", "--text"])
            .env("TRIAGE_NOW", "2026-02-04T14:02:30Z")
            .env("COLUMNS", "200")
            .run()
            .into_output()
            .stdout,
    )
    .unwrap();
    assert!(t.contains("researcher (open, opened 2×)"), "{t}");
    // Template 4 from the breaker file.
    let t4 = String::from_utf8(
        s.triage([
            "report",
            "--agent",
            "researcher",
            "--template",
            "breaker-open",
            "--text",
        ])
        .env("TRIAGE_NOW", "2026-02-04T14:02:30Z")
        .run()
        .into_output()
        .stdout,
    )
    .unwrap();
    assert!(t4.contains("Times opened: 2"), "{t4}");
    assert!(t4.contains("(A) Wait 31 seconds and retry"), "{t4}");
}

// ---------------------------------------------------------------------------------------------
// 6. run reports the thresholds it crossed, and stops retrying on a cascade.

#[test]
fn run_puts_warnings_in_its_report_and_stops_retrying_on_a_cascade() {
    let Some(s) = sandbox() else { return };
    fail(&s, "statistician-consultant", "timeout");
    fail(&s, "mathematician-consultant", "timeout");
    let script = flaky(&s, "prog", 9);
    let out = s
        .triage([
            "run",
            "--agent",
            "programmer-consultant",
            "--session",
            "s1",
            "--workflow",
            "w1",
            "--phase",
            "2",
            "--",
            "sh",
            &script,
        ])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(1);
    assert_eq!(s.read("count-prog").trim(), "1", "not retried");
    let r = run_report(&out.stderr);
    let w: Vec<&str> = r["warnings"]
        .as_array()
        .expect("a warnings field")
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(w, ["cascade", "phase_failure_ratio"], "{r}");
    assert_eq!(r["warnings"][0]["count"], 3);
    assert_eq!(r["warnings"][0]["attempt"], 1);
    let stopped = r["attempts"][0]["stopped"].as_str().unwrap();
    assert!(stopped.contains("the cascade rule fired"), "{stopped}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not retried: the cascade rule fired"), "{err}");
    // Without a crossing the field is there and empty.
    let out = s.triage(["run", "--", "true"]).env("TRIAGE_NOW", NOW).run();
    assert_eq!(run_report(&out.stderr)["warnings"], json!([]));
}

// ---------------------------------------------------------------------------------------------
// 7. --preserve-partial: a failed attempt's output goes only to its marked partial file.

#[test]
fn a_failed_attempts_output_goes_only_to_its_partial_file_and_empty_ones_are_not_kept() {
    let Some(s) = crate::backend::sandbox() else {
        return;
    };
    s.write(".triage.toml", "[retry]\nschedule = [\"10ms\"]\n");
    s.write(
        "half.sh",
        "c=$(cat n 2>/dev/null || echo 0); c=$((c+1)); echo $c > n\n\
         [ $c -eq 1 ] && exit 1\necho \"half $c\"; exit 1\n",
    );
    let out = s
        .triage([
            "run",
            "--preserve-partial",
            "scratch",
            "--name",
            "step",
            "--",
            "sh",
            "half.sh",
        ])
        .run()
        .status(1);
    assert!(
        out.stdout.is_empty(),
        "the caller's output gets nothing partial: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !s.exists("scratch/step-1_partial"),
        "attempt 1 printed nothing"
    );
    assert_eq!(s.read("scratch/step-2_partial"), "half 2\n");
    let r = run_report(&out.stderr);
    assert_eq!(r["preserved_outputs"], json!(["scratch/step-2_partial"]));
    // Without --preserve-partial, the output of the last attempt is passed on as before.
    let out = s
        .triage(["run", "--", "sh", "-c", "echo partial; exit 3"])
        .run()
        .status(3);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "partial\n");
}

// ---------------------------------------------------------------------------------------------
// 8. Templates state only facts.

#[test]
fn templates_state_only_what_the_log_and_the_breakers_show() {
    let Some(s) = sandbox() else { return };
    // Phase 1 had a failure; phase 2 fails.
    triage(
        &s,
        &[
            "record-error",
            "--session",
            "s1",
            "--workflow",
            "w1",
            "--phase",
            "1",
            "--agent",
            "research-architect",
            "--kind",
            "crash",
        ],
        "",
    );
    fail(&s, "statistician-consultant", "timeout");
    let summary = text(
        &s,
        &["report", "--session", "s1", "--template", "session-summary"],
    );
    assert!(!summary.contains("Phases 0, 1"), "{summary}");
    assert!(summary.contains("Completed: unknown"), "{summary}");
    assert!(
        !summary.contains("rm -rf"),
        "no advice deletes shared state: {summary}"
    );
    let summary = text(
        &s,
        &[
            "report",
            "--session",
            "s1",
            "--template",
            "session-summary",
            "--completed",
            "0",
        ],
    );
    assert!(summary.contains("Completed: Phases 0\n"), "{summary}");

    // Pipeline: the first stage failed, a later one has errors too.
    triage(
        &s,
        &[
            "record-error",
            "--session",
            "p",
            "--agent",
            "researcher",
            "--kind",
            "timeout",
        ],
        "",
    );
    triage(
        &s,
        &[
            "record-error",
            "--session",
            "p",
            "--agent",
            "editor",
            "--kind",
            "crash",
        ],
        "",
    );
    let p = text(
        &s,
        &[
            "report",
            "--session",
            "p",
            "--template",
            "pipeline-status",
            "--pipeline",
            "researcher,synthesizer,editor",
        ],
    );
    assert!(
        !p.contains("Completed successfully:"),
        "nothing completed: {p}"
    );
    assert!(p.contains("- [ ] editor: CRASH"), "{p}");
    let not_started = p.split("Not started:").nth(1).unwrap_or_default();
    assert!(!not_started.contains("editor"), "{p}");
    assert!(not_started.contains("synthesizer"), "{p}");

    let t5 = text(
        &s,
        &[
            "report",
            "--session",
            "s1",
            "--template",
            "stability-warning",
        ],
    );
    assert!(!t5.contains("100%"), "{t5}");
    assert!(t5.contains("Failure rate: unknown"), "{t5}");

    // No breakers in this root: no Template 4.
    let out = s
        .triage([
            "report",
            "--agent",
            "statistician-consultant",
            "--template",
            "breaker-open",
        ])
        .run()
        .status(0);
    // A refusal is its one JSON line (and exit 1 with -e), never a template.
    let v = json_out(&out);
    assert_eq!(v["ok"], false, "{v}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("CIRCUIT BREAKER"));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("there is no breaker `statistician-consultant`"));

    // A critical agent's missing output is not a completion.
    let deg = text(
        &s,
        &["report", "--workflow", "w1", "--template", "degradation"],
    );
    assert!(
        !deg.contains("completed without statistician-consultant"),
        "{deg}"
    );
    assert!(deg.starts_with("Workflow Incomplete"), "{deg}");
    assert!(
        deg.contains("no statistician-consultant output (timeout; critical, unresolved)"),
        "{deg}"
    );
}

// ---------------------------------------------------------------------------------------------
// 9. Seed texts that had no template.

#[test]
fn parallel_status_cascade_and_stage_failed_texts_render_from_the_log() {
    let Some(s) = sandbox() else { return };
    fail(&s, "calculator", "timeout");
    let p = text(
        &s,
        &[
            "report",
            "--workflow",
            "w1",
            "--template",
            "parallel-status",
            "--completed",
            "researcher",
        ],
    );
    assert!(
        p.starts_with("Parallel Execution Status: PARTIAL SUCCESS (1/2 completed)\n"),
        "{p}"
    );
    assert!(p.contains("- [x] researcher\n"), "{p}");
    assert!(p.contains("- [ ] calculator: TIMEOUT\n"), "{p}");
    assert!(
        p.contains("(A) Proceed with researcher output only (skip calculator)"),
        "{p}"
    );

    fail(&s, "researcher", "timeout");
    fail(&s, "editor", "validation_failed");
    let c = text(&s, &["report", "--workflow", "w1", "--template", "cascade"]);
    assert!(
        c.starts_with("Multiple failures detected in workflow w1.\n"),
        "{c}"
    );
    assert!(c.contains("1. calculator: Timeout\n"), "{c}");
    assert!(c.contains("3. editor: Validation failed\n"), "{c}");
    assert!(c.contains("Automatic retry disabled."), "{c}");

    let st = text(
        &s,
        &["report", "--workflow", "w1", "--template", "stage-failed"],
    );
    assert!(
        st.starts_with("Stage 2 failed 3 times. Proceeding with partial results."),
        "{st}"
    );
    let j = triage(
        &s,
        &["report", "--workflow", "w1", "--template", "stage-failed"],
        "",
    );
    assert_eq!(
        (j["stage"].as_str(), j["failures"].as_u64()),
        (Some("2"), Some(3))
    );
}

// ---------------------------------------------------------------------------------------------
// 10. Defaults that agree: the retry decision first within a run, the breaker for the next.

#[test]
fn an_optional_agent_ends_degraded_after_its_attempts_and_the_breaker_stops_the_next_run() {
    let Some(s) = sandbox() else { return };
    s.write(
        "down.sh",
        "c=$(cat n 2>/dev/null || echo 0); echo $((c+1)) > n\n\
         echo 'Error: connect ECONNREFUSED 127.0.0.1:8080' >&2; exit 1\n",
    );
    let out = s
        .triage([
            "run",
            "--agent",
            "mathematician-consultant",
            "--",
            "sh",
            "down.sh",
        ])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(1); // its own status, not 75
    assert_eq!(s.read("n").trim(), "3", "all 3 attempts ran");
    let r = run_report(&out.stderr);
    assert_eq!(r["action"], "proceed_degraded", "{r}");
    assert_eq!(r["outcome"], "failed");
    // The breaker opened during the run; it stops the next one.
    s.triage([
        "run",
        "--agent",
        "mathematician-consultant",
        "--",
        "sh",
        "down.sh",
    ])
    .env("TRIAGE_NOW", NOW)
    .run()
    .status(75);
    assert_eq!(s.read("n").trim(), "3", "not run");
    // Its failure is Template 1's to show, not Template 4's.
    let t1 = text(&s, &["report", "--template", "agent-failure"]);
    assert!(
        t1.starts_with("[AGENT FAILURE] mathematician-consultant failed after 3 attempts"),
        "{t1}"
    );
}

#[test]
fn a_tool_failure_is_retried_once_by_default() {
    let Some(s) = crate::backend::sandbox() else {
        return;
    };
    s.write(".triage.toml", "[retry]\nschedule = [\"10ms\", \"10ms\"]\n");
    let script = flaky(&s, "tool", 9);
    let out = s.triage(["run", "--", "sh", &script]).run().status(1);
    assert_eq!(
        s.read("count-tool").trim(),
        "2",
        "seed 003: tool_failure, retry once"
    );
    let r = run_report(&out.stderr);
    assert_eq!(r["attempts"].as_array().unwrap().len(), 2);
}

// ---------------------------------------------------------------------------------------------
// 11. Work items with breakers of their own.

#[test]
fn chapters_under_one_agent_have_breakers_of_their_own() {
    let Some(s) = crate::backend::sandbox() else {
        return;
    };
    s.write(
        ".triage.toml",
        "[retry]\nschedule = [\"10ms\"]\n\n[agents.notebook-generator]\nbreaker_key = \"{agent}:{task_id}\"\n",
    );
    let chapter = |ch: &str, ok: bool| {
        s.triage([
            "run",
            "--agent",
            "notebook-generator",
            "--task",
            ch,
            "--workflow",
            "w",
            "--",
            "sh",
            "-c",
            if ok {
                "echo notebook"
            } else {
                "echo broken >&2; exit 1"
            },
        ])
        .env("TRIAGE_NOW", NOW)
        .run()
    };
    chapter("ch1", false).status(1);
    chapter("ch2", false).status(1);
    let st = s
        .triage(["breaker", "status"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .stdout_json();
    let keys: Vec<(&str, &str)> = st["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["key"].as_str().unwrap(), b["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        keys,
        [
            ("notebook-generator:ch1", "open"),
            ("notebook-generator:ch2", "open")
        ]
    );
    // The healthy fourth chapter starts, and its success resolves nothing of the others.
    let out = chapter("ch4", true).status(0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "notebook\n");
    // ch1's breaker is open.
    chapter("ch1", true).status(75);
    let recs = lines(&s);
    assert!(recs.iter().all(|l| l.get("resolves").is_none()), "{recs:?}");
    assert_eq!(recs[0]["breaker_key"], "notebook-generator:ch1");
    assert_eq!(recs[0]["agent"], "notebook-generator");
    assert_eq!(recs[0]["task_id"], "ch1");

    // --breaker names it outright, for run and record-error alike.
    let v = triage(
        &s,
        &[
            "record-error",
            "--agent",
            "calculator",
            "--breaker",
            "calc:units",
            "--kind",
            "crash",
        ],
        "",
    );
    assert_eq!(v["breaker"]["key"], "calc:units");
    assert_eq!(v["breaker_key"], "calc:units");
    let st = s
        .triage(["breaker", "status", "calc:units"])
        .run()
        .stdout_json();
    assert_eq!(st["breakers"][0]["totals"]["failures"], 1);
    let out = s
        .triage(["run", "--breaker", "calc:units", "--", "true"])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(0);
    assert_eq!(
        run_report(&out.stderr)["attempts"][0]["breaker"]["key"],
        "calc:units"
    );
}

/// Seed 001's stability warning is about failures: a session whose failures are all resolved
/// gets no warning (no "[WORKFLOW STABILITY WARNING]", no options to choose from).
#[test]
fn the_stability_warning_is_not_given_when_nothing_failed() {
    let s = Sandbox::new();
    let v = fail(&s, "researcher", "timeout");
    let id = v["error_id"].as_str().unwrap().to_string();
    triage(
        &s,
        &[
            "record-error",
            "--resolve",
            &id,
            "--action-taken",
            "retry",
            "--successful",
            "true",
        ],
        "",
    );
    let args = [
        "report",
        "--session",
        "s1",
        "--template",
        "stability-warning",
    ];
    let t = text(&s, &args);
    assert!(!t.contains("STABILITY WARNING]"), "{t}");
    assert!(!t.contains("Recommendation"), "{t}");
    assert!(t.contains("no unresolved failures"), "{t}");
    let j = triage(&s, &args, "");
    assert_eq!(j["failure_count"], 0, "{j}");
    assert_eq!(j["warning"], false, "{j}");
    assert_eq!(j["options"], serde_json::json!([]), "{j}");
}

/// After the cascade rule stops the retries, `run`'s report does not say `"action": "retry"`:
/// the failures go to the user.
#[test]
fn run_stopped_by_the_cascade_rule_reports_escalate_not_retry() {
    let Some(s) = sandbox() else { return };
    fail(&s, "statistician-consultant", "timeout");
    fail(&s, "mathematician-consultant", "timeout");
    let script = flaky(&s, "prog", 9);
    let out = s
        .triage([
            "run",
            "--agent",
            "programmer-consultant",
            "--session",
            "s1",
            "--workflow",
            "w1",
            "--phase",
            "2",
            "--",
            "sh",
            &script,
        ])
        .env("TRIAGE_NOW", NOW)
        .run()
        .status(1);
    let r = run_report(&out.stderr);
    assert!(
        r["attempts"][0]["stopped"]
            .as_str()
            .unwrap()
            .contains("the cascade rule fired"),
        "{r}"
    );
    assert_eq!(r["action"], "escalate", "{r}");
}
