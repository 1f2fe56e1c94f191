//! The next step per cause, not per kind: where waiting does not fix a failure (a host that
//! does not exist, a wrong key, a missing permission, a task too large for its time limit, an
//! input too large for the context) the model is told the step that fits: fix and retry,
//! escalate, or narrow; a busy service is retried later. One test per row of the table in
//! docs/classify.md.

use crate::common::{json_out, Sandbox};
use serde_json::{json, Value};

fn failure(tool: &str, input: Value, error: &str) -> Value {
    json!({"hook_event_name": "PostToolUseFailure", "session_id": "s1", "tool_name": tool,
        "tool_input": input, "error": error, "tool_use_id": "t1"})
}

fn classified(payload: &Value) -> Value {
    let s = Sandbox::new();
    json_out(
        &s.triage(["classify"])
            .stdin(payload.to_string())
            .run()
            .status(0),
    )
}

fn told(payload: &Value) -> String {
    let s = Sandbox::new();
    let out = s
        .triage(["hook"])
        .env("TRIAGE_NOW", "2026-11-28T10:00:00Z")
        .stdin(payload.to_string())
        .run()
        .status(0);
    json_out(&out)["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn step(e: &Value) -> (&str, &str) {
    (
        e["context"]["cause"].as_str().unwrap_or("-"),
        e["context"]["step"].as_str().unwrap_or("-"),
    )
}

#[test]
fn a_host_the_command_names_that_does_not_exist_is_fixed_not_waited_for() {
    let p = failure(
        "Bash",
        json!({"command": "curl -sf https://api.exmaple.com/v1/items"}),
        "Exit code 6\ncurl: (6) Could not resolve host: api.exmaple.com",
    );
    let e = classified(&p);
    assert_eq!(step(&e), ("host_not_found", "fix_and_retry"));
    assert_eq!(e["retryable"], false);
    assert!(e["retry"].is_null(), "{e}");
    let said = told(&p);
    assert!(
        said.contains("check the host name `api.exmaple.com`"),
        "{said}"
    );
    assert!(!said.contains("wait 30 s"), "{said}");
}

#[test]
fn a_resolver_that_cannot_answer_now_is_retried_later() {
    // Not a name that does not exist: the resolver could not answer (EAI_AGAIN), or the
    // name is not the command's own.
    for (command, error) in [
        ("npm install", "npm ERR! request to https://registry.npmjs.org/x failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org"),
        ("./deploy.sh", "curl: (6) Could not resolve host: internal.corp.example"),
    ] {
        let p = failure("Bash", json!({"command": command}), error);
        let e = classified(&p);
        assert_eq!(e["action"], "retry", "{error}: {e}");
        assert!(told(&p).contains("then retry the same call"), "{error}");
    }
}

#[test]
fn a_subagent_that_ran_out_its_time_is_told_to_narrow_its_task() {
    let p = failure(
        "Agent",
        json!({"subagent_type": "researcher", "prompt": "Survey every paper on the topic"}),
        "Agent exceeded 5 minute timeout",
    );
    let e = classified(&p);
    assert_eq!(step(&e), ("task_too_large", "narrow"));
    assert_eq!(e["retryable"], false);
    let said = told(&p);
    assert!(said.contains("split it into smaller tasks"), "{said}");
    assert!(!said.contains("retry the same call"), "{said}");
}

#[test]
fn a_wrong_api_key_is_escalated_to_the_user() {
    let p = failure(
        "Bash",
        json!({"command": "python fetch.py"}),
        "openai.AuthenticationError: Error code: 401 - {'error': {'message': 'Incorrect API key provided: sk-proj-****', 'type': 'invalid_request_error', 'code': 'invalid_api_key'}}",
    );
    let e = classified(&p);
    assert_eq!(step(&e), ("wrong_credentials", "escalate"));
    assert_ne!(e["action"], "retry");
    assert!(told(&p).contains("ask the user"));
}

#[test]
fn a_missing_permission_is_escalated_to_the_user() {
    let p = failure(
        "Bash",
        json!({"command": "mkdir /opt/app"}),
        "mkdir: cannot create directory '/opt/app': Permission denied",
    );
    let e = classified(&p);
    assert_eq!(step(&e), ("missing_permission", "escalate"));
    assert_ne!(e["action"], "retry");
    assert!(told(&p).contains("ask the user to grant access"));
}

#[test]
fn an_input_too_large_for_the_context_is_narrowed() {
    let p = failure(
        "Agent",
        json!({"subagent_type": "reader", "prompt": "Read the whole log"}),
        "API Error: 400 {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 212345 tokens > 200000 maximum\"}}",
    );
    let e = classified(&p);
    assert_eq!(e["kind"], "context_exhausted", "{e}");
    assert_eq!(step(&e), ("input_too_large", "narrow"));
    assert_ne!(e["action"], "retry");
}

#[test]
fn a_busy_service_is_retried_later() {
    let p = failure(
        "Bash",
        json!({"command": "python call_api.py"}),
        "anthropic.RateLimitError: Error code: 429 - {'type': 'error', 'error': {'type': 'rate_limit_error', 'message': 'Number of request tokens has exceeded your per-minute rate limit'}}",
    );
    let e = classified(&p);
    assert_eq!(step(&e), ("busy_service", "retry_later"));
    assert_eq!(e["action"], "retry");
    assert!(told(&p).contains("then retry the same call"));
}
