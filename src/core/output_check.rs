//! Output checks (seeds 001 "Error Detection", 004 "Silent Failure Detection"): is what an agent
//! returned usable? Pure: handed the rules, the output, and what the glue found on disk.
//!
//! Every check reports what was expected and what was found, so a stop hook can hand the agent
//! a reason it can act on. A rule that does not compile is skipped with a warning: a broken
//! policy must never crash the hook that guards an agent.

use crate::core::policy::{OutputFormat, OutputRules};
use crate::core::state::{lookup, type_name};
use crate::core::vocab::{Action, Category, Criticality, Kind, Severity, Tier};
use serde::Serialize;
use serde_json::{json, Value};
use std::borrow::Cow;

mod api_error;
mod format;
mod input;
pub use api_error::ApiError;
use format::{markdown, name_of};
pub use format::{structured, yaml_value};
pub use input::{judge_input, rules_for, Input};

/// Seed 002: "fails validation 3x → proceed without": the breaker's `validation_failures`
/// unless the policy says otherwise.
pub const DEFAULT_MAX_REJECTIONS: u32 = crate::core::policy::DEFAULT_VALIDATION_FAILURES;

/// What is judged: one agent's output and what came with it.
#[derive(Clone, Debug, Default)]
pub struct Subject<'a> {
    /// The agent's name, if known.
    pub agent: Option<&'a str>,
    /// The output: text or a JSON value; `None` when there was none at all.
    pub output: Option<&'a Value>,
    /// The status the agent reported (seed 003's `status`, seed 004's `BLOCKED`).
    pub status: Option<&'a str>,
    /// The files the rules and the input name, as the glue found them.
    pub files: &'a [FileFacts],
    /// Characters of the original the output must not fall below (seed 001's editor).
    pub original_chars: Option<usize>,
    /// The output is an API error message, as classified ([`api_error::of`]).
    pub api_error: Option<&'a ApiError>,
    /// The tool calls the agent made, when known (its transcript, the tool's response).
    pub tool_uses: Option<u64>,
}

/// One glob or path, and the files it matched with their sizes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileFacts {
    /// The glob or path as written.
    pub pattern: String,
    /// Matching files, relative paths as given, and their sizes in bytes.
    pub found: Vec<(String, u64)>,
    /// Why the glob was not used (outside the project, bad syntax, search bound reached).
    pub refused: Option<String>,
}

/// The result of one check.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// The check's name: `output_present`, `min_chars`, `require_all`, …
    pub check: &'static str,
    /// Whether it passed.
    pub ok: bool,
    /// What was expected and what was found.
    pub detail: String,
}

/// The classified error of a rejected output (seed 003's object, SPEC §5's extension).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OutputError {
    /// Always `"error"`.
    pub status: &'static str,
    /// `output_missing`, `validation_failed` or `quality_failed`.
    pub kind: Kind,
    /// The failed checks' details, joined.
    pub detail: String,
    /// What the agent (or its caller) should do.
    pub suggestions: Vec<String>,
    /// Seed 001: a validation failure is not transient; never retried automatically.
    pub retryable: bool,
    /// The agent and the failed checks.
    pub context: Value,
    /// Seed 001's category.
    pub category: Category,
    /// Seed 004's tier.
    pub tier: Tier,
    /// Seed 001's severity.
    pub severity: Severity,
    /// What to do next.
    pub action: Action,
    /// Where a rejected output was saved (seed 001's `_partial`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub preserved_outputs: Vec<String>,
}

/// The verdict on one output.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// True when every check passed.
    pub ok: bool,
    /// The agent judged.
    pub agent: Option<String>,
    /// Every check run, in order.
    pub checks: Vec<Check>,
    /// The classified error when a check failed.
    pub error: Option<OutputError>,
    /// Rules skipped because they do not compile; the glue turns them into warnings.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

impl Verdict {
    /// The failed checks.
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.ok)
    }

    /// What is missing, as one short list an agent can act on.
    pub fn reason(&self) -> String {
        self.failed()
            .map(|c| format!("- {}: {}", c.check, c.detail))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `over`'s fields replace `base`'s where set (flags over the policy).
pub fn overlay(base: &OutputRules, over: &OutputRules) -> OutputRules {
    macro_rules! pick {
        ($($f:ident),+) => { OutputRules { $($f: over.$f.clone().or_else(|| base.$f.clone())),+ } };
    }
    pick!(
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
    )
}

/// The output as text: a string as it is, any other value as compact JSON.
pub fn text_of(output: &Value) -> Cow<'_, str> {
    match output {
        Value::String(s) => Cow::Borrowed(s),
        Value::Null => Cow::Borrowed(""),
        v => Cow::Owned(v.to_string()),
    }
}

