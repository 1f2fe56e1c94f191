//! The policy file (SPEC §7): its schema, the built-in defaults, loading with errors
//! that name the line and key, and resolution of per-agent and per-key sections with globs.
//!
//! Every section is optional. Fields of `[agents.*]` and `[breaker.*]` sections merge from the
//! least specific matching name to the most specific (the exact name last).

mod check;
mod load;

pub use load::{Depth, Loaded};

/// Reads a policy file's `text` so that one mistake never switches the whole policy off:
/// every good entry, and a problem (with its line and column) for each bad one.
pub fn load_lenient(text: &str, depth: Depth) -> Loaded {
    load::load_with(text, depth, check::check_values)
}

use crate::core::duration::Dur;
use crate::core::glob;
use crate::core::vocab::{Criticality, Family, Kind, Severity, Tier};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The whole policy.
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    /// How failures are retried.
    pub retry: RetryPolicy,
    /// Circuit-breaker defaults and per-key overrides.
    pub breaker: BreakerSection,
    /// When a session, phase or workflow is going badly.
    pub thresholds: Thresholds,
    /// Phases by number or name.
    pub phases: BTreeMap<String, PhasePolicy>,
    /// Agents by name or glob.
    pub agents: BTreeMap<String, AgentPolicy>,
    /// Classification rules tried before the built-in ones.
    pub classify: ClassifySection,
    /// How `triage run` and a phase's items treat what their commands leave behind.
    pub run: RunPolicy,
    /// What a phase that stopped for a decision does when nobody answers: its default
    /// action, how long it waits for a person, and whether `phase run` waits by itself.
    pub phase: PhaseDecisionPolicy,
    /// Saga compensations.
    pub saga: SagaPolicy,
    /// Where shared state is kept: the local files (default), or a fleet's Redis.
    pub store: StorePolicy,
    /// How long a writer that keeps its end of stdin open, sending part of its input or
    /// nothing, may keep a call waiting, all its silences together; then the call goes on
    /// with what arrived, with a warning in logs/triage.log. A file or /dev/null on stdin is
    /// never waited on.
    pub stdin: StdinPolicy,
    /// What `triage hook` tells the model in a coding session: which failures are the agent's
    /// own work (said nothing of), and what SessionStart still names.
    pub voice: VoicePolicy,
    /// Permits (a bulkhead shared by every process and host) by key or glob: how many leases
    /// of a key may be held at once (`triage permit`, `run --permit`, the hook's subagent
    /// launches under `[permits.agents]`).
    pub permits: BTreeMap<String, PermitPolicy>,
    /// Retry budgets by key or glob (gRPC's retryThrottling): retries stop while too many
    /// calls fail (`triage budget`, `run --budget`).
    pub budget: BTreeMap<String, BudgetPolicy>,
    /// Credentials triage never stores nor repeats, beyond the built-in shapes (API keys,
    /// tokens, auth headers, private keys, passwords in URLs and in `password=` values).
    pub redact: RedactPolicy,
}

/// `[redact]`: shapes of credentials to add to the built-in ones, and fields of a hook payload
/// or an error object whose values are never kept. What matches becomes `[redacted NAME]`
/// before anything is written or told to the model.
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RedactPolicy {
    /// More shapes: `{name = "acme-key", regex = 'acme_[0-9a-f]{32}'}`. The whole match is
    /// replaced, or only its group named `secret` when it has one
    /// (`'PIN (?P<secret>\d{4,})'`); `name` (letters, digits, `-` and `_`) is what the marker says.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<RedactPattern>,
    /// Field names (any depth, any case) whose values are replaced whole, whatever they
    /// hold: `["session_cookie", "tool_response"]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

/// One `[redact] patterns` entry.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedactPattern {
    /// The kind the marker names: `[redacted NAME]`.
    pub name: String,
    /// What it matches (Rust regex syntax).
    pub regex: String,
}

impl RedactPolicy {
    /// The redactor of this policy: the built-in shapes and these.
    pub(crate) fn redactor(&self) -> crate::core::redact::Redactor {
        crate::core::redact::Redactor::new(
            self.patterns
                .iter()
                .map(|p| (p.name.as_str(), p.regex.as_str())),
            self.fields.iter().map(String::as_str),
        )
    }
}

/// `[permits.KEY]`: a bulkhead. Fields merge across matching globs, the exact key last.
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PermitPolicy {
    /// How many leases of the key may be held at once (0: none is ever granted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    /// How long a lease lasts unless renewed; a holder that dies frees its slot after it
    /// [default: 60s].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<Dur>,
}

/// `[budget.KEY]`: a retry budget. Each failure costs a token, each success gives back
/// `token_ratio`; retries go ahead only while more than half of `max_tokens` are left.
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetPolicy {
    /// The tokens of a full budget, 1 to 1000 [default: 10].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<f64>,
    /// What a success gives back, in thousandths at most [default: 0.1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_ratio: Option<f64>,
}

/// `[voice]`: where `triage hook` stays silent and how far back SessionStart looks.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct VoicePolicy {
    /// The families of failures that are the agent's normal work (a red test, a compile
    /// error, a lint complaint, a search with no match, a dependency conflict, a mistyped
    /// command): `triage hook` records nothing that counts for them, charges no breaker and
    /// gives no retry or stop advice. Of `tests`, `build`, `checks`, `search`, `dependencies`,
    /// `usage`; remove one to have triage speak on it (`[]`: every failure is trouble).
    #[serde(deserialize_with = "work_families")]
    pub work: Vec<Family>,
    /// How far back SessionStart looks for unresolved trouble of earlier sessions; older
    /// records stay in the log and in `triage report` but are no longer named.
    pub session_start_window: Dur,
}

