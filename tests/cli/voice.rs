//! What `triage hook` tells the model in a coding session: silent on the agent's own work (a
//! red test, a type or lint error, a search with no match, a dependency conflict), sharp on
//! trouble, never the same advice twice (repeats counted per session), facts and one
//! directive (never a menu), durations as people say them, and a SessionStart that names only
//! what is actionable now.

use crate::common::{json_out, Sandbox};
use serde_json::{json, Value};

const T0: &str = "2026-11-25T10:00:00Z";

fn at(secs: i64) -> String {
    (chrono::DateTime::parse_from_rfc3339(T0).unwrap() + chrono::Duration::seconds(secs))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `triage hook` on `payload` at `now`: stdout's JSON, or `None` when it printed nothing.
fn hook(s: &Sandbox, now: &str, payload: &Value) -> Option<Value> {
    let out = s
        .triage(["hook"])
        .env("TRIAGE_NOW", now)
        .stdin(payload.to_string())
        .run()
        .status(0);
    (!out.stdout.is_empty()).then(|| json_out(&out))
}

fn context(v: &Option<Value>) -> String {
    v.as_ref()
        .and_then(|v| v["hookSpecificOutput"]["additionalContext"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn bash_failure(session: &str, command: &str, error: &str) -> Value {
    json!({"hook_event_name": "PostToolUseFailure", "session_id": session, "tool_name": "Bash",
        "tool_use_id": "t1", "tool_input": {"command": command}, "error": error})
}

fn records(s: &Sandbox) -> Vec<Value> {
    std::fs::read_to_string(s.root().join("logs/errors.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn breaker_failures(s: &Sandbox, key: &str) -> u64 {
    let v = s
        .triage(["breaker", "status", key])
        .env("TRIAGE_NOW", T0)
        .run()
        .stdout_json();
    v["breakers"][0]["consecutive_failures"]
        .as_u64()
        .unwrap_or(0)
}

/// Real outputs of the agent's normal loop, each one of the work families.
fn work_failures() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        (
            "jest",
            "npx jest src/sum.test.js",
            "Exit code 1\nFAIL src/sum.test.js (5.123 s)\n  ● sum › adds two numbers\n\n    expect(received).toBe(expected) // Object.is equality\n\n    Expected: 3\n    Received: 4\n\n      3 | test('adds two numbers', () => {\n    > 4 |   expect(sum(1, 2)).toBe(3);\n\n      at Object.<anonymous> (src/sum.test.js:4:21)\n\nTests:       1 failed, 1 total",
        ),
        (
            "tsc",
            "npx tsc --noEmit",
            "Exit code 2\nsrc/index.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.",
        ),
        (
            "eslint",
            "npx eslint src",
            "Exit code 1\n\n/home/u/app/src/a.js\n  1:7  error  'x' is assigned a value but never used  no-unused-vars\n\n✖ 1 problem (1 error, 0 warnings)",
        ),
        ("grep", "grep -rn needle src", "Exit code 1"),
        (
            "npm ERESOLVE",
            "npm install",
            "Exit code 1\nnpm error code ERESOLVE\nnpm error ERESOLVE unable to resolve dependency tree\nnpm error\nnpm error While resolving: app@1.0.0\nnpm error Found: react@18.2.0\nnpm error Could not resolve dependency:\nnpm error peer react@\"^17.0.0\" from legacy-lib@2.1.0",
        ),
        (
            "npm missing script",
            "npm run lint",
            "Exit code 1\nnpm ERR! Missing script: \"lint\"\nnpm ERR! \nnpm ERR! To see a list of scripts, run:\nnpm ERR!   npm run",
        ),
    ]
}

#[test]
fn work_failures_get_no_advice_no_record_and_no_breaker_failure() {
    let s = Sandbox::new();
    // Bash guarded by a breaker: a red test must not open it.
    s.write(".triage.toml", "[breaker.Bash]\nfailure_threshold = 2\n");
    for (name, command, error) in work_failures() {
        let v = hook(&s, T0, &bash_failure("s1", command, error));
        assert_eq!(v, None, "{name}: a work failure gets nothing");
    }
    assert_eq!(
        records(&s),
        Vec::<Value>::new(),
        "no record of work failures"
    );
    assert_eq!(breaker_failures(&s, "Bash"), 0);
}

#[test]
fn classify_hook_stays_silent_on_work_failures_as_the_hook_does() {
    let s = Sandbox::new();
    for (name, command, error) in work_failures() {
        let out = s
            .triage(["classify", "--hook"])
            .stdin(bash_failure("s1", command, error).to_string())
            .run()
            .status(0);
        assert_eq!(out.stdout(), "", "{name}: a work failure gets nothing");
    }
    // Trouble still gets its paragraph.
    let reset = bash_failure(
        "s1",
        "npm install",
        "Exit code 1\nnpm error code ECONNRESET",
    );
    let out = s
        .triage(["classify", "--hook"])
        .stdin(reset.to_string())
        .run()
        .status(0);
    assert!(out.stdout().contains("network_error"), "{}", out.stdout());
}

#[test]
fn trouble_is_still_advised_and_recorded_in_plain_words() {
    let s = Sandbox::new();
    let reset = bash_failure(
        "s1",
        "npm install",
        "Exit code 1\nnpm error code ECONNRESET\nnpm error network request to https://registry.npmjs.org/react failed, reason: read ECONNRESET",
    );
    let c = context(&hook(&s, T0, &reset));
    assert!(c.contains("`network_error`"), "{c}");
    assert!(c.contains("wait 30 s, then retry the same call"), "{c}");
    assert!(!c.contains("(agent Bash)"), "the tool is named once: {c}");
    let overloaded = json!({"hook_event_name": "PostToolUseFailure", "session_id": "s1",
        "tool_name": "Agent", "tool_use_id": "t2",
        "tool_input": {"subagent_type": "researcher", "prompt": "find the sources"},
        "error": "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"});
    let c = context(&hook(&s, T0, &overloaded));
    assert!(c.contains("`overloaded`"), "{c}");
    assert!(c.contains("retry"), "{c}");
    let kinds: Vec<Value> = records(&s).iter().map(|r| r["kind"].clone()).collect();
    assert_eq!(kinds, [json!("network_error"), json!("overloaded")]);
    assert_eq!(breaker_failures(&s, "researcher"), 1);
    for c in [&c] {
        for menu in ["options: retry, skip, abort", "(A)", "Suggestions:"] {
            assert!(!c.contains(menu), "{menu} in {c}");
        }
    }
}

#[test]
fn the_third_identical_work_failure_says_change_approach_once() {
    let s = Sandbox::new();
    let line = "the same command failed the same way 3 times in this session: change approach, or ask the user";
    // The same red test, its timing and temp folder different each run.
    let run = |secs: &str, tmp: &str| {
        bash_failure(
            "s1",
            "npx jest src/sum.test.js",
            &format!("Exit code 1\nFAIL src/sum.test.js ({secs} s) in /tmp/jest_{tmp}/x\n  ● sum › adds\nTests: 1 failed, 1 total"),
        )
    };
    assert_eq!(hook(&s, T0, &run("5.1", "ab12")), None);
    assert_eq!(hook(&s, &at(10), &run("4.9", "cd34")), None);
    let third = context(&hook(&s, &at(20), &run("5.3", "ef56")));
    assert!(third.to_lowercase().contains(line), "{third}");
    assert_eq!(third.lines().count(), 1, "one line: {third}");
    assert_eq!(hook(&s, &at(30), &run("5.0", "a7b8")), None, "said once");
    // Another session counts afresh.
    assert_eq!(
        hook(
            &s,
            &at(40),
            &bash_failure(
                "s2",
                "npx jest src/sum.test.js",
                "Exit code 1\nFAIL src/sum.test.js (5 s)"
            )
        ),
        None
    );
    assert_eq!(records(&s), Vec::<Value>::new());
}

#[test]
fn a_repeated_trouble_failure_moves_on_and_says_change_approach_once() {
    let s = Sandbox::new();
    let reset = |port: u32| {
        bash_failure(
            "s1",
            "curl -sf http://localhost:8080/health",
            &format!("Exit code 7\ncurl: (7) Failed to connect to localhost port 8080 after {port} ms: Connection refused"),
        )
    };
    let first = context(&hook(&s, T0, &reset(3)));
    assert!(first.contains("(attempt 2 of"), "{first}");
    let second = context(&hook(&s, &at(60), &reset(5)));
    assert!(!second.is_empty(), "trouble is spoken of");
    assert!(
        !second.contains("(attempt 2 of"),
        "a repeat never gets the first retry again: {second}"
    );
    assert_ne!(first, second);
    let third = context(&hook(&s, &at(200), &reset(4)));
    assert!(
        third.contains("The same command failed the same way 3 times in this session: change approach, or ask the user."),
        "{third}"
    );
    assert!(!third.contains("retry the same call"), "{third}");
    let fourth = context(&hook(&s, &at(300), &reset(2)));
    assert!(!fourth.contains("3 times"), "said once: {fourth}");
    assert!(!fourth.contains("retry the same call"), "{fourth}");
    assert_eq!(records(&s).len(), 4, "trouble is recorded every time");
}

#[test]
fn a_bash_timeout_is_told_to_rerun_longer_or_in_the_background() {
    let s = Sandbox::new();
    let p = bash_failure("s1", "npm run e2e", "Command timed out after 2m 0s");
    let c = context(&hook(&s, T0, &p));
    assert!(c.contains("`timeout`"), "{c}");
    assert!(
        c.contains("rerun it with a longer timeout or in the background"),
        "{c}"
    );
    assert!(!c.contains("wait 30 s"), "{c}");
    assert!(!c.contains("retry the same call"), "{c}");
    // The second time, the same advice still holds (never "wait, then retry").
    let c = context(&hook(&s, &at(180), &p));
    assert!(!c.contains("retry the same call"), "{c}");
}

#[test]
fn no_deny_reason_offers_a_menu() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker]\nfailure_threshold = 1\ncooldown = \"40s\"\n",
    );
    let fail = json!({"hook_event_name": "PostToolUseFailure", "session_id": "s1",
        "tool_name": "Agent", "tool_use_id": "t1", "tool_input": {"subagent_type": "researcher"},
        "error": "API Error: 500 Internal server error"});
    hook(&s, T0, &fail);
    s.triage(["breaker", "trip", "fact-checker"])
        .env("TRIAGE_NOW", T0)
        .run()
        .status(0);
    for agent in ["researcher", "fact-checker"] {
        let pre = json!({"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Agent",
            "tool_use_id": "t9", "tool_input": {"subagent_type": agent}});
        let v = hook(&s, T0, &pre).expect("denied");
        let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
        for menu in ["(A)", "(B)", "(C)", "Options:", "Enter choice"] {
            assert!(!reason.contains(menu), "{menu} in {reason}");
        }
        let last = reason.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("Do not call"),
            "ends with a directive: {reason}"
        );
    }
}

