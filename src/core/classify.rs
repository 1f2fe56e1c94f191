//! The classifier: any failure in, the error object of SPEC §5 out, with a retry decision.
//!
//! Pure: no files, no clock. The caller hands it the input, the policy, a seed for jitter and
//! (for limits that reset at a wall-clock time) the current time. `record-error`, `hook` and
//! `run` call [`classify`] in-process.
//!
//! # Precedence
//!
//! An error text often holds more than one clue: Claude Code prints `API Error (529 …
//! overloaded_error …) · Retrying in 4 seconds…` and then `Interrupted by user`; a Node error
//! carries a stack whose frames are named `Timeout._onTimeout` or `abortSignal`. The evidence is
//! weighed in this order, and the first level that decides wins:
//!
//! 1. What the input says of itself: an error object's `kind` (seed 003), Claude Code's
//!    `is_interrupt`; then the policy's `[[classify.rules]]`.
//! 2. Specific wordings ([`rules::SPECIFIC`]): a wrapper that says whose failure it is (a hook's,
//!    the edit tool's), a usage limit, compiler and test-runner output, parse errors, seed 004's
//!    pipeline conditions. They are precise enough to decide alone: a pytest run that fails on
//!    a `ConnectionRefusedError` is a failed test.
//! 3. Structured evidence: the HTTP status (a field, or `API Error: 529`, `Error code: 429`,
//!    `status code 401` in the text), then the API's error type ([`rules::API_TYPES`]:
//!    `overloaded_error`, `rate_limit_error`, …). It decides before any generic word, so a
//!    client's hint (`Retrying in 37 seconds`, `esc to interrupt`, `Interrupted by user` after
//!    the error) never turns an overload into a rate limit or an interrupt.
//! 4. Claude Code's StopFailure `error` word, when the text of the failed turn
//!    (`last_assistant_message`) held no structured evidence: `server_error` is what the client
//!    sends for a 529, `unknown` for a 400.
//! 5. A hang: a status line (a spinner with its elapsed time) past the longest a tool call may
//!    run ([`hang`]), whatever the command quoted above it says.
//! 6. Generic wordings ([`rules::GENERIC`]): the one on the earliest line wins, so the first
//!    line of a multi-line error weighs more than what follows it.
//! 7. The exit status: 124, 126, 127, 128+N; then a tool call whose error is only its
//!    `Exit code N` line: a search (grep, rg …) that found nothing when the command was one
//!    ([`search`]), else a plain tool failure ([`rules::TOOL_EXIT`]).
//! 8. When nothing matched, levels 2, 3 and 6 once more on the text with its line breaks
//!    joined: a terminal wraps a long message (`… which appears to violate` / `our Usage
//!    Policy`), and issue reports quote it wrapped.
//! 9. When the built-in rules still answer `unknown` and the caller asks for it
//!    ([`Overrides::model_fallback`]), the learned fallback ([`model`]) gives the kind if it is
//!    confident enough; `decided_by` says so.
//!
//! At every level, stack frames are not evidence: JavaScript `at …` lines, Python's
//! `Traceback` header and `File "…"` frames, Go and Rust backtrace lines are dropped before
//! matching (see `matching`).

mod builtin;
pub mod cause;
pub mod class;
mod facts;
pub mod hang;
pub mod input;
mod matching;
pub mod model;
pub mod retry;
pub mod rules;
mod search;
mod words;

#[cfg(test)]
mod cases;
#[cfg(test)]
mod corpus;
#[cfg(test)]
mod families;

use crate::core::policy::{ClassifyRule, Policy};
use crate::core::vocab::{Action, Category, Class, Kind, Severity, Tier};
use chrono::{DateTime, FixedOffset, Utc};
pub use class::{class_of, family_of};
pub use retry::RetryAdvice;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
pub use words::{agent_type_directive, fmt_wait, hook_context, kinds_table};
use words::{detail_line, suggestions};

