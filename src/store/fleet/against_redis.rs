//! The scripts themselves, against a real `redis-server` (one per test, as `tests/fleet` starts
//! them; a test skips, saying why, when it is not installed): compare-and-set breakers under a
//! race, the log's append with its counters, nonces, paging, the server's clock, and timeouts.

// The server helper is `tests/fleet`'s own (its TLS half serves only those suites); a test
// fails by panicking, as tests do.
#![allow(clippy::panic, dead_code)]

#[path = "../../../tests/fleet/server.rs"]
mod server;

use super::log::{Append, Change, Hash, Id};
use super::{breaker::Call, Config, Remote, Target};
use crate::core::breaker::{self as machine, Breaker, CallReport, Outcome, State, Transition};
use crate::core::policy::Policy;
use server::{Server, Silent};
use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn config(url: &str, ns: &str) -> Config {
    Config {
        target: Target::parse(url, None).unwrap(),
        namespace: ns.to_string(),
        // Generous: these tests race many threads on a loaded machine; timeouts have their
        // own tests.
        connect_timeout: Duration::from_secs(5),
        command_timeout: Duration::from_secs(5),
        log_max_len: 0,
    }
}

fn event(b: &Breaker, t: &Transition) -> String {
    serde_json::json!({"key": b.key, "from": t.from, "to": t.to, "reason": t.reason, "generation": t.generation}).to_string()
}

fn call<'a>(key: &'a str, fresh: &'a dyn Fn() -> Breaker, now: Option<i64>) -> Call<'a> {
    Call {
        key,
        fresh,
        now,
        deadline: Instant::now() + Duration::from_secs(60),
        event: &event,
    }
}

fn events(r: &mut Remote) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    r.breaker_events(|_, line| {
        out.push(serde_json::from_slice(line).unwrap());
        true
    })
    .unwrap();
    out
}

const T0: i64 = 1_767_323_045_000;

/// The open failures of `session`, as the log's counters hold them.
fn session_open(r: &mut Remote, session: &str) -> u64 {
    let n: Option<u64> = r
        .query(
            "reading the counters",
            redis::cmd("HGET").arg(r.key("open:sessions")).arg(session),
        )
        .unwrap();
    n.unwrap_or(0)
}

/// The unit counters of `scope` (field, count).
fn scope_units(r: &mut Remote, scope: &str) -> Vec<(String, u64)> {
    r.query(
        "reading the counters",
        redis::cmd("HGETALL").arg(r.key(&format!("open:units:{scope}"))),
    )
    .unwrap()
}

#[test]
fn racing_failures_open_the_breaker_exactly_once() {
    let Some(server) = Server::start() else {
        return;
    };
    let url = server.url();
    let threads = 32;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let url = url.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut r = Remote::connect(&config(&url, "race")).unwrap();
                let s = Policy::default().breaker_for("api");
                let fresh = || Breaker::new("api");
                barrier.wait();
                let report = CallReport {
                    outcome: Some(Outcome::Failure),
                    ..CallReport::default()
                };
                let done = r
                    .breaker(&call("api", &fresh, Some(T0)), |b, now| {
                        machine::record(b, &s, &report, now).map(|(_, tr)| (tr.len(), tr))
                    })
                    .unwrap()
                    .unwrap();
                done.out
            })
        })
        .collect();
    let results: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let transitions: usize = results.iter().sum();
    assert_eq!(transitions, 1, "exactly one closed → open: {results:?}");
    let mut r = Remote::connect(&config(&url, "race")).unwrap();
    let ev = events(&mut r);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["to"], "open");
    let b: Breaker = serde_json::from_slice(&r.breaker_peek("api").unwrap().unwrap()).unwrap();
    assert_eq!(b.state, State::Open);
    // Every failure was counted: 2 trip it, the other 30 arrive while open (late).
    assert_eq!(b.totals.failures, 32);
    assert_eq!(r.breaker_keys().unwrap(), vec!["api".to_string()]);
}

