//! Reading a policy file so that one mistake never switches the whole policy off (SPEC §7):
//! every problem is found, in one pass, with its line and column, and the policy keeps every
//! good entry. A bad entry is dropped alone: a key, an agent's or a phase's key, a breaker
//! section's key, a `[[classify.rules]]` rule (a rule is one unit: half a rule would classify
//! wrongly), one pattern of a list of requirements.
//!
//! How: the TOML is parsed with its spans (syntax errors recovered, each reported), then
//! deserialized into the typed policy; when that fails, the error's span names the entry to
//! drop, and it is tried again without it. Then the values serde cannot judge (regexes, jq
//! filters, globs, ratios) are checked, and a bad one is dropped from the typed policy.

use super::{
    closest, unknown_field, BreakerOverrides, BreakerSection, Policy, PolicyProblem,
    BREAKER_FIELDS, UPSTREAM_PROBLEM,
};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::ops::Range;
use toml::de::{DeTable, DeValue, ValueDeserializer};
use toml::Spanned;

/// How deeply regexes are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// Parse every regex (the same syntax errors, in the same words, as compiling it) but do
    /// not build its matcher: the hot path of every command, which compiles only the regexes
    /// it uses. A regex that parses but is too big to compile is reported where it is used.
    Syntax,
    /// Compile every regex, and run every jq filter on sample inputs (`triage config check`).
    Compile,
}

/// A policy with every good entry, and every problem found (in file order).
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// The policy without the bad entries.
    pub policy: Policy,
    /// What was wrong, each with where.
    pub problems: Vec<PolicyProblem>,
}

/// The values serde cannot judge, checked in the parsed policy (see `check`).
pub(super) type CheckValues = fn(&mut Policy, &Doc, Depth, &mut Loader);

/// Reads `text`: every good entry, and a problem for each bad one; `check_values` then
/// drops the values serde cannot judge.
pub(super) fn load_with(text: &str, depth: Depth, check_values: CheckValues) -> Loaded {
    let mut l = Loader {
        text,
        problems: Vec::new(),
        syntax_lines: Vec::new(),
    };
    let (doc, errors) = DeTable::parse_recoverable(text);
    for e in &errors {
        let span = e.span().unwrap_or(0..0);
        l.problem(
            span.clone(),
            format!("not valid TOML: {}", e.message().trim()),
        );
        l.syntax_lines.push(line_col(text, span.start).0);
    }
    let span = doc.span();
    let mut doc = Spanned::new(span, DeValue::Table(doc.into_inner()));
    // `[breaker]` mixes fields and per-key tables, so it is read by hand.
    let breaker = match doc.get_mut() {
        DeValue::Table(t) => t.get("breaker").cloned(),
        _ => None,
    };
    if let DeValue::Table(t) = doc.get_mut() {
        t.remove("breaker");
    }
    let mut policy: Policy = l.lenient(&mut doc, "").unwrap_or_default();
    if let Some(b) = breaker {
        policy.breaker = l.breaker(&b);
        if let DeValue::Table(t) = doc.get_mut() {
            t.insert(Spanned::new(0..0, "breaker".into()), b);
        }
    }
    check_values(&mut policy, &Doc(&doc), depth, &mut l);
    admission_values(&mut policy, &Doc(&doc), &mut l);
    l.problems.sort_by_key(|p| p.offset);
    Loaded {
        policy,
        problems: l.problems,
    }
}

