//! The scenarios of issue 15, each against the real client, each asserting what reached the
//! model (the fake API's request log) and what `.triage/` holds afterwards.

use crate::client::{Project, Run};
use crate::server::{Block, FakeApi, Reply, Request};
use serde_json::{json, Value};

type Outcome = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

/// Every scenario, by name.
const SCENARIOS: &[(&str, fn() -> Outcome)] = &[
    ("failing_bash_call", failing_bash_call),
    (
        "open_breaker_denies_the_agent_call",
        open_breaker_denies_the_agent_call,
    ),
    (
        "background_subagent_failures_open_its_breaker_and_a_probe_closes_it",
        background_subagent_failures_open_its_breaker_and_a_probe_closes_it,
    ),
    (
        "empty_foreground_subagent_is_blocked_then_let_go_once",
        empty_foreground_subagent_is_blocked_then_let_go_once,
    ),
    (
        "main_stop_empty_then_blocked_answer",
        main_stop_empty_then_blocked_answer,
    ),
    (
        "api_errors_are_stop_failure_records",
        api_errors_are_stop_failure_records,
    ),
    ("sixteen_parallel_subagents", sixteen_parallel_subagents),
    (
        "fresh_init_ordinary_session_earns_nothing",
        fresh_init_ordinary_session_earns_nothing,
    ),
    (
        "a_realistic_coding_session_on_the_current_client",
        crate::session::a_realistic_coding_session_on_the_current_client,
    ),
    (
        "a_skills_shell_command_is_gated_by_the_bash_breaker",
        crate::skill_shell::a_skills_shell_command_is_gated_by_the_bash_breaker,
    ),
    (
        "plugin_and_marketplace_pass_the_clients_strict_validator",
        crate::plugin::plugin_and_marketplace_pass_the_clients_strict_validator,
    ),
    (
        "plugin_hooks_judge_like_init_in_a_project_without_init",
        crate::plugin::plugin_hooks_judge_like_init_in_a_project_without_init,
    ),
    (
        "background_subagents_the_api_fails_count_on_both_breakers_and_the_third_is_denied",
        crate::api_failures::background_subagents_the_api_fails_count_on_both_breakers_and_the_third_is_denied,
    ),
    (
        "the_same_bash_timeout_twice_reads_as_its_records_say",
        crate::timeouts::the_same_bash_timeout_twice_reads_as_its_records_say,
    ),
    (
        "an_interactive_start_of_an_init_project_shows_no_settings_warning",
        crate::interactive::an_interactive_start_of_an_init_project_shows_no_settings_warning,
    ),
    (
        "a_command_moved_to_the_background_at_its_timeout_is_judged_when_it_ends",
        crate::timeouts::a_command_moved_to_the_background_at_its_timeout_is_judged_when_it_ends,
    ),
    (
        "a_foreground_subagent_the_api_fails_is_one_record_and_one_charge",
        crate::api_failures::a_foreground_subagent_the_api_fails_is_one_record_and_one_charge,
    ),
];

