//! The operator's commands: `triage store migrate --to URL` copies a project's breakers and
//! error log from its files into a Redis, once however often it runs, after which the fleet
//! serves them; `triage store status` says which backend is in use, how it answers and what
//! it holds.

use crate::breaker::{at, T0};
use crate::common::{json_out, Sandbox};
use crate::server::Server;
use serde_json::Value;

/// `triage ARGS` at `T0 + s`, exit 0 required; its JSON.
fn ok(s: &Sandbox, secs: i64, args: &[&str]) -> Value {
    let out = s
        .triage(args)
        .env("TRIAGE_NOW", at(T0 + secs))
        .run()
        .status(0);
    json_out(&out)
}

#[test]
fn migrate_copies_breakers_and_the_log_once_and_the_fleet_then_serves_them() {
    let Some(server) = Server::start() else {
        return;
    };
    // A project on its files: an open breaker, a closed one, failures of two agents in one
    // session, and one of them resolved by selection.
    let files = Sandbox::new();
    files.write(".triage.toml", "[breaker]\nfailure_threshold = 2\n");
    for i in 0..2 {
        ok(
            &files,
            i,
            &["breaker", "record", "researcher", "--outcome", "failure"],
        );
    }
    ok(
        &files,
        2,
        &["breaker", "record", "writer", "--outcome", "success"],
    );
    for agent in ["analyst", "analyst", "editor"] {
        let rec = ["record-error", "--session", "s1", "--agent", agent];
        ok(&files, 3, &[&rec[..], &["--kind", "timeout"]].concat());
    }
    ok(
        &files,
        4,
        &[
            "record-error",
            "--resolve",
            "--session",
            "s1",
            "--agent",
            "editor",
            "--action-taken",
            "skipped",
        ],
    );
    let local: Vec<String> = files
        .read(".triage/logs/errors.jsonl")
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(local.len(), 4);
    assert_eq!(files.session_open("s1"), Some(2), "analyst's two stay open");
    let st = ok(&files, 5, &["store", "status"]);
    assert_eq!(st["backend"], "files");
    assert_eq!(st["breakers"], 2, "{st}");
    assert_eq!(st["records"], 4, "{st}");
    assert_eq!(st["breaker_events"], 1, "closed -> open: {st}");

    // Copied once; a second run finds everything there.
    let url = server.url();
    let first = ok(&files, 6, &["store", "migrate", "--to", &url]);
    assert_eq!(first["breakers_copied"], 2, "{first}");
    assert_eq!(first["records_copied"], 4, "{first}");
    assert_eq!(first["namespace"], files.namespace().as_str(), "{first}");
    let again = ok(&files, 7, &["store", "migrate", "--to", &url]);
    assert_eq!(again["breakers_copied"], 0, "{again}");
    assert_eq!(again["breakers_kept"], 2, "{again}");
    assert_eq!(again["records_copied"], 0, "{again}");
    assert_eq!(again["records_already"], 4, "{again}");

    // The same project pointed at the fleet, its files gone: everything comes from Redis.
    let fleet = Sandbox {
        dir: files.dir,
        store: Some(url.clone()),
        cache_home: files.cache_home,
    };
    std::fs::remove_dir_all(fleet.root()).unwrap();
    fleet.write(".triage.toml", "[breaker]\nfailure_threshold = 2\n");
    assert_eq!(fleet.stream("errors"), local, "the log as it was, in order");
    assert_eq!(fleet.session_open("s1"), Some(2), "the counters with it");
    let b = ok(&fleet, 8, &["breaker", "status", "researcher"]);
    assert_eq!(b["breakers"][0]["state"], "open", "{b}");
    assert_eq!(b["breakers"][0]["totals"]["opened"], 1, "{b}");
    let rep = ok(&fleet, 8, &["report"]);
    assert_eq!(rep["records"], 3, "{rep}");
    assert_eq!(rep["resolutions"], 1, "{rep}");
    // A new failure on the fleet counts on top of the migrated ones.
    let more = ok(
        &fleet,
        9,
        &[
            "record-error",
            "--session",
            "s1",
            "--agent",
            "analyst",
            "--kind",
            "timeout",
        ],
    );
    assert!(more["error_id"].is_string(), "{more}");
    assert_eq!(fleet.session_open("s1"), Some(3));
    assert!(
        !fleet.exists(".triage/logs/errors.jsonl") && !fleet.exists(".triage/breakers"),
        "nothing fell back to the files"
    );

    // status: the backend, where, how fast, and what it holds.
    let st = ok(&fleet, 10, &["store", "status"]);
    assert_eq!(st["backend"], "redis", "{st}");
    assert_eq!(st["url"], url.as_str(), "{st}");
    assert_eq!(st["namespace"], fleet.namespace().as_str(), "{st}");
    assert_eq!(st["reachable"], true, "{st}");
    assert!(st["latency_ms"].as_f64().is_some_and(|l| l >= 0.0), "{st}");
    assert_eq!(st["breakers"], 2, "{st}");
    assert_eq!(st["records"], 5, "{st}");
    assert_eq!(st["waiting"], 0, "{st}");
}

#[test]
fn migrate_without_a_redis_to_copy_into_says_how_to_name_one() {
    let s = Sandbox::new();
    // A usage error (EX_USAGE).
    let out = s.triage(["store", "migrate"]).run().status(64);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("triage store"), "{err}");
    assert!(err.contains("TRIAGE_STORE=redis://"), "{err}");
}

#[test]
fn the_password_comes_from_triage_redis_password_and_is_never_shown() {
    let Some(server) = Server::start() else {
        return;
    };
    let mut con = redis::Client::open(server.url())
        .and_then(|c| c.get_connection())
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("hunter2")
        .query(&mut con)
        .unwrap();
    let s = Sandbox::with_store(&server.url());
    let with = s
        .triage(["store", "status"])
        .env("TRIAGE_REDIS_PASSWORD", "hunter2")
        .run();
    let v = json_out(&with);
    assert_eq!(v["reachable"], true, "{v}");
    // Refused: a negative verdict.
    let without = s.triage(["-e", "store", "status"]).run().status(1);
    let v = json_out(&without);
    assert_eq!(v["reachable"], false, "{v}");
    let all = format!("{v}{}", String::from_utf8_lossy(&without.stderr));
    assert!(all.contains("triage store:"), "{all}");
    assert!(!all.contains("hunter2"), "{all}");
    // In the URL, it is not shown either.
    let url = server.url().replace("redis://", "redis://:hunter2@");
    let out = s
        .triage(["store", "status"])
        .env("TRIAGE_STORE", &url)
        .run();
    let v = json_out(&out);
    assert_eq!(v["reachable"], true, "{v}");
    assert!(!v.to_string().contains("hunter2"), "{v}");
}
