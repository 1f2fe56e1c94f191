//! A subagent the API itself fails: the client gives up on 529 or 429 and sends only the
//! subagent's `StopFailure` (with its `agent_id` and `agent_type`), never a SubagentStop; in
//! the foreground the parent's `PostToolUseFailure` of the Agent call reports the same
//! failure. Payload shapes as measured with 2.1.330 and 2.1.332
//! (`shared/reference/claude-code-e2e.md`).

use crate::common::{json_out, Sandbox};
use crate::hook::records;
use serde_json::{json, Value};

const T0: &str = "2026-11-28T10:00:00Z";
const SID: &str = "sess-api-failed";
const OVERLOADED: &str = "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
const RATE_LIMITED: &str = "API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Rate limited\"}}";

fn hook(s: &Sandbox, payload: &Value) -> Option<Value> {
    crate::hook::hook(s, T0, &payload.to_string())
}

/// A breaker's status (Null when it has no state file).
fn breaker(s: &Sandbox, key: &str) -> Value {
    let out = s
        .triage(["breaker", "status", key])
        .env("TRIAGE_NOW", T0)
        .run();
    json_out(&out)["breakers"][0].clone()
}

fn failures(s: &Sandbox, key: &str) -> u64 {
    breaker(s, key)["totals"]["failures"].as_u64().unwrap_or(0)
}

fn pre(id: &str, background: bool) -> Value {
    json!({"session_id": SID, "hook_event_name": "PreToolUse", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": "researcher",
            "run_in_background": background},
        "tool_use_id": id})
}

fn launched(id: &str, agent_id: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "PostToolUse", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": "researcher",
            "run_in_background": true},
        "tool_response": {"isAsync": true, "status": "async_launched", "agentId": agent_id},
        "tool_use_id": id, "duration_ms": 15})
}

/// The subagent's own StopFailure: the API failed it, and no SubagentStop follows.
fn api_failed(agent_id: &str, error: &str, message: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "StopFailure", "agent_id": agent_id,
        "agent_type": "researcher", "error": error, "last_assistant_message": message})
}

/// The parent's PostToolUseFailure of a foreground Agent call the API failed.
fn call_failed(id: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "PostToolUseFailure", "tool_name": "Agent",
        "tool_use_id": id,
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": "researcher"},
        // As the client writes it (2.1.332): its own appendix after the API's message.
        "error": format!("Agent terminated early due to an API error: {OVERLOADED} (error type server_error, HTTP 529, request id req_1, model sent to the API: claude-opus-5-5)")})
}

fn prompt() -> Value {
    json!({"session_id": SID, "hook_event_name": "UserPromptSubmit", "prompt": "next"})
}

fn bash_done() -> Value {
    json!({"session_id": SID, "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a", "stderr": ""},
        "tool_use_id": "toolu_ls"})
}

