//! The transitions: `check`, `record`, `status` and the operator's `reset`, `trip`,
//! `disable` and `half_open`. Each takes the state, the settings and `now`, changes the state
//! and returns its answer with the transitions that happened (usually none, at most two).

use super::{Breaker, Call, LastError, Millis, Outcome, Probe, State, Transition};
use crate::core::policy::BreakerSettings;
use crate::core::vocab::Kind;
use serde::Serialize;

/// Without `window` or `window_size`, the failure rate is taken over this many calls
/// (resilience4j's default sliding window).
pub const DEFAULT_WINDOW_SIZE: u32 = 100;

/// The answer to `check`: may the call go ahead?
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Permit {
    /// Whether the call may go ahead.
    pub allowed: bool,
    /// `closed`, `open`, `forced_open`, `probe_granted`, `probes_exhausted` or `disabled`.
    pub reason: &'static str,
    /// When refused: whole seconds until it may be asked again (none while forced open
    /// without an end).
    pub retry_after_s: Option<u64>,
    /// When allowed: the ticket to hand back to `record`.
    pub ticket: Option<String>,
}

/// One result reported to `record`.
#[derive(Clone, Debug, Default)]
pub struct CallReport {
    /// What the call came to.
    pub outcome: Option<Outcome>,
    /// The ticket `check` gave, if the caller kept it.
    pub ticket: Option<String>,
    /// The kind of failure, if known.
    pub kind: Option<Kind>,
    /// The error text, if any.
    pub detail: Option<String>,
    /// How long the call took, if known (for `slow_call_threshold`).
    pub duration_ms: Option<u64>,
}

/// What `record` did with a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// It counted toward the rules of the current state.
    Counted,
    /// `ignored`: neutral (a probe permit was given back, if one was held).
    Ignored,
    /// Its ticket was from another generation: nothing changed.
    Stale,
    /// It arrived while open (or half-open without a probe out): kept in the totals and the
    /// last error, but it moves nothing and never extends the open period.
    Late,
    /// The breaker is disabled: nothing is counted.
    Disabled,
}

/// The answer to `record`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Recorded {
    /// What was done with the result.
    pub effect: Effect,
    /// `success` or `failure` as counted (a slow success counts as a failure).
    pub counted_as: Option<Outcome>,
    /// True when a success was slower than `slow_call_threshold`.
    pub slow_call: bool,
}

/// An operator's request the state machine does not allow (e.g. closed → half-open).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The current state.
    pub from: State,
    /// The state asked for.
    pub to: State,
}

/// The failure-rate window as status shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Window {
    /// Calls in the window.
    pub calls: usize,
    /// Failures among them.
    pub failures: usize,
    /// failures / calls (0 when empty).
    pub failure_rate: f64,
}

/// A breaker as `status` shows it, at `now`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Status {
    /// The key.
    pub key: String,
    /// The state.
    pub state: State,
    /// The generation.
    pub generation: u64,
    /// Consecutive failures while closed.
    pub consecutive_failures: u32,
    /// The threshold they are compared with (0: off).
    pub failure_threshold: u32,
    /// The failure-rate window, when `failure_rate` is set.
    pub window: Option<Window>,
    /// When it last opened (Unix ms; the command prints RFC 3339).
    pub opened_at: Option<Millis>,
    /// The length of the current open period, in seconds.
    pub open_duration_s: Option<f64>,
    /// Seconds until it goes half-open (open, or forced open for a while).
    pub half_open_in_s: Option<u64>,
    /// Probe permits held (half-open).
    pub probes_in_flight: usize,
    /// Probe successes so far (half-open).
    pub probe_successes: u32,
    /// The last failure.
    pub last_error: Option<LastError>,
    /// When the last success was recorded (Unix ms).
    pub last_success: Option<Millis>,
    /// Seconds since the last success.
    pub since_last_success_s: Option<u64>,
    /// Totals since creation.
    pub totals: super::Totals,
}

// ---------------------------------------------------------------------------------------------
// The five operations.

