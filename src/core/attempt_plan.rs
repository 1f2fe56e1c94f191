//! What one attempt's end means and what comes next: the exit status `triage run` reports
//! (like `timeout(1)`: 124 on timeout, 126/127 when the command cannot run, 128+signal), the
//! kind of failure as the process saw it, what the classifier is told about it, and what
//! follows from the classifier's verdict. Pure: no clock, no process.

use crate::core::classify::ErrorObject;
use crate::core::vocab::{Action, Kind};
use serde_json::{Map, Value};
use std::time::Duration;

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// It exited with this status.
    Exited(i32),
    /// A signal ended it (not one we sent).
    Signaled(i32),
    /// The timeout expired; it was sent SIGTERM, and SIGKILL when `killed`.
    TimedOut {
        /// Whether SIGKILL was needed.
        killed: bool,
    },
    /// It wrote nothing (stdout or stderr) for `after` and was sent SIGTERM, and SIGKILL when
    /// `killed`: hung (seed 004's unresponsive).
    Idle {
        /// The idle timeout.
        after: std::time::Duration,
        /// Whether SIGKILL was needed.
        killed: bool,
    },
    /// `triage run` received this signal and forwarded it.
    Interrupted(i32),
    /// It could not be started: 127 not found, 126 otherwise.
    CannotRun {
        /// 126 or 127.
        status: u8,
        /// Why, in words.
        detail: String,
    },
}

impl End {
    /// The exit status `triage run` ends with when this is the last attempt.
    pub fn exit_status(&self) -> u8 {
        match self {
            End::Exited(c) => u8::try_from(*c & 0xff).unwrap_or(1),
            End::Signaled(s) => u8::try_from((128 + *s).clamp(0, 255)).unwrap_or(255),
            End::TimedOut { .. } | End::Idle { .. } => 124,
            End::Interrupted(_) => 130,
            End::CannotRun { status, .. } => *status,
        }
    }

    /// Whether the attempt succeeded.
    pub fn success(&self) -> bool {
        *self == End::Exited(0)
    }

    /// The kind of failure as the process saw it (classify refines it from stderr).
    pub fn kind(&self) -> Option<Kind> {
        match self {
            End::Exited(0) => None,
            End::Exited(_) => Some(Kind::ToolFailure),
            End::Signaled(_) => Some(Kind::Crash),
            End::TimedOut { .. } => Some(Kind::Timeout),
            End::Idle { .. } => Some(Kind::Unresponsive),
            End::Interrupted(_) => Some(Kind::Interrupted),
            End::CannotRun { status: 127, .. } => Some(Kind::NotFound),
            End::CannotRun { .. } => Some(Kind::PermissionDenied),
        }
    }

    /// A short description for messages and the report.
    pub fn describe(&self) -> String {
        match self {
            End::Exited(c) => format!("exited with status {c}"),
            End::Signaled(s) => format!("was killed by signal {s}"),
            End::TimedOut { killed: false } => "timed out (stopped by SIGTERM)".into(),
            End::TimedOut { killed: true } => "timed out (SIGTERM ignored, killed)".into(),
            End::Idle { after, killed } => format!(
                "wrote no output for {} and was stopped ({})",
                crate::core::duration::Dur(*after),
                if *killed {
                    "SIGTERM ignored, killed"
                } else {
                    "by SIGTERM"
                }
            ),
            End::Interrupted(s) => format!("was interrupted (signal {s} forwarded)"),
            End::CannotRun { detail, .. } => format!("could not run: {detail}"),
        }
    }
}

