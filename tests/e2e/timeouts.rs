//! A Bash command past its timeout, on the client's own path. With background tasks off (and,
//! measured here, in `-p` runs of both clients whatever that setting says) the client reports
//! it as a failure: "Exit code 143 / Command timed out after 2s".

use crate::client::Project;
use crate::server::{FakeApi, Reply};
use serde_json::json;

type Outcome = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

fn api() -> FakeApi {
    FakeApi::start(|r| match r.tool_calls() {
        0 => Reply::tool(
            "Bash",
            json!({"command": "sleep 4; echo done", "description": "wait", "timeout": 2000}),
        ),
        1 => Reply::tool(
            "Bash",
            json!({"command": "sleep 4; echo done", "description": "wait", "timeout": 2000}),
        ),
        _ => Reply::text("It takes longer than expected."),
    })
}

/// With background tasks off (or where the client does not move the command), a command past
/// its timeout is a failure, twice the same: what the model reads each time matches the
/// record's next step.
pub fn the_same_bash_timeout_twice_reads_as_its_records_say() -> Outcome {
    let p = Project::new("bash-timeout-fg");
    let api = api();
    let run = p.claude(
        &api,
        "E2E-TIMEOUT-FG: wait for it",
        &[("CLAUDE_CODE_DISABLE_BACKGROUND_TASKS", "1")],
    );
    ensure!(!run.timed_out, "the client did not finish");
    let said = run.hook_outputs("PostToolUseFailure");
    let recs = p.records();
    ensure!(
        said.len() == 2 && recs.len() == 2,
        "two timeouts, two answers and two records: {said:#?} {recs:#?}"
    );
    // Each text says the attempt its record holds: a repeat never reads as the first.
    for (text, rec) in said.iter().zip(&recs) {
        let attempt = &rec["retry"]["attempt"];
        let of = &rec["retry"]["max_attempts"];
        ensure!(
            text.contains(&format!("(attempt {attempt} of {of})")),
            "the text and its record disagree: {text} / {:#}",
            rec["retry"]
        );
    }
    ensure!(
        said[0] != said[1],
        "the second timeout read like the first: {said:#?}"
    );
    Ok(())
}

/// With background tasks on (the default), a command past its timeout is moved to the
/// background and reported as a success: triage keeps a record of what happened (not a
/// failure yet), and when the client's task notification says the command failed, judges
/// that failure as its own and the model reads the next step with the notification.
pub fn a_command_moved_to_the_background_at_its_timeout_is_judged_when_it_ends() -> Outcome {
    let p = Project::new("bash-timeout-bg");
    let api = FakeApi::start(|r| match r.tool_calls() {
        0 => Reply::tool(
            "Bash",
            json!({
                "command": "sh -c 'sleep 3; echo \"curl: (7) Failed to connect to api.example.com port 443: Connection refused\" >&2; exit 7'",
                "description": "fetch",
                "timeout": 1000
            }),
        ),
        1 => Reply::tool(
            "Bash",
            json!({"command": "sh -c 'sleep 5; echo later'", "description": "wait more", "timeout": 30000}),
        ),
        _ => Reply::text("Done waiting."),
    });
    let run = p.claude(&api, "E2E-TIMEOUT-BG: fetch it", &[]);
    ensure!(!run.timed_out, "the client did not finish");
    let recs = p.records();
    let moved: Vec<&serde_json::Value> = recs
        .iter()
        .filter(|r| r["background_task"].is_string())
        .collect();
    ensure!(
        moved.len() == 1
            && moved[0]["kind"] == "timeout"
            && moved[0]["counts_toward_thresholds"] == false,
        "one record of the move, not counted as a failure: {recs:#?}"
    );
    let failed: Vec<&serde_json::Value> = recs
        .iter()
        .filter(|r| r["background_task"].is_null() && r["tool_name"].is_null())
        .collect();
    ensure!(
        recs.len() == 2 && failed.len() == 1 && failed[0]["kind"] == "network_error",
        "its later failure recorded once, as what it was: {recs:#?}"
    );
    let told = run.hook_outputs("UserPromptSubmit").join("\n");
    ensure!(
        told.contains("moved to the background at its timeout") && told.contains("network_error"),
        "the notification's answer tells the model: {told}"
    );
    // The model reads it in the request that carries the notification.
    let reqs = api.messages();
    ensure!(
        reqs.iter().any(|r| r.says("task-notification")
            && r.says("at its timeout (task ")
            && r.says("ended: “Background command")),
        "the model never read triage's words with the notification"
    );
    Ok(())
}
