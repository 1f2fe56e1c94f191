//! `triage hook` on `PreSkillShellCommand` (Claude Code 2.1.332: a shell command a skill's
//! `SKILL.md` runs): gated as `PreToolUse` gates its tool, answered in the event's own name,
//! and without taking a half-open probe permit or leaving a call start behind (nothing follows
//! it to hand either back).

use crate::common::{json_out, Sandbox};
use serde_json::{json, Value};

const T0: &str = "2026-11-25T10:00:00Z";
/// After the 5 min cooldown: the breaker is due to go half-open.
const T1: &str = "2026-11-25T10:06:00Z";

fn hook(s: &Sandbox, now: &str, payload: &Value) -> Option<Value> {
    let out = s
        .triage(["hook"])
        .env("TRIAGE_NOW", now)
        .stdin(payload.to_string())
        .run()
        .status(0);
    (!out.stdout.is_empty()).then(|| json_out(&out))
}

fn skill_command(tool: &str) -> Value {
    json!({"session_id": "s1", "hook_event_name": "PreSkillShellCommand",
           "transcript_path": "/nonexistent/t.jsonl", "cwd": "/tmp",
           "tool_name": tool, "tool_input": {"command": "git status --short"},
           "tool_use_id": "skill-shell-1f3a", "command_name": "commit-helper",
           "command_source": "projectSettings", "invoked_by": "model"})
}

fn status(s: &Sandbox, now: &str, key: &str) -> Value {
    let out = s
        .triage(["breaker", "status", key])
        .env("TRIAGE_NOW", now)
        .run()
        .status(0);
    json_out(&out)["breakers"][0].clone()
}

/// Opens the `key` breaker (threshold 1) with one failure recorded at T0.
fn open(s: &Sandbox, key: &str) {
    s.triage([
        "breaker",
        "record",
        key,
        "--outcome",
        "failure",
        "--kind",
        "crash",
    ])
    .env("TRIAGE_NOW", T0)
    .run()
    .status(0);
    assert_eq!(status(s, T0, key)["state"], "open");
}

#[test]
fn a_skill_shell_command_is_denied_while_its_tools_breaker_is_open() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker.Bash]\nfailure_threshold = 1\ncooldown = \"5m\"\n",
    );
    // Closed: allowed, nothing said.
    assert_eq!(hook(&s, T0, &skill_command("Bash")), None);
    open(&s, "Bash");
    let v = hook(&s, T0, &skill_command("Bash")).expect("denied");
    let out = &v["hookSpecificOutput"];
    assert_eq!(out["hookEventName"], "PreSkillShellCommand", "{v}");
    assert_eq!(out["permissionDecision"], "deny", "{v}");
    let reason = out["permissionDecisionReason"].as_str().unwrap();
    assert!(reason.contains("commit-helper"), "{reason}");
    assert!(reason.contains("git status --short"), "{reason}");
    assert!(reason.contains("Bash"), "{reason}");
    // A tool with no breaker in the policy is never gated.
    assert_eq!(hook(&s, T0, &skill_command("PowerShell")), None);
}

#[test]
fn a_skill_shell_command_takes_no_probe_and_leaves_no_call_start() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker.PowerShell]\nfailure_threshold = 1\ncooldown = \"5m\"\nhalf_open_probes = 1\n",
    );
    open(&s, "PowerShell");
    // Half-open after the cooldown: the skill's command goes ahead without the one probe
    // permit, however many times it runs.
    for _ in 0..3 {
        assert_eq!(hook(&s, T1, &skill_command("PowerShell")), None);
    }
    let st = status(&s, T1, "PowerShell");
    assert_eq!(st["state"], "half_open", "{st}");
    assert_eq!(st["probes_in_flight"], 0, "{st}");
    assert!(
        !s.root().join("sessions/s1").exists()
            || std::fs::read_dir(s.root().join("sessions/s1"))
                .unwrap()
                .all(|e| !e.unwrap().path().to_string_lossy().ends_with(".start")),
        "no call start is kept for a command nothing completes"
    );
    // The probe is still there for a call that reports back: a PreToolUse gets it.
    let pre = json!({"session_id": "s1", "hook_event_name": "PreToolUse",
                     "tool_name": "PowerShell", "tool_use_id": "toolu_1",
                     "tool_input": {"command": "Get-ChildItem"}});
    assert_eq!(hook(&s, T1, &pre), None);
    assert_eq!(status(&s, T1, "PowerShell")["probes_in_flight"], 1);
    // With the probe held, a skill's command is refused like any other call.
    let v = hook(&s, T1, &skill_command("PowerShell")).expect("denied");
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    assert_eq!(status(&s, T1, "PowerShell")["probes_in_flight"], 1);
}
