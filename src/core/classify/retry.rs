//! The retry decision: how long to wait before the next attempt, or why not to retry.
//!
//! Seed 001's schedule (30 s, 2 min, then escalate) is the default; a policy may ask for
//! exponential backoff with the AWS jitter formulas (aws-samples/aws-arch-backoff-simulator).
//! Jitter draws from a seeded generator so the same `TRIAGE_SEED` always gives the same delays.

use crate::core::duration::Dur;
use crate::core::policy::{AgentSettings, Backoff, Jitter, RetryPolicy};
use crate::core::vocab::{Action, Criticality, Kind};
use serde::{Deserialize, Serialize, Serializer};

/// The advised retry: which attempt comes next, how many are allowed, how long to wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetryAdvice {
    /// The number of the attempt to make next (the first attempt is 1).
    pub attempt: u32,
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Seconds to wait before it (whole seconds print without a fraction).
    #[serde(serialize_with = "seconds")]
    pub delay_s: f64,
}

fn seconds<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.fract() == 0.0 && *v >= 0.0 && *v < 9.0e15 {
        s.serialize_u64(*v as u64)
    } else {
        s.serialize_f64(*v)
    }
}

/// What to do about one failure.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The action.
    pub action: Action,
    /// Set when the action is `retry`.
    pub retry: Option<RetryAdvice>,
    /// Why the action is not the kind's usual one (side effects, exhaustion), if so.
    pub reason: Option<String>,
    /// True when every allowed attempt has been made.
    pub exhausted: bool,
}

/// Everything the decision depends on besides the policy.
#[derive(Clone, Debug)]
pub struct Failure<'a> {
    /// What went wrong.
    pub kind: Kind,
    /// Whether a retry could help.
    pub retryable: bool,
    /// Attempts made so far, the failing one included (at least 1).
    pub attempt: u32,
    /// The agent's name, if known, and what the policy says of it.
    pub agent: Option<(&'a str, &'a AgentSettings)>,
    /// Seconds the server asked to wait (`Retry-After`), if it did.
    pub retry_after_s: Option<f64>,
    /// What to do when the kind is not retried (from the kind's defaults).
    pub fallback: Action,
    /// At most this many attempts, from the rule or the kind (seed 003: `tool_failure` is
    /// retried once; seed 004: an unavailable MCP server too). It never raises the policy's
    /// `max_attempts`, and `[retry.kinds.KIND]` overrides it.
    pub max_attempts: Option<u32>,
    /// The wait before that retry, from the rule, when the policy has none for the kind.
    pub delay_s: Option<f64>,
    /// Out of attempts, go on without the result instead of escalating (seed 004: an MCP
    /// server that is still unavailable after one retry is done without; a tool's plain
    /// non-zero exit, retried once, is reported, not escalated).
    pub degrade_when_exhausted: bool,
}

/// Decides retry or not, and the wait, for `f` under `policy`; `seed` feeds the jitter.
pub fn decide(f: &Failure, policy: &RetryPolicy, seed: u64) -> Decision {
    let per_kind = policy.kinds.get(&f.kind);
    // `[retry.kinds.KIND] retryable` is the policy's word on the kind, either way.
    let retryable = per_kind.and_then(|k| k.retryable).unwrap_or(f.retryable);
    let not_retried = |reason: Option<String>| Decision {
        action: f.fallback,
        retry: None,
        reason,
        exhausted: false,
    };
    if !retryable {
        return not_retried(None);
    }
    // Seed 001: "NEVER retry automatically: skills that failed validation (not transient)".
    if f.kind == Kind::ValidationFailed {
        return Decision {
            action: Action::AskUser,
            ..not_retried(Some(
                "a failed validation is never retried automatically; ask before retrying with lower standards".into(),
            ))
        };
    }
    // Seed 001: "NEVER retry automatically: skills that write to files (may duplicate)".
    if let Some((name, a)) = f.agent {
        if a.side_effects {
            return Decision {
                action: Action::AskUser,
                ..not_retried(Some(format!(
                    "agent `{name}` has side effects (side_effects = true); an automatic retry could repeat them, so ask first"
                )))
            };
        }
    }
    let max_attempts = per_kind
        .and_then(|k| k.max_attempts)
        .unwrap_or_else(|| {
            f.max_attempts
                .map_or(policy.max_attempts, |m| m.min(policy.max_attempts))
        })
        .max(1);
    let attempt = f.attempt.max(1);
    if attempt >= max_attempts {
        let optional = f
            .agent
            .is_some_and(|(_, a)| a.criticality == Criticality::Optional);
        let (action, what) = if optional {
            (
                Action::ProceedDegraded,
                "the agent is optional: proceed without it and note the gap",
            )
        } else if f.degrade_when_exhausted {
            (
                Action::ProceedDegraded,
                "go on without it and say what is missing",
            )
        } else {
            (Action::Escalate, "stop and report it to the user")
        };
        return Decision {
            action,
            retry: None,
            reason: Some(match max_attempts {
                1 => format!("the only attempt failed; {what}"),
                n => format!("all {n} attempts failed; {what}"),
            }),
            exhausted: true,
        };
    }
    let delay = if let (Kind::RateLimited, Some(s)) = (f.kind, f.retry_after_s) {
        s.max(0.0)
    } else if let Some(d) = per_kind.and_then(|k| k.delay) {
        d.as_secs_f64()
    } else if let Some(d) = f.delay_s {
        d
    } else {
        delay_for(policy, attempt, seed)
    };
    Decision {
        action: Action::Retry,
        retry: Some(RetryAdvice {
            attempt: attempt + 1,
            max_attempts,
            delay_s: round_ms(delay),
        }),
        reason: None,
        exhausted: false,
    }
}

fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

/// Seconds to wait before retry number `n` (1 = the first retry, after attempt 1).
pub fn delay_for(policy: &RetryPolicy, n: u32, seed: u64) -> f64 {
    let n = n.max(1);
    match policy.backoff {
        None => {
            let i = usize::try_from(n - 1).unwrap_or(usize::MAX);
            policy
                .schedule
                .get(i)
                .or(policy.schedule.last())
                .map_or(0.0, |d| d.as_secs_f64())
        }
        Some(Backoff::Exponential) => {
            let base = policy.initial.unwrap_or(Dur::secs(1)).as_secs_f64();
            let mult = policy.multiplier.unwrap_or(2.0).max(1.0);
            let cap = policy.max_delay.unwrap_or(Dur::secs(300)).as_secs_f64();
            jittered(policy.jitter, base, mult, cap, n, seed)
        }
    }
}

/// `expo(n) = min(cap, base·mult^(n−1))` and the AWS jitter modes on top of it.
pub fn jittered(jitter: Jitter, base: f64, mult: f64, cap: f64, n: u32, seed: u64) -> f64 {
    let expo = |n: u32| (base * mult.powi(i32::try_from(n - 1).unwrap_or(i32::MAX))).min(cap);
    let mut rng = Rng::new(seed);
    match jitter {
        Jitter::None => expo(n),
        // Each retry number takes its own draw from the stream, so retries differ.
        Jitter::Full => {
            rng.skip(n - 1);
            rng.uniform(0.0, expo(n))
        }
        Jitter::Equal => {
            rng.skip(n - 1);
            let e = expo(n);
            e / 2.0 + rng.uniform(0.0, e / 2.0)
        }
        // sleep₀ = base; sleepₙ = min(cap, U(base, 3·sleepₙ₋₁)), replayed from the seed.
        // Only the last 64 steps are replayed (a chain forgets its start long before that),
        // so a huge attempt number costs no more than a small one.
        Jitter::Decorrelated => {
            let steps = n.min(64);
            rng.skip(n - steps);
            let mut sleep = base;
            for _ in 0..steps {
                sleep = rng.uniform(base, sleep * 3.0).min(cap);
            }
            sleep
        }
    }
}

