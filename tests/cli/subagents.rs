//! `triage hook` with subagents as Claude Code 2.1.330 really runs them (issue 15): in the
//! background (PostToolUse(Agent) answers `async_launched` at once and SubagentStop is the
//! only place the end is seen) and in the foreground (SubagentStop, then PostToolUse with the
//! output). The payloads have the shapes the real client sends (see
//! `shared/reference/claude-code-e2e.md`); `tests/e2e` runs the client itself.

use crate::common::{json_out, skip_unless_tool, Sandbox};
use serde_json::{json, Value};

const T0: &str = "2026-11-23T10:00:00Z";
/// Past the default 60 s cooldown.
const T1: &str = "2026-11-23T10:01:05Z";
const SID: &str = "sess-sub";

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

fn breaker(s: &Sandbox, now: &str, key: &str) -> Value {
    let out = s
        .triage(["breaker", "status", key])
        .env("TRIAGE_NOW", now)
        .run();
    json_out(&out)["breakers"][0].clone()
}

fn pre(agent: &str, id: &str, background: bool) -> Value {
    json!({"session_id": SID, "hook_event_name": "PreToolUse", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": agent,
            "run_in_background": background},
        "tool_use_id": id})
}

fn launched(agent: &str, id: &str, agent_id: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "PostToolUse", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": agent},
        "tool_response": {"isAsync": true, "status": "async_launched", "agentId": agent_id,
            "description": "d", "prompt": "p"},
        "tool_use_id": id, "duration_ms": 15})
}

fn completed(agent: &str, id: &str, agent_id: &str, text: &str) -> Value {
    let content = if text.is_empty() {
        json!([])
    } else {
        json!([{"type": "text", "text": text}])
    };
    json!({"session_id": SID, "hook_event_name": "PostToolUse", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": agent},
        "tool_response": {"status": "completed", "agentId": agent_id, "content": content},
        "tool_use_id": id, "duration_ms": 900})
}

/// SubagentStop; an empty final text comes without `last_assistant_message` (and with a
/// transcript that has no assistant text).
fn stopped(s: &Sandbox, agent: &str, agent_id: &str, text: &str, again: bool) -> Value {
    let mut v = json!({"session_id": SID, "hook_event_name": "SubagentStop",
        "stop_hook_active": again, "agent_id": agent_id, "agent_type": agent,
        "background_tasks": [], "session_crons": []});
    if text.is_empty() {
        let t = s.write(
            &format!("transcripts/{agent_id}.jsonl"),
            "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"go\"}}\n",
        );
        v["agent_transcript_path"] = json!(t);
    } else {
        v["last_assistant_message"] = json!(text);
    }
    v
}

/// A hook answer that says nothing but what was pending for the model (a background
/// subagent's earlier rejection).
fn pending_only(v: Option<Value>) {
    let Some(v) = v else {
        return;
    };
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default();
    assert!(ctx.contains("you ran in the background"), "{v}");
    assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{v}");
}

fn validation_failed(s: &Sandbox) -> usize {
    records(s)
        .iter()
        .filter(|r| r["kind"] == "validation_failed")
        .count()
}

