//! `check-output` (issue 6): seed 001's table through hooks/triage.example.toml, the stop-hook
//! loop guard, PostToolUse on the subagent tool, transcripts, bad rules and large inputs.

use crate::common::{bin, json_out, Sandbox};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("hooks/triage.example.toml")
}

/// Runs check-output with `args` on `stdin`; asserts exit 0 and returns (stdout JSON, stderr).
fn check(s: &Sandbox, args: &[&str], stdin: &str) -> (Value, String) {
    let mut a = vec!["check-output"];
    a.extend_from_slice(args);
    let out = s.triage(&a).stdin(stdin).run().status(0);
    (json_out(&out), out.stderr())
}

/// A hook call: stdout (maybe empty) as JSON or Null, and stderr.
fn hook(s: &Sandbox, extra: &[&str], payload: &Value) -> (Value, String) {
    let mut a = vec!["check-output", "--hook"];
    a.extend_from_slice(extra);
    let out = s.triage(&a).stdin(payload.to_string()).run().status(0);
    let err = out.stderr();
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        (Value::Null, err)
    } else {
        (json_out(&out), err)
    }
}

fn failed(v: &Value) -> Vec<String> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["check"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_example_policy_stays_valid() {
    let text = std::fs::read_to_string(example()).unwrap();
    let p = triage::core::policy::load(&text).expect("hooks/triage.example.toml must load");
    for agent in [
        "researcher",
        "synthesizer",
        "devils-advocate",
        "fact-checker",
        "editor",
        "calculator",
    ] {
        assert_ne!(
            p.agent(agent).output,
            Default::default(),
            "{agent} has no rules"
        );
    }
    let s = Sandbox::new();
    let out = s
        .triage(["config", "check", example().to_str().unwrap()])
        .run();
    assert_eq!(json_out(&out)["ok"], true);
}

/// Seed 001's "Minimum Output Lengths" table, end to end: each row's bad and good output.
#[test]
fn the_example_policys_minimum_output_rules_fail_each_agents_bad_output_and_pass_its_good_one() {
    let s = Sandbox::new();
    let cfg = example();
    let cfg = cfg.to_str().unwrap();
    let filler = |n: usize| "Findings are consistent across the sources reviewed. ".repeat(n);
    let rows: Vec<(&str, String, Vec<&str>, String)> = vec![
        (
            "researcher",
            format!("{} (no citation)", filler(12)),
            vec!["require_all"],
            format!("{} See [1] and https://doi.org/10.1/x.", filler(12)),
        ),
        (
            "researcher",
            "Short, cites [1].".into(),
            vec!["min_chars"],
            format!("{} (Smith et al., 2021)", filler(12)),
        ),
        (
            "synthesizer",
            filler(8),
            vec!["require_all"],
            format!("## Executive summary\n{}", filler(8)),
        ),
        (
            "devils-advocate",
            format!("## Strong points\n{}", filler(5)),
            vec!["require_all"],
            format!("## Strong points\n{}\n## Challenges\nScope.", filler(5)),
        ),
        (
            "fact-checker",
            filler(3),
            vec!["require_any"],
            format!("{}\nVerified: all 12 claims.", filler(3)),
        ),
        (
            "editor",
            "Edited text.".into(),
            vec!["require_all"],
            "Edited text.\n\nStyle checklist: [x] tone [x] tense".into(),
        ),
        (
            "calculator",
            format!("{}\nResult: about forty", filler(2)),
            vec!["require_all"],
            format!("{}\nResult: 4.2 mol/L", filler(2)),
        ),
        (
            "researcher",
            format!("{} [1] TODO: add the conclusion", filler(12)),
            vec!["forbid"],
            format!("{} [1] The conclusion.", filler(12)),
        ),
    ];
    for (agent, bad, fails, good) in rows {
        let input = json!({"agent": agent, "output": bad}).to_string();
        let (v, _) = check(&s, &["--config", cfg], &input);
        assert_eq!(v["ok"], false, "{agent} bad: {v}");
        assert_eq!(failed(&v), fails, "{agent}: {v}");
        assert!(
            ["quality_failed", "validation_failed"].contains(&v["error"]["kind"].as_str().unwrap())
        );
        let input = json!({"agent": agent, "output": good}).to_string();
        let (v, _) = check(&s, &["--config", cfg], &input);
        assert_eq!(v["ok"], true, "{agent} good: {v}");
    }
    // The editor's "original length": the output must not be shorter than the draft.
    s.write(
        "draft.md",
        "A draft that is much longer than its edit. ".repeat(5),
    );
    let (v, _) = check(
        &s,
        &[
            "--config",
            cfg,
            "--raw",
            "--agent",
            "editor",
            "--original",
            "draft.md",
        ],
        "Short.\nStyle checklist: ok",
    );
    assert_eq!(failed(&v), vec!["original_length"]);
}

#[test]
fn the_detail_says_expected_and_found() {
    let s = Sandbox::new();
    let input = json!({"agent": "researcher", "output": "x".repeat(412)}).to_string();
    let (v, _) = check(&s, &["--min-chars", "500"], &input);
    assert_eq!(
        v["checks"][3],
        json!({"check": "min_chars", "ok": false, "detail": "412 characters, at least 500 required"})
    );
    assert_eq!(v["error"]["kind"], "quality_failed");
    assert_eq!(v["agent"], "researcher");
}

/// Seed 004's post-step validation through the example policy: YAML L1 index with mandatory
/// keys, evidence count, L2 file present and not empty, not BLOCKED.
#[test]
fn the_example_policys_post_step_checks_want_the_index_keys_evidence_a_written_l2_file_and_no_blocked_status(
) {
    let s = Sandbox::new();
    let cfg = example();
    let cfg = cfg.to_str().unwrap();
    let good = "agent: implementer\nphase: 6\nstatus: complete\nevidence_count: 3\n";
    let run = |out: &str| {
        let input = json!({"agent": "code-reviewer", "output": out}).to_string();
        check(&s, &["--config", cfg], &input).0
    };
    let v = run(good);
    assert_eq!(failed(&v), vec!["files_exist"]);
    assert_eq!(v["error"]["kind"], "output_missing");
    s.write("L2/report.md", "");
    assert!(run(good)["checks"]
        .to_string()
        .contains("empty file L2/report.md"));
    s.write("L2/report.md", "# Report\n");
    assert_eq!(run(good)["ok"], true);
    let v = run("agent: implementer\nstatus: complete\nevidence_count: 0\n");
    assert_eq!(failed(&v), vec!["required_keys", "jq"]);
    let v = run("agent: a\nphase: 6\nstatus: BLOCKED\nevidence_count: 1\n");
    assert_eq!(failed(&v), vec!["not_blocked"]);
    assert_eq!(v["error"]["kind"], "validation_failed");
    let v = run("agent: [unclosed");
    assert_eq!(failed(&v), vec!["format"]);
}

#[test]
fn input_forms_and_flags() {
    let s = Sandbox::new();
    // An error status in seed 003's shape.
    let (v, _) = check(
        &s,
        &[],
        &json!({"agent": "a", "status": "error", "output": {"status": "error", "detail": "boom"}})
            .to_string(),
    );
    assert_eq!(failed(&v), vec!["status"]);
    // No output field at all.
    let (v, _) = check(&s, &[], r#"{"agent": "a"}"#);
    assert_eq!(v["error"]["kind"], "output_missing");
    // --raw with empty stdin.
    let (v, _) = check(&s, &["--raw", "--agent", "a"], "");
    assert_eq!(failed(&v), vec!["output_present"]);
    // --status overrides the input's.
    let (v, _) = check(
        &s,
        &["--status", "BLOCKED"],
        r#"{"output": "x", "status": "ok"}"#,
    );
    assert_eq!(failed(&v), vec!["not_blocked"]);
    // JSON output with keys and a jq predicate from flags.
    let (v, _) = check(
        &s,
        &[
            "--format",
            "json",
            "--required-key",
            "phase",
            "--jq",
            ".n > 1",
        ],
        r#"{"output": "{\"phase\": 1, \"n\": 2}"}"#,
    );
    assert_eq!(v["ok"], true, "{v}");
    // Files the input names must exist, with content.
    s.write("out/a.md", "content");
    let (v, _) = check(
        &s,
        &["--file", "out/missing.md"],
        r#"{"output": "x", "files": ["out/a.md"]}"#,
    );
    assert_eq!(failed(&v), vec!["files_exist"]);
    let (v, _) = check(&s, &["--files-exist", "out/**/*.md"], r#"{"output": "x"}"#);
    assert_eq!(v["ok"], true, "{v}");
}

#[test]
fn exit_statuses() {
    let s = Sandbox::new();
    let bad = r#"{"output": ""}"#;
    s.triage(["check-output", "-e"]).stdin(bad).run().status(1);
    s.triage(["check-output", "-e"])
        .stdin(r#"{"output": "fine"}"#)
        .run()
        .status(0);
    let out = s
        .triage(["check-output", "--require-all", "(unclosed"])
        .run()
        .status(64);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("triage check-output: --require-all `(unclosed`"),
        "{err}"
    );
    s.triage(["check-output", "--jq", ".a |"]).run().status(64);
    // Not an object: best effort (0 + warning), 65 under --strict.
    let out = s.triage(["check-output"]).stdin("[1]").run().status(0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--raw"));
    s.triage(["check-output", "--strict"])
        .stdin("[1]")
        .run()
        .status(65);
}

#[test]
fn text_output() {
    let s = Sandbox::new();
    let out = s
        .triage([
            "check-output",
            "--text",
            "--raw",
            "--agent",
            "devils-advocate",
        ])
        .args(["--require-all", "(?i)challenges"])
        .stdin("Strong points only")
        .run();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("devils-advocate: rejected (quality_failed)"),
        "{text}"
    );
    assert!(text.contains("FAIL  require_all"), "{text}");
}

#[test]
fn bad_policy_rules_are_named_by_config_check_and_warned_at_run_time() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.researcher.output]\nmin_chars = 10\nrequire_all = ['(unclosed']\njq = ['.a |']\n",
    );
    let out = s.triage(["config", "check", ".triage.toml"]).run();
    let v = json_out(&out);
    assert_eq!(v["ok"], false);
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("agents.researcher.output.require_all")
            && problems.contains("agents.researcher.output.jq"),
        "{problems}"
    );
    // Only the bad entries are left out: min_chars = 10 still applies.
    let (v, _) = check(&s, &[], r#"{"agent": "researcher", "output": "fine"}"#);
    assert_eq!(v["ok"], false);
    let (v, err) = check(
        &s,
        &[],
        r#"{"agent": "researcher", "output": "fine, and long"}"#,
    );
    assert_eq!(v["ok"], true);
    assert!(
        err.contains("warning") && err.contains("bad regex"),
        "{err}"
    );
    // The hook degrades the same way: no crash, no block.
    let p = json!({"hook_event_name": "SubagentStop", "session_id": "s", "agent_id": "a",
                   "agent_type": "researcher", "last_assistant_message": "fine, and long"});
    let (r, err) = hook(&s, &[], &p);
    assert_eq!(r, Value::Null);
    assert!(err.contains("warning"), "{err}");
}

