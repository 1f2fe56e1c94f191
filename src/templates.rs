//! The seeds' message texts, rendered from error records: seed 000's five escalation prompts,
//! its degradation summary and post-failure diagnostics, and seed 001's sequential pipeline
//! status. Each is also a JSON object with the same fields, for machines.
//!
//! Pure: handed the records in scope, the policy and `now`.

use crate::error_record::LogLine;
use crate::policy::Policy;
use crate::report::phase_text;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The templates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TemplateName {
    /// A critical agent failed: what happened, what is kept, the options.
    AgentFailure,
    /// Several agents of one phase failed.
    MultipleFailures,
    /// A phase ran past its timeout.
    PhaseTimeout,
    /// An agent's circuit breaker is open.
    BreakerOpen,
    /// The session crossed its failure threshold.
    StabilityWarning,
    /// The workflow finished without some optional agents.
    Degradation,
    /// A session's failures, for the diagnosis after the fact.
    SessionSummary,
    /// Where a sequential pipeline stands, stage by stage.
    PipelineStatus,
}

/// One log line, owned, as far as a template needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rec {
    /// Set on records.
    pub error_id: Option<String>,
    /// Set on resolution lines.
    pub resolves: Option<String>,
    /// When.
    pub at: Option<DateTime<Utc>>,
    /// Session.
    pub session: Option<String>,
    /// Phase.
    pub phase: Option<String>,
    /// Agent.
    pub agent: Option<String>,
    /// Kind.
    pub kind: Option<String>,
    /// Message.
    pub detail: Option<String>,
    /// Retries made.
    pub retry_count: Option<u64>,
    /// How long it ran.
    pub duration_ms: Option<u64>,
    /// Resolved successfully (inline).
    pub resolved_ok: bool,
    /// Partial outputs kept.
    pub preserved: Vec<String>,
    /// Seed 001's last progress.
    pub last_progress: Option<String>,
}

impl Rec {
    /// The owned copy of a log line.
    pub fn from_line(l: &LogLine) -> Rec {
        Rec {
            error_id: l.error_id.as_deref().map(String::from),
            resolves: l.resolves.as_deref().map(String::from),
            at: l
                .timestamp
                .as_deref()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc)),
            session: l.session_id.as_deref().map(String::from),
            phase: phase_text(l.phase()),
            agent: l.agent().map(String::from),
            kind: l.kind().map(String::from),
            detail: l.detail().map(String::from),
            retry_count: l.retry_count,
            duration_ms: l.duration_ms,
            resolved_ok: l.resolution.as_ref().is_some_and(|r| r.successful()),
            preserved: l
                .preserved_outputs
                .as_ref()
                .and_then(|p| p.get())
                .map(|v| v.iter().map(|s| s.to_string()).collect())
                .unwrap_or_default(),
            last_progress: l.context.as_ref().and_then(|c| c.last_progress.clone()),
        }
    }
}

/// What a template is rendered from.
pub struct TemplateInput<'p> {
    /// The log lines in scope, in log order.
    pub records: Vec<Rec>,
    /// The policy (phase names, timeouts, criticality, cooldowns).
    pub policy: &'p Policy,
    /// Now.
    pub now: DateTime<Utc>,
    /// The state root, as shown to people.
    pub state_root: String,
    /// `--session`.
    pub session: Option<String>,
    /// `--workflow`.
    pub workflow: Option<String>,
    /// `--agent`.
    pub agent: Option<String>,
    /// `--phase`.
    pub phase: Option<String>,
    /// `--completed`.
    pub completed: Vec<String>,
    /// `--pipeline`.
    pub pipeline: Vec<String>,
    /// `--runs`.
    pub runs: Option<u64>,
    /// Open breakers, from the breaker state.
    pub open_breakers: Vec<String>,
}

/// A rendered template: the text and the same fields as JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    /// For people.
    pub text: String,
    /// For machines: `template`, the fields, and `options` `[{letter, text}]`.
    pub fields: Value,
}

