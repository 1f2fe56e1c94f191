//! The seeds' message texts, rendered from error records: seed 000's five escalation prompts,
//! its degradation summary and post-failure diagnostics, seed 001's sequential pipeline
//! status, parallel execution status and cascade message, and seed 002's "Stage N failed X
//! times". Each is also a JSON object with the same fields, for machines.
//!
//! A template states only what the log and the breaker files show: a failure resolved since
//! (a retry that worked, a person's decision) is not a failure any more, an interrupt is not
//! the agent's failure, what the log cannot know (phases completed, runs made) is said to be
//! unknown or comes from a flag, and no advice deletes shared state.
//!
//! Pure: handed the records in scope, the breakers, the policy and `now`.

mod parallel;

use crate::core::breaker::State;
use crate::core::error_record::LogLine;
use crate::core::policy::Policy;
use crate::core::vocab::{Criticality, Kind};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;

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
    /// Agents that ran in parallel: which completed and which failed ("PARTIAL SUCCESS").
    ParallelStatus,
    /// Several agents of a workflow failing: retries stop, the user decides (the cascade rule).
    Cascade,
    /// A stage that failed again and again: going on with partial results.
    StageFailed,
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
    /// Workflow.
    pub workflow: Option<String>,
    /// Phase.
    pub phase: Option<String>,
    /// Agent.
    pub agent: Option<String>,
    /// What a later success resolves: the work item's breaker key, else the agent.
    pub unit: Option<String>,
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
    /// A failure that counts until resolved (not an interrupt).
    pub opens: bool,
    /// A resolution line that closes its record (not `successful: false`).
    pub closes: bool,
    /// What was done about it, when said.
    pub action: Option<String>,
    /// What a person chose, when said.
    pub user_choice: Option<String>,
    /// True for a record that does not count toward the thresholds.
    pub uncounted: bool,
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
            workflow: l.workflow_id.as_deref().map(String::from),
            phase: l.phase_text(),
            agent: l.agent().map(String::from),
            unit: l.unit().map(String::from),
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
            opens: l.opens(),
            closes: l.closes(),
            action: l
                .resolution
                .as_ref()
                .and_then(|r| r.action())
                .map(String::from),
            user_choice: l
                .resolution
                .as_ref()
                .and_then(|r| r.user_choice())
                .map(String::from),
            uncounted: !l.counts(),
        }
    }

    /// The name a template shows: the unit (a work item's breaker key, else the agent).
    fn name(&self) -> Option<&str> {
        self.unit.as_deref().or(self.agent.as_deref())
    }

    /// Whether its kind is `kind` (a word outside the vocabulary is none of them).
    fn is(&self, kind: Kind) -> bool {
        self.kind.as_deref() == Some(kind.as_str())
    }
}

/// A breaker as its file shows it, for the templates.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BreakerFacts {
    /// Its key.
    pub key: String,
    /// Where it stands.
    pub state: State,
    /// Consecutive failures (the count that opened it, while open).
    pub consecutive_failures: u32,
    /// The last failure, as text.
    pub last_error: Option<String>,
    /// Seconds since its last success, if it had one.
    pub since_last_success_s: Option<u64>,
    /// Seconds until it lets a probe through.
    pub half_open_in_s: Option<u64>,
    /// Times it opened.
    pub opened: u64,
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
    /// Every breaker with a state file, as it stands.
    pub breakers: Vec<BreakerFacts>,
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
        TemplateName::ParallelStatus => parallel::parallel_status(&v)?,
        TemplateName::Cascade => parallel::cascade(&v)?,
        TemplateName::StageFailed => parallel::stage_failed(&v)?,
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
    /// The error records in scope (not resolution lines), in log order.
    failures: Vec<&'a Rec>,
    /// The resolution line that closed each record, by id.
    closed_by: HashMap<&'a str, &'a Rec>,
}

