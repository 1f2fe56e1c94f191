//! The scenarios, each run against each client: a failing shell command (triage's advice
//! reaches the model's next request), a red test (silence), an open breaker denying a shell
//! call (the reason reaches the model, the command never runs), and an empty final answer
//! (sent back with the reason). Each asserts on what the fake API received and on `.triage/`.

use crate::clients::{Client, Project, Run, CLIENTS};
use crate::server::{FakeApi, Reply, Request};
use serde_json::Value;

type Outcome = Result<(), String>;
type Scenario = fn(Client) -> Outcome;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

/// Every scenario, by name; each runs once per client, named `CLIENT_NAME`.
const SCENARIOS: &[(&str, Scenario)] = &[
    (
        "failing_shell_command_gets_advice_in_the_next_request",
        failing_shell_command_gets_advice_in_the_next_request,
    ),
    ("red_test_gets_silence", red_test_gets_silence),
    (
        "open_breaker_denies_the_shell_call",
        open_breaker_denies_the_shell_call,
    ),
    (
        "empty_final_answer_is_sent_back_with_the_reason",
        empty_final_answer_is_sent_back_with_the_reason,
    ),
    (
        "a_session_without_triage_on_path_goes_on",
        a_session_without_triage_on_path_goes_on,
    ),
];

