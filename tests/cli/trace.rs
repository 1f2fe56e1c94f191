//! The decision trace (seed 000's DEBUG level, "verbose mode only"): with `TRIAGE_LOG=debug`
//! or `-v`, classify, the retry decision and the breaker each leave a `debug` line in
//! `logs/triage.log` naming the rule that decided; without them, none.

use crate::common::Sandbox;
use serde_json::{json, Value};

const T0: &str = "2026-11-23T10:00:00Z";

/// The messages of the `debug` lines of `logs/triage.log`, each checked to be in the log's
/// format (`at`, `subcommand`, `level`, `pid`, `message`).
fn debug_lines(s: &Sandbox) -> Vec<String> {
    let text = std::fs::read_to_string(s.root().join("logs/triage.log")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["level"] == "debug")
        .map(|v| {
            for k in ["at", "subcommand", "pid"] {
                assert!(!v[k].is_null(), "no {k}: {v}");
            }
            v["message"].as_str().unwrap().to_string()
        })
        .collect()
}

fn has(lines: &[String], needle: &str) -> bool {
    lines.iter().any(|l| l.contains(needle))
}

fn classify(s: &Sandbox, flag: Option<&str>, log: Option<&str>) {
    s.write(
        ".triage.toml",
        "[[classify.rules]]\nname = \"quota\"\nmatch = \"quota exhausted\"\nkind = \"rate_limited\"\n",
    );
    let mut args = vec!["classify", "--raw"];
    args.extend(flag);
    let mut c = s.triage(args);
    c.env("TRIAGE_NOW", T0);
    if let Some(level) = log {
        c.env("TRIAGE_LOG", level);
    }
    c.stdin("the API said: quota exhausted").run().status(0);
}

/// Seed 000, Logging, Log Levels: "DEBUG: Agent input/output details (verbose mode
/// only)". With `TRIAGE_LOG=debug`, classify leaves the rule that decided and the retry advice.
#[test]
fn triage_log_debug_traces_the_classify_rule_and_the_retry_decision() {
    let s = Sandbox::new();
    classify(&s, None, Some("debug"));
    let lines = debug_lines(&s);
    assert!(
        has(&lines, "decision classify: rule config:quota (the policy's [[classify.rules]] `quota`, match `quota exhausted`) matched; kind rate_limited"),
        "{lines:#?}"
    );
    assert!(
        has(&lines, "policy override: classify rule `quota`"),
        "{lines:#?}"
    );
    assert!(has(&lines, "tier 1"), "{lines:#?}");
    assert!(has(&lines, "retryable true"), "{lines:#?}");
    assert!(
        has(&lines, "decision retry: attempt 1 of 3 failed; retry in"),
        "{lines:#?}"
    );
}

#[test]
fn without_triage_log_nothing_is_traced() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.root()).unwrap();
    classify(&s, None, None);
    classify(&s, None, Some("info"));
    assert_eq!(debug_lines(&s), Vec::<String>::new());
}

#[test]
fn dash_v_traces_as_triage_log_debug_does() {
    let s = Sandbox::new();
    classify(&s, Some("-v"), None);
    let v = debug_lines(&s);
    let t = Sandbox::new();
    classify(&t, None, Some("debug"));
    let d = debug_lines(&t);
    assert_eq!(v.len(), 2, "{v:#?}");
    assert_eq!(v, d);
}

#[test]
fn a_bad_triage_log_value_is_a_warning_and_ignored() {
    let s = Sandbox::new();
    s.write(".triage.toml", "");
    std::fs::create_dir_all(s.root()).unwrap();
    let out = s
        .triage(["classify", "--raw"])
        .env("TRIAGE_LOG", "loud")
        .stdin("connection reset by peer")
        .run()
        .status(0);
    assert!(
        out.stderr()
            .contains("warning: TRIAGE_LOG=`loud` is not a log level"),
        "{}",
        out.stderr()
    );
    assert_eq!(debug_lines(&s), Vec::<String>::new());
}

