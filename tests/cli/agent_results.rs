//! Subagent results and launches in a coding session (issue 29): an answer that is an API
//! error is a failure of its kind, `min_tool_uses` counts the transcript's tool calls, an
//! undefined agent type charges no breaker, one `api` breaker hears 429/529 from every agent
//! type, and what the model could not be told at the time reaches it once, later.

use crate::common::{json_out, Sandbox};
use serde_json::{json, Value};

const T0: &str = "2026-11-25T10:00:00Z";
const SID: &str = "sess-results";
const RATE_LIMITED: &str = "API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Rate limited\"}}";
const OVERLOADED: &str = "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";

fn hook(s: &Sandbox, now: &str, payload: &Value) -> Option<Value> {
    crate::hook::hook(s, now, &payload.to_string())
}

fn records(s: &Sandbox) -> Vec<Value> {
    std::fs::read_to_string(s.root().join("logs/errors.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The breaker's status (Null when it has no state file).
fn breaker(s: &Sandbox, now: &str, key: &str) -> Value {
    let out = s
        .triage(["breaker", "status", key])
        .env("TRIAGE_NOW", now)
        .run();
    json_out(&out)["breakers"][0].clone()
}

fn pre(agent: &str, id: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "PreToolUse", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": agent},
        "tool_use_id": id})
}

fn stopped(agent: &str, agent_id: &str, text: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "SubagentStop", "stop_hook_active": false,
        "agent_id": agent_id, "agent_type": agent, "last_assistant_message": text})
}

fn completed(agent: &str, id: &str, agent_id: &str, text: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "PostToolUse", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": agent},
        "tool_response": {"status": "completed", "agentId": agent_id,
            "content": [{"type": "text", "text": text}]},
        "tool_use_id": id, "duration_ms": 900})
}

/// A foreground subagent call from launch to result, its answer `text`; returns the
/// SubagentStop answer and the PostToolUse answer.
fn foreground(s: &Sandbox, agent: &str, n: u32, text: &str) -> (Option<Value>, Option<Value>) {
    let (id, aid) = (format!("toolu_{agent}_{n}"), format!("agent_{agent}_{n}"));
    assert_eq!(hook(s, T0, &pre(agent, &id)), None, "the launch goes ahead");
    let stop = hook(s, T0, &stopped(agent, &aid, text));
    let post = hook(s, T0, &completed(agent, &id, &aid, text));
    (stop, post)
}

#[test]
fn a_subagent_whose_answer_is_an_api_error_fails_with_its_kind_is_recorded_and_counts_on_its_breaker(
) {
    let s = Sandbox::new();
    // check-output: not ok, kind rate_limited.
    let out = s
        .triage(["check-output"])
        .stdin(json!({"agent": "researcher", "output": RATE_LIMITED}).to_string())
        .run()
        .status(0);
    let v = json_out(&out);
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["error"]["kind"], "rate_limited", "{v}");
    // A report that quotes an API error while describing finished work passes.
    let fine = "Fixed the client: it now retries when the server answers API Error: 429, and the tests pass.";
    let out = s
        .triage(["check-output"])
        .stdin(json!({"agent": "researcher", "output": fine}).to_string())
        .run()
        .status(0);
    assert_eq!(json_out(&out)["ok"], true);

    // The hook: SubagentStop does not block it back (a rerun at once cannot help), the user
    // is told, the failure is recorded once with its kind, and the breaker counts it.
    let (stop, post) = foreground(&s, "researcher", 1, RATE_LIMITED);
    let stop = stop.expect("SubagentStop tells the user");
    assert_eq!(stop.get("decision"), None, "{stop}");
    assert!(
        stop["systemMessage"]
            .as_str()
            .unwrap()
            .contains("rate_limited"),
        "{stop}"
    );
    let post = post.expect("the parent is told");
    let reason = post["reason"].as_str().unwrap();
    assert!(reason.contains("API error (rate_limited)"), "{reason}");
    assert!(!reason.contains("options"), "{reason}");
    let recs: Vec<Value> = records(&s)
        .into_iter()
        .filter(|r| r["agent"] == "researcher")
        .collect();
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["kind"], "rate_limited");
    let b = breaker(&s, T0, "researcher");
    assert_eq!(b["totals"]["failures"], 1, "{b}");
    assert_eq!(b["last_error"]["kind"], "rate_limited", "{b}");
}