/// What the classifier is told about a failed attempt: the stderr tail as the message, the
/// exit status (128+N for a signal), and the kind when the process's end settles it (a
/// timeout, an interrupt, a command that could not run) so no text in stderr can override it.
pub fn classify_input(end: &End, stderr_tail: &str, elapsed_ms: u64) -> Value {
    let mut m = Map::new();
    if !stderr_tail.trim().is_empty() {
        m.insert("message".into(), stderr_tail.into());
    }
    m.insert("exit_code".into(), end.exit_status().into());
    m.insert("elapsed".into(), format!("{elapsed_ms}ms").into());
    match end {
        End::Signaled(s) | End::Interrupted(s) => {
            m.insert("signal".into(), (*s).into());
        }
        _ => {}
    }
    let settled = match end {
        End::TimedOut { .. } | End::Idle { .. } | End::Interrupted(_) | End::CannotRun { .. } => {
            end.kind()
        }
        _ => None,
    };
    if matches!(end, End::Idle { .. }) {
        m.insert("detail".into(), end.describe().into());
    }
    if let (Some(k), End::CannotRun { detail, .. }) = (settled, end) {
        m.insert("message".into(), detail.clone().into());
        m.insert("kind".into(), k.as_str().into());
    } else if let Some(k) = settled {
        m.insert("kind".into(), k.as_str().into());
    }
    if matches!(end, End::Interrupted(_)) {
        m.insert("interrupted".into(), true.into());
    }
    Value::Object(m)
}

/// The classifier found nothing in a plain non-zero exit: the command failed, and `run`
/// says so (`tool_failure`, retryable by default) instead of `unknown`.
pub fn needs_fallback(end: &End, classified: &ErrorObject) -> bool {
    matches!(end, End::Exited(c) if *c != 0) && classified.kind == Kind::Unknown
}

/// [`classify_input`] with the fallback kind set, keeping the first verdict's detail (its
/// evidence from stderr).
pub fn with_fallback_kind(mut input: Value, end: &End, detail: &str) -> Value {
    if let (Some(m), Some(k)) = (input.as_object_mut(), end.kind()) {
        m.insert("kind".into(), k.as_str().into());
        m.insert("detail".into(), detail.into());
    }
    input
}

/// Whether a failed attempt is followed by another, and why not when it is not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Wait this long, then run attempt `attempt + 1`.
    Retry(Duration),
    /// Stop, for this reason.
    Stop(String),
}

