//! `SessionStart`: names the breakers that are not closed (what a call gets now) and the
//! unresolved errors of earlier sessions.

use super::codec::Response;
use super::log_tail;
use crate::context::Context;
use crate::core::hook_payload::Payload;
use crate::exit::Failure;
use crate::store::breakers::calls as breaker;
use crate::store::sessions;

/// What SessionStart says of one breaker that is not closed: what a call to it gets now.
fn breaker_line(s: &breaker::Status) -> Option<String> {
    use crate::core::breaker::State;
    let what = match (s.state, s.half_open_in_s) {
        (State::Closed | State::Disabled, _) => return None,
        (State::Open, Some(secs)) if secs > 0 => {
            format!("calls are refused for {secs} s more, then one probe call is let through")
        }
        (State::Open, _) => "the next call is let through as a probe".to_string(),
        (State::HalfOpen, _) if s.probes_in_flight > 0 => {
            "a probe call is testing it now; other calls are refused until it ends".to_string()
        }
        (State::HalfOpen, _) => {
            "the next call is let through as a probe; its success closes the breaker".to_string()
        }
        (State::ForcedOpen, Some(secs)) if secs > 0 => {
            format!("an operator opened it; calls are refused for {secs} s more")
        }
        (State::ForcedOpen, _) => {
            "an operator opened it; calls are refused until it is reset".to_string()
        }
    };
    Some(format!("- {} ({}): {what}", s.key, s.state))
}

pub(super) fn session_start(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    let g = cx.ground();
    let pruned = sessions::prune_starts(&g);
    if pruned > 0 {
        cx.trace(
            "info",
            &format!("removed {pruned} call starts older than a day that no PostToolUse took"),
        );
    }
    let mut parts = Vec::new();
    let not_closed: Vec<String> = breaker::status_all(&g, || cx.policy())?
        .into_iter()
        .filter_map(|s| breaker_line(&s))
        .collect();
    if !not_closed.is_empty() {
        parts.push(format!(
            "Circuit breakers not closed (`triage breaker status` shows why):\n{}",
            not_closed.join("\n")
        ));
    }
    let earlier = log_tail::unresolved_elsewhere(cx, p.session_id())?;
    if earlier.count > 0 {
        parts.push(format!(
            "Unresolved errors from earlier sessions of this project: {} ({}). `triage report` summarizes them; `triage record-error --resolve ID` closes one.",
            earlier.count,
            earlier.summary()
        ));
    }
    if parts.is_empty() {
        return Ok(Response::default());
    }
    Ok(Response::context(
        "SessionStart",
        format!("triage: {}", parts.join("\n")),
    ))
}