/// Runs the scenarios whose names contain one of `filter` (all when empty); the exit status.
pub fn run_all(filter: &[String]) -> i32 {
    let (mut passed, mut failed) = (0, 0);
    for (name, scenario) in SCENARIOS {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let began = std::time::Instant::now();
        let result = std::panic::catch_unwind(scenario)
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
    println!("{passed} passed, {failed} failed");
    i32::from(failed > 0)
}

/// The run ended by itself, with status 0, and every hook it ran ended well.
fn finished(run: &Run, p: &Project) -> Outcome {
    ensure!(
        !run.timed_out,
        "the client did not finish in time\n{}",
        run.debug_tail()
    );
    ensure!(
        run.status == Some(0),
        "the client exited with {:?}\nstderr: {}\n{}",
        run.status,
        run.stderr,
        run.debug_tail()
    );
    let bad = run.failed_hooks();
    ensure!(
        bad.is_empty(),
        "hooks that did not end well: {bad:#?}\ntrace: {}",
        p.trace()
    );
    let invalid = run.debug_lines("hook JSON output");
    ensure!(
        invalid.iter().all(|l| !l.contains("ailed")),
        "the client refused a hook answer: {invalid:#?}"
    );
    Ok(())
}

fn hook_json(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or(Value::Null)
}

fn context_of(hook_stdout: &str) -> String {
    hook_json(hook_stdout)["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn main_requests(api: &FakeApi, marker: &str) -> Vec<Request> {
    api.messages()
        .into_iter()
        .filter(|r| r.is(marker))
        .collect()
}

fn summary(reqs: &[Request]) -> String {
    reqs.iter()
        .map(|r| {
            format!(
                "[{} turns, {} tool calls] {}",
                r.turns(),
                r.tool_calls(),
                r.first_text()
                    .chars()
                    .rev()
                    .take(60)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect::<String>()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn agent(subagent_type: &str, prompt: &str, background: bool) -> Value {
    json!({"description": "one small task", "prompt": prompt,
        "subagent_type": subagent_type, "run_in_background": background})
}

// ---------------------------------------------------------------------------------------------

/// A failing Bash call: one record, and `additionalContext` in the next request.
fn failing_bash_call() -> Outcome {
    let p = Project::new("bash");
    let api = FakeApi::start(|r| match r.tool_calls() {
        0 => Reply::tool(
            "Bash",
            json!({"command": "false", "description": "run the check"}),
        ),
        _ => Reply::text("The needle is not there."),
    });
    let run = p.claude(&api, "E2E-BASH: is the needle there?", &[]);
    finished(&run, &p)?;
    let reqs = api.messages();
    ensure!(
        reqs.len() == 2,
        "two requests expected:\n{}",
        summary(&reqs)
    );
    let said = run.hook_outputs("PostToolUseFailure");
    ensure!(said.len() == 1, "one PostToolUseFailure answer: {said:?}");
    let context = context_of(&said[0]);
    ensure!(!context.is_empty(), "no additionalContext: {said:?}");
    ensure!(
        reqs[1].says("PostToolUseFailure:Bash hook additional context")
            && reqs[1].says(context.lines().next().unwrap_or("?")),
        "the advice did not reach the model; it said: {context}\nrequest: {}",
        reqs[1].raw
    );
    // A plain non-zero exit is a tool_failure the model can handle itself, said calmly.
    ensure!(
        context.contains("`tool_failure`")
            && context.contains("self-recoverable")
            && !context.contains("report this to the user"),
        "calm advice for a plain non-zero exit: {context}"
    );
    let recs = p.records();
    ensure!(recs.len() == 1, "one record expected: {recs:#?}");
    ensure!(recs[0]["context"]["command"] == "false", "{:#}", recs[0]);
    ensure!(
        recs[0]["counts_toward_thresholds"] == json!(false),
        "an unguarded tool's failure counts toward no threshold: {:#}",
        recs[0]
    );
    let out = run.all_hook_output();
    ensure!(
        !out.contains("\"decision\"") && !out.contains("\"deny\"") && !out.contains("STABILITY"),
        "an ordinary failure earned nothing more: {out}"
    );
    Ok(())
}

/// An open breaker: the Agent call is denied, the reason reaches the model, and no subagent
/// request is made.
fn open_breaker_denies_the_agent_call() -> Outcome {
    let p = Project::new("open");
    for _ in 0..2 {
        let out = p.triage(
            &[
                "breaker",
                "record",
                "general-purpose",
                "--outcome",
                "failure",
                "--kind",
                "timeout",
                "--detail",
                "ran past 10m",
            ],
            None,
        );
        ensure!(out.status.success(), "{out:?}");
    }
    ensure!(
        p.breaker("general-purpose", None)["state"] == "open",
        "not open"
    );
    let api = FakeApi::start(|r| {
        if r.is("SUBTASK") {
            return Reply::text("should never run");
        }
        match r.tool_calls() {
            0 => Reply::tool(
                "Agent",
                agent("general-purpose", "SUBTASK: summarize", true),
            ),
            _ => Reply::text("The summarizer is unavailable; I will wait."),
        }
    });
    let run = p.claude(&api, "E2E-OPEN: summarize the docs", &[]);
    finished(&run, &p)?;
    let reqs = api.messages();
    ensure!(
        !reqs.iter().any(|r| r.is("SUBTASK")),
        "a subagent request was made:\n{}",
        summary(&reqs)
    );
    ensure!(
        reqs.len() == 2,
        "two requests expected:\n{}",
        summary(&reqs)
    );
    ensure!(
        reqs[1].says("PreToolUse:Agent hook error")
            && reqs[1].says("[CIRCUIT BREAKER] general-purpose circuit breaker opened")
            && reqs[1].says("Last error: ")
            && reqs[1].says("timeout: ran past 10m"),
        "the deny's reason did not reach the model: {}",
        reqs[1].raw
    );
    ensure!(
        !reqs[1].says("Enter choice"),
        "a prompt for a person reached the model"
    );
    Ok(())
}

fn records_of<'a>(recs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    recs.iter().filter(|r| r["kind"] == kind).collect()
}

/// Requests of the subagent whose prompt has `marker` that carry a Stop hook's feedback.
fn fed_back(api: &FakeApi, marker: &str) -> Vec<Request> {
    api.messages()
        .into_iter()
        .filter(|r| r.is(marker) && r.says("Stop hook feedback"))
        .collect()
}

/// Background subagents (the default): two that fail open the breaker of their type; a
/// second session is told so at SessionStart, with the unresolved errors; once the cooldown
/// has passed, a successful background subagent takes the half-open probe and closes it.
fn background_subagent_failures_open_its_breaker_and_a_probe_closes_it() -> Outcome {
    let p = Project::new("background");
    p.policy("[agents.general-purpose.output]\nmax_rejections = 1\n");
    let api = FakeApi::start(|r| {
        if r.is("SUBTASK-FAIL") {
            return Reply::empty();
        }
        if r.is("SUBTASK-OK") {
            return Reply::text("Read all 3 files; the summary is in NOTES.md.");
        }
        if r.is("E2E-BG1") && r.tool_calls() == 0 {
            return Reply::Turn(vec![
                Block::Tool(
                    "Agent",
                    agent("general-purpose", "SUBTASK-FAIL-1: read a.md", true),
                ),
                Block::Tool(
                    "Agent",
                    agent("general-purpose", "SUBTASK-FAIL-2: read b.md", true),
                ),
            ]);
        }
        if r.is("E2E-BG3") && r.tool_calls() == 0 {
            return Reply::tool(
                "Agent",
                agent("general-purpose", "SUBTASK-OK: read c.md", true),
            );
        }
        Reply::text("Waiting for the helpers to finish.")
    });

    let run = p.claude(&api, "E2E-BG1: read the two files with helpers", &[]);
    finished(&run, &p)?;
    let b = p.breaker("general-purpose", None);
    ensure!(
        b["state"] == "open",
        "two failed background subagents open it: {b:#}"
    );
    ensure!(b["totals"]["failures"] == 2, "{b:#}");
    let recs = p.records();
    ensure!(
        records_of(&recs, "validation_failed").len() == 2 && recs.len() == 2,
        "one record per failed subagent: {recs:#?}"
    );
    for n in 1..=2 {
        let marker = format!("SUBTASK-FAIL-{n}");
        let fed = fed_back(&api, &marker);
        ensure!(
            fed.len() == 1 && fed[0].says("rejection 1 of 1"),
            "{marker} was sent back once with the reason: {}",
            summary(&api.messages())
        );
    }
    let sessions = p.dir.join(".triage/sessions");
    let left: Vec<String> = walk(&sessions)
        .into_iter()
        .filter(|f| f.ends_with(".start") || f.ends_with(".done"))
        .collect();
    ensure!(left.is_empty(), "calls left open: {left:?}");

    // A second session hears of the open breaker and the unresolved errors.
    let run = p.claude(&api, "E2E-BG2: hello", &[]);
    finished(&run, &p)?;
    let first = main_requests(&api, "E2E-BG2");
    ensure!(!first.is_empty(), "no request for the second session");
    ensure!(
        first[0].says("SessionStart")
            && first[0].says("general-purpose (open): calls are refused for")
            && first[0].says("Unresolved errors from earlier sessions of this project: 2 (general-purpose validation_failed ×2)"),
        "SessionStart's summary did not reach the model: {}",
        first[0].raw
    );

    // Past the cooldown (hooks read TRIAGE_NOW): half-open, one probe, taken by a background
    // subagent whose success is seen only at SubagentStop.
    let later = (chrono::Utc::now() + chrono::Duration::seconds(120))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let run = p.claude(
        &api,
        "E2E-BG3: read the third file with a helper",
        &[("TRIAGE_NOW", later.as_str())],
    );
    finished(&run, &p)?;
    let reqs = main_requests(&api, "E2E-BG3");
    ensure!(
        reqs[0].says("general-purpose (half_open): the next call is let through as a probe"),
        "SessionStart tells the truth about half-open: {}",
        reqs[0].raw
    );
    ensure!(
        api.messages().iter().any(|r| r.is("SUBTASK-OK")),
        "the probe's subagent ran"
    );
    let b = p.breaker("general-purpose", Some(&later));
    ensure!(
        b["state"] == "closed" && b["probes_in_flight"] == 0 && b["totals"]["successes"] == 1,
        "the probe's success closes it: {b:#}"
    );
    Ok(())
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path.display().to_string());
            }
        }
    }
    out
}

/// A foreground subagent that says nothing: sent back up to max_rejections (3) times, then let
/// go; exactly one validation_failed record, and the parent told its output is unusable.
fn empty_foreground_subagent_is_blocked_then_let_go_once() -> Outcome {
    let p = Project::new("foreground");
    let api = FakeApi::start(|r| {
        if r.is("SUBTASK-EMPTY") {
            return Reply::empty();
        }
        match r.tool_calls() {
            0 => Reply::tool(
                "Agent",
                agent("general-purpose", "SUBTASK-EMPTY: check the links", false),
            ),
            _ => Reply::text("The link check gave nothing usable; I will do it myself."),
        }
    });
    let run = p.claude(&api, "E2E-FG: check the links", &[]);
    finished(&run, &p)?;
    let fed = fed_back(&api, "SUBTASK-EMPTY");
    let reasons: Vec<bool> = (1..=3)
        .map(|n| fed.iter().any(|r| r.says(&format!("rejection {n} of 3"))))
        .collect();
    ensure!(
        reasons == [true, true, true] && !fed.iter().any(|r| r.says("rejection 4 of 3")),
        "sent back exactly 3 times with the reason: {reasons:?}\n{}",
        summary(&api.messages())
    );
    let recs = p.records();
    ensure!(
        records_of(&recs, "validation_failed").len() == 1 && recs.len() == 1,
        "one failure, one record: {recs:#?}"
    );
    let main = main_requests(&api, "E2E-FG");
    ensure!(
        main.last().is_some_and(
            |r| r.says("PostToolUseFailure:Agent hook additional context")
                && r.says("output is unusable")
        ),
        "the parent was told: {}\n{}",
        summary(&api.messages()),
        main.last().map(|r| r.raw.clone()).unwrap_or_default()
    );
    let b = p.breaker("general-purpose", None);
    ensure!(
        b["totals"]["failures"] == 1 && b["totals"]["successes"] == 0,
        "one breaker failure: {b:#}"
    );
    Ok(())
}

/// The main agent's Stop: an empty answer is sent back with the reason; an answer that says
/// BLOCKED is not (the user is told), and is recorded once.
fn main_stop_empty_then_blocked_answer() -> Outcome {
    let p = Project::new("stop");
    let api = FakeApi::start(|r| {
        if r.says("Stop hook feedback") {
            Reply::text("BLOCKED on missing credentials: I need the staging API key to go on.")
        } else {
            Reply::empty()
        }
    });
    let run = p.claude(&api, "E2E-STOP: deploy to staging", &[]);
    finished(&run, &p)?;
    let reqs = main_requests(&api, "E2E-STOP");
    let fed: Vec<&Request> = reqs
        .iter()
        .filter(|r| r.says("Stop hook feedback"))
        .collect();
    ensure!(
        fed.len() == 1 && fed[0].says("rejection 1 of 3") && fed[0].says("empty"),
        "the empty answer is sent back once, with the reason:\n{}",
        summary(&reqs)
    );
    // The client shows the model the hook's command with its block: nothing in it may be
    // false (an earlier command said triage was not found, while triage answered).
    let shown = fed[0]
        .raw
        .find("blocking error from command")
        .map_or(String::new(), |at| {
            fed[0].raw.chars().skip(at).take(600).collect()
        });
    ensure!(
        !fed[0].says("not found on PATH") && !fed[0].says("hook skipped"),
        "the model read words of the hook command that are not true: {shown}"
    );
    // And short: the launcher's one line, not a screenful of shell.
    ensure!(
        fed[0].says("hooks/triage-hook") && !fed[0].says("command -v triage"),
        "the model read a long hook command: {shown}"
    );
    ensure!(
        reqs.last().is_some_and(|r| r.says("Stop hook feedback")),
        "the BLOCKED answer is not sent back: no request after it\n{}",
        summary(&reqs)
    );
    let stops = run.hook_outputs("Stop");
    let told = stops
        .iter()
        .filter_map(|s| hook_json(s)["systemMessage"].as_str().map(str::to_string))
        .find(|m| m.contains("says it is blocked"));
    ensure!(
        told.as_deref()
            .is_some_and(|m| m.contains("missing credentials")),
        "the user is told: {stops:?}"
    );
    let recs = p.records();
    ensure!(
        recs.len() == 1 && recs[0]["action"] == "escalate",
        "the BLOCKED answer is recorded once, to escalate: {recs:#?}"
    );
    Ok(())
}

/// 529 and 400 from the API end the turn: StopFailure records with the client's error word,
/// the API's message, and kinds from both; the hook finishes before the client exits.
fn api_errors_are_stop_failure_records() -> Outcome {
    let p = Project::new("api-errors");
    let api = FakeApi::start(|r| {
        if r.is("E2E-529") {
            Reply::Error(529, "overloaded_error", "Overloaded".into())
        } else {
            Reply::Error(
                400,
                "invalid_request_error",
                "messages.0: bad e2e request".into(),
            )
        }
    });
    for (n, prompt) in ["E2E-529: hello", "E2E-400: hello"].iter().enumerate() {
        let run = p.claude(&api, prompt, &[]);
        ensure!(!run.timed_out, "{prompt}: did not finish");
        // The hook hands the payload off and returns at once; the record follows.
        let began = std::time::Instant::now();
        while p.records().len() <= n && began.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        ensure!(
            p.records().len() == n + 1,
            "{prompt}: no StopFailure record: {:#?}\n{:#?}\ntrace: {}",
            p.records(),
            run.debug_lines("StopFailure"),
            p.trace()
        );
    }
    let recs = p.records();
    let (a, b) = (&recs[0], &recs[1]);
    ensure!(
        a["context"]["stop_failure"] == "server_error" && b["context"]["stop_failure"] == "unknown",
        "the client's error words: {recs:#?}"
    );
    ensure!(a["kind"] == "overloaded", "a 529 is `overloaded`: {a:#}");
    ensure!(
        b["kind"] == "invalid_input",
        "a 400 is `invalid_input`: {b:#}"
    );
    Ok(())
}

/// Sixteen background subagents at once, six of which fail (their transcripts written late):
/// every count exact, and one stability warning (the fifth failure earns it; the sixth does
/// not repeat it).
fn sixteen_parallel_subagents() -> Outcome {
    let p = Project::new("parallel");
    // Let go at once, and no opening (which finishing order would decide): every count is
    // then exact.
    p.policy("[agents.general-purpose.output]\nmax_rejections = 0\n[breaker.general-purpose]\nfailure_threshold = 0\n");
    let api = FakeApi::start(|r| {
        for i in 0..16 {
            if r.is(&format!("SUBTASK-PAR-{i:02}")) {
                return if i < 6 {
                    Reply::empty()
                } else {
                    Reply::text(&format!("Part {i} checked: no problems."))
                };
            }
        }
        if r.tool_calls() == 0 {
            let calls = (0..16)
                .map(|i| {
                    Block::Tool(
                        "Agent",
                        agent(
                            "general-purpose",
                            &format!("SUBTASK-PAR-{i:02}: check part {i}"),
                            true,
                        ),
                    )
                })
                .collect();
            return Reply::Turn(calls);
        }
        Reply::text("All parts are being checked.")
    });
    let run = p.claude(&api, "E2E-PAR: check the 16 parts", &[]);
    finished(&run, &p)?;
    let started = (0..16)
        .filter(|i| {
            api.messages()
                .iter()
                .any(|r| r.is(&format!("SUBTASK-PAR-{i:02}")))
        })
        .count();
    ensure!(started == 16, "{started} of 16 subagents ran");
    let recs = p.records();
    ensure!(
        records_of(&recs, "validation_failed").len() == 6 && recs.len() == 6,
        "six failures, six records: {recs:#?}"
    );
    let b = p.breaker("general-purpose", None);
    ensure!(
        b["totals"]["failures"] == 6
            && b["totals"]["successes"] == 10
            && b["totals"]["stale"] == 0
            && b["probes_in_flight"] == 0,
        "16 outcomes on the breaker: {b:#}"
    );
    let warnings = run
        .all_hook_output()
        .matches("WORKFLOW STABILITY WARNING")
        .count();
    ensure!(warnings == 1, "{warnings} stability warnings");
    let left: Vec<String> = walk(&p.dir.join(".triage/sessions"))
        .into_iter()
        .filter(|f| f.ends_with(".start") || f.ends_with(".done"))
        .collect();
    ensure!(left.is_empty(), "calls left open: {left:?}");
    Ok(())
}

/// The acceptance check: a fresh `triage init` project, no policy edits, a session with
/// ordinary Bash failures and ordinary subagents (one in the foreground, one in the
/// background, plain answers): no block, no deny, no stability warning.
fn fresh_init_ordinary_session_earns_nothing() -> Outcome {
    let p = Project::new("ordinary");
    let api = FakeApi::start(|r| {
        if r.is("SUBTASK-REVIEW") {
            return Reply::text("Reviewed the change: two naming nits, otherwise fine.");
        }
        if r.is("SUBTASK-SEARCH") {
            return Reply::text("Found the config loader in src/config.rs.");
        }
        let n = r.tool_calls();
        match n {
            0..=5 => Reply::tool(
                "Bash",
                json!({"command": format!("ls /no/such/dir-{n}"), "description": "look around"}),
            ),
            6 => Reply::tool(
                "Agent",
                agent("general-purpose", "SUBTASK-REVIEW: review the diff", false),
            ),
            7 => Reply::tool(
                "Agent",
                agent("Explore", "SUBTASK-SEARCH: find the config loader", true),
            ),
            _ => Reply::text("Done: the diff is fine and the loader is in src/config.rs."),
        }
    });
    let run = p.claude(&api, "E2E-ORDINARY: review the change", &[]);
    finished(&run, &p)?;
    let reqs = api.messages();
    ensure!(
        reqs.iter().any(|r| r.is("SUBTASK-REVIEW")) && reqs.iter().any(|r| r.is("SUBTASK-SEARCH")),
        "both subagents ran:\n{}",
        summary(&reqs)
    );
    for r in &reqs {
        ensure!(
            !r.says("Stop hook feedback") && !r.says("PreToolUse:Agent hook error"),
            "a block or a deny reached the model:\n{}",
            r.raw
        );
    }
    let out = run.all_hook_output();
    ensure!(
        !out.contains("STABILITY WARNING")
            && !out.contains("\"decision\"")
            && !out.contains("systemMessage"),
        "something unearned was said: {out}"
    );
    // Six `ls` of paths that are not there: the agent's own work (usage), nothing recorded.
    let recs = p.records();
    ensure!(
        recs.is_empty(),
        "six Bash failures of the agent's own work, none recorded: {recs:#?}"
    );
    Ok(())
}
