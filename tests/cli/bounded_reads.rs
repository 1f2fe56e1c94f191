//! Bounded reads: a state file read whole has a size bound, past which it is not read at all
//! and is treated like a corrupt file (the same warning, the same fall back), so a planted
//! sparse file of 4 GiB costs a call nothing. Each case plants one in place of a file a
//! command reads and checks that the command ends with its warning, naming the bound.

use crate::common::Sandbox;
use std::path::Path;

const T0: &str = "2026-11-23T10:00:00Z";

const POLICY: &str =
    "[retry]\nschedule = [\"0s\"]\nmax_attempts = 1\n\n[permits.api]\nmax = 2\nlease = \"1m\"\n";

const PRE: &str = r#"{"hook_event_name":"PreToolUse","session_id":"s1","tool_name":"Agent","tool_use_id":"t1","tool_input":{"subagent_type":"researcher"}}"#;

const FAILURE: &str = r#"{"hook_event_name":"PostToolUseFailure","session_id":"s1","tool_name":"Agent","tool_use_id":"t1","tool_input":{"subagent_type":"researcher"},"error":"boom"}"#;

const HUGE: u64 = 4 << 30;

/// Puts a sparse file of 4 GiB at `path` (no disk is used), in place of what was there.
fn plant(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let f = std::fs::File::create(path).unwrap();
    f.set_len(HUGE).unwrap();
}

fn hook(s: &Sandbox, input: &str) -> crate::common::Run {
    s.triage(["hook"])
        .env("TRIAGE_NOW", T0)
        .stdin(input.to_string())
        .run()
}

fn sandbox() -> Sandbox {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    hook(&s, PRE).status(0);
    hook(&s, FAILURE).status(0);
    s
}

/// The warning names the file, its size and the bound.
fn names_the_bound(err: &str, file: &str, bound: &str) {
    assert!(
        err.contains(file)
            && err.contains(&format!("is {HUGE} bytes"))
            && err.contains(&format!("more than the {bound} triage reads")),
        "{err}"
    );
}

fn log_lines(s: &Sandbox) -> usize {
    std::fs::read_to_string(s.root().join("logs/errors.jsonl"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn a_huge_breaker_file_is_moved_aside_unread_and_the_breaker_starts_closed() {
    let s = sandbox();
    plant(&s.root().join("breakers/researcher.json"));
    let out = hook(&s, PRE).status(0);
    names_the_bound(&out.stderr(), "breakers/researcher.json", "16 MiB");
    assert!(
        out.stderr().contains("started afresh (closed)"),
        "{}",
        out.stderr()
    );
    let len = std::fs::metadata(s.root().join("breakers/researcher.json"))
        .unwrap()
        .len();
    assert!(len < 4096, "the breaker was rewritten: {len}");
}

#[test]
fn a_huge_permit_table_is_moved_aside_unread_and_the_permit_granted() {
    let s = sandbox();
    plant(&s.root().join("permits/api.json"));
    let out = s
        .triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", T0)
        .run()
        .status(0);
    names_the_bound(&out.stderr(), "permits/api.json", "16 MiB");
    assert_eq!(out.stdout_json()["acquired"], true);
}

#[test]
fn a_huge_policy_file_is_not_read_and_the_defaults_hold() {
    let s = sandbox();
    plant(&s.path().join(".triage.toml"));
    let before = log_lines(&s);
    let out = hook(&s, FAILURE).status(0);
    names_the_bound(&out.stderr(), ".triage.toml", "16 MiB");
    assert!(
        out.stderr().contains("using the built-in defaults"),
        "{}",
        out.stderr()
    );
    assert_eq!(log_lines(&s), before + 1, "the failure is still recorded");
}

#[test]
fn a_huge_manifest_is_unreadable_like_a_corrupt_one_and_its_bak_is_read() {
    let s = sandbox();
    s.write(
        "plan.toml",
        "[[items]]\nid = \"a\"\ncommand = \"echo hi\"\n",
    );
    s.triage([
        "phase",
        "run",
        "plan.toml",
        "--workflow",
        "w",
        "--phase",
        "1",
    ])
    .run()
    .status(0);
    let manifest = s.root().join("workflows/w/phase-1.json");
    assert!(s.root().join("workflows/w/phase-1.json.bak").is_file());
    plant(&manifest);
    let out = s
        .triage(["phase", "status", "--workflow", "w", "--phase", "1"])
        .run()
        .status(0);
    assert_eq!(out.stdout_json()["workflow_id"], "w");
    // With no .bak either, it is reported as unreadable, naming the bound.
    plant(&s.root().join("workflows/w/phase-1.json.bak"));
    let out = s
        .triage(["phase", "status", "--workflow", "w", "--phase", "1"])
        .run();
    assert_eq!(out.stdout_json()["ok"], false);
    names_the_bound(&out.stderr(), "phase-1.json", "256 MiB");
}

#[test]
fn huge_counters_and_a_huge_state_file_are_rebuilt() {
    let s = sandbox();
    plant(&s.root().join("logs/errors.counters.json"));
    let before = log_lines(&s);
    let out = hook(&s, FAILURE).status(0);
    names_the_bound(&out.stderr(), "errors.counters.json", "16 MiB");
    assert_eq!(log_lines(&s), before + 1, "the failure is still recorded");

    // A file `state-write` replaces: quarantined as corrupt, the new version written.
    plant(&s.root().join("run/s.json"));
    let out = s
        .triage(["state-write", ".triage/run/s.json"])
        .stdin("{\"a\":1}")
        .run()
        .status(0);
    assert!(out.stderr().contains("was corrupt"), "{}", out.stderr());
    assert_eq!(s.read(".triage/run/s.json").trim(), "{\"a\":1}");
}

#[test]
fn a_huge_plan_is_refused_with_the_bound() {
    let s = Sandbox::new();
    plant(&s.path().join("plan.toml"));
    let out = s
        .triage([
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "w",
            "--phase",
            "1",
        ])
        .run();
    assert_ne!(out.code(), Some(0));
    names_the_bound(&out.stderr(), "plan.toml", "16 MiB");
}