/// May a call go ahead? Performs the lazy transitions first.
pub fn check(b: &mut Breaker, s: &BreakerSettings, now: Millis) -> (Permit, Vec<Transition>) {
    let mut tr = Vec::new();
    advance(b, s, now, &mut tr);
    let permit = match b.state {
        State::Disabled => allow("disabled", None),
        State::Closed => allow("closed", Some(format!("{}-0", b.generation))),
        State::ForcedOpen => deny(
            "forced_open",
            b.forced_until.map(|u| ceil_secs(u.saturating_sub(now))),
        ),
        State::Open => deny("open", Some(ceil_secs(open_remaining(b, now)))),
        State::HalfOpen => {
            expire_leases(b, s, now);
            if b.probes.len() < s.half_open_probes.max(1) as usize {
                b.last_probe = b.last_probe.wrapping_add(1);
                let ticket = format!("{}-{}", b.generation, b.last_probe);
                b.probes.push(Probe {
                    ticket: ticket.clone(),
                    expires: now.saturating_add(ms_i64(s.probe_ttl.as_millis())),
                });
                allow("probe_granted", Some(ticket))
            } else {
                let next = b.probes.iter().map(|p| p.expires).min().unwrap_or(now);
                deny(
                    "probes_exhausted",
                    Some(ceil_secs(next.saturating_sub(now))),
                )
            }
        }
    };
    (permit, tr)
}

/// Reports a result. A bad ticket (not `GEN-N`) is an error for the caller to name.
///
/// A ticket of the generation an open breaker entered is the opener's ([`opener_ticket`]):
/// its result is that of a retry within the same run, which the breaker never refused.
pub fn record(
    b: &mut Breaker,
    s: &BreakerSettings,
    report: &CallReport,
    now: Millis,
) -> Result<(Recorded, Vec<Transition>), String> {
    let ticket_gen = match &report.ticket {
        Some(t) => Some(ticket_generation(t)?),
        None => None,
    };
    let mut tr = Vec::new();
    advance(b, s, now, &mut tr);
    let outcome = report.outcome.unwrap_or(Outcome::Failure);
    let slow = outcome == Outcome::Success
        && match (s.slow_call_threshold, report.duration_ms) {
            (Some(limit), Some(d)) => d > limit.as_millis(),
            _ => false,
        };
    let counted = if slow { Outcome::Failure } else { outcome };
    let done = |effect, counted_as| Recorded {
        effect,
        counted_as,
        slow_call: slow && counted_as.is_some(),
    };

    if b.state == State::Disabled {
        return Ok((done(Effect::Disabled, None), tr));
    }
    if ticket_gen.is_some_and(|g| g != b.generation) {
        b.totals.stale = b.totals.stale.saturating_add(1);
        return Ok((done(Effect::Stale, None), tr));
    }
    if counted == Outcome::Ignored {
        b.totals.ignored = b.totals.ignored.saturating_add(1);
        if b.state == State::HalfOpen {
            release_lease(b, report.ticket.as_deref());
        }
        return Ok((done(Effect::Ignored, None), tr));
    }
    note(b, counted, report, slow, now);
    let effect = match b.state {
        State::Closed => {
            if counted == Outcome::Success {
                b.opens_unrecovered = 0;
            }
            count_closed(b, s, counted == Outcome::Failure, now, &mut tr);
            Effect::Counted
        }
        State::HalfOpen => {
            // Only a probe's result decides: its ticket, or (without one) a lease still out.
            let is_probe = report.ticket.is_some() || !b.probes.is_empty();
            if !is_probe {
                Effect::Late
            } else {
                release_lease(b, report.ticket.as_deref());
                if counted == Outcome::Failure {
                    b.failed_probes = b.failed_probes.saturating_add(1);
                    open(b, s, "probe_failed", now, &mut tr);
                } else {
                    b.probe_successes = b.probe_successes.saturating_add(1);
                    if b.probe_successes >= s.success_threshold.max(1) {
                        close(b, "probe_succeeded", now, &mut tr);
                    }
                }
                Effect::Counted
            }
        }
        // The run whose own failure opened it holds a ticket of the open generation (no check
        // hands one out while open): its retry goes ahead, and a success closes it (seed 000:
        // "reset on successful execution"); a failure changes nothing more.
        State::Open if ticket_gen == Some(b.generation) => {
            if counted == Outcome::Success {
                close(b, "retry_succeeded", now, &mut tr);
                Effect::Counted
            } else {
                Effect::Late
            }
        }
        State::Open | State::ForcedOpen | State::Disabled => Effect::Late,
    };
    let counted_as = (effect == Effect::Counted).then_some(counted);
    Ok((
        Recorded {
            effect,
            counted_as,
            slow_call: slow,
        },
        tr,
    ))
}

