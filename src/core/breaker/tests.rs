//! Unit tests of the state machine, one per rule of issue 4, and a property test against a
//! small reference model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::machine::*;
use super::template::{circuit_open, CircuitOpen};
use super::*;
use crate::core::duration::Dur;
use crate::core::policy::Policy;

const S: Millis = 1000;
const T0: Millis = 1_767_323_045_000;

fn settings() -> BreakerSettings {
    Policy::default().breaker_for("agent")
}

fn rep(outcome: Outcome) -> CallReport {
    CallReport {
        outcome: Some(outcome),
        ..CallReport::default()
    }
}

fn rec(
    b: &mut Breaker,
    s: &BreakerSettings,
    o: Outcome,
    now: Millis,
) -> (Recorded, Vec<Transition>) {
    record(b, s, &rep(o), now).unwrap()
}

fn rec_t(b: &mut Breaker, s: &BreakerSettings, o: Outcome, t: &str, now: Millis) -> Recorded {
    let r = CallReport {
        ticket: Some(t.into()),
        ..rep(o)
    };
    record(b, s, &r, now).unwrap().0
}

fn fail_n(b: &mut Breaker, s: &BreakerSettings, n: usize, now: Millis) -> Vec<Transition> {
    let mut all = Vec::new();
    for _ in 0..n {
        all.extend(rec(b, s, Outcome::Failure, now).1);
    }
    all
}

fn opened(s: &BreakerSettings, now: Millis) -> Breaker {
    let mut b = Breaker::new("agent");
    fail_n(&mut b, s, s.failure_threshold as usize, now);
    assert_eq!(b.state, State::Open);
    b
}

#[test]
fn the_opener_of_a_breaker_retries_and_its_success_closes_it() {
    let s = settings();
    let mut b = Breaker::new("agent");
    fail_n(&mut b, &s, 1, T0);
    let (_, tr) = rec(&mut b, &s, Outcome::Failure, T0 + S);
    assert_eq!((b.state, b.totals.opened), (State::Open, 1));
    let mine = opener_ticket(tr[0].generation);
    // Its retry failed again: nothing more happens (no second opening, no longer period).
    let r = rec_t(&mut b, &s, Outcome::Failure, &mine, T0 + 2 * S);
    assert_eq!(
        (r.effect, b.state, b.totals.opened),
        (Effect::Late, State::Open, 1)
    );
    assert_eq!(b.opened_at, Some(T0 + S));
    // Another caller's old ticket is stale, a success without one is late.
    assert_eq!(
        rec_t(&mut b, &s, Outcome::Success, "0-0", T0 + 3 * S).effect,
        Effect::Stale
    );
    assert_eq!(
        rec(&mut b, &s, Outcome::Success, T0 + 3 * S).0.effect,
        Effect::Late
    );
    assert_eq!(b.state, State::Open);
    // The opener's next retry worked: closed, counts cleared.
    let r = rec_t(&mut b, &s, Outcome::Success, &mine, T0 + 4 * S);
    assert_eq!((r.effect, b.state), (Effect::Counted, State::Closed));
    assert_eq!(b.consecutive_failures, 0);
    // Opening again counts a second opening.
    fail_n(&mut b, &s, 2, T0 + 5 * S);
    assert_eq!(b.totals.opened, 2);
}

#[test]
fn trips_on_the_nth_consecutive_failure() {
    let s = settings();
    let mut b = Breaker::new("agent");
    assert!(fail_n(&mut b, &s, 1, T0).is_empty());
    assert_eq!(b.state, State::Closed);
    let tr = fail_n(&mut b, &s, 1, T0);
    assert_eq!(tr.len(), 1);
    assert_eq!(
        (tr[0].from, tr[0].to, tr[0].reason),
        (State::Closed, State::Open, "consecutive_failures")
    );
    let mut s3 = settings();
    s3.failure_threshold = 3;
    let mut b = Breaker::new("agent");
    fail_n(&mut b, &s3, 2, T0);
    assert_eq!(b.state, State::Closed);
    fail_n(&mut b, &s3, 1, T0);
    assert_eq!(b.state, State::Open);
}