#[test]
fn preserve_partial_never_overwrites() {
    let s = Sandbox::new();
    let args = ["--preserve-partial", "scratch", "--min-chars", "100"];
    let (v, _) = check(
        &s,
        &args,
        r#"{"agent": "calculator", "output": "first try"}"#,
    );
    assert_eq!(
        v["error"]["preserved_outputs"],
        json!(["scratch/calculator_partial.md"])
    );
    let (v, _) = check(
        &s,
        &args,
        r#"{"agent": "calculator", "output": "second try"}"#,
    );
    assert_eq!(
        v["error"]["preserved_outputs"],
        json!(["scratch/calculator_partial-2.md"])
    );
    assert_eq!(s.read("scratch/calculator_partial.md"), "first try");
    assert_eq!(s.read("scratch/calculator_partial-2.md"), "second try");
    let (v, _) = check(
        &s,
        &args,
        &json!({"agent": "calculator", "output": "x".repeat(200)}).to_string(),
    );
    assert_eq!(v["ok"], true);
    assert_eq!(
        std::fs::read_dir(s.path().join("scratch")).unwrap().count(),
        2
    );
}

fn stop(agent_id: &str, message: &str, active: bool) -> Value {
    json!({"hook_event_name": "SubagentStop", "session_id": "sess-1", "agent_id": agent_id,
           "agent_type": "researcher", "stop_hook_active": active,
           "last_assistant_message": message})
}

