//! A writer that keeps its end of stdin open and sends part of a value, or nothing, never holds
//! a call past its read deadline (`[stdin] hook_timeout`, 500 ms, for `triage hook` and every
//! `--hook` form; `[stdin] timeout`, 10 s, for every other command): the call goes on with what
//! arrived and leaves a line in `logs/triage.log`.
//!
//! Each case spawns the binary with a piped stdin, writes what the writer sends and keeps the
//! pipe open (as `(partial; sleep 30) | triage ...` would) while it waits a bounded time for
//! the call to end: a build that waits on the writer fails the test instead of hanging it.
//! The bounds are generous next to the deadlines they check; no test measures speed.

use crate::common::Sandbox;
use serde_json::Value;
use std::io::{Read, Write};
use std::process::{ChildStdin, Stdio};
use std::time::{Duration, Instant};

const T0: &str = "2026-01-02T03:04:05Z";

/// How long a case waits for the call before it kills it and fails.
const BOUND: Duration = Duration::from_secs(10);

/// What the call did while its writer kept the pipe open.
struct Ended {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs `triage ARGS` in the sandbox with `sent` written to its stdin and the pipe held open
/// until the call has ended (or `BOUND` has passed: then it is killed and the test fails).
fn with_silent_writer(s: &Sandbox, args: &[&str], sent: &[u8]) -> Ended {
    let mut child = s
        .std_cmd(args)
        .env("TRIAGE_NOW", T0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn triage");
    let started = Instant::now();
    let mut pipe: ChildStdin = child.stdin.take().expect("stdin");
    pipe.write_all(sent).expect("write");
    pipe.flush().expect("flush");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "triage {args:?} still waiting on a writer that kept the pipe open after {BOUND:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = started.elapsed();
    // The writer's end is closed only now, after the call ended.
    drop(pipe);
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("read stdout");
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    Ended {
        code: status.code(),
        stdout,
        stderr,
        took,
    }
}

/// The lines of `.triage/logs/triage.log` that say stdin was cut short.
fn stdin_traces(s: &Sandbox) -> Vec<Value> {
    std::fs::read_to_string(s.root().join("logs/triage.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a trace line"))
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("the writer kept the pipe open"))
        })
        .collect()
}

const PARTIAL_PAYLOAD: &[u8] = br#"{"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Agent", "tool_input": {"subagent_type": "resea"#;

#[test]
fn hook_with_a_partial_payload_and_the_pipe_held_open_answers_within_its_deadline() {
    let s = Sandbox::new();
    let e = with_silent_writer(&s, &["hook"], PARTIAL_PAYLOAD);
    assert!(e.took < Duration::from_secs(5), "took {:?}", e.took);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    // Its answer: nothing to say (half a payload is never acted on).
    assert_eq!(e.stdout, "", "{}", e.stderr);
    let traces = stdin_traces(&s);
    assert_eq!(traces.len(), 1, "{traces:?}");
    assert_eq!(traces[0]["subcommand"], "hook");
    let said = traces[0]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains(&format!("{} bytes arrived", PARTIAL_PAYLOAD.len()))
            && said.contains("[stdin] hook_timeout")
            && said.contains("answered nothing"),
        "{said}"
    );
}

#[test]
fn hook_with_no_bytes_and_the_pipe_held_open_answers_within_its_deadline() {
    let s = Sandbox::new();
    let e = with_silent_writer(&s, &["hook"], b"");
    assert!(e.took < Duration::from_secs(5), "took {:?}", e.took);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    assert_eq!(e.stdout, "", "{}", e.stderr);
    let traces = stdin_traces(&s);
    assert_eq!(traces.len(), 1, "{traces:?}");
    let said = traces[0]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("nothing arrived") && said.contains("going on without input"),
        "{said}"
    );
}

#[test]
fn a_hook_form_of_another_command_has_the_hook_deadline() {
    // No policy: `classify --hook` gets the hook's 500 ms, not the 10 s of a pipeline.
    let s = Sandbox::new();
    std::fs::create_dir(s.root()).expect("root");
    let e = with_silent_writer(&s, &["classify", "--hook"], PARTIAL_PAYLOAD);
    assert!(e.took < Duration::from_secs(5), "took {:?}", e.took);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    assert!(e.stderr.contains("[stdin] hook_timeout"), "{}", e.stderr);
    assert_eq!(stdin_traces(&s).len(), 1);
}