#[test]
fn background_subagents_are_recorded_on_their_breaker_at_subagent_stop_and_a_probe_closes_it() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.worker.output]\nmax_rejections = 0\n",
    );
    for n in 1..=2 {
        let (id, aid) = (format!("toolu_{n}"), format!("agent{n}"));
        assert_eq!(hook(&s, T0, &pre("worker", &id, true)), None);
        // The launch judges nothing; it carries only the model's word of an earlier
        // background rejection (pending words).
        pending_only(hook(&s, T0, &launched("worker", &id, &aid)));
        // The breaker has heard of no call yet.
        assert_eq!(breaker(&s, T0, "worker")["totals"]["failures"], n - 1);
        hook(&s, T0, &stopped(&s, "worker", &aid, "", false));
    }
    let b = breaker(&s, T0, "worker");
    assert_eq!(b["state"], "open", "{b}");
    assert_eq!(b["totals"]["failures"], 2);
    assert_eq!(validation_failed(&s), 2, "one record per failed subagent");

    // While open, the next call is denied.
    let v = hook(&s, T0, &pre("worker", "toolu_3", true)).expect("a deny");
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");

    // After the cooldown a probe is let through; a background subagent takes it, and its
    // success (seen only at SubagentStop) hands the ticket back and closes the breaker.
    assert_eq!(hook(&s, T1, &pre("worker", "toolu_4", true)), None);
    let b = breaker(&s, T1, "worker");
    assert_eq!(b["state"], "half_open");
    assert_eq!(b["probes_in_flight"], 1);
    pending_only(hook(&s, T1, &launched("worker", "toolu_4", "agent4")));
    assert_eq!(
        breaker(&s, T1, "worker")["probes_in_flight"],
        1,
        "still running"
    );
    hook(
        &s,
        T1,
        &stopped(&s, "worker", "agent4", "All done: 3 files.", false),
    );
    let b = breaker(&s, T1, "worker");
    assert_eq!(b["state"], "closed", "{b}");
    assert_eq!(b["probes_in_flight"], 0);
    // No start or end is left behind.
    let left: Vec<_> = std::fs::read_dir(s.root().join("sessions").join(SID))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// An end left under a subagent's name that is not one SubagentStop wrote (unparsable, or a
/// planted link) is taken as no end: the launch removes it, parks its start, and SubagentStop
/// then completes the call once. The link's target is never touched.
#[test]
fn a_broken_or_planted_end_is_removed_and_the_launch_still_parks_its_start() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.worker.output]\nmax_rejections = 0\n",
    );
    // The first call makes the root and the session's folder as triage makes them.
    assert_eq!(hook(&s, T0, &pre("worker", "toolu_0", true)), None);
    let dir = s.root().join("sessions").join(SID);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("agent-a1.done"), "{not json").unwrap();
    let outside = s.write("outside.json", "{\"keep\": true}");
    std::os::unix::fs::symlink(&outside, dir.join("agent-a2.done")).unwrap();

    for (n, aid) in [(1, "a1"), (2, "a2")] {
        let id = format!("toolu_{n}");
        assert_eq!(hook(&s, T0, &pre("worker", &id, true)), None);
        pending_only(hook(&s, T0, &launched("worker", &id, aid)));
        let done = dir.join(format!("agent-{aid}.done"));
        assert!(done.symlink_metadata().is_err(), "{done:?} left in place");
        assert!(
            dir.join(format!("agent-{aid}.start")).exists(),
            "no start parked"
        );
        hook(&s, T0, &stopped(&s, "worker", aid, "", false));
    }
    assert_eq!(breaker(&s, T0, "worker")["totals"]["failures"], 2);
    assert_eq!(validation_failed(&s), 2, "one record per failed subagent");
    assert_eq!(s.read("outside.json"), "{\"keep\": true}");
}

#[test]
fn a_background_subagent_that_stops_before_its_launch_is_answered_is_completed_once() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.worker.output]\nmax_rejections = 0\n",
    );
    hook(&s, T0, &pre("worker", "toolu_1", true));
    hook(&s, T0, &stopped(&s, "worker", "agent1", "", false));
    assert_eq!(breaker(&s, T0, "worker")["totals"]["failures"], 0);
    hook(&s, T0, &launched("worker", "toolu_1", "agent1"));
    let b = breaker(&s, T0, "worker");
    assert_eq!(b["totals"]["failures"], 1, "{b}");
    assert_eq!(validation_failed(&s), 1);
}