impl Default for VoicePolicy {
    fn default() -> Self {
        VoicePolicy {
            work: Family::ALL
                .iter()
                .copied()
                .filter(|f| *f != Family::Other)
                .collect(),
            session_start_window: Dur::secs(86_400),
        }
    }
}

/// `[voice] work`: names of the families that can be work, each at most once.
fn work_families<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Family>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    let valid = || {
        Family::ALL
            .iter()
            .filter(|f| **f != Family::Other)
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    for name in names {
        match name.parse::<Family>() {
            Ok(f) if f != Family::Other => {
                if !out.contains(&f) {
                    out.push(f);
                }
            }
            _ => {
                return Err(de::Error::custom(format!(
                    "`{name}` is not a family that can be work; write any of {}",
                    valid()
                )))
            }
        }
    }
    Ok(out)
}

impl VoicePolicy {
    /// Whether failures of `family` are treated as work.
    pub fn is_work(&self, family: Family) -> bool {
        family != Family::Other && self.work.contains(&family)
    }
}

/// `[stdin]`: how long a writer that keeps its end of the pipe open, sending a partial value
/// or nothing, may keep a call waiting; then the call goes on with what arrived, with a
/// warning (SPEC §6). A file or `/dev/null` on stdin is never waited for.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StdinPolicy {
    /// `triage hook` and every `--hook` form: how long stdin may keep the call waiting, all
    /// its silences together. A payload not complete by then is answered with nothing (exit
    /// 0). A small part of the hook's budget (its lock waits share 1 s).
    pub hook_timeout: Dur,
    /// Every other command that reads stdin (`classify`, `record-error`, `check-output`,
    /// `state-write`, `run`, ...): the same, for a writer in a pipeline. Unset (the default),
    /// they read to the end of input like any filter, so `make 2>&1 | triage record-error`
    /// never cuts a slow build short (nor kills it with SIGPIPE); set it where a writer that
    /// never closes the pipe must not keep a script waiting.
    pub timeout: Option<Dur>,
}

impl Default for StdinPolicy {
    fn default() -> Self {
        StdinPolicy {
            hook_timeout: Dur::millis(500),
            timeout: None,
        }
    }
}

/// Default connect timeout: a local or same-zone Redis answers in well under a millisecond;
/// tens of milliseconds are room for a loaded host without making a hook wait.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(50);

/// Default timeout of one command: on a 2-core host under heavy CPU load (load average 14) the
/// permit and budget scripts on a loopback Redis answered within 141 ms at worst, and one call
/// in 200 to 300 took longer than 50 ms; 250 ms leaves that worst case room while a Redis that
/// hangs still costs a hook one quarter second (docs/fleet.md).
pub const COMMAND_TIMEOUT: Duration = Duration::from_millis(250);

/// Default cap on the error log stream's length (approximate, as `XADD MAXLEN ~`).
pub const LOG_MAX_LEN: u64 = 1_000_000;

/// `[store]`: the local files (the default), or a Redis (or Valkey) shared by a fleet of hosts
/// (`TRIAGE_STORE` overrides `url`).
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StorePolicy {
    /// `redis://[user:password@]host[:port][/db]` or `rediss://...`; unset: the local files.
    /// The password may instead come from `TRIAGE_REDIS_PASSWORD`.
    pub url: Option<String>,
    /// The prefix of this project's keys (several projects can share one Redis); default: the
    /// project folder's name.
    pub namespace: Option<String>,
    /// How long connecting may take before the call uses the local files.
    pub connect_timeout: Dur,
    /// How long one command may take before the call uses the local files.
    pub command_timeout: Dur,
    /// The error log stream's length cap (approximate; `0` for none): older entries are
    /// trimmed as new ones come.
    pub log_max_len: u64,
}

impl Default for StorePolicy {
    fn default() -> Self {
        StorePolicy {
            url: None,
            namespace: None,
            connect_timeout: Dur(CONNECT_TIMEOUT),
            command_timeout: Dur(COMMAND_TIMEOUT),
            log_max_len: LOG_MAX_LEN,
        }
    }
}

/// `[run]`: what `triage run` and a phase's items do with the processes a command leaves
/// running when it exits, and how many items of a phase run at once.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RunPolicy {
    /// How long what a command started may go on running in its process group once the
    /// command itself exited (a `&` it did not wait for); then it gets SIGTERM, and SIGKILL
    /// this long after. The attempt's record says what was ended. A process meant to outlive
    /// the command must leave its group (`setsid`).
    pub orphan_grace: Dur,
    /// How many items of a phase run at once when neither `phase run --jobs` nor the plan's
    /// `concurrency` says. Unset: four per CPU (the items are agents, mostly waiting on I/O).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<std::num::NonZeroU32>,
}

impl Default for RunPolicy {
    fn default() -> Self {
        RunPolicy {
            orphan_grace: Dur::millis(100),
            jobs: None,
        }
    }
}