/// `[permits.KEY]` and `[budget.KEY]` values their types cannot judge: a lease of no time, a
/// budget of no tokens, a ratio outside (0, 1] are dropped with a problem (the default
/// applies). `max = 0` is a problem too, but kept: it grants nothing, and leaving it out
/// would leave the key unlimited.
fn admission_values(policy: &mut Policy, doc: &Doc, l: &mut Loader) {
    let at = |table: &'static str, key: &str, field: &'static str| {
        doc.key_span(&[Step::Key(table), Step::Key(key), Step::Key(field)])
            .or_else(|| doc.key_span(&[Step::Key(table), Step::Key(key)]))
            .unwrap_or(0..0)
    };
    let mut found = Vec::new();
    for (key, p) in policy.permits.iter_mut() {
        let name = format!("permits.{}", key_text(key));
        if p.max == Some(0) {
            found.push((
                at("permits", key, "max"),
                format!("{name}.max = 0 grants no permit, so every acquire of `{key}` is refused; write 1 or more"),
            ));
        }
        if p.lease.is_some_and(|d| d.0.is_zero()) {
            found.push((
                at("permits", key, "lease"),
                format!("{name}.lease = 0s frees a permit as soon as it is taken; write a duration above 0, like \"60s\" (the default, 60s, applies)"),
            ));
            p.lease = None;
        }
    }
    let keys: Vec<String> = policy.permits.keys().cloned().collect();
    for key in keys.iter().filter(|k| !k.contains(['*', '?'])) {
        if policy.permits_for(key).is_none() {
            found.push((
                at("permits", key, "max"),
                format!(
                    "permits.{} sets no `max`, so `{key}` has no permits to take; add `max = 8` (how many may be held at once)",
                    key_text(key)
                ),
            ));
        }
    }
    for (key, b) in policy.budget.iter_mut() {
        let name = format!("budget.{}", key_text(key));
        if let Some(v) = b.max_tokens.filter(|v| !(v.is_finite() && *v > 0.0)) {
            found.push((
                at("budget", key, "max_tokens"),
                format!("{name}.max_tokens = {v} is no budget; write a number of tokens above 0, like 10 (the default, 10, applies)"),
            ));
            b.max_tokens = None;
        } else if let Some(v) = b.max_tokens.filter(|v| *v > 1000.0) {
            found.push((
                at("budget", key, "max_tokens"),
                format!("{name}.max_tokens = {v} is more than a budget holds; write 1000 or less (1000 applies)"),
            ));
        }
        if let Some(v) = b
            .token_ratio
            .filter(|v| !(v.is_finite() && *v > 0.0 && *v <= 1.0))
        {
            found.push((
                at("budget", key, "token_ratio"),
                format!("{name}.token_ratio = {v} is not what a success gives back; write a number above 0 and at most 1, like 0.1 (the default, 0.1, applies)"),
            ));
            b.token_ratio = None;
        }
    }
    for (span, message) in found {
        l.problem(span, message);
    }
}

/// Collects problems with their place in the text.
pub(super) struct Loader<'t> {
    text: &'t str,
    problems: Vec<PolicyProblem>,
    /// Lines with a syntax error: what the parser recovered there is dropped unreported, so
    /// one mistake is one problem.
    syntax_lines: Vec<usize>,
}

impl Loader<'_> {
    /// A problem at `span` of the text.
    pub(super) fn problem(&mut self, span: Range<usize>, message: String) {
        let (line, column) = line_col(self.text, span.start);
        if self.syntax_lines.contains(&line) {
            return;
        }
        self.problems.push(PolicyProblem {
            line: Some(line),
            column: Some(column),
            offset: span.start,
            message,
        });
    }

    /// `value` as a `T`, leaving out each entry serde refuses (one problem each). `None` when
    /// the value as a whole is unusable (a number where a table belongs).
    fn lenient<T: DeserializeOwned>(
        &mut self,
        value: &mut Spanned<DeValue<'_>>,
        path: &str,
    ) -> Option<T> {
        loop {
            let e = match T::deserialize(ValueDeserializer::from(value.clone())) {
                Ok(t) => return Some(t),
                Err(e) => e,
            };
            let span = e.span().unwrap_or_else(|| value.span());
            match drop_entry_at(value, span.start, path) {
                Some(dropped) => self.problem(span, in_words(e.message(), &dropped)),
                None => {
                    self.problem(span, in_words(e.message(), path));
                    return None;
                }
            }
        }
    }

    /// `[breaker]`: its fields are the defaults; a table under it is one key's section.
    fn breaker(&mut self, value: &Spanned<DeValue<'_>>) -> BreakerSection {
        let DeValue::Table(t) = value.get_ref() else {
            self.problem(
                value.span(),
                "breaker must be a table ([breaker]); it is left out".into(),
            );
            return BreakerSection::default();
        };
        let mut fields = DeTable::new();
        let mut keys = BTreeMap::new();
        let mut upstream = None;
        let mut entries: Vec<_> = t.iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        for (k, v) in entries {
            let name: &str = k.get_ref();
            if name == "upstream" {
                match v.get_ref() {
                    DeValue::String(u) => upstream = Some(u.to_string()),
                    _ => self.problem(v.span(), UPSTREAM_PROBLEM.into()),
                }
            } else if BREAKER_FIELDS.contains(&name) {
                fields.insert(k.clone(), v.clone());
            } else if let DeValue::Table(_) = v.get_ref() {
                let path = format!("breaker.{}", key_text(name));
                if let Some(o) = self.lenient::<BreakerOverrides>(&mut v.clone(), &path) {
                    keys.insert(name.to_string(), o);
                }
            } else {
                let choices: Vec<String> = BREAKER_FIELDS.iter().map(|s| s.to_string()).collect();
                let hint = match closest(name, &choices) {
                    Some(c) => format!("; did you mean `{c}`?"),
                    None => format!(
                        "; the keys are {}, or a table [breaker.\"KEY\"] for one key",
                        BREAKER_FIELDS.join(", ")
                    ),
                };
                self.problem(k.span(), format!("unknown key `{name}` in [breaker]{hint}"));
            }
        }
        let mut fields = Spanned::new(value.span(), DeValue::Table(fields));
        let defaults = self.lenient(&mut fields, "breaker").unwrap_or_default();
        BreakerSection {
            defaults,
            keys,
            upstream,
        }
    }
}