#[test]
fn racing_checks_in_half_open_grant_one_probe() {
    let Some(server) = Server::start() else {
        return;
    };
    let url = server.url();
    let s = Policy::default().breaker_for("api");
    let fresh = || Breaker::new("api");
    let mut r = Remote::connect(&config(&url, "probe")).unwrap();
    // Open it at T0.
    r.breaker(&call("api", &fresh, Some(T0)), |b, now| {
        let mut tr = machine::trip(b, None, now);
        tr.extend(machine::half_open(b, now).unwrap());
        Ok::<_, ()>(((), tr))
    })
    .unwrap()
    .unwrap();
    let threads = 32;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (url, barrier, s) = (url.clone(), Arc::clone(&barrier), s.clone());
            std::thread::spawn(move || {
                let mut r = Remote::connect(&config(&url, "probe")).unwrap();
                let fresh = || Breaker::new("api");
                barrier.wait();
                r.breaker(&call("api", &fresh, Some(T0 + 1000)), |b, now| {
                    let (p, tr) = machine::check(b, &s, now);
                    Ok::<_, ()>((p.allowed, tr))
                })
                .unwrap()
                .unwrap()
                .out
            })
        })
        .collect();
    let granted = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|a| *a)
        .count();
    assert_eq!(granted, 1, "one probe in half-open");
}

#[test]
fn without_triage_now_the_server_clock_is_now() {
    let Some(server) = Server::start() else {
        return;
    };
    let mut r = Remote::connect(&config(&server.url(), "clock")).unwrap();
    let fresh = || Breaker::new("k");
    let before = r.time_ms().unwrap();
    let done = r
        .breaker(&call("k", &fresh, None), |b, now| {
            let tr = machine::trip(b, Some(now + 60_000), now);
            Ok::<_, ()>((b.forced_until, tr))
        })
        .unwrap()
        .unwrap();
    let after = r.time_ms().unwrap();
    let until = done.out.unwrap() - 60_000;
    assert!(
        before <= until && until <= after,
        "{before} <= {until} <= {after}"
    );
}

#[test]
fn an_unusable_state_is_started_afresh_and_kept() {
    let Some(server) = Server::start() else {
        return;
    };
    let mut r = Remote::connect(&config(&server.url(), "bad")).unwrap();
    let raw = redis::Client::open(server.url()).unwrap();
    let mut con = raw.get_connection().unwrap();
    let _: () = redis::cmd("HSET")
        .arg("triage:{bad}:breaker:k")
        .arg("state")
        .arg("{not json")
        .query(&mut con)
        .unwrap();
    let fresh = || Breaker::new("k");
    let s = Policy::default().breaker_for("k");
    let done = r
        .breaker(&call("k", &fresh, Some(T0)), |b, now| {
            Ok::<_, ()>(machine::check(b, &s, now))
        })
        .unwrap()
        .unwrap();
    assert!(done.rebuilt.is_some());
    assert!(done.out.allowed);
    let kept: String = redis::cmd("HGET")
        .arg("triage:{bad}:breaker:k")
        .arg("unusable")
        .query(&mut con)
        .unwrap();
    assert_eq!(kept, "{not json");
}

fn changes(session: &str, unit: &str, delta: i64) -> Vec<Change> {
    vec![
        Change {
            hash: Hash::Sessions,
            field: session.into(),
            delta,
            since: false,
        },
        Change {
            hash: Hash::Units,
            field: unit.into(),
            delta,
            since: true,
        },
    ]
}

