//! `breaker` on the file store only: its files and locks (the scenarios both backends share
//! are in `breaker.rs`; the fleet's own faults in `tests/fleet`).

use crate::breaker::{at, open_it, run, T0};
use crate::common::{json_out, Sandbox};
use serde_json::Value;

#[test]
fn keys_never_name_a_path_outside_the_state_root() {
    let s = Sandbox::new();
    for key in [
        "../../escape",
        "/etc/passwd",
        ".",
        "..",
        "Agent:researcher",
        "a/b",
        "",
    ] {
        run(&s, T0, &["record", key, "--outcome", "failure"]);
        assert_eq!(run(&s, T0, &["status", key])["breakers"][0]["key"], key);
    }
    assert!(
        !s.path().join("escape").exists()
            && !s.path().parent().unwrap().join("escape.json").exists()
    );
    let names: Vec<String> = std::fs::read_dir(s.root().join("breakers"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    assert_eq!(names.len(), 7, "{names:?}");
    assert_eq!(
        run(&s, T0, &["status"])["breakers"]
            .as_array()
            .unwrap()
            .len(),
        7
    );
}

#[test]
fn a_corrupt_or_unreadable_state_fails_open_and_is_rebuilt() {
    let s = Sandbox::new();
    open_it(&s, "k");
    s.write(
        ".triage/breakers/k.json",
        "{\"state\": \"open\", \"generation\": ",
    );
    let out = s
        .triage(["breaker", "-e", "check", "k"])
        .env("TRIAGE_NOW", at(T0))
        .run()
        .status(0);
    assert_eq!(json_out(&out)["allowed"], true);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("triage breaker: warning: breaker `k` state was unusable"),
        "{err}"
    );
    let rebuilt: Value = serde_json::from_str(&s.read(".triage/breakers/k.json")).unwrap();
    assert_eq!(rebuilt["state"], "closed");
    assert!(std::fs::read_dir(s.root().join("breakers"))
        .unwrap()
        .flatten()
        .any(|e| e
            .file_name()
            .to_string_lossy()
            .starts_with("k.json.corrupt-")));

    // A state that cannot be read at all (a folder in its place) is moved aside too.
    std::fs::remove_file(s.root().join("breakers/k.json")).unwrap();
    std::fs::create_dir(s.root().join("breakers/k.json")).unwrap();
    let v = run(&s, T0, &["check", "k"]);
    assert_eq!(v["allowed"], true);
    assert!(s.root().join("breakers/k.json").is_file());
}

#[test]
fn a_held_lock_fails_open_unless_strict() {
    let s = Sandbox::new();
    open_it(&s, "k");
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(s.root().join("breakers/k.json.lock"))
        .unwrap();
    lock.lock().unwrap();
    let out = s
        .triage(["breaker", "-e", "check", "k"])
        .env("TRIAGE_LOCK_TIMEOUT", "50ms")
        .run()
        .status(0);
    let v = json_out(&out);
    assert_eq!(
        (v["allowed"].as_bool(), v["reason"].as_str()),
        (Some(true), Some("unavailable"))
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("allowing the call"));
    s.triage(["breaker", "--strict", "check", "k"])
        .env("TRIAGE_LOCK_TIMEOUT", "50ms")
        .run()
        .status(75);
    drop(lock);
}

/// Issue 21: a breaker's state is replaced atomically but not durably (SPEC §6 asks fsync of
/// state-write's files only): no fsync on every hook call's path. A failing fsync, which
/// fails state-write, cannot fail a breaker record, because none is made; a record killed
/// before its rename leaves the previous state whole.
#[test]
fn breaker_state_is_replaced_atomically_without_fsync() {
    let s = Sandbox::new();
    run(&s, T0, &["record", "researcher", "--outcome", "failure"]);
    let out = s
        .triage(["breaker", "record", "researcher", "--outcome", "failure"])
        .args(["--strict"])
        .env("TRIAGE_NOW", at(T0 + 1))
        .env("TRIAGE_FAULT", "fsync:eio")
        .run()
        .status(0);
    assert_eq!(json_out(&out)["consecutive_failures"], 2);
    let state = ".triage/breakers/researcher.json";
    let before = s.read(state);
    let killed = s
        .triage(["breaker", "record", "researcher", "--outcome", "failure"])
        .env("TRIAGE_NOW", at(T0 + 2))
        .env("TRIAGE_FAULT", "before-rename:abort")
        .run();
    assert!(!killed.status.success());
    assert_eq!(s.read(state), before);
    // The next record starts from that state (the second failure opened the breaker).
    let failures =
        |text: &str| serde_json::from_str::<Value>(text).unwrap()["totals"]["failures"].clone();
    assert_eq!(failures(&before), 2);
    run(
        &s,
        T0 + 3,
        &["record", "researcher", "--outcome", "failure"],
    );
    assert_eq!(failures(&s.read(state)), 3);
}

/// An existing state is swapped with the new one (RENAME_EXCHANGE), which spares ext4 the
/// forced writeback of a rename over a file; the old version is then removed. Killed between
/// the two, the state is already the new one, and the old one, left under a temp name, is
/// removed by the next write.
#[test]
fn a_write_killed_after_the_exchange_leaves_the_new_state_and_no_litter() {
    let s = Sandbox::new();
    run(&s, T0, &["record", "researcher", "--outcome", "failure"]);
    let killed = s
        .triage(["breaker", "record", "researcher", "--outcome", "failure"])
        .env("TRIAGE_NOW", at(T0 + 1))
        .env("TRIAGE_FAULT", "after-exchange:abort")
        .run();
    assert!(!killed.status.success(), "the fault point was not reached");
    let state = ".triage/breakers/researcher.json";
    let failures =
        |text: &str| serde_json::from_str::<Value>(text).unwrap()["totals"]["failures"].clone();
    assert_eq!(failures(&s.read(state)), 2);
    let others = || -> Vec<String> {
        std::fs::read_dir(s.root().join("breakers"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "researcher.json" && n != "researcher.json.lock")
            .collect()
    };
    let left = others();
    assert_eq!(left.len(), 1, "the old version under a temp name: {left:?}");
    assert_eq!(
        failures(&std::fs::read_to_string(s.root().join("breakers").join(&left[0])).unwrap()),
        1
    );
    run(
        &s,
        T0 + 2,
        &["record", "researcher", "--outcome", "failure"],
    );
    assert_eq!(failures(&s.read(state)), 3);
    assert_eq!(others(), Vec::<String>::new());
}

/// A breaker file with `field` set to `value`, as if planted (a cloned project's `.triage/`).
fn plant(s: &Sandbox, key: &str, fields: &[(&str, Value)]) {
    let path = format!(".triage/breakers/{key}.json");
    let mut b: Value = serde_json::from_str(&s.read(&path)).unwrap();
    for (field, value) in fields {
        b[*field] = value.clone();
    }
    s.write(&path, b.to_string());
}

const TEN_YEARS_MS: i64 = 3650 * 86_400 * 1000;

#[test]
fn a_planted_breaker_open_for_ten_years_half_opens_after_the_policys_cooldown() {
    let s = Sandbox::new();
    open_it(&s, "k");
    plant(
        &s,
        "k",
        &[
            ("open_duration_ms", Value::from(TEN_YEARS_MS)),
            ("opened_at", Value::from(T0 * 1000 + TEN_YEARS_MS)),
        ],
    );
    let out = s
        .triage(["breaker", "check", "k"])
        .env("TRIAGE_NOW", at(T0 + 1))
        .run()
        .status(0);
    let v = json_out(&out);
    assert_eq!(v["allowed"], false, "{v}");
    assert!(v["retry_after_s"].as_u64().unwrap() <= 60, "{v}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("breaker `k` state in")
            && err.contains(".triage/breakers/k.json")
            && err.contains("clamped"),
        "{err}"
    );
    // Clamped once: the file now holds what the policy allows, and says so no more.
    let stored: Value = serde_json::from_str(&s.read(".triage/breakers/k.json")).unwrap();
    assert_eq!(stored["opened_at"], (T0 + 1) * 1000);
    assert_eq!(stored["open_duration_ms"], 60_000);
    let out = s
        .triage(["breaker", "check", "k"])
        .env("TRIAGE_NOW", at(T0 + 30))
        .run()
        .status(0);
    assert!(out.stderr.is_empty(), "{out:?}");

    // The policy's cooldown (60 s) after the check that clamped it, a probe goes through.
    let v = run(&s, T0 + 61, &["check", "k"]);
    assert_eq!(v["allowed"], true, "{v}");
    assert_eq!(v["reason"], "probe_granted");
}

#[test]
fn a_planted_window_of_future_failures_does_not_open_a_breaker() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker]\nfailure_threshold = 0\nfailure_rate = 0.5\nwindow = \"10m\"\nminimum_calls = 5\n",
    );
    run(&s, T0, &["record", "k", "--outcome", "success"]);
    let future: Vec<Value> = (0..1000)
        .map(|i| serde_json::json!({"at": T0 * 1000 + TEN_YEARS_MS + i, "failed": true}))
        .collect();
    plant(&s, "k", &[("calls", Value::from(future))]);
    let out = s
        .triage(["breaker", "record", "k", "--outcome", "failure"])
        .env("TRIAGE_NOW", at(T0 + 1))
        .run()
        .status(0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1000 window calls in the future"), "{err}");
    // One call in the window, fewer than minimum_calls: the rate does not count yet.
    let st = run(&s, T0 + 2, &["status", "k"]);
    assert_eq!(st["breakers"][0]["state"], "closed", "{st}");
    assert_eq!(st["breakers"][0]["window"]["calls"], 1, "{st}");
}