#[test]
fn session_start_names_only_what_is_actionable_now() {
    let s = Sandbox::new();
    // 392 unresolved errors of sessions three days old, one of yesterday evening.
    let old = "2026-11-22T09:00:00.000Z";
    let mut log = String::new();
    for i in 0..392 {
        log.push_str(
            &json!({"error_id": format!("err-20261122T090000000Z-{i:06}"), "timestamp": old,
                "session_id": format!("old-{}", i % 40), "agent": "researcher", "status": "error",
                "kind": "timeout", "detail": "researcher ran past 10m", "retryable": true,
                "context": {}, "category": "transient", "tier": 1, "severity": "warning",
                "action": "retry", "matched_rule": "input"})
            .to_string(),
        );
        log.push('\n');
    }
    s.write(".triage/logs/errors.jsonl", log);
    s.triage([
        "record-error",
        "--session",
        "yesterday",
        "--agent",
        "editor",
    ])
    .env("TRIAGE_NOW", "2026-11-24T20:00:00Z")
    .stdin(r#"{"kind":"rate_limited","detail":"429 from the API"}"#)
    .run()
    .status(0);
    // A breaker tripped for two hours, 225 s ago: 6975 s left.
    s.triage(["breaker", "trip", "statistician", "--for", "2h"])
        .env("TRIAGE_NOW", T0)
        .run()
        .status(0);
    let start =
        json!({"hook_event_name": "SessionStart", "session_id": "new", "source": "startup"});
    let c = context(&hook(&s, &at(225), &start));
    assert!(c.lines().count() <= 3, "at most three lines: {c}");
    assert!(c.contains("statistician"), "{c}");
    assert!(c.contains("1 h 56 min"), "{c}");
    assert!(!c.contains("6975"), "{c}");
    assert!(!c.contains("392"), "no old history: {c}");
    assert!(
        c.contains(": 1 (editor rate_limited)"),
        "yesterday's trouble: {c}"
    );
    // The old records stay in the log.
    assert_eq!(records(&s).len(), 393);
    // Nothing open and nothing recent: nothing said.
    let s = Sandbox::new();
    s.write(".triage/logs/errors.jsonl", {
        let mut l = String::new();
        for i in 0..5 {
            l.push_str(
                &json!({"error_id": format!("e{i}"), "timestamp": old, "session_id": "o",
                "agent": "researcher", "status": "error", "kind": "timeout", "detail": "x"})
                .to_string(),
            );
            l.push('\n');
        }
        l
    });
    assert_eq!(hook(&s, T0, &start), None);
}

#[test]
fn an_empty_work_list_makes_triage_speak_on_a_red_test() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[voice]\nwork = []\n");
    let out = s.triage(["config", "check", ".triage.toml"]).run();
    assert_eq!(json_out(&out)["ok"], true, "{}", out.stdout());
    let (_, command, error) = work_failures()[0];
    let c = context(&hook(&s, T0, &bash_failure("s1", command, error)));
    assert!(c.contains("`test_failed`"), "{c}");
    assert_eq!(records(&s).len(), 1);
    // Only the named families are work: with `tests` alone, a grep with no match speaks.
    s.write(".triage.toml", "[voice]\nwork = [\"tests\"]\n");
    let c = context(&hook(
        &s,
        T0,
        &bash_failure("s1", "grep -rn needle src", "Exit code 1"),
    ));
    assert!(c.contains("`no_match`"), "{c}");
}