/// `[phase]`: the decision a phase stops for: its default, how long it waits for a person,
/// and whether `phase run` applies it by itself.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PhaseDecisionPolicy {
    /// What is done when nobody answers by the deadline (`phase wait` applies it as
    /// `phase decide` would): `proceed_with_partial` (go on without the failed items, the
    /// circuit-breaker default), `proceed_without` (the same), `retry`, `abort_phase`,
    /// `abort_workflow`, or `wait_for_user` (nothing is applied: the phase waits for a person).
    pub default_action: DefaultAction,
    /// How long a stopped phase waits for a person before its default applies (the
    /// user-response timeout, 5 minutes).
    pub decision_timeout: Dur,
    /// When set, `phase run` and `phase resume` wait this long themselves for a decision
    /// (from `phase decide` in another terminal), then apply the default. Unset: they end at
    /// once with exit 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_proceed_after: Option<Dur>,
}

impl Default for PhaseDecisionPolicy {
    fn default() -> Self {
        PhaseDecisionPolicy {
            default_action: DefaultAction::ProceedWithPartial,
            decision_timeout: Dur::secs(300),
            auto_proceed_after: None,
        }
    }
}

/// `[phase] default_action`: seed 002's words and `phase decide`'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DefaultAction {
    /// Go on with what completed (the circuit-breaker default).
    ProceedWithPartial,
    /// The same, in `phase decide`'s word.
    ProceedWithout,
    /// Run the failed items again.
    Retry,
    /// Abort the phase.
    AbortPhase,
    /// Abort the workflow.
    AbortWorkflow,
    /// Apply nothing: wait for a person (never proceed by default).
    WaitForUser,
}

impl DefaultAction {
    /// The word, as in the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            DefaultAction::ProceedWithPartial => "proceed_with_partial",
            DefaultAction::ProceedWithout => "proceed_without",
            DefaultAction::Retry => "retry",
            DefaultAction::AbortPhase => "abort_phase",
            DefaultAction::AbortWorkflow => "abort_workflow",
            DefaultAction::WaitForUser => "wait_for_user",
        }
    }

    /// The word `phase decide --choice` takes for it; `None` for `wait_for_user`.
    pub fn choice_word(self) -> Option<&'static str> {
        match self {
            DefaultAction::ProceedWithPartial | DefaultAction::ProceedWithout => {
                Some("proceed_without")
            }
            DefaultAction::Retry => Some("retry"),
            DefaultAction::AbortPhase => Some("abort_phase"),
            DefaultAction::AbortWorkflow => Some("abort_workflow"),
            DefaultAction::WaitForUser => None,
        }
    }
}

/// `[saga]`: how compensations run.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SagaPolicy {
    /// How long one compensation may run before it gets SIGTERM (then SIGKILL); `0s` for no
    /// limit.
    pub compensation_timeout: Dur,
}

impl Default for SagaPolicy {
    fn default() -> Self {
        SagaPolicy {
            compensation_timeout: Dur::secs(600),
        }
    }
}

/// `[retry]`: a fixed schedule, or exponential backoff.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RetryPolicy {
    /// Wait before retry 1, retry 2, …
    pub schedule: Vec<Dur>,
    /// Attempts in all, the first included; then escalate.
    pub max_attempts: u32,
    /// `exponential` replaces the schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
    /// First delay of exponential backoff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial: Option<Dur>,
    /// Growth of exponential backoff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<f64>,
    /// Cap of exponential backoff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_delay: Option<Dur>,
    /// Jitter of exponential backoff.
    pub jitter: Jitter,
    /// Per-kind overrides.
    pub kinds: BTreeMap<Kind, KindRetry>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            schedule: vec![Dur::secs(30), Dur::secs(120)],
            max_attempts: 3,
            backoff: None,
            initial: None,
            multiplier: None,
            max_delay: None,
            jitter: Jitter::None,
            kinds: BTreeMap::from([(
                Kind::RateLimited,
                KindRetry {
                    delay: Some(Dur::secs(5)),
                    ..KindRetry::default()
                },
            )]),
        }
    }
}

/// The backoff family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Backoff {
    /// `initial × multiplier^(attempt-1)`, capped by `max_delay`.
    Exponential,
}

/// Jitter modes (the AWS formulas).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Jitter {
    /// The computed delay exactly.
    #[default]
    None,
    /// Uniform in 0..delay.
    Full,
    /// delay/2 + uniform in 0..delay/2.
    Equal,
    /// min(cap, uniform in initial..previous×3).
    Decorrelated,
}

/// `[retry.kinds.KIND]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KindRetry {
    /// Wait before retrying this kind (when the server does not say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<Dur>,
    /// Attempts in all for this kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Whether this kind is retried at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

/// `[breaker]`: defaults for every key, and sub-tables per key or glob.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BreakerSection {
    /// The fields set directly in `[breaker]`.
    #[serde(flatten)]
    pub defaults: BreakerOverrides,
    /// `[breaker."KEY-OR-GLOB"]` tables.
    #[serde(flatten)]
    pub keys: BTreeMap<String, BreakerOverrides>,
    /// `upstream`: the key of the one breaker for the API itself (429/529/overload from any
    /// agent type, and StopFailure); `None`: [`DEFAULT_UPSTREAM`]; `""`: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
}

/// The API's breaker unless `[breaker] upstream` names another.
pub const DEFAULT_UPSTREAM: &str = "api";

