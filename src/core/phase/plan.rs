//! A phase plan: the work items of one phase and the phase's settings, read from TOML or
//! JSON, checked whole (every problem named, with its line), and laid over the policy so each
//! item runs with its own agent settings. Pure: handed text, never a file.

use crate::core::duration::Dur;
use crate::core::policy::{OutputRules, Policy};
use crate::core::vocab::Criticality;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::HashSet;

/// The phase's settings and its items (`[[items]]`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PhasePlan {
    /// The phase's name, for texts [default: the policy's `[phases.N] name`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Items running at once [default: the policy's `[run] jobs`, else four per CPU;
    /// `phase run --jobs` overrides it].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// The phase's whole budget (seed 000's per-phase timeout) [default: the policy's
    /// `[phases.N] timeout`, else none].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// False for a terminal phase: no item is retried (seed 000, Phase 0).
    #[serde(default = "yes")]
    pub retry: bool,
    /// False for a conditional phase that may be skipped when it fails (seed 004).
    #[serde(default = "yes")]
    pub mandatory: bool,
    /// Stop when more than this share of the items failed (seed 000: 0.5) [default: the
    /// policy's `thresholds.phase_failure_ratio`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_ratio: Option<f64>,
    /// What every item has unless it says otherwise (`[defaults]`): its fallback, deadline,
    /// idle timeout, permit and retry budget.
    #[serde(default, skip_serializing_if = "Limits::is_empty")]
    pub defaults: Limits,
    /// The work items.
    #[serde(default)]
    pub items: Vec<Item>,
}

/// What `triage run` gives a command beyond its attempts (`--fallback`, `--deadline`,
/// `--idle-timeout`, `--permit`, `--permit-wait`, `--budget`): an item's own, or the plan's
/// `[defaults]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Run by `sh -c` instead when the item's breaker is open: the item is degraded, not
    /// failed (seed 002's `action_when_open: proceed_without_section`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// The item's whole time, attempts and waits together; 0 for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Dur>,
    /// Stop an attempt as hung (`unresponsive`) when it writes nothing for this long; 0 for
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<Dur>,
    /// Hold a permit of this key (`[permits.KEY]`) while the item runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permit: Option<String>,
    /// How long to wait for the permit [default: [`PERMIT_WAIT`], never past the phase's
    /// budget].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permit_wait: Option<Dur>,
    /// The retry budget (`[budget.KEY]`) its failures charge and its successes credit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
}

/// How long an item waits for its permit unless the plan says: long enough for the items
/// ahead of it to end, not forever (a phase's budget cuts it shorter).
pub const PERMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

impl Limits {
    fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// `self`'s keys, else `defaults`' (each key on its own).
    pub fn or(&self, defaults: &Limits) -> Limits {
        Limits {
            fallback: self.fallback.clone().or_else(|| defaults.fallback.clone()),
            deadline: self.deadline.or(defaults.deadline),
            idle_timeout: self.idle_timeout.or(defaults.idle_timeout),
            permit: self.permit.clone().or_else(|| defaults.permit.clone()),
            permit_wait: self.permit_wait.or(defaults.permit_wait),
            budget: self.budget.clone().or_else(|| defaults.budget.clone()),
        }
    }
}

fn yes() -> bool {
    true
}

/// One work item: an agent's command.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// Unique in the plan; names its files and its task id.
    pub id: String,
    /// The agent it is (its policy, its breaker) [default: the id].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// An argv list, or a string run by `sh -c`.
    pub command: ItemCommand,
    /// Text given on its stdin (every attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// Each attempt's timeout [default: the agent's in the policy].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// `critical` or `optional` [default: the agent's in the policy, else critical].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criticality: Option<Criticality>,
    /// True: never retried automatically (seed 001).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<bool>,
    /// Checks of its stdout, the keys of `[agents.X.output]`; a rejected output fails it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputRules>,
    /// Its breaker's key, a template like the policy's `breaker_key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker_key: Option<String>,
    /// Run by `sh -c` instead when its breaker is open (degraded) [default: `[defaults]`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Its whole time, attempts and waits together [default: `[defaults]`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Dur>,
    /// Stopped as hung after writing nothing this long [default: `[defaults]`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<Dur>,
    /// The permit it holds while it runs [default: `[defaults]`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permit: Option<String>,
    /// How long it waits for its permit [default: `[defaults]`, else [`PERMIT_WAIT`]].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permit_wait: Option<Dur>,
    /// The retry budget it charges and credits [default: `[defaults]`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
}