/// SplitMix64: tiny, fast and fully determined by its seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)` (`lo` when the range is empty).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        if hi <= lo {
            lo
        } else {
            lo + unit * (hi - lo)
        }
    }

    fn skip(&mut self, n: u32) {
        // Each draw adds the constant once: skipping n draws is one multiplication.
        self.0 = self
            .0
            .wrapping_add(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(u64::from(n)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::policy::{KindRetry, Policy};

    fn expo(jitter: Jitter) -> RetryPolicy {
        RetryPolicy {
            backoff: Some(Backoff::Exponential),
            initial: Some(Dur::secs(1)),
            multiplier: Some(2.0),
            max_delay: Some(Dur::secs(10)),
            jitter,
            ..RetryPolicy::default()
        }
    }

    fn failure(kind: Kind, attempt: u32) -> Failure<'static> {
        Failure {
            kind,
            retryable: true,
            attempt,
            agent: None,
            retry_after_s: None,
            fallback: Action::Escalate,
            max_attempts: None,
            delay_s: None,
            degrade_when_exhausted: false,
        }
    }

    fn delays(p: &RetryPolicy, seed: u64) -> Vec<f64> {
        (1..=6).map(|n| round_ms(delay_for(p, n, seed))).collect()
    }

    /// Seed 001's "Retry Protocol" table.
    #[test]
    fn a_timeout_retries_after_30_s_then_120_s_then_escalates() {
        let p = RetryPolicy::default();
        let d1 = decide(&failure(Kind::Timeout, 1), &p, 0);
        assert_eq!(d1.action, Action::Retry);
        assert_eq!(
            d1.retry,
            Some(RetryAdvice {
                attempt: 2,
                max_attempts: 3,
                delay_s: 30.0
            })
        );
        let d2 = decide(&failure(Kind::Timeout, 2), &p, 0);
        assert_eq!(d2.retry.map(|r| (r.attempt, r.delay_s)), Some((3, 120.0)));
        let d3 = decide(&failure(Kind::Timeout, 3), &p, 0);
        assert_eq!(
            (d3.action, d3.exhausted, d3.retry),
            (Action::Escalate, true, None)
        );
    }

    #[test]
    fn whole_seconds_print_without_a_fraction() {
        let r = RetryAdvice {
            attempt: 2,
            max_attempts: 3,
            delay_s: 30.0,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"attempt":2,"max_attempts":3,"delay_s":30}"#
        );
        let r = RetryAdvice { delay_s: 1.25, ..r };
        assert!(serde_json::to_string(&r)
            .unwrap()
            .contains("\"delay_s\":1.25"));
    }

    #[test]
    fn exponential_without_jitter_doubles_up_to_the_cap() {
        assert_eq!(
            delays(&expo(Jitter::None), 7),
            vec![1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
        );
    }

    #[test]
    fn full_jitter_is_exact_for_a_seed_and_within_zero_and_expo() {
        let p = expo(Jitter::Full);
        let a = delays(&p, 42);
        assert_eq!(a, delays(&p, 42), "same seed, same delays");
        assert_ne!(a, delays(&p, 43), "another seed, other delays");
        for (d, e) in a.iter().zip([1.0, 2.0, 4.0, 8.0, 10.0, 10.0]) {
            assert!((0.0..e).contains(d), "{d} in 0..{e}");
        }
        assert_eq!(a, vec![0.742, 0.32, 1.114, 2.754, 0.38, 8.682]);
    }

    #[test]
    fn equal_jitter_keeps_half_of_expo() {
        let p = expo(Jitter::Equal);
        let a = delays(&p, 42);
        assert_eq!(a, delays(&p, 42));
        for (d, e) in a.iter().zip([1.0, 2.0, 4.0, 8.0, 10.0, 10.0]) {
            assert!(*d >= e / 2.0 && *d < e, "{d} in {}..{e}", e / 2.0);
        }
        assert_eq!(a, vec![0.871, 1.16, 2.557, 5.377, 5.19, 9.341]);
    }

    #[test]
    fn decorrelated_jitter_stays_between_base_and_cap() {
        let p = expo(Jitter::Decorrelated);
        let a = delays(&p, 42);
        assert_eq!(a, delays(&p, 42));
        for d in &a {
            assert!((1.0..=10.0).contains(d), "{d}");
        }
        // Each retry replays the same chain: retry n+1 is drawn from U(1, 3·retry n).
        for w in a.windows(2) {
            assert!(w[1] <= (w[0] * 3.0).min(10.0) + 1e-3, "{w:?}");
        }
        assert_eq!(a, vec![2.483, 2.031, 2.419, 3.154, 1.322, 3.575]);
    }

    #[test]
    fn huge_attempt_numbers_cost_no_more_than_small_ones() {
        // Before: u32::MAX steps of the chain (tens of seconds of CPU); now 64.
        for jitter in [Jitter::Decorrelated, Jitter::Full, Jitter::Equal] {
            let d = jittered(jitter, 1.0, 2.0, 10.0, u32::MAX, 7);
            assert!((0.0..=10.0).contains(&d), "{jitter:?}: {d}");
        }
        let mut a = Rng::new(5);
        let mut b = Rng::new(5);
        a.skip(3);
        for _ in 0..3 {
            b.next_u64();
        }
        assert_eq!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn rate_limit_waits_what_the_server_asked_else_five_seconds() {
        let p = RetryPolicy::default();
        let mut f = failure(Kind::RateLimited, 1);
        assert_eq!(decide(&f, &p, 0).retry.map(|r| r.delay_s), Some(5.0));
        f.retry_after_s = Some(17.0);
        assert_eq!(decide(&f, &p, 0).retry.map(|r| r.delay_s), Some(17.0));
        // Retry-After is honoured only for rate limits; a timeout keeps the schedule.
        let mut t = failure(Kind::Timeout, 1);
        t.retry_after_s = Some(17.0);
        assert_eq!(decide(&t, &p, 0).retry.map(|r| r.delay_s), Some(30.0));
    }

    #[test]
    fn per_kind_overrides_from_the_policy() {
        let mut p = RetryPolicy::default();
        p.kinds.insert(
            Kind::Timeout,
            KindRetry {
                delay: Some(Dur::secs(3)),
                max_attempts: Some(2),
                retryable: None,
            },
        );
        p.kinds.insert(
            Kind::NetworkError,
            KindRetry {
                retryable: Some(false),
                ..KindRetry::default()
            },
        );
        let d = decide(&failure(Kind::Timeout, 1), &p, 0);
        assert_eq!(d.retry.map(|r| (r.delay_s, r.max_attempts)), Some((3.0, 2)));
        assert!(decide(&failure(Kind::Timeout, 2), &p, 0).exhausted);
        let n = decide(&failure(Kind::NetworkError, 1), &p, 0);
        assert_eq!((n.action, n.retry), (Action::Escalate, None));
    }

    #[test]
    fn validation_failures_are_never_retried_automatically() {
        let d = decide(
            &failure(Kind::ValidationFailed, 1),
            &RetryPolicy::default(),
            0,
        );
        assert_eq!(d.action, Action::AskUser);
        assert!(d.retry.is_none());
        assert!(d.reason.unwrap().contains("never retried automatically"));
    }

    #[test]
    fn side_effect_agents_are_asked_about_not_retried() {
        let policy: Policy = toml::from_str("[agents.writer]\nside_effects = true\n").unwrap();
        let a = policy.agent("writer");
        let mut f = failure(Kind::Timeout, 1);
        f.agent = Some(("writer", &a));
        let d = decide(&f, &policy.retry, 0);
        assert_eq!((d.action, d.retry), (Action::AskUser, None));
        assert!(d.reason.unwrap().contains("side effects"));
    }

    #[test]
    fn exhaustion_escalates_a_critical_agent_and_degrades_an_optional_one() {
        let policy: Policy = toml::from_str(
            "[agents.\"*-consultant\"]\ncriticality = \"optional\"\n\
             [agents.statistician-consultant]\ncriticality = \"critical\"\n",
        )
        .unwrap();
        let stat = policy.agent("statistician-consultant");
        let math = policy.agent("mathematician-consultant");
        let mut f = failure(Kind::Timeout, 3);
        f.agent = Some(("statistician-consultant", &stat));
        let d = decide(&f, &policy.retry, 0);
        assert_eq!((d.action, d.exhausted), (Action::Escalate, true));
        f.agent = Some(("mathematician-consultant", &math));
        let d = decide(&f, &policy.retry, 0);
        assert_eq!((d.action, d.exhausted), (Action::ProceedDegraded, true));
        // An agent the policy does not name is critical.
        let other = policy.agent("researcher");
        f.agent = Some(("researcher", &other));
        assert_eq!(decide(&f, &policy.retry, 0).action, Action::Escalate);
    }

    #[test]
    fn not_retryable_takes_the_kinds_fallback() {
        let mut f = failure(Kind::BuildFailed, 1);
        f.retryable = false;
        f.fallback = Action::AskUser;
        let d = decide(&f, &RetryPolicy::default(), 0);
        assert_eq!(
            (d.action, d.retry, d.exhausted),
            (Action::AskUser, None, false)
        );
    }
}
