//! Seed 001's parallel execution status and cascade message, and seed 002's "Stage N failed
//! X times" escalation: what a fan-out and a workflow came to, from the log.

use super::view::{list, options, or_unknown, target_phase, Unit, View};
use super::Rec;
use crate::core::policy::DefaultAction;
use serde_json::{json, Value};

/// `timeout` → `Timeout`, `validation_failed` → `Validation failed` (seed 001's words).
fn spoken(kind: Option<&str>) -> String {
    let k = or_unknown(kind).replace('_', " ");
    let mut c = k.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => k,
    }
}

/// The failure lines of a failed unit: its kind, then its last progress and partial outputs.
fn failed_lines(u: &Unit, text: &mut String) {
    let r = u.open.last().copied().unwrap_or(u.last);
    text.push_str(&format!(
        "- [ ] {}: {}\n",
        u.name,
        or_unknown(r.kind.as_deref()).to_uppercase()
    ));
    if let Some(p) = &r.last_progress {
        text.push_str(&format!(
            "      Last progress: {}\n",
            crate::core::text::quoted(p)
        ));
    }
    for p in &r.preserved {
        text.push_str(&format!("      Partial output: {p}\n"));
    }
}

pub(super) fn parallel_status(v: &View) -> Result<(Value, String), String> {
    let units = v.units(|_| true);
    // The fan-out: the agents named with --pipeline, else those in the log and --completed.
    let mut names: Vec<String> = v.input.pipeline.clone();
    if names.is_empty() {
        names = units.iter().map(|u| u.name.to_string()).collect();
        for c in &v.input.completed {
            if !names.contains(c) {
                names.push(c.clone());
            }
        }
    }
    if names.is_empty() {
        return Err(
            "no agents to report: give --pipeline A,B (the parallel agents) or widen the filter"
                .into(),
        );
    }
    let unit = |a: &str| units.iter().find(|u| u.name == a);
    let mut completed: Vec<&str> = Vec::new();
    let mut failed: Vec<&Unit> = Vec::new();
    let mut decided: Vec<(&str, String)> = Vec::new();
    let mut unknown: Vec<&str> = Vec::new();
    for a in &names {
        match unit(a) {
            Some(u) if u.failing() => failed.push(u),
            Some(u) if u.recovered() => completed.push(a),
            Some(u) => decided.push((a, u.decided().unwrap_or_default())),
            None if v.input.completed.contains(a) => completed.push(a),
            None => unknown.push(a),
        }
    }
    let n = names.len();
    let k = completed.len();
    let status = if k == n {
        "SUCCESS"
    } else if k == 0 {
        "FAILED"
    } else {
        "PARTIAL SUCCESS"
    };
    let mut text = format!("Parallel Execution Status: {status} ({k}/{n} completed)\n");
    if !completed.is_empty() {
        text.push_str("\nCompleted:\n");
        for a in &completed {
            text.push_str(&format!("- [x] {a}\n"));
        }
    }
    if !failed.is_empty() {
        text.push_str("\nFailed:\n");
        for u in &failed {
            failed_lines(u, &mut text);
        }
    }
    if !decided.is_empty() {
        text.push_str("\nSkipped by decision:\n");
        for (a, d) in &decided {
            text.push_str(&format!("- [ ] {a}: {d}\n"));
        }
    }
    if !unknown.is_empty() {
        text.push_str("\nNo outcome recorded (no failure in the log, not given as --completed):\n");
        for a in &unknown {
            text.push_str(&format!("- [?] {a}\n"));
        }
    }
    let done = list(&completed.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let bad = list(
        &failed
            .iter()
            .map(|u| u.name.to_string())
            .collect::<Vec<_>>(),
    );
    let partial: Vec<&str> = failed
        .iter()
        .filter(|u| u.open.iter().any(|r| !r.preserved.is_empty()))
        .map(|u| u.name)
        .collect();
    text.push('\n');
    if !completed.is_empty() {
        text.push_str(&format!("{done} output is complete.\n"));
    }
    if !partial.is_empty() {
        text.push_str(&format!(
            "{} partial output available for review.\n",
            partial.join(", ")
        ));
    }
    let texts: Vec<String> = match (completed.is_empty(), failed.is_empty()) {
        (_, true) => vec!["Proceed".into(), "Abort".into()],
        (false, false) => vec![
            format!("Proceed with {done} output only (skip {bad})"),
            format!("Retry {bad} with extended timeout"),
            format!("Retry {bad} with narrower scope"),
            format!("Abort, keep {done} output"),
        ],
        (true, false) => vec![
            format!("Retry {bad} with extended timeout"),
            format!("Retry {bad} with narrower scope"),
            "Abort".into(),
        ],
    };
    let (opts, opts_text) = options(&texts);
    text.push('\n');
    text.push_str(&opts_text);
    let fields = json!({
        "status": status, "completed_count": k, "total": n, "completed": completed,
        "failed": failed.iter().map(|u| {
            let r = u.open.last().copied().unwrap_or(u.last);
            json!({"name": u.name, "error_type": r.kind, "last_progress": r.last_progress,
                   "partial_outputs": r.preserved})
        }).collect::<Vec<_>>(),
        "skipped_by_decision": decided.iter().map(|(a, d)| json!({"name": a, "decision": d})).collect::<Vec<_>>(),
        "no_outcome_recorded": unknown, "options": opts,
    });
    Ok((fields, text))
}

pub(super) fn cascade(v: &View) -> Result<(Value, String), String> {
    let workflow = match &v.input.workflow {
        Some(w) => w.clone(),
        None => {
            let r = v.last()?;
            r.workflow
                .clone()
                .or_else(|| r.session.clone())
                .ok_or_else(|| {
                    "no error record in scope names a workflow; give --workflow".to_string()
                })?
        }
    };
    let in_workflow =
        |r: &Rec| r.workflow.as_deref().or(r.session.as_deref()) == Some(workflow.as_str());
    let failing: Vec<Unit> = v
        .units(in_workflow)
        .into_iter()
        .filter(Unit::failing)
        .collect();
    let limit = v.input.policy.thresholds.cascade_agents;
    if failing.len() as u64 <= u64::from(limit) {
        return Err(format!(
            "no cascade in workflow {workflow}: {} agent{} failing, the rule needs more than {limit}",
            failing.len(),
            if failing.len() == 1 { " is" } else { "s are" }
        ));
    }
    let mut text =
        format!("Multiple failures detected in workflow {workflow}.\n\nFailed skills:\n");
    for (i, u) in failing.iter().enumerate() {
        let r = u.open.last().copied().unwrap_or(u.last);
        text.push_str(&format!(
            "{}. {}: {}\n",
            i + 1,
            u.name,
            spoken(r.kind.as_deref())
        ));
    }
    text.push_str("\nThis may indicate a systemic issue. Automatic retry disabled.\n\n");
    let (opts, opts_text) = options(&[
        "Review failures and retry individually".into(),
        "Abort workflow, preserve any outputs".into(),
        "Start fresh with modified goal".into(),
    ]);
    text.push_str(&opts_text);
    let fields = json!({
        "workflow_id": workflow, "count": failing.len(), "threshold": limit,
        "failed_skills": failing.iter().map(|u| {
            let r = u.open.last().copied().unwrap_or(u.last);
            json!({"name": u.name, "error_type": r.kind, "error_id": r.error_id})
        }).collect::<Vec<_>>(),
        "options": opts,
    });
    Ok((fields, text))
}

pub(super) fn stage_failed(v: &View) -> Result<(Value, String), String> {
    let stage = target_phase(v, |r| r.opens)?;
    let in_stage = |r: &Rec| r.phase.as_deref() == Some(stage.as_str());
    // Every failure of the stage counts, resolved or not; interrupts are not failures.
    let failures: Vec<&Rec> = v
        .failures
        .iter()
        .copied()
        .filter(|r| in_stage(r) && (r.opens || r.resolved_ok))
        .collect();
    if failures.is_empty() {
        return Err(format!("stage {stage} has no failures in scope"));
    }
    let x = failures.len();
    let unresolved: Vec<Unit> = v
        .units(in_stage)
        .into_iter()
        .filter(Unit::failing)
        .collect();
    // Seed 002's circuit-breaker message says what the default action does (`[phase]
    // default_action`; the seed's own default, proceed_with_partial, by default).
    let default = v.input.policy.phase.default_action;
    let then = match default {
        DefaultAction::ProceedWithPartial | DefaultAction::ProceedWithout => {
            "Proceeding with partial results."
        }
        DefaultAction::Retry => "Retrying the stage.",
        DefaultAction::AbortPhase => "Aborting the stage.",
        DefaultAction::AbortWorkflow => "Aborting the workflow.",
        DefaultAction::WaitForUser => "Waiting for your decision.",
    };
    let mut text = format!(
        "Stage {stage} failed {x} time{}. {then}",
        if x == 1 { "" } else { "s" }
    );
    if !unresolved.is_empty() {
        let parts: Vec<String> = unresolved
            .iter()
            .map(|u| {
                let r = u.open.last().copied().unwrap_or(u.last);
                format!("{} ({})", u.name, or_unknown(r.kind.as_deref()))
            })
            .collect();
        text.push_str(&format!("\nWithout: {}", parts.join(", ")));
    }
    let fields = json!({
        "type": "circuit_breaker", "stage": stage, "failures": x,
        "message": text.lines().next().unwrap_or_default(),
        "without": unresolved.iter().map(|u| u.name).collect::<Vec<_>>(),
        "default_action": default.as_str(),
    });
    Ok((fields, text))
}