/// record-error on a breaker: the classification, the breaker's count against its threshold
/// and its opening (with the rule that opened it), and the retry decision the open breaker
/// turned into an escalation.
#[test]
fn record_error_traces_the_breaker_opening_and_why_no_retry() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[breaker.k]\nfailure_threshold = 2\n");
    for _ in 0..2 {
        s.triage(["record-error", "--agent", "a", "--breaker", "k"])
            .env("TRIAGE_NOW", T0)
            .env("TRIAGE_LOG", "debug")
            .stdin(r#"{"kind": "timeout", "detail": "Agent exceeded 5 minute timeout"}"#)
            .run()
            .status(0);
    }
    let lines = debug_lines(&s);
    assert!(
        has(
            &lines,
            "decision classify of `a`: rule input (the kind the input gave) matched; kind timeout"
        ),
        "{lines:#?}"
    );
    assert!(
        has(&lines, "decision breaker `k`: failure reported, effect counted; 1 of 2 consecutive failures (was 0); stays closed: below the threshold of 2"),
        "{lines:#?}"
    );
    assert!(
        has(&lines, "decision breaker `k`: failure reported, effect counted; 2 of 2 consecutive failures (was 1); closed -> open: consecutive_failures"),
        "{lines:#?}"
    );
    assert!(
        has(&lines, "no retry, action escalate: the breaker `k` is open"),
        "{lines:#?}"
    );
}

/// A hook's PostToolUseFailure: the classification of the tool's error and the retry advice;
/// the next PreToolUse's breaker check is traced too.
#[test]
fn a_hook_failure_traces_its_classification_and_the_breaker() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker.WebFetch]\nfailure_threshold = 1\ncooldown = \"5m\"\n",
    );
    let call = |event: &str, id: &str| {
        json!({"session_id": "s1", "hook_event_name": event, "tool_name": "WebFetch",
               "tool_use_id": id, "tool_input": {"url": "https://example.com"},
               "error": "Request failed with status code 503"})
        .to_string()
    };
    for (event, id) in [
        ("PreToolUse", "t1"),
        ("PostToolUseFailure", "t1"),
        ("PreToolUse", "t2"),
    ] {
        s.triage(["hook"])
            .env("TRIAGE_NOW", T0)
            .env("TRIAGE_LOG", "debug")
            .stdin(call(event, id))
            .run()
            .status(0);
    }
    let lines = debug_lines(&s);
    assert!(
        has(&lines, "decision classify of `WebFetch`: rule builtin:"),
        "{lines:#?}"
    );
    assert!(
        has(&lines, "decision breaker `WebFetch`: failure reported, effect counted; 1 of 1 consecutive failures (was 0); closed -> open: consecutive_failures"),
        "{lines:#?}"
    );
    assert!(has(&lines, "decision retry of `WebFetch`: attempt 1 failed; no retry, action escalate: the breaker `WebFetch` is open"), "{lines:#?}");
    assert!(
        has(
            &lines,
            "decision breaker `WebFetch`: check in state open: refused"
        ),
        "{lines:#?}"
    );
}

/// `run`: each failed attempt's classification and the loop's own retry decision (here the
/// last attempt: out of attempts).
#[test]
fn run_traces_each_attempts_retry_decision() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[retry]\nschedule = [\"0s\"]\n");
    s.triage([
        "-v",
        "run",
        "--retries",
        "1",
        "--",
        "sh",
        "-c",
        "echo boom >&2; exit 3",
    ])
    .env("TRIAGE_NOW", T0)
    .run();
    let lines = debug_lines(&s);
    assert!(
        has(
            &lines,
            "decision retry of `sh`: attempt 1 of 2 failed; retry in"
        ),
        "{lines:#?}"
    );
    assert!(
        has(
            &lines,
            "decision retry of `sh`: attempt 2 failed; not retried:"
        ),
        "{lines:#?}"
    );
}

/// Where no rule knew the text and the learned fallback decided, the trace says so, with its
/// confidence and the features that weighed most, in words.
#[test]
fn the_trace_shows_the_learned_models_top_features() {
    let s = Sandbox::new();
    s.write(".triage.toml", "");
    s.triage(["classify", "--raw", "-v"])
        .env("TRIAGE_NOW", T0)
        .stdin("Error: the caller lacks permission to write to the bucket")
        .run()
        .status(0);
    let lines = debug_lines(&s);
    assert!(
        has(&lines, "decision classify: rule model:naive-bayes (no rule knew the text; the learned model, confidence "),
        "{lines:#?}"
    );
    assert!(
        has(&lines, "top features: word \"permission\" +"),
        "{lines:#?}"
    );
    assert!(has(&lines, "kind permission_denied"), "{lines:#?}");
}