#[test]
fn min_tool_uses_fails_a_subagent_whose_transcript_has_no_tool_call() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.coder.output]\nmin_tool_uses = 1\nmax_rejections = 1\n",
    );
    let line = |id: &str, content: Value| {
        json!({"type": "assistant", "message": {"role": "assistant", "id": id, "content": content}})
            .to_string()
    };
    let idle = s.write(
        "t/idle.jsonl",
        format!(
            "{}\n{}\n",
            json!({"type": "user", "message": {"role": "user", "content": "fix the bug"}}),
            line(
                "m1",
                json!([{"type": "text", "text": "Done: the bug is fixed and all tests pass."}])
            )
        ),
    );
    let busy = s.write(
        "t/busy.jsonl",
        format!(
            "{}\n{}\n",
            line(
                "m1",
                json!([{"type": "tool_use", "id": "tu1", "name": "Edit", "input": {}}])
            ),
            line(
                "m2",
                json!([{"type": "text", "text": "Done: the bug is fixed and all tests pass."}])
            )
        ),
    );
    let payload = |aid: &str, path: &std::path::Path| {
        let mut v = stopped("coder", aid, "Done: the bug is fixed and all tests pass.");
        v["agent_transcript_path"] = json!(path);
        // The parent's transcript is not the subagent's: its tool calls do not count.
        v["transcript_path"] = json!(busy);
        v
    };
    let v = hook(&s, T0, &payload("a1", &idle)).expect("blocked back");
    assert_eq!(v["decision"], "block", "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.contains("min_tool_uses: 0 tool uses, at least 1 required"),
        "{reason}"
    );
    assert_eq!(hook(&s, T0, &payload("a2", &busy)), None);
    // check-output reads the count from its input.
    let out = s
        .triage(["check-output"])
        .stdin(json!({"agent": "coder", "output": "Done.", "tool_uses": 0}).to_string())
        .run()
        .status(0);
    let v = json_out(&out);
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["error"]["kind"], "validation_failed", "{v}");
}

#[test]
fn an_undefined_agent_type_charges_no_breaker_and_names_the_available_types() {
    let s = Sandbox::new();
    let failure = json!({"session_id": SID, "hook_event_name": "PostToolUseFailure",
        "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": "code-reviewer"},
        "tool_use_id": "toolu_cr",
        "error": "Agent type 'code-reviewer' not found. Available agents: general-purpose, Explore, Plan, statusline-setup",
        "is_interrupt": false});
    for n in 0..3 {
        assert_eq!(
            hook(&s, T0, &pre("code-reviewer", &format!("toolu_cr{n}"))),
            None
        );
        let mut f = failure.clone();
        f["tool_use_id"] = json!(format!("toolu_cr{n}"));
        let v = hook(&s, T0, &f).expect("the model is told");
        let ctx = v["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap();
        assert!(
            ctx.contains("Use one of: general-purpose, Explore, Plan, statusline-setup."),
            "{ctx}"
        );
        assert!(!ctx.contains("command -v"), "{ctx}");
    }
    let b = breaker(&s, T0, "code-reviewer");
    assert!(
        b.is_null() || (b["totals"]["failures"] == 0 && b["state"] == "closed"),
        "{b}"
    );
    // A fourth launch is not denied.
    assert_eq!(hook(&s, T0, &pre("code-reviewer", "toolu_cr9")), None);
    let recs = records(&s);
    assert!(recs.iter().all(|r| r["kind"] == "not_found"), "{recs:?}");
}

#[test]
fn overloads_from_two_agent_types_open_the_api_breaker_and_a_third_types_launch_is_denied_with_the_wait(
) {
    let s = Sandbox::new();
    foreground(&s, "researcher", 1, OVERLOADED);
    foreground(&s, "writer", 1, OVERLOADED);
    // Each type has failed once: its own breaker stays closed; the API's opened.
    for agent in ["researcher", "writer"] {
        let b = breaker(&s, T0, agent);
        assert_eq!(
            (b["state"].as_str(), b["totals"]["failures"].as_u64()),
            (Some("closed"), Some(1)),
            "{b}"
        );
    }
    let api = breaker(&s, T0, "api");
    assert_eq!(api["state"], "open", "{api}");
    let v = hook(&s, T0, &pre("planner", "toolu_planner")).expect("denied");
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("breaker `api` is open"), "{reason}");
    assert!(reason.contains("for 60 s more"), "{reason}");
    assert!(!reason.contains("(A)"), "{reason}");

    // A rate limit that names its reset keeps the API's breaker open until then.
    let s = Sandbox::new();
    let limited = "API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Rate limited\"}} retry-after: 600";
    foreground(&s, "researcher", 1, limited);
    let stop = json!({"session_id": SID, "hook_event_name": "StopFailure",
        "error": "rate_limit", "last_assistant_message": limited});
    hook(&s, T0, &stop);
    let v = hook(&s, T0, &pre("planner", "toolu_p2")).expect("denied");
    let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("for 10 min more"), "{reason}");
}

#[test]
fn the_upstream_key_is_checked_and_can_be_turned_off() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[breaker]\nupstream = 3\n");
    let out = s.triage(["config", "check"]).run();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), out.stderr());
    assert!(text.contains("breaker.upstream must be a string"), "{text}");
    s.write(".triage.toml", "[breaker]\nupstream = \"\"\n");
    foreground(&s, "researcher", 1, OVERLOADED);
    foreground(&s, "writer", 1, OVERLOADED);
    assert_eq!(hook(&s, T0, &pre("planner", "toolu_planner")), None);
}

