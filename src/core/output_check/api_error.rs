//! A final answer that is an API error message, not the agent's work: the client ends a
//! subagent whose request failed with the error as its "answer" ("API Error: 429 …",
//! "API Error: 529 … Overloaded", "Credit balance is too low", "Prompt is too long", the
//! API's own `{"type":"error","error":{…}}`), and its call is reported `completed`
//! (claude-code #64177). Such an answer is a failure of the kind the classifier gives its
//! text (`rate_limited`, `overloaded`, `billing`, `context_exhausted`, …).
//!
//! Only an answer whose first line has the shape of one is judged: a report that quotes an
//! API error while describing finished work is not one.

use crate::core::classify::{self, Overrides};
use crate::core::policy::Policy;
use crate::core::vocab::{Action, Category, Kind, Severity, Tier};
use serde_json::Value;

/// What the classifier says of an answer that is an API error message.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// The failure's kind.
    pub kind: Kind,
    /// Its category, tier, severity and action, as the classifier gives them.
    pub category: Category,
    /// Seed 004's tier.
    pub tier: Tier,
    /// Seed 001's severity.
    pub severity: Severity,
    /// What to do next.
    pub action: Action,
    /// Whether a retry can help.
    pub retryable: bool,
    /// What to do about it.
    pub suggestions: Vec<String>,
    /// The message, on one line, at most 200 characters.
    pub line: String,
}

/// The client's own beginnings of an API failure shown as an answer (Claude Code 2.0–2.1).
const STARTS: &[&str] = &[
    "api error",
    "credit balance is too low",
    "your credit balance is too low",
    "prompt is too long",
    "claude ai usage limit reached",
    "claude usage limit reached",
    "you've hit your limit",
    "you\u{2019}ve hit your limit",
    "usage limit reached",
    "5-hour limit reached",
    "weekly limit reached",
    "invalid api key",
    "request too large",
    "overloaded_error",
    "rate_limit_error",
];

/// An error message is short: longer answers, or answers of many lines, are work that may
/// quote one.
const MAX_CHARS: usize = 4000;
const MAX_LINES: usize = 6;

/// True when `text` has the shape of an API error message.
pub fn shape(text: &str) -> bool {
    let text = text.trim();
    if text.is_empty() || text.len() > MAX_CHARS {
        return false;
    }
    if text.lines().filter(|l| !l.trim().is_empty()).count() > MAX_LINES {
        return false;
    }
    if text.starts_with('{') {
        return error_object(text);
    }
    let first = text.lines().next().unwrap_or_default().trim_start();
    let first = first.trim_start_matches(['*', '#', '>', ' ', '⎿', '●']);
    let head: String = first.chars().take(40).collect::<String>().to_lowercase();
    STARTS.iter().any(|s| head.starts_with(s))
}

/// `{"type":"error","error":{"type":"…"}}`, or `{"error":{"type":"…_error"}}`.
fn error_object(text: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let inner = v
        .get("error")
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str);
    match (v.get("type").and_then(Value::as_str), inner) {
        (Some("error"), Some(_)) => true,
        (None, Some(t)) => t.ends_with("_error"),
        _ => false,
    }
}

/// The API error `text` is, classified by the policy's rules and the built-in ones; `None`
/// when it does not have the shape of one.
pub fn of(text: &str, policy: &Policy) -> Option<ApiError> {
    if !shape(text) {
        return None;
    }
    let o = Overrides {
        raw: true,
        ..Overrides::default()
    };
    let e = classify::classify(&Value::String(text.trim().to_string()), &o, policy, 0);
    Some(ApiError {
        kind: e.kind,
        category: e.category,
        tier: e.tier,
        severity: e.severity,
        action: e.action,
        retryable: e.retryable,
        suggestions: e.suggestions,
        line: super::snippet(text, 200),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shapes_of_an_api_error() {
        for t in [
            "API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Rate limited\"}}",
            "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
            "  Credit balance is too low",
            "Prompt is too long",
            "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}",
            "API Error: Repeated 529 Overloaded errors",
            "Claude AI usage limit reached|1764111600",
        ] {
            assert!(shape(t), "{t}");
        }
        for t in [
            "",
            "Fixed the retry: the client now handles API Error: 429 from the server.",
            "The API error handling is done.\n\nAPI Error: 429 was the cause.",
            "{\"type\":\"result\",\"ok\":true}",
            "{\"error\": null}",
        ] {
            assert!(!shape(t), "{t}");
        }
        let long = format!("API Error: 429\n{}", "line\n".repeat(20));
        assert!(!shape(&long));
    }

    #[test]
    fn classified_by_kind() {
        let p = Policy::default();
        let kind = |t: &str| of(t, &p).map(|e| e.kind);
        assert_eq!(
            kind("API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Rate limited\"}}"),
            Some(Kind::RateLimited)
        );
        assert_eq!(
            kind("API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"),
            Some(Kind::Overloaded)
        );
        assert_eq!(kind("Credit balance is too low"), Some(Kind::Billing));
        assert_eq!(kind("Prompt is too long"), Some(Kind::ContextExhausted));
        assert_eq!(kind("All done: 3 files changed."), None);
    }
}
