//! Seed 000's five escalation prompts, each with its options: a critical agent failed
//! (`agent-failure`), several agents of one phase failed (`multiple-failures`), a phase ran
//! past its timeout (`phase-timeout`), an agent's breaker is open (`breaker-open`), and the
//! session crossed its failure threshold (`stability-warning`).

use super::view::{elapsed, list, options, or_unknown, phase_label, target_phase, Unit, View};
use super::{BreakerFacts, Rec};
use crate::core::breaker::State;
use crate::core::vocab::{Criticality, Kind};
use serde_json::{json, Value};

/// The last failure in scope that is not resolved.
fn last_open<'a>(v: &View<'a>) -> Result<&'a Rec, String> {
    let r = v.last()?;
    if v.is_open(r) {
        Ok(r)
    } else {
        Err("every failure in scope was resolved (recovered on retry, or decided); nothing is failing".into())
    }
}

pub(super) fn agent_failure(v: &View) -> Result<(Value, String), String> {
    let r = last_open(v)?;
    let agent = or_unknown(r.name());
    let attempts = match r.retry_count {
        Some(n) => n + 1,
        None => v
            .failures
            .iter()
            .filter(|f| f.opens && f.name() == r.name() && f.phase == r.phase)
            .count() as u64,
    };
    let critical = v.criticality(r);
    let phase = r.phase.as_deref();
    let impact = match critical {
        Criticality::Critical => match phase {
            Some(p) => format!("{agent} is critical: phase {p} cannot complete without its output"),
            None => format!("{agent} is critical: its phase cannot complete without its output"),
        },
        Criticality::Optional => {
            format!("{agent} is optional: the workflow can go on without it, at lower quality")
        }
    };
    let missing = format!("{agent} output");
    let (opts, opts_text) = options(&[
        format!("Retry {agent} (attempt {})", attempts + 1),
        format!("Proceed without {agent} output (may affect quality)"),
        format!("Provide manual input for {missing}"),
        "Abort workflow".into(),
    ]);
    let kind = or_unknown(r.kind.as_deref());
    let detail = r.detail.clone().unwrap_or_default();
    let quoted = crate::core::text::quoted(&detail);
    let text = format!(
        "[AGENT FAILURE] {agent} failed after {attempts} attempt{}\n\nPhase: {}\nError: {kind} - {quoted}\nImpact: {impact}\n\n{opts_text}",
        if attempts == 1 { "" } else { "s" },
        phase_label(v, phase),
    );
    let fields = json!({
        "agent_name": agent, "attempts": attempts, "phase_number": phase,
        "phase_name": phase.and_then(|p| v.phase_name(p)), "error_type": kind,
        "error_message": detail, "impact_description": impact, "criticality": critical,
        "missing_output": missing, "error_id": r.error_id, "options": opts,
    });
    Ok((fields, text))
}

pub(super) fn multiple_failures(v: &View) -> Result<(Value, String), String> {
    let phase = target_phase(v, |_| true)?;
    let units = v.units(|r| r.phase.as_deref() == Some(phase.as_str()));
    let failed: Vec<&Unit> = units.iter().filter(|u| u.failing()).collect();
    if failed.is_empty() {
        return Err(format!(
            "no agent is failing in phase {phase}: every failure there was resolved"
        ));
    }
    let mut working: Vec<String> = units
        .iter()
        .filter(|u| u.recovered())
        .map(|u| u.name.to_string())
        .collect();
    for c in &v.input.completed {
        if !working.contains(c) && !failed.iter().any(|u| u.name == c) {
            working.push(c.clone());
        }
    }
    let decided: Vec<(&str, String)> = units
        .iter()
        .filter_map(|u| Some((u.name, u.decided()?)))
        .collect();
    let previous = match phase.parse::<u64>() {
        Ok(n) if n > 0 => format!("Phase {}", n - 1),
        _ => "the previous phase".into(),
    };
    let (opts, opts_text) = options(&[
        "Retry all failed agents".into(),
        format!("Proceed with {} available outputs", working.len()),
        format!("Abort phase and return to {previous}"),
        "Abort workflow".into(),
    ]);
    let mut text = format!(
        "[MULTIPLE FAILURES] {} agent{} failed in Phase {phase}\n\nFailed agents:\n",
        failed.len(),
        if failed.len() == 1 { "" } else { "s" }
    );
    for u in &failed {
        text.push_str(&format!(
            "  - {}: {}\n",
            u.name,
            or_unknown(u.open.last().and_then(|r| r.kind.as_deref()))
        ));
    }
    text.push_str("\nWorking agents:\n");
    if working.is_empty() {
        text.push_str("  (none known)\n");
    }
    for a in &working {
        text.push_str(&format!("  - {a}: completed successfully\n"));
    }
    if !decided.is_empty() {
        text.push_str("\nResolved by decision:\n");
        for (a, d) in &decided {
            text.push_str(&format!("  - {a}: {d}\n"));
        }
    }
    text.push('\n');
    text.push_str(&opts_text);
    let fields = json!({
        "count": failed.len(), "phase_number": phase,
        "failed_agents": failed.iter().map(|u| json!({"name": u.name, "error_type": u.open.last().and_then(|r| r.kind.clone())})).collect::<Vec<_>>(),
        "working_agents": working, "working_count": working.len(),
        "resolved_by_decision": decided.iter().map(|(a, d)| json!({"name": a, "decision": d})).collect::<Vec<_>>(),
        "options": opts,
    });
    Ok((fields, text))
}

