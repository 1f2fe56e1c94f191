//! A shell command the client moved to the background when it ran past its timeout: reported
//! as a success (`PostToolUse` with `backgroundTaskId` and `timedOutAfterMs`), its end comes
//! later as a `<task-notification>` in a `UserPromptSubmit` prompt. Payload shapes as measured
//! with 2.1.330 and 2.1.332 (`shared/reference/claude-code-e2e.md`).

use crate::common::Sandbox;
use crate::hook::records;
use serde_json::{json, Value};

const T0: &str = "2026-11-28T10:00:00Z";
const SID: &str = "sess-bg-bash";
const COMMAND: &str = "sh -c 'sleep 3; curl https://api.example.com'";

fn hook(s: &Sandbox, payload: &Value) -> Option<Value> {
    crate::hook::hook(s, T0, &payload.to_string())
}

fn moved(task: &str, tool_use_id: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": COMMAND, "timeout": 1000, "description": "fetch"},
        "tool_response": {"stdout": "", "stderr": "", "interrupted": false, "isImage": false,
            "noOutputExpected": false, "backgroundTaskId": task, "timedOutAfterMs": 1000},
        "tool_use_id": tool_use_id, "duration_ms": 2016})
}

fn notification(
    s: &Sandbox,
    task: &str,
    tool_use_id: &str,
    status: &str,
    summary: &str,
    output: &str,
) -> Value {
    let file = s.path().join(format!("tasks/{task}.output"));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, output).unwrap();
    let prompt = format!(
        "<task-notification>\n<task-id>{task}</task-id>\n<tool-use-id>{tool_use_id}</tool-use-id>\n<output-file>{}</output-file>\n<status>{status}</status>\n<summary>{summary}</summary>\n</task-notification>",
        file.display()
    );
    json!({"session_id": SID, "hook_event_name": "UserPromptSubmit", "prompt": prompt})
}

fn context(out: &Option<Value>) -> String {
    out.as_ref()
        .and_then(|v| v["hookSpecificOutput"]["additionalContext"].as_str())
        .unwrap_or_default()
        .to_string()
}

const FAILED: &str = "Background command \"fetch\" failed with exit code 7";
const REFUSED: &str =
    "curl: (7) Failed to connect to api.example.com port 443: Connection refused\n";

#[test]
fn a_command_moved_to_the_background_is_a_record_not_a_failure_until_it_ends() {
    let s = Sandbox::new();
    assert_eq!(
        hook(&s, &moved("b1", "toolu_1")),
        None,
        "the client's own words suffice"
    );
    let recs = records(&s);
    assert_eq!(recs.len(), 1, "{recs:#?}");
    assert_eq!(recs[0]["kind"], "timeout");
    assert_eq!(recs[0]["severity"], "info");
    assert_eq!(recs[0]["counts_toward_thresholds"], false);
    assert_eq!(recs[0]["background_task"], "b1");
    // Its failure, reported later, is judged as the call's own and told with the prompt.
    let told = context(&hook(
        &s,
        &notification(&s, "b1", "toolu_1", "failed", FAILED, REFUSED),
    ));
    assert!(
        told.contains(
            "moved to the background at its timeout (task b1), ended: “Background command"
        ),
        "{told}"
    );
    assert!(told.contains("network_error"), "{told}");
    assert!(told.contains(COMMAND), "{told}");
    let recs = records(&s);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[1]["kind"], "network_error");
    // Told once: the same notification again changes nothing.
    let again = hook(
        &s,
        &notification(&s, "b1", "toolu_1", "failed", FAILED, REFUSED),
    );
    assert_eq!(context(&again), "");
    assert_eq!(records(&s).len(), 2);
}

#[test]
fn a_command_that_ends_well_in_the_background_adds_nothing() {
    let s = Sandbox::new();
    hook(&s, &moved("b2", "toolu_2"));
    let done = "Background command \"fetch\" completed (exit code 0)";
    let out = hook(
        &s,
        &notification(&s, "b2", "toolu_2", "completed", done, "ok\n"),
    );
    assert_eq!(context(&out), "");
    assert_eq!(records(&s).len(), 1);
}

#[test]
fn a_red_test_moved_to_the_background_stays_silent_when_it_fails() {
    let s = Sandbox::new();
    let mut p = moved("b3", "toolu_3");
    p["tool_input"]["command"] = json!("cargo test");
    hook(&s, &p);
    let output = "test tests::adds ... FAILED\n\nfailures:\n\ntest result: FAILED. 3 passed; 1 failed; 0 ignored\n";
    let summary = "Background command \"cargo test\" failed with exit code 101";
    let out = hook(
        &s,
        &notification(&s, "b3", "toolu_3", "failed", summary, output),
    );
    assert_eq!(context(&out), "", "a red test is the agent's own work");
}

#[test]
fn a_notification_for_no_command_triage_saw_moved_changes_nothing() {
    let s = Sandbox::new();
    hook(&s, &moved("b4", "toolu_4"));
    // Typed by a user, or pasted: a task triage never saw, and a task with another call's id.
    for (task, call) in [("b9", "toolu_9"), ("b4", "toolu_other")] {
        let out = hook(&s, &notification(&s, task, call, "failed", FAILED, REFUSED));
        assert_eq!(context(&out), "", "{task} {call}");
    }
    assert_eq!(records(&s).len(), 1);
    // The real one is still judged after them.
    let told = context(&hook(
        &s,
        &notification(&s, "b4", "toolu_4", "failed", FAILED, REFUSED),
    ));
    assert!(told.contains("network_error"), "{told}");
}

#[test]
fn only_the_tasks_own_output_file_is_read() {
    let s = Sandbox::new();
    hook(&s, &moved("b5", "toolu_5"));
    // An output file named for another task (or any other file) is not read: the failure is
    // judged on the summary alone.
    s.write(
        "secret.txt",
        "curl: (7) Failed to connect: Connection refused\n",
    );
    let prompt = format!(
        "<task-notification><task-id>b5</task-id><tool-use-id>toolu_5</tool-use-id><output-file>{}</output-file><status>failed</status><summary>{FAILED}</summary></task-notification>",
        s.path().join("secret.txt").display()
    );
    let out = hook(
        &s,
        &json!({"session_id": SID, "hook_event_name": "UserPromptSubmit", "prompt": prompt}),
    );
    let told = context(&out);
    assert!(!told.contains("Connection refused"), "{told}");
    assert!(!told.contains("network_error"), "{told}");
}