/// A command: argv, or a shell string.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum ItemCommand {
    /// Program and arguments.
    Argv(Vec<String>),
    /// Run by `sh -c`.
    Shell(String),
}

impl ItemCommand {
    /// The argv to run.
    pub fn argv(&self) -> Vec<String> {
        match self {
            ItemCommand::Argv(v) => v.clone(),
            ItemCommand::Shell(s) => vec!["sh".into(), "-c".into(), s.clone()],
        }
    }
}

impl Item {
    /// The agent: `agent`, else the id.
    pub fn agent(&self) -> &str {
        self.agent.as_deref().unwrap_or(&self.id)
    }

    /// Its fallback, deadline, idle timeout, permit and budget: its own, else `defaults`'.
    pub fn limits(&self, defaults: &Limits) -> Limits {
        Limits {
            fallback: self.fallback.clone(),
            deadline: self.deadline,
            idle_timeout: self.idle_timeout,
            permit: self.permit.clone(),
            permit_wait: self.permit_wait,
            budget: self.budget.clone(),
        }
        .or(defaults)
    }
}

/// The format a plan is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// TOML.
    Toml,
    /// JSON.
    Json,
}

impl Format {
    /// By the file name's extension, else by the first character (`{` is JSON).
    pub fn guess(name: &str, text: &str) -> Format {
        if name.ends_with(".json") {
            Format::Json
        } else if name.ends_with(".toml") {
            Format::Toml
        } else if text.trim_start().starts_with('{') {
            Format::Json
        } else {
            Format::Toml
        }
    }
}

/// Reads and checks a plan. `Err`: every problem, each as `NAME:LINE:COL: message` (or
/// `NAME: message` when no place can be named).
pub fn parse(name: &str, text: &str, format: Format) -> Result<PhasePlan, Vec<String>> {
    let plan: PhasePlan = match format {
        Format::Toml => toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|s| place(text, s.start))
                .map_or(String::new(), |(l, c)| format!(":{l}:{c}"));
            vec![format!("{name}{at}: {}", e.message().trim())]
        })?,
        Format::Json => serde_json::from_str(text).map_err(|e| {
            vec![format!(
                "{name}:{}:{}: {}",
                e.line(),
                e.column(),
                strip_position(&e.to_string())
            )]
        })?,
    };
    let problems = check(&plan);
    if problems.is_empty() {
        Ok(plan)
    } else {
        let line = |needle: &str| {
            text.lines()
                .position(|l| l.contains(needle))
                .map_or(String::new(), |n| format!(":{}", n + 1))
        };
        Err(problems
            .into_iter()
            .map(|(needle, p)| format!("{name}{}: {p}", line(&needle)))
            .collect())
    }
}

/// serde_json's message without its own " at line L column C" (the place leads instead).
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Line and column (from 1) of a byte offset.
fn place(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, col)
}