/// Judges `subject` by `rules`. `criticality` decides the error's tier, severity and action.
pub fn judge(rules: &OutputRules, criticality: Criticality, subject: &Subject) -> Verdict {
    let mut j = Judging::default();
    let output = subject.output.filter(|v| !is_empty(v));
    let text = output.map(text_of);
    j.add(
        "output_present",
        match (subject.output, &text) {
            (_, Some(t)) => Ok(crate::core::text::count(
                t.trim().chars().count() as u64,
                "character",
            )),
            (None, _) => Err("no output at all; the agent returned nothing".into()),
            (Some(v), None) => Err(format!("the output is empty ({})", empty_what(v))),
        },
    );
    let status = subject.status.map(str::to_string).or_else(|| {
        output
            .and_then(|o| o.get("status"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    check_status(&mut j, status.as_deref(), output);
    if let Some(e) = subject.api_error {
        j.add(
            "api_error",
            Err(format!(
                "the answer is an API error ({}), not the agent's work: \"{}\"",
                e.kind, e.line
            )),
        );
        j.api = Some(e.clone());
    }
    if let (Some(min), Some(n)) = (rules.min_tool_uses, subject.tool_uses) {
        let d = format!("{n} tool uses, at least {min} required");
        j.add(
            "min_tool_uses",
            if n >= u64::from(min) { Ok(d) } else { Err(d) },
        );
    }
    if let Some(text) = &text {
        check_text(&mut j, rules, text, subject.original_chars);
    }
    if let Some(output) = output {
        check_structure(&mut j, rules, output, subject.agent);
    }
    for f in subject.files {
        j.add("files_exist", file_result(f));
    }
    j.finish(subject.agent, criticality)
}

#[derive(Default)]
struct Judging {
    checks: Vec<Check>,
    warnings: Vec<String>,
    /// The answer is an API error: its kind decides the verdict's.
    api: Option<ApiError>,
}

impl Judging {
    fn add(&mut self, check: &'static str, result: Result<String, String>) {
        let (ok, detail) = match result {
            Ok(d) => (true, d),
            Err(d) => (false, d),
        };
        self.checks.push(Check { check, ok, detail });
    }

    /// The span of the first match of `pattern` in `text`; a pattern that cannot be used is
    /// skipped with a warning (`Err`). Each pattern is compiled once per policy, not per call
    /// (see `pattern_cache`).
    fn find(
        &mut self,
        field: &str,
        pattern: &str,
        text: &str,
    ) -> Result<Option<(usize, usize)>, ()> {
        let found = crate::core::pattern::matcher(pattern).find(text);
        found.map_err(|why| self.bad_regex(field, pattern, &why))
    }

    /// Whether `pattern` can be used (a warning when not), without searching.
    fn usable(&mut self, field: &str, pattern: &str) -> Result<(), ()> {
        let usable = crate::core::pattern::matcher(pattern).check();
        usable.map_err(|why| self.bad_regex(field, pattern, &why))
    }

    fn bad_regex(&mut self, field: &str, pattern: &str, why: &str) {
        self.warnings.push(format!(
            "output.{field}: skipped the bad regex `{pattern}`: {why}; run `triage config check`"
        ));
    }

    fn finish(self, agent: Option<&str>, criticality: Criticality) -> Verdict {
        let mut error = classify(&self.checks, agent, criticality);
        if let (Some(e), Some(api)) = (error.as_mut(), self.api) {
            e.kind = api.kind;
            e.category = api.category;
            e.tier = api.tier;
            e.severity = api.severity;
            e.action = api.action;
            e.retryable = api.retryable;
            e.suggestions = api.suggestions;
        }
        Verdict {
            ok: error.is_none(),
            agent: agent.map(str::to_string),
            checks: self.checks,
            error,
            warnings: self.warnings,
        }
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn empty_what(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::String(s) if s.is_empty() => "no characters",
        Value::String(_) => "only whitespace",
        Value::Array(_) => "an empty array",
        _ => "an empty object",
    }
}

/// A line that says the work is blocked: `BLOCKED`, `Status: BLOCKED`, `**BLOCKED**: …`.
fn blocked_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|l| {
        let l = l.trim_start_matches(['#', '*', '>', '-', ' ']);
        let l = l
            .strip_prefix("Status:")
            .or_else(|| l.strip_prefix("status:"))
            .or_else(|| l.strip_prefix("STATUS:"))
            .map(|r| r.trim_start_matches(['*', ' ']))
            .unwrap_or(l);
        l.starts_with("BLOCKED") && !l[7..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
    })
}

fn check_status(j: &mut Judging, status: Option<&str>, output: Option<&Value>) {
    let error_detail = output
        .and_then(|o| o.get("detail").or_else(|| o.get("error")))
        .map(|d| text_of(d).into_owned());
    j.add(
        "status",
        match status {
            Some(s) if s.eq_ignore_ascii_case("error") => Err(match error_detail {
                Some(d) => format!(
                    "the agent reported status `error`: {}",
                    crate::core::text::quoted_max(&d, 200)
                ),
                None => "the agent reported status `error`".into(),
            }),
            Some(s) => Ok(format!("status `{s}`")),
            None => Ok("no status reported".into()),
        },
    );
    let said = match (status, output) {
        (Some(s), _) if s.eq_ignore_ascii_case("blocked") => Some(format!("status is `{s}`")),
        (_, Some(Value::String(t))) => blocked_line(t).map(|l| {
            format!(
                "the output says it is blocked: {}",
                crate::core::text::quoted_max(l, 120)
            )
        }),
        _ => None,
    };
    j.add(
        "not_blocked",
        match said {
            Some(d) => Err(format!("{d}; expected complete work, not BLOCKED")),
            None => Ok("not blocked".into()),
        },
    );
}

fn check_text(j: &mut Judging, rules: &OutputRules, text: &str, original: Option<usize>) {
    let chars = text.trim().chars().count();
    if let Some(min) = rules.min_chars {
        let d = format!(
            "{}, at least {min} required",
            crate::core::text::count(chars as u64, "character")
        );
        j.add(
            "min_chars",
            if chars as u64 >= min { Ok(d) } else { Err(d) },
        );
    }
    if let Some(min) = original {
        let d = format!(
            "{}, at least the original's {min} required",
            crate::core::text::count(chars as u64, "character")
        );
        j.add("original_length", if chars >= min { Ok(d) } else { Err(d) });
    }
    for p in rules.require_all.iter().flatten() {
        if let Ok(found) = j.find("require_all", p, text) {
            j.add(
                "require_all",
                match found {
                    Some((s, e)) => Ok(format!(
                        "found `{}`",
                        snippet(text.get(s..e).unwrap_or_default(), 60)
                    )),
                    None => Err(format!("expected a match for `{p}`, found none")),
                },
            );
        }
    }
    if let Some(any) = rules.require_any.as_ref().filter(|a| !a.is_empty()) {
        // Every pattern is tried, so each one that cannot be used is named; the first (in
        // the policy's order) that matches is the one reported.
        let mut usable = 0;
        let mut hit = None;
        for p in any {
            let found = if hit.is_some() {
                j.usable("require_any", p).map(|()| None)
            } else {
                j.find("require_any", p, text)
            };
            if let Ok(found) = found {
                usable += 1;
                hit = hit.or(found);
            }
        }
        if usable > 0 {
            let all = any.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>();
            j.add(
                "require_any",
                match hit {
                    Some((s, e)) => Ok(format!(
                        "found `{}`",
                        snippet(text.get(s..e).unwrap_or_default(), 60)
                    )),
                    None => Err(format!(
                        "expected a match for one of {}, found none",
                        all.join(", ")
                    )),
                },
            );
        }
    }
    for p in rules.forbid.iter().flatten() {
        if let Ok(found) = j.find("forbid", p, text) {
            j.add(
                "forbid",
                match found {
                    Some((s, e)) => Err(format!(
                        "forbidden `{p}` found: {}",
                        crate::core::text::quoted_max(around(text, s, e), 80)
                    )),
                    None => Ok(format!("no `{p}`")),
                },
            );
        }
    }
}

fn check_structure(j: &mut Judging, rules: &OutputRules, output: &Value, agent: Option<&str>) {
    let mut filters = Vec::new();
    for code in rules.jq.iter().flatten() {
        match crate::core::jq::Filter::compile(code) {
            Ok(f) => filters.push((code, f)),
            Err(e) => j.warnings.push(format!(
                "output.jq: skipped a filter that does not compile: {e}; run `triage config check`"
            )),
        }
    }
    let needs_value =
        rules.required_keys.as_ref().is_some_and(|k| !k.is_empty()) || !filters.is_empty();
    if rules.format.is_none() && !needs_value {
        return;
    }
    let format = rules.format.unwrap_or(OutputFormat::Json);
    let parsed = match format {
        OutputFormat::Json | OutputFormat::Yaml => Some(structured(output, format)),
        OutputFormat::Markdown | OutputFormat::Text => None,
    };
    if let Some(f) = rules.format {
        j.add(
            "format",
            match (&parsed, f) {
                (Some(Ok(v)), _) => Ok(format!("{} ({})", name_of(f), type_name(v))),
                (Some(Err(e)), _) => Err(format!("expected {}, found {e}", name_of(f))),
                (None, OutputFormat::Markdown) => markdown(&text_of(output)),
                (None, _) => Ok("text".into()),
            },
        );
    }
    if !needs_value {
        return;
    }
    // Keys and predicates need a value even when the format is markdown or text: try JSON.
    let value = match parsed {
        Some(p) => p,
        None => structured(output, OutputFormat::Json),
    };
    let value = match value {
        Ok(v) => v,
        Err(e) => {
            if rules.format.is_none() {
                j.add("format", Err(format!("expected JSON, found {e}")));
            }
            return;
        }
    };
    if let Some(keys) = rules.required_keys.as_ref().filter(|k| !k.is_empty()) {
        let missing: Vec<&str> = keys
            .iter()
            .filter(|k| lookup(&value, k).is_none_or(Value::is_null))
            .map(String::as_str)
            .collect();
        j.add(
            "required_keys",
            if missing.is_empty() {
                Ok(format!("present: {}", keys.join(", ")))
            } else {
                Err(format!(
                    "missing keys: {} (expected {})",
                    missing.join(", "),
                    keys.join(", ")
                ))
            },
        );
    }
    for (code, filter) in &filters {
        let ran = filter.run(&value);
        if let Err(e) = &ran {
            if e.is_over_budget() {
                let rule = agent.map_or("output.jq".into(), |a| format!("agents.{a}.output.jq"));
                j.warnings.push(format!(
                    "{rule}: the filter `{code}` {e}; the check fails; run `triage config check`"
                ));
            }
        }
        j.add(
            "jq",
            match ran {
                Ok(out) if !out.is_empty() && out.iter().all(|v| v == &Value::Bool(true)) => {
                    Ok(format!("`{code}` is true"))
                }
                Ok(out) if out.is_empty() => {
                    Err(format!("`{code}` yielded nothing, expected true"))
                }
                Ok(out) => {
                    let shown: Vec<String> = out.iter().take(3).map(Value::to_string).collect();
                    Err(format!(
                        "`{code}` yielded {}, expected true",
                        crate::core::text::quoted_max(&shown.join(", "), 80)
                    ))
                }
                Err(e) => Err(format!("`{code}` failed: {e}")),
            },
        );
    }
}

fn file_result(f: &FileFacts) -> Result<String, String> {
    if let (Some(why), true) = (&f.refused, f.found.is_empty()) {
        return Err(format!("`{}`: {why}", f.pattern));
    }
    if f.found.is_empty() {
        return Err(format!(
            "expected a file matching `{}`, found none",
            f.pattern
        ));
    }
    let empty: Vec<&str> = f
        .found
        .iter()
        .filter(|(_, size)| *size == 0)
        .map(|(p, _)| p.as_str())
        .collect();
    if !empty.is_empty() {
        return Err(format!(
            "`{}`: empty file {}, expected content",
            f.pattern,
            empty.join(", ")
        ));
    }
    Ok(format!(
        "`{}`: {} non-empty file(s)",
        f.pattern,
        f.found.len()
    ))
}

/// The failed checks, classified: missing output first, then invalid, then poor quality.
fn classify(
    checks: &[Check],
    agent: Option<&str>,
    criticality: Criticality,
) -> Option<OutputError> {
    let failed: Vec<&Check> = checks.iter().filter(|c| !c.ok).collect();
    if failed.is_empty() {
        return None;
    }
    let kind_of = |c: &Check| match c.check {
        "output_present" | "files_exist" => Kind::OutputMissing,
        "status" | "not_blocked" | "format" | "required_keys" | "jq" | "min_tool_uses" => {
            Kind::ValidationFailed
        }
        _ => Kind::QualityFailed,
    };
    let rank = |k: Kind| match k {
        Kind::OutputMissing => 0,
        Kind::ValidationFailed => 1,
        _ => 2,
    };
    let kind = failed
        .iter()
        .map(|c| kind_of(c))
        .min_by_key(|k| rank(*k))
        .unwrap_or(Kind::QualityFailed);
    let optional = criticality == Criticality::Optional;
    let category = if kind == Kind::QualityFailed {
        Category::QualityFailure
    } else {
        Category::ValidationFailure
    };
    let action = match (optional, kind) {
        (true, _) => Action::ProceedDegraded,
        (false, Kind::QualityFailed) => Action::AskUser,
        (false, _) => Action::Escalate,
    };
    let who = agent.unwrap_or("the agent");
    let mut suggestions: Vec<String> = failed.iter().map(|c| suggestion(c.check)).collect();
    suggestions.dedup();
    if optional {
        suggestions.push(format!("{who} is optional: proceed without its output"));
    }
    Some(OutputError {
        status: "error",
        kind,
        detail: format!(
            "{who}'s output failed {} of {} checks: {}",
            failed.len(),
            checks.len(),
            failed
                .iter()
                .map(|c| c.detail.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ),
        suggestions,
        retryable: false,
        context: json!({
            "agent": agent,
            "criticality": criticality,
            "failed_checks": failed.iter().map(|c| c.check).collect::<Vec<_>>(),
        }),
        category,
        tier: if optional {
            Tier::SelfRecoverable
        } else {
            Tier::EscalationRequired
        },
        severity: if optional {
            Severity::Warning
        } else {
            Severity::Error
        },
        action,
        preserved_outputs: Vec::new(),
    })
}

fn suggestion(check: &str) -> String {
    match check {
        "output_present" => "Regenerate the output: the agent returned nothing usable",
        "status" => "Read the agent's error and fix its cause before rerunning it",
        "not_blocked" => "Resolve what blocks the agent, then rerun it",
        "min_chars" | "original_length" => "Finish the output: it is shorter than required",
        "require_all" | "require_any" => "Add the missing required section or content",
        "forbid" => "Replace placeholder or refusal text with the real content",
        "format" => "Return the output in the required format",
        "required_keys" => "Include every required key (the ones the next step reads)",
        "jq" => "Fix the output so that every policy predicate holds",
        "files_exist" => "Write the expected output files, with content",
        "min_tool_uses" => "Do the work with the tools (read, edit, run) before reporting it done",
        _ => "Fix the output and rerun",
    }
    .to_string()
}

/// The text around a match, for a detail line.
fn around(text: &str, start: usize, end: usize) -> &str {
    let mut s = start.saturating_sub(20);
    while !text.is_char_boundary(s) {
        s -= 1;
    }
    let mut e = (end + 20).min(text.len());
    while !text.is_char_boundary(e) {
        e += 1;
    }
    &text[s..e]
}

/// At most `max` characters of `s` on one line, with `…` when cut.
fn snippet(s: &str, max: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::core::text::cap(&one, max)
}

/// How an agent's call ended, as its breaker and its error log should hear of it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Final {
    /// `success`, `failure`, or `ignored` (the output could not be read, or the agent said it
    /// is BLOCKED: neither is the agent failing).
    pub outcome: crate::core::breaker::Outcome,
    /// The failure's kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    /// What failed, for the breaker's last error and the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// True when the error record was already written (no second record for one failure).
    #[serde(default)]
    pub recorded: bool,
    /// True when the agent said it is BLOCKED.
    #[serde(default)]
    pub blocked: bool,
    /// True for an optional agent (seed 000): its failure is never blocked.
    #[serde(default)]
    pub optional: bool,
    /// True when its answer was an API error message, not its work.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub api_error: bool,
}

impl Final {
    /// A call that went well.
    pub fn success() -> Final {
        Final {
            outcome: crate::core::breaker::Outcome::Success,
            kind: None,
            detail: None,
            recorded: false,
            blocked: false,
            optional: false,
            api_error: false,
        }
    }
}

#[cfg(test)]
mod tests;
