//! Subagent launches the client refuses because the agent type does not exist ("Agent type
//! 'code-reviewer' not found. Available agents: general-purpose, Explore, …"): the model
//! misspelled a name. That is `not_found`, with the types the client lists as the way out; it
//! says nothing about an agent's health, so it charges no breaker (a `code-reviewer` breaker
//! would guard nothing) and counts toward no threshold.

use super::codec::Response;
use crate::context::Context;
use crate::core::breaker::{CallReport, Outcome};
use crate::core::classify::{self, input};
use crate::core::error_record;
use crate::core::hook_payload::Payload;
use crate::core::text;
use crate::exit::Failure;
use crate::store::breakers::calls as breaker;
use crate::store::sessions;
use serde_json::{json, Value};

/// The unknown type and the available ones, from the client's error text
/// ([`input::unknown_agent_type`]).
pub(super) fn unknown_type(error: &str) -> Option<(String, Vec<String>)> {
    input::unknown_agent_type(error)
}

/// PostToolUseFailure of the subagent tool for an undefined agent type: recorded as
/// `not_found` (counting toward no threshold), a probe permit its launch took handed back,
/// and the model told which types exist. `None`: not such a failure.
pub(super) fn undefined_agent(cx: &Context, p: &Payload) -> Result<Option<Response>, Failure> {
    if !p.is_subagent_tool() {
        return Ok(None);
    }
    let Some((name, available)) = p.error().and_then(unknown_type) else {
        return Ok(None);
    };
    let g = cx.ground();
    let policy = cx.policy()?;
    // Its PreToolUse let it through: a probe permit it took goes back, counting nothing.
    let start = p
        .tool_use_id()
        .and_then(|id| sessions::take_start(&g, p.session_id(), id));
    if let Some(start) = start.filter(|s| s.ticket.as_deref().is_some_and(|t| !t.ends_with("-0"))) {
        let report = CallReport {
            outcome: Some(Outcome::Ignored),
            ticket: start.ticket.clone(),
            ..CallReport::default()
        };
        if let Err(f) = breaker::record_in(&g, policy, &start.key, p.session_id(), &report) {
            cx.warn(&format!("a probe permit was not handed back: {f}"));
        }
    }
    let directive = classify::agent_type_directive(&available);
    let input = json!({
        "kind": "not_found",
        "detail": format!("there is no agent type {}", text::name(&name)),
        "suggestions": [directive],
        "agent": name,
        "session_id": p.session_id(),
        "task_id": p.tool_use_id(),
        "retryable": false,
        "context": {"hook_event_name": p.event(), "tool_name": p.tool_name(), "available_agents": available},
    });
    let (mut rec, _) = error_record::classified_at(&input, policy, None, Some(cx.now));
    rec.error
        .insert("counts_toward_thresholds".into(), Value::Bool(false));
    if let Err(f) = super::store_record(cx, p, rec) {
        cx.warn(&format!("the failure was not recorded: {f}"));
    }
    Ok(Some(Response::context(
        "PostToolUseFailure",
        format!(
            "triage: there is no {} agent type. {directive}",
            text::name(&name)
        ),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_clients_wording() {
        let (name, available) = unknown_type(
            "Agent type 'code-reviewer' not found. Available agents: general-purpose, Explore, Plan, statusline-setup",
        )
        .unwrap();
        assert_eq!(name, "code-reviewer");
        assert_eq!(
            available,
            ["general-purpose", "Explore", "Plan", "statusline-setup"]
        );
        assert_eq!(unknown_type("Error: file not found"), None);
        assert_eq!(
            unknown_type("Agent type 'x' not found").map(|t| t.1.len()),
            Some(0)
        );
    }
}