/// What the command line says over the input.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--agent`: the agent that failed.
    pub agent: Option<String>,
    /// `--attempt`: attempts made so far, the failing one included.
    pub attempt: Option<u32>,
    /// `--message`: the error text (replaces the input's).
    pub message: Option<String>,
    /// `--raw`: the input is text; no field is interpreted.
    pub raw: bool,
    /// `--exit-code`: the failing command's exit status.
    pub exit_code: Option<i64>,
    /// `--tool`: the tool that failed.
    pub tool: Option<String>,
    /// The current time (`TRIAGE_NOW` in tests): turns a usage limit's reset time into a wait.
    pub now: Option<DateTime<Utc>>,
    /// The offset a reset printed as a wall-clock time ("resets 9am") is read in: the machine's
    /// local zone, which is the zone Claude Code prints it in. `None`: look it up when needed.
    pub utc_offset: Option<FixedOffset>,
    /// Where no rule knows the text, let the learned fallback ([`model`]) give the kind when
    /// it is confident enough. Off unless asked (`triage classify` asks; the hook does not).
    pub model_fallback: bool,
}

/// What decided an error object's kind.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DecidedBy {
    /// A rule: the input's own kind, the policy's or a built-in one (`unknown` included).
    #[default]
    Rule,
    /// The learned fallback, where no rule knew the text.
    Model,
}

/// The error object (seed 003, extended by SPEC §5).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ErrorObject {
    /// Always `"error"`.
    pub status: String,
    /// What went wrong.
    pub kind: Kind,
    /// Work (the agent's own loop: a red test, a lint complaint) or trouble: [`class_of`] of
    /// the kind and the tool that failed.
    #[serde(default)]
    pub class: Class,
    /// One line that says what went wrong, where, and why.
    pub detail: String,
    /// What to do about it.
    pub suggestions: Vec<String>,
    /// Whether a retry can help.
    pub retryable: bool,
    /// What was found: exit code, tool, agent, HTTP status, Retry-After, …
    pub context: Map<String, Value>,
    /// Seed 001's category.
    pub category: Category,
    /// Seed 004's tier.
    pub tier: Tier,
    /// Seed 001's severity.
    pub severity: Severity,
    /// Seed 001's priority label for the severity: P0 critical, P1 error, P2 warning (P3 info).
    #[serde(default)]
    pub priority: String,
    /// What to do next.
    pub action: Action,
    /// The advised retry, when the action is `retry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryAdvice>,
    /// The rule that decided: `input`, `config:NAME`, `builtin:NAME`, or `model:naive-bayes`
    /// when the learned fallback did.
    pub matched_rule: String,
    /// `rule`, or `model` when no rule knew the text and the learned fallback gave the kind.
    #[serde(default)]
    pub decided_by: DecidedBy,
    /// The learned fallback's confidence in the kind (0 to 1), when it decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The features that weighed most in the learned fallback's decision, in words, each with
    /// its weight in nats (for the trace).
    #[serde(skip)]
    pub model_features: Vec<(String, f64)>,
    /// Policy rules that could not be applied (a regex over the size limit, a jq filter
    /// stopped by its budget), each naming its rule; the glue turns them into warnings.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// The rule that decided the kind.
struct Verdict<'p> {
    kind: Kind,
    rule: String,
    evidence: Option<String>,
    retryable: Option<bool>,
    config: Option<&'p ClassifyRule>,
    /// The built-in text rule, when one decided (its tier, advice, retry cap).
    text_rule: Option<&'static rules::TextRule>,
    /// How long a hang's status line says it has waited.
    elapsed_s: Option<f64>,
}

/// True unless the input is a PostToolUse whose response reports no error.
pub fn is_failure(input: &Value, overrides: &Overrides) -> bool {
    overrides.message.is_some() || input::facts(input, overrides).is_failure
}