pub(super) fn phase_timeout(v: &View) -> Result<(Value, String), String> {
    let phase = target_phase(v, |r| r.is(Kind::Timeout))?;
    let in_phase = |r: &Rec| r.phase.as_deref() == Some(phase.as_str());
    let minutes = v
        .input
        .policy
        .phase(&phase)
        .and_then(|p| p.timeout)
        .map(|d| d.as_millis())
        .or_else(|| {
            v.failures
                .iter()
                .filter(|r| in_phase(r))
                .filter_map(|r| r.duration_ms)
                .max()
        })
        .map(|ms| ms.div_ceil(60_000))
        .ok_or_else(|| {
            format!("no timeout known for phase {phase}; set [phases.\"{phase}\"] timeout in the policy")
        })?;
    let completed = v.input.completed.clone();
    let in_progress: Vec<String> = v
        .units(|r| in_phase(r) && r.is(Kind::Timeout))
        .iter()
        .filter(|u| u.failing())
        .map(|u| u.name.to_string())
        .collect();
    let not_started: Vec<String> = v
        .input
        .pipeline
        .iter()
        .filter(|p| !completed.contains(p) && !in_progress.contains(p))
        .filter(|p| !v.failures.iter().any(|r| r.name() == Some(p.as_str())))
        .cloned()
        .collect();
    let extension = minutes.div_ceil(2);
    let (opts, opts_text) = options(&[
        format!("Wait additional {extension} minutes"),
        "Proceed with completed items only".into(),
        "Abort phase and troubleshoot".into(),
        "Abort workflow".into(),
    ]);
    let known = |items: &[String], what: &str| {
        if items.is_empty() && v.input.pipeline.is_empty() && what != "in progress" {
            format!("unknown (give --{what})")
        } else {
            list(items)
        }
    };
    let text = format!(
        "[TIMEOUT] Phase {} exceeded {minutes} minutes\n\nStatus at timeout:\n  - Completed: {}\n  - In progress: {}\n  - Not started: {}\n\n{opts_text}",
        phase_label(v, Some(&phase)),
        if completed.is_empty() { "unknown (give --completed)".to_string() } else { list(&completed) },
        list(&in_progress),
        known(&not_started, "pipeline"),
    );
    let fields = json!({
        "phase_number": phase, "phase_name": v.phase_name(&phase), "timeout": minutes,
        "completed_items": completed, "in_progress_items": in_progress,
        "not_started_items": not_started, "extension": extension, "options": opts,
    });
    Ok((fields, text))
}

/// The breaker of `agent`: its own key, or its session's (`scope = "session"`).
fn breaker_of<'a>(v: &'a View, agent: &str) -> Option<&'a BreakerFacts> {
    let bs = &v.input.breakers;
    bs.iter().find(|b| b.key == agent).or_else(|| {
        let session = v.input.session.as_deref()?;
        bs.iter().find(|b| b.key == format!("{session}/{agent}"))
    })
}

pub(super) fn breaker_open(v: &View) -> Result<(Value, String), String> {
    let agent = match &v.input.agent {
        Some(a) => a.clone(),
        None => v.last()?.name().unwrap_or("unknown").to_string(),
    };
    let shown = crate::core::text::label(&agent);
    let b = breaker_of(v, &agent).ok_or_else(|| {
        format!(
            "there is no breaker `{agent}` in {}/breakers: this text is for an open breaker (`triage breaker status` lists them)",
            v.input.state_root
        )
    })?;
    let headline = match b.state {
        State::Open => "circuit breaker opened",
        State::ForcedOpen => "circuit breaker was forced open",
        State::HalfOpen => "circuit breaker is half-open (a probe may test it)",
        other @ (State::Closed | State::Disabled) => {
            return Err(format!(
                "breaker `{}` is {other}, not open: this text is for an open breaker",
                b.key
            ))
        }
    };
    let last_error = b.last_error.clone();
    let last_said = last_error
        .as_deref()
        .map_or_else(|| "none recorded".into(), crate::core::text::quoted);
    let since = match b.since_last_success_s {
        Some(s) => elapsed(i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX)),
        None => "none recorded".into(),
    };
    let wait = match (b.state, b.half_open_in_s) {
        (State::HalfOpen, _) => "Retry now (the breaker lets one probe through)".to_string(),
        (_, Some(s)) => format!("Wait {s} seconds and retry"),
        (_, None) => format!("Wait until it is reset (`triage breaker reset {}`)", b.key),
    };
    let (opts, opts_text) = options(&[
        wait,
        "Skip this agent for this session".into(),
        "Abort workflow".into(),
    ]);
    let twice = if b.opened >= 2 {
        " (a breaker that opens twice is a reason to abort)"
    } else {
        ""
    };
    let text = format!(
        "[CIRCUIT BREAKER] {shown} {headline}\n\nConsecutive failures: {}\nLast error: {last_said}\nTime since last success: {since}\nTimes opened: {}{twice}\n\nThis agent is temporarily disabled to prevent cascading failures.\n\n{opts_text}",
        b.consecutive_failures, b.opened
    );
    let fields = json!({
        "agent_name": agent, "breaker_key": b.key, "state": b.state,
        "failure_count": b.consecutive_failures, "last_error": last_error.as_deref().unwrap_or("none recorded"),
        "time_elapsed": since, "cooldown": b.half_open_in_s, "times_opened": b.opened,
        "options": opts,
    });
    Ok((fields, text))
}

