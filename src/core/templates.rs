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
//!
//! One file per family: `escalation` (seed 000's five prompts), `summaries` (its
//! degradation and session summaries), `pipeline` (seed 001's sequential status), `parallel`
//! (its parallel status and cascade, seed 002's stage failure); `view` is how they all read
//! the records.

mod escalation;
mod parallel;
mod pipeline;
mod summaries;
mod view;

use crate::core::breaker::State;
use crate::core::error_record::LogLine;
use crate::core::policy::Policy;
use crate::core::vocab::Kind;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use view::{View, LETTERS};

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
    /// A phase's work items: how many completed, of how many, and whether each is an agent
    /// of its own. The degradation summary then counts items (many may share one agent or
    /// breaker), and calls them agents when each is one.
    pub items: Option<(usize, usize, bool)>,
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
        TemplateName::AgentFailure => escalation::agent_failure(&v)?,
        TemplateName::MultipleFailures => escalation::multiple_failures(&v)?,
        TemplateName::PhaseTimeout => escalation::phase_timeout(&v)?,
        TemplateName::BreakerOpen => escalation::breaker_open(&v)?,
        TemplateName::StabilityWarning => escalation::stability_warning(&v)?,
        TemplateName::Degradation => summaries::degradation(&v)?,
        TemplateName::SessionSummary => summaries::session_summary(&v)?,
        TemplateName::PipelineStatus => pipeline::pipeline_status(&v)?,
        TemplateName::ParallelStatus => parallel::parallel_status(&v)?,
        TemplateName::Cascade => parallel::cascade(&v)?,
        TemplateName::StageFailed => parallel::stage_failed(&v)?,
    };
    if let Some(o) = fields.as_object_mut() {
        o.insert("template".into(), json!(name));
    }
    Ok(Rendered { text, fields })
}

/// Seed 000's prompt line for a rendered template's options (`Enter choice [A/B/C]:`), for a
/// person at a terminal; `None` when it has no options.
pub fn prompt(fields: &Value) -> Option<String> {
    let n = fields.get("options")?.as_array()?.len();
    (n > 0).then(|| format!("Enter choice [{}]:", LETTERS[..n.min(6)].join("/")))
}

#[cfg(test)]
mod tests;