/// What `[breaker] upstream` must be.
pub const UPSTREAM_PROBLEM: &str = "breaker.upstream must be a string: the key of the API's breaker (default \"api\"; \"\" turns it off)";

impl BreakerSection {
    /// The key of the API's breaker, `None` when the policy turns it off.
    pub fn upstream_key(&self) -> Option<&str> {
        match self.upstream.as_deref() {
            None => Some(DEFAULT_UPSTREAM),
            Some(k) if k.trim().is_empty() => None,
            Some(k) => Some(k),
        }
    }
}

/// Seed 002's `failure_definition: validation_fails_3x`: a call whose output is rejected this
/// many times is one breaker failure (`[breaker] validation_failures`).
pub const DEFAULT_VALIDATION_FAILURES: u32 = 3;

/// Breaker fields as written in the policy: each optional, merged over the defaults.
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BreakerOverrides {
    /// Consecutive failures that open it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<u32>,
    /// How long it stays open before a probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<Dur>,
    /// Probes granted while half-open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_open_probes: Option<u32>,
    /// Probe successes that close it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<u32>,
    /// `global` or `session`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// Failure ratio (0..1) that trips it once `minimum_calls` are in the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_rate: Option<f64>,
    /// Count window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_size: Option<u32>,
    /// Time window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<Dur>,
    /// Calls needed in the window before the rate counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_calls: Option<u32>,
    /// Clears closed-state counts this often.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<Dur>,
    /// Growth of the open period after each failed probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cooldown_multiplier: Option<f64>,
    /// Cap of the open period.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cooldown: Option<Dur>,
    /// How long a probe permit lasts (default: the cooldown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_ttl: Option<Dur>,
    /// A success slower than this counts as a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_call_threshold: Option<Dur>,
    /// How many times the output of one call is rejected (the stop hooks' loop guard) before
    /// the agent is let go and the call counts as one breaker failure: by default three
    /// validation failures make one failure. 1 or more; an agent's `output.max_rejections`
    /// wins for that agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation_failures: Option<u32>,
}

/// The breaker settings for one key, every field decided.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BreakerSettings {
    /// Consecutive failures that open it.
    pub failure_threshold: u32,
    /// Open period before a probe.
    pub cooldown: Dur,
    /// Probes granted while half-open.
    pub half_open_probes: u32,
    /// Probe successes that close it.
    pub success_threshold: u32,
    /// `global` or `session`.
    pub scope: Scope,
    /// Failure ratio that trips it, if set.
    pub failure_rate: Option<f64>,
    /// Count window, if set.
    pub window_size: Option<u32>,
    /// Time window, if set.
    pub window: Option<Dur>,
    /// Calls needed in the window before the rate counts.
    pub minimum_calls: u32,
    /// Closed-state counts are cleared this often, if set.
    pub interval: Option<Dur>,
    /// Growth of the open period after a failed probe.
    pub cooldown_multiplier: f64,
    /// Cap of the open period.
    pub max_cooldown: Option<Dur>,
    /// Lease of a probe permit.
    pub probe_ttl: Dur,
    /// A success slower than this counts as a failure, if set.
    pub slow_call_threshold: Option<Dur>,
    /// Rejections of one call's output that make one breaker failure (seed 002's
    /// `validation_fails_3x`).
    pub validation_failures: u32,
}

/// Whether breaker keys are shared across sessions.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// One breaker per key for the whole project.
    #[default]
    Global,
    /// One breaker per key and session.
    Session,
}

/// `[thresholds]`.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// Failures in one session that stop it.
    pub session_failures: u32,
    /// Failed share of a phase's agents above which it stops.
    pub phase_failure_ratio: f64,
    /// Failing agents in one workflow beyond which it pauses.
    pub cascade_agents: u32,
    /// Unresolved failures of one agent in one named workflow at which to warn that
    /// the workflow should be aborted ("same agent fails 3+ times"); in a phase its retries
    /// stop. 0 turns it off.
    pub agent_failures: u32,
    /// Openings of one breaker without a success in between at which to warn that the
    /// workflow should be aborted ("circuit breaker opens twice"); a phase stops.
    /// 0 turns it off.
    pub breaker_opens: u32,
    /// Whether `triage hook`'s records of tools no breaker guards (`Bash`, `Read`, …) count
    /// toward these thresholds. Off by default: a `grep` that finds nothing is ordinary work,
    /// not a sign that the workflow is unstable.
    pub count_unguarded_tools: bool,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            session_failures: 5,
            phase_failure_ratio: 0.5,
            cascade_agents: 2,
            agent_failures: 3,
            breaker_opens: 2,
            count_unguarded_tools: false,
        }
    }
}

/// `[phases.N]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhasePolicy {
    /// A readable name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The phase's timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Agents in the fan-out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u32>,
}

/// `[agents.NAME]`, every field optional (merged across matching globs).
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentPolicy {
    /// `critical` (out of retries: escalate) or `optional` (out of retries: go on without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub criticality: Option<Criticality>,
    /// The agent's timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// True: never retried automatically (a failure asks the user).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<bool>,
    /// The breaker key of each run of this agent, a template over `{agent}`, `{task_id}`,
    /// `{phase}`, `{session}` and `{workflow}` (`"{agent}:{task_id}"`: one breaker per work
    /// item, so failing chapters never stop a healthy one); default: the agent's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker_key: Option<String>,
    /// `check-output` rules.
    #[serde(default, skip_serializing_if = "OutputRules::is_empty")]
    pub output: OutputRules,
}

