//! `breaker` (issue 4): the CLI, the hook, failing open, and transitions made exactly once by
//! racing processes. Time moves with TRIAGE_NOW, never with sleeps.
//!
//! One suite for both backends (issue 20): each scenario takes its sandbox from
//! `crate::backend`, which is the file store in the `cli` target and a real Redis in the
//! `fleet` target (which includes this file). What only the file store has (its files, its
//! locks) is tested in `breaker_files.rs`.

use crate::common::{json_out, Run, Sandbox};
use serde_json::Value;

pub(crate) const T0: i64 = 1_767_323_045;

pub(crate) fn at(t: i64) -> String {
    t.to_string()
}

/// `triage breaker ARGS` at time `t`, which must exit 0; its JSON.
pub(crate) fn run(s: &Sandbox, t: i64, args: &[&str]) -> Value {
    let mut a = vec!["breaker"];
    a.extend_from_slice(args);
    let out = s.triage(&a).env("TRIAGE_NOW", at(t)).run().status(0);
    json_out(&out)
}

fn events(s: &Sandbox) -> Vec<Value> {
    s.breaker_events()
}

fn edges(s: &Sandbox) -> Vec<(String, String)> {
    events(s)
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap().to_string(),
                e["to"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

pub(crate) fn open_it(s: &Sandbox, key: &str) {
    for _ in 0..2 {
        run(
            s,
            T0,
            &["record", key, "--outcome", "failure", "--kind", "timeout"],
        );
    }
}

#[test]
fn check_answers_the_contract_fields_and_exits_1_with_e_when_refused() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    let v = run(s, T0, &["check", "researcher"]);
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "allowed",
            "generation",
            "key",
            "reason",
            "retry_after_s",
            "state",
            "ticket"
        ]
    );
    assert_eq!(
        (v["allowed"].clone(), v["reason"].clone()),
        (true.into(), "closed".into())
    );
    assert!(
        !s.exists(".triage/breakers/researcher.json"),
        "a closed check writes nothing"
    );
    open_it(s, "researcher");
    let out = s
        .triage(["breaker", "-e", "check", "researcher"])
        .env("TRIAGE_NOW", at(T0 + 10))
        .run()
        .status(1);
    let v = json_out(&out);
    assert_eq!(v["reason"], "open");
    assert_eq!(v["retry_after_s"], 50);
    assert_eq!(v["ticket"], Value::Null);
    assert_eq!(edges(s), [("closed".into(), "open".into())]);
}

#[test]
fn probe_cycle_through_the_cli_with_tickets() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    let old = run(s, T0, &["check", "a"])["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    open_it(s, "a");
    let p = run(s, T0 + 60, &["check", "a"]);
    assert_eq!(p["reason"], "probe_granted");
    let stale = run(
        s,
        T0 + 61,
        &["record", "a", "--outcome", "success", "--ticket", &old],
    );
    assert_eq!(stale["effect"], "stale");
    assert_eq!(stale["state"], "half_open");
    let t = p["ticket"].as_str().unwrap();
    let r = run(
        s,
        T0 + 61,
        &["record", "a", "--outcome", "success", "--ticket", t],
    );
    assert_eq!(r["state"], "closed");
    assert_eq!(r["transition"]["reason"], "probe_succeeded");
    assert_eq!(
        edges(s),
        [
            ("closed".into(), "open".into()),
            ("open".into(), "half_open".into()),
            ("half_open".into(), "closed".into())
        ]
    );
    let bad = s
        .triage([
            "breaker",
            "record",
            "a",
            "--outcome",
            "success",
            "--ticket",
            "nope",
        ])
        .run()
        .status(64);
    assert!(String::from_utf8_lossy(&bad.stderr).starts_with("triage breaker: ticket `nope`"));
}

#[test]
fn record_reads_stdin_and_flags_override_it() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    let out = s
        .triage(["breaker", "record", "--outcome", "failure"])
        .env("TRIAGE_NOW", at(T0))
        .stdin(r#"{"key": "k", "outcome": "success", "kind": "rate_limited", "detail": "429"}"#)
        .run();
    let v = json_out(&out);
    assert_eq!(
        (v["key"].as_str(), v["counted_as"].as_str()),
        (Some("k"), Some("failure"))
    );
    let st = run(s, T0, &["status", "k"]);
    assert_eq!(st["breakers"][0]["last_error"]["kind"], "rate_limited");
    assert_eq!(st["breakers"][0]["last_error"]["detail"], "429");
    // No outcome anywhere: a usage error.
    s.triage(["breaker", "record", "k"]).run().status(64);
}