/// How a unit (an agent, or a work item) stands at the end of the log.
#[derive(Clone, Debug)]
struct Unit<'a> {
    name: &'a str,
    /// Its last failure that counts (not an interrupt).
    last: &'a Rec,
    /// Its failures not resolved yet.
    open: Vec<&'a Rec>,
    /// How its last failure was resolved, when it was.
    resolution: Option<&'a Rec>,
}

impl Unit<'_> {
    fn failing(&self) -> bool {
        !self.open.is_empty()
    }

    /// Resolved because it later succeeded (an automatic recovery, or a retry that worked).
    fn recovered(&self) -> bool {
        !self.failing()
            && self.resolution.is_some_and(|r| {
                r.resolved_ok
                    && r.action.as_deref().is_some_and(|a| {
                        let a = a.to_ascii_lowercase();
                        a.starts_with("retry") || a.starts_with("recover")
                    })
            })
    }

    /// Resolved by a decision, not a success (proceed without it, skip, ...): what was decided.
    fn decided(&self) -> Option<String> {
        if self.failing() || self.recovered() {
            return None;
        }
        let r = self.resolution?;
        Some(
            r.user_choice
                .clone()
                .or_else(|| r.action.clone())
                .unwrap_or_else(|| "resolved".into()),
        )
    }
}

impl<'a> View<'a> {
    fn new(input: &'a TemplateInput<'a>) -> View<'a> {
        let closed_by = input
            .records
            .iter()
            .filter(|r| r.closes)
            .filter_map(|r| Some((r.resolves.as_deref()?, r)))
            .collect();
        let failures = input
            .records
            .iter()
            .filter(|r| r.resolves.is_none())
            .collect();
        View {
            input,
            failures,
            closed_by,
        }
    }

    fn resolved(&self, r: &Rec) -> bool {
        r.resolved_ok
            || r.error_id
                .as_deref()
                .is_some_and(|id| self.closed_by.contains_key(id))
    }

    /// A failure that still counts: not an interrupt, not resolved.
    fn is_open(&self, r: &Rec) -> bool {
        r.opens && !self.resolved(r)
    }

    /// The last failure that counts (an interrupt is not the agent's failure); an unresolved
    /// one when there is one.
    fn last(&self) -> Result<&'a Rec, String> {
        let counted = || {
            self.failures
                .iter()
                .rev()
                .filter(|r| r.opens || r.resolved_ok)
        };
        counted()
            .find(|r| self.is_open(r))
            .or_else(|| counted().next())
            .copied()
            .ok_or_else(|| {
                "no error records match; widen the filter (--session, --workflow, --agent, --phase, --since)".to_string()
            })
    }

    fn phase_name(&self, phase: &str) -> Option<String> {
        self.input.policy.phase(phase).and_then(|p| p.name.clone())
    }

    /// Every unit with a failure that counts among the records `pred` admits, in order of
    /// first failure.
    fn units(&self, pred: impl Fn(&Rec) -> bool) -> Vec<Unit<'a>> {
        let mut out: Vec<Unit<'a>> = Vec::new();
        for r in self.failures.iter().copied() {
            if !(r.opens || r.resolved_ok) || !pred(r) {
                continue;
            }
            let Some(name) = r.name() else {
                continue;
            };
            let resolution = match r.error_id.as_deref() {
                Some(id) => self.closed_by.get(id).copied(),
                None => None,
            }
            .or(r.resolved_ok.then_some(r));
            let open = self.is_open(r);
            match out.iter_mut().find(|u| u.name == name) {
                Some(u) => {
                    u.last = r;
                    u.resolution = resolution;
                    if open {
                        u.open.push(r);
                    }
                }
                None => out.push(Unit {
                    name,
                    last: r,
                    open: if open { vec![r] } else { Vec::new() },
                    resolution,
                }),
            }
        }
        out
    }

    fn criticality(&self, r: &Rec) -> Criticality {
        self.input
            .policy
            .agent(r.agent.as_deref().or(r.unit.as_deref()).unwrap_or(""))
            .criticality
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

/// Options as JSON and as seed 000's indented lines. The seed's "Enter choice" prompt is not
/// part of the text (a model may read it, and nothing reads its answer): see [`prompt`].
fn options(texts: &[String]) -> (Value, String) {
    let mut json = Vec::new();
    let mut text = String::from("Options:");
    for (l, t) in LETTERS.iter().zip(texts) {
        json.push(json!({"letter": l, "text": t}));
        text.push_str(&format!("\n  ({l}) {t}"));
    }
    (Value::Array(json), text)
}

const LETTERS: [&str; 6] = ["A", "B", "C", "D", "E", "F"];

/// Seed 000's prompt line for a rendered template's options (`Enter choice [A/B/C]:`), for a
/// person at a terminal; `None` when it has no options.
pub fn prompt(fields: &Value) -> Option<String> {
    let n = fields.get("options")?.as_array()?.len();
    (n > 0).then(|| format!("Enter choice [{}]:", LETTERS[..n.min(6)].join("/")))
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
    crate::core::duration::Dur::millis(whole_seconds)
        .approx()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Seed 000's templates.

/// The last failure in scope that is not resolved.
fn last_open<'a>(v: &View<'a>) -> Result<&'a Rec, String> {
    let r = v.last()?;
    if v.is_open(r) {
        Ok(r)
    } else {
        Err("every failure in scope was resolved (recovered on retry, or decided); nothing is failing".into())
    }
}

