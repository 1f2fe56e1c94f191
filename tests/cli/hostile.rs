//! Issue 14, the input half: stdin read only when used and never waited on past one value,
//! lone surrogates, bounded jq filters, globs and recursion, durations, `--text` escapes.
//!
//! Timing cases run the binary under `timeout 5` and assert that it did not fire (exit 124);
//! they never measure how fast a command was.

use crate::common::{bin, json_out, Run, Sandbox, TestCommand};
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

const T0: &str = "2026-01-02T03:04:05Z";

/// `timeout 5 triage ARGS` in the sandbox with a clean environment.
fn under_timeout(s: &Sandbox, args: &[&str]) -> TestCommand {
    let mut c = s.command("timeout");
    c.arg("5").arg(bin()).args(args).env("TRIAGE_NOW", T0);
    c
}

/// `cmd` with stdin, stdout and stderr on pipes, for a test that writes stdin itself.
fn piped(cmd: &mut TestCommand) -> &mut Command {
    cmd.std()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
}

/// Runs `cmd` with `first` written to its stdin and the pipe then held open (as `(first;
/// sleep 30) | cmd` would) until it exits; asserts `timeout` did not fire.
fn with_open_pipe(mut cmd: TestCommand, first: &[u8]) -> Run {
    let cmd = piped(&mut cmd);
    let mut child = cmd.spawn().expect("spawn timeout");
    let mut pipe = child.stdin.take().expect("stdin");
    let _ = pipe.write_all(first);
    let out = child.wait_with_output().expect("wait");
    drop(pipe);
    assert_ne!(
        out.status.code(),
        Some(124),
        "still waiting on stdin after 5 s: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Run::of(cmd, out)
}

fn errors_log(s: &Sandbox) -> Vec<Value> {
    let text = std::fs::read_to_string(s.root().join("logs/errors.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn failure_payload(error: &str) -> String {
    format!(
        r#"{{"hook_event_name": "PostToolUseFailure", "session_id": "s1", "tool_name": "Agent", "tool_input": {{"subagent_type": "researcher"}}, "error": "{error}"}}"#
    )
}

#[test]
fn breaker_check_in_a_while_read_loop_sees_every_key() {
    let s = Sandbox::new();
    s.write("keys", "alpha\nbeta\ngamma\n");
    let out = s
        .command("sh")
        .arg("-c")
        .arg(r#"while read k; do "$TRIAGE" breaker check "$k"; done < keys"#)
        .env("TRIAGE", bin())
        .run();
    let keys: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["key"].to_string())
        .collect();
    assert_eq!(keys, ["\"alpha\"", "\"beta\"", "\"gamma\""]);
}

#[test]
fn commands_that_need_no_stdin_do_not_wait_on_an_open_pipe() {
    let s = Sandbox::new();
    for args in [
        &["breaker", "check", "k"][..],
        &["breaker", "status"],
        &["state-read", "nothing.json"],
        &["report"],
        &["config", "show"],
        &["saga", "begin", "w"],
        &["state-write", "s.json", "--update", ".n = 1"],
    ] {
        let out = with_open_pipe(under_timeout(&s, args), b"").status(0);
        json_out(&out);
    }
}

#[test]
fn hook_answers_as_soon_as_one_payload_has_arrived() {
    let s = Sandbox::new();
    let out = with_open_pipe(
        under_timeout(&s, &["hook"]),
        failure_payload("Command timed out after 2m 0s").as_bytes(),
    )
    .status(0);
    let v = json_out(&out);
    assert_eq!(
        v["hookSpecificOutput"]["hookEventName"],
        "PostToolUseFailure"
    );
    assert_eq!(errors_log(&s)[0]["kind"], "timeout");
}

#[test]
fn endless_stdin_ends_at_the_first_bad_byte_or_the_size_limit() {
    let s = Sandbox::new();
    for (args, byte, limit) in [
        (&["hook"][..], b'y', None),
        (&["hook"], b' ', Some("100000")),
        (&["classify"], b'y', Some("100000")),
        (&["check-output", "--raw"], b'y', Some("100000")),
        (&["breaker", "check"], b' ', Some("100000")),
    ] {
        let mut cmd = under_timeout(&s, args);
        if let Some(l) = limit {
            cmd.env("TRIAGE_MAX_INPUT", l);
        }
        let mut child = piped(&mut cmd).spawn().unwrap();
        let mut pipe = child.stdin.take().unwrap();
        // `yes`: writes until the reader is gone.
        let writer = std::thread::spawn(move || {
            let chunk = [byte, b'\n'].repeat(4096);
            while pipe.write_all(&chunk).is_ok() {}
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert_ne!(out.status.code(), Some(124), "{args:?} never ended");
        assert!(
            matches!(out.status.code(), Some(0 | 64)),
            "{args:?}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn an_unreadable_stdin_still_gets_the_fail_open_answer() {
    let s = Sandbox::new();
    let out = s
        .triage(["breaker", "check", "k"])
        .stdin_file(std::fs::File::open("/").unwrap())
        .run()
        .status(0);
    assert_eq!(json_out(&out)["allowed"], true);
    s.triage(["hook"])
        .stdin_file(std::fs::File::open("/").unwrap())
        .run()
        .status(0);
}

#[test]
fn a_lone_surrogate_in_a_hook_payload_is_read_as_a_replacement_character() {
    let s = Sandbox::new();
    // What Node's JSON.stringify emits for a string cut inside an emoji.
    let payload = failure_payload(r"rate limit \ud83d");
    let out = s
        .triage(["hook"])
        .env("TRIAGE_NOW", T0)
        .stdin(payload)
        .run()
        .status(0);
    json_out(&out);
    let log = errors_log(&s);
    assert_eq!(log.len(), 1, "the failure was recorded");
    assert!(log[0]["detail"].as_str().unwrap().contains('\u{FFFD}'));
    let st = s
        .triage(["breaker", "status", "researcher"])
        .run()
        .stdout_json();
    assert_eq!(st["breakers"][0]["totals"]["failures"], 1);
    // The same through every stdin-JSON command.
    let out = s
        .triage(["classify"])
        .stdin(r#"{"error": "429 \udc00 too many requests"}"#)
        .run();
    assert_eq!(json_out(&out)["kind"], "rate_limited");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn record_error_keeps_a_raw_error_that_is_not_utf8() {
    let s = Sandbox::new();
    let out = s
        .triage(["record-error", "--agent", "a"])
        .stdin(&b"connection reset \xff\xfe by peer"[..])
        .run()
        .status(0);
    let v = json_out(&out);
    assert_eq!(v["kind"], "network_error");
    let log = errors_log(&s);
    assert!(log[0]["detail"].as_str().unwrap().contains('\u{FFFD}'));
}

#[test]
fn classify_with_empty_or_null_stdin_answers_best_effort() {
    let s = Sandbox::new();
    for input in ["", "null", "  \n"] {
        let out = s.triage(["classify"]).stdin(input).run().status(0);
        let v = json_out(&out);
        assert_eq!(v["kind"], "unknown");
        assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to classify"));
    }
}

/// The filters of issue 14 that never end: each must be stopped within its budget.
const ENDLESS: &[&str] = &[
    "until(false; .)",
    "last(range(1e18))",
    "repeat(.)",
    "[repeat(.)]",
];

#[test]
fn endless_jq_filters_end_within_their_budget_with_a_warning_naming_the_rule() {
    let s = Sandbox::new();
    let mut policy = String::new();
    for (i, code) in ENDLESS.iter().enumerate() {
        policy.push_str(&format!("[agents.a{i}.output]\njq = ['{code}']\n"));
        // One classify rule per policy: rules are tried in turn, each within its budget.
        s.write(
            &format!("classify{i}.toml"),
            format!("[[classify.rules]]\nname = \"loop{i}\"\njq = '{code}'\nkind = \"crash\"\n"),
        );
    }
    s.write(".triage.toml", &policy);
    // Every command at once: each waits on its own budget, not on the others.
    let mut runs = Vec::new();
    for (i, code) in ENDLESS.iter().enumerate() {
        let agent = format!("a{i}");
        let mut check = under_timeout(&s, &["check-output", "--agent", &agent]);
        check.stdin(r#"{"output": {"x": 1}}"#);
        runs.push((format!("agents.{agent}.output.jq"), check));
        let doc = format!("doc{i}.json");
        s.write(&doc, "{\"n\": 1}\n");
        let mut update = under_timeout(&s, &["state-write", &doc, "--update", code]);
        update.stdin_null();
        runs.push(("--update".to_string(), update));
        let config = format!("classify{i}.toml");
        let mut classify = under_timeout(&s, &["classify", "--config", &config]);
        classify.stdin(r#"{"error": "x"}"#);
        runs.push((format!("classify rule `loop{i}`"), classify));
    }
    let children: Vec<_> = runs
        .into_iter()
        .map(|(rule, mut c)| (rule, c.spawn()))
        .collect();
    for (rule, child) in children {
        let out = child.wait();
        assert_ne!(out.code(), Some(124), "{rule}: never ended");
        let out = out.status(0);
        let err = out.stderr();
        assert!(
            err.contains(&rule) && err.contains("stopped"),
            "{rule}: {err}"
        );
        if rule != "--update" {
            json_out(&out);
        }
    }
    // The updates that never finished wrote nothing.
    for i in 0..ENDLESS.len() {
        assert_eq!(s.read(&format!("doc{i}.json")), "{\"n\": 1}\n");
    }
}

#[test]
fn config_check_flags_filters_that_run_out_of_budget_on_a_sample_and_recursive_ones() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.a.output]\njq = ['until(false; .)', '.ok == true']\n\
         [[classify.rules]]\nname = \"rec\"\njq = 'def f: f; f'\nkind = \"crash\"\n",
    );
    let out = under_timeout(&s, &["config", "check"]).stdin_null().run();
    assert_ne!(out.status.code(), Some(124));
    let v = json_out(&out);
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("until(false; .)") && problems.contains("sample input"),
        "{v}"
    );
    assert!(problems.contains("calls itself"), "{v}");
    assert!(!problems.contains(".ok == true"), "{v}");
}

#[test]
fn jq_output_100000_levels_deep_never_overflows_the_stack() {
    let s = Sandbox::new();
    let deep = "reduce range(100000) as $i (.; [.])";
    s.write(
        ".triage.toml",
        format!(
            "[[classify.rules]]\nname = \"deep\"\njq = '{deep}'\nkind = \"crash\"\n\
             [agents.a.output]\njq = ['{deep}']\n"
        ),
    );
    s.write("doc.json", "{}\n");
    let out = s
        .triage(["state-write", "doc.json", "--update", deep])
        .run()
        .status(0);
    // Refused for its depth, or stopped by the time budget on a slow machine: never a crash.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("128 levels") || err.contains("stopped"),
        "{err}"
    );
    assert_eq!(s.read("doc.json"), "{}\n");
    let out = s
        .triage(["classify"])
        .stdin(r#"{"error": "x"}"#)
        .run()
        .status(0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("classify rule `deep`"));
    let out = s
        .triage(["check-output", "--agent", "a"])
        .stdin(r#"{"output": {"x": 1}}"#)
        .run()
        .status(0);
    assert_eq!(json_out(&out)["ok"], false);
}

#[test]
fn hostile_globs_and_paths_end_without_recursion() {
    let s = Sandbox::new();
    for i in 0..100 {
        std::fs::create_dir_all(s.path().join(format!("d{i}"))).unwrap();
    }
    let many = vec!["**"; 300].join("/") + "/x.md";
    let long = "a/".repeat(15_000) + "x.md";
    let out = under_timeout(&s, &["check-output", "--raw"])
        .args(["--files-exist", &many, "--file", &long])
        .stdin_null()
        .run();
    assert_ne!(out.code(), Some(124), "the globs never ended");
    let out = out.status(0);
    assert_eq!(json_out(&out)["ok"], false);
    // The same path in the input's `files`.
    let out = s
        .triage(["check-output"])
        .stdin(serde_json::json!({"output": "x", "files": [long]}).to_string())
        .run()
        .status(0);
    json_out(&out);
}

fn saga_with_step(s: &Sandbox, compensate: &str) {
    for args in [
        &["saga", "begin", "w"][..],
        &["saga", "step", "w", "a", "--compensate", compensate],
    ] {
        s.triage(args).run().status(0);
    }
}

#[test]
fn a_compensation_past_its_timeout_is_stopped_like_a_run_attempt() {
    let s = Sandbox::new();
    // Ignores SIGTERM: only the SIGKILL after --kill-after ends it.
    saga_with_step(&s, "echo ran >> log; trap '' TERM; sleep 30");
    let out = under_timeout(
        &s,
        &[
            "saga",
            "compensate",
            "w",
            "--timeout",
            "1s",
            "--kill-after",
            "200ms",
        ],
    )
    .stdin_null()
    .run();
    assert_ne!(
        out.status.code(),
        Some(124),
        "the compensation was never stopped"
    );
    let v = json_out(&out);
    assert_eq!(v["status"], "compensation_failed");
    let detail = v["failed"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("timed out after 1s") && detail.contains("killed"),
        "{v}"
    );
    // The policy sets it too.
    let s = Sandbox::new();
    s.write(".triage.toml", "[saga]\ncompensation_timeout = \"1s\"\n");
    saga_with_step(&s, "sleep 30");
    let out = under_timeout(&s, &["saga", "compensate", "w"])
        .stdin_null()
        .run();
    assert_ne!(out.status.code(), Some(124));
    assert!(json_out(&out)["failed"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("timed out after 1s"));
}

#[test]
fn one_compensation_at_a_time_even_when_its_triage_was_killed() {
    let s = Sandbox::new();
    // The compensation notes its process group, then waits to be killed.
    saga_with_step(&s, "echo $$ >> started; exec sleep 30");
    let mut first = s
        .std_cmd(&["saga", "compensate", "w"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = s.path().join("started");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(&started)
        .unwrap_or_default()
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The triage that started it dies; the compensation goes on.
    first.kill().unwrap();
    first.wait().unwrap();
    let out = s
        .triage(["saga", "compensate", "w"])
        .env("TRIAGE_LOCK_TIMEOUT", "300ms")
        .run();
    let group = s.read("started").trim().to_string();
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .status();
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("is another `triage saga compensate w` running"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        s.read("started").lines().count(),
        1,
        "a second copy was started"
    );
}

#[test]
fn text_output_never_passes_terminal_escapes_from_keys_names_or_errors() {
    let s = Sandbox::new();
    let evil = "agent\u{1b}]0;owned\u{7}\u{1b}[2J\r";
    let run = |args: &[&str]| {
        let out = s.triage(args).env("TRIAGE_NOW", T0).run().status(0);
        String::from_utf8(out.stdout.clone()).unwrap()
    };
    run(&[
        "breaker",
        "record",
        evil,
        "--outcome",
        "failure",
        "--detail",
        evil,
    ]);
    run(&[
        "record-error",
        "--agent",
        evil,
        "--kind",
        "timeout",
        "--detail",
        evil,
    ]);
    for text in [
        run(&["breaker", "status", "--text"]),
        run(&["breaker", "check", evil, "--text"]),
        run(&["report", "--text"]),
        run(&["classify", "--text", "--message", evil, "--agent", evil]),
    ] {
        assert!(
            !text.contains(['\u{1b}', '\u{7}', '\r']),
            "control characters passed through: {text:?}"
        );
        assert!(text.contains("^["), "{text:?}");
    }
}

#[test]
fn regexes_over_the_size_limit_are_warned_about_not_skipped_silently() {
    let s = Sandbox::new();
    let huge = r"\w{1000}\w{1000}\w{1000}";
    s.write(
        ".triage.toml",
        format!(
            "[[classify.rules]]\nname = \"huge\"\nmatch = '{huge}'\nkind = \"crash\"\n\
             [agents.a.output]\nrequire_all = ['{huge}']\n"
        ),
    );
    let out = s
        .triage(["classify"])
        .stdin(r#"{"error": "boom"}"#)
        .run()
        .status(0);
    json_out(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("classify rule `huge`") && err.contains("size limit"),
        "{err}"
    );
    let out = s
        .triage(["check-output", "--raw", "--agent", "a"])
        .stdin("text")
        .run();
    assert!(String::from_utf8_lossy(&out.stderr).contains("require_all"));
    let v = s.triage(["config", "check"]).run().stdout_json();
    assert_eq!(v["problems"].as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn deeply_nested_yaml_and_markdown_outputs_are_refused_not_crashed_on() {
    let s = Sandbox::new();
    for (format, text) in [
        ("yaml", format!("{}x", "- ".repeat(20_000))),
        ("yaml", "[".repeat(100_000)),
        ("markdown", format!("# t\n{}x", "> ".repeat(100_000))),
        ("json", "[".repeat(100_000)),
    ] {
        let out = s
            .triage(["check-output", "--raw", "--format", format])
            .stdin(text)
            .run()
            .status(0);
        assert_eq!(json_out(&out)["ok"], false, "{format}");
    }
}

#[test]
fn hook_forms_of_other_commands_answer_as_soon_as_the_payload_has_arrived() {
    let s = Sandbox::new();
    let payload = failure_payload("Exit code 1");
    for args in [
        &["classify", "--hook"][..],
        &["breaker", "--hook"],
        &["check-output", "--hook"],
    ] {
        with_open_pipe(under_timeout(&s, args), payload.as_bytes()).status(0);
    }
}

/// A stderr nobody can write to (`2>/dev/full`, a reader gone) loses triage's messages, never
/// the call: `run` ends with its command's status, and a phase whose items warn still
/// decides. Failed on 9aa153f: `eprintln!` panicked (exit 101; a phase item's thread left its
/// runner hanging).
#[test]
fn an_unwritable_stderr_loses_messages_never_the_call() {
    use std::time::{Duration, Instant};
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full");
    if full().is_err() {
        eprintln!("skipped: an_unwritable_stderr_loses_messages_never_the_call: no /dev/full");
        return;
    }
    let s = Sandbox::new();
    let out = s
        .std_cmd(&[
            "run",
            "--retries",
            "1",
            "--delay",
            "0s",
            "--",
            "sh",
            "-c",
            "echo boom >&2; exit 3",
        ])
        .stderr(full().unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    s.write(
        "plan.toml",
        "[[items]]\nid = \"a\"\nside_effects = true\ncommand = \"echo oops >&2; exit 1\"\n[[items]]\nid = \"b\"\ncommand = \"echo fine\"\n",
    );
    let mut child = s
        .std_cmd(&[
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "w",
            "--phase",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(full().unwrap())
        .spawn()
        .unwrap();
    let began = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if began.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the phase runner hung with stderr unwritable");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(matches!(status.code(), Some(0 | 1)), "{status:?}");
}