/// Renders template `name`, or says why it cannot be.
pub fn build(name: TemplateName, input: &TemplateInput) -> Result<Rendered, String> {
    let v = View::new(input);
    let (mut fields, text) = match name {
        TemplateName::AgentFailure => agent_failure(&v)?,
        TemplateName::MultipleFailures => multiple_failures(&v)?,
        TemplateName::PhaseTimeout => phase_timeout(&v)?,
        TemplateName::BreakerOpen => breaker_open(&v)?,
        TemplateName::StabilityWarning => stability_warning(&v)?,
        TemplateName::Degradation => degradation(&v)?,
        TemplateName::SessionSummary => session_summary(&v)?,
        TemplateName::PipelineStatus => pipeline_status(&v)?,
    };
    if let Some(o) = fields.as_object_mut() {
        o.insert("template".into(), json!(name));
    }
    Ok(Rendered { text, fields })
}

// ---------------------------------------------------------------------------------------------
// The records, as templates look at them.

struct View<'a> {
    input: &'a TemplateInput<'a>,
    failures: Vec<&'a Rec>,
    resolved_ids: BTreeSet<&'a str>,
}

impl<'a> View<'a> {
    fn new(input: &'a TemplateInput<'a>) -> View<'a> {
        let resolved_ids = input
            .records
            .iter()
            .filter(|r| r.resolved_ok)
            .filter_map(|r| r.resolves.as_deref())
            .collect();
        let failures = input
            .records
            .iter()
            .filter(|r| r.resolves.is_none())
            .collect();
        View {
            input,
            failures,
            resolved_ids,
        }
    }

    fn resolved(&self, r: &Rec) -> bool {
        r.resolved_ok
            || r.error_id
                .as_deref()
                .is_some_and(|id| self.resolved_ids.contains(id))
    }

    fn last(&self) -> Result<&'a Rec, String> {
        self.failures.last().copied().ok_or_else(|| {
            "no error records match; widen the filter (--session, --workflow, --agent, --phase, --since)".to_string()
        })
    }

    fn phase_name(&self, phase: &str) -> Option<String> {
        self.input.policy.phase(phase).and_then(|p| p.name.clone())
    }

    /// Distinct agents, in order of first failure, with their last failure.
    fn agents(&self, pred: impl Fn(&Rec) -> bool) -> Vec<(&'a str, &'a Rec)> {
        let mut out: Vec<(&str, &Rec)> = Vec::new();
        for r in self.failures.iter().copied().filter(|r| pred(r)) {
            let Some(a) = r.agent.as_deref() else {
                continue;
            };
            match out.iter_mut().find(|(n, _)| *n == a) {
                Some(slot) => slot.1 = r,
                None => out.push((a, r)),
            }
        }
        out
    }
}

