//! The hook's retry advice consults the fleet's retry budget: with `[budget.K]` for the
//! failure's breaker key, a retryable failure costs a token and a success gives back the
//! ratio; once the budget refuses, the model is told so and to fail fast (one directive, no
//! retry). With no budget entry nothing changes and nothing is written.

use crate::common::{json_out, Sandbox};
use serde_json::{json, Value};

const T0: &str = "2026-11-25T10:00:00Z";

fn hook(s: &Sandbox, payload: &Value) -> Option<Value> {
    let out = s
        .triage(["hook"])
        .env("TRIAGE_NOW", T0)
        .stdin(payload.to_string())
        .run()
        .status(0);
    (!out.stdout.is_empty()).then(|| json_out(&out))
}

fn context(v: &Option<Value>) -> String {
    v.as_ref()
        .and_then(|v| v["hookSpecificOutput"]["additionalContext"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// A network failure of `npm install N` (each a different command, so none is a repeat).
fn reset(n: u32) -> Value {
    json!({"hook_event_name": "PostToolUseFailure", "session_id": "s1", "tool_name": "Bash",
        "tool_use_id": format!("f{n}"), "tool_input": {"command": format!("npm install pkg{n}")},
        "error": "Exit code 1\nnpm error code ECONNRESET\nnpm error network request to https://registry.npmjs.org/react failed, reason: read ECONNRESET"})
}

fn success(n: u32) -> Value {
    json!({"hook_event_name": "PostToolUse", "session_id": "s1", "tool_name": "Bash",
        "tool_use_id": format!("ok{n}"), "tool_input": {"command": format!("npm install pkg{n}")},
        "tool_response": {"stdout": "added 1 package", "stderr": "", "interrupted": false}})
}

fn tokens(s: &Sandbox) -> f64 {
    let v = s
        .triage(["budget", "status", "Bash"])
        .env("TRIAGE_NOW", T0)
        .run()
        .status(0)
        .stdout_json();
    v["budgets"][0]["tokens"].as_f64().unwrap()
}

const BREAKER: &str = "[breaker.Bash]\nfailure_threshold = 100\n";

#[test]
fn a_spent_retry_budget_turns_the_hooks_retry_advice_into_fail_fast() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        format!("{BREAKER}[budget.Bash]\nmax_tokens = 4\ntoken_ratio = 0.5\n"),
    );
    // 3 of 4 tokens left: above half, the retry is advised as before.
    let c = context(&hook(&s, &reset(1)));
    assert!(c.contains("then retry the same call"), "{c}");
    assert_eq!(tokens(&s), 3.0);
    // 2 of 4: not above half. Facts, then one directive; no retry, no menu.
    let c = context(&hook(&s, &reset(2)));
    assert_eq!(tokens(&s), 2.0);
    assert!(c.starts_with("triage: `network_error`"), "{c}");
    assert!(
        c.contains(
            "The fleet's retry budget for `Bash` is spent (2 of 4 tokens left; retries resume above half). Next step: fail fast, without retrying this call."
        ),
        "{c}"
    );
    assert!(!c.contains("retry the same call"), "{c}");
    assert_eq!(c.matches("Next step").count(), 1, "{c}");
    assert!(!c.contains(" or "), "a menu: {c}");
    assert!(!c.contains('\n'), "{c}");
    // The record says so too: escalated, no retry.
    let log = s.read(".triage/logs/errors.jsonl");
    let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["action"], "escalate", "{last}");
    assert!(last["retry"].is_null(), "{last}");
    // A success gives back 0.5: 2.5 of 4 is above half, retries are advised again.
    assert_eq!(hook(&s, &success(3)), None);
    assert_eq!(tokens(&s), 2.5);
    let c = context(&hook(&s, &reset(4)));
    assert_eq!(tokens(&s), 1.5);
    assert!(c.contains("retry budget for `Bash` is spent"), "{c}");
    hook(&s, &success(5));
    hook(&s, &success(6));
    assert_eq!(tokens(&s), 2.5);
    let c = context(&hook(&s, &reset(7)));
    assert!(c.contains("fail fast"), "1.5 of 4 after it: {c}");
}

#[test]
fn without_a_budget_entry_the_hooks_advice_is_unchanged_and_no_budget_is_written() {
    let s = Sandbox::new();
    s.write(".triage.toml", BREAKER);
    for n in 1..=5 {
        let c = context(&hook(&s, &reset(n)));
        assert!(c.contains("then retry the same call"), "{c}");
        assert!(!c.contains("budget"), "{c}");
    }
    hook(&s, &success(9));
    assert!(!s.exists(".triage/budgets"), "a budget was written");
    // A budget for another key is not this failure's.
    s.write(
        ".triage.toml",
        format!("{BREAKER}[budget.api]\nmax_tokens = 1\n"),
    );
    for n in 10..=12 {
        let c = context(&hook(&s, &reset(n)));
        assert!(c.contains("then retry the same call"), "{c}");
    }
    assert!(!s.exists(".triage/budgets/Bash.json"));
}
