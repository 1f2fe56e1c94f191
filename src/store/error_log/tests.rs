//! The log under concurrent writers: 32 processes (this test binary, run again) write 200
//! records of 8 KB each through [`super::record`], the function `record-error` uses.

use serde_json::Value;
use std::collections::HashSet;
use std::process::Stdio;

/// The child of `thirty_two_writers_leave_6400_whole_lines`: 200 records with 8 KB messages,
/// written in-process through the same `record` the command uses, so the test spawns 32
/// processes rather than 6 400.
#[test]
#[ignore = "a child process of thirty_two_writers_leave_6400_whole_lines"]
fn writer_child() {
    let root = std::env::var("RECORD_CHILD_ROOT").expect("run by the parent test");
    let id = std::env::var("RECORD_CHILD_ID").unwrap();
    let root = std::path::PathBuf::from(root);
    crate::store::files::set_root(&root, true);
    let g = crate::store::ground::testing::ground(root, std::time::Duration::from_secs(60));
    let policy = crate::core::policy::Policy::default();
    let detail: String = format!("writer {id} ")
        .repeat(1000)
        .chars()
        .take(8192)
        .collect();
    for seq in 0..200 {
        let input = serde_json::json!({
            "kind": "timeout", "detail": detail, "session_id": format!("s{id}"),
            "agent": format!("w{id}"), "task_id": format!("{id}-{seq}"),
        });
        let rec = crate::core::error_record::record_from_input(&input);
        super::record(&g, &policy, rec, None).unwrap();
    }
}

#[test]
fn thirty_two_writers_leave_6400_whole_lines() {
    let project = tempfile::tempdir().unwrap();
    let root = project.path().join(".triage");
    std::fs::create_dir_all(&root).unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..32)
        .map(|i| {
            std::process::Command::new(&exe)
                .args([
                    "--ignored",
                    "--exact",
                    "store::error_log::tests::writer_child",
                    "--test-threads=1",
                ])
                .env("RECORD_CHILD_ROOT", &root)
                .env("RECORD_CHILD_ID", i.to_string())
                .env_remove("TRIAGE_DIR")
                .env_remove("TRIAGE_NOW")
                .env_remove("TRIAGE_STORE")
                .env_remove("TRIAGE_CONFIG")
                .env_remove("CLAUDE_PROJECT_DIR")
                .current_dir(project.path())
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let log = std::fs::read_to_string(root.join("logs/errors.jsonl")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 6400);
    let mut ids = HashSet::new();
    let mut tasks = HashSet::new();
    for l in &lines {
        let v: Value = serde_json::from_str(l).expect("every line is whole JSON");
        assert!(v["detail"].as_str().unwrap().len() >= 8000);
        ids.insert(v["error_id"].as_str().unwrap().to_string());
        tasks.insert(v["task_id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.len(), 6400);
    assert_eq!(tasks.len(), 6400);
    let counters: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("logs/errors.counters.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(counters["seq"], 6400);
    assert_eq!(counters["sessions"]["s7"], 200);
}