#[test]
fn status_lists_every_breaker_and_prints_a_table() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    open_it(s, "researcher");
    run(s, T0, &["record", "writer", "--outcome", "success"]);
    let v = run(s, T0 + 15, &["status"]);
    let list = v["breakers"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["key"], "researcher", "open breakers first");
    assert_eq!(list[0]["half_open_in_s"], 45);
    assert_eq!(list[0]["opened_at"], "2026-01-02T03:04:05.000Z");
    assert_eq!(list[1]["since_last_success_s"], 15);
    let out = s
        .triage(["breaker", "status", "--text"])
        .env("TRIAGE_NOW", at(T0 + 15))
        .run();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    // Where they are: the folder, or the fleet's Redis and namespace.
    let place = match &s.store {
        Some(url) => format!("{url}, namespace {}", s.namespace()),
        None => "./.triage/breakers".to_string(),
    };
    assert!(
        lines[0].starts_with(&format!("2 breakers under {place}; 1 open")),
        "{text}"
    );
    assert!(lines[1].starts_with("KEY         STATE   FAILS"), "{text}");
    assert!(
        lines[2].starts_with("researcher  open    2/2    1       in 45s"),
        "{text}"
    );
    // status performs the lazy transition, once.
    run(s, T0 + 60, &["status"]);
    run(s, T0 + 61, &["status"]);
    assert_eq!(edges(s).len(), 2);
}

#[test]
fn reset_trip_disable_and_refused_transitions() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    let v = run(s, T0, &["trip", "k", "--for", "30s"]);
    assert_eq!(
        (v["state"].as_str(), v["changed"].as_bool()),
        (Some("forced_open"), Some(true))
    );
    assert_eq!(run(s, T0, &["trip", "k", "--for", "30s"])["changed"], false);
    assert_eq!(run(s, T0 + 10, &["check", "k"])["reason"], "forced_open");
    assert_eq!(run(s, T0 + 30, &["check", "k"])["reason"], "probe_granted");
    assert_eq!(run(s, T0 + 31, &["reset", "k"])["state"], "closed");
    assert_eq!(run(s, T0 + 31, &["reset", "k"])["changed"], false);
    run(s, T0, &["disable", "k"]);
    for _ in 0..3 {
        run(s, T0, &["record", "k", "--outcome", "failure"]);
    }
    assert_eq!(run(s, T0, &["check", "k"])["reason"], "disabled");
    let n = events(s).len();
    run(s, T0, &["check", "other"]);
    let out = s.triage(["breaker", "half-open", "other"]).run().status(64);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is closed; only an open"));
    assert_eq!(events(s).len(), n, "a refused transition logs nothing");
    open_it(s, "x");
    let v = run(s, T0, &["reset", "--all"]);
    let states: Vec<&str> = v["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["closed", "closed"]);
}

#[test]
fn policy_globs_and_session_scope() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    s.write(
        ".triage.toml",
        "[breaker.\"*-consultant\"]\nfailure_threshold = 3\n[breaker.per-session]\nscope = \"session\"\ncooldown = \"10s\"\n",
    );
    for _ in 0..2 {
        run(
            s,
            T0,
            &["record", "stat-consultant", "--outcome", "failure"],
        );
    }
    assert_eq!(run(s, T0, &["check", "stat-consultant"])["state"], "closed");
    run(
        s,
        T0,
        &["record", "stat-consultant", "--outcome", "failure"],
    );
    assert_eq!(run(s, T0, &["check", "stat-consultant"])["state"], "open");

    let out = s
        .triage(["breaker", "check", "per-session"])
        .run()
        .status(64);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--session"));
    for _ in 0..2 {
        run(
            s,
            T0,
            &[
                "record",
                "per-session",
                "--session",
                "s1",
                "--outcome",
                "failure",
            ],
        );
    }
    let v = run(s, T0 + 5, &["check", "per-session", "--session", "s1"]);
    assert_eq!(
        (v["key"].as_str(), v["retry_after_s"].as_i64()),
        (Some("s1/per-session"), Some(5))
    );
    assert_eq!(
        run(s, T0, &["check", "per-session", "--session", "s2"])["state"],
        "closed"
    );
}

fn hook(s: &Sandbox, t: i64, payload: Value) -> Run {
    s.triage(["breaker", "--hook"])
        .env("TRIAGE_NOW", at(t))
        .stdin(payload.to_string())
        .run()
}