/// Classifies one failure. `input` is a JSON value, or `Value::String` for raw text.
pub fn classify(input: &Value, overrides: &Overrides, policy: &Policy, seed: u64) -> ErrorObject {
    let f = input::facts(input, overrides);
    let mut warnings = Vec::new();
    let v = verdict(&f, input, policy, &mut warnings);
    let (v, learned) = match overrides.model_fallback.then(|| learned(&f, &v)).flatten() {
        Some((verdict, answer)) => (verdict, Some(answer)),
        None => (v, None),
    };
    let d = rules::defaults(v.kind);
    let given = f.given.clone().unwrap_or_default();
    fn field<T: serde::de::DeserializeOwned>(given: &Map<String, Value>, key: &str) -> Option<T> {
        let x = given.get(key).filter(|x| !x.is_null())?;
        serde_json::from_value(x.clone()).ok()
    }
    macro_rules! from_given {
        ($key:literal) => {
            field(&given, $key)
        };
    }
    let cfg = v.config;
    let tr = v.text_rule;
    let retryable = from_given!("retryable")
        .or(cfg.and_then(|r| r.retryable))
        .or(v.retryable)
        .or(tr.and_then(|r| r.retryable))
        .unwrap_or(d.retryable);
    // The policy's `[retry.kinds.KIND] retryable` has the last word on the kind.
    let retryable = policy
        .retry
        .kinds
        .get(&v.kind)
        .and_then(|k| k.retryable)
        .unwrap_or(retryable);
    let mut tier: Tier = from_given!("tier")
        .or(cfg.and_then(|r| r.tier))
        .or(tr.and_then(|r| r.tier))
        .unwrap_or(d.tier);
    let mut severity: Severity = from_given!("severity")
        .or(cfg.and_then(|r| r.severity))
        .or(tr.and_then(|r| r.severity))
        .unwrap_or(d.severity);
    let category: Category = from_given!("category").unwrap_or(d.category);
    let agent = f.agent.as_deref().map(|name| (name, policy.agent(name)));
    let fallback = tr.and_then(|r| r.fallback).unwrap_or(d.fallback);
    let max_attempts = tr.and_then(|r| r.max_attempts).or(d.max_attempts);
    let mut decision = retry::decide(
        &retry::Failure {
            kind: v.kind,
            retryable,
            attempt: f.attempt.unwrap_or(1),
            agent: agent.as_ref().map(|(n, a)| (*n, a)),
            retry_after_s: f.retry_after_s,
            fallback,
            max_attempts,
            delay_s: tr.and_then(|r| r.delay_s).map(f64::from),
            degrade_when_exhausted: max_attempts.is_some() && fallback == Action::ProceedDegraded,
        },
        &policy.retry,
        seed,
    );
    if decision.exhausted {
        // Seed 000's log levels: an optional agent's failure is a warning, a critical one's an
        // error; a critical agent out of attempts needs a person (tier 2 at least). Going on
        // without the result (an optional agent, an unavailable tool) keeps the tier.
        if decision.action == Action::ProceedDegraded {
            severity = Severity::Warning;
        } else {
            severity = severity.min(Severity::Error);
            tier = tier.max(Tier::EscalationRequired);
        }
    }
    // The cause, where it decides the next step better than the kind: waiting does not fix a
    // host that does not exist, nor a task too large for its time limit.
    let cause = cause::of(v.kind, &f);
    let mut retryable = retryable;
    if let Some(c) = cause.as_ref().filter(|c| !c.step.waits()) {
        if decision.action == Action::Retry {
            decision.action = Action::Escalate;
            decision.retry = None;
            retryable = false;
        }
        // A fix the model can make itself is its own to make (tier 1).
        if c.step == cause::Step::FixAndRetry {
            tier = Tier::SelfRecoverable;
        }
    }
    let mut context = f.context.clone();
    if let Some(c) = &cause {
        context.insert("cause".into(), Value::from(c.name));
        context.insert("step".into(), Value::from(c.step.as_str()));
    }
    if let Some(s) = v.elapsed_s {
        context.insert("elapsed_s".into(), Value::from(s));
    }
    if let Some(r) = &decision.reason {
        context.insert("action_reason".into(), Value::from(r.clone()));
    }
    let detail = from_given!("detail")
        .or(cfg.and_then(|r| r.detail.clone()))
        .unwrap_or_else(|| detail_line(&f, &v, d.verb));
    // The client's text for an unknown subagent type lists the ones that exist: the way out.
    let unknown_type = input::unknown_agent_type(&f.text).map(|(_, a)| agent_type_directive(&a));
    let advice = match (&unknown_type, tr) {
        (Some(d), _) => &[d.as_str()][..],
        (None, Some(r)) if !r.advice.is_empty() => r.advice,
        _ => d.suggestions,
    };
    let mut suggestions = from_given!("suggestions")
        .or(cfg.and_then(|r| r.suggestions.clone()))
        .unwrap_or_else(|| suggestions(&f, &v, advice, decision.reason.as_deref()));
    // The cause's own step first: it is what the model is told to do.
    if let Some(directive) = cause.as_ref().and_then(|c| c.directive.as_deref()) {
        suggestions.insert(0, words::upper_first(directive));
    }
    ErrorObject {
        status: "error".into(),
        kind: v.kind,
        class: tr.and_then(|r| r.class).unwrap_or_else(|| {
            class::answer_class(v.kind, f.tool.as_deref(), || from_model_api(&f, &v))
        }),
        detail,
        suggestions,
        retryable,
        context,
        category,
        tier,
        severity,
        priority: severity.priority().to_string(),
        action: decision.action,
        retry: decision.retry,
        matched_rule: v.rule,
        decided_by: if learned.is_some() {
            DecidedBy::Model
        } else {
            DecidedBy::Rule
        },
        confidence: learned
            .as_ref()
            .map(|a| (a.confidence * 1000.0).round() / 1000.0),
        model_features: learned.map(|a| a.top_features).unwrap_or_default(),
        warnings,
    }
}

