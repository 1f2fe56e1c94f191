//! A stored breaker kept within what its settings could have produced: state is read from
//! files anyone with the folder can write (a cloned project's `.triage/`, an older version's,
//! a hand edit), so every duration, count and time the machine acts on is clamped before it
//! acts. What is left of an open period is at most the longest the settings make
//! ([`open_duration`] of its failed probes, or an API's named wait for the upstream key), it
//! cannot have begun in the future, and counts, windows and leases stay
//! within the settings' limits. The operator's own states (`forced_open`, `disabled`) are
//! what `breaker trip` and `breaker disable` make, for as long as they were asked for, and are
//! kept as they are.

use super::machine::{open_duration, DEFAULT_WINDOW_SIZE};
use super::{Breaker, BreakerSettings, Millis, State};
use crate::core::duration::Dur;
use std::time::Duration;

/// How far ahead of this clock a stored time may be and still be taken as written: local
/// processes' clocks (and `TRIAGE_NOW` in tests) may differ by this much.
pub const CLOCK_SKEW_MS: Millis = 60_000;

/// The longest wait an API's answer can hold the breaker that hears it ([breaker] upstream)
/// open for: its `retry-after`, or the time until its usage limit resets, up to this.
pub const MAX_NAMED_WAIT_MS: u64 = 7 * 86_400_000;

/// Brings `b` within what `s` could have produced by `now`; `named_wait_ms`: the longest wait
/// an API may name for this breaker ([`MAX_NAMED_WAIT_MS`] for the upstream key, else 0).
/// Returns what it changed, in words (empty when nothing was out of bounds).
pub fn clamp(b: &mut Breaker, s: &BreakerSettings, named_wait_ms: u64, now: Millis) -> Vec<String> {
    let mut fixed = Vec::new();
    let ahead = now.saturating_add(CLOCK_SKEW_MS);
    let not_ahead = |what: &str, t: &mut Millis, fixed: &mut Vec<String>| {
        if *t > ahead {
            fixed.push(format!("{what} {} in the future", ago(*t - now)));
            *t = now;
        }
    };

    if let Some(at) = b.opened_at.as_mut() {
        not_ahead("opened_at", at, &mut fixed);
    }
    // What is left of an open period: at most the longest the settings make, or the longest
    // wait an API may name, for the breaker that hears one.
    if b.state == State::Open {
        if let Some(at) = b.opened_at {
            let longest = open_duration(s, b.failed_probes).max(named_wait_ms);
            let passed = u64::try_from(now.saturating_sub(at)).unwrap_or(0);
            let left = b.open_duration_ms.saturating_sub(passed);
            if left > longest {
                fixed.push(format!(
                    "open for {} more, longer than the {} its policy allows",
                    ms(left),
                    ms(longest)
                ));
                b.open_duration_ms = passed.saturating_add(longest);
            }
        }
    }
    if let Some(at) = b.interval_start.as_mut() {
        not_ahead("interval_start", at, &mut fixed);
    }
    if let Some(at) = b.last_success.as_mut() {
        not_ahead("last_success", at, &mut fixed);
    }
    if let Some(e) = b.last_error.as_mut() {
        not_ahead("last_error.at", &mut e.at, &mut fixed);
    }

    let threshold = s.failure_threshold;
    if threshold > 0 && b.consecutive_failures > threshold {
        fixed.push(format!(
            "{} consecutive failures, more than the threshold of {threshold}",
            b.consecutive_failures
        ));
        b.consecutive_failures = threshold;
    }

    // The failure-rate window: no call recorded in the future, and no more calls than the
    // window holds.
    let before = b.calls.len();
    b.calls.retain(|c| c.at <= ahead);
    if b.calls.len() < before {
        fixed.push(format!(
            "{} window calls in the future",
            before - b.calls.len()
        ));
    }
    let size = match (s.window_size, s.window) {
        (Some(n), _) => n.max(1) as usize,
        (None, Some(_)) => usize::MAX,
        (None, None) => DEFAULT_WINDOW_SIZE as usize,
    };
    if b.calls.len() > size {
        fixed.push(format!(
            "{} window calls, more than the window's {size}",
            b.calls.len()
        ));
        let over = b.calls.len() - size;
        b.calls.drain(..over);
    }

    // Probe leases are held only while half-open, at most `half_open_probes` of them, each
    // ending within its TTL.
    if b.state == State::HalfOpen {
        let ttl = i64::try_from(s.probe_ttl.as_millis()).unwrap_or(i64::MAX);
        let last_end = ahead.saturating_add(ttl);
        let before = b.probes.len();
        b.probes.retain(|p| p.expires <= last_end);
        if b.probes.len() < before {
            fixed.push(format!(
                "{} probe leases ending after their TTL",
                before - b.probes.len()
            ));
        }
        let most = s.half_open_probes.max(1) as usize;
        if b.probes.len() > most {
            fixed.push(format!(
                "{} probe leases, more than the {most} it grants",
                b.probes.len()
            ));
            b.probes.truncate(most);
        }
        let needed = s.success_threshold.max(1);
        if b.probe_successes >= needed {
            fixed.push(format!(
                "{} probe successes while half-open, where {needed} close it",
                b.probe_successes
            ));
            b.probe_successes = needed - 1;
        }
    } else if !b.probes.is_empty() {
        fixed.push(format!("{} probe leases while {}", b.probes.len(), b.state));
        b.probes.clear();
    }
    fixed
}

fn ms(ms: u64) -> Dur {
    Dur(Duration::from_millis(ms))
}

fn ago(ms_ahead: Millis) -> Dur {
    Dur(Duration::from_millis(u64::try_from(ms_ahead).unwrap_or(0)))
}