#[test]
fn success_resets_the_count() {
    let s = settings();
    let mut b = Breaker::new("agent");
    fail_n(&mut b, &s, 1, T0);
    rec(&mut b, &s, Outcome::Success, T0);
    assert_eq!(b.consecutive_failures, 0);
    fail_n(&mut b, &s, 1, T0);
    assert_eq!(b.state, State::Closed);
}

#[test]
fn half_open_exactly_at_the_end_of_the_cooldown() {
    let s = settings();
    let mut b = opened(&s, T0);
    let (p, tr) = check(&mut b, &s, T0 + 60 * S - 1);
    assert_eq!(
        (p.allowed, p.reason, p.retry_after_s),
        (false, "open", Some(1))
    );
    assert!(tr.is_empty());
    let (p, _) = check(&mut b, &s, T0);
    assert_eq!(p.retry_after_s, Some(60));
    let (p, tr) = check(&mut b, &s, T0 + 60 * S);
    assert_eq!((p.allowed, p.reason), (true, "probe_granted"));
    assert_eq!(tr.len(), 1);
    assert_eq!((tr[0].from, tr[0].to), (State::Open, State::HalfOpen));
    assert_eq!(tr[0].reason, "cooldown_elapsed");
}

#[test]
fn probe_success_closes_and_probe_failure_reopens() {
    let s = settings();
    let mut b = opened(&s, T0);
    let (p, _) = check(&mut b, &s, T0 + 60 * S);
    let t = p.ticket.unwrap();
    let r = rec_t(&mut b, &s, Outcome::Success, &t, T0 + 61 * S);
    assert_eq!(r.effect, Effect::Counted);
    assert_eq!(b.state, State::Closed);
    assert_eq!(b.consecutive_failures, 0);

    let mut b = opened(&s, T0);
    let (p, _) = check(&mut b, &s, T0 + 60 * S);
    let t = p.ticket.unwrap();
    rec_t(&mut b, &s, Outcome::Failure, &t, T0 + 61 * S);
    assert_eq!(b.state, State::Open);
    assert_eq!(b.opened_at, Some(T0 + 61 * S));
}

#[test]
fn half_open_grants_at_most_the_probe_limit() {
    let mut s = settings();
    let mut b = opened(&s, T0);
    let at = T0 + 60 * S;
    assert_eq!(check(&mut b, &s, at).0.reason, "probe_granted");
    let (p, _) = check(&mut b, &s, at);
    assert_eq!((p.allowed, p.reason), (false, "probes_exhausted"));
    assert_eq!(p.retry_after_s, Some(60), "until the lease runs out");

    s.half_open_probes = 2;
    let mut b = opened(&s, T0);
    let granted: Vec<_> = (0..5).map(|_| check(&mut b, &s, at).0).collect();
    assert_eq!(granted.iter().filter(|p| p.allowed).count(), 2);
    assert_ne!(granted[0].ticket, granted[1].ticket);
}

#[test]
fn success_threshold_needs_that_many_probe_successes() {
    let mut s = settings();
    s.success_threshold = 2;
    s.half_open_probes = 2;
    let mut b = opened(&s, T0);
    let at = T0 + 60 * S;
    let t1 = check(&mut b, &s, at).0.ticket.unwrap();
    let t2 = check(&mut b, &s, at).0.ticket.unwrap();
    rec_t(&mut b, &s, Outcome::Success, &t1, at);
    assert_eq!(b.state, State::HalfOpen);
    rec_t(&mut b, &s, Outcome::Success, &t2, at);
    assert_eq!(b.state, State::Closed);
}

#[test]
fn ignored_counts_nothing_and_gives_back_the_permit() {
    let s = settings();
    let mut b = Breaker::new("agent");
    fail_n(&mut b, &s, 1, T0);
    let (r, _) = rec(&mut b, &s, Outcome::Ignored, T0);
    assert_eq!(r.effect, Effect::Ignored);
    assert_eq!(b.consecutive_failures, 1, "neither a success nor a failure");
    fail_n(&mut b, &s, 1, T0);
    assert_eq!(b.state, State::Open);

    let at = T0 + 60 * S;
    let t = check(&mut b, &s, at).0.ticket.unwrap();
    assert!(!check(&mut b, &s, at).0.allowed);
    rec_t(&mut b, &s, Outcome::Ignored, &t, at);
    assert_eq!(b.state, State::HalfOpen);
    assert_eq!(check(&mut b, &s, at).0.reason, "probe_granted");
}