/// What is wrong with a plan that parsed: each problem with a text to find its line by.
fn check(plan: &PhasePlan) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if plan.items.is_empty() {
        out.push((
            "items".into(),
            "the plan has no items; add at least one [[items]] with an id and a command".into(),
        ));
    }
    if plan.concurrency == Some(0) {
        out.push((
            "concurrency".into(),
            "concurrency must be at least 1 (leave it out for `--jobs`, `[run] jobs` or four per CPU)".into(),
        ));
    }
    if let Some(r) = plan.abort_ratio {
        if !(0.0..=1.0).contains(&r) || r.is_nan() {
            out.push((
                "abort_ratio".into(),
                format!("abort_ratio {r} is not a share between 0 and 1 (0.5: stop when more than half failed)"),
            ));
        }
    }
    if plan.timeout.is_some_and(|t| t.0.is_zero()) {
        out.push((
            "timeout".into(),
            "the phase timeout is zero; give a duration like \"20m\" or leave it out".into(),
        ));
    }
    limit_problems(&plan.defaults, "defaults", "[defaults]", false, &mut out);
    let mut seen = HashSet::new();
    for (n, item) in plan.items.iter().enumerate() {
        let at = format!("item {} (`{}`)", n + 1, item.id);
        let needle = format!("\"{}\"", item.id);
        if item.id.trim().is_empty() {
            out.push(("id".into(), format!("item {}: the id is empty", n + 1)));
        } else if item.id.chars().any(|c| c.is_control() || c == '/') || item.id.len() > 128 {
            out.push((
                needle.clone(),
                format!("{at}: an id names files: use letters, digits, `-`, `_` or `.`, no `/` or control characters, at most 128 bytes"),
            ));
        } else if !seen.insert(item.id.as_str()) {
            out.push((
                needle.clone(),
                format!("{at}: the id is used twice; every item needs its own"),
            ));
        }
        if item.agent.as_deref().is_some_and(|a| a.trim().is_empty()) {
            out.push((needle.clone(), format!("{at}: the agent is empty")));
        }
        let empty = match &item.command {
            ItemCommand::Argv(v) => v.first().is_none_or(|p| p.is_empty()),
            ItemCommand::Shell(s) => s.trim().is_empty(),
        };
        if empty {
            out.push((
                needle.clone(),
                format!("{at}: the command is empty; give an argv list or a shell string"),
            ));
        }
        if item.timeout.is_some_and(|t| t.0.is_zero()) {
            out.push((needle.clone(), format!("{at}: the timeout is zero")));
        }
        let own = Item {
            permit: item.permit.clone().or_else(|| plan.defaults.permit.clone()),
            ..item.clone()
        };
        limit_problems(
            &own.limits(&Limits::default()),
            &needle,
            &at,
            true,
            &mut out,
        );
    }
    out
}

/// What is wrong with an item's (or `[defaults]`') fallback, permit and budget (`item`: a
/// wait for a permit it does not name is wrong too).
fn limit_problems(l: &Limits, needle: &str, at: &str, item: bool, out: &mut Vec<(String, String)>) {
    if l.fallback.as_deref().is_some_and(|f| f.trim().is_empty()) {
        out.push((
            needle.into(),
            format!("{at}: the fallback is empty; give a shell command or leave it out"),
        ));
    }
    for (what, key) in [("permit", &l.permit), ("budget", &l.budget)] {
        if let Some(Err(why)) = key.as_deref().map(crate::core::admission::check_key) {
            out.push((needle.into(), format!("{at}: bad {what} key: {why}")));
        }
    }
    if item && l.permit_wait.is_some() && l.permit.is_none() {
        out.push((
            needle.into(),
            format!("{at}: permit_wait without a permit; name one with `permit = \"KEY\"`"),
        ));
    }
}

/// The permits and retry budgets the plan names that `policy` does not set, each with the
/// TOML that sets it (as `run --permit` and `run --budget` say).
pub fn unset_keys(plan: &PhasePlan, policy: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for item in &plan.items {
        let l = item.limits(&plan.defaults);
        if let Some(k) = l.permit.filter(|k| policy.permits_for(k).is_none()) {
            if seen.insert(("permit", k.clone())) {
                out.push(format!(
                    "item `{}`: permit `{k}`: the policy sets no permits for it; add `[permits.{k}] max = 8`",
                    item.id
                ));
            }
        }
        if let Some(k) = l.budget.filter(|k| policy.budget_for(k).is_none()) {
            if seen.insert(("budget", k.clone())) {
                out.push(format!(
                    "item `{}`: budget `{k}`: the policy sets no retry budget for it; add `[budget.{k}] max_tokens = 10`",
                    item.id
                ));
            }
        }
    }
    out
}