/// The breaker as it stands at `now` (performing the lazy transitions, as gobreaker's
/// `State()` does, so what status shows is what the next check will see).
pub fn status(b: &mut Breaker, s: &BreakerSettings, now: Millis) -> (Status, Vec<Transition>) {
    let mut tr = Vec::new();
    advance(b, s, now, &mut tr);
    if b.state == State::HalfOpen {
        expire_leases(b, s, now);
    }
    let window = s.failure_rate.map(|_| {
        let failures = b.calls.iter().filter(|c| c.failed).count();
        let calls = b.calls.len();
        Window {
            calls,
            failures,
            failure_rate: if calls == 0 {
                0.0
            } else {
                failures as f64 / calls as f64
            },
        }
    });
    let half_open_in_s = match b.state {
        State::Open => Some(ceil_secs(open_remaining(b, now))),
        State::ForcedOpen => b.forced_until.map(|u| ceil_secs(u.saturating_sub(now))),
        _ => None,
    };
    let st = Status {
        key: b.key.clone(),
        state: b.state,
        generation: b.generation,
        consecutive_failures: b.consecutive_failures,
        failure_threshold: s.failure_threshold,
        window,
        opened_at: b.opened_at,
        open_duration_s: matches!(b.state, State::Open).then(|| b.open_duration_ms as f64 / 1e3),
        half_open_in_s,
        probes_in_flight: b.probes.len(),
        probe_successes: b.probe_successes,
        last_error: b.last_error.clone(),
        last_success: b.last_success,
        since_last_success_s: b.last_success.map(|t| elapsed(t, now) / 1000),
        totals: b.totals,
    };
    (st, tr)
}

/// Back to closed, counts cleared, in a new generation. Resetting a closed breaker clears its
/// counts and logs nothing.
pub fn reset(b: &mut Breaker, now: Millis) -> Vec<Transition> {
    let mut tr = Vec::new();
    b.opens_unrecovered = 0;
    if b.state == State::Closed {
        // No transition to log, but a new generation: a ticket taken before the reset is
        // stale, so a call that began before it cannot count against the fresh start.
        clear_counts(b, now);
        b.generation = b.generation.wrapping_add(1);
    } else {
        close(b, "reset", now, &mut tr);
    }
    tr
}

/// Forced open, until reset or (with `until`) until then, after which it goes half-open.
/// Tripping a forced-open breaker again only moves its end.
pub fn trip(b: &mut Breaker, until: Option<Millis>, now: Millis) -> Vec<Transition> {
    let mut tr = Vec::new();
    if b.state != State::ForcedOpen {
        go(b, State::ForcedOpen, "tripped", now, &mut tr);
        b.probes.clear();
    }
    b.forced_until = until;
    tr
}

/// Always allowed, nothing counted, until reset.
pub fn disable(b: &mut Breaker, now: Millis) -> Vec<Transition> {
    let mut tr = Vec::new();
    if b.state != State::Disabled {
        go(b, State::Disabled, "disabled", now, &mut tr);
        b.probes.clear();
        b.forced_until = None;
    }
    tr
}

/// Open (or forced open) → half-open now, without waiting for the cooldown. From closed or
/// disabled this is refused: a half-open period only follows an open one.
pub fn half_open(b: &mut Breaker, now: Millis) -> Result<Vec<Transition>, Refused> {
    let mut tr = Vec::new();
    match b.state {
        State::HalfOpen => {}
        State::Open | State::ForcedOpen => enter_half_open(b, "manual", now, &mut tr),
        from => {
            return Err(Refused {
                from,
                to: State::HalfOpen,
            })
        }
    }
    Ok(tr)
}