#[test]
fn an_empty_foreground_subagent_is_blocked_up_to_max_rejections_then_one_record() {
    let s = Sandbox::new();
    hook(&s, T0, &pre("general-purpose", "toolu_1", false));
    // Blocked max_rejections (3) times, then let go at the 4th stop.
    for n in 1..=3 {
        let v =
            hook(&s, T0, &stopped(&s, "general-purpose", "agent1", "", n > 1)).expect("a block");
        assert_eq!(v["decision"], "block", "{v}");
        assert!(v["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("rejection {n} of 3")));
    }
    let v = hook(&s, T0, &stopped(&s, "general-purpose", "agent1", "", true)).expect("let go");
    assert_eq!(v.get("decision"), None, "{v}");
    assert_eq!(validation_failed(&s), 1);
    // The parent hears the output is unusable, but the failure is not recorded again.
    let v = hook(
        &s,
        T0,
        &completed("general-purpose", "toolu_1", "agent1", ""),
    )
    .expect("told");
    assert!(v.to_string().contains("output is unusable"), "{v}");
    assert_eq!(validation_failed(&s), 1, "{:#?}", records(&s));
    let b = breaker(&s, T0, "general-purpose");
    assert_eq!(b["totals"]["failures"], 1, "{b}");
    assert_eq!(b["totals"]["successes"], 0);
}

#[test]
fn a_good_foreground_subagent_is_one_breaker_success_and_nothing_said() {
    let s = Sandbox::new();
    hook(&s, T0, &pre("general-purpose", "toolu_1", false));
    assert_eq!(
        hook(
            &s,
            T0,
            &stopped(&s, "general-purpose", "agent1", "Found 3 matches.", false)
        ),
        None
    );
    assert_eq!(
        hook(
            &s,
            T0,
            &completed("general-purpose", "toolu_1", "agent1", "Found 3 matches.")
        ),
        None
    );
    let b = breaker(&s, T0, "general-purpose");
    assert_eq!(b["totals"]["successes"], 1, "{b}");
    assert!(records(&s).is_empty());
}

fn bash_failure(n: usize) -> Value {
    json!({"session_id": SID, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
        "tool_input": {"command": format!("grep -q needle file{n}.txt"), "description": "look"},
        "tool_use_id": format!("toolu_b{n}"), "error": "Exit code 1", "is_interrupt": false,
        "duration_ms": 40})
}

/// A Bash failure that is trouble, not the agent's own work: the network.
fn bash_trouble(n: usize) -> Value {
    json!({"session_id": SID, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
        "tool_input": {"command": format!("curl -sf https://example.com/{n}"), "description": "fetch"},
        "tool_use_id": format!("toolu_b{n}"), "is_interrupt": false, "duration_ms": 40,
        "error": "Exit code 6\ncurl: (6) Could not resolve host: example.com"})
}

fn main_stop(text: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "Stop", "stop_hook_active": false,
        "last_assistant_message": text, "background_tasks": [], "session_crons": []})
}

#[test]
fn a_fresh_init_project_blocks_denies_and_warns_about_nothing_ordinary() {
    let s = Sandbox::new();
    s.cmd(&["init"])
        .env("HOME", s.path().join("home"))
        .assert()
        .success();
    let mut said = Vec::new();
    // Ordinary Bash failures: `grep` finding nothing, six times.
    for n in 1..=6 {
        said.push(hook(&s, T0, &bash_failure(n)));
    }
    // Ordinary subagents, one in the foreground and one in the background, with plain answers
    // (no YAML index, no L2 files: seed 004's layout is not this project's).
    let answer = "Reviewed the change: two naming nits, otherwise fine.";
    said.push(hook(&s, T0, &pre("code-reviewer", "toolu_r1", false)));
    said.push(hook(
        &s,
        T0,
        &stopped(&s, "code-reviewer", "ar1", answer, false),
    ));
    said.push(hook(
        &s,
        T0,
        &completed("code-reviewer", "toolu_r1", "ar1", answer),
    ));
    said.push(hook(&s, T0, &pre("implementer", "toolu_r2", true)));
    said.push(hook(&s, T0, &launched("implementer", "toolu_r2", "ar2")));
    said.push(hook(
        &s,
        T0,
        &stopped(&s, "implementer", "ar2", "Done.", false),
    ));
    said.push(hook(&s, T0, &main_stop("All done: the tests pass.")));
    for v in said.iter().flatten() {
        let text = v.to_string();
        assert_eq!(v.get("decision"), None, "{text}");
        assert!(!text.contains("\"deny\""), "{text}");
        assert!(!text.contains("STABILITY WARNING"), "{text}");
        assert_eq!(v.get("systemMessage"), None, "{text}");
    }
    // A search that found nothing is the agent's own work: nothing said, nothing recorded.
    assert!(said[..6].iter().all(Option::is_none), "{said:?}");
    let log = records(&s);
    assert_eq!(log.len(), 0, "{log:#?}");
    assert_eq!(breaker(&s, T0, "code-reviewer")["totals"]["successes"], 1);
    assert_eq!(breaker(&s, T0, "implementer")["totals"]["successes"], 1);

    // A main answer that says BLOCKED is not sent back: the user is told, and it is recorded.
    let v = hook(
        &s,
        T0,
        &main_stop("BLOCKED on missing credentials: I need the staging API key."),
    )
    .expect("the user is told");
    assert_eq!(v.get("decision"), None, "{v}");
    let msg = v["systemMessage"].as_str().unwrap_or_default();
    assert!(
        msg.contains("blocked") && msg.contains("missing credentials"),
        "{msg}"
    );
    let log = records(&s);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["action"], "escalate");
    assert_eq!(log[0]["tier"], 2);

    // The next session hears of the BLOCKED answer, not of the ordinary Bash failures.
    let v = hook(
        &s,
        T0,
        &json!({"session_id": "next", "hook_event_name": "SessionStart", "source": "startup"}),
    )
    .expect("a summary");
    let c = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(c.contains("1 (main validation_failed)"), "{c}");
    assert!(!c.contains("Bash"), "{c}");
}

