//! `triage errors`: ids newest first, every filter, JSON lines and the table, and `--follow`
//! against a real writer appending and a prune replacing the log underneath it.

use crate::common::Sandbox;
use crate::text_output::{fixture_log, NOW};
use serde_json::Value;
use std::io::BufRead;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

fn with_log(n: usize) -> Sandbox {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.root().join("logs")).unwrap();
    std::fs::write(s.root().join("logs/errors.jsonl"), fixture_log(n)).unwrap();
    s
}

fn lines(s: &Sandbox, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["errors"];
    all.extend_from_slice(args);
    let out = s.triage(&all).env("TRIAGE_NOW", NOW).run().status(0);
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn ids(v: &[Value]) -> Vec<String> {
    v.iter()
        .map(|r| r["error_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn lists_records_with_ids_newest_first() {
    let s = with_log(12);
    let all = lines(&s, &[]);
    assert_eq!(all.len(), 12, "records only, not the resolution line");
    let times: Vec<&str> = all
        .iter()
        .map(|r| r["timestamp"].as_str().unwrap())
        .collect();
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted, "newest first");
    assert!(all.iter().all(|r| r["error_id"].is_string()));
    assert_eq!(lines(&s, &["-n", "3"]), all[..3].to_vec());
}

#[test]
fn every_filter_narrows_the_list() {
    let s = with_log(30);
    let all = lines(&s, &[]);
    let count = |f: &dyn Fn(&Value) -> bool| all.iter().filter(|r| f(r)).count();
    for (flag, value, field) in [
        ("--agent", "researcher", "agent"),
        ("--kind", "timeout", "kind"),
        ("--session", "s2", "session_id"),
        ("--workflow", "w1", "workflow_id"),
    ] {
        let got = lines(&s, &[flag, value]);
        assert!(!got.is_empty(), "{flag}");
        assert!(got.iter().all(|r| r[field] == value), "{flag}");
        assert_eq!(got.len(), count(&|r| r[field] == value), "{flag}");
    }
    // The fixture's first record (the newest) is resolved by a later line.
    let unresolved = lines(&s, &["--unresolved"]);
    assert_eq!(unresolved.len(), all.len() - 1);
    assert!(!ids(&unresolved).contains(&ids(&all)[0]));
    let since = lines(&s, &["--since", "2h"]);
    let until = lines(&s, &["--until", "2h"]);
    assert_eq!(since.len() + until.len(), all.len());
    assert!(!since.is_empty() && !until.is_empty());
    let both = lines(
        &s,
        &["--since", "5h", "--until", "2h", "--agent", "researcher"],
    );
    assert!(both.iter().all(|r| r["agent"] == "researcher"));
    s.cmd(&["errors", "--until", "whenever"])
        .assert()
        .code(64)
        .stderr(predicates::str::contains(
            "triage errors: --until `whenever` is neither a duration",
        ));
}

#[test]
fn the_table_shows_the_ids_resolve_needs() {
    let s = with_log(5);
    for width in ["80", "200"] {
        let out = s
            .triage(["errors", "--text", "--unresolved"])
            .env("TRIAGE_NOW", NOW)
            .env("COLUMNS", width)
            .run();
        let text = String::from_utf8(out.stdout.clone()).unwrap();
        assert!(
            text.starts_with("4 error records in ./.triage/logs/errors.jsonl (unresolved)"),
            "{text}"
        );
        for id in ids(&lines(&s, &["--unresolved"])) {
            assert!(text.contains(&id), "{width}: {id} whole in\n{text}");
        }
        assert!(text
            .lines()
            .all(|l| l.chars().count() <= width.parse().unwrap()));
    }
    let none = s
        .triage(["errors", "--text", "--agent", "nobody"])
        .env("COLUMNS", "200")
        .run();
    let text = String::from_utf8(none.stdout.clone()).unwrap();
    assert!(
        text.contains("no error record matches agent nobody (5 records in the log)"),
        "{text}"
    );
}

/// Reads the follower's lines on a thread, so the test waits on a channel, never a sleep.
struct Follow {
    child: std::process::Child,
    rx: mpsc::Receiver<String>,
}

impl Follow {
    fn next(&self) -> Value {
        let line = self
            .rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a line from errors --follow within 20 s");
        serde_json::from_str(&line).unwrap()
    }

    fn nothing_pending(&self) -> bool {
        self.rx.try_recv().is_err()
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn record(s: &Sandbox, at: &str, agent: &str) -> String {
    let out = s
        .triage(["record-error", "--agent", agent, "--session", "live"])
        .env("TRIAGE_NOW", at)
        .stdin(r#"{"kind": "timeout", "detail": "no answer"}"#)
        .run();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["error_id"].as_str().unwrap().to_string()
}

#[test]
fn follow_prints_new_records_as_a_writer_appends_and_survives_a_prune() {
    let s = with_log(6);
    let ready = record(&s, NOW, "before");
    let mut child = s
        .std_cmd(&["errors", "--follow", "-n", "1", "--session", "live"])
        .env("TRIAGE_NOW", NOW)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let f = Follow { child, rx };
    // The one record of session `live` so far: the follower is reading.
    assert_eq!(f.next()["error_id"], ready.as_str());
    // A writer in another thread appends ten.
    let at = |min: i64| {
        (chrono::DateTime::parse_from_rfc3339(NOW).unwrap() + chrono::Duration::minutes(min))
            .to_rfc3339()
    };
    let writer = {
        let root = s.root();
        let times: Vec<String> = (1..=10).map(at).collect();
        std::thread::spawn(move || {
            let w = Sandbox::new();
            times
                .iter()
                .map(|t| {
                    let out = w
                        .triage(["record-error", "--agent", "writer", "--session", "live"])
                        .env("TRIAGE_DIR", &root)
                        .env("TRIAGE_NOW", t)
                        .stdin(r#"{"kind": "crash", "detail": "boom"}"#)
                        .run();
                    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                    v["error_id"].as_str().unwrap().to_string()
                })
                .collect::<Vec<String>>()
        })
    };
    let written = writer.join().unwrap();
    let seen: Vec<String> = (0..10)
        .map(|_| f.next()["error_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(seen, written, "every record once, in order");
    // A prune moves the fixture's old records away and renames the rest over the log.
    let out = s
        .triage(["report", "prune", "--older-than", "30m"])
        .env("TRIAGE_NOW", at(10))
        .run();
    let pruned: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(pruned["moved"].as_u64().unwrap() >= 5, "{pruned}");
    assert!(pruned["kept"].as_u64().unwrap() >= 10, "{pruned}");
    let after = record(&s, &at(11), "after-prune");
    let next = f.next();
    assert_eq!(
        next["error_id"],
        after.as_str(),
        "no kept record shown twice"
    );
    assert_eq!(next["agent"], "after-prune");
    assert!(f.nothing_pending());
}

#[test]
fn follow_starts_with_the_last_records_oldest_first() {
    let s = with_log(6);
    let newest = ids(&lines(&s, &["-n", "3"]));
    let mut child = s
        .std_cmd(&["errors", "--follow", "-n", "3"])
        .env("TRIAGE_NOW", NOW)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let f = Follow { child, rx };
    let first: Vec<String> = (0..3)
        .map(|_| f.next()["error_id"].as_str().unwrap().to_string())
        .collect();
    let mut want = newest;
    want.reverse();
    assert_eq!(first, want);
    let id = record(&s, "2026-02-04T15:01:00Z", "late");
    assert_eq!(f.next()["error_id"], id.as_str());
}

/// `--unresolved` lists what the thresholds still count: a person's decision (a resolution
/// with a choice and no success) closes a record, one that says `--successful false` does not.
#[test]
fn unresolved_agrees_with_the_thresholds_on_what_a_decision_closes() {
    let s = Sandbox::new();
    let mut recorded = Vec::new();
    for agent in ["a", "b", "c"] {
        let out = s
            .triage(["record-error", "--kind", "timeout", "--agent", agent])
            .args(["--workflow", "w", "--session", "s"])
            .run();
        recorded.push(
            crate::common::json_out(&out)["error_id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    s.cmd(&["record-error", "--resolve", &recorded[0]])
        .args(["--action-taken", "user_escalation", "--user-choice", "B"])
        .assert()
        .success();
    s.cmd(&["record-error", "--resolve", &recorded[1]])
        .args(["--action-taken", "retry", "--successful", "false"])
        .assert()
        .success();
    let open = ids(&lines(&s, &["--unresolved"]));
    assert_eq!(open, vec![recorded[2].clone(), recorded[1].clone()]);
}