#[test]
fn loop_guard_blocks_three_times_then_lets_go() {
    let s = Sandbox::new();
    let cfg = example();
    let cfg = ["--config", cfg.to_str().unwrap()];
    let short = "Too short, no citation.";
    for n in 1..=3 {
        let (r, _) = hook(&s, &cfg, &stop("a1", short, n > 1));
        assert_eq!(r["decision"], "block", "call {n}: {r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(reason.contains(&format!("rejection {n} of 3")), "{reason}");
        assert!(
            reason.contains("characters, at least 500 required"),
            "{reason}"
        );
        assert!(reason.contains("require_all"), "{reason}");
    }
    let (r, _) = hook(&s, &cfg, &stop("a1", short, true));
    assert!(r.get("decision").is_none(), "fourth call lets go: {r}");
    let msg = r["systemMessage"].as_str().unwrap();
    assert!(msg.contains("after 3 rejections"), "{msg}");
    let log = s.read(".triage/logs/errors.jsonl");
    let rec: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(rec["kind"], "validation_failed");
    assert_eq!(rec["agent"], "researcher");
    assert_eq!(rec["agent_id"], "a1");
    assert_eq!(rec["session_id"], "sess-1");
    assert_eq!(log.lines().count(), 1);
}

#[test]
fn a_passing_output_resets_the_counter() {
    let s = Sandbox::new();
    let cfg = example();
    let cfg = ["--config", cfg.to_str().unwrap()];
    let short = "Too short.";
    let good = format!("{} [1]", "A complete review of the sources. ".repeat(20));
    for _ in 0..2 {
        assert_eq!(
            hook(&s, &cfg, &stop("a1", short, false)).0["decision"],
            "block"
        );
    }
    assert_eq!(hook(&s, &cfg, &stop("a1", &good, true)).0, Value::Null);
    for n in 1..=3 {
        let (r, _) = hook(&s, &cfg, &stop("a1", short, true));
        assert!(r["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("rejection {n} of 3")));
    }
    // Counted per agent id: another researcher starts at one.
    let (r, _) = hook(&s, &cfg, &stop("a2", short, false));
    assert!(r["reason"].as_str().unwrap().contains("rejection 1 of 3"));
}

#[test]
fn max_rejections_and_optional_agents() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.researcher.output]\nmin_chars = 50\nmax_rejections = 1\n\
         [agents.mathematician-consultant]\ncriticality = \"optional\"\n\
         [agents.mathematician-consultant.output]\nmin_chars = 50\n",
    );
    assert_eq!(
        hook(&s, &[], &stop("r", "short", false)).0["decision"],
        "block"
    );
    let (r, _) = hook(&s, &[], &stop("r", "short", true));
    assert!(r["systemMessage"]
        .as_str()
        .unwrap()
        .contains("after 1 rejections"));
    let mut p = stop("m", "short", false);
    p["agent_type"] = json!("mathematician-consultant");
    for _ in 0..2 {
        let (r, _) = hook(&s, &[], &p);
        assert!(r.get("decision").is_none(), "optional never blocked: {r}");
        assert!(r["systemMessage"].as_str().unwrap().contains("optional"));
    }
}

