//! The fleet's Redis failing: stopped mid-run, restarted, or accepting connections and never
//! answering. Calls fall back to the local files within the timeouts, hooks exit 0 and answer
//! as they would, nothing is lost once `store sync` has run, and calls go back to Redis.

use crate::breaker::{at, T0};
use crate::common::{json_out, Run, Sandbox};
use crate::server::{Server, Silent};
use serde_json::{json, Value};
use std::collections::BTreeSet;
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

fn record(s: &Sandbox, detail: &str) -> Run {
    s.triage([
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
    .run()
}

/// `triage hook` on `payload`, which must exit 0; what it did and how long it took.
fn hook(s: &Sandbox, payload: &Value) -> (Run, Duration) {
    let start = Instant::now();
    let out = s
        .triage(["hook"])
        .env("TRIAGE_NOW", at(T0))
        .stdin(payload.to_string())
        .run();
    let took = start.elapsed();
    (out.status(0), took)
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
        record(&s, &format!("up {i}")).status(0);
    }
    assert_eq!(fleet_ids(&s).len(), 3);
    assert!(!s.exists(".triage/logs/errors.jsonl"));

    // Stopped mid-run: every call falls back at once, hooks exit 0 and still answer.
    server.kill();
    let mut local = Vec::new();
    for i in 0..3 {
        let out = record(&s, &format!("down {i}")).status(0);
        assert!(String::from_utf8_lossy(&out.stderr).contains("used the local files"));
        local.push(json_out(&out)["error_id"].as_str().unwrap().to_string());
    }
    for i in 0..3 {
        let (out, took) = hook(&s, &failure_payload(i));
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
    let out = record(&s, "back").status(0);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.triage(["store", "sync"]).run().status(0);
    let again = s.triage(["store", "sync"]).run().stdout_json();
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
    let status = s.triage(["store", "status"]).run().stdout_json();
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
    let out = s.triage(["breaker", "check", "api"]).run().status(0);
    assert_eq!(json_out(&out)["allowed"], true);
    for _ in 0..2 {
        s.triage(["breaker", "record", "api", "--outcome", "failure"])
            .run();
    }
    assert!(
        s.exists(".triage/breakers/api.json"),
        "the local breaker took the calls"
    );
    server.restart();
    let out = s
        .triage(["breaker", "record", "other", "--outcome", "failure"])
        .run();
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
    let out = s.triage(["breaker", "check", "api"]).run();
    let took = start.elapsed();
    let out = out.status(0);
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
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(!out.stdout.is_empty(), "the hook still answers");
    assert!(s.exists(".triage/logs/errors.jsonl"));
}

#[test]
fn a_bad_store_url_is_a_warning_and_the_files() {
    let s = Sandbox::with_store("http://nowhere");
    let out = s.triage(["breaker", "check", "api"]).run().status(0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not redis://"));
    s.triage(["store", "status"]).run().status(64);
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
        .triage(["breaker", "record", "api", "--outcome", "failure"])
        .env("SSL_CERT_FILE", server.ca())
        .run()
        .status(0);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !s.exists(".triage/breakers"),
        "the call went to the TLS Redis"
    );
    let status = s
        .triage(["store", "status"])
        .env("SSL_CERT_FILE", server.ca())
        .run()
        .stdout_json();
    assert_eq!(status["url"], tls);
    assert_eq!(status["breakers"], 1);
    // Without the CA the certificate is refused, and the call falls back.
    let out = s
        .triage(["breaker", "check", "api"])
        .env("SSL_CERT_FILE", "/nonexistent")
        .run()
        .status(0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("used the local files"));
}