/// The policy an item runs under: the plan's settings for it laid over its agent's (exact
/// name, so they win over every glob), and no retries in a terminal phase.
///
/// Only the agent entries that name the item's agent (by name or glob) are copied: a plan of
/// 10,000 items must not copy the settings of every other agent into each item's policy.
pub fn item_policy(base: &Policy, plan: &PhasePlan, item: &Item) -> Policy {
    let mut p = without_agents(base);
    for pat in crate::core::glob::matching(base.agents.keys(), item.agent()) {
        if let Some(a) = base.agents.get(pat) {
            p.agents.insert(pat.to_string(), a.clone());
        }
    }
    overlay(&mut p, item);
    if !plan.retry {
        p.retry.max_attempts = 1;
        for k in p.retry.kinds.values_mut() {
            k.max_attempts = Some(1);
        }
    }
    p
}

/// `base` with no agents, cloned without copying them (every field named: a new one is
/// copied here, or the build says so).
fn without_agents(base: &Policy) -> Policy {
    let Policy {
        retry,
        breaker,
        thresholds,
        phases,
        agents: _,
        classify,
        run,
        phase,
        saga,
        store,
        stdin,
        voice,
        permits,
        budget,
        redact,
    } = base;
    Policy {
        retry: retry.clone(),
        breaker: breaker.clone(),
        thresholds: thresholds.clone(),
        phases: phases.clone(),
        agents: BTreeMap::new(),
        classify: classify.clone(),
        run: run.clone(),
        phase: phase.clone(),
        saga: saga.clone(),
        store: store.clone(),
        stdin: stdin.clone(),
        voice: voice.clone(),
        permits: permits.clone(),
        budget: budget.clone(),
        redact: redact.clone(),
    }
}

/// Whether `item` has side effects: its own `side_effects`, else its agent's in `base` (what
/// [`item_policy`] gives the item's run).
pub fn side_effects(base: &Policy, item: &Item) -> bool {
    item.side_effects
        .unwrap_or_else(|| base.agent(item.agent()).side_effects)
}

/// The policy the phase's texts are rendered with: every item's criticality and settings.
pub fn phase_policy(base: &Policy, plan: &PhasePlan) -> Policy {
    let mut p = base.clone();
    for item in &plan.items {
        overlay(&mut p, item);
    }
    p
}

/// The policy of a phase run: [`phase_policy`], and the phase's entry with the plan's name,
/// budget and size.
pub fn phase_settings(base: &Policy, plan: &PhasePlan, phase: &str) -> Policy {
    let mut p = phase_policy(base, plan);
    let entry = p.phases.entry(phase.to_string()).or_default();
    if plan.name.is_some() {
        entry.name = plan.name.clone();
    }
    if plan.timeout.is_some() {
        entry.timeout = plan.timeout;
    }
    entry.size = Some(u32::try_from(plan.items.len()).unwrap_or(u32::MAX));
    p
}

