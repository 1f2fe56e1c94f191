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