#[test]
fn writers_racing_append_every_record_once_with_exact_counters() {
    let Some(server) = Server::start() else {
        return;
    };
    let url = server.url();
    let (writers, each) = (32, 200);
    let barrier = Arc::new(Barrier::new(writers));
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let (url, barrier) = (url.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let mut r = Remote::connect(&config(&url, "log")).unwrap();
                barrier.wait();
                let mut ids = Vec::new();
                for i in 0..each {
                    let session = format!("s{}", w % 4);
                    let ch = changes(&session, &format!("agent{}", w % 8), 1);
                    let nonce = format!("n-{w}-{i}");
                    let a = r
                        .append(&Append {
                            before_id: br#"{"error_id":""#,
                            after_id: format!(r#"","w":{w},"i":{i}}}"#).as_bytes(),
                            id: Id::Sequence("err-20260101T000000000Z-".into()),
                            nonce: &nonce,
                            keep_nonce: false,
                            scope: "wf",
                            session: Some(&session),
                            changes: &ch,
                        })
                        .unwrap();
                    assert!(a.added);
                    ids.push(a.error_id);
                }
                ids
            })
        })
        .collect();
    let ids: Vec<String> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(ids.len(), 6400);
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        6400,
        "unique ids"
    );
    let mut r = Remote::connect(&config(&url, "log")).unwrap();
    assert_eq!(r.counts().unwrap().records, 6400);
    let mut in_stream = BTreeSet::new();
    let read = r
        .read_log("-", |_, line| {
            let v: serde_json::Value = serde_json::from_slice(line).unwrap();
            in_stream.insert(v["error_id"].as_str().unwrap().to_string());
            true
        })
        .unwrap();
    assert_eq!(read, 6400);
    assert_eq!(in_stream.len(), 6400);
    for s in 0..4 {
        assert_eq!(session_open(&mut r, &format!("s{s}")), 1600);
    }
    let units = scope_units(&mut r, "wf");
    assert_eq!(units.len(), 8);
    assert!(units.iter().all(|(_, n)| *n == 800), "{units:?}");
}

#[test]
fn a_nonce_seen_before_adds_nothing() {
    let Some(server) = Server::start() else {
        return;
    };
    let mut r = Remote::connect(&config(&server.url(), "nonce")).unwrap();
    let ch = changes("s", "a", 1);
    let a = Append {
        before_id: br#"{"error_id":"err-local-1"}"#,
        after_id: b"",
        id: Id::Keep("err-local-1".into()),
        nonce: "err-local-1",
        keep_nonce: false,
        scope: "s",
        session: Some("s"),
        changes: &ch,
    };
    let first = r.append(&a).unwrap();
    let again = r.append(&a).unwrap();
    assert!(first.added && !again.added);
    assert_eq!(again.error_id, "err-local-1");
    assert_eq!(again.stream_id, first.stream_id);
    assert_eq!(r.counts().unwrap().records, 1);
    assert_eq!(session_open(&mut r, "s"), 1);
}

#[test]
fn counters_go_down_to_zero_and_no_further_and_remember_where_failures_begin() {
    let Some(server) = Server::start() else {
        return;
    };
    let mut r = Remote::connect(&config(&server.url(), "down")).unwrap();
    let mut n = 0;
    let mut push = |r: &mut Remote, delta: i64| {
        n += 1;
        let ch = changes("s", "a", delta);
        r.append(&Append {
            before_id: br#"{"error_id":""#,
            after_id: br#""}"#,
            id: Id::Sequence("e-".into()),
            nonce: &format!("x{n}"),
            keep_nonce: false,
            scope: "wf",
            session: Some("s"),
            changes: &ch,
        })
        .unwrap()
    };
    let first = push(&mut r, 1);
    push(&mut r, 1);
    assert_eq!(r.unit_since("wf", "a").unwrap(), Some(first.stream_id));
    push(&mut r, -1);
    push(&mut r, -1);
    let after = push(&mut r, -1);
    assert_eq!(after.session_open, 0);
    assert!(after.units.is_empty(), "{:?}", after.units);
    assert_eq!(r.unit_since("wf", "a").unwrap(), None);
    let reopened = push(&mut r, 1);
    assert_eq!(reopened.units, vec![("a".to_string(), 1)]);
    assert_eq!(r.unit_since("wf", "a").unwrap(), Some(reopened.stream_id));
}

