//! The classifier: any failure in, the error object of SPEC §5 out, with a retry decision.
//!
//! Pure: no files, no clock, no environment. The caller hands it the input, the policy and a
//! seed for jitter. Rules are tried in this order: an input that already names its kind
//! (seed 003's error object), the policy's `[[classify.rules]]`, then the built-in rules of
//! [`rules`]. `record-error`, `hook` and `run` call [`classify`] in-process.

pub mod input;
pub mod retry;
pub mod rules;
mod words;

#[cfg(test)]
mod cases;

use crate::policy::{ClassifyRule, Policy};
use crate::vocab::{Action, Category, Criticality, Kind, Severity, Tier};
pub use retry::RetryAdvice;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use words::{detail_line, suggestions};
pub use words::{hook_context, kinds_table};

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
}

/// The error object (seed 003, extended by SPEC §5).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ErrorObject {
    /// Always `"error"`.
    pub status: String,
    /// What went wrong.
    pub kind: Kind,
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
    /// What to do next.
    pub action: Action,
    /// The advised retry, when the action is `retry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryAdvice>,
    /// The rule that decided: `input`, `config:NAME` or `builtin:NAME`.
    pub matched_rule: String,
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
    let retryable = from_given!("retryable")
        .or(cfg.and_then(|r| r.retryable))
        .or(v.retryable)
        .unwrap_or(d.retryable);
    let mut tier: Tier = from_given!("tier")
        .or(cfg.and_then(|r| r.tier))
        .unwrap_or(d.tier);
    let mut severity: Severity = from_given!("severity")
        .or(cfg.and_then(|r| r.severity))
        .unwrap_or(d.severity);
    let category: Category = from_given!("category").unwrap_or(d.category);
    let agent = f.agent.as_deref().map(|name| (name, policy.agent(name)));
    let decision = retry::decide(
        &retry::Failure {
            kind: v.kind,
            retryable,
            attempt: f.attempt.unwrap_or(1),
            agent: agent.as_ref().map(|(n, a)| (*n, a)),
            retry_after_s: f.retry_after_s,
            fallback: d.fallback,
        },
        &policy.retry,
        seed,
    );
    if decision.exhausted {
        let optional = agent
            .as_ref()
            .is_some_and(|(_, a)| a.criticality == Criticality::Optional);
        // Seed 000's log levels: an optional agent's failure is a warning, a critical one's an
        // error; a critical agent out of attempts needs a person (tier 2 at least).
        if optional {
            severity = Severity::Warning;
        } else {
            severity = severity.min(Severity::Error);
            tier = tier.max(Tier::EscalationRequired);
        }
    }
    let mut context = f.context.clone();
    if let Some(r) = &decision.reason {
        context.insert("action_reason".into(), Value::from(r.clone()));
    }
    let detail = from_given!("detail")
        .or(cfg.and_then(|r| r.detail.clone()))
        .unwrap_or_else(|| detail_line(&f, &v, d.verb));
    let suggestions = from_given!("suggestions")
        .or(cfg.and_then(|r| r.suggestions.clone()))
        .unwrap_or_else(|| suggestions(&f, &v, d.suggestions, decision.reason.as_deref()));
    ErrorObject {
        status: "error".into(),
        kind: v.kind,
        detail,
        suggestions,
        retryable,
        context,
        category,
        tier,
        severity,
        action: decision.action,
        retry: decision.retry,
        matched_rule: v.rule,
        warnings,
    }
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
    };
    if let Some(kind) = f.given_kind {
        return plain(kind, "input".into(), None, None);
    }
    for r in &policy.classify.rules {
        if let Some(evidence) = config_matches(r, &f.text, input, warnings) {
            let base = builtin(f);
            return Verdict {
                kind: r.kind.unwrap_or(base.kind),
                rule: format!("config:{}", r.name),
                evidence: evidence.or(base.evidence),
                retryable: base.retryable,
                config: Some(r),
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
        let re = match regex::Regex::new(p) {
            Ok(re) => re,
            Err(e) => {
                let why = e.to_string();
                skip(format!(
                    "its regex cannot be used: {}",
                    why.lines().last().unwrap_or_default().trim()
                ));
                return None;
            }
        };
        let m = re.find(text)?;
        evidence = Some(line_at(text, m.start()));
    }
    if let Some(code) = &r.jq {
        let filter = match crate::jq::Filter::compile(code) {
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
    };
    if f.interrupted {
        return v(Kind::Interrupted, "is-interrupt", None, None);
    }
    if let Some(word) = &f.stop_failure {
        if let Some(kind) = rules::stop_failure_kind(word) {
            let details = f.text.lines().nth(1).map(str::to_string);
            return v(kind, &format!("stop-failure-{word}"), details, None);
        }
    }
    let lower = f.text.to_ascii_lowercase();
    let text_rule = |specific: bool| {
        rules::first_match(specific, lower.as_bytes())
            .map(|(r, at)| v(r.kind, r.name, Some(line_at(&f.text, at)), None))
    };
    if let Some(hit) = text_rule(true) {
        return hit;
    }
    if let Some((code, kind)) = f
        .http_status
        .and_then(|c| rules::http_kind(c).map(|k| (c, k)))
    {
        let line = f
            .text
            .lines()
            .find(|l| l.contains(&code.to_string()))
            .map(clip);
        return v(kind, &format!("http-{code}"), line, None);
    }
    if let Some(mut hit) = text_rule(false) {
        // A crash by an outside signal (SIGKILL, SIGTERM) may pass on a new attempt.
        if let Some((Kind::Crash, _, r)) = f.exit_code.and_then(rules::exit_kind) {
            if hit.kind == Kind::Crash {
                hit.retryable = Some(r);
            }
        }
        return hit;
    }
    let first = first_line(&f.text);
    if let Some((kind, name, retryable)) = f.exit_code.and_then(rules::exit_kind) {
        return v(kind, name, first, Some(retryable));
    }
    v(Kind::Unknown, "unmatched", first, None)
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
        .find(|l| !l.is_empty() && !l.starts_with("Exit code "))
        .map(clip)
}

fn clip(line: &str) -> String {
    const MAX: usize = 200;
    let line = line.trim();
    if line.chars().count() <= MAX {
        return line.to_string();
    }
    let mut out: String = line.chars().take(MAX - 1).collect();
    out.push('…');
    out
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
        assert_eq!(
            j["retry"],
            json!({"attempt": 2, "max_attempts": 3, "delay_s": 30})
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
        let e = classify(&json!({"kind": "timeout"}), &o, &Policy::default(), 1);
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
        assert!(
            c.contains("wait 30 s, then retry the same call (attempt 2 of 3)"),
            "{c}"
        );
        let e = run(
            json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
            "error": "Exit code 101\nerror[E0308]: mismatched types"}),
        );
        let c = hook_context(&e);
        assert!(
            c.contains("not retryable") && c.contains("stop retrying"),
            "{c}"
        );
        assert!(c.contains("Fix the reported compile errors"), "{c}");
    }

    #[test]
    fn the_kinds_table_names_every_kind() {
        let t = kinds_table();
        for k in Kind::ALL {
            assert!(t.contains(&format!(" {:<17} ", k.as_str())), "{k}");
        }
    }
}
