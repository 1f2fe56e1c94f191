//! The cause behind a kind, where it decides the next step better than the kind does: waiting
//! does not make a host that does not exist resolve, nor a task too large for a subagent's
//! time limit fit it. Each cause names one of four steps:
//!
//! | step | what the model does |
//! | --- | --- |
//! | fix and retry | correct the call (the host name, the input), then run it again |
//! | retry later | wait, then run the same call again (the retry schedule) |
//! | escalate | stop and ask the user (a credential, a permission) |
//! | narrow | split the task or its input into smaller parts, and run those |
//!
//! A cause is found from the kind, the error's own words and the call (its command, its
//! tool); the kinds with no cause here keep their usual decision. `docs/classify.md` has the
//! table of causes and steps.

use super::input::Facts;
use crate::core::vocab::Kind;
use serde_json::Value;

/// What the model does next, whatever the kind says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Correct the call, then run it again.
    FixAndRetry,
    /// Wait, then run the same call again.
    RetryLater,
    /// Stop and ask the user.
    Escalate,
    /// Split the task or its input, and run the parts.
    Narrow,
}

impl Step {
    /// The step's name in the error object's `context.step`.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::FixAndRetry => "fix_and_retry",
            Step::RetryLater => "retry_later",
            Step::Escalate => "escalate",
            Step::Narrow => "narrow",
        }
    }

    /// Whether the usual retry schedule (a wait, then the same call) is the way on.
    pub fn waits(self) -> bool {
        self == Step::RetryLater
    }
}

/// A cause and its step, with the one directive for the model when it is not the kind's own.
#[derive(Clone, Debug, PartialEq)]
pub struct Cause {
    /// The cause's name in `context.cause`.
    pub name: &'static str,
    /// The step that fits it.
    pub step: Step,
    /// What to do, when the kind's first suggestion does not say it.
    pub directive: Option<String>,
}

/// The phrases after which a resolver names the host it could not find (`curl: (6) Could
/// not resolve host: NAME`, Node's `getaddrinfo ENOTFOUND NAME`, Go's `lookup NAME … no such
/// host`, Python's `Failed to resolve 'NAME'`).
const HOST_NAMED_AFTER: &[&str] = &[
    "could not resolve host: ",
    "getaddrinfo enotfound ",
    "failed to resolve '",
    "lookup ",
];

/// Words that say the name does not exist (not that the resolver could not answer now:
/// `EAI_AGAIN`, "Temporary failure in name resolution" are for later).
const NO_SUCH_NAME: &[&str] = &[
    "could not resolve host",
    "enotfound",
    "nxdomain",
    "no such host",
    "name or service not known",
    "nodename nor servname provided",
    "failed to resolve '",
];

fn temporary(lower: &str) -> bool {
    lower.contains("eai_again") || lower.contains("temporary failure in name resolution")
}

/// The host a resolver said it could not find, when the error names it.
fn unresolved_host(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    if temporary(&lower) || !NO_SUCH_NAME.iter().any(|w| lower.contains(w)) {
        return None;
    }
    HOST_NAMED_AFTER.iter().find_map(|after| {
        let at = lower.find(after)? + after.len();
        let host: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
            .collect();
        let host = host.trim_end_matches('.').to_string();
        (host.contains('.') || host.len() > 1).then_some(host)
    })
}

/// The cause of a failure of `kind`, when one decides the next step.
pub fn of(kind: Kind, f: &Facts) -> Option<Cause> {
    let command = f
        .context
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let subagent = matches!(f.tool.as_deref(), Some("Agent" | "Task"));
    match kind {
        // A name the call itself gives that does not exist: a typo to fix, not a wait.
        Kind::NetworkError | Kind::ToolFailure | Kind::Unknown => {
            let host = unresolved_host(&f.text)?;
            command.contains(host.as_str()).then(|| Cause {
                name: "host_not_found",
                step: Step::FixAndRetry,
                directive: Some(format!(
                    "check the host name `{host}` in the command: it does not exist (the resolver found no such name), so waiting will not help; fix it, then run the command again"
                )),
            })
        }
        // The same task runs out the same time limit again: smaller parts fit it.
        Kind::Timeout if subagent => Some(Cause {
            name: "task_too_large",
            step: Step::Narrow,
            directive: Some(
                "do not rerun the same task: split it into smaller tasks (a narrower scope each) and run those in turn".into(),
            ),
        }),
        Kind::ContextExhausted => Some(Cause {
            name: "input_too_large",
            step: Step::Narrow,
            directive: None,
        }),
        Kind::AuthFailed => Some(Cause {
            name: "wrong_credentials",
            step: Step::Escalate,
            directive: None,
        }),
        Kind::PermissionDenied => Some(Cause {
            name: "missing_permission",
            step: Step::Escalate,
            directive: None,
        }),
        Kind::RateLimited | Kind::Overloaded => Some(Cause {
            name: "busy_service",
            step: Step::RetryLater,
            directive: None,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_that_does_not_exist_is_named_and_a_resolver_that_cannot_answer_now_is_not() {
        assert_eq!(
            unresolved_host("curl: (6) Could not resolve host: api.exmaple.com").as_deref(),
            Some("api.exmaple.com")
        );
        assert_eq!(
            unresolved_host("Error: getaddrinfo ENOTFOUND registry.npmjs.orgg").as_deref(),
            Some("registry.npmjs.orgg")
        );
        assert_eq!(
            unresolved_host("dial tcp: lookup db.internal.example on 127.0.0.53:53: no such host")
                .as_deref(),
            Some("db.internal.example")
        );
        assert_eq!(
            unresolved_host("getaddrinfo EAI_AGAIN registry.npmjs.org"),
            None
        );
        assert_eq!(
            unresolved_host("ping: example.com: Temporary failure in name resolution"),
            None
        );
        assert_eq!(unresolved_host("connection refused"), None);
    }
}