/// Where a value is in the parsed document, by its path of keys and list positions.
pub(super) struct Doc<'a, 'i>(&'a Spanned<DeValue<'i>>);

/// One step of a path into the document.
pub(super) enum Step<'s> {
    /// A key of a table.
    Key(&'s str),
    /// A position in a list, from 0.
    At(usize),
}

impl<'i> Doc<'_, 'i> {
    /// The value at `path`, if it is there.
    fn value(&self, path: &[Step]) -> Option<&Spanned<DeValue<'i>>> {
        let mut v = self.0;
        for step in path {
            v = match (step, v.get_ref()) {
                (Step::Key(k), DeValue::Table(t)) => t.get(*k)?,
                (Step::At(i), DeValue::Array(a)) => a.get(*i)?,
                _ => return None,
            };
        }
        Some(v)
    }

    /// The span of the value at `path`, if it is there.
    pub(super) fn span(&self, path: &[Step]) -> Option<Range<usize>> {
        self.value(path).map(Spanned::span)
    }

    /// The span of the key that ends `path` (for a value the key names, like a ratio).
    pub(super) fn key_span(&self, path: &[Step]) -> Option<Range<usize>> {
        let (Step::Key(k), parent) = path.split_last()? else {
            return self.span(path);
        };
        match self.value(parent)?.get_ref() {
            DeValue::Table(t) => t.get_key_value(*k).map(|(key, _)| key.span()),
            _ => None,
        }
    }
}

/// Drops the innermost entry of `value` at `offset` (a key, or a whole element of a list of
/// tables), returning its path; `None` when no entry is there.
fn drop_entry_at(value: &mut Spanned<DeValue<'_>>, offset: usize, path: &str) -> Option<String> {
    match value.get_mut() {
        DeValue::Table(t) => {
            let mut hit = None;
            for (k, v) in t.iter_mut() {
                let inner = join(path, k.get_ref());
                if let Some(dropped) = drop_entry_at(v, offset, &inner) {
                    return Some(dropped);
                }
                if k.span().contains(&offset) || contains(v, offset) {
                    hit = Some((k.get_ref().to_string(), inner));
                    break;
                }
            }
            let (key, inner) = hit?;
            t.remove(key.as_str());
            Some(inner)
        }
        DeValue::Array(a) => {
            let i = a
                .iter()
                .position(|el| matches!(el.get_ref(), DeValue::Table(_)) && contains(el, offset))?;
            let name = match a[i].get_ref() {
                DeValue::Table(t) => t.get("name").and_then(|n| n.get_ref().as_str()),
                _ => None,
            }
            .map_or("entry".to_string(), |n| format!("`{n}`"));
            let dropped = format!("[[{path}]] {name}");
            let items = std::mem::replace(a, toml::de::DeArray::new());
            *a = items
                .into_iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, el)| el)
                .collect();
            Some(dropped)
        }
        _ => None,
    }
}