/// Runs the scenarios whose names contain one of `filter` (all when empty), for each client
/// whose program `main` found; the exit status.
pub fn run_all(filter: &[String]) -> i32 {
    let (mut passed, mut failed) = (0, 0);
    for client in CLIENTS {
        if std::env::var_os(client.program_var()).is_none() {
            continue;
        }
        for (name, scenario) in SCENARIOS {
            let name = format!("{}_{name}", client.name());
            if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
                continue;
            }
            let began = std::time::Instant::now();
            let result = std::panic::catch_unwind(|| scenario(client))
                .unwrap_or_else(|p| Err(format!("panicked: {:?}", p.downcast_ref::<String>())));
            let took = began.elapsed().as_secs_f64();
            match result {
                Ok(()) => {
                    passed += 1;
                    println!("test {name} ... ok ({took:.1} s)");
                }
                Err(why) => {
                    failed += 1;
                    println!("test {name} ... FAILED ({took:.1} s)\n{why}\n");
                }
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    i32::from(failed > 0)
}

/// The run ended by itself with status 0.
fn finished(run: &Run, p: &Project) -> Outcome {
    ensure!(
        !run.timed_out,
        "the client did not finish in time\nstderr: {}",
        run.stderr
    );
    ensure!(
        run.status == Some(0),
        "the client exited with {:?}\nstdout: {}\nstderr: {}\ntrace: {}",
        run.status,
        run.stdout,
        run.stderr,
        p.trace()
    );
    ensure!(
        !run.stderr.contains("triage: not found") && !run.stderr.contains("hook skipped"),
        "the hooks did not find triage: {}",
        run.stderr
    );
    // What each client prints for a hook that failed or whose answer it refused: Codex
    // `hook: EVENT Failed` (an answer outside the event's schema included), Gemini `Hook(s)
    // [...] failed for event EVENT`.
    let refused: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| {
            (l.starts_with("hook: ") && l.ends_with(" Failed")) || l.contains("failed for event")
        })
        .collect();
    ensure!(
        refused.is_empty(),
        "hooks that failed or were refused: {refused:#?}\ntrace: {}",
        p.trace()
    );
    Ok(())
}

/// Each request's tail (what the client added after the model's last turn), shortened.
fn summary(reqs: &[Request]) -> String {
    reqs.iter()
        .enumerate()
        .map(|(i, r)| {
            let added = r.since_last_call();
            let tail: String = added
                .chars()
                .rev()
                .take(600)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            format!("[{i}] …{tail}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The words a hook's advice arrives in: Codex puts `additionalContext` in a developer
/// message before the tool's output, Gemini appends it to the tool's result in
/// `<hook_context>` (both measured: `docs/clients-measured.md`).
fn advice_in(client: Client, req: &Request) -> Option<String> {
    let added = req.since_last_call();
    let items: Vec<Value> = serde_json::from_str(&added).unwrap_or_default();
    match client {
        Client::Codex => items
            .iter()
            .filter(|i| i["role"] == "developer")
            .filter_map(|i| i["content"][0]["text"].as_str())
            .find(|t| t.contains("triage"))
            .map(str::to_string),
        Client::Gemini => {
            let at = added.find("<hook_context>")?;
            let rest = &added[at + "<hook_context>".len()..];
            Some(rest[..rest.find("</hook_context>").unwrap_or(rest.len())].to_string())
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// `false` in the shell: one record, and triage's calm advice in the next request, where the
/// client puts a hook's `additionalContext`.
fn failing_shell_command_gets_advice_in_the_next_request(client: Client) -> Outcome {
    let p = Project::new(client, "failing");
    let api = FakeApi::start(|r| match r.tool_calls() {
        0 => Reply::shell("false"),
        _ => Reply::text("The check failed."),
    });
    let run = p.run(&api, "E2E-FAILING: run the check");
    finished(&run, &p)?;
    let reqs = api.turns();
    ensure!(
        reqs.len() == 2,
        "two requests expected:\n{}\nstderr: {}",
        summary(&reqs),
        run.stderr
    );
    let advice = advice_in(client, &reqs[1]);
    ensure!(
        advice.as_deref().is_some_and(|a| a.contains("`tool_failure`")
            && a.contains("self-recoverable")),
        "triage's advice on the failed command did not reach the model; after the call it got: {}\nrecords: {:#?}\ntrace: {}",
        reqs[1].since_last_call(),
        p.records(),
        p.trace()
    );
    let recs = p.records();
    ensure!(recs.len() == 1, "one record expected: {recs:#?}");
    ensure!(recs[0]["context"]["command"] == "false", "{:#}", recs[0]);
    Ok(())
}

/// A failing unit test (`node --test`, one assertion off) is the agent's own work: the
/// result reaches the model with nothing of triage's, nothing is recorded, and a Bash breaker
/// that one failure would open stays closed.
fn red_test_gets_silence(client: Client) -> Outcome {
    let p = Project::new(client, "red");
    std::fs::write(
        p.dir.join("sum.test.js"),
        "const test = require('node:test');\nconst assert = require('node:assert');\n\ntest('adds', () => {\n  assert.strictEqual(1 + 1, 3);\n});\n",
    )
    .map_err(|e| e.to_string())?;
    p.policy("[breaker.Bash]\nfailure_threshold = 1\ncooldown = \"10m\"\n");
    let api = FakeApi::start(|r| match r.tool_calls() {
        0 => Reply::shell("node --test sum.test.js"),
        _ => Reply::text("The test fails: 1 + 1 is not 3; fixing the expectation."),
    });
    let run = p.run(&api, "E2E-RED: run the tests");
    finished(&run, &p)?;
    let reqs = api.turns();
    ensure!(
        reqs.len() == 2,
        "two requests expected:\n{}\nstderr: {}",
        summary(&reqs),
        run.stderr
    );
    ensure!(
        reqs[1].says("# fail 1"),
        "the test did not run, or its result did not reach the model: {}",
        reqs[1].since_last_call()
    );
    ensure!(
        advice_in(client, &reqs[1]).is_none() && !reqs[1].since_last_call().contains("triage:"),
        "triage spoke on a red test: {}",
        reqs[1].since_last_call()
    );
    ensure!(
        p.hooks_ran(),
        "no hook judged the red test (its silence proves nothing): stderr: {}",
        run.stderr
    );
    let recs = p.records();
    ensure!(recs.is_empty(), "a red test is not recorded: {recs:#?}");
    let b = p.breaker("Bash");
    ensure!(
        b["consecutive_failures"].as_u64().unwrap_or(0) == 0 && b["state"] != "open",
        "a red test charged the Bash breaker: {b:#}"
    );
    Ok(())
}

/// An open Bash breaker: the shell call is denied before it runs, and the breaker's reason
/// reaches the model in the client's words for a blocked call.
fn open_breaker_denies_the_shell_call(client: Client) -> Outcome {
    let p = Project::new(client, "open");
    p.policy("[breaker.Bash]\nfailure_threshold = 1\ncooldown = \"10m\"\n");
    let out = p.triage(&[
        "breaker",
        "record",
        "Bash",
        "--outcome",
        "failure",
        "--kind",
        "crash",
        "--detail",
        "bash: fork: Resource temporarily unavailable",
    ]);
    ensure!(out.status.success(), "{out:?}");
    ensure!(p.breaker("Bash")["state"] == "open", "not open");
    let api = FakeApi::start(|r| match r.tool_calls() {
        // No `$(…)`: Gemini CLI refuses command substitution by itself.
        0 => Reply::shell("printf 'ran-%s\\n' 42"),
        _ => Reply::text("The shell is unavailable; I will wait."),
    });
    let run = p.run(&api, "E2E-OPEN: show the marker");
    finished(&run, &p)?;
    let reqs = api.turns();
    ensure!(
        reqs.len() == 2,
        "two requests expected:\n{}\nstderr: {}",
        summary(&reqs),
        run.stderr
    );
    let after = reqs[1].since_last_call();
    ensure!(
        !after.contains("ran-42"),
        "the command ran with the Bash breaker open: {after}"
    );
    let blocked = match client {
        Client::Codex => "Command blocked by PreToolUse hook: ",
        Client::Gemini => "Tool execution blocked: ",
    };
    ensure!(
        reqs[1].says(blocked)
            && reqs[1].says("[CIRCUIT BREAKER]")
            && reqs[1].says("fork: Resource temporarily unavailable"),
        "the deny's reason did not reach the model: {after}"
    );
    Ok(())
}

/// An empty final answer is sent back with the reason, once; the next answer ends the run.
/// Codex sends the empty answer to `Stop` as `null`; Gemini rejects an empty first reply
/// itself, so there the model first runs a command and then answers nothing, which reaches
/// `AfterAgent` as the client's placeholder `[no response text]`.
fn empty_final_answer_is_sent_back_with_the_reason(client: Client) -> Outcome {
    let p = Project::new(client, "empty");
    let api = FakeApi::start(move |r| {
        if client == Client::Gemini && r.tool_calls() == 0 {
            return Reply::shell("echo checked");
        }
        if r.says("triage check-output") {
            Reply::text("Deployed to staging: all checks passed.")
        } else {
            Reply::text("")
        }
    });
    let run = p.run(&api, "E2E-EMPTY: deploy to staging");
    finished(&run, &p)?;
    let reqs = api.turns();
    let fed: Vec<&Request> = reqs.iter().filter(|r| r.says("rejection 1 of 3")).collect();
    ensure!(
        fed.len() == 1 && fed[0].says("empty"),
        "the empty answer was not sent back once with the reason:\n{}\ntrace: {}",
        summary(&reqs),
        p.trace()
    );
    let back = match client {
        Client::Codex => "<hook_prompt",
        Client::Gemini => "triage check-output",
    };
    ensure!(
        fed[0].since_last_call().contains(back),
        "the reason is not where the client puts a stop hook's block: {}",
        fed[0].since_last_call()
    );
    ensure!(
        reqs.len() == if client == Client::Gemini { 3 } else { 2 },
        "the second answer ends the run:\n{}",
        summary(&reqs)
    );
    Ok(())
}

/// The hooks `init` wrote, with no `triage` on the client's PATH: they skip, and the session
/// goes on. (Gemini CLI blocks the prompt on any hook status but 0 and 1, the shell's 127 for
/// a missing program included: `docs/clients-measured.md`.)
fn a_session_without_triage_on_path_goes_on(client: Client) -> Outcome {
    let p = Project::new(client, "no-triage");
    p.hide_triage();
    let api = FakeApi::start(|r| match r.tool_calls() {
        0 => Reply::shell("false"),
        _ => Reply::text("The check failed; nothing else to do."),
    });
    let run = p.run(&api, "E2E-NO-TRIAGE: run the check");
    ensure!(
        !run.timed_out && run.status == Some(0),
        "the client did not end well: {:?}\nstderr: {}",
        run.status,
        run.stderr
    );
    let reqs = api.turns();
    ensure!(
        reqs.len() == 2
            && (reqs[1].says("Process exited with code 1") || reqs[1].says("Exit Code: 1")),
        "the prompt or the command's result did not reach the model:\n{}\nstderr: {}",
        summary(&reqs),
        run.stderr
    );
    ensure!(
        !run.stderr.contains("blocked"),
        "a hook blocked the session: {}",
        run.stderr
    );
    ensure!(
        !p.hooks_ran() && !p.dir.join(".triage/logs/errors.jsonl").exists(),
        "a triage ran: {:#?}",
        p.records()
    );
    Ok(())
}
