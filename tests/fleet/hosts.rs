//! Hosts sharing one Redis, as processes: 4 state roots (4 "hosts", each its own folder and
//! files) with one namespace, 8 processes each, racing on one breaker and on the log.

use crate::breaker::{at, T0};
use crate::common::{json_out, Run, Sandbox};
use crate::server::Server;
use std::collections::BTreeSet;
use std::process::Stdio;

const HOST_POLICY: &str = "[breaker]\nfailure_threshold = 2\n\n[store]\nnamespace = \"fleet\"\nconnect_timeout = \"10s\"\ncommand_timeout = \"10s\"\n";

fn hosts(server: &Server, n: usize) -> Vec<Sandbox> {
    (0..n)
        .map(|_| {
            let s = Sandbox::with_store(&server.url());
            s.write(".triage.toml", HOST_POLICY);
            s
        })
        .collect()
}

/// The fleet's breaker events, read through any host.
fn events(s: &Sandbox) -> Vec<serde_json::Value> {
    let url = s.store.clone().unwrap();
    let mut con = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .unwrap();
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg("triage:{fleet}:breaker-events")
        .arg("-")
        .arg("+")
        .query(&mut con)
        .unwrap();
    entries
        .iter()
        .flat_map(|(_, f)| f.iter().filter(|(k, _)| k == "line"))
        .map(|(_, v)| serde_json::from_str(v).unwrap())
        .collect()
}