// ---------------------------------------------------------------------------------------------
// The pieces.

fn allow(reason: &'static str, ticket: Option<String>) -> Permit {
    Permit {
        allowed: true,
        reason,
        retry_after_s: None,
        ticket,
    }
}

fn deny(reason: &'static str, retry_after_s: Option<u64>) -> Permit {
    Permit {
        allowed: false,
        reason,
        retry_after_s,
        ticket: None,
    }
}

/// The lazy transitions: a forced-open period or an open period that has ended, and the
/// closed-state `interval`.
fn advance(b: &mut Breaker, s: &BreakerSettings, now: Millis, tr: &mut Vec<Transition>) {
    match b.state {
        State::ForcedOpen if b.forced_until.is_some_and(|u| now >= u) => {
            enter_half_open(b, "forced_period_ended", now, tr);
        }
        State::Open if open_remaining(b, now) == 0 => {
            enter_half_open(b, "cooldown_elapsed", now, tr);
        }
        State::Closed => {
            if let Some(iv) = s.interval {
                let start = *b.interval_start.get_or_insert(now);
                if now < start || elapsed(start, now) >= iv.as_millis() {
                    b.consecutive_failures = 0;
                    b.calls.clear();
                    b.interval_start = Some(now);
                }
            }
        }
        _ => {}
    }
}

/// Milliseconds left in the open period; never more than the period, never negative, even
/// when the clock went backwards.
fn open_remaining(b: &Breaker, now: Millis) -> u64 {
    let Some(at) = b.opened_at else { return 0 };
    let passed = elapsed(at, now);
    b.open_duration_ms.saturating_sub(passed)
}

/// `now - then` in ms, 0 when the clock went backwards.
fn elapsed(then: Millis, now: Millis) -> u64 {
    u64::try_from(now.saturating_sub(then)).unwrap_or(0)
}

fn ceil_secs(ms: impl TryInto<u64>) -> u64 {
    let ms: u64 = ms.try_into().unwrap_or(0);
    ms.div_ceil(1000)
}

fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Drops leases that ran out, and leases further ahead than a whole TTL (the clock went
/// backwards): a permit never outlives its lease.
fn expire_leases(b: &mut Breaker, s: &BreakerSettings, now: Millis) {
    let ttl = ms_i64(s.probe_ttl.as_millis());
    b.probes
        .retain(|p| p.expires > now && p.expires.saturating_sub(now) <= ttl);
}

/// Gives back the lease of `ticket`, or (without a ticket) the oldest one.
fn release_lease(b: &mut Breaker, ticket: Option<&str>) {
    let at = match ticket {
        Some(t) => b.probes.iter().position(|p| p.ticket == t),
        None => (!b.probes.is_empty()).then_some(0),
    };
    if let Some(i) = at {
        b.probes.remove(i);
    }
}

/// The ticket a caller whose failure just opened the breaker (it entered generation
/// `generation`) keeps for the retries of the same run.
pub fn opener_ticket(generation: u64) -> String {
    format!("{generation}-0")
}

/// `GEN-N` → GEN.
fn ticket_generation(ticket: &str) -> Result<u64, String> {
    ticket
        .split_once('-')
        .filter(|(_, n)| n.parse::<u64>().is_ok())
        .and_then(|(g, _)| g.parse::<u64>().ok())
        .ok_or_else(|| {
            format!("ticket `{ticket}` is not one `breaker check` gave (they look like 3-1)")
        })
}

/// Keeps the totals, the last error and the last success.
fn note(b: &mut Breaker, counted: Outcome, report: &CallReport, slow: bool, now: Millis) {
    if counted == Outcome::Failure {
        b.totals.failures = b.totals.failures.saturating_add(1);
        b.last_error = Some(LastError {
            at: now,
            kind: report.kind.or(slow.then_some(Kind::Timeout)),
            detail: report.detail.clone(),
            slow,
        });
    } else {
        b.totals.successes = b.totals.successes.saturating_add(1);
        b.last_success = Some(b.last_success.map_or(now, |t| t.max(now)));
    }
}

/// Closed: count the call and trip when a rule says so.
fn count_closed(
    b: &mut Breaker,
    s: &BreakerSettings,
    failed: bool,
    now: Millis,
    tr: &mut Vec<Transition>,
) {
    if failed {
        b.consecutive_failures = b.consecutive_failures.saturating_add(1);
    } else {
        b.consecutive_failures = 0;
    }
    let mut rate_tripped = false;
    if let Some(rate) = s.failure_rate {
        b.calls.push_back(Call { at: now, failed });
        if let Some(w) = s.window {
            let horizon = now.saturating_sub(ms_i64(w.as_millis()));
            while b.calls.front().is_some_and(|c| c.at <= horizon) {
                b.calls.pop_front();
            }
        }
        let size = match (s.window_size, s.window) {
            (Some(n), _) => n.max(1) as usize,
            (None, Some(_)) => usize::MAX,
            (None, None) => DEFAULT_WINDOW_SIZE as usize,
        };
        while b.calls.len() > size {
            b.calls.pop_front();
        }
        let calls = b.calls.len();
        let failures = b.calls.iter().filter(|c| c.failed).count();
        rate_tripped = failed
            && calls >= s.minimum_calls.max(1) as usize
            && failures as f64 >= rate * calls as f64;
    }
    if failed && s.failure_threshold > 0 && b.consecutive_failures >= s.failure_threshold {
        open(b, s, "consecutive_failures", now, tr);
    } else if rate_tripped {
        open(b, s, "failure_rate", now, tr);
    }
}

/// Without `max_cooldown`, a growing open period stops here (or at the cooldown, if that is
/// longer): a breaker whose probes keep failing is not shut for years.
pub const UNCAPPED_MAX_OPEN_MS: u64 = 24 * 3600 * 1000;

/// Open period: the cooldown, grown by the multiplier for each failed probe, capped by
/// `max_cooldown` (unset: by [`UNCAPPED_MAX_OPEN_MS`], or the cooldown if longer).
pub fn open_duration(s: &BreakerSettings, failed_probes: u32) -> u64 {
    let base = s.cooldown.as_millis() as f64;
    let grown = base
        * s.cooldown_multiplier
            .max(1.0)
            .powi(failed_probes.min(1000) as i32);
    let capped = match s.max_cooldown {
        Some(cap) => grown.min(cap.as_millis() as f64),
        None => grown.min(base.max(UNCAPPED_MAX_OPEN_MS as f64)),
    };
    if capped.is_finite() && capped < u64::MAX as f64 {
        capped as u64
    } else {
        u64::MAX
    }
}

fn open(
    b: &mut Breaker,
    s: &BreakerSettings,
    why: &'static str,
    now: Millis,
    tr: &mut Vec<Transition>,
) {
    go(b, State::Open, why, now, tr);
    b.totals.opened = b.totals.opened.saturating_add(1);
    b.opens_unrecovered = b.opens_unrecovered.saturating_add(1);
    b.opened_at = Some(now);
    b.open_duration_ms = open_duration(s, b.failed_probes);
    b.probes.clear();
    b.probe_successes = 0;
}

fn enter_half_open(b: &mut Breaker, why: &'static str, now: Millis, tr: &mut Vec<Transition>) {
    go(b, State::HalfOpen, why, now, tr);
    b.probes.clear();
    b.probe_successes = 0;
    b.forced_until = None;
}

fn close(b: &mut Breaker, why: &'static str, now: Millis, tr: &mut Vec<Transition>) {
    go(b, State::Closed, why, now, tr);
    clear_counts(b, now);
    b.failed_probes = 0;
    b.opened_at = None;
    b.open_duration_ms = 0;
    b.forced_until = None;
    b.probes.clear();
    b.probe_successes = 0;
}

fn clear_counts(b: &mut Breaker, now: Millis) {
    b.consecutive_failures = 0;
    b.calls.clear();
    b.interval_start = Some(now);
}

fn go(b: &mut Breaker, to: State, reason: &'static str, now: Millis, tr: &mut Vec<Transition>) {
    let from = b.state;
    b.state = to;
    b.generation = b.generation.wrapping_add(1);
    tr.push(Transition {
        from,
        to,
        reason,
        generation: b.generation,
        at: now,
    });
}