fn or_unknown(s: Option<&str>) -> String {
    s.unwrap_or("unknown").to_string()
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// Options as JSON and as seed 000's indented lines with the "Enter choice" prompt.
fn options(texts: &[String]) -> (Value, String) {
    let letters = ["A", "B", "C", "D", "E", "F"];
    let mut json = Vec::new();
    let mut text = String::from("Options:\n");
    for (l, t) in letters.iter().zip(texts) {
        json.push(json!({"letter": l, "text": t}));
        text.push_str(&format!("  ({l}) {t}\n"));
    }
    let used: Vec<&str> = letters.iter().take(texts.len()).copied().collect();
    text.push_str(&format!("\nEnter choice [{}]:", used.join("/")));
    (Value::Array(json), text)
}

fn phase_label(v: &View, phase: Option<&str>) -> String {
    match phase {
        None => "unknown".into(),
        Some(p) => match v.phase_name(p) {
            Some(n) => format!("{p} ({n})"),
            None => p.to_string(),
        },
    }
}

fn elapsed(ms: i64) -> String {
    let whole_seconds = u64::try_from(ms.max(0) / 1000).unwrap_or(0) * 1000;
    crate::duration::Dur::millis(whole_seconds)
        .approx()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Seed 000's templates.

fn agent_failure(v: &View) -> Result<(Value, String), String> {
    let r = v.last()?;
    let agent = or_unknown(r.agent.as_deref());
    let attempts = match r.retry_count {
        Some(n) => n + 1,
        None => v
            .failures
            .iter()
            .filter(|f| f.agent == r.agent && f.phase == r.phase)
            .count() as u64,
    };
    let critical = v.input.policy.agent(&agent).criticality;
    let phase = r.phase.as_deref();
    let impact = match critical {
        crate::vocab::Criticality::Critical => format!(
            "{agent} is critical: phase {} cannot complete without its output",
            phase.unwrap_or("?")
        ),
        crate::vocab::Criticality::Optional => {
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
    let text = format!(
        "[AGENT FAILURE] {agent} failed after {attempts} attempt{}\n\nPhase: {}\nError: {kind} - {detail}\nImpact: {impact}\n\n{opts_text}",
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

fn target_phase(v: &View, pred: impl Fn(&Rec) -> bool) -> Result<String, String> {
    if let Some(p) = &v.input.phase {
        return Ok(p.clone());
    }
    v.failures
        .iter()
        .rev()
        .filter(|r| pred(r))
        .find_map(|r| r.phase.clone())
        .ok_or_else(|| "no error record in scope names a phase; give --phase".to_string())
}

fn multiple_failures(v: &View) -> Result<(Value, String), String> {
    let phase = target_phase(v, |_| true)?;
    let in_phase = |r: &Rec| r.phase.as_deref() == Some(phase.as_str());
    let all = v.agents(in_phase);
    let failed: Vec<(&str, &Rec)> = all
        .iter()
        .filter(|(a, _)| {
            v.failures
                .iter()
                .any(|r| in_phase(r) && r.agent.as_deref() == Some(a) && !v.resolved(r))
        })
        .copied()
        .collect();
    let mut working: Vec<String> = all
        .iter()
        .filter(|(a, _)| !failed.iter().any(|(f, _)| f == a))
        .map(|(a, _)| a.to_string())
        .collect();
    for c in &v.input.completed {
        if !working.contains(c) {
            working.push(c.clone());
        }
    }
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
        "[MULTIPLE FAILURES] {} agents failed in Phase {phase}\n\nFailed agents:\n",
        failed.len()
    );
    for (a, r) in &failed {
        text.push_str(&format!("  - {a}: {}\n", or_unknown(r.kind.as_deref())));
    }
    text.push_str("\nWorking agents:\n");
    if working.is_empty() {
        text.push_str("  (none)\n");
    }
    for a in &working {
        text.push_str(&format!("  - {a}: completed successfully\n"));
    }
    text.push('\n');
    text.push_str(&opts_text);
    let fields = json!({
        "count": failed.len(), "phase_number": phase,
        "failed_agents": failed.iter().map(|(a, r)| json!({"name": a, "error_type": r.kind})).collect::<Vec<_>>(),
        "working_agents": working, "working_count": working.len(), "options": opts,
    });
    Ok((fields, text))
}

fn phase_timeout(v: &View) -> Result<(Value, String), String> {
    let phase = target_phase(v, |r| r.kind.as_deref() == Some("timeout"))?;
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
        .agents(|r| in_phase(r) && r.kind.as_deref() == Some("timeout") && !v.resolved(r))
        .iter()
        .map(|(a, _)| a.to_string())
        .collect();
    let not_started: Vec<String> = v
        .input
        .pipeline
        .iter()
        .filter(|p| !completed.contains(p) && !in_progress.contains(p))
        .cloned()
        .collect();
    let extension = minutes.div_ceil(2);
    let (opts, opts_text) = options(&[
        format!("Wait additional {extension} minutes"),
        "Proceed with completed items only".into(),
        "Abort phase and troubleshoot".into(),
        "Abort workflow".into(),
    ]);
    let text = format!(
        "[TIMEOUT] Phase {} exceeded {minutes} minutes\n\nStatus at timeout:\n  - Completed: {}\n  - In progress: {}\n  - Not started: {}\n\n{opts_text}",
        phase_label(v, Some(&phase)),
        list(&completed),
        list(&in_progress),
        list(&not_started),
    );
    let fields = json!({
        "phase_number": phase, "phase_name": v.phase_name(&phase), "timeout": minutes,
        "completed_items": completed, "in_progress_items": in_progress,
        "not_started_items": not_started, "extension": extension, "options": opts,
    });
    Ok((fields, text))
}

fn breaker_open(v: &View) -> Result<(Value, String), String> {
    let agent = match &v.input.agent {
        Some(a) => a.clone(),
        None => or_unknown(v.last()?.agent.as_deref()),
    };
    let mine = |r: &Rec| r.agent.as_deref() == Some(agent.as_str());
    // The streak: this agent's failures after its last successful resolution.
    let mut streak: Vec<&Rec> = Vec::new();
    let mut last_success: Option<DateTime<Utc>> = None;
    for r in v.input.records.iter().filter(|r| mine(r)) {
        if r.resolves.is_some() {
            if r.resolved_ok {
                streak.clear();
                last_success = r.at;
            }
        } else if v.resolved(r) {
            streak.clear();
            last_success = r.at;
        } else {
            streak.push(r);
        }
    }
    let last = streak
        .last()
        .ok_or_else(|| format!("{agent} has no unresolved failures in scope"))?;
    let last_error = format!(
        "{} - {}",
        or_unknown(last.kind.as_deref()),
        last.detail.as_deref().unwrap_or("")
    );
    let since = match (last_success, streak.first().and_then(|r| r.at)) {
        (Some(t), _) => elapsed((v.input.now - t).num_milliseconds()),
        (None, Some(t)) => format!(
            "none recorded (first failure {} ago)",
            elapsed((v.input.now - t).num_milliseconds())
        ),
        (None, None) => "none recorded".into(),
    };
    let cooldown = v.input.policy.breaker_for(&agent).cooldown.0.as_secs();
    let (opts, opts_text) = options(&[
        format!("Wait {cooldown} seconds and retry"),
        "Skip this agent for this session".into(),
        "Abort workflow".into(),
    ]);
    let text = format!(
        "[CIRCUIT BREAKER] {agent} circuit breaker opened\n\nConsecutive failures: {}\nLast error: {last_error}\nTime since last success: {since}\n\nThis agent is temporarily disabled to prevent cascading failures.\n\n{opts_text}",
        streak.len()
    );
    let fields = json!({
        "agent_name": agent, "failure_count": streak.len(), "last_error": last_error,
        "time_elapsed": since, "cooldown": cooldown,
        "breaker_open": v.input.open_breakers.contains(&agent), "options": opts,
    });
    Ok((fields, text))
}

fn stability_warning(v: &View) -> Result<(Value, String), String> {
    let session = match &v.input.session {
        Some(s) => Some(s.clone()),
        None => v.last()?.session.clone(),
    };
    let ours: Vec<&Rec> = v
        .failures
        .iter()
        .copied()
        .filter(|r| r.session == session)
        .collect();
    let n = ours.len() as u64;
    let successes = v
        .input
        .records
        .iter()
        .filter(|r| r.session == session && r.resolves.is_some() && r.resolved_ok)
        .count() as u64;
    let runs = v.input.runs.unwrap_or(n + successes).max(n).max(1);
    let rate = (n as f64 * 100.0 / runs as f64).round() as u64;
    let recent: Vec<&Rec> = ours.iter().rev().take(5).rev().copied().collect();
    let (opts, opts_text) = options(&[
        "Continue workflow (accepting higher risk)".into(),
        "Save session state and pause for troubleshooting".into(),
        "Abort workflow and start fresh".into(),
    ]);
    let mut text = format!(
        "[WORKFLOW STABILITY WARNING]\n\nThis session has encountered {n} failures across phases.\nFailure rate: {rate}%\n\nRecent failures:\n"
    );
    for r in &recent {
        text.push_str(&format!(
            "  - Phase {}: {} - {}\n",
            or_unknown(r.phase.as_deref()),
            or_unknown(r.agent.as_deref()),
            or_unknown(r.kind.as_deref())
        ));
    }
    text.push_str("\nRecommendation: Consider aborting and troubleshooting.\n\n");
    text.push_str(&opts_text);
    let fields = json!({
        "session_id": session, "failure_count": n, "failure_rate": rate, "runs": runs,
        "recent_failures": recent.iter().map(|r| json!({"phase": r.phase, "agent": r.agent, "type": r.kind})).collect::<Vec<_>>(),
        "options": opts,
    });
    Ok((fields, text))
}

fn degradation(v: &View) -> Result<(Value, String), String> {
    let unresolved = v.agents(|r| !v.resolved(r));
    if unresolved.is_empty() {
        return Err("no degradation: every failure in scope was resolved".into());
    }
    let warnings: Vec<String> = unresolved
        .iter()
        .map(|(a, r)| match &r.phase {
            Some(p) => format!(
                "Phase {p} completed without {a} output ({})",
                or_unknown(r.kind.as_deref())
            ),
            None => format!(
                "Completed without {a} output ({})",
                or_unknown(r.kind.as_deref())
            ),
        })
        .collect();
    let mut agents: BTreeSet<&str> = v.agents(|_| true).iter().map(|(a, _)| *a).collect();
    agents.extend(v.input.completed.iter().map(String::as_str));
    let total = agents.len();
    let ok = total - unresolved.len();
    let preserved: Vec<String> = v
        .failures
        .iter()
        .flat_map(|r| r.preserved.iter().cloned())
        .collect();
    let names: Vec<String> = unresolved.iter().map(|(a, _)| a.to_string()).collect();
    let recommendation = format!(
        "Manually review the work that ran without {}.",
        names.join(", ")
    );
    let mut text = String::from("Workflow Complete (with degradation)\n\nWarnings:\n");
    for w in &warnings {
        text.push_str(&format!("- {w}\n"));
    }
    text.push_str(&format!(
        "\nGenerated outputs:\n- {ok} of {total} agents completed\n"
    ));
    for p in &preserved {
        text.push_str(&format!("- {p} (partial)\n"));
    }
    text.push_str(&format!("\nRecommendation: {recommendation}"));
    let fields = json!({
        "warnings": warnings, "completed_agents": ok, "total_agents": total,
        "preserved_outputs": preserved, "missing": names, "recommendation": recommendation,
    });
    Ok((fields, text))
}

fn session_summary(v: &View) -> Result<(Value, String), String> {
    let last = v.last()?;
    let session = v.input.session.clone().or_else(|| last.session.clone());
    let first = v
        .input
        .records
        .iter()
        .filter(|r| r.session == session)
        .find_map(|r| r.at);
    let duration = first
        .map(|t| elapsed((v.input.now - t).num_milliseconds()))
        .unwrap_or_else(|| "unknown".into());
    let completed: Vec<String> = if v.input.completed.is_empty() {
        match last.phase.as_deref().and_then(|p| p.parse::<u64>().ok()) {
            Some(n) => (0..n).map(|p| p.to_string()).collect(),
            None => Vec::new(),
        }
    } else {
        v.input.completed.clone()
    };
    let mut artifacts = vec![format!("{}/logs/errors.jsonl", v.input.state_root)];
    for r in v.failures.iter().filter(|r| r.session == session) {
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
    let fresh = format!("rm -rf {} && claude", v.input.state_root);
    let mut text = format!(
        "Session Summary\n\nDuration: {duration}\nCompleted: Phases {}\nFailed at: Phase {} - {}\n\nSaved artifacts:\n",
        list(&completed),
        or_unknown(last.phase.as_deref()),
        or_unknown(last.agent.as_deref())
    );
    for a in &artifacts {
        text.push_str(&format!("- {a}\n"));
    }
    text.push_str(&format!(
        "\nTo resume:\n  {resume}\n\nTo start fresh:\n  {fresh}"
    ));
    let fields = json!({
        "session_id": session, "elapsed_time": duration, "completed_list": completed,
        "phase": last.phase, "agent": last.agent, "saved_artifacts": artifacts,
        "resume": resume, "start_fresh": fresh,
    });
    Ok((fields, text))
}

// ---------------------------------------------------------------------------------------------
// Seed 001's sequential pipeline status.

fn pipeline_status(v: &View) -> Result<(Value, String), String> {
    let pipeline = &v.input.pipeline;
    if pipeline.is_empty() {
        return Err("pipeline-status needs --pipeline A,B,C (the agents in order)".into());
    }
    let failed_at = pipeline
        .iter()
        .position(|a| {
            v.failures
                .iter()
                .any(|r| r.agent.as_deref() == Some(a) && !v.resolved(r))
        })
        .ok_or_else(|| "no agent of the pipeline has an unresolved failure in scope".to_string())?;
    let agent = &pipeline[failed_at];
    let last = v
        .failures
        .iter()
        .rev()
        .find(|r| r.agent.as_deref() == Some(agent.as_str()))
        .copied()
        .ok_or("no failure")?;
    let mut failure = or_unknown(last.kind.as_deref()).to_uppercase();
    if let Some(ms) = last.duration_ms {
        failure.push_str(&format!(" after {} minutes", ms.div_ceil(60_000)));
    }
    let extended = v
        .input
        .policy
        .agent(agent)
        .timeout
        .map(|d| (d.as_millis().div_ceil(60_000) * 4).div_ceil(3));
    let next = pipeline.get(failed_at + 1);
    let opts: Vec<String> = vec![
        match extended {
            Some(m) => format!("Retry {agent} with extended timeout ({m} min)"),
            None => format!("Retry {agent} with extended timeout"),
        },
        "Retry with narrowed scope".into(),
        match next {
            Some(n) => format!("Skip {agent}, continue with {n}"),
            None => format!("Skip {agent}, finish the pipeline"),
        },
        "Abort pipeline, keep completed outputs".into(),
    ];
    let mut text = format!(
        "Pipeline Status: HALTED at skill {}/{}\n\nCompleted successfully:\n",
        failed_at + 1,
        pipeline.len()
    );
    for a in &pipeline[..failed_at] {
        text.push_str(&format!("- [x] {a}\n"));
    }
    text.push_str(&format!("\nFailed:\n- [ ] {agent}: {failure}\n"));
    if let Some(p) = &last.last_progress {
        text.push_str(&format!("      Last progress: \"{p}\"\n"));
    }
    for p in &last.preserved {
        text.push_str(&format!("      Partial output: {p}\n"));
    }
    text.push_str("\nNot started:\n");
    for a in &pipeline[failed_at + 1..] {
        text.push_str(&format!("- [ ] {a}\n"));
    }
    text.push_str("\nCompleted outputs preserved. Options:\n");
    let letters = ["A", "B", "C", "D"];
    for (l, o) in letters.iter().zip(&opts) {
        text.push_str(&format!("({l}) {o}\n"));
    }
    let fields = json!({
        "status": "HALTED", "failed_index": failed_at + 1, "total": pipeline.len(),
        "completed": &pipeline[..failed_at], "failed": {"name": agent, "error": failure,
        "last_progress": last.last_progress, "partial_outputs": last.preserved},
        "not_started": &pipeline[failed_at + 1..],
        "options": letters.iter().zip(&opts).map(|(l, t)| json!({"letter": l, "text": t})).collect::<Vec<_>>(),
    });
    Ok((fields, text.trim_end().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session like seed 000's: phase 2's consultants fail, one recovers on retry.
    const LOG: &[&str] = &[
        r#"{"error_id":"e1","timestamp":"2026-02-04T14:10:00Z","session_id":"s1","workflow_id":"w1","phase":1,"agent":"research-architect","kind":"crash","detail":"Task tool failed","retry_count":0}"#,
        r#"{"resolves":"e1","timestamp":"2026-02-04T14:12:00Z","session_id":"s1","workflow_id":"w1","phase":1,"agent":"research-architect","resolution":{"action_taken":"retry","successful":true}}"#,
        r#"{"error_id":"e2","timestamp":"2026-02-04T14:25:00Z","session_id":"s1","workflow_id":"w1","phase":2,"agent":"mathematician-consultant","kind":"timeout","detail":"Agent exceeded 5 minute timeout","duration_ms":300000,"preserved_outputs":["plans/ch3_partial.md"]}"#,
        r#"{"error_id":"e3","timestamp":"2026-02-04T14:28:00Z","session_id":"s1","workflow_id":"w1","phase":2,"agent":"programmer-consultant","kind":"rate_limited","detail":"429 Too Many Requests"}"#,
        r#"{"error_id":"e4","timestamp":"2026-02-04T14:29:00Z","session_id":"s1","workflow_id":"w1","phase":2,"agent":"statistician-consultant","kind":"timeout","detail":"Agent exceeded 5 minute timeout","retry_count":0,"duration_ms":300000}"#,
        r#"{"error_id":"e5","timestamp":"2026-02-04T14:30:22Z","session_id":"s1","workflow_id":"w1","phase":2,"agent":"statistician-consultant","kind":"timeout","detail":"Agent exceeded 5 minute timeout","retry_count":1,"duration_ms":300000,"context":{"last_progress":"Reviewing section 2 of 4"}}"#,
    ];

    const POLICY: &str = r#"
[phases.2]
name = "Subsection planning"
timeout = "20m"
size = 3

[agents."*-consultant"]
timeout = "5m"

[agents.mathematician-consultant]
criticality = "optional"

[agents.programmer-consultant]
criticality = "optional"
"#;

    fn render(name: TemplateName, tweak: impl FnOnce(&mut TemplateInput)) -> Rendered {
        let policy = crate::policy::load(POLICY).expect("policy");
        let records = LOG
            .iter()
            .map(|l| Rec::from_line(&LogLine::parse(l.as_bytes()).expect("line")))
            .collect();
        let mut input = TemplateInput {
            records,
            policy: &policy,
            now: "2026-02-04T14:35:00Z".parse().expect("now"),
            state_root: ".triage".into(),
            session: Some("s1".into()),
            workflow: None,
            agent: None,
            phase: None,
            completed: Vec::new(),
            pipeline: Vec::new(),
            runs: None,
            open_breakers: vec!["statistician-consultant".into()],
        };
        tweak(&mut input);
        let r = build(name, &input).expect("renders");
        assert_eq!(r.fields["template"], json!(name));
        assert!(r.fields.is_object());
        r
    }

    #[test]
    fn agent_failure() {
        insta::assert_snapshot!(render(TemplateName::AgentFailure, |_| {}).text);
    }

    #[test]
    fn multiple_failures() {
        let r = render(TemplateName::MultipleFailures, |i| {
            i.completed = vec!["analysis-planner".into()];
        });
        assert_eq!(r.fields["count"], 3);
        insta::assert_snapshot!(r.text);
    }

    #[test]
    fn phase_timeout() {
        let r = render(TemplateName::PhaseTimeout, |i| {
            i.completed = vec!["analysis-planner".into()];
            i.pipeline = vec![
                "analysis-planner".into(),
                "statistician-consultant".into(),
                "mathematician-consultant".into(),
                "notebook-reviewer".into(),
            ];
        });
        assert_eq!(r.fields["timeout"], 20);
        insta::assert_snapshot!(r.text);
    }

    #[test]
    fn breaker_open() {
        let r = render(TemplateName::BreakerOpen, |_| {});
        assert_eq!(r.fields["failure_count"], 2);
        assert_eq!(r.fields["breaker_open"], true);
        insta::assert_snapshot!(r.text);
    }

    #[test]
    fn stability_warning() {
        let r = render(TemplateName::StabilityWarning, |i| i.runs = Some(12));
        assert_eq!(r.fields["failure_rate"], 42);
        insta::assert_snapshot!(r.text);
    }

    #[test]
    fn degradation() {
        insta::assert_snapshot!(render(TemplateName::Degradation, |_| {}).text);
    }

    #[test]
    fn session_summary() {
        insta::assert_snapshot!(render(TemplateName::SessionSummary, |_| {}).text);
    }

    #[test]
    fn pipeline_status() {
        let r = render(TemplateName::PipelineStatus, |i| {
            i.pipeline = vec![
                "research-architect".into(),
                "statistician-consultant".into(),
                "notebook-generator".into(),
            ];
        });
        assert_eq!(r.fields["failed_index"], 2);
        insta::assert_snapshot!(r.text);
    }

    #[test]
    fn missing_inputs_say_what_to_give() {
        let policy = Policy::default();
        let input = TemplateInput {
            records: Vec::new(),
            policy: &policy,
            now: "2026-02-04T14:35:00Z".parse().expect("now"),
            state_root: ".triage".into(),
            session: None,
            workflow: None,
            agent: None,
            phase: None,
            completed: Vec::new(),
            pipeline: Vec::new(),
            runs: None,
            open_breakers: Vec::new(),
        };
        let e = build(TemplateName::AgentFailure, &input).expect_err("no records");
        assert!(e.contains("widen the filter"), "{e}");
        let e = build(TemplateName::PipelineStatus, &input).expect_err("no pipeline");
        assert!(e.contains("--pipeline"), "{e}");
    }
}