#[test]
fn hook_denies_with_template_4_and_records_outcomes() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    for name in ["Agent", "Task"] {
        let fail = serde_json::json!({"hook_event_name": "PostToolUseFailure", "session_id": "s",
            "tool_name": name, "tool_input": {"subagent_type": "researcher"},
            "error": "API timeout after 300s"});
        let out = hook(s, T0, fail).status(0);
        assert!(out.stdout.is_empty());
    }
    let pre = serde_json::json!({"hook_event_name": "PreToolUse", "tool_name": "Agent",
        "tool_input": {"subagent_type": "researcher", "prompt": "go"}});
    let out = hook(s, T0 + 20, pre.clone());
    let v = json_out(&out);
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(
        reason.starts_with("[CIRCUIT BREAKER] researcher circuit breaker opened"),
        "{reason}"
    );
    assert!(reason.contains("Consecutive failures: 2"), "{reason}");
    assert!(
        reason.contains("Last error: “API timeout after 300s”"),
        "{reason}"
    );
    assert!(
        reason.ends_with("Do not call researcher for 40 s: go on without it meanwhile, and call it again after that."),
        "{reason}"
    );
    // After the cooldown the probe is allowed (nothing printed), and its success closes it.
    assert!(hook(s, T0 + 60, pre.clone()).stdout.is_empty());
    let post = serde_json::json!({"hook_event_name": "PostToolUse", "tool_name": "Task",
        "tool_input": {"subagent_type": "researcher"}, "tool_response": {"status": "completed"}});
    assert!(hook(s, T0 + 61, post).stdout.is_empty());
    assert_eq!(run(s, T0 + 61, &["check", "researcher"])["state"], "closed");
    // Other tools are keyed by their name; events the breaker has no part in print nothing.
    let bash = serde_json::json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "error": "exit 1"});
    hook(s, T0, bash);
    assert_eq!(
        run(s, T0, &["status", "Bash"])["breakers"][0]["consecutive_failures"],
        1
    );
    let stop = serde_json::json!({"hook_event_name": "Stop"});
    assert!(hook(s, T0, stop).stdout.is_empty());
}

/// 32 processes check a breaker whose cooldown has ended: one probe, one open → half_open.
#[test]
fn concurrent_checks_on_a_half_open_breaker_grant_exactly_one_probe() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    open_it(s, "k");
    let children: Vec<_> = (0..32)
        .map(|_| {
            s.triage(["breaker", "check", "k"])
                .env("TRIAGE_NOW", at(T0 + 60))
                .env("TRIAGE_LOCK_TIMEOUT", "60s")
                .spawn()
        })
        .collect();
    let mut granted = 0;
    for c in children {
        let out = c.wait().status(0);
        let v = json_out(&out);
        match v["reason"].as_str().unwrap() {
            "probe_granted" => granted += 1,
            "probes_exhausted" => {}
            other => panic!("unexpected reason {other}"),
        }
    }
    assert_eq!(granted, 1);
    let half: Vec<_> = edges(s)
        .into_iter()
        .filter(|e| *e == ("open".into(), "half_open".into()))
        .collect();
    assert_eq!(half.len(), 1);
}

/// 16 processes × 50 failure records: exact counts and exactly one closed → open.
#[test]
fn concurrent_failures_count_exactly_and_trip_once() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    s.write(".triage.toml", "[breaker]\nfailure_threshold = 400\n");
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let mut c = s.triage(["breaker", "record", "k", "--outcome", "failure"]);
            c.env("TRIAGE_NOW", at(T0))
                .env("TRIAGE_LOCK_TIMEOUT", "60s")
                .stdin_null();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    c.run().status(0);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let st = &run(s, T0, &["status", "k"])["breakers"][0];
    assert_eq!(st["totals"]["failures"], 800);
    assert_eq!(
        st["consecutive_failures"], 400,
        "counting stops when it opens"
    );
    assert_eq!(st["state"], "open");
    assert_eq!(edges(s), [("closed".into(), "open".into())]);
}

/// `reset --all` prints `{"breakers": [...]}` whether there are none, one or many breakers:
/// a script reads one shape.
#[test]
fn reset_all_prints_a_list_however_many_breakers_there_are() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    assert_eq!(
        run(s, T0, &["reset", "--all"])["breakers"],
        serde_json::json!([])
    );
    run(s, T0, &["record", "one", "--outcome", "failure"]);
    let v = run(s, T0, &["reset", "--all"]);
    let list = v["breakers"].as_array().expect("a list for one breaker");
    assert_eq!(list.len(), 1, "{v}");
    assert_eq!(list[0]["key"], "one", "{v}");
    assert!(v.get("key").is_none(), "{v}");
    run(s, T0, &["record", "two", "--outcome", "failure"]);
    let v = run(s, T0, &["reset", "--all"]);
    assert_eq!(v["breakers"].as_array().map(Vec::len), Some(2), "{v}");
    // One key named: that breaker's object, as before.
    assert_eq!(run(s, T0, &["reset", "one"])["key"], "one");
}