/// `[agents.NAME.output]`: what a good output of this agent looks like.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputRules {
    /// Fewest characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_chars: Option<u64>,
    /// Regexes that must all match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_all: Option<Vec<String>>,
    /// Regexes of which one must match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_any: Option<Vec<String>>,
    /// Regexes that must not match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forbid: Option<Vec<String>>,
    /// The expected format.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<OutputFormat>,
    /// Dotted paths that must exist (json/yaml).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_keys: Option<Vec<String>>,
    /// jq filters that must yield true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jq: Option<Vec<String>>,
    /// Globs, relative to the project, that must name non-empty files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_exist: Option<Vec<String>>,
    /// Stop-hook blocks before the agent is let go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rejections: Option<u32>,
    /// Fewest tool calls in the agent's transcript (for agents that must do work: one that
    /// reports finished work without a tool call did none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_tool_uses: Option<u32>,
}

impl OutputRules {
    fn is_empty(&self) -> bool {
        self == &OutputRules::default()
    }
}

/// The format an output must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// A JSON value.
    Json,
    /// A YAML document.
    Yaml,
    /// Markdown text.
    Markdown,
    /// Any text.
    Text,
}

/// `[classify]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifySection {
    /// `[[classify.rules]]`, tried in order before the built-in rules.
    pub rules: Vec<ClassifyRule>,
}

/// One `[[classify.rules]]` entry.
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassifyRule {
    /// Shown as `config:NAME` in `matched_rule`.
    pub name: String,
    /// A regex matched against the error text.
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// A jq predicate on the input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jq: Option<String>,
    /// The kind it sets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    /// Whether it is retryable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Its tier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// Its severity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggestions: Option<Vec<String>>,
    /// A one-line explanation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Everything decided about one agent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentSettings {
    /// An agent the policy does not name is critical.
    pub criticality: Criticality,
    /// Its timeout, if any.
    pub timeout: Option<Dur>,
    /// Never retried automatically when true.
    pub side_effects: bool,
    /// Its breaker key template, if it has one.
    pub breaker_key: Option<String>,
    /// Its output rules, merged.
    pub output: OutputRules,
}

/// The values a `breaker_key` template may name.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyVars<'a> {
    /// `{agent}`
    pub agent: &'a str,
    /// `{task_id}`
    pub task_id: Option<&'a str>,
    /// `{phase}`
    pub phase: Option<&'a str>,
    /// `{session}`
    pub session: Option<&'a str>,
    /// `{workflow}`
    pub workflow: Option<&'a str>,
}

/// Expands a `breaker_key` template. `Err` names a placeholder that is unknown or has no
/// value here (the caller then keys the breaker by the agent, with a warning).
pub fn expand_key(template: &str, v: &KeyVars) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("`{template}` has a `{{` without its `}}`"))?;
        let name = &after[..close];
        let value = match name {
            "agent" => Some(v.agent),
            "task_id" => v.task_id,
            "phase" => v.phase,
            "session" => v.session,
            "workflow" => v.workflow,
            _ => {
                return Err(format!(
                    "`{{{name}}}` in `{template}` is not one of {{agent}}, {{task_id}}, {{phase}}, {{session}}, {{workflow}}"
                ))
            }
        };
        let value = value
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("`{template}` needs {{{name}}}, and none was given"))?;
        out.push_str(value);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Resolution.

macro_rules! merge_fields {
    ($into:expr, $from:expr, $($f:ident),+) => {
        $( if $from.$f.is_some() { $into.$f = $from.$f.clone(); } )+
    };
}

impl Policy {
    /// The settings of breaker `key`: the built-in defaults, `[breaker]`, then matching
    /// `[breaker."GLOB"]` tables, least specific first.
    pub fn breaker_for(&self, key: &str) -> BreakerSettings {
        let mut o = self.breaker.defaults.clone();
        for pat in glob::matching(self.breaker.keys.keys(), key) {
            if let Some(over) = self.breaker.keys.get(pat) {
                merge_breaker(&mut o, over);
            }
        }
        let cooldown = o.cooldown.unwrap_or(Dur::secs(60));
        BreakerSettings {
            failure_threshold: o.failure_threshold.unwrap_or(2),
            cooldown,
            half_open_probes: o.half_open_probes.unwrap_or(1),
            success_threshold: o.success_threshold.unwrap_or(1),
            scope: o.scope.unwrap_or_default(),
            failure_rate: o.failure_rate,
            window_size: o.window_size,
            window: o.window,
            minimum_calls: o.minimum_calls.unwrap_or(1),
            interval: o.interval,
            cooldown_multiplier: o.cooldown_multiplier.unwrap_or(1.0),
            max_cooldown: o.max_cooldown,
            probe_ttl: o.probe_ttl.unwrap_or(cooldown),
            slow_call_threshold: o.slow_call_threshold,
            validation_failures: o.validation_failures.unwrap_or(DEFAULT_VALIDATION_FAILURES),
        }
    }

