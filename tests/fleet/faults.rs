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

/// The command timeout of a hook (the default's order), so a stall is well past it.
const SHORT: &str = "[store]\nconnect_timeout = \"50ms\"\ncommand_timeout = \"50ms\"\n";

#[test]
fn during_a_redis_stall_no_more_than_max_permits_are_granted() {
    let Some(server) = Server::start() else {
        return;
    };
    let s = Sandbox::with_store(&server.url());
    s.write(
        ".triage.toml",
        format!("{SHORT}[permits.api]\nmax = 2\nlease = \"5m\"\n"),
    );
    // Every permit held, on the fleet's Redis.
    for _ in 0..2 {
        s.triage(["permit", "acquire", "api"]).run().status(0);
    }
    let stall = server.stall(4.0);
    let racers: Vec<_> = (0..8)
        .map(|_| s.triage(["permit", "acquire", "api"]).spawn())
        .collect();
    let (mut refused, mut unavailable) = (0, 0);
    for r in racers {
        let r = r.wait();
        match r.code() {
            Some(75) => {
                refused += 1;
                let v = r.stdout_json();
                assert_eq!(v["acquired"], false, "{v}");
                // Either Redis said none is free (the stall ended first) or it did not answer.
                assert!(
                    v["refused"] == "unavailable" || v["refused"] == "busy",
                    "{v}"
                );
                if v["refused"] == "unavailable" {
                    unavailable += 1;
                    assert!(r.stderr().contains("did not answer"), "{}", r.stderr());
                }
            }
            other => panic!("exit {other:?}: {}\n{}", r.stderr(), r.stdout()),
        }
    }
    stall.join().unwrap();
    assert_eq!(refused, 8);
    assert!(unavailable >= 1, "no acquire met the stall");
    assert!(
        !s.exists(".triage/permits"),
        "a permit was decided on this host's files"
    );
    let st = s
        .triage(["permit", "status", "api"])
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(st["permits"][0]["held"], 2, "{st}");
}

#[test]
fn an_acquire_during_a_redis_stall_names_the_reason_and_lease_only_prints_nothing() {
    let Some(server) = Server::start() else {
        return;
    };
    let s = Sandbox::with_store(&server.url());
    s.write(
        ".triage.toml",
        format!("{SHORT}[permits.api]\nmax = 4\nlease = \"5m\"\n"),
    );
    let stall = server.stall(3.0);
    let r = s
        .triage(["permit", "acquire", "api", "--lease-only"])
        .run()
        .status(75);
    assert_eq!(r.stdout(), "", "no lease printed");
    assert!(
        r.stderr()
            .contains("triage permit: no permit of `api` was granted")
            && r.stderr().contains("did not answer"),
        "{}",
        r.stderr()
    );
    stall.join().unwrap();
    // Redis answers again: granted there.
    let v = s
        .triage(["permit", "acquire", "api"])
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(v["backend"], "redis", "{v}");
}

#[test]
fn budget_records_made_during_a_redis_stall_reach_redis_once_after_it_answers() {
    let Some(server) = Server::start() else {
        return;
    };
    let s = Sandbox::with_store(&server.url());
    s.write(
        ".triage.toml",
        format!("{SHORT}[budget.api]\nmax_tokens = 100\n"),
    );
    let tokens = |s: &Sandbox| -> f64 {
        let v = s
            .triage(["budget", "check", "api"])
            .run()
            .status(0)
            .stdout_json();
        assert_eq!(v["backend"], "redis", "{v}");
        v["tokens"].as_f64().unwrap()
    };
    s.triage(["budget", "record", "api", "--outcome", "failure"])
        .run()
        .status(0);
    assert_eq!(tokens(&s), 99.0);
    let stall = server.stall(3.0);
    for _ in 0..5 {
        let r = s
            .triage(["budget", "record", "api", "--outcome", "failure"])
            .run()
            .status(0);
        assert!(
            r.stderr().contains("kept the record for the fleet's Redis"),
            "{}",
            r.stderr()
        );
    }
    let kept = std::fs::read_dir(s.root().join("logs/budget.outbox"))
        .unwrap()
        .count();
    assert_eq!(kept, 5, "every record taken locally waits for the fleet");
    stall.join().unwrap();
    // Redis answers: the next record pushes those that waited. The calls sent during the stall
    // may also have reached Redis once it woke: their nonces make each count once.
    s.triage(["budget", "record", "api", "--outcome", "failure"])
        .run()
        .status(0);
    assert_eq!(tokens(&s), 93.0, "1 + 5 + 1 failures, each once");
    assert_eq!(
        std::fs::read_dir(s.root().join("logs/budget.outbox"))
            .unwrap()
            .count(),
        0
    );
    let again = s.triage(["store", "sync"]).run().status(0).stdout_json();
    assert_eq!(again["budget_records"]["pushed"], 0, "{again}");
}

#[test]
fn store_sync_pushes_the_budget_records_kept_while_redis_was_down() {
    let Some(mut server) = Server::start() else {
        return;
    };
    let s = Sandbox::with_store(&server.url());
    s.write(
        ".triage.toml",
        format!("{FAST}[budget.api]\nmax_tokens = 10\ntoken_ratio = 0.5\n"),
    );
    server.kill();
    for outcome in ["failure", "failure", "success"] {
        s.triage(["budget", "record", "api", "--outcome", outcome])
            .run()
            .status(0);
    }
    server.restart();
    let done = s.triage(["store", "sync"]).run().status(0).stdout_json();
    assert_eq!(done["budget_records"]["pushed"], 3, "{done}");
    let v = s
        .triage(["budget", "check", "api"])
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(
        (v["backend"].as_str(), v["tokens"].as_f64()),
        (Some("redis"), Some(8.5))
    );
}

#[test]
fn a_damaged_budget_on_redis_counts_as_spent_and_a_count_above_the_maximum_as_full() {
    let Some(server) = Server::start() else {
        return;
    };
    let s = Sandbox::with_store(&server.url());
    s.write(".triage.toml", "[budget.api]\nmax_tokens = 4\n");
    let mut con = redis::Client::open(server.url())
        .and_then(|c| c.get_connection())
        .unwrap();
    let key = format!("triage:{{{}}}:budget:api", s.namespace());
    let check = |s: &Sandbox| -> Value {
        let r = s.triage(["budget", "check", "api"]).run().status(0);
        assert!(r.stderr().is_empty(), "{}", r.stderr());
        r.stdout_json()
    };
    for (stored, tokens) in [("garbage", 0.0), ("-3000", 0.0), ("99999999", 4.0)] {
        let _: () = redis::cmd("HSET")
            .arg(&key)
            .arg("milli")
            .arg(stored)
            .query(&mut con)
            .unwrap();
        let v = check(&s);
        assert_eq!(v["backend"], "redis", "{v}");
        assert_eq!(v["tokens"], tokens, "{stored}: {v}");
    }
}
