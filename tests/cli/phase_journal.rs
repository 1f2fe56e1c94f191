//! The manifest's journal (`phase-<N>.json.journal`): while a runner works, each item's change
//! is one appended line, and readers (`phase status`, `resume`, `decide`) see the manifest
//! with its journal's lines laid over it. The journal is hostile ground like the rest of the
//! state root: lines that do not parse or name no item are passed over with a warning, a
//! stale one (of another generation) is not read, a torn last line is dropped, and a journal
//! that is a link is never followed nor written through.

use crate::common::Sandbox;
use serde_json::{json, Value};

const PLAN: &str = "[[items]]\nid = \"a\"\ncommand = \"echo run >> a.runs\"\n[[items]]\nid = \"b\"\ncommand = \"echo run >> b.runs\"\n[[items]]\nid = \"c\"\ncommand = \"echo run >> c.runs\"\n";

fn runs(s: &Sandbox, id: &str) -> usize {
    std::fs::read_to_string(s.path().join(format!("{id}.runs")))
        .unwrap_or_default()
        .lines()
        .count()
}

fn manifest_path(s: &Sandbox) -> std::path::PathBuf {
    s.root().join("workflows/wj/phase-1.json")
}

fn journal_path(s: &Sandbox) -> std::path::PathBuf {
    s.root().join("workflows/wj/phase-1.json.journal")
}

fn state_of(m: &Value, id: &str) -> String {
    m["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id)
        .map(|i| i["state"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// A phase run to the end, then its manifest turned back into one a killed runner left:
/// running, of journal generation 7, with `b` and `c` not started in the file.
fn killed_runner(s: &Sandbox) -> Value {
    s.write("plan.toml", PLAN);
    s.triage([
        "phase",
        "run",
        "plan.toml",
        "--workflow",
        "wj",
        "--phase",
        "1",
    ])
    .run()
    .status(0);
    assert!(
        !journal_path(s).exists(),
        "the journal outlived its run's compaction"
    );
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(manifest_path(s)).unwrap()).unwrap();
    assert!(m.get("journal").is_none(), "{m:#}");
    m["status"] = json!("running");
    m["journal"] = json!(7);
    m["decision"] = Value::Null;
    for i in m["items"].as_array_mut().unwrap() {
        if i["id"] != "a" {
            i["state"] = json!("not_started");
        }
    }
    std::fs::write(manifest_path(s), m.to_string()).unwrap();
    m
}

fn entry(m: &Value, id: &str, state: &str) -> Value {
    let mut e = m["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id)
        .unwrap()
        .clone();
    e["state"] = json!(state);
    e
}

#[test]
fn readers_lay_the_journal_over_the_manifest_and_pass_over_lines_that_name_no_item() {
    let s = Sandbox::new();
    let m = killed_runner(&s);
    let lines = [
        json!({"journal": 7}).to_string(),
        "not json at all".to_string(),
        json!({"i": 99, "e": entry(&m, "b", "complete")}).to_string(),
        // Index 2 is c: an entry naming b there names no item.
        json!({"i": 2, "e": entry(&m, "b", "complete")}).to_string(),
        json!({"i": 1, "e": entry(&m, "b", "complete")}).to_string(),
    ];
    // The last line is torn (no newline): a runner killed mid-append.
    let torn = json!({"i": 2, "e": entry(&m, "c", "complete")}).to_string();
    std::fs::write(
        journal_path(&s),
        format!("{}\n{}", lines.join("\n"), &torn[..torn.len() / 2]),
    )
    .unwrap();
    let out = s
        .triage(["phase", "status", "--workflow", "wj", "--phase", "1"])
        .run()
        .status(0);
    let st = out.stdout_json();
    assert_eq!(state_of(&st, "a"), "complete");
    assert_eq!(state_of(&st, "b"), "complete", "{st:#}");
    assert_eq!(state_of(&st, "c"), "not_started", "a torn line was read");
    let err = out.stderr();
    assert!(
        err.contains("triage phase: warning: 3 line(s) of the journal"),
        "{err}"
    );
    // Resume runs only what neither the file nor the journal has finished, and compacts.
    let out = s
        .triage(["phase", "resume", "--workflow", "wj", "--phase", "1"])
        .run()
        .status(0);
    let doc = out.stdout_json();
    assert_eq!(doc["decision"], "proceed", "{doc:#}");
    assert_eq!((runs(&s, "a"), runs(&s, "b"), runs(&s, "c")), (1, 1, 2));
    assert!(!journal_path(&s).exists());
}

#[test]
fn a_journal_of_another_generation_is_not_read() {
    let s = Sandbox::new();
    let m = killed_runner(&s);
    let lines = [
        json!({"journal": 6}).to_string(),
        json!({"i": 1, "e": entry(&m, "b", "complete")}).to_string(),
    ];
    std::fs::write(journal_path(&s), lines.join("\n") + "\n").unwrap();
    let out = s
        .triage(["phase", "status", "--workflow", "wj", "--phase", "1"])
        .run()
        .status(0);
    assert_eq!(state_of(&out.stdout_json(), "b"), "not_started");
    assert_eq!(out.stderr(), "");
}

#[test]
fn a_journal_that_is_a_link_is_neither_read_nor_written_through() {
    let s = Sandbox::new();
    let m = killed_runner(&s);
    let outside = s.write(
        "outside.jsonl",
        json!({"journal": 7}).to_string()
            + "\n"
            + &json!({"i": 1, "e": entry(&m, "b", "complete")}).to_string()
            + "\n",
    );
    let before = std::fs::read(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, journal_path(&s)).unwrap();
    let out = s
        .triage(["phase", "status", "--workflow", "wj", "--phase", "1"])
        .run()
        .status(0);
    assert_eq!(state_of(&out.stdout_json(), "b"), "not_started");
    assert!(out.stderr().contains("is not read"), "{}", out.stderr());
    let out = s
        .triage(["phase", "resume", "--workflow", "wj", "--phase", "1"])
        .run()
        .status(0);
    assert_eq!(out.stdout_json()["decision"], "proceed");
    assert_eq!((runs(&s, "b"), runs(&s, "c")), (2, 2));
    assert_eq!(
        std::fs::read(&outside).unwrap(),
        before,
        "written through a link"
    );
    assert!(std::fs::symlink_metadata(journal_path(&s)).is_err());
}