    /// The policy as `config show` prints it: every default decided, `null` where an
    /// optional rule is off.
    pub fn effective(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        let mut defaults = BreakerSection {
            defaults: self.breaker.defaults.clone(),
            keys: BTreeMap::new(),
            upstream: None,
        };
        defaults.keys.clear();
        let resolved = Policy {
            breaker: defaults,
            ..Policy::default()
        }
        .breaker_for("");
        if let (Some(obj), Ok(serde_json::Value::Object(b))) = (
            v.get_mut("breaker").and_then(|b| b.as_object_mut()),
            serde_json::to_value(resolved),
        ) {
            for (k, val) in b {
                obj.insert(k, val);
            }
        }
        v
    }

    /// The permit limits of `key`, merged across matching `[permits.*]` entries (the exact key
    /// last); `None` when no entry matches or none sets `max`.
    pub fn permits_for(&self, key: &str) -> Option<crate::core::admission::PermitLimits> {
        let mut merged = PermitPolicy::default();
        for pat in glob::matching(self.permits.keys(), key) {
            if let Some(p) = self.permits.get(pat) {
                merge_fields!(merged, p, max, lease);
            }
        }
        Some(crate::core::admission::PermitLimits {
            max: merged.max?,
            lease_ms: merged.lease.map_or(60_000, |d| d.as_millis().max(1)),
        })
    }

    /// The retry budget of `key`, merged across matching `[budget.*]` entries; `None` when
    /// no entry matches.
    pub fn budget_for(&self, key: &str) -> Option<crate::core::admission::BudgetLimits> {
        let mut merged = BudgetPolicy::default();
        let mut any = false;
        for pat in glob::matching(self.budget.keys(), key) {
            if let Some(b) = self.budget.get(pat) {
                any = true;
                merge_fields!(merged, b, max_tokens, token_ratio);
            }
        }
        any.then(|| {
            crate::core::admission::BudgetLimits::new(
                merged.max_tokens.unwrap_or(10.0),
                merged.token_ratio.unwrap_or(0.1),
            )
        })
    }

    /// Everything the policy says of agent `name`, merged across matching `[agents.*]`.
    pub fn agent(&self, name: &str) -> AgentSettings {
        let mut merged = AgentPolicy::default();
        for pat in glob::matching(self.agents.keys(), name) {
            if let Some(a) = self.agents.get(pat) {
                merge_fields!(merged, a, criticality, timeout, side_effects, breaker_key);
                let (into, from) = (&mut merged.output, &a.output);
                merge_fields!(
                    into,
                    from,
                    min_chars,
                    require_all,
                    require_any,
                    forbid,
                    format,
                    required_keys,
                    jq,
                    files_exist,
                    max_rejections,
                    min_tool_uses
                );
            }
        }
        AgentSettings {
            criticality: merged.criticality.unwrap_or(Criticality::Critical),
            timeout: merged.timeout,
            side_effects: merged.side_effects.unwrap_or(false),
            breaker_key: merged.breaker_key,
            output: merged.output,
        }
    }

    /// The phase named by number or name, if the policy has it.
    pub fn phase(&self, id: &str) -> Option<&PhasePolicy> {
        self.phases
            .get(id)
            .or_else(|| self.phases.values().find(|p| p.name.as_deref() == Some(id)))
    }
}

fn merge_breaker(into: &mut BreakerOverrides, from: &BreakerOverrides) {
    merge_fields!(
        into,
        from,
        failure_threshold,
        cooldown,
        half_open_probes,
        success_threshold,
        scope,
        failure_rate,
        window_size,
        window,
        minimum_calls,
        interval,
        cooldown_multiplier,
        max_cooldown,
        probe_ttl,
        slow_call_threshold,
        validation_failures
    );
}

// ---------------------------------------------------------------------------------------------
// `[breaker]` mixes fields and per-key tables, so it is read by hand.

const BREAKER_FIELDS: &[&str] = &[
    "failure_threshold",
    "cooldown",
    "half_open_probes",
    "success_threshold",
    "scope",
    "failure_rate",
    "window_size",
    "window",
    "minimum_calls",
    "interval",
    "cooldown_multiplier",
    "max_cooldown",
    "probe_ttl",
    "slow_call_threshold",
    "validation_failures",
];

impl<'de> Deserialize<'de> for BreakerSection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BreakerSection;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a [breaker] table")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BreakerSection, A::Error> {
                let mut fields = toml::Table::new();
                let mut keys = BTreeMap::new();
                let mut upstream = None;
                while let Some(k) = map.next_key::<String>()? {
                    let v: toml::Value = map.next_value()?;
                    if k == "upstream" {
                        match v {
                            toml::Value::String(u) => upstream = Some(u),
                            _ => return Err(de::Error::custom(UPSTREAM_PROBLEM)),
                        }
                        continue;
                    }
                    match v {
                        toml::Value::Table(t) if !BREAKER_FIELDS.contains(&k.as_str()) => {
                            let o = BreakerOverrides::deserialize(t).map_err(|e| {
                                de::Error::custom(format!("in [breaker.\"{k}\"]: {}", e.message()))
                            })?;
                            keys.insert(k, o);
                        }
                        v => {
                            if !BREAKER_FIELDS.contains(&k.as_str()) {
                                return Err(de::Error::unknown_field(&k, BREAKER_FIELDS));
                            }
                            fields.insert(k, v);
                        }
                    }
                }
                let defaults = BreakerOverrides::deserialize(fields)
                    .map_err(|e| de::Error::custom(format!("in [breaker]: {}", e.message())))?;
                Ok(BreakerSection {
                    defaults,
                    keys,
                    upstream,
                })
            }
        }
        d.deserialize_map(V)
    }
}

