//! `permit` and `budget` (admission control for a fleet of agents): exact under racing
//! processes, and a holder killed with SIGKILL frees its slot within the lease time.
//!
//! One suite for both backends: each scenario takes its sandbox from `crate::backend`, the
//! file store in the `cli` target and a real Redis in the `fleet` target (which includes this
//! file). On files time moves with TRIAGE_NOW (in the past of the machine's clock, which the
//! files also judge leases by); a Redis judges by its own `TIME` alone, so there a lease runs
//! out in real time, polled for (bounded), never slept for.

use crate::common::{Run, Sandbox};
use serde_json::Value;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn permit(s: &Sandbox, args: &[&str]) -> Run {
    let mut a = vec!["permit"];
    a.extend_from_slice(args);
    s.triage(&a).run()
}

#[test]
fn racing_holders_never_hold_more_than_max_permits_at_once() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    s.write(".triage.toml", "[permits.api]\nmax = 3\nlease = \"30s\"\n");
    // Each holder appends `enter` once it holds its permit and `leave` before it gives it
    // back; appends are atomic, so the file's order is the order things happened in.
    let holders: Vec<_> = (0..12)
        .map(|_| {
            s.triage([
                "run",
                "--permit",
                "api",
                "--permit-wait",
                "60s",
                "--quiet",
                "--",
                "sh",
                "-c",
                "echo enter >> events; sleep 0.15; echo leave >> events",
            ])
            .spawn()
        })
        .collect();
    for h in holders {
        h.wait().status(0);
    }
    let events = s.read("events");
    let (mut inside, mut most, mut entered) = (0i32, 0i32, 0);
    for line in events.lines() {
        match line {
            "enter" => {
                inside += 1;
                entered += 1;
            }
            "leave" => inside -= 1,
            other => panic!("unexpected line {other:?}"),
        }
        most = most.max(inside);
    }
    assert_eq!(entered, 12, "every holder ran:\n{events}");
    assert!(most <= 3, "{most} held at once, max is 3:\n{events}");
    assert!(most >= 2, "the permits never overlapped at all:\n{events}");
    let st = permit(s, &["status", "api"]).status(0).stdout_json();
    assert_eq!(
        st["permits"][0]["held"], 0,
        "every permit was released: {st}"
    );
}

#[test]
fn racing_acquires_grant_exactly_max_leases() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    s.write(".triage.toml", "[permits.api]\nmax = 5\nlease = \"1m\"\n");
    // Every racer waits for the lock as long as it takes: this counts grants, not timeouts (an
    // emulated CPU under a full suite takes seconds to start sixteen processes).
    let runs: Vec<_> = (0..16)
        .map(|_| {
            s.triage(["permit", "acquire", "api"])
                .env("TRIAGE_LOCK_TIMEOUT", "60s")
                .spawn()
        })
        .collect();
    let mut granted = std::collections::BTreeSet::new();
    let mut busy = 0;
    for r in runs {
        let r = r.wait();
        match r.code() {
            Some(0) => {
                let v = r.stdout_json();
                assert_eq!(v["acquired"], true);
                granted.insert(v["lease"].as_str().unwrap().to_string());
            }
            Some(75) => {
                let v = r.stdout_json();
                assert_eq!(v["acquired"], false);
                assert_eq!(v["refused"], "busy");
                busy += 1;
            }
            other => panic!("exit {other:?}: {}", r.stderr()),
        }
    }
    assert_eq!(granted.len(), 5, "distinct leases granted");
    assert_eq!(busy, 11);
    let st = permit(s, &["status", "api"]).status(0).stdout_json();
    assert_eq!(st["permits"][0]["held"], 5, "{st}");
}