/// The learned fallback's verdict, where the built-in rules answered `unknown` (not the
/// input's own kind, nor a policy rule's) and the model is confident enough.
fn learned<'p>(f: &input::Facts, v: &Verdict<'p>) -> Option<(Verdict<'p>, model::Answer)> {
    if v.kind != Kind::Unknown || !v.rule.starts_with("builtin:") {
        return None;
    }
    // The model reads the first 2 KB of the evidence: frames are dropped from a head of the
    // text a few times that size, not from all of a long one.
    let mut head = f.text.len().min(4 * model::features::MAX_BYTES);
    while !f.text.is_char_boundary(head) {
        head -= 1;
    }
    let ev = matching::Evidence::new(&f.text[..head]);
    let answer = model::predict(&ev.text, f.tool.as_deref(), true).filter(|a| a.sure)?;
    let verdict = Verdict {
        kind: answer.kind,
        rule: "model:naive-bayes".into(),
        evidence: v.evidence.clone(),
        retryable: None,
        config: None,
        text_rule: None,
        elapsed_s: None,
    };
    Some((verdict, answer))
}

fn verdict<'p>(
    f: &input::Facts,
    input: &Value,
    policy: &'p Policy,
    warnings: &mut Vec<String>,
) -> Verdict<'p> {
    let plain = |kind, rule: String, evidence, retryable| Verdict {
        kind,
        rule,
        evidence,
        retryable,
        config: None,
        text_rule: None,
        elapsed_s: None,
    };
    if let Some(kind) = f.given_kind {
        return plain(kind, "input".into(), None, None);
    }
    for r in &policy.classify.rules {
        if let Some(evidence) = config_matches(r, &f.text, input, warnings) {
            let base = builtin(f);
            // The rule's own fields go on top of the built-in verdict; a rule that names a
            // kind of its own drops the built-in rule's advice for another kind.
            let text_rule = base
                .text_rule
                .filter(|t| r.kind.is_none_or(|k| k == t.kind));
            return Verdict {
                kind: r.kind.unwrap_or(base.kind),
                rule: format!("config:{}", r.name),
                evidence: evidence.or(base.evidence),
                retryable: base.retryable,
                config: Some(r),
                text_rule,
                elapsed_s: base.elapsed_s,
            };
        }
    }
    builtin(f)
}

/// `Some(evidence line)` when the policy rule matches: its regex on the text and its jq
/// predicate on the input, both when both are given. A rule that cannot be applied (a regex
/// too big to compile, a filter that does not compile or runs past its budget) is skipped
/// with a warning naming it (`config check` reports the first two before any run).
fn config_matches(
    r: &ClassifyRule,
    text: &str,
    input: &Value,
    warnings: &mut Vec<String>,
) -> Option<Option<String>> {
    if r.pattern.is_none() && r.jq.is_none() {
        return None;
    }
    let mut skip = |why: String| {
        warnings.push(format!(
            "classify rule `{}`: skipped: {why}; run `triage config check`",
            r.name
        ));
    };
    let mut evidence = None;
    if let Some(p) = &r.pattern {
        // Compiled once per policy (see `pattern_cache`), not once per call.
        match crate::core::pattern::matcher(p).find(text) {
            Ok(Some((start, _))) => evidence = Some(line_at(text, start)),
            Ok(None) => return None,
            Err(why) => {
                skip(format!("its regex cannot be used: {why}"));
                return None;
            }
        }
    }
    if let Some(code) = &r.jq {
        let filter = match crate::core::jq::Filter::compile(code) {
            Ok(f) => f,
            Err(e) => {
                skip(e);
                return None;
            }
        };
        match filter.holds(input) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) if e.is_over_budget() => {
                skip(format!("its jq filter `{code}` {e}"));
                return None;
            }
            Err(_) => return None,
        }
    }
    Some(evidence)
}