// ---------------------------------------------------------------------------------------------
// Loading and checking (the lenient reader is in `load`, the value checks in `check`).

/// One problem in a policy file, with where it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicyProblem {
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, in characters, when known.
    pub column: Option<usize>,
    /// Where in the text, for file order.
    #[serde(skip)]
    pub offset: usize,
    /// What is wrong, and what to write instead.
    pub message: String,
}

impl fmt::Display for PolicyProblem {
    /// `LINE:COL: message`, so that `FILE:{problem}` is the form editors and CI annotate.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{l}:{c}: {}", self.message),
            (Some(l), None) => write!(f, "{l}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

/// Parses a policy from TOML text: the policy, or the first problem (by place in the file).
pub fn parse(text: &str) -> Result<Policy, PolicyProblem> {
    load(text).map_err(|mut p| p.remove(0))
}

/// Deserializes a policy text already known to load without a problem (the policy cache
/// vouches for it): the policy [`load_lenient`] makes of it, without the checks (every regex
/// parsed, every jq filter compiled), or `None` when the text does not deserialize as it is.
pub fn parse_trusted(text: &str) -> Option<Policy> {
    toml::from_str(text).ok()
}

/// Why `pattern` is not a regex, in the words `regex::Regex::new` would use, or `None`.
pub fn regex_error(pattern: &str, depth: Depth) -> Option<String> {
    let message = match depth {
        Depth::Syntax => regex_syntax::Parser::new()
            .parse(pattern)
            .err()
            .map(|e| e.to_string()),
        Depth::Compile => regex::Regex::new(pattern).err().map(|e| e.to_string()),
    }?;
    let last = message.lines().last().unwrap_or_default().trim();
    Some(last.strip_prefix("error: ").unwrap_or(last).to_string())
}

/// Parses and checks (regexes by their syntax, see [`Depth`]): the policy, or every problem
/// found, in file order.
pub fn load(text: &str) -> Result<Policy, Vec<PolicyProblem>> {
    load_checked(text, Depth::Syntax)
}

/// Parses and checks to `depth`: the policy, or every problem found, in file order.
pub fn load_checked(text: &str, depth: Depth) -> Result<Policy, Vec<PolicyProblem>> {
    let loaded = load_lenient(text, depth);
    if loaded.problems.is_empty() {
        Ok(loaded.policy)
    } else {
        Err(loaded.problems)
    }
}

/// From serde's "unknown field `x`, expected one of `a`, `b`": the field and the choices.
fn unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.split("unknown field `").nth(1)?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((field.to_string(), expected))
}

/// The choice nearest to `word` by edit distance, if it is near enough to be a typo. Two
/// swapped letters are one edit (Damerau–Levenshtein), the commonest typo of fast typists.
pub fn closest<'a>(word: &str, choices: &'a [String]) -> Option<&'a str> {
    choices
        .iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the policy cache's fast path makes of a text with no problem is what a checked
    /// load makes of it: the shipped policies, the SPEC's, and one with every kind of section.
    #[test]
    fn a_trusted_text_deserializes_to_the_checked_load() {
        let every = r#"
[retry]
max_attempts = 4
[breaker]
failure_threshold = 3
[breaker."mcp:*"]
failure_threshold = 9
[thresholds]
phase_failure_ratio = 0.4
[agents.researcher]
criticality = "optional"
[agents.researcher.output]
min_chars = 10
require_all = ['\[\d+\]']
forbid = ['(?i)lorem']
[[classify.rules]]
name = "x"
match = 'corpus .* missing'
kind = "corpus_error"
"#;
        for text in [
            include_str!("../../tests/fixtures/spec-policy.toml"),
            include_str!("../../hooks/triage.example.toml"),
            include_str!("../../hooks/triage.starter.toml"),
            include_str!("../../bench/inputs/policy.toml"),
            include_str!("../../examples/phase2/policy.toml"),
            every,
        ] {
            let checked = load_lenient(text, Depth::Syntax);
            assert!(checked.problems.is_empty(), "{:?}", checked.problems);
            let trusted = parse_trusted(text).expect("deserializes");
            assert_eq!(
                serde_json::to_value(&trusted).unwrap(),
                serde_json::to_value(&checked.policy).unwrap()
            );
        }
    }

    #[test]
    fn breaker_key_templates_expand_or_name_what_is_missing() {
        let v = KeyVars {
            agent: "notebook-generator",
            task_id: Some("ch4"),
            phase: Some("5"),
            ..KeyVars::default()
        };
        assert_eq!(
            expand_key("{agent}:{task_id}", &v).as_deref(),
            Ok("notebook-generator:ch4")
        );
        assert_eq!(expand_key("p{phase}/x", &v).as_deref(), Ok("p5/x"));
        let e = expand_key("{agent}:{workflow}", &v).unwrap_err();
        assert!(e.contains("needs {workflow}"), "{e}");
        let e = expand_key("{agent}:{chapter}", &v).unwrap_err();
        assert!(e.contains("`{chapter}`"), "{e}");
        assert!(expand_key("{agent", &v).is_err());
    }

    #[test]
    fn defaults_are_the_seeds() {
        let p = Policy::default();
        assert_eq!(p.retry.schedule, vec![Dur::secs(30), Dur::secs(120)]);
        assert_eq!(p.retry.max_attempts, 3);
        let b = p.breaker_for("anything");
        assert_eq!(
            (b.failure_threshold, b.cooldown, b.half_open_probes),
            (2, Dur::secs(60), 1)
        );
        assert_eq!(b.probe_ttl, Dur::secs(60));
        assert_eq!(p.thresholds.session_failures, 5);
        assert_eq!(p.thresholds.phase_failure_ratio, 0.5);
        assert_eq!(p.thresholds.cascade_agents, 2);
        assert_eq!(p.agent("x").criticality, Criticality::Critical);
        let shown = p.effective();
        assert_eq!(shown["breaker"]["failure_threshold"], 2);
        assert_eq!(shown["breaker"]["cooldown"], "1m");
        assert_eq!(shown["breaker"]["failure_rate"], serde_json::Value::Null);
    }

    #[test]
    fn the_spec_example_parses() {
        let text = include_str!("../../tests/fixtures/spec-policy.toml");
        let p = load(text).expect("spec example");
        assert_eq!(
            p.breaker_for("statistician-consultant").failure_threshold,
            3
        );
        assert_eq!(p.breaker_for("researcher").failure_threshold, 2);
        assert_eq!(p.agent("researcher").output.min_chars, Some(500));
        assert_eq!(p.classify.rules[0].kind, Some(Kind::CorpusError));
        assert_eq!(p.phase("2").and_then(|ph| ph.size), Some(3));
        assert_eq!(
            p.phase("Subsection planning").and_then(|ph| ph.size),
            Some(3)
        );
    }

    #[test]
    fn globs_merge_least_specific_first() {
        let p = parse(
            "[agents.\"*\"]\ncriticality = \"optional\"\ntimeout = \"1m\"\n\
             [agents.\"*-consultant\"]\ntimeout = \"5m\"\n\
             [agents.stats-consultant]\ncriticality = \"critical\"\n",
        )
        .expect("parse");
        let a = p.agent("stats-consultant");
        assert_eq!(
            (a.criticality, a.timeout),
            (Criticality::Critical, Some(Dur::secs(300)))
        );
        let b = p.agent("law-consultant");
        assert_eq!(
            (b.criticality, b.timeout),
            (Criticality::Optional, Some(Dur::secs(300)))
        );
        assert_eq!(p.agent("writer").timeout, Some(Dur::secs(60)));
    }

    #[test]
    fn unknown_keys_name_line_and_suggest() {
        let e = parse("[retry]\nmax_atempts = 3\n").expect_err("typo");
        assert_eq!(e.line, Some(2));
        assert!(
            e.message.contains("max_atempts") && e.message.contains("did you mean `max_attempts`"),
            "{e}"
        );
        let e = parse("\n[breaker]\nfailur_threshold = 3\n").expect_err("typo");
        assert_eq!(e.line, Some(3), "{e}");
        assert!(
            e.message.contains("did you mean `failure_threshold`"),
            "{e}"
        );
        let e = parse("[breaker.x]\ncooldwn = \"1s\"\n").expect_err("typo");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("did you mean `cooldown`"), "{e}");
        let e = parse("[retyr]\n").expect_err("typo");
        assert!(e.message.contains("did you mean `retry`"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let e = parse("[breaker]\ncooldown = \"soon\"\n").expect_err("bad");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("bad duration `soon`"), "{e}");
        let e = parse("[agents.a]\ncriticality = \"vital\"\n").expect_err("bad");
        assert_eq!(e.line, Some(2), "{e}");
    }

    #[test]
    fn regex_syntax_errors_read_as_the_compilers() {
        for bad in [
            "(unclosed",
            "a)",
            "[z-a]",
            "x{2,1}",
            r"\p{NoSuchClass}",
            "(?P<n>a)(?P<n>b)",
            "*a",
            r"\",
            "(?z)a",
        ] {
            let quick = regex_error(bad, Depth::Syntax);
            assert!(quick.is_some(), "{bad}");
            assert_eq!(quick, regex_error(bad, Depth::Compile), "{bad}");
        }
        for good in [r"(?i)\bverified\b", r"\d+\s*[µμ]?[A-Za-zΩ]{1,5}", "a{2}|b*"] {
            assert_eq!(regex_error(good, Depth::Syntax), None, "{good}");
            assert_eq!(regex_error(good, Depth::Compile), None, "{good}");
        }
        // Too big to build, yet well formed: only compiling finds it (`config check`).
        let huge = r"\w{1000}\w{1000}\w{1000}";
        assert_eq!(regex_error(huge, Depth::Syntax), None);
        assert!(regex_error(huge, Depth::Compile).is_some());
    }

    #[test]
    fn validation_finds_bad_regex_and_jq() {
        let text = "[agents.researcher.output]\nrequire_all = ['(unclosed']\njq = ['.a |']\n";
        let problems = load(text).expect_err("bad");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0]
            .message
            .contains("agents.researcher.output.require_all"));
        assert_eq!(problems[0].line, Some(2));
        assert!(problems[1].message.contains("agents.researcher.output.jq"));
        assert_eq!(problems[1].line, Some(3));
    }
}
