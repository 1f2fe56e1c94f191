//! Subagent launches the client refuses because the agent type does not exist ("Agent type
//! 'code-reviewer' not found. Available agents: general-purpose, Explore, …"): the model
//! misspelled a name. That is `not_found`, with the types the client lists as the way out; it
//! says nothing about an agent's health, so it charges no breaker (a `code-reviewer` breaker
//! would guard nothing) and counts toward no threshold.

use super::codec::Response;
use crate::context::Context;
use crate::core::breaker::{CallReport, Outcome};
use crate::core::error_record;
use crate::core::hook_payload::Payload;
use crate::core::text;
use crate::exit::Failure;
use crate::store::breakers::calls as breaker;
use crate::store::sessions;
use serde_json::{json, Value};

/// The unknown type and the available ones, from the client's error text.
pub(super) fn unknown_type(error: &str) -> Option<(String, Vec<String>)> {
    let start = error.find("Agent type '")? + "Agent type '".len();
    let rest = &error[start..];
    let end = rest.find("' not found")?;
    let name = rest[..end].trim();
    if name.is_empty() || name.len() > 200 {
        return None;
    }
    let available = match rest.find("Available agents:") {
        Some(i) => rest[i + "Available agents:".len()..]
            .lines()
            .next()
            .unwrap_or_default()
            .split(',')
            .map(|a| a.trim().trim_end_matches('.').trim())
            .filter(|a| !a.is_empty() && a.len() <= 200)
            .take(50)
            .map(str::to_string)
            .collect(),
        None => Vec::new(),
    };
    Some((name.to_string(), available))
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
    // The client's list and the model's invented name are outside text: shown as names,
    // escaped when they are not plain identifiers.
    let shown: Vec<String> = available.iter().map(|a| text::label(a)).collect();
    let directive = if shown.is_empty() {
        "Use an agent type that exists.".to_string()
    } else {
        format!("Use one of: {}.", shown.join(", "))
    };
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