fn builtin<'p>(f: &input::Facts) -> Verdict<'p> {
    let v = |kind, name: &str, evidence, retryable| Verdict {
        kind,
        rule: format!("builtin:{name}"),
        evidence,
        retryable,
        config: None,
        text_rule: None,
        elapsed_s: None,
    };
    let by_rule = |(r, at): (&'static rules::TextRule, usize), text: &str| Verdict {
        kind: r.kind,
        rule: format!("builtin:{}", r.name),
        evidence: Some(line_at(text, at)),
        retryable: None,
        config: None,
        text_rule: Some(r),
        elapsed_s: None,
    };
    if f.interrupted {
        return v(Kind::Interrupted, "is-interrupt", None, None);
    }
    let ev = matching::Evidence::new(&f.text);
    // 2. Specific wordings.
    if let Some(hit) = matching::specific(&ev.lower) {
        return by_rule(hit, &ev.text);
    }
    // 3. Structured evidence: the HTTP status, then the API's error type.
    if let Some((code, kind)) = f
        .http_status
        .and_then(|c| rules::http_kind(c).map(|k| (c, k)))
    {
        let line = ev
            .text
            .lines()
            .find(|l| l.contains(&code.to_string()))
            .map(clip);
        return v(kind, &format!("http-{code}"), line, None);
    }
    if let Some(hit) = matching::api_type(&ev.lower) {
        return by_rule(hit, &ev.text);
    }
    // 4. StopFailure's error word, when the failed turn's text said nothing structured.
    if let Some(word) = &f.stop_failure {
        if let Some(kind) = rules::stop_failure_kind(word).filter(|k| *k != Kind::Unknown) {
            return v(
                kind,
                &format!("stop-failure-{word}"),
                first_line(&ev.text),
                None,
            );
        }
    }
    // 5. A hang: a spinner past the longest a tool call may run.
    if let Some((at, elapsed_s)) = hang::stalled(&ev.text) {
        return Verdict {
            elapsed_s: Some(elapsed_s),
            ..by_rule((&rules::HANG, at), &ev.text)
        };
    }
    // 6. Generic wordings, the earliest line first.
    if let Some(hit) = matching::generic(&ev.lower) {
        let mut verdict = by_rule(hit, &ev.text);
        // A crash by an outside signal (SIGKILL, SIGTERM) may pass on a new attempt.
        if let Some((Kind::Crash, _, r)) = f.exit_code.and_then(rules::exit_kind) {
            if verdict.kind == Kind::Crash {
                verdict.retryable = Some(r);
            }
        }
        return verdict;
    }
    // 7. The exit status.
    let first = first_line(&ev.text);
    if let Some((kind, name, retryable)) = f.exit_code.and_then(rules::exit_kind) {
        return v(kind, name, first, Some(retryable));
    }
    if f.exit_code != Some(0) {
        if let Some(hit) = matching::tool_exit(&ev.lower) {
            // Nothing but the exit line, from a search: it found nothing.
            let command = f.context.get("command").and_then(Value::as_str);
            if f.exit_code == Some(1) && first.is_none() && command.is_some_and(search::is_search) {
                return Verdict {
                    evidence: command.map(clip),
                    ..by_rule((&rules::NO_MATCH, hit.1), &ev.text)
                };
            }
            return Verdict {
                evidence: first,
                ..by_rule(hit, &ev.text)
            };
        }
    }
    // 8. Nothing matched: a terminal wraps long messages, so the same wordings are tried once
    // more with the line breaks joined.
    if ev.text.contains('\n') {
        let joined = join_wrapped_lines(&ev.text);
        let jv = matching::Evidence::new(&joined);
        let hit = matching::specific(&jv.lower)
            .or_else(|| matching::api_type(&jv.lower))
            .or_else(|| matching::generic(&jv.lower));
        if let Some(hit) = hit {
            return by_rule(hit, &jv.text);
        }
    }
    if let Some(word) = &f.stop_failure {
        return v(Kind::Unknown, &format!("stop-failure-{word}"), first, None);
    }
    v(Kind::Unknown, "unmatched", first, None)
}

/// Whether the failure is the model API's own answer: a StopFailure, an `API Error` line, an
/// API error type (`invalid_request_error`, …) or a Usage Policy refusal.
fn from_model_api(f: &input::Facts, v: &Verdict) -> bool {
    if f.stop_failure.is_some() || v.rule == "builtin:usage-policy" {
        return true;
    }
    let lower = f.text.to_ascii_lowercase();
    lower.contains("api error") || matching::api_type(lower.as_bytes()).is_some()
}