#[test]
fn classify_raw_with_a_silent_writer_classifies_what_arrived() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[stdin]\ntimeout = \"300ms\"\n");
    std::fs::create_dir(s.root()).expect("root");
    let e = with_silent_writer(
        &s,
        &["classify", "--raw"],
        b"curl: (6) Could not resolve host: example.invalid",
    );
    assert!(e.took < Duration::from_secs(5), "took {:?}", e.took);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    let v: Value = serde_json::from_str(e.stdout.trim()).expect("one JSON line");
    assert_eq!(e.stdout.lines().count(), 1);
    assert_eq!(v["kind"], "network_error", "{v}");
    assert!(
        e.stderr.contains("going on with what arrived"),
        "{}",
        e.stderr
    );
    let traces = stdin_traces(&s);
    assert_eq!(traces.len(), 1, "{traces:?}");
    assert_eq!(traces[0]["subcommand"], "classify");

    // Nothing at all: classified as an unknown failure, as an empty stdin is.
    let e = with_silent_writer(&s, &["classify", "--raw"], b"");
    assert!(e.took < Duration::from_secs(5), "took {:?}", e.took);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    let v: Value = serde_json::from_str(e.stdout.trim()).expect("one JSON line");
    assert_eq!(v["kind"], "unknown", "{v}");
}

#[test]
fn record_error_with_a_silent_writer_records_what_arrived() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[stdin]\ntimeout = \"300ms\"\n");
    let e = with_silent_writer(
        &s,
        &["record-error", "--agent", "researcher"],
        b"connection reset by peer",
    );
    assert!(e.took < Duration::from_secs(5), "took {:?}", e.took);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    let v: Value = serde_json::from_str(e.stdout.trim()).expect("one JSON line");
    assert!(
        v["detail"]
            .as_str()
            .is_some_and(|d| d.contains("connection reset by peer")),
        "{v}"
    );
    let log = s.read(".triage/logs/errors.jsonl");
    assert_eq!(log.lines().count(), 1, "{log}");
    let traces = stdin_traces(&s);
    assert_eq!(traces.len(), 1, "{traces:?}");
    assert_eq!(traces[0]["subcommand"], "record-error");
    assert!(
        traces[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("[stdin] timeout")),
        "{traces:?}"
    );
}

#[test]
fn record_error_with_a_silent_writer_under_strict_records_nothing_and_exits_74() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[stdin]\ntimeout = \"300ms\"\n");
    let e = with_silent_writer(
        &s,
        &["record-error", "--strict", "--agent", "researcher"],
        b"connection reset",
    );
    assert!(e.took < Duration::from_secs(5), "took {:?}", e.took);
    assert_eq!(e.code, Some(74), "{}", e.stderr);
    assert!(!s.exists(".triage/logs/errors.jsonl"));
    assert!(e.stderr.contains("kept the pipe open"), "{}", e.stderr);
}

#[test]
fn run_with_a_silent_writer_replays_what_arrived() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[stdin]\ntimeout = \"300ms\"\n");
    let e = with_silent_writer(&s, &["run", "--no-retry", "--", "cat"], b"half a line");
    assert!(e.took < Duration::from_secs(5), "took {:?}", e.took);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    assert_eq!(e.stdout, "half a line");
    assert_eq!(stdin_traces(&s).len(), 1);
}

#[test]
fn a_complete_value_with_the_pipe_held_open_is_answered_at_once_as_before() {
    // The deadline is never reached for a value that has arrived whole: a day of patience
    // changes nothing, and nothing is traced.
    let s = Sandbox::new();
    s.write(".triage.toml", "[stdin]\nhook_timeout = \"1d\"\n");
    let payload = br#"{"hook_event_name": "PostToolUseFailure", "session_id": "s1", "tool_name": "Agent", "tool_input": {"subagent_type": "researcher"}, "error": "Command timed out after 2m 0s"}"#;
    let e = with_silent_writer(&s, &["hook"], payload);
    assert!(e.took < Duration::from_secs(5), "took {:?}", e.took);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    assert_eq!(e.stdout.lines().count(), 1, "{}", e.stdout);
    let v: Value = serde_json::from_str(e.stdout.trim()).expect("one JSON line");
    assert_eq!(
        v["hookSpecificOutput"]["hookEventName"],
        "PostToolUseFailure"
    );
    assert!(stdin_traces(&s).is_empty());
    let log = s.read(".triage/logs/errors.jsonl");
    assert!(log.contains("\"kind\":\"timeout\""), "{log}");
}