#[test]
fn stop_without_agent_type_is_the_main_session() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[agents.main.output]\nforbid = ['TODO']\n");
    let p = json!({"hook_event_name": "Stop", "session_id": "s", "stop_hook_active": false,
                   "last_assistant_message": "Done. TODO later"});
    assert_eq!(hook(&s, &[], &p).0["decision"], "block");
    let p = json!({"hook_event_name": "Stop", "session_id": "s",
                   "last_assistant_message": "Done."});
    assert_eq!(hook(&s, &[], &p).0, Value::Null);
}

#[test]
fn block_with_exit_2() {
    let s = Sandbox::new();
    let out = s
        .triage(["check-output", "--hook", "--block-with-exit-2"])
        .stdin(stop("a", "", false).to_string())
        .run()
        .status(2);
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("output_present"));
}

#[test]
fn post_tool_use_on_the_subagent_tool() {
    let s = Sandbox::new();
    s.write("pol.toml", "[agents.researcher.output]\nmin_chars = 50\n");
    let cfg = ["--config", "pol.toml"];
    for tool in ["Agent", "Task"] {
        let p = json!({"hook_event_name": "PostToolUse", "tool_name": tool,
            "tool_input": {"subagent_type": "researcher", "prompt": "p"},
            "tool_response": {"status": "completed", "content": [{"type": "text", "text": "tiny"}]}});
        let (r, _) = hook(&s, &cfg, &p);
        assert_eq!(r["decision"], "block", "{tool}: {r}");
        assert!(r["reason"]
            .as_str()
            .unwrap()
            .contains("researcher subagent's output is unusable"));
    }
    let launched = json!({"hook_event_name": "PostToolUse", "tool_name": "Agent",
        "tool_input": {"subagent_type": "researcher"},
        "tool_response": {"status": "async_launched", "agentId": "x"}});
    assert_eq!(hook(&s, &cfg, &launched).0, Value::Null);
    let other = json!({"hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_response": {"stdout": ""}});
    assert_eq!(hook(&s, &cfg, &other).0, Value::Null);
    let good = json!({"hook_event_name": "PostToolUse", "tool_name": "Agent",
        "tool_input": {"subagent_type": "researcher"},
        "tool_response": {"status": "completed", "content": [{"type": "text", "text": "x".repeat(60)}]}});
    assert_eq!(hook(&s, &cfg, &good).0, Value::Null);
}