#[test]
fn reads_page_through_long_logs_in_order() {
    let Some(server) = Server::start() else {
        return;
    };
    let mut r = Remote::connect(&config(&server.url(), "pages")).unwrap();
    let total = super::log::PAGE * 3 + 7;
    for i in 0..total {
        r.append(&Append {
            before_id: br#"{"error_id":""#,
            after_id: format!(r#"","i":{i}}}"#).as_bytes(),
            id: Id::Sequence("e-".into()),
            nonce: &format!("p{i}"),
            keep_nonce: false,
            scope: "",
            session: None,
            changes: &[],
        })
        .unwrap();
    }
    let mut seen = Vec::new();
    r.read_log("-", |_, line| {
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        seen.push(v["i"].as_u64().unwrap() as usize);
        true
    })
    .unwrap();
    assert_eq!(seen, (0..total).collect::<Vec<_>>());
}

#[test]
fn a_server_that_never_answers_costs_one_timeout() {
    let silent = Silent::start();
    let cfg = Config {
        connect_timeout: Duration::from_millis(50),
        command_timeout: Duration::from_millis(50),
        ..config(&silent.url(), "silent")
    };
    let start = Instant::now();
    // The TCP connect succeeds; with no password and no db the handshake sends nothing, so
    // the first command is what waits.
    let result = Remote::connect(&cfg).and_then(|mut r| r.ping().map(|_| ()));
    let took = start.elapsed();
    let e = result.unwrap_err();
    assert!(e.to_string().contains("no answer in time"), "{e}");
    assert!(took < Duration::from_millis(1500), "took {took:?}");
}

#[test]
fn a_closed_port_is_refused_at_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = config(&format!("redis://127.0.0.1:{port}/0"), "none");
    let start = Instant::now();
    let e = Remote::connect(&cfg).unwrap_err();
    assert!(e.to_string().contains("cannot connect"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[test]
fn a_password_from_the_url_or_the_environment_is_sent() {
    let Some(server) = Server::start() else {
        return;
    };
    let raw = redis::Client::open(server.url()).unwrap();
    let mut con = raw.get_connection().unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("hunter2")
        .query(&mut con)
        .unwrap();
    let url = format!("redis://:hunter2@127.0.0.1:{}/3", server.port);
    let mut r = Remote::connect(&config(&url, "pw")).unwrap();
    r.ping().unwrap();
    let mut cfg = config(&server.url(), "pw");
    cfg.target = Target::parse(&server.url(), Some("hunter2")).unwrap();
    Remote::connect(&cfg).unwrap().ping().unwrap();
    let e = Remote::connect(&config(&server.url(), "pw"))
        .and_then(|mut r| r.ping().map(|_| ()))
        .unwrap_err();
    assert!(!e.to_string().contains("hunter2"));
}

#[test]
fn a_killed_server_fails_the_call_and_a_restarted_one_answers_again() {
    let Some(mut server) = Server::start() else {
        return;
    };
    let cfg = Config {
        connect_timeout: Duration::from_millis(200),
        command_timeout: Duration::from_millis(200),
        ..config(&server.url(), "restart")
    };
    let mut r = Remote::connect(&cfg).unwrap();
    r.append(&Append {
        before_id: br#"{"error_id":""#,
        after_id: br#""}"#,
        id: Id::Sequence("e-".into()),
        nonce: "before",
        keep_nonce: false,
        scope: "",
        session: None,
        changes: &[],
    })
    .unwrap();
    server.kill();
    let start = Instant::now();
    assert!(r.ping().is_err());
    assert!(Remote::connect(&cfg).is_err());
    assert!(start.elapsed() < Duration::from_secs(2));
    server.restart();
    let mut r = Remote::connect(&cfg).unwrap();
    // The append-only file kept what was written before the crash.
    assert_eq!(r.counts().unwrap().records, 1);
}

/// Says on stderr that the running test skips because `tool` is missing, or fails it when the
/// variable `require` is set (`.ci/run` sets it where it installed the tool); as
/// `tests/cli/common.rs` does for the suites.
fn skip_unless_tool(tool: &str, require: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|p| p.join(tool).is_file()));
    if !found {
        let test = std::thread::current()
            .name()
            .unwrap_or("a test")
            .to_string();
        if std::env::var_os(require).is_some_and(|v| !v.is_empty()) {
            panic!("{test}: {tool} is not installed, and {require} is set");
        }
        eprintln!("skipped: {test}: {tool} is not installed");
    }
    found
}
