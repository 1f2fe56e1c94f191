//! `record-error` and `report` (issue 5): concurrent writers, torn lines, thresholds,
//! resolutions, pruning, templates.

use crate::common::{json_out, skip_unless_script, Sandbox};
use serde_json::Value;
use std::collections::HashSet;

const NOW: &str = "2026-02-04T14:30:22Z";

fn record(s: &Sandbox, input: &str, args: &[&str]) -> Value {
    let mut a = vec!["record-error"];
    a.extend_from_slice(args);
    let out = s
        .triage(&a)
        .env("TRIAGE_NOW", NOW)
        .stdin(input)
        .run()
        .status(0);
    json_out(&out)
}

fn log_lines(s: &Sandbox) -> Vec<String> {
    s.read(".triage/logs/errors.jsonl")
        .lines()
        .map(String::from)
        .collect()
}

fn warning_names(v: &Value) -> Vec<String> {
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_string())
        .collect()
}

/// The command itself, from real parallel processes (fewer of them: each is a process start).
#[test]
fn parallel_record_error_processes_never_share_an_id() {
    let s = Sandbox::new();
    let children: Vec<_> = (0..8)
        .map(|i| {
            let script = format!(
                "for n in 1 2 3 4 5 6; do echo '{{\"kind\":\"crash\"}}' | \"$0\" record-error --session p{i} --agent a{i} >/dev/null || exit 1; done"
            );
            let mut c = std::process::Command::new("sh");
            c.args(["-c", &script, crate::common::bin().to_str().unwrap()])
                .current_dir(s.path())
                .env_remove("TRIAGE_DIR")
                .env_remove("CLAUDE_PROJECT_DIR");
            c.spawn().unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let lines = log_lines(&s);
    assert_eq!(lines.len(), 48);
    let ids: HashSet<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["error_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ids.len(), 48);
}

#[test]
fn a_torn_last_line_is_cut_off_by_the_next_append() {
    let s = Sandbox::new();
    record(&s, r#"{"kind":"timeout"}"#, &["--session", "s1"]);
    let log = s.root().join("logs/errors.jsonl");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut f, br#"{"error_id":"torn","kind":"cra"#).unwrap();
    let r = s.triage(["report"]).run().stdout_json();
    assert_eq!(r["skipped_lines"], 1, "a torn tail is skipped and counted");
    let v = record(&s, "connection reset by peer", &["--session", "s1"]);
    assert!(v["detail"]
        .as_str()
        .unwrap()
        .contains("connection reset by peer"));
    assert_eq!(v["kind"], "network_error");
    // The next writer, holding the lock, cut the fragment off: no garbage line stays.
    let lines = log_lines(&s);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(serde_json::from_str::<Value>(&lines[1]).unwrap(), {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("warnings");
        v
    });
    let out = s.triage(["report"]).run();
    let r = json_out(&out);
    assert_eq!(r["records"], 2);
    assert_eq!(r["skipped_lines"], 0);
}

#[test]
fn report_counts_a_torn_tail_as_one_skipped_line() {
    let s = Sandbox::new();
    record(&s, r#"{"kind":"timeout"}"#, &["--agent", "a"]);
    let log = s.root().join("logs/errors.jsonl");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut f, br#"{"error_id":"to"#).unwrap();
    let r = s.triage(["report"]).run().stdout_json();
    assert_eq!(
        (r["records"].as_u64(), r["skipped_lines"].as_u64()),
        (Some(1), Some(1))
    );
}

#[test]
fn fifth_error_in_a_session_carries_the_session_threshold() {
    let s = Sandbox::new();
    for i in 1..=5 {
        let v = record(
            &s,
            r#"{"kind":"timeout"}"#,
            &["--session", "s1", "--agent", "a"],
        );
        assert_eq!(
            warning_names(&v).contains(&"session_failure_threshold".to_string()),
            i == 5,
            "call {i}: {v}"
        );
    }
    // -e: a crossed threshold is a negative verdict.
    s.cmd(&["record-error", "-e", "--session", "s1", "--kind", "crash"])
        .assert()
        .code(1);
}

#[test]
fn a_third_failing_agent_in_a_workflow_is_a_cascade() {
    let s = Sandbox::new();
    for (i, agent) in ["researcher", "researcher", "calculator", "editor"]
        .iter()
        .enumerate()
    {
        let v = record(
            &s,
            r#"{"kind":"crash"}"#,
            &["--workflow", "w1", "--agent", agent],
        );
        assert_eq!(warning_names(&v) == ["cascade"], i == 3, "call {i}: {v}");
    }
}

#[test]
fn phase_ratio_uses_the_policys_phase_size() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[phases.2]\nsize = 3\n");
    let args = ["--workflow", "w", "--phase", "2", "--agent"];
    let v = record(&s, "{}", &[&args[..], &["a"]].concat());
    assert!(warning_names(&v).is_empty());
    let v = record(&s, "{}", &[&args[..], &["b"]].concat());
    assert_eq!(warning_names(&v), ["phase_failure_ratio"]);
    let v = record(
        &s,
        "{}",
        &[
            "--workflow",
            "x",
            "--phase",
            "9",
            "--phase-size",
            "1",
            "--agent",
            "c",
        ],
    );
    assert_eq!(warning_names(&v), ["phase_failure_ratio"]);
}

#[test]
fn counters_are_rebuilt_when_they_do_not_match_the_log() {
    let s = Sandbox::new();
    for _ in 0..3 {
        record(&s, "{}", &["--session", "s1"]);
    }
    // A line written by someone else, and lost counters: both are caught up from the log.
    let log = s.root().join("logs/errors.jsonl");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(
        &mut f,
        b"{\"error_id\":\"x-000099\",\"session_id\":\"s1\"}\n",
    )
    .unwrap();
    std::fs::remove_file(s.root().join("logs/errors.counters.json")).unwrap();
    let v = record(&s, "{}", &["--session", "s1"]);
    assert_eq!(warning_names(&v), ["session_failure_threshold"]);
    assert!(v["error_id"].as_str().unwrap().ends_with("-000100"), "{v}");
}

#[test]
fn hook_payloads_and_workflow_log_lines_are_recorded() {
    let s = Sandbox::new();
    let v = record(
        &s,
        r#"{"hook_event_name":"PostToolUseFailure","session_id":"abc","tool_name":"Task","tool_input":{"subagent_type":"researcher"},"error":"Exit code 1","duration_ms":4000}"#,
        &[],
    );
    assert_eq!(
        (v["session_id"].as_str(), v["agent"].as_str()),
        (Some("abc"), Some("researcher"))
    );
    assert_eq!(v["duration_ms"], 4000);
    assert_eq!(v["status"], "error");
    let v = record(
        &s,
        r#"{"timestamp":"2026-02-04T14:30:22Z","session_id":"s","phase":2,"agent":"statistician-consultant","error_type":"timeout","error_message":"Agent exceeded 5 minute timeout","retry_count":2,"resolution":"user_escalation","user_choice":"proceed_without"}"#,
        &[
            "--preserved",
            "a.md",
            "--preserved",
            "b.md",
            "--severity",
            "critical",
        ],
    );
    assert_eq!(v["kind"], "timeout");
    assert_eq!(v["timestamp"], "2026-02-04T14:30:22.000Z");
    assert_eq!(v["resolution"]["user_choice"], "proceed_without");
    assert_eq!(v["preserved_outputs"], serde_json::json!(["a.md", "b.md"]));
    assert_eq!(v["severity"], "critical");
}

#[test]
fn resolve_appends_a_line_and_report_counts_it() {
    let s = Sandbox::new();
    let v = record(
        &s,
        r#"{"kind":"timeout"}"#,
        &["--agent", "researcher", "--session", "s"],
    );
    record(
        &s,
        r#"{"kind":"timeout"}"#,
        &["--agent", "researcher", "--session", "s"],
    );
    let before = s.read(".triage/logs/errors.jsonl");
    let id = v["error_id"].as_str().unwrap();
    let out = s
        .triage([
            "record-error",
            "--resolve",
            id,
            "--action-taken",
            "retry",
            "--successful",
            "true",
        ])
        .run();
    let r = json_out(&out);
    assert_eq!(
        (r["resolves"].as_str(), r["agent"].as_str()),
        (Some(id), Some("researcher"))
    );
    assert!(
        s.read(".triage/logs/errors.jsonl").starts_with(&before),
        "old lines untouched"
    );
    let rep = s.triage(["report", "--session", "s"]).run().stdout_json();
    assert_eq!(rep["groups"][0]["resolution_rate"], 0.5);
    // An unknown id: a warning and exit 0, or 65 under --strict.
    s.cmd(&[
        "record-error",
        "--resolve",
        "nope",
        "--action-taken",
        "x",
        "--successful",
        "false",
    ])
    .assert()
    .code(0)
    .stderr(predicates::str::contains("no record with error_id `nope`"));
    s.cmd(&[
        "record-error",
        "--strict",
        "--resolve",
        "nope",
        "--action-taken",
        "x",
        "--successful",
        "false",
    ])
    .assert()
    .code(65);
    s.cmd(&["record-error", "--resolve", id]).assert().code(64);
}

#[test]
fn report_groups_filters_and_prints_tables() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[agents.researcher]\ntimeout = \"1m\"\n");
    for (agent, kind, ms) in [
        ("researcher", "timeout", 90_000),
        ("researcher", "crash", 1000),
        ("editor", "timeout", 5),
    ] {
        let input = format!(r#"{{"kind":"{kind}","duration_ms":{ms},"session_id":"s"}}"#);
        record(&s, &input, &["--agent", agent]);
    }
    let r = s.triage(["report", "--by", "agent"]).run().stdout_json();
    assert_eq!(r["groups"][0]["key"], "researcher");
    assert_eq!(r["groups"][0]["durations"]["max_ms"], 90_000);
    assert_eq!(r["groups"][0]["durations"]["past_timeout"], 1);
    let r = s
        .triage(["report", "--by", "kind", "--agent", "editor"])
        .run()
        .stdout_json();
    assert_eq!(r["records"], 1);
    assert_eq!(r["groups"][0]["key"], "timeout");
    let r = s
        .triage(["report", "--since", "1h"])
        .env("TRIAGE_NOW", "2026-02-04T16:00:00Z")
        .run()
        .stdout_json();
    assert_eq!(r["records"], 0);
    let out = s.triage(["report", "--text"]).run();
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .starts_with("3 error records in 1 session and"),
        "{text}"
    );
    let header = text.lines().nth(4).unwrap();
    let row = text.lines().nth(5).unwrap();
    assert!(header.starts_with("AGENT       COUNT"), "{text}");
    let at = header.find("COUNT").unwrap();
    assert_eq!(
        row[at..at + 5].trim(),
        "2",
        "counts align under COUNT:\n{text}"
    );
    s.cmd(&["report", "--since", "whenever"]).assert().code(64);
}

#[test]
fn prune_moves_old_records_to_the_archive_and_loses_nothing() {
    let s = Sandbox::new();
    for (now, session) in [
        ("2026-01-01T00:00:00Z", "old"),
        ("2026-01-02T00:00:00Z", "old"),
        ("2026-02-04T00:00:00Z", "new"),
    ] {
        s.cmd(&["record-error", "--session", session, "--kind", "crash"])
            .env("TRIAGE_NOW", now)
            .assert()
            .code(0);
    }
    let before: HashSet<String> = log_lines(&s).into_iter().collect();
    let out = s
        .triage(["report", "prune", "--older-than", "30d"])
        .env("TRIAGE_NOW", "2026-02-05T00:00:00Z")
        .run();
    let r = json_out(&out);
    assert_eq!(
        (r["moved"].as_u64(), r["kept"].as_u64()),
        (Some(2), Some(1))
    );
    let archive = std::fs::read_to_string(s.path().join(r["archive"].as_str().unwrap())).unwrap();
    let after: HashSet<String> = log_lines(&s)
        .into_iter()
        .chain(archive.lines().map(String::from))
        .collect();
    assert_eq!(before, after);
    assert_eq!(log_lines(&s).len(), 1);
    // The counters follow the log: "old" no longer counts, and ids keep growing.
    let v = record(&s, "{}", &["--session", "new"]);
    assert!(v["error_id"].as_str().unwrap().ends_with("-000004"), "{v}");
}

#[test]
fn templates_render_from_the_log_as_text_and_json() {
    let s = Sandbox::new();
    for agent in ["a", "b"] {
        record(
            &s,
            r#"{"kind":"timeout","detail":"slow"}"#,
            &["--session", "s", "--phase", "2", "--agent", agent],
        );
    }
    let out = s
        .triage([
            "report",
            "--session",
            "s",
            "--template",
            "multiple-failures",
            "--text",
        ])
        .run();
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(
        text.starts_with("[MULTIPLE FAILURES] 2 agents failed in Phase 2\n"),
        "{text}"
    );
    let v = s
        .triage(["report", "--session", "s", "--template", "agent-failure"])
        .run()
        .stdout_json();
    assert_eq!(
        (v["template"].as_str(), v["agent_name"].as_str()),
        (Some("agent-failure"), Some("b"))
    );
    assert_eq!(v["options"][3]["letter"], "D");
    s.cmd(&["report", "--template", "pipeline-status"])
        .assert()
        .code(0)
        .stderr(predicates::str::contains("--pipeline"));
}

/// The seed's "Enter choice" line asks a person, so `--text` prints it only to a terminal:
/// the same template through a pipe ends with its options, through a pty (`script`) with the
/// prompt line.
#[test]
fn the_choice_prompt_line_is_printed_only_to_a_terminal() {
    let s = Sandbox::new();
    for agent in ["a", "b"] {
        record(
            &s,
            r#"{"kind":"timeout","detail":"slow"}"#,
            &["--session", "s", "--phase", "2", "--agent", agent],
        );
    }
    let args = [
        "report",
        "--session",
        "s",
        "--template",
        "agent-failure",
        "--text",
    ];
    let piped = s.triage(args).run();
    let piped = String::from_utf8_lossy(&piped.stdout);
    assert!(!piped.contains("Enter choice"), "{piped}");
    if !skip_unless_script() {
        return;
    }
    let line = std::iter::once(crate::common::bin().display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let tty = s
        .command("script")
        .args(["-qec", &line, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .env("NO_COLOR", "1")
        .stdin_null()
        .run();
    let tty = String::from_utf8_lossy(&tty.stdout);
    assert!(tty.contains("Enter choice [A/B/C/D]:"), "{tty}");
    assert!(
        tty.trim_end().ends_with("Enter choice [A/B/C/D]:"),
        "the prompt is the last line: {tty}"
    );
}

#[test]
fn record_error_entry_point_in_bin_runs() {
    let s = Sandbox::new();
    let link = s.path().join("record-error");
    std::os::unix::fs::symlink(crate::common::bin(), &link).unwrap();
    let out = s
        .command(&link)
        .args(["--kind", "crash", "--agent", "x"])
        .stdin_null()
        .run();
    assert_eq!(json_out(&out)["agent"], "x");
}

#[test]
fn report_lists_the_highest_crossings_and_counts_the_rest() {
    let s = Sandbox::new();
    let mut log = String::new();
    for session in 0..30 {
        // Session k has 5 + k % 7 failures: all cross the threshold of 5.
        for i in 0..(5 + session % 7) {
            log.push_str(&format!(
                "{{\"error_id\":\"err-{session}-{i}\",\"timestamp\":\"2026-11-23T10:00:00.000Z\",\"session_id\":\"s{session:02}\",\"agent\":\"a\",\"kind\":\"timeout\"}}\n"
            ));
        }
    }
    s.write(".triage/logs/errors.jsonl", log);
    let r = s.triage(["report"]).run().stdout_json();
    assert_eq!(r["thresholds_crossed"]["session_failure_threshold"], 30);
    let listed = r["thresholds"].as_array().unwrap();
    assert_eq!(listed.len(), 20);
    let counts: Vec<u64> = listed
        .iter()
        .map(|c| c["count"].as_u64().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    assert_eq!(counts[0], 11);
    let text = s.triage(["report", "--text"]).run();
    assert!(String::from_utf8_lossy(&text.stdout)
        .contains("session_failure_threshold: 10 more not listed (the 20 highest are)"));
}

/// `record-error --breaker KEY` for the failure that opens its breaker advises no retry the
/// breaker would deny: the answer and the record say `escalate`, with the reason, as the hook
/// does; the failure before it still says `retry`.
#[test]
fn record_error_on_the_failure_that_opens_its_breaker_says_escalate() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[breaker.k]\nfailure_threshold = 2\n");
    let input = r#"{"kind": "timeout", "detail": "Agent exceeded 5 minute timeout"}"#;
    let args = ["--agent", "a", "--breaker", "k"];
    let first = record(&s, input, &args);
    assert_eq!(first["action"], "retry", "{first}");
    assert_eq!(first["breaker"]["state"], "closed", "{first}");
    let second = record(&s, input, &args);
    assert_eq!(second["breaker"]["state"], "open", "{second}");
    assert_eq!(second["action"], "escalate", "{second}");
    assert_eq!(second["retry"], Value::Null, "{second}");
    let why = second["context"]["action_reason"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("breaker `k` is open"), "{second}");
    let last: Value = serde_json::from_str(log_lines(&s).last().unwrap()).unwrap();
    assert_eq!(last["action"], "escalate", "the record as written: {last}");
}

/// Seed 000, Recovery Best Practices, "When to Retry vs Abort": abort when the circuit breaker
/// opens twice. A breaker that opens, waits its cooldown, and opens again on the failed probe
/// crosses `breaker_reopened`; a success while closed starts the count again.
#[test]
fn a_breaker_opening_twice_without_a_success_warns_to_abort() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker.k]\nfailure_threshold = 1\ncooldown = \"30s\"\n",
    );
    let input = r#"{"kind": "timeout", "detail": "Agent exceeded 5 minute timeout"}"#;
    let at = |t: &str, args: &[&str]| {
        let mut a = vec!["record-error", "--agent", "a"];
        a.extend_from_slice(args);
        json_out(
            &s.triage(&a)
                .env("TRIAGE_NOW", t)
                .stdin(input)
                .run()
                .status(0),
        )
    };
    let names = |v: &Value| -> Vec<String> {
        v["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w["name"].as_str().map(String::from))
            .collect()
    };
    let first = at("2026-03-01T10:00:00Z", &["--breaker", "k"]);
    assert_eq!(first["breaker"]["state"], "open", "{first}");
    assert!(
        !names(&first).contains(&"breaker_reopened".into()),
        "{first}"
    );
    // The cooldown ends; the probe the next caller takes fails: open for the second time.
    s.triage(["breaker", "check", "k"])
        .env("TRIAGE_NOW", "2026-03-01T10:00:31Z")
        .run()
        .status(0);
    let second = at("2026-03-01T10:00:32Z", &["--breaker", "k"]);
    assert_eq!(second["breaker"]["state"], "open", "{second}");
    assert!(
        names(&second).contains(&"breaker_reopened".into()),
        "{second}"
    );
    let w = second["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "breaker_reopened")
        .unwrap();
    assert_eq!(w["count"], 2, "{w}");
    assert!(
        w["message"]
            .as_str()
            .unwrap()
            .contains("abort the workflow"),
        "{w}"
    );
    // A reset starts the count again: the next opening is the first.
    s.triage(["breaker", "reset", "k"])
        .env("TRIAGE_NOW", "2026-03-01T10:01:00Z")
        .run()
        .status(0);
    let third = at("2026-03-01T10:01:01Z", &["--breaker", "k"]);
    assert_eq!(third["breaker"]["state"], "open", "{third}");
    assert!(
        !names(&third).contains(&"breaker_reopened".into()),
        "{third}"
    );
}