fn transcript_line(role: &str, text: &str) -> String {
    json!({"type": role, "message": {"role": role, "content": [{"type": "text", "text": text}]}})
        .to_string()
}

#[test]
fn transcript_fallback_and_its_failures_are_warnings() {
    let s = Sandbox::new();
    s.write("pol.toml", "[agents.researcher.output]\nmin_chars = 20\n");
    let cfg = ["--config", "pol.toml"];
    let p = |path: &str| {
        json!({"hook_event_name": "SubagentStop", "session_id": "s", "agent_id": "a",
               "agent_type": "researcher", "agent_transcript_path": path})
    };
    s.write(
        "t.jsonl",
        format!(
            "{}\n{}\n",
            transcript_line("user", "go"),
            transcript_line("assistant", "short")
        ),
    );
    assert_eq!(hook(&s, &cfg, &p("t.jsonl")).0["decision"], "block");
    for (name, body) in [
        ("missing.jsonl", None),
        ("bad.jsonl", Some("not json\n{oops\n")),
        ("empty.jsonl", Some("")),
    ] {
        if let Some(b) = body {
            s.write(name, b);
        }
        let (r, err) = hook(&s, &cfg, &p(name));
        assert_eq!(r, Value::Null, "{name}");
        assert!(
            err.contains("warning") && err.contains("not checked"),
            "{name}: {err}"
        );
    }
}

/// A 50 MB transcript: the last assistant message comes from its tail. With the window capped
/// at 1 MiB (TRIAGE_MAX_INPUT), a message only at the start is not found: the file is never
/// read whole.
#[test]
fn a_50_mb_transcript_is_read_from_its_end() {
    let s = Sandbox::new();
    let path = s.path().join("big.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    writeln!(f, "{}", transcript_line("assistant", "the early answer")).unwrap();
    let filler = format!("{}\n", transcript_line("user", &"tool output ".repeat(80)));
    let block = filler.repeat(1000);
    while f.metadata().unwrap().len() < 50 * 1024 * 1024 {
        f.write_all(block.as_bytes()).unwrap();
    }
    let end = transcript_line("assistant", &"The final answer, with [1]. ".repeat(30));
    writeln!(f, "{end}").unwrap();
    drop(f);
    let p = json!({"hook_event_name": "SubagentStop", "session_id": "s", "agent_id": "a",
                   "agent_type": "researcher", "transcript_path": path});
    s.write(
        "pol.toml",
        "[agents.researcher.output]\nmin_chars = 500\nrequire_all = ['\\[1\\]']\n",
    );
    // Read from the end: the early-answer case below shows what a bounded window misses.
    let (r, err) = hook(&s, &["--config", "pol.toml"], &p);
    assert_eq!(r, Value::Null, "the final answer passes: {err}");
    // Only the early answer: within a 1 MiB window it is not found, which is a warning.
    let short = s.path().join("early.jsonl");
    let mut f = std::fs::File::create(&short).unwrap();
    writeln!(f, "{}", transcript_line("assistant", "early")).unwrap();
    for _ in 0..3 {
        f.write_all(block.as_bytes()).unwrap();
    }
    drop(f);
    let p = json!({"hook_event_name": "SubagentStop", "session_id": "s", "agent_id": "b",
                   "agent_type": "researcher", "transcript_path": short});
    let out = s
        .triage(["check-output", "--hook", "--config", "pol.toml"])
        .env("TRIAGE_MAX_INPUT", "1048576")
        .stdin(p.to_string())
        .run()
        .status(0);
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("no assistant message in its last 1048576 bytes"));
}

#[test]
fn an_output_near_the_input_limit_is_judged() {
    let s = Sandbox::new();
    let body = format!("{} [1]", "word ".repeat(3_000_000));
    let input = json!({"agent": "researcher", "output": body}).to_string();
    assert!(input.len() > 15_000_000 && input.len() < 16 * 1024 * 1024);
    let started = std::time::Instant::now();
    let (v, _) = check(
        &s,
        &[
            "--min-chars",
            "500",
            "--require-all",
            r"\[\d+\]",
            "--forbid",
            "TODO",
        ],
        &input,
    );
    assert_eq!(v["ok"], true, "{}", v["checks"]);
    eprintln!("16 MB output judged in {:?}", started.elapsed());
}