fn overlay(p: &mut Policy, item: &Item) {
    let sets = item.criticality.is_some()
        || item.side_effects.is_some()
        || item.breaker_key.is_some()
        || item.output.is_some()
        || item.timeout.is_some();
    if !sets {
        // No entry for an item that sets nothing: a plan of 10,000 such items would give the
        // policy 10,000 agents, each looked up by glob at every item's start.
        return;
    }
    let a = p.agents.entry(item.agent().to_string()).or_default();
    if let Some(c) = item.criticality {
        a.criticality = Some(c);
    }
    if let Some(s) = item.side_effects {
        a.side_effects = Some(s);
    }
    if let Some(k) = &item.breaker_key {
        a.breaker_key = Some(k.clone());
    }
    if let Some(o) = &item.output {
        a.output = o.clone();
    }
    if let Some(t) = item.timeout {
        a.timeout = Some(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "Subsection planning"
timeout = "20m"
abort_ratio = 0.5

[[items]]
id = "statistician"
agent = "statistician-consultant"
command = ["./consult.sh", "statistics"]
criticality = "critical"
timeout = "5m"

[[items]]
id = "mathematician"
command = "echo hi"
criticality = "optional"
[items.output]
min_chars = 2
"#;

    #[test]
    fn toml_and_json_read_the_same_plan() {
        let t = parse("p.toml", GOOD, Format::Toml).unwrap();
        assert_eq!(t.items.len(), 2);
        assert_eq!(t.items[1].agent(), "mathematician");
        assert_eq!(
            t.items[1].command.argv(),
            vec!["sh".to_string(), "-c".into(), "echo hi".into()]
        );
        assert!(t.retry && t.mandatory);
        let json = serde_json::to_string(&t).unwrap();
        let j = parse("-", &json, Format::guess("-", &json)).unwrap();
        assert_eq!(t, j);
    }

    #[test]
    fn every_problem_is_named_with_its_line() {
        let bad = "concurrency = 0\nabort_ratio = 1.5\n[[items]]\nid = \"a\"\ncommand = []\n[[items]]\nid = \"a\"\ncommand = \"x\"\n";
        let e = parse("p.toml", bad, Format::Toml).unwrap_err();
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(e[0].starts_with("p.toml:1: concurrency must be at least 1"));
        assert!(e[1].starts_with("p.toml:2: abort_ratio 1.5"));
        assert!(e[2].contains("the command is empty"));
        assert!(e[3].contains("used twice"));
        let unknown = parse(
            "p.toml",
            "[[items]]\nid = \"a\"\ncommand = \"x\"\nretries = 3\n",
            Format::Toml,
        )
        .unwrap_err();
        assert!(
            unknown[0].starts_with("p.toml:4:1: unknown field `retries`"),
            "{unknown:?}"
        );
        let json = parse("p.json", "{\"items\": [}", Format::Json).unwrap_err();
        assert!(json[0].starts_with("p.json:1:12: "), "{json:?}");
        let empty = parse("p.toml", "", Format::Toml).unwrap_err();
        assert!(empty[0].contains("no items"));
    }

    #[test]
    fn an_items_own_limits_win_over_the_plans_defaults_key_by_key() {
        let text = "[defaults]\npermit = \"api\"\nidle_timeout = \"2m\"\nbudget = \"llm\"\n\n[[items]]\nid = \"a\"\ncommand = \"x\"\nidle_timeout = \"0\"\nfallback = \"echo stand-in\"\n\n[[items]]\nid = \"b\"\ncommand = \"x\"\npermit = \"db\"\npermit_wait = \"5s\"\n";
        let plan = parse("p.toml", text, Format::Toml).unwrap();
        let a = plan.items[0].limits(&plan.defaults);
        assert_eq!(a.permit.as_deref(), Some("api"));
        assert_eq!(a.idle_timeout, Some(Dur(std::time::Duration::ZERO)));
        assert_eq!(a.fallback.as_deref(), Some("echo stand-in"));
        assert_eq!(a.budget.as_deref(), Some("llm"));
        let b = plan.items[1].limits(&plan.defaults);
        assert_eq!(b.permit.as_deref(), Some("db"));
        assert_eq!(b.permit_wait, Some(Dur(std::time::Duration::from_secs(5))));
        assert_eq!(b.fallback, None);
        // The manifest keeps the plan: JSON reads back the same limits.
        let json = serde_json::to_string(&plan).unwrap();
        assert_eq!(parse("-", &json, Format::Json).unwrap(), plan);
        let unset = unset_keys(&plan, &Policy::default());
        assert_eq!(unset.len(), 3, "{unset:?}");
        assert!(unset[0].contains("add `[permits.api] max = 8`"));
    }

    #[test]
    fn a_terminal_phase_allows_one_attempt_and_items_override_their_agent() {
        let mut plan = parse("p.toml", GOOD, Format::Toml).unwrap();
        plan.retry = false;
        let p = item_policy(&Policy::default(), &plan, &plan.items[1]);
        assert_eq!(p.retry.max_attempts, 1);
        assert_eq!(p.agent("mathematician").criticality, Criticality::Optional);
        assert_eq!(p.agent("mathematician").output.min_chars, Some(2));
        let all = phase_policy(&Policy::default(), &plan);
        assert_eq!(
            all.agent("statistician-consultant").criticality,
            Criticality::Critical
        );
        assert_eq!(
            all.agent("mathematician").criticality,
            Criticality::Optional
        );
    }
}