/// Acquires `key` until it is granted (bounded): a lease nobody released ran out.
fn acquire_once_free(s: &Sandbox, key: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = s.triage(["permit", "acquire", key]).run();
        if r.code() == Some(0) {
            return r.stdout_json();
        }
        r.status(75);
        assert!(
            Instant::now() < deadline,
            "the lease of `{key}` never ran out"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_released_or_expired_lease_frees_its_slot_and_renew_keeps_it() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    if crate::backend::SERVER_CLOCK {
        // The server's clock: no TRIAGE_NOW moves it. A long lease for renew and release, a
        // short one that runs out while polled.
        s.write(
            ".triage.toml",
            "[permits.api]\nmax = 1\nlease = \"60s\"\n[permits.short]\nmax = 1\nlease = \"1s\"\n",
        );
        let a = permit(s, &["acquire", "api"]).status(0).stdout_json();
        let lease = a["lease"].as_str().unwrap().to_string();
        permit(s, &["acquire", "api"]).status(75);
        let r = permit(s, &["renew", "api", &lease]).status(0).stdout_json();
        assert_eq!(r["renewed"], true, "{r}");
        assert!(r["expires"].as_str().unwrap() >= a["expires"].as_str().unwrap());
        permit(s, &["release", "api", &lease]).status(0);
        let gone = s
            .triage(["permit", "renew", "api", &lease, "-e"])
            .run()
            .status(1);
        assert_eq!(gone.stdout_json()["renewed"], false);
        permit(s, &["acquire", "api"]).status(0);
        // Never released: granted again only once it ran out.
        permit(s, &["acquire", "short"]).status(0);
        assert_eq!(acquire_once_free(s, "short")["acquired"], true);
        return;
    }
    s.write(".triage.toml", "[permits.api]\nmax = 1\nlease = \"10s\"\n");
    // An hour ago: the machine's clock is past every lease taken here.
    let t0 = now_s() - 3600;
    let at = |t: u64| t.to_string();
    let a = s
        .triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", at(t0))
        .run()
        .status(0)
        .stdout_json();
    let lease = a["lease"].as_str().unwrap().to_string();
    s.triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", at(t0 + 5))
        .run()
        .status(75);
    // Renewed at +8: it now runs to +18, so +12 finds it still held, and so does +19 (within
    // the 2 s the files allow for clocks that differ).
    let r = s
        .triage(["permit", "renew", "api", &lease])
        .env("TRIAGE_NOW", at(t0 + 8))
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(r["renewed"], true);
    for t in [12, 19] {
        s.triage(["permit", "acquire", "api"])
            .env("TRIAGE_NOW", at(t0 + t))
            .run()
            .status(75);
    }
    let b2 = s
        .triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", at(t0 + 20))
        .run()
        .status(0)
        .stdout_json();
    let second = b2["lease"].as_str().unwrap().to_string();
    // The run-out lease is gone: renewing it is refused (exit 1 with -e), its slot taken.
    let gone = s
        .triage(["permit", "renew", "api", &lease, "-e"])
        .env("TRIAGE_NOW", at(t0 + 21))
        .run()
        .status(1);
    assert_eq!(gone.stdout_json()["renewed"], false);
    assert!(
        gone.stderr().contains("triage permit: lease"),
        "{}",
        gone.stderr()
    );
    s.triage(["permit", "release", "api", &second])
        .env("TRIAGE_NOW", at(t0 + 22))
        .run()
        .status(0);
    s.triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", at(t0 + 22))
        .run()
        .status(0);
}

#[test]
fn a_holder_killed_with_sigkill_frees_its_slot_within_the_lease_time() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    s.write(".triage.toml", "[permits.api]\nmax = 1\nlease = \"2s\"\n");
    let mut holder = s
        .triage(["run", "--permit", "api", "--quiet", "--", "sleep", "10"])
        .spawn();
    // Wait (bounded) until it holds the permit.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let st: Value = permit(s, &["status", "api"]).status(0).stdout_json();
        if st["permits"][0]["held"] == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the holder never took its permit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    holder.child.kill().unwrap();
    let _ = holder.child.wait();
    // Held still: nobody released it.
    s.triage(["permit", "acquire", "api"]).run().status(75);
    // Its lease (2 s, and on files the 2 s margin) runs out by itself: free again.
    assert_eq!(acquire_once_free(s, "api")["acquired"], true);
}