/// Whether `offset` is inside `v` or any of its keys and values.
fn contains(v: &Spanned<DeValue<'_>>, offset: usize) -> bool {
    v.span().contains(&offset)
        || match v.get_ref() {
            DeValue::Table(t) => t
                .iter()
                .any(|(k, v)| k.span().contains(&offset) || contains(v, offset)),
            DeValue::Array(a) => a.iter().any(|el| contains(el, offset)),
            _ => false,
        }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key_text(key)
    } else {
        format!("{path}.{}", key_text(key))
    }
}

/// A key as written in TOML: bare when it can be, else quoted.
fn key_text(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        key.to_string()
    } else {
        format!("{key:?}")
    }
}

/// 1-based line and column (in characters) of byte `offset`.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// serde's message in the policy's words: `retry.max_attempts must be a whole number (0 or
/// more), not the string "3"` rather than `invalid type: string "3", expected u32`.
fn in_words(message: &str, path: &str) -> String {
    let message = message.trim();
    let place = if path.is_empty() {
        "the policy".to_string()
    } else {
        path.to_string()
    };
    if let Some((field, expected)) = unknown_field(message) {
        // `path` is the dropped entry: a section, a key in a table, or a whole rule.
        let (what, parent) = match path.rsplit_once('.') {
            _ if path.starts_with("[[") => ("key", format!(" in {path}")),
            Some((parent, _)) => ("key", format!(" in [{parent}]")),
            None => ("section", String::new()),
        };
        let hint = match closest(&field, &expected) {
            Some(c) => format!("; did you mean `{c}`?"),
            None => format!("; the {what}s here are {}", expected.join(", ")),
        };
        return format!("unknown {what} `{field}`{parent}{hint}");
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        let (found, choices) = rest.split_once('`').unwrap_or((rest, ""));
        let choices: Vec<String> = choices
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        let hint = match closest(found, &choices) {
            Some(c) => format!("; did you mean `{c}`?"),
            None => format!("; write one of {}", choices.join(", ")),
        };
        return format!("{place}: `{found}` is not a valid value{hint}");
    }
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        return format!("{place} needs `{field}` (a required key); the whole entry is left out");
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some((found, expected)) = message
            .strip_prefix(prefix)
            .and_then(|r| r.split_once(", expected "))
        {
            return format!(
                "{place} must be {}, not {}",
                expected_words(expected),
                found_words(found)
            );
        }
    }
    format!("{place}: {message}")
}

fn expected_words(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number (0 or more)".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a string" => "a string in quotes".into(),
        "a sequence" => "a list, like [\"a\", \"b\"]".into(),
        e if e.starts_with("struct ") || e.starts_with("a map") || e.ends_with("table") => {
            "a table".into()
        }
        e => e.to_string(),
    }
}