fn context(v: &Option<Value>) -> Option<String> {
    v.as_ref()?["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .map(str::to_string)
}

fn session_files(s: &Sandbox) -> Vec<String> {
    std::fs::read_dir(s.root().join("sessions").join(SID))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_background_subagent_the_api_fails_counts_on_both_breakers_and_the_model_hears_of_it_once() {
    let s = Sandbox::new();
    // First launch: in the background, then the API fails the subagent.
    assert_eq!(hook(&s, &pre("toolu_1", true)), None);
    assert_eq!(hook(&s, &launched("toolu_1", "agent_1")), None);
    assert!(session_files(&s).contains(&"agent-agent_1.start".to_string()));
    assert_eq!(
        hook(&s, &api_failed("agent_1", "server_error", OVERLOADED)),
        None
    );
    assert_eq!(
        failures(&s, "researcher"),
        1,
        "{}",
        breaker(&s, "researcher")
    );
    assert_eq!(failures(&s, "api"), 1, "{}", breaker(&s, "api"));
    assert_eq!(records(&s).len(), 1, "one failure, one record");
    assert!(
        !session_files(&s).iter().any(|f| f.ends_with(".start")),
        "its start is closed: {:?}",
        session_files(&s)
    );
    // The model hears of it with the next prompt, once.
    let ctx = context(&hook(&s, &prompt())).expect("the model is told");
    assert!(ctx.contains("researcher subagent did no work"), "{ctx}");
    assert!(ctx.contains("529"), "{ctx}");
    assert!(ctx.contains("Do not rely on its output"), "{ctx}");
    assert_eq!(hook(&s, &prompt()), None, "once");

    // Second launch, a rate limit this time: told with the next tool result.
    assert_eq!(hook(&s, &pre("toolu_2", true)), None);
    assert_eq!(hook(&s, &launched("toolu_2", "agent_2")), None);
    hook(&s, &api_failed("agent_2", "rate_limit", RATE_LIMITED));
    assert_eq!(failures(&s, "researcher"), 2);
    let ctx = context(&hook(&s, &bash_done())).expect("the model is told");
    assert!(ctx.contains("researcher subagent did no work"), "{ctx}");
    assert_eq!(hook(&s, &bash_done()), None, "once");

    // The third launch is refused, as it is in the foreground.
    let v = hook(&s, &pre("toolu_3", true)).expect("denied");
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    assert_eq!(records(&s).len(), 2);
    assert!(
        !session_files(&s).iter().any(|f| f.ends_with(".start")),
        "{:?}",
        session_files(&s)
    );
}

#[test]
fn a_background_subagent_the_api_fails_before_its_launch_is_reported_is_counted_at_the_launch() {
    let s = Sandbox::new();
    assert_eq!(hook(&s, &pre("toolu_1", true)), None);
    // Its StopFailure hook runs before its launch's PostToolUse hook.
    hook(&s, &api_failed("agent_1", "server_error", OVERLOADED));
    assert_eq!(failures(&s, "researcher"), 0, "nothing charged yet");
    let v = hook(&s, &launched("toolu_1", "agent_1"));
    assert_eq!(failures(&s, "researcher"), 1);
    assert_eq!(failures(&s, "api"), 1);
    assert_eq!(records(&s).len(), 1);
    assert!(session_files(&s).is_empty(), "{:?}", session_files(&s));
    // That PostToolUse is the main agent's: it carries the words at once.
    let ctx = context(&v).expect("the model is told");
    assert!(ctx.contains("researcher subagent did no work"), "{ctx}");
    assert_eq!(hook(&s, &prompt()), None, "once");
}

/// A foreground call the API fails, its two reports in `order`; returns the parent's answer.
fn foreground_failure(s: &Sandbox, n: u32, stop_failure_first: bool) -> Option<Value> {
    let (id, aid) = (format!("toolu_f{n}"), format!("agent_f{n}"));
    assert_eq!(hook(s, &pre(&id, false)), None);
    if stop_failure_first {
        hook(s, &api_failed(&aid, "server_error", OVERLOADED));
        hook(s, &call_failed(&id))
    } else {
        let v = hook(s, &call_failed(&id));
        hook(s, &api_failed(&aid, "server_error", OVERLOADED));
        v
    }
}

#[test]
fn a_foreground_subagent_the_api_fails_is_one_record_and_one_charge_whichever_report_comes_first() {
    for stop_failure_first in [true, false] {
        let s = Sandbox::new();
        let v = foreground_failure(&s, 1, stop_failure_first);
        let ctx = context(&v).expect("the parent is told");
        assert!(ctx.contains("triage:"), "{ctx}");
        assert_eq!(
            records(&s).len(),
            1,
            "first={stop_failure_first}: {:#?}",
            records(&s)
        );
        assert_eq!(failures(&s, "researcher"), 1, "first={stop_failure_first}");
        assert_eq!(failures(&s, "api"), 1, "first={stop_failure_first}");
        assert!(session_files(&s).is_empty(), "{:?}", session_files(&s));
        assert_eq!(
            hook(&s, &prompt()),
            None,
            "nothing pending in the foreground"
        );

        // A second one: two records for two failed calls.
        foreground_failure(&s, 2, stop_failure_first);
        assert_eq!(records(&s).len(), 2, "first={stop_failure_first}");
        assert_eq!(failures(&s, "researcher"), 2, "first={stop_failure_first}");
        let report = json_out(&s.triage(["report"]).env("TRIAGE_NOW", T0).run());
        assert_eq!(report["records"], 2, "{report}");
    }
}

#[test]
fn the_next_session_names_a_main_agent_overload_as_the_sessions() {
    let s = Sandbox::new();
    let main = json!({"session_id": "sess-before", "hook_event_name": "StopFailure",
        "error": "server_error", "last_assistant_message": OVERLOADED});
    hook(&s, &main);
    let start = json!({"session_id": SID, "hook_event_name": "SessionStart", "source": "startup"});
    let ctx = context(&hook(&s, &start)).expect("earlier trouble is named");
    assert!(ctx.contains("the session overloaded"), "{ctx}");
    assert!(!ctx.contains("unknown agent"), "{ctx}");
}

#[test]
fn a_subagent_let_go_whose_breaker_then_opens_is_not_advised_a_rerun() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.researcher.output]\nmax_rejections = 0\n",
    );
    let mut last = String::new();
    for n in 1..=2 {
        let (id, aid) = (format!("toolu_e{n}"), format!("agent_e{n}"));
        assert_eq!(hook(&s, &pre(&id, false)), None);
        let stop = json!({"session_id": SID, "hook_event_name": "SubagentStop",
            "stop_hook_active": false, "agent_id": aid, "agent_type": "researcher",
            "last_assistant_message": "   "});
        hook(&s, &stop);
        let failed = json!({"session_id": SID, "hook_event_name": "PostToolUseFailure",
            "tool_name": "Agent", "tool_use_id": id,
            "tool_input": {"description": "d", "prompt": "p", "subagent_type": "researcher"},
            "error": "No assistant messages found"});
        last = context(&hook(&s, &failed)).expect("the parent is told");
        if n == 1 {
            assert!(last.contains("rerun the subagent"), "{last}");
        }
    }
    assert_eq!(breaker(&s, "researcher")["state"], "open");
    assert!(!last.contains("rerun the subagent"), "{last}");
    assert!(last.contains("breaker `researcher` is open"), "{last}");
}

/// The client runs the subagent's StopFailure hook and the parent's PostToolUseFailure hook
/// at nearly the same moment: what the parent is told is the same whichever runs first (the
/// client's own appendix to its error, `(error type …, HTTP 529, request id …)`, left out).
#[test]
fn a_foreground_subagent_the_api_fails_reads_the_same_whichever_report_comes_first() {
    let told = |first: bool| {
        let s = Sandbox::new();
        context(&foreground_failure(&s, 1, first)).expect("the parent is told")
    };
    let (stop_first, call_first) = (told(true), told(false));
    assert_eq!(stop_first, call_first);
    assert!(stop_first.contains("did no work"), "{stop_first}");
    assert!(!stop_first.contains("request id"), "{stop_first}");
}
