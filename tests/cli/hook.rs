//! `triage hook`: a recorded-shape session replayed event by event in separate processes; the
//! answers, the error log, the breaker and the counters after it; timeouts; Template 5 once per
//! crossing; 16 hooks at once; failing open; and the `hooks/` scripts.

use crate::common::{bin, json_out, skip_unless_tool, Run, Sandbox};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const T0: &str = "2026-11-23T10:00:00Z";

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hook")
        .join(format!("{name}.json"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Runs `triage hook` on `payload` at `now`; returns stdout's JSON, or `None` when it printed
/// nothing. Every hook call exits 0.
/// Every record in the error log, in order.
pub fn records(s: &Sandbox) -> Vec<Value> {
    std::fs::read_to_string(s.root().join("logs/errors.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn hook(s: &Sandbox, now: &str, payload: &str) -> Option<Value> {
    let out = s
        .triage(["hook"])
        .env("TRIAGE_NOW", now)
        .stdin(payload.to_string())
        .run()
        .status(0);
    if out.stdout.is_empty() {
        None
    } else {
        Some(json_out(&out))
    }
}

fn log(s: &Sandbox) -> Vec<Value> {
    let text = std::fs::read_to_string(s.root().join("logs/errors.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn breaker(s: &Sandbox, key: &str) -> Value {
    let out = s
        .triage(["breaker", "status", key])
        .env("TRIAGE_NOW", T0)
        .run();
    let v = json_out(&out);
    v["breakers"][0].clone()
}

fn context(v: &Value) -> &str {
    v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default()
}

fn starts(s: &Sandbox, session: &str) -> Vec<PathBuf> {
    match std::fs::read_dir(s.root().join("sessions").join(session)) {
        Ok(dir) => dir
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "start"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The example policy (seed 001's output table) as the project's policy.
fn with_example_policy(s: &Sandbox) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks/triage.example.toml");
    s.write(".triage.toml", std::fs::read(example).unwrap());
}

#[test]
fn a_recorded_session_replayed_event_by_event() {
    let s = Sandbox::new();
    with_example_policy(&s);
    // An earlier session left an unresolved error an hour ago (within SessionStart's day),
    // and an operator opened a breaker.
    s.cmd(&["record-error", "--session", "sess-old", "--agent", "editor"])
        .env("TRIAGE_NOW", "2026-11-23T09:00:00Z")
        .write_stdin(r#"{"kind":"timeout","detail":"editor ran past 10m"}"#)
        .assert()
        .success();
    s.cmd(&["breaker", "trip", "fact-checker"])
        .env("TRIAGE_NOW", T0)
        .assert()
        .success();

    // SessionStart: names the open breaker and the earlier unresolved error.
    let v = hook(&s, T0, &fixture("01-session-start")).expect("SessionStart answers");
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let c = context(&v);
    assert!(c.contains("fact-checker (forced_open)"), "{c}");
    assert!(
        c.contains("earlier sessions of this project: 1 (editor timeout)"),
        "{c}"
    );

    // PreToolUse Agent: allowed, silently; the start is remembered.
    assert_eq!(hook(&s, T0, &fixture("02-pre-tool-use-agent")), None);
    assert_eq!(starts(&s, "sess-e2e").len(), 1);

    // PostToolUseFailure: classified, logged, a breaker failure, and the next step.
    let v = hook(&s, T0, &fixture("03-post-tool-use-failure")).expect("advice");
    assert_eq!(
        v["hookSpecificOutput"]["hookEventName"],
        "PostToolUseFailure"
    );
    let c = context(&v);
    assert!(c.contains("`overloaded`"), "{c}");
    assert!(
        c.contains("then retry the same call (attempt 2 of 3)"),
        "{c}"
    );
    assert!(v.get("systemMessage").is_none());
    assert!(starts(&s, "sess-e2e").is_empty(), "the start was taken");
    let b = breaker(&s, "researcher");
    assert_eq!(b["state"], "closed");
    assert_eq!(b["consecutive_failures"], 1);

    // PreToolUse again: still closed (threshold 2), allowed.
    assert_eq!(hook(&s, T0, &fixture("04-pre-tool-use-agent-again")), None);

    // PostToolUse with empty output: the parent is told not to rely on it; logged as
    // validation_failed; the second failure opens the breaker.
    let v = hook(&s, T0, &fixture("05-post-tool-use-agent-empty")).expect("verdict");
    assert_eq!(v["decision"], "block");
    assert!(v["reason"].as_str().unwrap().contains("empty"), "{v}");
    assert_eq!(breaker(&s, "researcher")["state"], "open");

    // SubagentStop with a short answer: blocked three times, then let go and logged.
    for n in 1..=3 {
        let v = hook(&s, T0, &fixture("06-subagent-stop-short")).expect("block");
        assert_eq!(v["decision"], "block");
        let reason = v["reason"].as_str().unwrap();
        assert!(reason.contains(&format!("rejection {n} of 3")), "{reason}");
        assert!(reason.contains("at least 500 required"), "{reason}");
    }
    let v = hook(&s, T0, &fixture("06-subagent-stop-short")).expect("let go");
    assert!(v.get("decision").is_none());
    assert!(v["systemMessage"]
        .as_str()
        .unwrap()
        .contains("after 3 rejections"));

    // StopFailure: recorded only; Claude Code ignores its output, so none is given.
    assert_eq!(hook(&s, T0, &fixture("07-stop-failure")), None);
    // Stop with a real answer: nothing to say.
    assert_eq!(hook(&s, T0, &fixture("08-stop")), None);

    // The log: the earlier error and this session's four, each with its own id.
    let recs = log(&s);
    let kinds: Vec<(&str, &str)> = recs
        .iter()
        .map(|r| {
            (
                r["session_id"].as_str().unwrap(),
                r["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("sess-old", "timeout"),
            ("sess-e2e", "overloaded"),
            ("sess-e2e", "validation_failed"),
            ("sess-e2e", "validation_failed"),
            ("sess-e2e", "rate_limited"),
        ]
    );
    let ids: std::collections::HashSet<&str> = recs
        .iter()
        .map(|r| r["error_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 5);
    assert_eq!(recs[1]["agent"], "researcher");
    assert_eq!(recs[1]["task_id"], "toolu_01");
    assert_eq!(recs[2]["task_id"], "toolu_02");
    assert_eq!(recs[3]["resolution"]["action_taken"], "proceed_without");

    // The counters agree with the log.
    let counters: Value =
        serde_json::from_str(&s.read(".triage/logs/errors.counters.json")).unwrap();
    assert_eq!(counters["sessions"]["sess-e2e"], 4);
    assert_eq!(counters["sessions"]["sess-old"], 1);

    // The breaker: two failures, open, and the next call is denied with Template 4.
    let b = breaker(&s, "researcher");
    assert_eq!(b["totals"]["failures"], 2);
    let deny = hook(&s, T0, &fixture("04-pre-tool-use-agent-again")).expect("deny");
    let out = &deny["hookSpecificOutput"];
    assert_eq!(out["permissionDecision"], "deny");
    assert!(out["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .contains("[CIRCUIT BREAKER] researcher circuit breaker opened"));

    // One more failure of a subagent is the session's fifth: Template 5, once.
    let agent_failure = |id: &str| {
        json!({"session_id": "sess-e2e", "hook_event_name": "PostToolUseFailure",
               "tool_name": "Agent", "tool_use_id": id,
               "tool_input": {"subagent_type": "synthesizer", "prompt": "p"},
               "error": "API Error: 500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}"})
        .to_string()
    };
    let bash_failure = |id: &str| {
        json!({"session_id": "sess-e2e", "hook_event_name": "PostToolUseFailure",
               "tool_name": "Bash", "tool_use_id": id, "tool_input": {"command": "make"},
               "error": "Exit code 2\nmake: *** No rule to make target 'all'."})
        .to_string()
    };
    let v = hook(&s, T0, &agent_failure("toolu_09")).expect("advice");
    let warning = v["systemMessage"].as_str().expect("Template 5");
    assert!(
        warning.starts_with("[WORKFLOW STABILITY WARNING]"),
        "{warning}"
    );
    assert!(
        warning.contains("This session has encountered 5 failures"),
        "{warning}"
    );
    let v = hook(&s, T0, &agent_failure("toolu_10")).expect("advice");
    assert!(v.get("systemMessage").is_none(), "announced once: {v}");
    // A Bash failure is advised on, and does not count toward the thresholds by default.
    let v = hook(&s, T0, &bash_failure("toolu_11")).expect("advice");
    assert!(v.get("systemMessage").is_none(), "{v}");
    // A tool the policy does not name has no breaker.
    assert!(!s.exists(".triage/breakers/Bash.json"));
}

#[test]
fn an_agent_past_its_timeout_is_logged_as_a_timeout_and_a_breaker_failure() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[agents.researcher]\ntimeout = \"10m\"\n");
    let pre = fixture("02-pre-tool-use-agent");
    assert_eq!(hook(&s, T0, &pre), None);
    let mut post: Value = serde_json::from_str(&fixture("05-post-tool-use-agent-empty")).unwrap();
    post["tool_use_id"] = json!("toolu_01");
    post["tool_response"]["content"][0]["text"] = json!("Found three sources [1] [2] [3].");
    post.as_object_mut().unwrap().remove("duration_ms");
    // No duration_ms in the payload: the start PreToolUse kept decides.
    let v = hook(&s, "2026-11-23T10:12:30Z", &post.to_string()).expect("a timeout note");
    let c = context(&v);
    assert!(
        c.contains("researcher ran for 12m30s, past its 10m timeout"),
        "{c}"
    );
    assert!(v.get("decision").is_none(), "the output itself is fine");
    let recs = log(&s);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["kind"], "timeout");
    assert_eq!(recs[0]["duration_ms"], 750_000);
    let b = breaker(&s, "researcher");
    assert_eq!(b["totals"]["failures"], 1);
    assert_eq!(b["last_error"]["kind"], "timeout");

    // The next call, within its timeout: a success, no error logged; it started after the
    // timeout was recorded, so it resolves it.
    assert_eq!(hook(&s, "2026-11-23T10:13:00Z", &pre), None);
    assert_eq!(hook(&s, "2026-11-23T10:18:00Z", &post.to_string()), None);
    let lines = log(&s);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["resolves"], recs[0]["error_id"]);
    assert_eq!(lines[1]["resolution"]["action_taken"], "recovered_by_retry");
    assert_eq!(breaker(&s, "researcher")["totals"]["successes"], 1);
}

#[test]
fn tools_named_in_the_policy_are_gated_and_others_are_not() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker.WebFetch]\nfailure_threshold = 1\ncooldown = \"5m\"\n",
    );
    let call = |event: &str| {
        json!({"session_id": "s1", "hook_event_name": event, "tool_name": "WebFetch",
               "tool_use_id": "t1", "tool_input": {"url": "https://example.com"},
               "error": "Request failed with status code 503"})
        .to_string()
    };
    assert_eq!(hook(&s, T0, &call("PreToolUse")), None);
    hook(&s, T0, &call("PostToolUseFailure")).expect("advice");
    let v = hook(&s, T0, &call("PreToolUse")).expect("denied");
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    // Bash is not named: never gated, even after failures.
    let bash = |event: &str| {
        json!({"session_id": "s1", "hook_event_name": event, "tool_name": "Bash",
               "tool_input": {"command": "false"}, "error": "Exit code 1"})
        .to_string()
    };
    hook(&s, T0, &bash("PostToolUseFailure")).expect("advice");
    hook(&s, T0, &bash("PostToolUseFailure")).expect("advice");
    assert_eq!(hook(&s, T0, &bash("PreToolUse")), None);
}

#[test]
fn the_event_flag_names_a_payload_without_hook_event_name_and_unknown_events_say_nothing() {
    let s = Sandbox::new();
    let p = json!({"session_id": "s1", "tool_name": "Agent", "tool_use_id": "t1",
                   "tool_input": {"subagent_type": "researcher"},
                   "error": "Command timed out after 2m 0s"})
    .to_string();
    let out = s
        .triage(["hook", "--event", "PostToolUseFailure"])
        .env("TRIAGE_NOW", T0)
        .stdin(p)
        .run();
    assert!(context(&json_out(&out)).contains("`timeout`"));
    assert_eq!(log(&s)[0]["kind"], "timeout");
    for event in ["Notification", "UserPromptSubmit", "SomethingNew"] {
        let p = json!({"session_id": "s1", "hook_event_name": event, "message": "hi"});
        assert_eq!(hook(&s, T0, &p.to_string()), None, "{event}");
    }
    // Both names of the subagent tool.
    let p = json!({"session_id": "s1", "hook_event_name": "PostToolUseFailure", "tool_name": "Task",
                   "tool_input": {"subagent_type": "editor"}, "error": "boom"});
    hook(&s, T0, &p.to_string()).expect("advice");
    assert_eq!(breaker(&s, "editor")["totals"]["failures"], 1);
}

#[test]
fn a_hook_that_fails_exits_0_with_nothing_on_stdout_and_a_trace() {
    let s = Sandbox::new();
    for input in [
        "this is not json",
        "{\"hook_event_name\": \"PostToolUseFailure\"",
    ] {
        let out = s.triage(["hook"]).stdin(input).run().status(0);
        assert!(out.stdout.is_empty());
    }
    let trace = s.read(".triage/logs/triage.log");
    assert_eq!(trace.lines().count(), 2, "{trace}");
    assert!(trace.contains("\"subcommand\":\"hook\""));

    // A state root that cannot be written: the failure is not recorded, but the advice
    // (which needs no state) is still given, and the call is never blocked.
    let blocked = Sandbox::new();
    blocked.write("not-a-dir", "a file");
    let out = blocked
        .triage(["hook"])
        .env("TRIAGE_DIR", blocked.path().join("not-a-dir"))
        .stdin(fixture("03-post-tool-use-failure"))
        .run()
        .status(0);
    let answer = json_out(&out);
    assert!(answer.get("decision").is_none(), "{answer}");
    assert!(context(&answer).contains("overloaded"), "{answer}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("triage hook: ") && err.contains("not recorded"),
        "{err}"
    );
}

#[test]
fn sixteen_hooks_at_once_for_one_session_leave_consistent_state() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[thresholds]\nsession_failures = 5\n[breaker.researcher]\nfailure_threshold = 100\n",
    );
    let children: Vec<_> = (0..16)
        .map(|i| {
            let payload = json!({"session_id": "par", "hook_event_name": "PostToolUseFailure",
                "tool_name": "Agent", "tool_use_id": format!("toolu_{i:02}"),
                "tool_input": {"subagent_type": "researcher"},
                "error": "API Error: 529 overloaded"});
            // What is tested is consistency, not the 1 s lock budget: on a loaded machine a
            // hook past its budget rightly gives up its breaker outcome and spools its record.
            s.triage(["hook"])
                .env("TRIAGE_NOW", T0)
                .env("TRIAGE_LOCK_TIMEOUT", "60s")
                .stdin(payload.to_string())
                .spawn()
        })
        .collect();
    let mut warnings = 0;
    for c in children {
        let v = c.wait().status(0).stdout_json();
        assert!(context(&v).contains("`overloaded`"));
        if v.get("systemMessage").is_some() {
            warnings += 1;
        }
    }
    assert_eq!(warnings, 1, "Template 5 is announced exactly once");
    let recs = log(&s);
    assert_eq!(recs.len(), 16);
    let ids: std::collections::HashSet<&str> = recs
        .iter()
        .map(|r| r["error_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 16);
    let counters: Value =
        serde_json::from_str(&s.read(".triage/logs/errors.counters.json")).unwrap();
    assert_eq!(counters["sessions"]["par"], 16);
    let b = breaker(&s, "researcher");
    assert_eq!(b["totals"]["failures"], 16);
    assert_eq!(b["consecutive_failures"], 16);
}

/// A copy of `hooks/scripts` with `triage` reachable as TRIAGE_BIN.
fn run_script(s: &Sandbox, script: &str, payload: &str, triage: &Path) -> Run {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("hooks/scripts")
        .join(script);
    s.command("sh")
        .arg(&path)
        .env("TRIAGE_BIN", triage)
        .env("TRIAGE_NOW", T0)
        .stdin(payload)
        .run()
}

#[test]
fn every_hook_script_runs_its_event_and_fails_open_without_the_binary() {
    let s = Sandbox::new();
    s.cmd(&["breaker", "trip", "researcher"])
        .env("TRIAGE_NOW", T0)
        .assert()
        .success();
    let without_event = |name: &str| {
        let mut v: Value = serde_json::from_str(&fixture(name)).unwrap();
        v.as_object_mut().unwrap().remove("hook_event_name");
        v.to_string()
    };
    // Each script names its event: the payloads here do not.
    let out = run_script(
        &s,
        "pre-tool-use.sh",
        &without_event("02-pre-tool-use-agent"),
        &bin(),
    )
    .status(0);
    assert_eq!(
        json_out(&out)["hookSpecificOutput"]["permissionDecision"],
        "deny"
    );
    let out = run_script(
        &s,
        "post-tool-use-failure.sh",
        &without_event("03-post-tool-use-failure"),
        &bin(),
    );
    assert!(context(&json_out(&out)).contains("`overloaded`"));
    let out = run_script(
        &s,
        "post-tool-use.sh",
        &without_event("05-post-tool-use-agent-empty"),
        &bin(),
    );
    assert_eq!(json_out(&out)["decision"], "block");
    run_script(
        &s,
        "subagent-stop.sh",
        &without_event("06-subagent-stop-short"),
        &bin(),
    )
    .status(0);
    let out = run_script(&s, "stop.sh", &without_event("08-stop"), &bin());
    assert!(out.stdout.is_empty());
    let before = log(&s).len();
    let out = run_script(
        &s,
        "stop-failure.sh",
        &without_event("07-stop-failure"),
        &bin(),
    );
    assert!(out.stdout.is_empty());
    assert_eq!(log(&s).len(), before + 1);
    let out = run_script(
        &s,
        "session-start.sh",
        &without_event("01-session-start"),
        &bin(),
    );
    assert!(context(&json_out(&out)).contains("researcher (forced_open)"));

    // Without the binary: exit 0, nothing on stdout, a note on stderr.
    let missing = s.path().join("no-such-triage");
    let out = run_script(
        &s,
        "pre-tool-use.sh",
        &fixture("02-pre-tool-use-agent"),
        &missing,
    )
    .status(0);
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
}

#[test]
fn the_hook_scripts_are_shellcheck_clean_and_the_snippet_names_each_script() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks");
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(dir.join("scripts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    scripts.sort();
    assert_eq!(scripts.len(), 8);
    let snippet: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("settings.json")).unwrap()).unwrap();
    let text = snippet.to_string();
    for p in &scripts {
        let name = p.file_name().unwrap().to_str().unwrap();
        if name != "triage-hook.sh" {
            assert!(text.contains(name), "settings.json does not run {name}");
        }
    }
    if skip_unless_tool("shellcheck", "TRIAGE_REQUIRE_SHELLCHECK") {
        crate::common::command("shellcheck")
            .args(["--shell=sh", "--severity=style"])
            .args(&scripts)
            .run()
            .status(0);
    }
}

#[test]
fn session_start_removes_call_starts_that_no_post_tool_use_took_within_a_day() {
    let s = Sandbox::new();
    let pre = |session: &str, id: &str| {
        json!({"session_id": session, "hook_event_name": "PreToolUse", "tool_name": "Agent",
               "tool_use_id": id, "tool_input": {"subagent_type": "researcher"}})
        .to_string()
    };
    assert_eq!(hook(&s, T0, &pre("crashed", "t1")), None);
    assert_eq!(hook(&s, "2026-11-24T09:00:00Z", &pre("busy", "t2")), None);
    assert_eq!(starts(&s, "crashed").len(), 1);
    let start = json!({"session_id": "new", "hook_event_name": "SessionStart"}).to_string();
    // 23 hours later: both are kept.
    hook(&s, "2026-11-24T09:00:00Z", &start);
    assert_eq!(starts(&s, "crashed").len(), 1);
    // 25 hours after the first: it goes, with its folder; the younger one stays.
    hook(&s, "2026-11-24T11:00:00Z", &start);
    assert!(!s.root().join("sessions/crashed").exists());
    assert_eq!(starts(&s, "busy").len(), 1);
}

/// The failure that opens a breaker does not advise a retry the breaker would deny: the
/// advice says the breaker is open, and the record's action is `escalate`, not `retry`.
#[test]
fn the_failure_that_opens_a_breaker_advises_no_retry() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker.WebFetch]\nfailure_threshold = 2\ncooldown = \"5m\"\n",
    );
    let call = |event: &str, id: &str| {
        json!({"session_id": "s1", "hook_event_name": event, "tool_name": "WebFetch",
               "tool_use_id": id, "tool_input": {"url": "https://example.com"},
               "error": "Request failed with status code 503"})
        .to_string()
    };
    hook(&s, T0, &call("PreToolUse", "t1"));
    let first = hook(&s, T0, &call("PostToolUseFailure", "t1")).expect("advice");
    assert!(context(&first).contains("retry"), "{first}");
    hook(&s, T0, &call("PreToolUse", "t2"));
    let second = hook(&s, T0, &call("PostToolUseFailure", "t2")).expect("advice");
    let c = context(&second);
    assert!(!c.contains("(attempt "), "a retry the breaker denies: {c}");
    assert!(c.contains("do not retry"), "{c}");
    assert!(c.contains("breaker `WebFetch` is open"), "{c}");
    let last = log(&s).pop().unwrap();
    assert_eq!(last["action"], "escalate", "{last}");
    assert_eq!(last["retry"], Value::Null, "{last}");
    // And the next call is denied, as the advice said.
    let v = hook(&s, T0, &call("PreToolUse", "t3")).expect("denied");
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
}