#[test]
fn budget_arithmetic_is_exact_after_concurrent_failures_and_successes() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    s.write(
        ".triage.toml",
        "[budget.api]\nmax_tokens = 1000\ntoken_ratio = 0.5\n",
    );
    let record = |outcome: &str, n: usize| {
        let runs: Vec<_> = (0..n)
            .map(|_| {
                // A lock not obtained in time is a warning and a record not counted (exit 0,
                // best effort): under an emulated CPU running the whole suite, thirty processes
                // took longer than the default 2 s to reach it. This test is about the
                // arithmetic, so each waits as long as it takes.
                s.triage(["budget", "record", "api", "--outcome", outcome])
                    .env("TRIAGE_LOCK_TIMEOUT", "60s")
                    .spawn()
            })
            .collect();
        for r in runs {
            r.wait().status(0);
        }
    };
    record("failure", 30);
    let v = s
        .triage(["budget", "check", "api"])
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(v["tokens"], 970.0, "{v}");
    record("success", 20);
    let v = s
        .triage(["budget", "check", "api"])
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(v["tokens"], 980.0, "{v}");
    assert_eq!(v["retry_allowed"], true);
}

#[test]
fn a_spent_budget_stops_runs_retries_with_fail_fast() {
    let Some(b) = crate::backend::sandbox() else {
        return;
    };
    let s = &b.sandbox;
    s.write(".triage.toml", "[budget.api]\nmax_tokens = 4\n");
    let r = s
        .triage([
            "run",
            "--budget",
            "api",
            "--retries",
            "5",
            "--delay",
            "0s",
            "--",
            "sh",
            "-c",
            "echo 'HTTP 429 Too Many Requests' >&2; exit 1",
        ])
        .run()
        .status(1);
    let err = r.stderr();
    assert!(
        err.contains("the fleet's retry budget for `api` is spent: fail fast"),
        "{err}"
    );
    let report: Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    // 4 tokens: the 2nd failure leaves 2, not above half, so attempt 2 is the last.
    assert_eq!(report["attempts"].as_array().unwrap().len(), 2, "{report}");
    let v = s
        .triage(["budget", "check", "api", "-e"])
        .run()
        .status(1)
        .stdout_json();
    assert_eq!(v["tokens"], 2.0);
}

/// Whether process `pid` is running (present and not a zombie).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|st| {
            let rest = st.get(st.rfind(')')? + 1..)?.trim_start().to_string();
            Some(!rest.starts_with('Z') && !rest.starts_with('X'))
        })
        .unwrap_or(false)
}

/// A `run --permit` killed outright must not leave its command running: it would hold on to
/// the work while the slot frees at lease expiry, more commands at once than `max`. The
/// command (and what it started) ends with its holder; a command that ends by itself under a
/// permit still reports its own status and signal.
#[test]
fn a_command_run_under_a_permit_ends_when_its_holder_is_killed() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.api]\nmax = 1\nlease = \"1h\"\n[permits.other]\nmax = 1\nlease = \"1h\"\n",
    );
    let mut holder = s
        .triage([
            "run",
            "--permit",
            "api",
            "--quiet",
            "--",
            "sh",
            "-c",
            "echo $$ > cmd.pid; sleep 1000 & echo $! > bg.pid; wait",
        ])
        .spawn();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(s.exists("cmd.pid") && s.exists("bg.pid")) {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (cmd, bg) = (s.read("cmd.pid"), s.read("bg.pid"));
    let (cmd, bg) = (cmd.trim(), bg.trim());
    assert!(running(cmd) && running(bg));
    holder.child.kill().unwrap();
    let _ = holder.child.wait();
    let deadline = Instant::now() + Duration::from_secs(20);
    while running(cmd) || running(bg) {
        assert!(
            Instant::now() < deadline,
            "the command outlived its holder (cmd {}, background {})",
            running(cmd),
            running(bg)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Under a permit, a command's own end is still what run reports.
    let out = s
        .triage([
            "run",
            "--permit",
            "other",
            "--no-retry",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .run();
    assert_eq!(out.code(), Some(3), "{}", out.stderr());
    let out = s
        .triage([
            "run",
            "--permit",
            "other",
            "--no-retry",
            "--",
            "sh",
            "-c",
            "kill -TERM $$",
        ])
        .run();
    let report: Value = serde_json::from_str(out.stderr().lines().last().unwrap_or("{}")).unwrap();
    assert_eq!(
        report["attempts"][0]["end"], "was killed by signal 15",
        "{report:#}"
    );
}