#[test]
fn config_check_names_the_families_that_can_be_work() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[voice]\nwork = [\"tests\", \"lint\"]\n");
    let out = s
        .triage(["config", "check", ".triage.toml"])
        .run()
        .status(1);
    let v = json_out(&out);
    let message = v["problems"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("`lint`"), "{message}");
    assert!(
        message.contains("tests, build, checks, search, dependencies, usage"),
        "{message}"
    );
    assert!(!message.contains("other"), "{message}");
    s.write(".triage.toml", "[voice]\nsession_start_window = \"soon\"\n");
    s.triage(["config", "check", ".triage.toml"])
        .run()
        .status(1);
}

#[test]
fn the_repeat_counts_are_bounded_and_a_bad_file_starts_them_afresh() {
    let s = Sandbox::new();
    let (_, command, error) = work_failures()[0];
    let jest = bash_failure("s1", command, error);
    // Planted: not JSON. The hook answers as ever and counts afresh.
    s.write(".triage/sessions/s1.repeats.json", "{");
    assert_eq!(hook(&s, T0, &jest), None);
    assert_eq!(hook(&s, T0, &jest), None);
    let third = context(&hook(&s, T0, &jest));
    assert!(third.contains("3 times"), "{third}");
    // Too large to be triage's: not read, counted afresh.
    s.write(".triage/sessions/s1.repeats.json", vec![b' '; 200_000]);
    assert_eq!(hook(&s, T0, &jest), None);
    // Full: the least recently seen fingerprints make room, the file stays bounded.
    let seen: serde_json::Map<String, Value> = (0..200)
        .map(|i| {
            (
                format!("{i:016x}"),
                json!({"n": 1, "at_ms": i, "said": false}),
            )
        })
        .collect();
    s.write(
        ".triage/sessions/s1.repeats.json",
        json!({ "seen": seen }).to_string(),
    );
    assert_eq!(hook(&s, T0, &jest), None);
    let file: Value = serde_json::from_str(&s.read(".triage/sessions/s1.repeats.json")).unwrap();
    let kept = file["seen"].as_object().unwrap();
    assert_eq!(kept.len(), 200);
    assert!(
        !kept.contains_key(&format!("{:016x}", 0)),
        "the oldest went"
    );
    assert!(kept.contains_key(&format!("{:016x}", 199)));
}
