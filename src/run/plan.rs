//! What one attempt's end means and what comes next: the exit status `triage run` reports
//! (like `timeout(1)`: 124 on timeout, 126/127 when the command cannot run, 128+signal), the
//! kind of failure as the process saw it, and the wait before the next attempt from the
//! policy's `[retry]` section. Pure: no clock, no process.

use crate::duration::Dur;
use crate::policy::{Backoff, RetryPolicy};
use crate::vocab::Kind;
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
            End::TimedOut { .. } => 124,
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
            End::Interrupted(s) => format!("was interrupted (signal {s} forwarded)"),
            End::CannotRun { detail, .. } => format!("could not run: {detail}"),
        }
    }
}

/// The wait before retry number `retry` (1 = the second attempt), from the policy:
/// the kind's own delay, else the exponential backoff, else the schedule (its last entry
/// repeats). Jitter is left to `classify`'s decision, which draws it from a seed.
pub fn retry_delay(retry: &RetryPolicy, kind: Option<Kind>, n: u32) -> Duration {
    if let Some(d) = kind.and_then(|k| retry.kinds.get(&k)).and_then(|k| k.delay) {
        return d.0;
    }
    if retry.backoff == Some(Backoff::Exponential) {
        let initial = retry.initial.unwrap_or(Dur::secs(1)).0.as_secs_f64();
        let mult = retry.multiplier.unwrap_or(2.0).max(1.0);
        let exp = i32::try_from(n.saturating_sub(1)).unwrap_or(i32::MAX);
        let mut secs = initial * mult.powi(exp);
        if let Some(cap) = retry.max_delay {
            secs = secs.min(cap.0.as_secs_f64());
        }
        return Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX);
    }
    let i = usize::try_from(n.saturating_sub(1)).unwrap_or(usize::MAX);
    retry
        .schedule
        .get(i)
        .or(retry.schedule.last())
        .map(|d| d.0)
        .unwrap_or_default()
}

/// Attempts in all for a failure of `kind`.
pub fn max_attempts(retry: &RetryPolicy, kind: Option<Kind>) -> u32 {
    kind.and_then(|k| retry.kinds.get(&k))
        .and_then(|k| k.max_attempts)
        .unwrap_or(retry.max_attempts)
        .max(1)
}

/// Whether a failed attempt is followed by another, and why not when it is not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Wait this long, then run attempt `attempt + 1`.
    Retry(Duration),
    /// Stop, for this reason.
    Stop(String),
}

/// What the loop knows after a failed attempt.
pub struct Failed<'a> {
    /// The attempt that failed, from 1.
    pub attempt: u32,
    /// How it ended.
    pub end: &'a End,
    /// Its kind (classify's, when it has one).
    pub kind: Option<Kind>,
    /// Whether the failure is worth retrying (classify's verdict).
    pub retryable: bool,
    /// The agent has side effects: never retried automatically (seed 001).
    pub side_effects: bool,
}

/// Decides what follows a failed attempt.
pub fn next(retry: &RetryPolicy, f: &Failed<'_>) -> Next {
    if matches!(f.end, End::Interrupted(_)) {
        return Next::Stop("interrupted".into());
    }
    if let End::CannotRun { detail, .. } = f.end {
        return Next::Stop(format!("the command could not run ({detail})"));
    }
    if f.side_effects {
        return Next::Stop(
            "the agent has side effects, so it is never retried automatically".into(),
        );
    }
    if !f.retryable {
        return Next::Stop("the failure is not retryable".into());
    }
    let max = max_attempts(retry, f.kind);
    if f.attempt >= max {
        return Next::Stop(format!("{max} attempt(s) made, the most the policy allows"));
    }
    Next::Retry(retry_delay(retry, f.kind, f.attempt))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::KindRetry;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
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
    fn the_schedule_gives_each_retry_its_delay_and_repeats_the_last() {
        let r = RetryPolicy {
            schedule: vec![Dur(ms(10)), Dur(ms(20))],
            ..RetryPolicy::default()
        };
        assert_eq!(retry_delay(&r, Some(Kind::ToolFailure), 1), ms(10));
        assert_eq!(retry_delay(&r, Some(Kind::ToolFailure), 2), ms(20));
        assert_eq!(retry_delay(&r, Some(Kind::ToolFailure), 5), ms(20));
        assert_eq!(retry_delay(&r, Some(Kind::RateLimited), 1), ms(5000));
    }

    #[test]
    fn exponential_backoff_is_capped() {
        let r = RetryPolicy {
            backoff: Some(Backoff::Exponential),
            initial: Some(Dur(ms(100))),
            multiplier: Some(3.0),
            max_delay: Some(Dur(ms(500))),
            ..RetryPolicy::default()
        };
        assert_eq!(retry_delay(&r, None, 1), ms(100));
        assert_eq!(retry_delay(&r, None, 2), ms(300));
        assert_eq!(retry_delay(&r, None, 3), ms(500));
    }

    #[test]
    fn stops_on_side_effects_interrupts_and_the_attempt_limit() {
        let mut r = RetryPolicy::default();
        let end = End::Exited(1);
        let f = |attempt, side_effects| Failed {
            attempt,
            end: &end,
            kind: Some(Kind::ToolFailure),
            retryable: true,
            side_effects,
        };
        assert_eq!(next(&r, &f(1, false)), Next::Retry(Duration::from_secs(30)));
        assert!(matches!(next(&r, &f(1, true)), Next::Stop(w) if w.contains("side effects")));
        assert!(matches!(next(&r, &f(3, false)), Next::Stop(w) if w.contains("3 attempt")));
        r.kinds.insert(
            Kind::ToolFailure,
            KindRetry {
                max_attempts: Some(1),
                ..KindRetry::default()
            },
        );
        assert!(matches!(next(&r, &f(1, false)), Next::Stop(_)));
        let int = End::Interrupted(2);
        let g = Failed {
            attempt: 1,
            end: &int,
            kind: Some(Kind::Interrupted),
            retryable: true,
            side_effects: false,
        };
        assert_eq!(next(&r, &g), Next::Stop("interrupted".into()));
    }
}