#[test]
fn a_ticket_from_an_older_generation_is_stale() {
    let s = settings();
    let mut b = Breaker::new("agent");
    let old = check(&mut b, &s, T0).0.ticket.unwrap();
    fail_n(&mut b, &s, 2, T0);
    reset(&mut b, T0);
    let before = b.clone();
    let r = rec_t(&mut b, &s, Outcome::Failure, &old, T0);
    assert_eq!(r.effect, Effect::Stale);
    assert_eq!(b.consecutive_failures, before.consecutive_failures);
    assert_eq!(b.totals.stale, 1);
    assert!(record(
        &mut b,
        &s,
        &CallReport {
            ticket: Some("x".into()),
            ..rep(Outcome::Success)
        },
        T0
    )
    .is_err());
}

#[test]
fn trip_forces_open_until_reset_or_for_a_while() {
    let s = settings();
    let mut b = Breaker::new("agent");
    let tr = trip(&mut b, None, T0);
    assert_eq!((tr[0].from, tr[0].to), (State::Closed, State::ForcedOpen));
    assert!(
        trip(&mut b, None, T0).is_empty(),
        "a repeated trip logs nothing"
    );
    let (p, _) = check(&mut b, &s, T0 + 1_000_000 * S);
    assert_eq!(
        (p.allowed, p.reason, p.retry_after_s),
        (false, "forced_open", None)
    );
    rec(&mut b, &s, Outcome::Success, T0);
    assert_eq!(b.state, State::ForcedOpen, "results never close it");

    let mut b = Breaker::new("agent");
    trip(&mut b, Some(T0 + 30 * S), T0);
    let (p, _) = check(&mut b, &s, T0 + 10 * S);
    assert_eq!(p.retry_after_s, Some(20));
    let (p, tr) = check(&mut b, &s, T0 + 30 * S);
    assert_eq!(p.reason, "probe_granted");
    assert_eq!(tr[0].reason, "forced_period_ended");
}

#[test]
fn disabled_always_allows_and_counts_nothing() {
    let s = settings();
    let mut b = Breaker::new("agent");
    assert_eq!(disable(&mut b, T0).len(), 1);
    assert!(disable(&mut b, T0).is_empty());
    fail_n(&mut b, &s, 10, T0);
    assert_eq!(b.state, State::Disabled);
    assert_eq!(b.totals.failures, 0);
    let (p, _) = check(&mut b, &s, T0);
    assert_eq!((p.allowed, p.reason), (true, "disabled"));
    assert_eq!(reset(&mut b, T0)[0].to, State::Closed);
}

#[test]
fn reset_closes_and_a_repeated_reset_logs_nothing() {
    let s = settings();
    let mut b = opened(&s, T0);
    let g = b.generation;
    let tr = reset(&mut b, T0);
    assert_eq!(
        (tr[0].from, tr[0].to, tr[0].reason),
        (State::Open, State::Closed, "reset")
    );
    assert_eq!(b.generation, g + 1);
    assert!(reset(&mut b, T0).is_empty());
    assert_eq!(
        b.generation,
        g + 2,
        "a reset always starts a new generation"
    );
}

#[test]
fn a_ticket_from_before_a_reset_of_a_closed_breaker_is_stale() {
    let s = settings();
    let mut b = Breaker::new("agent");
    let (p, _) = check(&mut b, &s, T0);
    let ticket = p.ticket.expect("closed: a ticket");
    assert!(
        reset(&mut b, T0).is_empty(),
        "closed to closed logs nothing"
    );
    let report = CallReport {
        outcome: Some(Outcome::Failure),
        ticket: Some(ticket),
        ..CallReport::default()
    };
    let (r, _) = record(&mut b, &s, &report, T0).expect("record");
    assert_eq!(r.effect, Effect::Stale);
    assert_eq!(b.consecutive_failures, 0);
}