#[test]
fn a_policy_switch_counts_unguarded_tool_failures_toward_the_stability_warning() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[thresholds]\ncount_unguarded_tools = true\n",
    );
    s.cmd(&["config", "check", ".triage.toml"])
        .assert()
        .success();
    for n in 1..=4 {
        let v = hook(&s, T0, &bash_trouble(n)).unwrap();
        assert_eq!(v.get("systemMessage"), None);
    }
    let v = hook(&s, T0, &bash_trouble(5)).unwrap();
    let msg = v["systemMessage"].as_str().unwrap_or_default();
    assert!(msg.contains("[WORKFLOW STABILITY WARNING]"), "{v}");
    assert!(msg.contains("encountered 5 failures"), "{msg}");
}

#[test]
fn model_facing_texts_carry_no_prompt_and_session_start_tells_the_truth_about_half_open() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.worker.output]\nmax_rejections = 0\n",
    );
    for n in 1..=2 {
        let (id, aid) = (format!("toolu_{n}"), format!("agent{n}"));
        hook(&s, T0, &pre("worker", &id, true));
        hook(&s, T0, &launched("worker", &id, &aid));
        hook(&s, T0, &stopped(&s, "worker", &aid, "", false));
    }
    // The deny (Template 4) states the facts and one directive, and asks nothing.
    let v = hook(&s, T0, &pre("worker", "toolu_3", true)).unwrap();
    let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("Do not call worker for 1 min"), "{reason}");
    assert!(!reason.contains("(C) Abort workflow"), "{reason}");
    assert!(!reason.contains("Enter choice"), "{reason}");
    // Template 5 in systemMessage: no prompt either.
    s.write(
        ".triage.toml",
        "[thresholds]\nsession_failures = 1\n[agents.worker.output]\nmax_rejections = 0\n",
    );
    let v = hook(
        &s,
        T0,
        &json!({"session_id": SID, "hook_event_name": "PostToolUseFailure", "tool_name": "Agent",
            "tool_input": {"subagent_type": "other"}, "tool_use_id": "toolu_9",
            "error": "API Error: 500 boom"}),
    )
    .unwrap();
    let msg = v["systemMessage"].as_str().unwrap();
    assert!(msg.contains("[WORKFLOW STABILITY WARNING]"), "{msg}");
    assert!(!msg.contains("Enter choice"), "{msg}");
    // report --template --text to a pipe (no terminal): no prompt line.
    let out = s
        .triage([
            "report",
            "--template",
            "breaker-open",
            "--agent",
            "worker",
            "--text",
        ])
        .env("TRIAGE_NOW", T0)
        .run();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(A) "), "{text}");
    assert!(!text.contains("Enter choice"), "{text}");

    // SessionStart while open, then once half-open: what a call gets now.
    let start = json!({"session_id": "s2", "hook_event_name": "SessionStart", "source": "startup"});
    let c = hook(&s, T0, &start).unwrap()["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        c.contains(
            "worker (open): calls are refused for 1 min more, then one probe call is let through"
        ),
        "{c}"
    );
    let c = hook(&s, T1, &start).unwrap()["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        c.contains("worker (half_open): the next call is let through as a probe"),
        "{c}"
    );
    assert!(!c.contains("refused until they recover"), "{c}");
}