/// Runs `args` in 8 processes on each host at once; their outputs.
fn race(hosts: &[Sandbox], args: &[&str], now: i64) -> Vec<Run> {
    let children: Vec<_> = hosts
        .iter()
        .flat_map(|h| {
            (0..8).map(move |_| {
                h.triage(args)
                    .env("TRIAGE_STORE", h.store.as_ref().unwrap())
                    .env("TRIAGE_NOW", at(now))
                    .env("TRIAGE_LOCK_TIMEOUT", "60s")
                    .spawn()
            })
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait().status(0);
            assert!(
                !String::from_utf8_lossy(&out.stderr).contains("local files"),
                "a call fell back: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            out
        })
        .collect()
}

#[test]
fn four_hosts_of_eight_processes_make_one_transition_and_grant_one_probe() {
    let Some(server) = Server::start() else {
        return;
    };
    let hosts = hosts(&server, 4);
    race(
        &hosts,
        &["breaker", "record", "api", "--outcome", "failure"],
        T0,
    );
    let opened: Vec<_> = events(&hosts[0])
        .into_iter()
        .filter(|e| e["to"] == "open")
        .collect();
    assert_eq!(opened.len(), 1, "exactly one closed → open: {opened:?}");
    // Every host sees it open, none has a breaker file of its own.
    for h in &hosts {
        let out = h
            .triage(["breaker", "check", "api"])
            .env("TRIAGE_NOW", at(T0 + 1))
            .run();
        assert_eq!(json_out(&out)["reason"], "open");
        assert!(!h.exists(".triage/breakers"));
    }
    // After the cooldown, 32 processes on 4 hosts check at once: one probe.
    let outs = race(&hosts, &["breaker", "check", "api"], T0 + 60);
    let reasons: Vec<String> = outs
        .iter()
        .map(|o| json_out(o)["reason"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        reasons.iter().filter(|r| *r == "probe_granted").count(),
        1,
        "{reasons:?}"
    );
    assert!(reasons
        .iter()
        .all(|r| r == "probe_granted" || r == "probes_exhausted"));
    let half: Vec<_> = events(&hosts[0])
        .into_iter()
        .filter(|e| e["to"] == "half_open")
        .collect();
    assert_eq!(half.len(), 1, "{half:?}");
}

#[test]
fn thirty_two_writers_of_two_hundred_records_leave_6400_entries_and_exact_counters() {
    let Some(server) = Server::start() else {
        return;
    };
    let hosts = hosts(&server, 4);
    let writers: Vec<_> = (0..32)
        .map(|w| {
            let h = &hosts[w % 4];
            let mut c = h.triage([
                "record-error",
                "--session",
                &format!("s{}", w % 4),
                "--workflow",
                "wf",
                "--agent",
                &format!("agent{}", w % 8),
                "--kind",
                "timeout",
                "--detail",
                "slow",
            ]);
            c.env("TRIAGE_STORE", h.store.as_ref().unwrap())
                .env("TRIAGE_NOW", at(T0))
                .env("TRIAGE_LOCK_TIMEOUT", "60s");
            std::thread::spawn(move || {
                (0..200)
                    .map(|_| {
                        let out = c.run().status(0);
                        assert!(
                            out.stderr.is_empty(),
                            "{}",
                            String::from_utf8_lossy(&out.stderr)
                        );
                        json_out(&out)["error_id"].as_str().unwrap().to_string()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let ids: Vec<String> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        6400,
        "unique ids"
    );
    let mut con = redis::Client::open(server.url().as_str())
        .and_then(|c| c.get_connection())
        .unwrap();
    let len: u64 = redis::cmd("XLEN")
        .arg("triage:{fleet}:errors")
        .query(&mut con)
        .unwrap();
    assert_eq!(len, 6400);
    let sessions: Vec<(String, u64)> = redis::cmd("HGETALL")
        .arg("triage:{fleet}:open:sessions")
        .query(&mut con)
        .unwrap();
    assert_eq!(sessions.len(), 4);
    assert!(sessions.iter().all(|(_, n)| *n == 1600), "{sessions:?}");
    let units: Vec<(String, u64)> = redis::cmd("HGETALL")
        .arg("triage:{fleet}:open:units:wf")
        .query(&mut con)
        .unwrap();
    assert_eq!(units.len(), 8);
    assert!(units.iter().all(|(_, n)| *n == 800), "{units:?}");
    // Every host's report covers the fleet.
    let out = hosts[3].triage(["report"]).run();
    let v = json_out(&out);
    assert_eq!(v["records"], 6400, "{v}");
    // No host wrote a log of its own.
    assert!(hosts.iter().all(|h| !h.exists(".triage/logs/errors.jsonl")));
}

#[test]
fn session_start_on_one_host_names_the_open_breaker_and_the_error_of_another() {
    let Some(server) = Server::start() else {
        return;
    };
    let hosts = hosts(&server, 2);
    let (a, b) = (&hosts[0], &hosts[1]);
    for _ in 0..2 {
        a.triage([
            "record-error",
            "--session",
            "old",
            "--agent",
            "researcher",
            "--kind",
            "timeout",
        ])
        .env("TRIAGE_NOW", at(T0))
        .run()
        .status(0);
        a.triage(["breaker", "record", "researcher", "--outcome", "failure"])
            .env("TRIAGE_NOW", at(T0))
            .run();
    }
    let out = b
        .triage(["hook"])
        .env("TRIAGE_STORE", b.store.as_ref().unwrap())
        .env("TRIAGE_NOW", at(T0 + 5))
        .stdin(r#"{"session_id": "new", "hook_event_name": "SessionStart"}"#)
        .run()
        .status(0);
    let context = json_out(&out)["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(context.contains("researcher"), "{context}");
    assert!(context.contains("open"), "{context}");
    assert!(
        context.contains("Unresolved errors from earlier sessions of this project: 2"),
        "the other host's unresolved errors: {context}"
    );
}

#[test]
fn errors_lists_and_follows_the_records_of_every_host() {
    let Some(server) = Server::start() else {
        return;
    };
    let hosts = hosts(&server, 2);
    let (a, b) = (&hosts[0], &hosts[1]);
    let rec = |h: &Sandbox, agent: &str| {
        let out = h
            .triage([
                "record-error",
                "--session",
                "s",
                "--agent",
                agent,
                "--kind",
                "timeout",
            ])
            .run();
        json_out(&out)["error_id"].as_str().unwrap().to_string()
    };
    let first = rec(a, "researcher");
    let out = b.triage(["errors"]).run().status(0);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&first));
    // Following on host b sees what host a writes next.
    let mut follower = b
        .std_cmd(&["errors", "--follow"])
        .env("TRIAGE_STORE", b.store.as_ref().unwrap())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = follower.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let old = rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap();
    assert!(old.contains(&first), "{old}");
    let second = rec(a, "statistician");
    let new = rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap();
    let _ = follower.kill();
    let _ = follower.wait();
    assert!(new.contains(&second), "{new}");
}