#[test]
fn closed_to_half_open_is_refused() {
    let mut b = Breaker::new("agent");
    assert_eq!(
        half_open(&mut b, T0),
        Err(Refused {
            from: State::Closed,
            to: State::HalfOpen
        })
    );
    let s = settings();
    let mut b = opened(&s, T0);
    assert_eq!(half_open(&mut b, T0).unwrap()[0].to, State::HalfOpen);
}

#[test]
fn count_window_trips_on_rate_once_minimum_calls_are_in() {
    let mut s = settings();
    s.failure_threshold = 0;
    s.failure_rate = Some(0.5);
    s.window_size = Some(4);
    s.minimum_calls = 4;
    let mut b = Breaker::new("agent");
    rec(&mut b, &s, Outcome::Failure, T0);
    rec(&mut b, &s, Outcome::Failure, T0);
    assert_eq!(b.state, State::Closed, "only 2 calls, minimum 4");
    rec(&mut b, &s, Outcome::Success, T0);
    let tr = rec(&mut b, &s, Outcome::Failure, T0).1;
    assert_eq!(tr[0].reason, "failure_rate", "3 of 4 >= 0.5");
    // The window slides: old failures fall out.
    let mut b = Breaker::new("agent");
    for o in [
        Outcome::Failure,
        Outcome::Success,
        Outcome::Success,
        Outcome::Success,
        Outcome::Success,
    ] {
        rec(&mut b, &s, o, T0);
    }
    assert_eq!(b.calls.len(), 4);
    rec(&mut b, &s, Outcome::Failure, T0);
    assert_eq!(b.state, State::Closed, "1 of 4 < 0.5");
    rec(&mut b, &s, Outcome::Failure, T0);
    assert_eq!(b.state, State::Open, "2 of 4 >= 0.5 (inclusive)");
}

#[test]
fn time_window_forgets_old_calls() {
    let mut s = settings();
    s.failure_threshold = 0;
    s.failure_rate = Some(0.5);
    s.window = Some(Dur::secs(60));
    s.minimum_calls = 3;
    let mut b = Breaker::new("agent");
    rec(&mut b, &s, Outcome::Failure, T0);
    rec(&mut b, &s, Outcome::Failure, T0 + S);
    rec(&mut b, &s, Outcome::Failure, T0 + 60 * S);
    assert_eq!(b.state, State::Closed, "the first failure left the window");
    rec(&mut b, &s, Outcome::Failure, T0 + 60 * S);
    assert_eq!(b.state, State::Open);
}

#[test]
fn interval_clears_closed_counts() {
    let mut s = settings();
    s.interval = Some(Dur::secs(600));
    let mut b = Breaker::new("agent");
    fail_n(&mut b, &s, 1, T0);
    fail_n(&mut b, &s, 1, T0 + 600 * S);
    assert_eq!(b.state, State::Closed);
    assert_eq!(b.consecutive_failures, 1);
}

#[test]
fn cooldown_grows_after_each_failed_probe_up_to_the_cap_and_resets_on_close() {
    let mut s = settings();
    s.cooldown_multiplier = 2.0;
    s.max_cooldown = Some(Dur::secs(200));
    let mut b = opened(&s, T0);
    let mut now = T0;
    let mut seen = vec![b.open_duration_ms];
    for _ in 0..3 {
        now += b.open_duration_ms as Millis;
        let t = check(&mut b, &s, now).0.ticket.unwrap();
        rec_t(&mut b, &s, Outcome::Failure, &t, now);
        seen.push(b.open_duration_ms);
    }
    assert_eq!(seen, vec![60_000, 120_000, 200_000, 200_000]);
    now += 200 * S;
    let t = check(&mut b, &s, now).0.ticket.unwrap();
    rec_t(&mut b, &s, Outcome::Success, &t, now);
    fail_n(&mut b, &s, 2, now);
    assert_eq!(b.open_duration_ms, 60_000);
}

#[test]
fn a_probe_that_never_reports_back_loses_its_lease() {
    let mut s = settings();
    s.probe_ttl = Dur::secs(10);
    let mut b = opened(&s, T0);
    let at = T0 + 60 * S;
    let lost = check(&mut b, &s, at).0.ticket.unwrap();
    assert!(!check(&mut b, &s, at + 9 * S).0.allowed);
    let p = check(&mut b, &s, at + 10 * S).0;
    assert_eq!(p.reason, "probe_granted");
    assert_ne!(p.ticket.as_deref(), Some(lost.as_str()));
}