/// Decides what follows a failed attempt from the classifier's verdict: retry after its
/// advised delay, or stop. An interrupt, a command that cannot run and an agent with side
/// effects always stop, whatever the verdict (seed 001: never retried automatically) and
/// whatever `--retries` or the policy allow: this is the only place `triage run` (and each
/// item of `triage phase`) decides on another attempt, and nothing persists between runs to
/// restart one from; `phase resume` holds such an item for a person's decision instead.
pub fn next(end: &End, e: &ErrorObject, side_effects: bool) -> Next {
    if matches!(end, End::Interrupted(_)) {
        return Next::Stop("interrupted".into());
    }
    if let End::CannotRun { detail, .. } = end {
        return Next::Stop(format!("the command could not run ({detail})"));
    }
    if side_effects {
        return Next::Stop(
            "the agent has side effects, so it is never retried automatically".into(),
        );
    }
    match (&e.action, &e.retry) {
        (Action::Retry, Some(r)) => {
            Next::Retry(Duration::try_from_secs_f64(r.delay_s.max(0.0)).unwrap_or(Duration::MAX))
        }
        _ => {
            let why = e
                .context
                .get("action_reason")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| {
                    format!(
                        "a `{}` failure is not retryable; next: {}",
                        e.kind, e.action
                    )
                });
            Next::Stop(why)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::classify::{classify, Overrides};
    use crate::core::policy::Policy;

    fn classified(end: &End, stderr: &str, attempt: u32, policy: &Policy) -> ErrorObject {
        let o = Overrides {
            attempt: Some(attempt),
            ..Overrides::default()
        };
        let input = classify_input(end, stderr, 5);
        let e = classify(&input, &o, policy, 1);
        if needs_fallback(end, &e) {
            return classify(&with_fallback_kind(input, end, &e.detail), &o, policy, 1);
        }
        e
    }

    #[test]
    fn exit_statuses_follow_timeout_1() {
        assert_eq!(End::Exited(3).exit_status(), 3);
        assert_eq!(End::Signaled(9).exit_status(), 137);
        assert_eq!(End::TimedOut { killed: true }.exit_status(), 124);
        assert_eq!(End::Interrupted(15).exit_status(), 130);
        let nf = End::CannotRun {
            status: 127,
            detail: "no such file".into(),
        };
        assert_eq!((nf.exit_status(), nf.kind()), (127, Some(Kind::NotFound)));
        assert_eq!(End::Exited(0).kind(), None);
    }

    #[test]
    fn the_process_end_settles_the_kind_over_stderr() {
        let p = Policy::default();
        let t = End::TimedOut { killed: true };
        let e = classified(&t, "Error: connect ECONNREFUSED 127.0.0.1:80", 1, &p);
        assert_eq!(e.kind, Kind::Timeout);
        let i = End::Interrupted(2);
        assert_eq!(classified(&i, "", 1, &p).kind, Kind::Interrupted);
        // Stderr decides for a plain exit; nothing recognisable is a tool failure.
        let x = End::Exited(1);
        let e = classified(&x, "Error: connect ECONNREFUSED 127.0.0.1:80", 1, &p);
        assert_eq!(e.kind, Kind::NetworkError);
        let e = classified(&x, "fail 1", 1, &p);
        assert_eq!(e.kind, Kind::ToolFailure);
        assert!(e.detail.contains("fail 1"), "{}", e.detail);
        assert_eq!(classified(&End::Signaled(9), "", 1, &p).kind, Kind::Crash);
    }

    #[test]
    fn follows_the_classifiers_schedule_and_stops_where_it_says() {
        let p: Policy =
            toml::from_str("[retry]\nschedule = [\"10ms\", \"30ms\"]\nmax_attempts = 3\n[retry.kinds.tool_failure]\nmax_attempts = 3\n").unwrap();
        let x = End::Exited(1);
        let at = |n| next(&x, &classified(&x, "fail", n, &p), false);
        assert_eq!(at(1), Next::Retry(Duration::from_millis(10)));
        assert_eq!(at(2), Next::Retry(Duration::from_millis(30)));
        assert!(matches!(at(3), Next::Stop(w) if w.contains("all 3 attempts")));
        // By default a tool failure is retried once (seed 003).
        let d = Policy::default();
        assert_eq!(
            next(&x, &classified(&x, "fail", 1, &d), false),
            Next::Retry(Duration::from_secs(30))
        );
        assert!(matches!(
            next(&x, &classified(&x, "fail", 2, &d), false),
            Next::Stop(w) if w.contains("all 2 attempts")
        ));
        assert!(matches!(
            next(&x, &classified(&x, "fail", 1, &p), true),
            Next::Stop(w) if w.contains("side effects")
        ));
        let e = classified(&x, "error[E0308]: mismatched types", 1, &p);
        assert!(matches!(next(&x, &e, false), Next::Stop(w) if w.contains("not retryable")));
        let i = End::Interrupted(2);
        let e = classified(&i, "", 1, &p);
        assert_eq!(next(&i, &e, false), Next::Stop("interrupted".into()));
    }

    #[test]
    fn side_effects_are_never_retried_whatever_the_end_the_verdict_or_the_allowance() {
        // Ten attempts allowed for every kind, no wait: only side effects can say stop.
        let mut p: Policy =
            toml::from_str("[retry]\nschedule = [\"0s\"]\nmax_attempts = 10\n").unwrap();
        for k in Kind::ALL {
            p.retry.kinds.entry(*k).or_default().max_attempts = Some(10);
        }
        let ends = [
            End::Exited(1),
            End::Signaled(9),
            End::TimedOut { killed: false },
            End::TimedOut { killed: true },
            End::Interrupted(2),
            End::Interrupted(15),
        ];
        let stderr = [
            "",
            "fail",
            "connection reset by peer",
            "429 Too Many Requests",
            "overloaded_error",
        ];
        for end in &ends {
            for text in stderr {
                let e = classified(end, text, 1, &p);
                assert!(
                    matches!(next(end, &e, true), Next::Stop(_)),
                    "{end:?} {text:?}"
                );
            }
        }
        // The same verdicts without side effects do retry (the test can fail).
        let x = End::Exited(1);
        let e = classified(&x, "connection reset by peer", 1, &p);
        assert!(matches!(next(&x, &e, false), Next::Retry(_)));
    }
}