#[test]
fn multicall_name() {
    let s = Sandbox::new();
    let link = s.path().join("check-output");
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    let out = s
        .command(&link)
        .args(["--raw", "--agent", "x"])
        .stdin("hello")
        .run();
    assert_eq!(json_out(&out)["ok"], true);
}

/// The examples in `check-output --help` are real commands: each runs and prints JSON.
#[test]
fn help_examples_run() {
    let s = Sandbox::new();
    s.write("review.md", "All claims Verified.\n");
    s.write(
        "payload.json",
        json!({"hook_event_name": "SubagentStop", "session_id": "s", "agent_id": "a",
               "agent_type": "researcher", "last_assistant_message": ""})
        .to_string(),
    );
    let help = s.triage(["check-output", "--help"]).run();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let examples: Vec<&str> = help
        .split("Examples:")
        .nth(1)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("triage check-output"))
        .collect();
    assert_eq!(examples.len(), 4, "{help}");
    let dir = bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for line in examples {
        let out = s.command("sh").args(["-c", line]).env("PATH", &path).run();
        assert!(matches!(out.status.code(), Some(0 | 1)), "{line}: {out:?}");
        assert!(
            serde_json::from_slice::<Value>(&out.stdout).is_ok(),
            "{line}: {out:?}"
        );
    }
}

/// Concurrent stops of one agent never lose a count: the counter is updated under its lock.
#[test]
fn concurrent_rejections_are_all_counted() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.researcher.output]\nmin_chars = 50\nmax_rejections = 100\n",
    );
    let payload = stop("a1", "short", true).to_string();
    let children: Vec<_> = (0..8)
        .map(|_| {
            s.triage(["check-output", "--hook"])
                .stdin(payload.as_bytes())
                .spawn()
        })
        .collect();
    for child in children {
        let out = child.wait();
        assert_eq!(json_out(&out)["decision"], "block");
    }
    let (r, _) = hook(&s, &[], &stop("a1", "short", true));
    assert!(
        r["reason"].as_str().unwrap().contains("rejection 9 of 100"),
        "{r}"
    );
}

/// Seed 002, "Circuit Breaker Configuration", Stage 5: `failure_threshold: 3` with
/// `failure_definition: validation_fails_3x`. As policy, `[breaker] validation_failures`: the
/// rejections of one call's output before the agent is let go and the call counts as one
/// breaker failure; per key like every breaker setting, and an agent's own
/// `output.max_rejections` still wins. `config check` takes the seed's values and refuses 0.
#[test]
fn validation_failures_is_the_breakers_failure_definition() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker]\nfailure_threshold = 3\nvalidation_failures = 3\n\
         [breaker.researcher]\nvalidation_failures = 2\n\
         [agents.researcher.output]\nmin_chars = 50\n",
    );
    let out = s.triage(["config", "check"]).run().status(0);
    assert_eq!(json_out(&out)["ok"], true, "{}", out.stderr());
    for n in 1..=2 {
        let (r, _) = hook(&s, &[], &stop("a1", "short", n > 1));
        let reason = r["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(&format!("rejection {n} of 2")), "{r}");
    }
    let (r, _) = hook(&s, &[], &stop("a1", "short", true));
    assert!(r.get("decision").is_none(), "the third output lets go: {r}");
    let msg = r["systemMessage"].as_str().unwrap_or_default();
    assert!(msg.contains("after 2 rejections"), "{msg}");
    let log = s.read(".triage/logs/errors.jsonl");
    assert_eq!(log.lines().count(), 1, "one failure for the call: {log}");

    // A key without its own value has the [breaker] one: the seed's 3.
    let mut p = stop("b1", "short", false);
    p["agent_type"] = json!("writer");
    s.write(
        ".triage.toml",
        "[breaker]\nvalidation_failures = 3\n[agents.writer.output]\nmin_chars = 50\n",
    );
    let (r, _) = hook(&s, &[], &p);
    assert!(
        r["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("rejection 1 of 3"),
        "{r}"
    );

    s.write(".triage.toml", "[breaker]\nvalidation_failures = 0\n");
    let out = s.triage(["config", "check"]).run();
    let v = json_out(&out);
    assert_eq!(v["ok"], false, "{v}");
    assert!(
        v["problems"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("breaker.validation_failures = 0"),
        "{v}"
    );
}
