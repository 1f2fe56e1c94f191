//! The fleet's Redis failing: stopped mid-run, restarted, or accepting connections and never
//! answering. Calls fall back to the local files within the timeouts, hooks exit 0 and answer
//! as they would, nothing is lost once `store sync` has run, and calls go back to Redis.

use crate::breaker::{at, T0};
use crate::common::{json_out, Sandbox};
use crate::server::{Server, Silent};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Hook-like timeouts, a little wider than the defaults for a loaded machine.
const FAST: &str = "[store]\nconnect_timeout = \"100ms\"\ncommand_timeout = \"100ms\"\n";

fn fleet_ids(s: &Sandbox) -> Vec<String> {
    s.stream("errors")
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["error_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn record(s: &Sandbox, detail: &str) -> std::process::Output {
    s.cmd(&[
        "record-error",
        "--session",
        "s1",
        "--agent",
        "researcher",
        "--kind",
        "timeout",
        "--detail",
        detail,
    ])
    .env("TRIAGE_NOW", at(T0))
    .output()
    .unwrap()
}

fn hook(s: &Sandbox, payload: &Value) -> (std::process::Output, Duration) {
    let start = Instant::now();
    let mut c = s
        .std_cmd(&["hook"])
        .env("TRIAGE_STORE", s.store.as_ref().unwrap())
        .env("TRIAGE_NOW", at(T0))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(payload.to_string().as_bytes())
        .unwrap();
    let out = c.wait_with_output().unwrap();
    (out, start.elapsed())
}

fn failure_payload(n: usize) -> Value {
    json!({
        "hook_event_name": "PostToolUseFailure",
        "session_id": "s1",
        "tool_name": "Agent",
        "tool_input": {"subagent_type": "researcher"},
        "tool_use_id": format!("toolu_{n}"),
        "error": "Command timed out after 2m 0s"
    })
}

#[test]
fn a_stopped_redis_falls_back_loses_nothing_after_sync_and_is_used_again_once_back() {
    let Some(mut server) = Server::start() else {
        return;
    };
    let s = Sandbox::with_store(&server.url());
    s.write(".triage.toml", FAST);
    // Redis up: records go to the fleet.
    for i in 0..3 {
        assert_eq!(record(&s, &format!("up {i}")).status.code(), Some(0));
    }
    assert_eq!(fleet_ids(&s).len(), 3);
    assert!(!s.exists(".triage/logs/errors.jsonl"));

    // Stopped mid-run: every call falls back at once, hooks exit 0 and still answer.
    server.kill();
    let mut local = Vec::new();
    for i in 0..3 {
        let out = record(&s, &format!("down {i}"));
        assert_eq!(out.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&out.stderr).contains("used the local files"));
        local.push(json_out(&out)["error_id"].as_str().unwrap().to_string());
    }
    for i in 0..3 {
        let (out, took) = hook(&s, &failure_payload(i));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(took < Duration::from_secs(5), "took {took:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v.to_string().contains("researcher"), "{v}");
    }
    let trace = s.read(".triage/logs/triage.log");
    assert!(trace.contains("used the local files"), "{trace}");
    let kept = std::fs::read_dir(s.root().join("logs/fleet.outbox"))
        .unwrap()
        .count();
    assert_eq!(
        kept, 6,
        "every record written during the outage waits for the fleet"
    );

    // Back: calls go to Redis again, the first writer pushes what waited, sync the rest.
    server.restart();
    let out = record(&s, "back");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = s.cmd(&["store", "sync"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = json_out(&s.cmd(&["store", "sync"]).output().unwrap());
    assert_eq!(again["pushed"], 0, "a second sync pushes nothing");
    let ids = fleet_ids(&s);
    assert_eq!(ids.len(), 3 + 6 + 1, "{ids:?}");
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        ids.len(),
        "no duplicates"
    );
    for id in &local {
        assert!(ids.contains(id), "{id} lost");
    }
    let status = json_out(&s.cmd(&["store", "status"]).output().unwrap());
    assert_eq!(status["backend"], "redis");
    assert_eq!(status["reachable"], true);
    assert_eq!(status["waiting"], 0);
    assert_eq!(status["records"], 10);
}

#[test]
fn a_breaker_call_during_an_outage_uses_the_local_breaker_then_the_fleets_again() {
    let Some(mut server) = Server::start() else {
        return;
    };
    let s = Sandbox::with_store(&server.url());
    s.write(".triage.toml", FAST);
    server.kill();
    let out = s.cmd(&["breaker", "check", "api"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json_out(&out)["allowed"], true);
    for _ in 0..2 {
        s.cmd(&["breaker", "record", "api", "--outcome", "failure"])
            .output()
            .unwrap();
    }
    assert!(
        s.exists(".triage/breakers/api.json"),
        "the local breaker took the calls"
    );
    server.restart();
    let out = s
        .cmd(&["breaker", "record", "other", "--outcome", "failure"])
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !s.exists(".triage/breakers/other.json"),
        "back on the fleet's Redis"
    );
    assert_eq!(s.stream("breaker-events").len(), 0);
}

#[test]
fn a_redis_that_never_answers_costs_the_timeout_and_hooks_still_answer() {
    let silent = Silent::start();
    let s = Sandbox::with_store(&silent.url());
    s.write(".triage.toml", FAST);
    let start = Instant::now();
    let out = s.cmd(&["breaker", "check", "api"]).output().unwrap();
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json_out(&out)["allowed"], true);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no answer in time"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without the command timeout this call would never end; with it, one timeout (and the
    // process keeps to its files after), on a machine that may be loaded.
    assert!(took < Duration::from_secs(3), "took {took:?}");
    let (out, took) = hook(&s, &failure_payload(1));
    assert_eq!(out.status.code(), Some(0));
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(!out.stdout.is_empty(), "the hook still answers");
    assert!(s.exists(".triage/logs/errors.jsonl"));
}

#[test]
fn a_bad_store_url_is_a_warning_and_the_files() {
    let s = Sandbox::with_store("http://nowhere");
    let out = s.cmd(&["breaker", "check", "api"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not redis://"));
    let out = s.cmd(&["store", "status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
}

#[test]
fn rediss_reaches_a_tls_redis_that_the_system_trusts() {
    let Some(server) = Server::start_tls() else {
        return;
    };
    let tls = format!("rediss://127.0.0.1:{}/0", server.tls_port.unwrap());
    let s = Sandbox::with_store(&tls);
    // The test's CA stands for the system's roots (SSL_CERT_FILE is where they are read).
    let out = s
        .cmd(&["breaker", "record", "api", "--outcome", "failure"])
        .env("SSL_CERT_FILE", server.ca())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !s.exists(".triage/breakers"),
        "the call went to the TLS Redis"
    );
    let status = json_out(
        &s.cmd(&["store", "status"])
            .env("SSL_CERT_FILE", server.ca())
            .output()
            .unwrap(),
    );
    assert_eq!(status["url"], tls);
    assert_eq!(status["breakers"], 1);
    // Without the CA the certificate is refused, and the call falls back.
    let out = s
        .cmd(&["breaker", "check", "api"])
        .env("SSL_CERT_FILE", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("used the local files"));
}