/// `text` with every line break and the indentation after it turned into one space.
fn join_wrapped_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.lines();
    if let Some(first) = lines.next() {
        out.push_str(first.trim_end());
    }
    for l in lines {
        out.push(' ');
        out.push_str(l.trim());
    }
    out
}

/// The line of `text` around byte `at`, trimmed and clipped.
fn line_at(text: &str, at: usize) -> String {
    let b = text.as_bytes();
    let at = at.min(b.len());
    let start = b[..at]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1);
    let end = b[at..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |i| at + i);
    clip(&String::from_utf8_lossy(&b[start..end]))
}

/// The first line that says something (Claude Code's `Exit code N` line says nothing new).
fn first_line(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find(|l| {
            let lower = l.to_ascii_lowercase();
            !l.is_empty()
                && !lower.starts_with("exit code ")
                && !lower.starts_with("error: exit code ")
        })
        .map(clip)
}

/// A line of evidence, trimmed and capped to 200 characters ([`crate::core::text::cap`]).
fn clip(line: &str) -> String {
    crate::core::text::cap(line.trim(), 200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(input: Value) -> ErrorObject {
        classify(&input, &Overrides::default(), &Policy::default(), 1)
    }

    #[test]
    fn an_error_object_keeps_its_fields_and_gets_the_rest() {
        // Seed 003's "When tool fails" example.
        let e = run(json!({
            "status": "error", "kind": "tool_failure",
            "detail": "Failed to read corpus index file",
            "suggestions": ["Check if docs/historical-corpus/index.json exists"],
            "retryable": true,
            "context": {"file": "docs/historical-corpus/index.json", "error": "ENOENT"}
        }));
        assert_eq!(e.kind, Kind::ToolFailure);
        assert_eq!(e.detail, "Failed to read corpus index file");
        assert_eq!(
            e.suggestions,
            vec!["Check if docs/historical-corpus/index.json exists"]
        );
        assert_eq!(e.context["file"], "docs/historical-corpus/index.json");
        assert_eq!(e.matched_rule, "input");
        assert_eq!(
            (e.category, e.tier),
            (Category::SkillError, Tier::EscalationRequired)
        );
        assert_eq!(e.action, Action::Retry);
        let j = serde_json::to_value(&e).unwrap();
        assert_eq!(j["status"], "error");
        // Seed 003's orchestrator: "tool_failure: retry_once()".
        assert_eq!(
            j["retry"],
            json!({"attempt": 2, "max_attempts": 2, "delay_s": 30})
        );
        let back: ErrorObject = serde_json::from_value(j).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn policy_rules_come_before_the_builtins() {
        let policy: Policy = toml::from_str(
            r#"
            [[classify.rules]]
            name = "corpus-missing"
            match = '(?i)corpus index .* not found'
            kind = "corpus_error"
            retryable = false
            suggestions = ["Initialize corpus with empty index"]

            [[classify.rules]]
            name = "flaky-bash"
            jq = '.tool_name == "Bash" and (.error | test("flaky"))'
            retryable = true
            tier = 1
            "#,
        )
        .unwrap();
        let o = Overrides::default();
        let e = classify(
            &json!("Corpus index at docs/index.json not found"),
            &o,
            &policy,
            1,
        );
        assert_eq!(e.kind, Kind::CorpusError);
        assert_eq!(e.matched_rule, "config:corpus-missing");
        assert_eq!(e.suggestions, vec!["Initialize corpus with empty index"]);
        assert_eq!(e.action, Action::ProceedDegraded);
        let p = json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
            "error": "Exit code 1\nflaky: connection refused"});
        let e = classify(&p, &o, &policy, 1);
        assert_eq!(e.matched_rule, "config:flaky-bash");
        // The rule sets no kind: the built-ins supply it, the rule's fields go on top.
        assert_eq!(
            (e.kind, e.tier, e.retryable),
            (Kind::NetworkError, Tier::SelfRecoverable, true)
        );
    }

    #[test]
    fn overrides_win_over_the_input() {
        let o = Overrides {
            agent: Some("mathematician-consultant".into()),
            attempt: Some(3),
            message: Some("Error: connect ECONNREFUSED 127.0.0.1:8080".into()),
            ..Overrides::default()
        };
        let policy: Policy =
            toml::from_str("[agents.\"*-consultant\"]\ncriticality = \"optional\"\n").unwrap();
        let e = classify(&json!({"message": "ignored", "agent": "x"}), &o, &policy, 1);
        assert_eq!(e.kind, Kind::NetworkError);
        assert_eq!(e.context["agent"], "mathematician-consultant");
        assert_eq!(
            (e.action, e.severity),
            (Action::ProceedDegraded, Severity::Warning)
        );
        assert!(e.context["action_reason"]
            .as_str()
            .unwrap()
            .contains("optional"));
    }

    #[test]
    fn raw_text_is_not_interpreted() {
        let o = Overrides {
            raw: true,
            ..Overrides::default()
        };
        let e = classify(
            &json!({"kind": "spec_ambiguous"}),
            &o,
            &Policy::default(),
            1,
        );
        assert_eq!(e.matched_rule, "builtin:unmatched");
        assert_eq!(e.kind, Kind::Unknown);
        assert!(!e.retryable);
    }

    #[test]
    fn detail_is_one_line_with_the_evidence() {
        let e = run(
            json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Read",
            "error": "ENOENT: no such file or directory, open 'docs/historical-corpus/index.json'"}),
        );
        assert_eq!(
            e.detail,
            "Read did not find what it needed: ENOENT: no such file or directory, open 'docs/historical-corpus/index.json'"
        );
        let e = run(json!({"message": "429 Too Many Requests\nRetry-After: 12\n"}));
        assert_eq!(
            e.detail,
            "The command was rate limited: 429 Too Many Requests; the server asks to wait 12 s"
        );
        assert_eq!(e.retry.map(|r| r.delay_s), Some(12.0));
        assert!(!e.detail.contains('\n'));
    }

    #[test]
    fn a_long_overload_line_is_cut_at_a_word_with_nothing_left_open() {
        let error = "Agent general-purpose failed after 10 attempts: API Error: Repeated 529 Overloaded errors. The API is at capacity — this is usually temporary. Try again in a moment. If it persists, check your inference gateway (127.0.0.1:15721).";
        assert!(error.chars().count() > 200);
        let e = run(
            json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Agent", "error": error}),
        );
        assert_eq!(e.kind, Kind::Overloaded);
        assert!(
            e.detail.ends_with("If it persists, check your…"),
            "{}",
            e.detail
        );
        let c = hook_context(&e);
        assert!(c.contains("check your…”. Next step:"), "{c}");
        assert!(!c.contains("(127.0.0.1:"), "{c}");
    }

    #[test]
    fn a_successful_post_tool_use_is_not_a_failure() {
        let o = Overrides::default();
        let ok = json!({"hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_response": {"stdout": "ok", "stderr": "", "interrupted": false}});
        assert!(!is_failure(&ok, &o));
        let bad = json!({"hook_event_name": "PostToolUse", "tool_name": "mcp__db__query",
            "tool_response": {"isError": true, "content": [{"type": "text", "text": "connect ECONNREFUSED 10.0.0.5:5432"}]}});
        assert!(is_failure(&bad, &o));
        assert_eq!(run(bad).kind, Kind::NetworkError);
    }

    #[test]
    fn hook_context_is_one_paragraph_with_the_next_step() {
        let e = run(
            json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
            "error": "Exit code 143\nCommand timed out after 2m 0s"}),
        );
        let c = hook_context(&e);
        assert!(!c.contains('\n'), "{c}");
        assert!(c.contains("`timeout`") && c.contains("tier 1"), "{c}");
        // A command past the tool's time limit: a longer limit, not the same call again.
        assert!(
            c.contains(
                "Next step: rerun it with a longer timeout or in the background (attempt 2 of 3)."
            ),
            "{c}"
        );
        assert!(!c.contains("retry the same call"), "{c}");
        let e = run(
            json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
            "error": "Exit code 101\nerror[E0308]: mismatched types"}),
        );
        let c = hook_context(&e);
        // One directive, the kind's own, never a menu.
        assert!(
            c.contains("Next step: fix the reported compile errors"),
            "{c}"
        );
        assert!(
            !c.contains("stop retrying") && !c.contains("Suggestions:"),
            "{c}"
        );
    }

    #[test]
    fn the_kinds_table_names_every_kind() {
        let t = kinds_table();
        for k in Kind::ALL {
            assert!(t.contains(&format!(" {:<17} ", k.as_str())), "{k}");
        }
    }
}