pub(super) fn stability_warning(v: &View) -> Result<(Value, String), String> {
    let session = match &v.input.session {
        Some(s) => Some(s.clone()),
        None => v.last()?.session.clone(),
    };
    let ours: Vec<&Rec> = v
        .failures
        .iter()
        .copied()
        .filter(|r| r.session == session && !r.uncounted)
        .collect();
    let open: Vec<&Rec> = ours.iter().copied().filter(|r| v.is_open(r)).collect();
    let recovered = ours.iter().filter(|r| r.opens && v.resolved(r)).count() as u64;
    let interrupts = ours.iter().filter(|r| r.is(Kind::Interrupted)).count() as u64;
    let n = open.len() as u64;
    // Nothing unresolved: nothing to warn of (seed 001 warns of failures, not of their absence).
    if n == 0 {
        let who = session
            .as_deref()
            .map_or_else(|| "the session".to_string(), |s| format!("session {s}"));
        let text = format!(
            "No workflow stability warning: {who} has no unresolved failures ({recovered} resolved since, {}).",
            crate::core::text::count(interrupts, "interrupt")
        );
        let fields = json!({
            "session_id": session, "warning": false, "failure_count": 0, "failure_rate": null,
            "runs": v.input.runs, "resolved": recovered, "interrupts": interrupts,
            "recent_failures": [], "options": [],
        });
        return Ok((fields, text));
    }
    // The log holds failures, not runs: a rate needs --runs.
    let rate = v
        .input
        .runs
        .filter(|r| *r > 0)
        .map(|runs| (((n + recovered) as f64 * 100.0 / runs as f64).round() as u64).min(100));
    let recent: Vec<&Rec> = open.iter().rev().take(5).rev().copied().collect();
    let (opts, opts_text) = options(&[
        "Continue workflow (accepting higher risk)".into(),
        "Save session state and pause for troubleshooting".into(),
        "Abort workflow and start fresh".into(),
    ]);
    let mut text = format!(
        "[WORKFLOW STABILITY WARNING]\n\nThis session has encountered {} across phases.\n",
        crate::core::text::count(n, "failure")
    );
    let mut not_counted = Vec::new();
    if recovered > 0 {
        not_counted.push(format!("{recovered} resolved since"));
    }
    if interrupts > 0 {
        not_counted.push(format!(
            "{interrupts} interrupt{}",
            if interrupts == 1 { "" } else { "s" }
        ));
    }
    if !not_counted.is_empty() {
        text.push_str(&format!("Not counted: {}.\n", not_counted.join(", ")));
    }
    match rate {
        Some(r) => text.push_str(&format!("Failure rate: {r}%\n")),
        None => text.push_str("Failure rate: unknown (the log records failures, not runs)\n"),
    }
    text.push_str("\nRecent failures:\n");
    for r in &recent {
        text.push_str(&format!(
            "  - Phase {}: {} - {}\n",
            or_unknown(r.phase.as_deref()),
            or_unknown(r.name()),
            or_unknown(r.kind.as_deref())
        ));
    }
    if recent.is_empty() {
        text.push_str("  (none unresolved)\n");
    }
    text.push_str("\nRecommendation: Consider aborting and troubleshooting.\n\n");
    text.push_str(&opts_text);
    let fields = json!({
        "session_id": session, "warning": true, "failure_count": n, "failure_rate": rate, "runs": v.input.runs,
        "resolved": recovered, "interrupts": interrupts,
        "recent_failures": recent.iter().map(|r| json!({"phase": r.phase, "agent": r.name(), "type": r.kind})).collect::<Vec<_>>(),
        "options": opts,
    });
    Ok((fields, text))
}
