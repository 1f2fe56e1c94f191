//! `breaker record`'s call result: the flags over the fields of its stdin.

use super::{CallReport, Outcome};
use crate::core::duration::Dur;
use crate::core::vocab::Kind;
use crate::exit::Failure;
use serde_json::Value;

/// A call's result from the flags, over stdin's fields (`outcome`, `ticket`, `kind`,
/// `duration` or `duration_ms`, `detail` or `error`).
pub fn from_input(
    input: &Value,
    outcome: Option<Outcome>,
    ticket: &Option<String>,
    kind: Option<Kind>,
    duration: Option<Dur>,
    detail: &Option<String>,
) -> Result<CallReport, Failure> {
    let text = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
    let parse = |k: &str, what: &str| -> Result<Option<String>, Failure> {
        Ok(text(k)).and_then(|v| match v {
            Some(s) if s.trim().is_empty() => {
                Err(Failure::data(format!("stdin's \"{k}\" is empty; {what}")))
            }
            v => Ok(v),
        })
    };
    let outcome = match outcome {
        Some(o) => o,
        None => match parse("outcome", "send success, failure or ignored")? {
            Some(s) => s
                .parse()
                .map_err(|e: String| Failure::data(format!("stdin's \"outcome\": {e}")))?,
            None => return Err(Failure::usage(
                "say what happened: --outcome success|failure|ignored (or send {\"outcome\": ...})",
            )),
        },
    };
    let kind = match kind {
        Some(k) => Some(k),
        None => match text("kind") {
            Some(k) => Some(
                k.parse()
                    .map_err(|e: String| Failure::data(format!("stdin's \"kind\": {e}")))?,
            ),
            None => None,
        },
    };
    let duration_ms = match duration {
        Some(d) => Some(d.as_millis()),
        None => match (
            text("duration"),
            input.get("duration_ms").and_then(Value::as_u64),
        ) {
            (Some(d), _) => Some(
                d.parse::<Dur>()
                    .map_err(|e| Failure::data(format!("stdin's \"duration\": {e}")))?
                    .as_millis(),
            ),
            (None, ms) => ms,
        },
    };
    Ok(CallReport {
        outcome: Some(outcome),
        ticket: ticket.clone().or_else(|| text("ticket")),
        kind,
        detail: detail
            .clone()
            .or_else(|| text("detail"))
            .or_else(|| text("error")),
        duration_ms,
    })
}