fn agent_failure(v: &View) -> Result<(Value, String), String> {
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
    let with_phase = |open: bool| {
        v.failures
            .iter()
            .rev()
            .filter(|r| pred(r) && (!open || v.is_open(r)))
            .find_map(|r| r.phase.clone())
    };
    with_phase(true)
        .or_else(|| with_phase(false))
        .ok_or_else(|| "no error record in scope names a phase; give --phase".to_string())
}

fn multiple_failures(v: &View) -> Result<(Value, String), String> {
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

fn phase_timeout(v: &View) -> Result<(Value, String), String> {
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

fn breaker_open(v: &View) -> Result<(Value, String), String> {
    let agent = match &v.input.agent {
        Some(a) => a.clone(),
        None => or_unknown(v.last()?.name()),
    };
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
    let last_error = b
        .last_error
        .clone()
        .unwrap_or_else(|| "none recorded".into());
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
        "[CIRCUIT BREAKER] {agent} {headline}\n\nConsecutive failures: {}\nLast error: {last_error}\nTime since last success: {since}\nTimes opened: {}{twice}\n\nThis agent is temporarily disabled to prevent cascading failures.\n\n{opts_text}",
        b.consecutive_failures, b.opened
    );
    let fields = json!({
        "agent_name": agent, "breaker_key": b.key, "state": b.state,
        "failure_count": b.consecutive_failures, "last_error": last_error,
        "time_elapsed": since, "cooldown": b.half_open_in_s, "times_opened": b.opened,
        "options": opts,
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
        .filter(|r| r.session == session && !r.uncounted)
        .collect();
    let open: Vec<&Rec> = ours.iter().copied().filter(|r| v.is_open(r)).collect();
    let recovered = ours.iter().filter(|r| r.opens && v.resolved(r)).count() as u64;
    let interrupts = ours.iter().filter(|r| r.is(Kind::Interrupted)).count() as u64;
    let n = open.len() as u64;
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
        "[WORKFLOW STABILITY WARNING]\n\nThis session has encountered {n} failures across phases.\n"
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
        "session_id": session, "failure_count": n, "failure_rate": rate, "runs": v.input.runs,
        "resolved": recovered, "interrupts": interrupts,
        "recent_failures": recent.iter().map(|r| json!({"phase": r.phase, "agent": r.name(), "type": r.kind})).collect::<Vec<_>>(),
        "options": opts,
    });
    Ok((fields, text))
}

fn degradation(v: &View) -> Result<(Value, String), String> {
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
    text.push_str(&format!(
        "\nGenerated outputs:\n- {ok} of {total} agents completed\n"
    ));
    for p in &preserved {
        text.push_str(&format!("- {p} (partial)\n"));
    }
    text.push_str(&format!("\nRecommendation: {recommendation}"));
    let fields = json!({
        "headline": headline, "complete": critical_failing.is_empty(),
        "warnings": warnings, "completed_agents": ok, "total_agents": total,
        "preserved_outputs": preserved, "missing": names,
        "critical_failing": critical_failing, "recommendation": recommendation,
    });
    Ok((fields, text))
}

fn session_summary(v: &View) -> Result<(Value, String), String> {
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

// ---------------------------------------------------------------------------------------------
// Seed 001's sequential pipeline status.

fn pipeline_status(v: &View) -> Result<(Value, String), String> {
    let pipeline = &v.input.pipeline;
    if pipeline.is_empty() {
        return Err("pipeline-status needs --pipeline A,B,C (the agents in order)".into());
    }
    let units = v.units(|_| true);
    let unit = |a: &str| units.iter().find(|u| u.name == a);
    let failing = |a: &str| unit(a).is_some_and(Unit::failing);
    let failed_at = pipeline
        .iter()
        .position(|a| failing(a))
        .ok_or_else(|| "no agent of the pipeline has an unresolved failure in scope".to_string())?;
    let agent = &pipeline[failed_at];
    let last = unit(agent)
        .and_then(|u| u.open.last().copied())
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
    // Sequential: the stages before the halt completed. After it, a stage the log or
    // --completed shows is placed by what they show; the others have not started.
    let after = &pipeline[failed_at + 1..];
    let mut completed: Vec<&String> = pipeline[..failed_at].iter().collect();
    let mut also_failed: Vec<&String> = Vec::new();
    let mut not_started: Vec<&String> = Vec::new();
    for a in after {
        if failing(a) {
            also_failed.push(a);
        } else if v.input.completed.contains(a) || unit(a).is_some_and(Unit::recovered) {
            completed.push(a);
        } else if unit(a).is_some() {
            also_failed.push(a);
        } else {
            not_started.push(a);
        }
    }
    let next = not_started.first();
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
        "Pipeline Status: HALTED at skill {}/{}\n\n",
        failed_at + 1,
        pipeline.len()
    );
    if !completed.is_empty() {
        text.push_str("Completed successfully:\n");
        for a in &completed {
            text.push_str(&format!("- [x] {a}\n"));
        }
        text.push('\n');
    }
    text.push_str(&format!("Failed:\n- [ ] {agent}: {failure}\n"));
    if let Some(p) = &last.last_progress {
        text.push_str(&format!("      Last progress: \"{p}\"\n"));
    }
    for p in &last.preserved {
        text.push_str(&format!("      Partial output: {p}\n"));
    }
    for a in &also_failed {
        let kind = unit(a)
            .and_then(|u| u.last.kind.clone())
            .map(|k| k.to_uppercase())
            .unwrap_or_else(|| "UNKNOWN".into());
        let how = match unit(a).and_then(Unit::decided) {
            Some(d) => format!("{kind} (decided: {d})"),
            None => kind,
        };
        text.push_str(&format!("- [ ] {a}: {how}\n"));
    }
    if !not_started.is_empty() {
        text.push_str("\nNot started:\n");
        for a in &not_started {
            text.push_str(&format!("- [ ] {a}\n"));
        }
    }
    text.push_str(if completed.is_empty() {
        "\nOptions:\n"
    } else {
        "\nCompleted outputs preserved. Options:\n"
    });
    let letters = ["A", "B", "C", "D"];
    for (l, o) in letters.iter().zip(&opts) {
        text.push_str(&format!("({l}) {o}\n"));
    }
    let fields = json!({
        "status": "HALTED", "failed_index": failed_at + 1, "total": pipeline.len(),
        "completed": completed, "failed": {"name": agent, "error": failure,
        "last_progress": last.last_progress, "partial_outputs": last.preserved},
        "also_failed": also_failed, "not_started": not_started,
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
        let policy = crate::core::policy::load(POLICY).expect("policy");
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
            breakers: vec![BreakerFacts {
                key: "statistician-consultant".into(),
                state: State::Open,
                consecutive_failures: 2,
                last_error: Some("timeout - Agent exceeded 5 minute timeout".into()),
                since_last_success_s: None,
                half_open_in_s: Some(37),
                opened: 1,
            }],
        };
        tweak(&mut input);
        let r = build(name, &input).expect("renders");
        assert_eq!(r.fields["template"], json!(name));
        assert!(r.fields.is_object());
        r
    }

    fn render_err(name: TemplateName, tweak: impl FnOnce(&mut TemplateInput)) -> String {
        let policy = crate::core::policy::load(POLICY).expect("policy");
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
            breakers: vec![BreakerFacts {
                key: "statistician-consultant".into(),
                state: State::Open,
                ..BreakerFacts::default()
            }],
        };
        tweak(&mut input);
        build(name, &input).expect_err("refused")
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
        assert_eq!(r.fields["state"], "open");
        insta::assert_snapshot!(r.text);
        // No breaker file, or a closed one: Template 4 would say what is not so.
        let e = render_err(TemplateName::BreakerOpen, |i| i.breakers.clear());
        assert!(
            e.contains("there is no breaker `statistician-consultant`"),
            "{e}"
        );
        let e = render_err(TemplateName::BreakerOpen, |i| {
            i.breakers[0].state = State::Closed;
        });
        assert!(e.contains("is closed, not open"), "{e}");
    }

    #[test]
    fn the_prompt_line_is_built_from_the_options_for_a_terminal() {
        let r = render(TemplateName::StabilityWarning, |i| i.runs = Some(12));
        assert!(!r.text.contains("Enter choice"), "{}", r.text);
        assert_eq!(prompt(&r.fields).as_deref(), Some("Enter choice [A/B/C]:"));
        assert_eq!(prompt(&json!({"options": []})), None);
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
    fn parallel_status() {
        let r = render(TemplateName::ParallelStatus, |i| {
            i.pipeline = vec![
                "statistician-consultant".into(),
                "mathematician-consultant".into(),
                "programmer-consultant".into(),
                "research-architect".into(),
                "analysis-planner".into(),
            ];
            i.completed = vec!["analysis-planner".into()];
        });
        assert_eq!(r.fields["status"], "PARTIAL SUCCESS");
        assert_eq!(r.fields["completed_count"], 2);
        insta::assert_snapshot!(r.text);
    }

    #[test]
    fn cascade() {
        let r = render(TemplateName::Cascade, |i| i.session = None);
        assert_eq!(r.fields["count"], 3);
        insta::assert_snapshot!(r.text);
        // Two failing agents are not a cascade (seed 001: more than 2).
        let e = render_err(TemplateName::Cascade, |i| {
            i.records
                .retain(|r| r.agent.as_deref() != Some("programmer-consultant"));
        });
        assert!(
            e.contains("2 agents are failing, the rule needs more than 2"),
            "{e}"
        );
    }

    #[test]
    fn stage_failed() {
        let r = render(TemplateName::StageFailed, |_| {});
        assert_eq!(r.fields["failures"], 4);
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
            breakers: Vec::new(),
        };
        let e = build(TemplateName::AgentFailure, &input).expect_err("no records");
        assert!(e.contains("widen the filter"), "{e}");
        let e = build(TemplateName::PipelineStatus, &input).expect_err("no pipeline");
        assert!(e.contains("--pipeline"), "{e}");
    }
}
