//! The client's own failure paths: the API itself failing a subagent (529, 429) until the
//! client gives up. The client then fires only `StopFailure` for the subagent (no
//! `SubagentStop`), and in the foreground the parent's `PostToolUseFailure` as well: one failure,
//! which triage must count once, on the type's breaker and on `api`, and tell the model of.

use crate::client::Project;
use crate::server::{FakeApi, Reply};
use serde_json::{json, Value};

type Outcome = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

fn agent(prompt: &str, background: bool) -> Value {
    json!({"description": "one small task", "prompt": prompt,
        "subagent_type": "general-purpose", "run_in_background": background})
}

/// The fake API: a subagent whose prompt says SUBTASK-529 or SUBTASK-429 gets that error on
/// every request; the main agent's first turn of a prompt starting `E2E-APIFAIL-<how>` launches
/// one such subagent (`<how>`: `bg529`, `bg429`, `fg429`), later turns just wait.
fn api() -> FakeApi {
    FakeApi::start(|r| {
        if r.is("SUBTASK-529") {
            return Reply::Error(529, "overloaded_error", "Overloaded".into());
        }
        if r.is("SUBTASK-429") {
            return Reply::Error(
                429,
                "rate_limit_error",
                "Number of requests exceeded".into(),
            );
        }
        if r.tool_calls() == 0 {
            for (marker, prompt, background) in [
                ("E2E-APIFAIL-bg529", "SUBTASK-529: read a.md", true),
                ("E2E-APIFAIL-bg429", "SUBTASK-429: read b.md", true),
                ("E2E-APIFAIL-fg429", "SUBTASK-429: read c.md", false),
                ("E2E-APIFAIL-again", "SUBTASK-529: read d.md", true),
            ] {
                if r.is(marker) {
                    return Reply::tool("Agent", agent(prompt, background));
                }
            }
        }
        Reply::text("The helper could not do it; I will report that.")
    })
}

fn breaker_failures(p: &Project, key: &str) -> u64 {
    p.breaker(key, None)["totals"]["failures"]
        .as_u64()
        .unwrap_or(0)
}

fn starts_left(p: &Project) -> Vec<String> {
    let mut left = Vec::new();
    let mut dirs = vec![p.dir.join(".triage/sessions")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.to_string_lossy().ends_with(".start") {
                left.push(path.display().to_string());
            }
        }
    }
    left
}

/// Background subagents the API fails (529, then 429): each is one record, charged on
/// `general-purpose` and on `api`, its start closed, and the model told; after two, the type's
/// breaker is open and the third launch is denied before any subagent request is made.
pub fn background_subagents_the_api_fails_count_on_both_breakers_and_the_third_is_denied() -> Outcome
{
    let p = Project::new("api-fails-bg");
    let api = api();
    let retries = [("CLAUDE_CODE_MAX_RETRIES", "1")];
    for (n, prompt) in ["E2E-APIFAIL-bg529: read a", "E2E-APIFAIL-bg429: read b"]
        .iter()
        .enumerate()
    {
        let run = p.claude(&api, prompt, &retries);
        ensure!(!run.timed_out, "{prompt}: the client did not finish");
        let recs = p.records();
        ensure!(
            recs.len() == n + 1,
            "{prompt}: one record per failed subagent: {recs:#?}\ntrace: {}",
            p.trace()
        );
        ensure!(
            breaker_failures(&p, "general-purpose") == (n + 1) as u64
                && breaker_failures(&p, "api") == (n + 1) as u64,
            "{prompt}: charged on both breakers: {:#} {:#}",
            p.breaker("general-purpose", None),
            p.breaker("api", None)
        );
        let left = starts_left(&p);
        ensure!(
            left.is_empty(),
            "{prompt}: its start was left open: {left:?}"
        );
        let told = api
            .messages()
            .iter()
            .any(|r| r.is(prompt.split(':').next().unwrap_or("?")) && r.says("did no work"));
        ensure!(
            told,
            "{prompt}: the model was not told the subagent did no work:\n{:#?}",
            api.messages()
                .iter()
                .filter(|r| r.is("E2E-APIFAIL"))
                .map(|r| r.raw.chars().rev().take(400).collect::<String>())
                .collect::<Vec<_>>()
        );
    }
    let kinds: Vec<String> = p
        .records()
        .iter()
        .map(|r| r["kind"].as_str().unwrap_or("?").to_string())
        .collect();
    ensure!(
        kinds == ["overloaded", "rate_limited"],
        "the API's own words decide the kinds: {kinds:?}"
    );
    let b = p.breaker("general-purpose", None);
    ensure!(
        b["state"] == "open",
        "two failures open the type's breaker: {b:#}"
    );
    let before = api.messages().iter().filter(|r| r.is("SUBTASK")).count();
    let run = p.claude(&api, "E2E-APIFAIL-again: read d", &retries);
    ensure!(!run.timed_out, "the third run did not finish");
    let after = api.messages().iter().filter(|r| r.is("SUBTASK")).count();
    ensure!(
        after == before,
        "the third launch was let through ({} subagent requests)",
        after - before
    );
    ensure!(
        api.messages()
            .iter()
            .any(|r| r.is("E2E-APIFAIL-again") && r.says("PreToolUse:Agent hook error")),
        "the deny did not reach the model"
    );
    Ok(())
}

/// A foreground subagent the API fails (429): the client fires the subagent's StopFailure and
/// the parent's PostToolUseFailure; triage writes one record and charges each breaker once.
pub fn a_foreground_subagent_the_api_fails_is_one_record_and_one_charge() -> Outcome {
    let p = Project::new("api-fails-fg");
    let api = api();
    let run = p.claude(
        &api,
        "E2E-APIFAIL-fg429: read c",
        &[("CLAUDE_CODE_MAX_RETRIES", "1")],
    );
    ensure!(!run.timed_out, "the client did not finish");
    let recs = p.records();
    ensure!(
        recs.len() == 1,
        "one failure, one record: {recs:#?}\ntrace: {}",
        p.trace()
    );
    ensure!(
        breaker_failures(&p, "general-purpose") == 1 && breaker_failures(&p, "api") == 1,
        "one charge on each breaker: {:#} {:#}",
        p.breaker("general-purpose", None),
        p.breaker("api", None)
    );
    ensure!(
        starts_left(&p).is_empty(),
        "calls left open: {:?}",
        starts_left(&p)
    );
    Ok(())
}
