//! A background subagent launch keeps its permit of `[permits.agents]` while the subagent
//! runs: its PostToolUse (`async_launched`, with the subagent's `agentId`) comes at once and
//! does not free it; the subagent's own hook events (with its `agent_id`) renew the lease;
//! the SubagentStop that lets it stop gives it back. Payload shapes as in
//! `shared/reference/claude-code-hooks.md` and `claude-code-e2e.md` (see `subagents.rs`).

use crate::common::Sandbox;
use serde_json::{json, Value};

const SID: &str = "sess-bg";
/// Unix seconds: 2026-01-02T03:04:05Z.
const T0: i64 = 1_767_323_045;

fn pre(id: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "PreToolUse", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": "researcher",
            "run_in_background": true},
        "tool_use_id": id})
}

fn launched(id: &str, agent_id: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "PostToolUse", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": "researcher",
            "run_in_background": true},
        "tool_response": {"isAsync": true, "status": "async_launched", "agentId": agent_id,
            "description": "d", "prompt": "p"},
        "tool_use_id": id, "duration_ms": 15})
}

/// A tool call inside the subagent: its hook events carry its `agent_id`.
fn inside(agent_id: &str, n: u32) -> Value {
    json!({"session_id": SID, "hook_event_name": "PreToolUse", "tool_name": "Read",
        "agent_id": agent_id, "agent_type": "researcher",
        "tool_input": {"file_path": "/tmp/x"}, "tool_use_id": format!("inner{n}")})
}

fn stopped(agent_id: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "SubagentStop", "stop_hook_active": false,
        "agent_id": agent_id, "agent_type": "researcher",
        "last_assistant_message": "Found three sources; summary follows. All claims are cited.",
        "background_tasks": [], "session_crons": []})
}

fn hook(s: &Sandbox, at: i64, payload: &Value) -> String {
    s.triage(["hook"])
        .env("TRIAGE_NOW", at.to_string())
        .stdin(payload.to_string())
        .run()
        .status(0)
        .stdout()
}

fn held(s: &Sandbox, at: i64) -> Value {
    s.triage(["permit", "status", "agents"])
        .env("TRIAGE_NOW", at.to_string())
        .run()
        .status(0)
        .stdout_json()["permits"][0]
        .clone()
}

#[test]
fn a_background_subagent_keeps_its_permit_until_its_subagent_stop() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.agents]\nmax = 1\nlease = \"10m\"\n",
    );
    assert_eq!(hook(&s, T0, &pre("toolu_bg")), "");
    // Launched in the background: PostToolUse at once, the subagent still runs.
    hook(&s, T0 + 1, &launched("toolu_bg", "a1b2c3"));
    assert_eq!(held(&s, T0 + 1)["held"], 1);
    let denied = hook(&s, T0 + 2, &pre("toolu_next"));
    assert!(
        denied.contains("\"deny\""),
        "a second launch went: {denied:?}"
    );
    // The subagent stops: its permit is back, and the next launch goes.
    hook(&s, T0 + 60, &stopped("a1b2c3"));
    assert_eq!(held(&s, T0 + 60)["held"], 0);
    assert_eq!(hook(&s, T0 + 61, &pre("toolu_next")), "");
}

#[test]
fn a_long_running_background_subagent_renews_its_lease_with_its_own_hook_events() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.agents]\nmax = 1\nlease = \"10m\"\n",
    );
    hook(&s, T0, &pre("toolu_bg"));
    hook(&s, T0, &launched("toolu_bg", "agent-long"));
    let first = held(&s, T0)["leases"][0]["expires_in_s"].as_f64().unwrap();
    assert_eq!(first, 600.0);
    // Within the first half of the lease: nothing to renew.
    hook(&s, T0 + 200, &inside("agent-long", 1));
    assert_eq!(
        held(&s, T0 + 200)["leases"][0]["expires_in_s"].as_f64(),
        Some(400.0)
    );
    // Past half: renewed to a full lease from then, again and again, for 24 minutes.
    for (n, at) in [(2, 400), (3, 800), (4, 1200), (5, 1450)] {
        hook(&s, T0 + at, &inside("agent-long", n));
        let l = held(&s, T0 + at);
        assert_eq!(l["held"], 1, "at +{at}s: {l}");
    }
    assert_eq!(
        held(&s, T0 + 1450)["leases"][0]["expires_in_s"].as_f64(),
        Some(350.0),
        "renewed at +1200s to +1800s, not at +1450s"
    );
    // Still held past the first lease's end (+600s) and still denying a second launch.
    assert!(hook(&s, T0 + 1500, &pre("toolu_next")).contains("\"deny\""));
    hook(&s, T0 + 1550, &stopped("agent-long"));
    assert_eq!(held(&s, T0 + 1550)["held"], 0);
}

#[test]
fn a_background_subagent_that_never_stops_frees_its_permit_when_the_lease_runs_out() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.agents]\nmax = 1\nlease = \"10m\"\n",
    );
    hook(&s, T0, &pre("toolu_bg"));
    hook(&s, T0, &launched("toolu_bg", "killed"));
    // Killed: no more events, no SubagentStop (anthropics/claude-code#92716).
    assert_eq!(held(&s, T0 + 599)["held"], 1);
    // Free once it ran out by the margin the files allow for clocks (2 s).
    assert_eq!(hook(&s, T0 + 603, &pre("toolu_next")), "");
    // A stray SubagentStop of another agent, or a late one of this, frees nothing it should not.
    hook(&s, T0 + 604, &stopped("someone-else"));
    hook(&s, T0 + 605, &stopped("killed"));
    assert_eq!(held(&s, T0 + 605)["held"], 1);
}