#[test]
fn a_late_failure_while_open_never_extends_it() {
    let s = settings();
    let mut b = opened(&s, T0);
    let (r, tr) = rec(&mut b, &s, Outcome::Failure, T0 + 30 * S);
    assert_eq!(r.effect, Effect::Late);
    assert!(tr.is_empty());
    assert_eq!(b.opened_at, Some(T0));
    assert_eq!(b.last_error.as_ref().map(|e| e.at), Some(T0 + 30 * S));
    assert!(check(&mut b, &s, T0 + 60 * S).0.allowed);
    // Half-open with no probe out: a result without a ticket is late too.
    let mut b = opened(&s, T0);
    half_open(&mut b, T0).unwrap();
    assert_eq!(rec(&mut b, &s, Outcome::Failure, T0).0.effect, Effect::Late);
    assert_eq!(b.state, State::HalfOpen);
}

#[test]
fn a_slow_success_counts_as_a_failure() {
    let mut s = settings();
    s.slow_call_threshold = Some(Dur::secs(300));
    let mut b = Breaker::new("agent");
    let slow = CallReport {
        duration_ms: Some(300_001),
        ..rep(Outcome::Success)
    };
    let (r, _) = record(&mut b, &s, &slow, T0).unwrap();
    assert_eq!((r.counted_as, r.slow_call), (Some(Outcome::Failure), true));
    let ok = CallReport {
        duration_ms: Some(300_000),
        ..rep(Outcome::Success)
    };
    assert_eq!(
        record(&mut b, &s, &ok, T0).unwrap().0.counted_as,
        Some(Outcome::Success)
    );
}

#[test]
fn a_clock_that_goes_backwards_is_harmless() {
    let s = settings();
    let mut b = opened(&s, T0);
    let (p, _) = check(&mut b, &s, T0 - 3_600 * S);
    assert_eq!(p.retry_after_s, Some(60), "never more than the open period");
    rec(&mut b, &s, Outcome::Success, T0);
    let (st, _) = status(&mut b, &s, T0 - 100 * S);
    assert_eq!(st.since_last_success_s, Some(0));
    let mut b = opened(&s, T0);
    check(&mut b, &s, T0 + 60 * S);
    // A lease from "the future" after the clock jumped back is not honoured.
    assert!(check(&mut b, &s, T0 - 3_600 * S).0.allowed);
}

#[test]
fn template_4_names_the_agent_failures_last_error_and_wait() {
    let text = circuit_open(&CircuitOpen {
        agent: "researcher",
        reason: "open",
        failures: 2,
        last_error: Some("timeout: no answer"),
        since_last_success_s: Some(90),
        retry_after_s: Some(42),
    });
    assert!(text.starts_with("[CIRCUIT BREAKER] researcher circuit breaker opened\n"));
    for part in [
        "Consecutive failures: 2",
        "Last error: “timeout: no answer”",
        "Time since last success: 1 min 30 s ago",
        "Do not call researcher for 42 s: go on without it meanwhile, and call it again after that.",
    ] {
        assert!(text.contains(part), "{part} missing in {text}");
    }
    // Said to a model: nothing reads an answer, so no prompt for one.
    assert!(!text.contains("Enter choice"), "{text}");
    // A directive, never a menu.
    assert!(text.ends_with("call it again after that."), "{text}");
    for menu in ["(A)", "(B)", "(C)", "Options:"] {
        assert!(!text.contains(menu), "{menu} in {text}");
    }
}

// ---------------------------------------------------------------------------------------------
// The reference model: the seed's rules written as plainly as possible, compared with the
// machine over random sequences of checks, records and clock moves.

mod model {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum St {
        Closed,
        Open,
        Half,
    }

    struct Model {
        st: St,
        gen: u64,
        fails: u32,
        opened: Millis,
        dur: Millis,
        failed_probes: i32,
        leases: Vec<(String, Millis)>,
        succ: u32,
        next: u64,
    }

    struct Cfg {
        threshold: u32,
        cooldown: Millis,
        probes: usize,
        success: u32,
        ttl: Millis,
        mult: f64,
        cap: Millis,
    }