fn found_words(found: &str) -> String {
    let inner = |s: &str| s.split('`').nth(1).unwrap_or(s).to_string();
    match found.split_once(' ') {
        Some(("string", s)) => format!("the string {s}"),
        Some(("integer" | "floating", _)) | Some(("boolean", _)) => inner(found),
        _ if found == "sequence" => "a list".into(),
        _ if found == "map" => "a table".into(),
        _ => found.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::policy::load_lenient;

    fn problems(text: &str) -> Vec<String> {
        load_lenient(text, Depth::Syntax)
            .problems
            .iter()
            .map(|p| p.to_string())
            .collect()
    }

    #[test]
    fn types_in_the_policys_words() {
        assert_eq!(
            problems("[retry]\nmax_attempts = \"3\"\n"),
            ["2:16: retry.max_attempts must be a whole number (0 or more), not the string \"3\""]
        );
        assert_eq!(
            problems("[retry]\nmax_attempts = -1\n"),
            ["2:16: retry.max_attempts must be a whole number (0 or more), not -1"]
        );
        assert_eq!(
            problems("[agents.a.output]\nmin_chars = 1.5\n"),
            ["2:13: agents.a.output.min_chars must be a whole number (0 or more), not 1.5"]
        );
        assert_eq!(
            problems("[thresholds]\nphase_failure_ratio = \"half\"\n"),
            ["2:23: thresholds.phase_failure_ratio must be a number, not the string \"half\""]
        );
        assert_eq!(
            problems("[classify]\nrules = 3\n"),
            ["2:9: classify.rules must be a list, like [\"a\", \"b\"], not 3"]
        );
        assert_eq!(
            problems("[agents.a]\ncriticality = \"vital\"\n"),
            ["2:15: agents.a.criticality: `vital` is not a valid value; write one of critical, optional"]
        );
    }

    #[test]
    fn unknown_keys_keep_their_did_you_mean() {
        assert_eq!(
            problems("[retyr]\n"),
            ["1:2: unknown section `retyr`; did you mean `retry`?"]
        );
        assert_eq!(
            problems("[retry]\nmax_atempts = 3\n"),
            ["2:1: unknown key `max_atempts` in [retry]; did you mean `max_attempts`?"]
        );
        assert_eq!(
            problems("[breaker]\nfailure_treshold = 3\n"),
            ["2:1: unknown key `failure_treshold` in [breaker]; did you mean `failure_threshold`?"]
        );
        assert_eq!(
            problems("[breaker.\"*-consultant\"]\ncooldwn = \"1s\"\n"),
            ["2:1: unknown key `cooldwn` in [breaker.\"*-consultant\"]; did you mean `cooldown`?"]
        );
    }

    #[test]
    fn a_rule_without_a_name_is_dropped_alone() {
        let l = load_lenient(
            "[[classify.rules]]\nmatch = 'x'\n[[classify.rules]]\nname = \"ok\"\nmatch = 'y'\n",
            Depth::Syntax,
        );
        let p: Vec<String> = l.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            p,
            ["1:1: [[classify.rules]] entry needs `name` (a required key); the whole entry is left out"]
        );
        assert_eq!(l.policy.classify.rules.len(), 1);
        assert_eq!(l.policy.classify.rules[0].name, "ok");
    }

    #[test]
    fn every_other_entry_still_applies() {
        let text =
            "x = 1\n[retry]\nmax_attempts = 'two'\nschedule = ['1s', 'soon']\njitter = 'full'\n\
                    [breaker]\nfailure_treshold = 3\ncooldown = '5s'\n\
                    [breaker.a]\nfailure_threshold = 'x'\nhalf_open_probes = 2\n\
                    [agents.r.output]\nmin_chars = 10\nformat = 'xml'\n";
        let l = load_lenient(text, Depth::Syntax);
        assert_eq!(l.problems.len(), 6, "{:?}", l.problems);
        let lines: Vec<_> = l.problems.iter().map(|p| p.line).collect();
        assert_eq!(
            lines,
            [Some(1), Some(3), Some(4), Some(7), Some(10), Some(14)],
            "file order"
        );
        let p = &l.policy;
        assert_eq!(p.retry.jitter, super::super::Jitter::Full);
        assert_eq!(p.retry.max_attempts, 3, "the default");
        assert_eq!(p.breaker_for("b").cooldown.0.as_secs(), 5);
        assert_eq!(p.breaker_for("a").half_open_probes, 2);
        assert_eq!(p.agent("r").output.min_chars, Some(10));
    }

    #[test]
    fn syntax_errors_are_reported_and_what_parsed_applies() {
        let l = load_lenient("[retry]\nmax_attempts = 2\ny = \n", Depth::Syntax);
        assert_eq!(
            l.problems.len(),
            1,
            "one mistake, one problem: {:?}",
            l.problems
        );
        assert!(
            l.problems[0].to_string().starts_with("3:5: not valid TOML"),
            "{:?}",
            l.problems
        );
        assert_eq!(l.policy.retry.max_attempts, 2);
    }

    #[test]
    fn line_and_column_count_characters() {
        assert_eq!(line_col("a\nbé c", 6), (2, 4));
        assert_eq!(line_col("abc", 0), (1, 1));
        assert_eq!(line_col("abc", 99), (1, 4));
    }
}