#[test]
fn a_kept_lease_planted_far_ahead_is_renewed_not_trusted() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.agents]\nmax = 1\nlease = \"10m\"\n",
    );
    hook(&s, T0, &pre("toolu_bg"));
    hook(&s, T0, &launched("toolu_bg", "agent-p"));
    // The file that keeps the lease for the subagent says it runs for ever: were it trusted,
    // the subagent's events would never renew it, and its slot would free while it works.
    let kept = format!(".triage/sessions/{SID}/permit-agent-p.json");
    assert!(s.exists(&kept), "nothing kept at {kept}");
    s.write(
        &kept,
        r#"{"lease": "toolu_bg", "expires_ms": 9223372036854775807}"#,
    );
    hook(&s, T0 + 400, &inside("agent-p", 1));
    assert_eq!(
        held(&s, T0 + 400)["leases"][0]["expires_in_s"].as_f64(),
        Some(600.0),
        "renewed at +400s to a full lease"
    );
}

#[test]
fn a_subagent_that_stops_before_its_background_launch_is_reported_gives_its_permit_back() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.agents]\nmax = 1\nlease = \"10m\"\n",
    );
    assert_eq!(hook(&s, T0, &pre("toolu_bg")), "");
    // Its SubagentStop hook runs before its launch's PostToolUse hook.
    hook(&s, T0 + 1, &stopped("quick"));
    assert_eq!(held(&s, T0 + 1)["held"], 1, "still held: nothing kept yet");
    hook(&s, T0 + 2, &launched("toolu_bg", "quick"));
    assert_eq!(
        held(&s, T0 + 2)["held"],
        0,
        "given back, not kept a full lease"
    );
    assert_eq!(hook(&s, T0 + 3, &pre("toolu_next")), "");
    // Nothing is left behind for that subagent.
    let dir = s.root().join("sessions").join(SID);
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(
        !left.iter().any(|n| n.to_string_lossy().contains("quick")),
        "{left:?}"
    );
}

#[test]
fn a_background_subagent_the_api_fails_gives_its_permit_back() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.agents]\nmax = 1\nlease = \"10m\"\n",
    );
    hook(&s, T0, &pre("toolu_bg"));
    hook(&s, T0 + 1, &launched("toolu_bg", "failed"));
    // The API fails it: a StopFailure, no SubagentStop.
    let failure = json!({"session_id": SID, "hook_event_name": "StopFailure",
        "agent_id": "failed", "agent_type": "researcher", "error": "server_error",
        "last_assistant_message": "API Error: 529 Overloaded"});
    hook(&s, T0 + 30, &failure);
    assert_eq!(held(&s, T0 + 30)["held"], 0);
}

/// A launch of `agent` (foreground).
fn pre_of(agent: &str, id: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "PreToolUse", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": agent},
        "tool_use_id": id})
}

/// A foreground call of `agent` that failed with `error` (no PreToolUse before it: no ticket).
fn failed_call(agent: &str, id: &str, error: &str) -> Value {
    json!({"session_id": SID, "hook_event_name": "PostToolUseFailure", "tool_name": "Agent",
        "tool_input": {"description": "d", "prompt": "p", "subagent_type": agent},
        "tool_use_id": id, "error": error})
}

fn breaker_state(s: &Sandbox, at: i64, key: &str) -> Value {
    s.triage(["breaker", "status", key])
        .env("TRIAGE_NOW", at.to_string())
        .run()
        .stdout_json()["breakers"][0]["state"]
        .clone()
}

#[test]
fn a_launch_the_permits_refuse_hands_back_the_half_open_probes_it_took() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.agents]\nmax = 1\nlease = \"10m\"\n",
    );
    // The researcher breaker opens on its own failures, the API's on two overloads.
    for n in 0..2 {
        let id = format!("toolu_r{n}");
        hook(
            &s,
            T0,
            &failed_call("researcher", &id, "Agent crashed: connection reset by peer"),
        );
    }
    for agent in ["writer", "planner"] {
        let overloaded = "Agent terminated early due to an API error: API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
        hook(
            &s,
            T0,
            &failed_call(agent, &format!("toolu_{agent}"), overloaded),
        );
    }
    let t1 = T0 + 3600;
    assert_eq!(breaker_state(&s, t1, "researcher"), "half_open");
    assert_eq!(breaker_state(&s, t1, "api"), "half_open");
    // Another holder takes the one permit.
    let lease = s
        .triage(["permit", "acquire", "agents", "--lease-only"])
        .env("TRIAGE_NOW", t1.to_string())
        .run()
        .status(0)
        .stdout();
    let lease = lease.trim().to_string();
    // The launch that would be both probes finds no permit free.
    let denied = hook(&s, t1, &pre_of("researcher", "toolu_probe1"));
    assert!(denied.contains("subagents this project allows"), "{denied}");
    // The permit frees: the next launch is the probe, not refused as "a probe is testing it".
    s.triage(["permit", "release", "agents", &lease])
        .env("TRIAGE_NOW", (t1 + 1).to_string())
        .run()
        .status(0);
    assert_eq!(hook(&s, t1 + 2, &pre_of("researcher", "toolu_probe2")), "");
}
