//! `SessionStart`: only what is actionable now, in at most three lines: the breakers that are
//! not closed (what a call to each gets now) and the unresolved trouble of earlier sessions
//! within `[voice] session_start_window` (a day by default). Older records stay in the log and
//! in `triage report`; they are not repeated to every new session.

use super::codec::Response;
use super::log_tail;
use crate::context::Context;
use crate::core::duration::humane;
use crate::core::hook_payload::Payload;
use crate::exit::Failure;
use crate::store::breakers::calls as breaker;
use crate::store::{repeats, sessions};
use std::time::Duration;

/// The most lines SessionStart says.
const MAX_LINES: usize = 3;

/// What SessionStart says of one breaker that is not closed: what a call to it gets now.
fn breaker_line(s: &breaker::Status) -> Option<String> {
    use crate::core::breaker::State;
    let wait = |secs: u64| humane(Duration::from_secs(secs));
    let what = match (s.state, s.half_open_in_s) {
        (State::Closed | State::Disabled, _) => return None,
        (State::Open, Some(secs)) if secs > 0 => format!(
            "calls are refused for {} more, then one probe call is let through",
            wait(secs)
        ),
        (State::Open, _) => "the next call is let through as a probe".to_string(),
        (State::HalfOpen, _) if s.probes_in_flight > 0 => {
            "a probe call is testing it now; other calls are refused until it ends".to_string()
        }
        (State::HalfOpen, _) => {
            "the next call is let through as a probe; its success closes the breaker".to_string()
        }
        (State::ForcedOpen, Some(secs)) if secs > 0 => format!(
            "an operator opened it; calls are refused for {} more",
            wait(secs)
        ),
        (State::ForcedOpen, _) => {
            "an operator opened it; calls are refused until it is reset".to_string()
        }
    };
    Some(format!(
        "breaker {} ({}): {what}.",
        crate::core::text::label(&s.key),
        s.state
    ))
}

/// "the last day", "the last 12 h".
fn window_words(d: Duration) -> String {
    if d == Duration::from_secs(86_400) {
        "the last day".to_string()
    } else {
        format!("the last {}", humane(d))
    }
}

pub(super) fn session_start(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    let g = cx.ground();
    let pruned = sessions::prune_starts(&g) + repeats::prune(&g);
    if pruned > 0 {
        cx.trace(
            "info",
            &format!("removed {pruned} call starts and repeat counts older than a day"),
        );
    }
    let policy = cx.policy()?;
    let window = policy.voice.session_start_window.0;
    let since = chrono::Duration::from_std(window)
        .ok()
        .and_then(|w| cx.now.checked_sub_signed(w))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
    let earlier = log_tail::unresolved_elsewhere(cx, p.session_id(), since)?;
    let trouble_line = (earlier.count > 0).then(|| {
        format!(
            "Unresolved errors from earlier sessions of this project: {} ({}) in {}; `triage report` has the details before you repeat what failed.",
            earlier.count,
            earlier.summary(),
            window_words(window)
        )
    });
    // A breaker is named only when its key is a plain identifier: a state root may come from
    // a clone, and a name triage cannot vouch for is not carried into a new session as if it
    // were an agent or tool of this project (it is counted, and `breaker status` lists it).
    let statuses = breaker::status_all(&g, || cx.policy())?;
    let mut unnamed = 0;
    let mut breakers: Vec<String> = Vec::new();
    for s in &statuses {
        if let Some(line) = breaker_line(s) {
            if crate::core::text::is_plain_name(&s.key) {
                breakers.push(line);
            } else {
                unnamed += 1;
            }
        }
    }
    let room = MAX_LINES - usize::from(trouble_line.is_some());
    if breakers.len() > room || unnamed > 0 {
        let keep = if breakers.len() + 1 > room {
            room - 1
        } else {
            breakers.len()
        };
        let more = breakers.len() - keep + unnamed;
        breakers.truncate(keep);
        let more_word = if keep == 0 { "" } else { " more" };
        let (noun, verb) = if more == 1 {
            ("breaker", "is")
        } else {
            ("breakers", "are")
        };
        breakers.push(format!(
            "{more}{more_word} {noun} {verb} not closed: `triage breaker status` lists them."
        ));
    }
    let lines: Vec<String> = breakers.into_iter().chain(trouble_line).collect();
    if lines.is_empty() {
        return Ok(Response::default());
    }
    Ok(Response::context(
        "SessionStart",
        lines
            .iter()
            .map(|l| format!("triage: {l}"))
            .collect::<Vec<_>>()
            .join("\n"),
    ))
}