fn stop_failure(error: &str, message: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "StopFailure", "error": error,
        "last_assistant_message": message})
}

#[test]
fn stop_failure_is_recorded_with_what_classify_needs_and_never_waits_past_its_deadline() {
    let s = Sandbox::new();
    let overloaded = stop_failure(
        "server_error",
        "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
    );
    assert_eq!(hook(&s, T0, &overloaded), None, "its output is ignored");
    let log = records(&s);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["session_id"], SID);
    assert_eq!(log[0]["context"]["event"], "StopFailure");

    // Another holder keeps the log's lock: Claude Code kills the hook ~60 ms after it starts,
    // so it gives up on the lock after STOP_FAILURE_LOCK_WAIT (not TRIAGE_LOCK_TIMEOUT) and
    // spools the record.
    if !skip_unless_tool("flock", "TRIAGE_REQUIRE_FLOCK") {
        return;
    }
    let lock = s.root().join("logs/errors.jsonl.lock");
    let mut holder = std::process::Command::new("flock")
        // -F: flock execs the command, so killing it lets the lock go.
        .args([
            "-F",
            lock.to_str().unwrap(),
            "-c",
            "echo held; exec sleep 30",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "held");
    let began = std::time::Instant::now();
    let out = s
        .triage(["hook"])
        .env("TRIAGE_NOW", T0)
        .env("TRIAGE_LOCK_TIMEOUT", "20s")
        .stdin(stop_failure("unknown", "API Error: 400 bad request").to_string())
        .run();
    let waited = began.elapsed();
    holder.kill().ok();
    holder.wait().ok();
    let out = out.status(0);
    assert!(out.stdout.is_empty());
    // Far from the 20 s the environment allows (generous for a loaded machine).
    assert!(waited < std::time::Duration::from_secs(10), "{waited:?}");
    // Not lost: spooled for the next writer, which adds it to the log.
    let trace = s.read(".triage/logs/triage.log");
    assert!(trace.contains("errors.pending"), "{trace}");
    assert_eq!(records(&s).len(), 1);
    hook(
        &s,
        T0,
        &stop_failure("rate_limit", "API Error: 429 rate limited"),
    );
    let log = records(&s);
    assert_eq!(log.len(), 3, "{log:#?}");
    assert!(log
        .iter()
        .any(|r| r["context"]["stop_failure"] == "unknown"));
}

#[test]
fn a_silent_foreground_subagent_ending_as_a_tool_failure_is_recorded_once() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.general-purpose.output]\nmax_rejections = 1\n",
    );
    hook(&s, T0, &pre("general-purpose", "toolu_1", false));
    let v = hook(&s, T0, &stopped(&s, "general-purpose", "agent1", "", false)).unwrap();
    assert_eq!(v["decision"], "block");
    hook(&s, T0, &stopped(&s, "general-purpose", "agent1", "", true));
    assert_eq!(validation_failed(&s), 1);
    // Claude Code 2.1.330 then ends the Agent call as a tool failure, without the agentId.
    let v = hook(
        &s,
        T0,
        &json!({"session_id": SID, "hook_event_name": "PostToolUseFailure", "tool_name": "Agent",
            "tool_input": {"description": "d", "prompt": "p", "subagent_type": "general-purpose",
                "run_in_background": false},
            "tool_use_id": "toolu_1", "error": "No assistant messages found",
            "is_interrupt": false, "duration_ms": 179}),
    )
    .unwrap();
    let c = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        c.contains("output is unusable") && c.contains("empty"),
        "{c}"
    );
    assert_eq!(records(&s).len(), 1, "{:#?}", records(&s));
    let b = breaker(&s, T0, "general-purpose");
    assert_eq!(b["totals"]["failures"], 1, "{b}");
}