    impl Model {
        fn lazy(&mut self, now: Millis) {
            if self.st == St::Open && now >= self.opened + self.dur {
                self.st = St::Half;
                self.gen += 1;
                self.leases.clear();
                self.succ = 0;
            }
        }
        fn open(&mut self, c: &Cfg, now: Millis) {
            self.st = St::Open;
            self.gen += 1;
            self.opened = now;
            let d = c.cooldown as f64 * c.mult.powi(self.failed_probes);
            self.dur = (d.min(c.cap as f64)) as Millis;
            self.leases.clear();
        }
        fn check(&mut self, c: &Cfg, now: Millis) -> (bool, String) {
            self.lazy(now);
            match self.st {
                St::Closed => (true, format!("{}-0", self.gen)),
                St::Open => (false, String::new()),
                St::Half => {
                    self.leases.retain(|(_, e)| *e > now);
                    if self.leases.len() < c.probes {
                        self.next += 1;
                        let t = format!("{}-{}", self.gen, self.next);
                        self.leases.push((t.clone(), now + c.ttl));
                        (true, t)
                    } else {
                        (false, String::new())
                    }
                }
            }
        }
        fn record(&mut self, c: &Cfg, o: Outcome, ticket: Option<&str>, now: Millis) {
            self.lazy(now);
            if let Some(t) = ticket {
                if t.split('-').next() != Some(&self.gen.to_string()) {
                    return;
                }
            }
            let release = |m: &mut Model| match ticket {
                Some(t) => m.leases.retain(|(x, _)| x != t),
                None if !m.leases.is_empty() => {
                    m.leases.remove(0);
                }
                None => {}
            };
            match (self.st, o) {
                (_, Outcome::Ignored) => {
                    if self.st == St::Half {
                        release(self)
                    }
                }
                (St::Closed, Outcome::Failure) => {
                    self.fails += 1;
                    if self.fails >= c.threshold {
                        self.open(c, now)
                    }
                }
                (St::Closed, Outcome::Success) => self.fails = 0,
                (St::Open, _) => {}
                (St::Half, o) => {
                    if ticket.is_none() && self.leases.is_empty() {
                        return;
                    }
                    release(self);
                    if o == Outcome::Failure {
                        self.failed_probes += 1;
                        self.open(c, now);
                    } else {
                        self.succ += 1;
                        if self.succ >= c.success {
                            self.st = St::Closed;
                            self.gen += 1;
                            self.fails = 0;
                            self.failed_probes = 0;
                        }
                    }
                }
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Check,
        Record(u8, Option<usize>),
        Wait(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Check),
            4 => (0u8..3, proptest::option::of(0usize..8)).prop_map(|(o, t)| Op::Record(o, t)),
            2 => (0u32..90).prop_map(|s| Op::Wait(s * 1000)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn machine_agrees_with_the_reference_model(
            threshold in 1u32..4,
            probes in 1u32..3,
            success in 1u32..3,
            ttl_s in 5u64..90,
            grow in proptest::bool::ANY,
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let mut s = settings();
            s.failure_threshold = threshold;
            s.half_open_probes = probes;
            s.success_threshold = success;
            s.probe_ttl = Dur::secs(ttl_s);
            if grow {
                s.cooldown_multiplier = 1.5;
                s.max_cooldown = Some(Dur::secs(300));
            }
            let c = Cfg {
                threshold,
                cooldown: 60_000,
                probes: probes as usize,
                success,
                ttl: ttl_s as Millis * 1000,
                mult: s.cooldown_multiplier,
                cap: s.max_cooldown.map_or(Millis::MAX, |d| d.as_millis() as Millis),
            };
            let mut m = Model { st: St::Closed, gen: 0, fails: 0, opened: 0, dur: 0,
                failed_probes: 0, leases: vec![], succ: 0, next: 0 };
            let mut b = Breaker::new("k");
            let mut now = T0;
            let mut tickets: Vec<String> = Vec::new();
            for op in ops {
                match op {
                    Op::Check => {
                        let (p, _) = check(&mut b, &s, now);
                        let (allowed, t) = m.check(&c, now);
                        prop_assert_eq!(p.allowed, allowed);
                        if let Some(t2) = p.ticket {
                            prop_assert_eq!(&t2, &t);
                            tickets.push(t2);
                        }
                    }
                    Op::Record(o, t) => {
                        let o = [Outcome::Success, Outcome::Failure, Outcome::Ignored][o as usize];
                        let ticket = t.and_then(|i| tickets.get(i).cloned());
                        let r = CallReport { ticket: ticket.clone(), ..rep(o) };
                        record(&mut b, &s, &r, now).unwrap();
                        m.record(&c, o, ticket.as_deref(), now);
                    }
                    Op::Wait(ms) => now += ms as Millis,
                }
                let st = match b.state {
                    State::Closed => St::Closed,
                    State::Open => St::Open,
                    State::HalfOpen => St::Half,
                    other => panic!("{other}"),
                };
                prop_assert_eq!(st, m.st);
                prop_assert_eq!(b.generation, m.gen);
                if m.st == St::Closed {
                    prop_assert_eq!(b.consecutive_failures, m.fails);
                }
                // What the machine stores is within its own bounds: never clamped.
                let fixed = sane::clamp(&mut b.clone(), &s, 0, now);
                prop_assert!(fixed.is_empty(), "{:?}", fixed);
            }
        }
    }
}

#[test]
fn opening_again_without_a_success_while_closed_counts_as_unrecovered() {
    let s = settings();
    let mut b = opened(&s, T0);
    assert_eq!(b.opens_unrecovered, 1);
    // The probe after the cooldown fails: opened again.
    let later = T0 + s.cooldown.as_millis() as Millis + S;
    let (p, _) = check(&mut b, &s, later);
    assert!(p.allowed, "{p:?}");
    rec_t(&mut b, &s, Outcome::Failure, &p.ticket.unwrap(), later);
    assert_eq!((b.state, b.opens_unrecovered), (State::Open, 2));
    // A probe that succeeds closes it; only a success while closed clears the count.
    let later = later + 100 * s.cooldown.as_millis() as Millis;
    while b.state != State::Closed {
        let (p, _) = check(&mut b, &s, later);
        rec_t(&mut b, &s, Outcome::Success, &p.ticket.unwrap(), later);
    }
    assert_eq!(b.opens_unrecovered, 2);
    rec(&mut b, &s, Outcome::Success, later + S);
    assert_eq!(b.opens_unrecovered, 0);
    // A reset clears it too.
    let mut b = opened(&s, T0);
    reset(&mut b, T0 + S);
    assert_eq!(b.opens_unrecovered, 0);
}

// ---------------------------------------------------------------------------------------------
// Stored state clamped to what the settings could have produced.

#[test]
fn a_growing_open_period_without_max_cooldown_stops_at_a_day() {
    let mut s = settings();
    s.cooldown_multiplier = 2.0;
    let mut b = opened(&s, T0);
    let mut now = T0;
    for _ in 0..40 {
        now += b.open_duration_ms as Millis;
        let t = check(&mut b, &s, now).0.ticket.unwrap();
        rec_t(&mut b, &s, Outcome::Failure, &t, now);
    }
    assert_eq!(b.open_duration_ms, UNCAPPED_MAX_OPEN_MS);
    // A cooldown longer than the day is kept as it is.
    s.cooldown = Dur::secs(2 * 86_400);
    assert_eq!(open_duration(&s, 40), 2 * 86_400_000);
}

#[test]
fn a_state_the_machine_makes_is_never_clamped() {
    let s = settings();
    let mut b = opened(&s, T0);
    assert!(sane::clamp(&mut b.clone(), &s, 0, T0).is_empty());
    assert!(sane::clamp(&mut b, &s, 0, T0 + 59 * S).is_empty());
    let t = check(&mut b, &s, T0 + 60 * S).0.ticket.unwrap();
    assert!(sane::clamp(&mut b, &s, 0, T0 + 60 * S).is_empty());
    rec_t(&mut b, &s, Outcome::Success, &t, T0 + 61 * S);
    assert!(sane::clamp(&mut b, &s, 0, T0 + 61 * S).is_empty());
}

#[test]
fn a_planted_open_period_ends_within_the_policys_longest() {
    let s = settings();
    let mut b = opened(&s, T0);
    b.open_duration_ms = 3650 * 86_400_000;
    let fixed = sane::clamp(&mut b, &s, 0, T0 + 10 * S);
    assert_eq!(fixed.len(), 1, "{fixed:?}");
    assert!(fixed[0].contains("longer than the 1m"), "{fixed:?}");
    assert!(check(&mut b, &s, T0 + 69 * S).0.reason == "open");
    assert!(check(&mut b, &s, T0 + 70 * S).0.allowed);

    // Opened in the future: taken as opened now.
    let mut b = opened(&s, T0);
    b.opened_at = Some(T0 + 3650 * 86_400_000);
    let fixed = sane::clamp(&mut b, &s, 0, T0);
    assert!(
        fixed[0].starts_with("opened_at 3650d in the future"),
        "{fixed:?}"
    );
    assert_eq!(b.opened_at, Some(T0));
    // Within the clock skew it is left as written.
    let mut b = opened(&s, T0 + 30 * S);
    assert!(sane::clamp(&mut b, &s, 0, T0).is_empty());

    // The upstream key may stay open as long as an API's named wait.
    let mut b = opened(&s, T0);
    b.open_duration_ms = 600_000;
    assert!(sane::clamp(&mut b, &s, sane::MAX_NAMED_WAIT_MS, T0).is_empty());
    b.open_duration_ms = 30 * 86_400_000;
    sane::clamp(&mut b, &s, sane::MAX_NAMED_WAIT_MS, T0 + S);
    assert_eq!(b.open_duration_ms, S as u64 + sane::MAX_NAMED_WAIT_MS);
}

#[test]
fn planted_counts_leases_and_times_are_brought_within_the_settings() {
    let mut s = settings();
    s.failure_rate = Some(0.5);
    s.window_size = Some(10);
    let mut b = Breaker::new("agent");
    b.consecutive_failures = u32::MAX;
    b.calls = (0..50)
        .map(|i| Call {
            at: T0 - 100 + i,
            failed: true,
        })
        .chain([Call {
            at: T0 + 86_400_000,
            failed: true,
        }])
        .collect();
    b.last_success = Some(T0 + 86_400_000);
    b.probes.push(Probe {
        ticket: "0-1".into(),
        expires: T0,
    });
    let fixed = sane::clamp(&mut b, &s, 0, T0);
    assert_eq!(fixed.len(), 5, "{fixed:?}");
    assert_eq!(b.consecutive_failures, s.failure_threshold);
    assert_eq!(b.calls.len(), 10);
    assert_eq!(b.calls.back().map(|c| c.at), Some(T0 - 51));
    assert_eq!(b.last_success, Some(T0));
    assert!(b.probes.is_empty());

    // Half-open: no more leases than it grants, none ending after its TTL, and fewer
    // successes than close it.
    let s = settings();
    let mut b = opened(&s, T0);
    check(&mut b, &s, T0 + 60 * S);
    b.probes.push(Probe {
        ticket: "9-9".into(),
        expires: T0 + 3650 * 86_400_000,
    });
    b.probes.extend((0..5).map(|i| Probe {
        ticket: format!("2-{i}"),
        expires: T0 + 61 * S,
    }));
    b.probe_successes = u32::MAX;
    let fixed = sane::clamp(&mut b, &s, 0, T0 + 60 * S);
    assert_eq!(fixed.len(), 3, "{fixed:?}");
    assert_eq!(b.probes.len(), 1);
    assert_eq!(b.probe_successes, 0);
}

#[test]
fn planted_generations_and_totals_at_their_limits_do_not_overflow() {
    let s = settings();
    let mut b = Breaker::new("agent");
    b.generation = u64::MAX;
    b.totals.failures = u64::MAX;
    b.last_probe = u64::MAX;
    fail_n(&mut b, &s, 2, T0);
    assert_eq!(b.state, State::Open);
    assert_eq!(b.generation, 0);
    assert_eq!(b.totals.failures, u64::MAX);
    let p = check(&mut b, &s, T0 + 60 * S).0;
    assert_eq!(p.ticket.as_deref(), Some("1-0"));
}