fn launched(agent: &str, id: &str, agent_id: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "PostToolUse", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": agent},
        "tool_response": {"isAsync": true, "status": "async_launched", "agentId": agent_id},
        "tool_use_id": id, "duration_ms": 15})
}

/// A background subagent whose empty answer is let go at its SubagentStop (max_rejections 0).
fn rejected_in_the_background(s: &Sandbox, n: u32) {
    let (id, aid) = (format!("toolu_bg{n}"), format!("agent_bg{n}"));
    let agent = format!("worker{n}");
    assert_eq!(hook(s, T0, &pre(&agent, &id)), None);
    assert_eq!(hook(s, T0, &launched(&agent, &id, &aid)), None);
    let v = hook(s, T0, &stopped(&agent, &aid, "   ")).expect("the user is told");
    assert!(
        v["systemMessage"]
            .as_str()
            .unwrap()
            .contains("still fails its checks"),
        "{v}"
    );
    assert_eq!(v.get("hookSpecificOutput"), None, "{v}");
}

fn context(v: &Option<Value>) -> Option<String> {
    v.as_ref()?["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn a_background_subagents_rejection_reaches_the_model_once_with_the_next_answer() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.\"worker*\".output]\nmax_rejections = 0\n",
    );
    let prompt = json!({"session_id": SID, "hook_event_name": "UserPromptSubmit",
        "prompt": "next"});
    let bash = json!({"session_id": SID, "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a", "stderr": ""},
        "tool_use_id": "toolu_ls"});
    assert_eq!(hook(&s, T0, &prompt), None, "nothing queued, nothing said");

    rejected_in_the_background(&s, 1);
    let v = hook(&s, T0, &prompt);
    let ctx = context(&v).expect("the model hears of it");
    assert!(
        ctx.contains("worker1 subagent you ran in the background"),
        "{ctx}"
    );
    assert!(ctx.contains("failed its checks"), "{ctx}");
    assert_eq!(
        v.unwrap()["hookSpecificOutput"]["hookEventName"],
        "UserPromptSubmit"
    );
    assert_eq!(hook(&s, T0, &prompt), None, "once");
    assert_eq!(hook(&s, T0, &bash), None, "once");

    // The next PostToolUse of the main agent carries it too (not a subagent's own).
    rejected_in_the_background(&s, 2);
    let mut inside = bash.clone();
    inside["agent_id"] = json!("agent_other");
    assert_eq!(
        hook(&s, T0, &inside),
        None,
        "a subagent's hook is not the model's"
    );
    let ctx = context(&hook(&s, T0, &bash)).expect("the model hears of it");
    assert!(ctx.contains("failed its checks"), "{ctx}");
    assert_eq!(hook(&s, T0, &bash), None, "once");

    // A turn about to end with it unheard is kept going once, with it as the reason.
    rejected_in_the_background(&s, 3);
    let stop = json!({"session_id": SID, "hook_event_name": "Stop", "stop_hook_active": false,
        "last_assistant_message": "All done."});
    let v = hook(&s, T0, &stop).expect("blocked once");
    assert_eq!(v["decision"], "block", "{v}");
    assert!(
        v["reason"].as_str().unwrap().contains("failed its checks"),
        "{v}"
    );
    assert_eq!(hook(&s, T0, &stop), None, "once");
}

#[test]
fn a_subagents_api_failure_counts_once_on_the_api_breaker_though_two_events_report_it() {
    // 2.1.332 reports a subagent ended by a 529 twice: its own StopFailure (with its
    // agent_id), then the parent's PostToolUseFailure of the Agent call. One failure.
    let s = Sandbox::new();
    assert_eq!(hook(&s, T0, &pre("researcher", "toolu_r1")), None);
    let stop = json!({"session_id": SID, "hook_event_name": "StopFailure",
        "agent_id": "agent_r1", "agent_type": "researcher",
        "error": "server_error", "last_assistant_message": OVERLOADED});
    hook(&s, T0, &stop);
    let failed = json!({"session_id": SID, "hook_event_name": "PostToolUseFailure",
        "tool_name": "Agent", "tool_use_id": "toolu_r1",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": "researcher"},
        "error": format!("Agent terminated early due to an API error: {OVERLOADED}")});
    hook(&s, T0, &failed);
    let api = breaker(&s, T0, "api");
    assert_eq!(api["state"], "closed", "one failure opens nothing: {api}");
    assert_eq!(api["totals"]["failures"], 1, "{api}");
    // The main agent's own StopFailure counts.
    let main = json!({"session_id": SID, "hook_event_name": "StopFailure",
        "error": "server_error", "last_assistant_message": OVERLOADED});
    hook(&s, T0, &main);
    assert_eq!(breaker(&s, T0, "api")["state"], "open");
}