#[test]
fn many_subagents_at_once_whose_transcripts_lag_are_judged_by_the_missing_message() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.general-purpose.output]\nmax_rejections = 0\n[breaker.general-purpose]\nfailure_threshold = 0\n[thresholds]\nsession_failures = 2\n",
    );
    let mut warned = 0;
    for n in 1..=3 {
        let (id, aid) = (format!("toolu_{n}"), format!("agent{n}"));
        hook(&s, T0, &pre("general-purpose", &id, true));
        hook(&s, T0, &launched("general-purpose", &id, &aid));
        // No last_assistant_message (the final text was empty), and no transcript yet.
        let v = json!({"session_id": SID, "hook_event_name": "SubagentStop",
            "stop_hook_active": false, "agent_id": aid, "agent_type": "general-purpose",
            "agent_transcript_path": s.path().join("not-written-yet.jsonl"),
            "background_tasks": [], "session_crons": []});
        if let Some(v) = hook(&s, T0, &v) {
            warned += v.to_string().matches("WORKFLOW STABILITY WARNING").count();
        }
    }
    assert_eq!(validation_failed(&s), 3);
    assert_eq!(breaker(&s, T0, "general-purpose")["totals"]["failures"], 3);
    // The second failure crossed session_failures = 2: announced once, where it was recorded.
    assert_eq!(warned, 1);
    // An older client (no background_tasks) with no transcript: not judged, never blocked.
    let v = json!({"session_id": SID, "hook_event_name": "SubagentStop", "agent_id": "old",
        "agent_type": "general-purpose",
        "agent_transcript_path": s.path().join("not-written-yet.jsonl")});
    assert_eq!(hook(&s, T0, &v), None);
    assert_eq!(validation_failed(&s), 3);
}

#[test]
fn session_start_counts_an_agent_let_go_as_unresolved() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.worker.output]\nmax_rejections = 0\n",
    );
    hook(&s, T0, &pre("worker", "toolu_1", true));
    hook(&s, T0, &launched("worker", "toolu_1", "agent1"));
    hook(&s, T0, &stopped(&s, "worker", "agent1", "", false));
    assert_eq!(
        records(&s)[0]["resolution"]["action_taken"],
        "proceed_without"
    );
    let v = hook(
        &s,
        T0,
        &json!({"session_id": "next", "hook_event_name": "SessionStart", "source": "startup"}),
    )
    .unwrap();
    let c = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(c.contains("1 (worker validation_failed)"), "{c}");
}

#[test]
fn the_stop_failure_command_finishes_its_record_through_the_clients_sigterm() {
    use std::io::Write;
    let s = Sandbox::new();
    s.cmd(&["init"])
        .env("HOME", s.path().join("home"))
        .assert()
        .success();
    let settings: Value = serde_json::from_str(&s.read(".claude/settings.json")).unwrap();
    let cmd = settings["hooks"]["StopFailure"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let bin_dir = crate::common::bin().parent().unwrap().to_path_buf();
    let mut child = std::process::Command::new("sh")
        .args(["-c", &cmd])
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .env("TRIAGE_NOW", T0)
        .env("CLAUDE_PROJECT_DIR", s.path())
        .env_remove("TRIAGE_DIR")
        .current_dir(s.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While it waits for the payload, the client exits and sends it SIGTERM: once the command
    // has set itself to ignore it (its `trap`, which `exec` keeps), as /proc shows.
    let ignores_term = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|st| {
                let mask = st.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
                u64::from_str_radix(mask.trim(), 16).ok()
            })
            .is_some_and(|m| m & (1 << (15 - 1)) != 0)
    };
    let t0 = std::time::Instant::now();
    while !ignores_term(child.id()) {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "the command never set SIGTERM aside"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut stdin = child.stdin.take().unwrap();
    // The write may fail if the signal was not ignored (the reader is gone): that is the bug.
    let _ = stdin.write_all(
        stop_failure("server_error", "API Error: 529 Overloaded")
            .to_string()
            .as_bytes(),
    );
    drop(stdin);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(records(&s).len(), 1);
}
