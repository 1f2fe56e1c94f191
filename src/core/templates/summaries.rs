//! Seed 000's texts for after the fact: what the workflow came to without the agents that
//! failed (`degradation`), and a session's failures for the diagnosis (`session-summary`).

use super::view::{elapsed, list, or_unknown, Unit, View};
use crate::core::vocab::Criticality;
use serde_json::{json, Value};

pub(super) fn degradation(v: &View) -> Result<(Value, String), String> {
    let units = v.units(|_| true);
    let missing: Vec<&Unit> = units
        .iter()
        .filter(|u| u.failing() || u.decided().is_some())
        .collect();
    if missing.is_empty() {
        return Err(
            "no degradation: every failure in scope was resolved by a retry that worked".into(),
        );
    }
    let critical_failing: Vec<&str> = missing
        .iter()
        .filter(|u| u.failing() && v.criticality(u.last) == Criticality::Critical)
        .map(|u| u.name)
        .collect();
    let phase_of = |u: &Unit| match &u.last.phase {
        Some(p) => format!("Phase {p}: "),
        None => String::new(),
    };
    let warnings: Vec<String> = missing
        .iter()
        .map(|u| {
            let kind = or_unknown(u.last.kind.as_deref());
            let why = match u.decided() {
                Some(d) => format!("{kind}; decided: {d}"),
                None if critical_failing.contains(&u.name) => {
                    format!("{kind}; critical, unresolved")
                }
                None => format!("{kind}; optional, unresolved"),
            };
            format!("{}no {} output ({why})", phase_of(u), u.name)
        })
        .collect();
    let mut all: Vec<&str> = units.iter().map(|u| u.name).collect();
    for c in &v.input.completed {
        if !all.contains(&c.as_str()) {
            all.push(c);
        }
    }
    let total = all.len();
    let ok = total - missing.len();
    let preserved: Vec<String> = v
        .failures
        .iter()
        .flat_map(|r| r.preserved.iter().cloned())
        .collect();
    let names: Vec<String> = missing.iter().map(|u| u.name.to_string()).collect();
    let reviewed: Vec<&str> = missing
        .iter()
        .map(|u| u.name)
        .filter(|n| !critical_failing.contains(n))
        .collect();
    let mut parts = Vec::new();
    if !critical_failing.is_empty() {
        parts.push(format!(
            "Resolve {} first: the workflow is not complete without {}.",
            critical_failing.join(", "),
            if critical_failing.len() == 1 {
                "it"
            } else {
                "them"
            }
        ));
    }
    if !reviewed.is_empty() {
        parts.push(format!(
            "Manually review the work that ran without {}.",
            reviewed.join(", ")
        ));
    }
    let recommendation = parts.join(" ");
    let headline = if critical_failing.is_empty() {
        "Workflow Complete (with degradation)"
    } else {
        "Workflow Incomplete (a critical agent failed)"
    };
    let mut text = format!("{headline}\n\nWarnings:\n");
    for w in &warnings {
        text.push_str(&format!("- {w}\n"));
    }
    match v.input.items {
        Some((done, of, each_an_agent)) => text.push_str(&format!(
            "\nGenerated outputs:\n- {done} of {of} {} completed\n",
            if each_an_agent { "agents" } else { "items" }
        )),
        None => text.push_str(&format!(
            "\nGenerated outputs:\n- {ok} of {total} agents completed\n"
        )),
    }
    for p in &preserved {
        text.push_str(&format!("- {p} (partial)\n"));
    }
    text.push_str(&format!("\nRecommendation: {recommendation}"));
    let fields = json!({
        "headline": headline, "complete": critical_failing.is_empty(),
        "warnings": warnings, "completed_agents": ok, "total_agents": total,
        "completed_items": v.input.items.map(|(done, _, _)| done),
        "total_items": v.input.items.map(|(_, of, _)| of),
        "preserved_outputs": preserved, "missing": names,
        "critical_failing": critical_failing, "recommendation": recommendation,
    });
    Ok((fields, text))
}

pub(super) fn session_summary(v: &View) -> Result<(Value, String), String> {
    let last = v.last()?;
    let session = v.input.session.clone().or_else(|| last.session.clone());
    let ours = || v.failures.iter().copied().filter(|r| r.session == session);
    let first = v
        .input
        .records
        .iter()
        .filter(|r| r.session == session)
        .find_map(|r| r.at);
    let duration = first
        .map(|t| elapsed((v.input.now - t).num_milliseconds()))
        .unwrap_or_else(|| "unknown".into());
    // The log records failures: which phases completed only the caller knows.
    let completed = v.input.completed.clone();
    let failed_at = ours().rfind(|r| v.is_open(r));
    let mut artifacts = vec![format!("{}/logs/errors.jsonl", v.input.state_root)];
    for r in ours() {
        for p in &r.preserved {
            if !artifacts.contains(p) {
                artifacts.push(p.clone());
            }
        }
    }
    let resume = match &session {
        Some(s) => format!("claude --resume {s}"),
        None => "claude --continue".into(),
    };
    // Never a deletion: the log and the breakers are shared by every session.
    let fresh = "claude".to_string();
    let completed_line = if completed.is_empty() {
        "unknown (the log records failures only; give --completed)".to_string()
    } else {
        format!("Phases {}", list(&completed))
    };
    let failed_line = match failed_at {
        Some(r) => format!(
            "Phase {} - {}",
            or_unknown(r.phase.as_deref()),
            or_unknown(r.name())
        ),
        None => "nothing unresolved (every failure of this session was resolved)".into(),
    };
    let mut text = format!(
        "Session Summary\n\nDuration: {duration}\nCompleted: {completed_line}\nFailed at: {failed_line}\n\nSaved artifacts:\n"
    );
    for a in &artifacts {
        text.push_str(&format!("- {a}\n"));
    }
    text.push_str(&format!(
        "\nTo resume:\n  {resume}\n\nTo start fresh:\n  {fresh}   (a new session; the error log and the breakers are shared and stay)"
    ));
    let fields = json!({
        "session_id": session, "elapsed_time": duration, "completed_list": completed,
        "phase": failed_at.and_then(|r| r.phase.clone()),
        "agent": failed_at.and_then(|r| r.name()),
        "saved_artifacts": artifacts, "resume": resume, "start_fresh": fresh,
    });
    Ok((fields, text))
}
