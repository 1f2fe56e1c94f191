//! Leases and forced-open periods run by the fleet's server clock (`TIME`), not the host's: a
//! host whose clock is a day behind (libfaketime on the `triage` process; Redis keeps the
//! real time) trips a breaker for a minute and takes a half-open probe, and another host with
//! the right time sees both still in force.

use crate::common::{json_out, Sandbox};
use crate::server::Server;
use serde_json::Value;
use std::path::PathBuf;

/// libfaketime's preload library, or `None` (after saying why) when the test should skip.
fn faketime() -> Option<PathBuf> {
    let found = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file());
    if found.is_none() {
        crate::common::skip(
            "libfaketime is not installed, so no host clock can be skewed",
            "TRIAGE_REQUIRE_FAKETIME",
        );
    }
    found
}

/// One namespace for both hosts, timeouts a loaded machine never reaches, one probe at a time
/// with a five-minute lease.
const POLICY: &str = "[store]\nnamespace = \"clock\"\nconnect_timeout = \"10s\"\ncommand_timeout = \"10s\"\n\n[breaker]\nhalf_open_probes = 1\nprobe_ttl = \"5m\"\n";

/// `triage breaker ARGS` on a host whose clock is `skew` off (`-1d`), or right (`None`); no
/// `TRIAGE_NOW`, so the fleet's clock decides. Exit 0 required; its JSON.
fn breaker(s: &Sandbox, lib: &PathBuf, skew: Option<&str>, args: &[&str]) -> Value {
    let mut a = vec!["breaker"];
    a.extend_from_slice(args);
    let mut c = s.triage(&a);
    if let Some(skew) = skew {
        c.env("LD_PRELOAD", lib).env("FAKETIME", skew);
    }
    c.run().status(0).stdout_json()
}

#[test]
fn a_host_a_day_behind_trips_and_takes_a_probe_by_the_fleets_clock() {
    let Some(lib) = faketime() else {
        return;
    };
    let Some(server) = Server::start() else {
        return;
    };
    let behind = Sandbox::with_store(&server.url());
    // The same project (namespace) on a host with the right time.
    let right = Sandbox::with_store(&server.url());
    behind.write(".triage.toml", POLICY);
    right.write(".triage.toml", POLICY);
    // The skew reaches the process: its own clock is a day behind.
    let d = behind
        .triage(["record-error", "--kind", "timeout"])
        .env("LD_PRELOAD", &lib)
        .env("FAKETIME", "-1d")
        .env("TRIAGE_STORE", "file")
        .run();
    let stamp = json_out(&d)["timestamp"].as_str().unwrap().to_string();
    let host = chrono::DateTime::parse_from_rfc3339(&stamp).unwrap();
    let lag = chrono::Utc::now().signed_duration_since(host);
    assert!(
        lag.num_hours() >= 23,
        "the host's clock is not skewed: {stamp}"
    );

    // Tripped for a minute by the late host: forced open for a minute on every host. By the
    // host's clock it would have ended a day ago.
    breaker(&behind, &lib, Some("-1d"), &["trip", "k", "--for", "60s"]);
    let c = breaker(&right, &lib, None, &["check", "k"]);
    assert_eq!(c["allowed"], false, "{c}");
    assert_eq!(c["reason"], "forced_open", "{c}");
    let s = breaker(&behind, &lib, Some("-1d"), &["status", "k"]);
    assert_eq!(s["breakers"][0]["state"], "forced_open", "{s}");

    // Half-open: the late host takes the probe; its lease runs 5 minutes by the fleet's
    // clock, so the other host is refused a second one (by the host's clock the lease would
    // have expired a day ago).
    breaker(&right, &lib, None, &["half-open", "k"]);
    let p = breaker(&behind, &lib, Some("-1d"), &["check", "k"]);
    assert_eq!(p["reason"], "probe_granted", "{p}");
    let q = breaker(&right, &lib, None, &["check", "k"]);
    assert_eq!(q["allowed"], false, "one probe at a time: {q}");
    assert!(
        !behind.exists(".triage/breakers") && !right.exists(".triage/breakers"),
        "nothing fell back to the files"
    );
}

/// A client whose clock is far ahead, by TRIAGE_NOW or by libfaketime, neither takes nor
/// expires live leases: the script judges by the server's `TIME` alone, and `permit status`
/// and `report` change nothing.
#[test]
fn a_client_far_ahead_does_not_expire_live_leases() {
    let Some(server) = Server::start() else {
        return;
    };
    let s = Sandbox::with_store(&server.url());
    s.write(
        ".triage.toml",
        "[store]\nconnect_timeout = \"10s\"\ncommand_timeout = \"10s\"\n[permits.api]\nmax = 2\nlease = \"5m\"\n",
    );
    let mut leases = Vec::new();
    for _ in 0..2 {
        let v = s
            .triage(["permit", "acquire", "api"])
            .run()
            .status(0)
            .stdout_json();
        leases.push(v["lease"].as_str().unwrap().to_string());
    }
    let year_ahead = (chrono::Utc::now().timestamp() + 365 * 86_400).to_string();
    for args in [
        &["permit", "status"][..],
        &["report"],
        &["permit", "acquire", "api"],
    ] {
        s.triage(args).env("TRIAGE_NOW", &year_ahead).run();
    }
    if let Some(lib) = faketime() {
        for args in [
            &["permit", "status"][..],
            &["report"],
            &["permit", "acquire", "api"],
        ] {
            s.triage(args)
                .env("LD_PRELOAD", &lib)
                .env("FAKETIME", "+1y")
                .run();
        }
    }
    let st = s
        .triage(["permit", "status", "api"])
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(st["permits"][0]["held"], 2, "{st}");
    let mut kept: Vec<String> = st["permits"][0]["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["lease"].as_str().unwrap().to_string())
        .collect();
    kept.sort();
    leases.sort();
    assert_eq!(kept, leases);
    assert!(
        !s.exists(".triage/permits"),
        "nothing fell back to the files"
    );
}
