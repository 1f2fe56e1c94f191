//! `triage.toml(5)`: every policy key with its type, default and an example, generated from
//! the policy's own types (their doc comments, types and serde defaults through schemars, the
//! resolved defaults from [`Policy::default`]), so the page cannot drift from the parser.

use crate::core::duration::Dur;
use crate::core::policy::{BreakerOverrides, BreakerSection, Policy};
use crate::core::vocab::{Criticality, Family, Kind, Severity, Tier};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use std::borrow::Cow;

impl JsonSchema for Dur {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "format": "duration"})
    }
}

macro_rules! words {
    ($($t:ty),+) => {$(
        impl JsonSchema for $t {
            fn schema_name() -> Cow<'static, str> {
                stringify!($t).into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                let names: Vec<&str> = <$t>::ALL.iter().map(|v| v.as_str()).collect();
                json_schema!({"type": "string", "enum": names})
            }
        }
    )+};
}
words!(Kind, Severity, Criticality, Family);

impl JsonSchema for Tier {
    fn schema_name() -> Cow<'static, str> {
        "Tier".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "integer", "enum": [1, 2, 3]})
    }
}

impl JsonSchema for BreakerSection {
    fn schema_name() -> Cow<'static, str> {
        "BreakerSection".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        // The fields of `[breaker]` itself, and `[breaker."KEY"]` tables of the same fields.
        let mut s = BreakerOverrides::json_schema(g);
        if let Some(serde_json::Value::Object(props)) = s.get_mut("properties") {
            props.insert(
                "upstream".into(),
                serde_json::json!({"type": "string", "description": "The key of the one breaker for the API itself: 429, 529 and overload failures of any agent type, and StopFailure, count on it too; while it is open, no subagent is launched. Its thresholds are [breaker]'s, or [breaker.\"KEY\"]'s. \"\" turns it off."}),
            );
        }
        let per_key = g.subschema_for::<BreakerOverrides>();
        s.insert("additionalProperties".into(), per_key.to_value());
        s
    }
}

/// The policy's schema as JSON.
pub fn schema() -> serde_json::Value {
    let g = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    g.into_root_schema_for::<Policy>().to_value()
}

/// One key of the policy file.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    /// The table it is written in: `retry`, `agents.NAME.output`, `[classify.rules]`.
    pub table: String,
    /// The key.
    pub key: String,
    /// Its type in words.
    pub ty: String,
    /// What it does (its doc comment).
    pub doc: String,
    /// Its default in TOML, or what leaving it out means.
    pub default: String,
}

/// A table of the policy file and its keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// `retry`, `retry.kinds.KIND`, `[classify.rules]` (an array of tables), …
    pub name: String,
    /// What it is for.
    pub doc: String,
    /// Its keys.
    pub keys: Vec<Key>,
}

/// An example value of every key, in TOML, keyed by table and key. A test checks that every
/// key has one and that together they make a policy the parser accepts.
pub const EXAMPLES: &[(&str, &str, &str)] = &[
    ("retry", "schedule", r#"["30s", "2m"]"#),
    ("retry", "max_attempts", "3"),
    ("retry", "backoff", r#""exponential""#),
    ("retry", "initial", r#""1s""#),
    ("retry", "multiplier", "2.0"),
    ("retry", "max_delay", r#""5m""#),
    ("retry", "jitter", r#""full""#),
    ("retry.kinds.KIND", "delay", r#""5s""#),
    ("retry.kinds.KIND", "max_attempts", "5"),
    ("retry.kinds.KIND", "retryable", "true"),
    ("breaker", "failure_threshold", "2"),
    ("breaker", "cooldown", r#""60s""#),
    ("breaker", "half_open_probes", "1"),
    ("breaker", "success_threshold", "1"),
    ("breaker", "scope", r#""session""#),
    ("breaker", "failure_rate", "0.5"),
    ("breaker", "window_size", "20"),
    ("breaker", "window", r#""60s""#),
    ("breaker", "minimum_calls", "10"),
    ("breaker", "interval", r#""10m""#),
    ("breaker", "cooldown_multiplier", "2.0"),
    ("breaker", "max_cooldown", r#""30m""#),
    ("breaker", "probe_ttl", r#""60s""#),
    ("breaker", "slow_call_threshold", r#""5m""#),
    ("breaker", "validation_failures", "3"),
    ("breaker", "upstream", r#""api""#),
    ("breaker.\"KEY\"", "failure_threshold", "3"),
    ("thresholds", "session_failures", "5"),
    ("thresholds", "phase_failure_ratio", "0.5"),
    ("thresholds", "cascade_agents", "2"),
    ("thresholds", "agent_failures", "3"),
    ("thresholds", "breaker_opens", "2"),
    ("thresholds", "count_unguarded_tools", "false"),
    ("phase", "default_action", r#""proceed_with_partial""#),
    ("phase", "decision_timeout", r#""5m""#),
    ("phase", "auto_proceed_after", r#""5m""#),
    ("phases.ID", "name", r#""Subsection planning""#),
    ("phases.ID", "timeout", r#""20m""#),
    ("phases.ID", "size", "3"),
    ("agents.NAME", "criticality", r#""optional""#),
    ("agents.NAME", "timeout", r#""5m""#),
    ("agents.NAME", "side_effects", "false"),
    ("agents.NAME", "breaker_key", r#""{agent}:{task_id}""#),
    ("agents.NAME.output", "min_chars", "500"),
    (
        "agents.NAME.output",
        "require_all",
        r#"['\[\d+\]|https?://|doi:']"#,
    ),
    (
        "agents.NAME.output",
        "require_any",
        r#"['(?i)executive summary']"#,
    ),
    ("agents.NAME.output", "forbid", r#"['(?m)^BLOCKED']"#),
    ("agents.NAME.output", "format", r#""markdown""#),
    (
        "agents.NAME.output",
        "required_keys",
        r#"["summary.verdict"]"#,
    ),
    ("agents.NAME.output", "jq", r#"['.status != "error"']"#),
    (
        "agents.NAME.output",
        "files_exist",
        r#"["docs/literature/*.md"]"#,
    ),
    ("agents.NAME.output", "max_rejections", "3"),
    ("agents.NAME.output", "min_tool_uses", "1"),
    ("run", "orphan_grace", r#""250ms""#),
    ("run", "jobs", "16"),
    ("saga", "compensation_timeout", r#""10m""#),
    ("store", "url", r#""redis://cache.internal:6379/0""#),
    ("store", "namespace", r#""research-pipeline""#),
    ("store", "connect_timeout", r#""50ms""#),
    ("store", "command_timeout", r#""250ms""#),
    ("store", "log_max_len", "1000000"),
    ("stdin", "hook_timeout", r#""300ms""#),
    ("stdin", "timeout", r#""1m""#),
    ("permits.\"KEY\"", "max", "8"),
    ("permits.\"KEY\"", "lease", r#""60s""#),
    ("budget.\"KEY\"", "max_tokens", "10"),
    ("budget.\"KEY\"", "token_ratio", "0.1"),
    ("voice", "work", r#"["tests", "build", "checks", "search"]"#),
    ("voice", "session_start_window", r#""12h""#),
    ("redact", "fields", r#"["session_cookie"]"#),
    ("[redact.patterns]", "name", r#""acme-key""#),
    ("[redact.patterns]", "regex", r#"'acme_[0-9a-f]{32}'"#),
    ("[classify.rules]", "name", r#""corpus-missing""#),
    (
        "[classify.rules]",
        "match",
        r#"'(?i)corpus index .* not found'"#,
    ),
    ("[classify.rules]", "jq", r#"'.error.code == "ENOCORPUS"'"#),
    ("[classify.rules]", "kind", r#""corpus_error""#),
    ("[classify.rules]", "retryable", "false"),
    ("[classify.rules]", "tier", "2"),
    ("[classify.rules]", "severity", r#""error""#),
    (
        "[classify.rules]",
        "suggestions",
        r#"["Initialize corpus with empty index"]"#,
    ),
    (
        "[classify.rules]",
        "detail",
        r#""the corpus index is missing""#,
    ),
];

/// Each placeholder in a table's name, and the name the example uses for it.
const PLACEHOLDERS: &[(&str, &str)] = &[
    ("KIND", "timeout"),
    ("\"KEY\"", "\"*-consultant\""),
    ("ID", "2"),
    ("NAME", "researcher"),
];

fn placeholder(map_key: &str) -> &'static str {
    match map_key {
        "kinds" => "KIND",
        "phases" => "ID",
        "agents" => "NAME",
        _ => "\"KEY\"",
    }
}

struct Walk<'a> {
    defs: &'a serde_json::Map<String, serde_json::Value>,
    tables: Vec<Table>,
}

use serde_json::Value;

impl<'a> Walk<'a> {
    /// A schema with its `$ref` (and an `Option`'s `anyOf [X, null]`) followed.
    fn resolve(&self, s: &'a Value) -> &'a Value {
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap_or(r);
            if let Some(d) = self.defs.get(name) {
                return self.resolve(d);
            }
        }
        if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
            if let Some(x) = any
                .iter()
                .find(|x| x.get("type") != Some(&Value::from("null")))
            {
                return self.resolve(x);
            }
        }
        s
    }

    fn ref_name(s: &Value) -> Option<&str> {
        let r = s
            .get("$ref")
            .or_else(|| {
                s.get("anyOf")
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().find_map(|x| x.get("$ref")))
            })?
            .as_str()?;
        r.rsplit('/').next()
    }

    fn is_table(&self, s: &Value) -> bool {
        self.resolve(s).get("properties").is_some_and(|p| {
            // A map keyed by a closed vocabulary lists every word with the same table.
            let mut refs = p
                .as_object()
                .into_iter()
                .flatten()
                .map(|(_, v)| v.get("$ref"));
            let first = refs.next().flatten();
            !(first.is_some()
                && refs.all(|r| r == first)
                && p.as_object().is_some_and(|o| o.len() > 3))
        })
    }

    /// A map of tables: `additionalProperties` with a table, or every property the same table.
    fn map_of(&self, s: &'a Value) -> Option<&'a Value> {
        let r = self.resolve(s);
        if let Some(a) = r.get("additionalProperties").filter(|a| a.is_object()) {
            if r.get("properties").is_none() && self.is_table(a) {
                return Some(a);
            }
        }
        let props = r.get("properties")?.as_object()?;
        let first = props.values().next()?;
        let same = first.get("$ref").is_some()
            && props.values().all(|v| v.get("$ref") == first.get("$ref"));
        (props.len() > 3 && same).then_some(first)
    }

    fn type_text(&self, s: &Value) -> String {
        if Self::ref_name(s) == Some("Duration") {
            return "duration".into();
        }
        let r = self.resolve(s);
        if let Some(values) = r.get("enum").and_then(Value::as_array) {
            return values
                .iter()
                .map(toml_value)
                .collect::<Vec<_>>()
                .join(" | ");
        }
        if let Some(one) = r.get("oneOf").and_then(Value::as_array) {
            return one
                .iter()
                .filter_map(|v| v.get("const"))
                .map(toml_value)
                .collect::<Vec<_>>()
                .join(" | ");
        }
        let ty = match r.get("type") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap_or("any")
                .to_string(),
            Some(Value::String(t)) => t.clone(),
            _ => "any".into(),
        };
        match ty.as_str() {
            "array" => format!(
                "array of {}",
                r.get("items").map_or("any".into(), |i| self.type_text(i))
            ),
            "integer" if r.get("minimum") == Some(&Value::from(0)) => "integer ≥ 0".into(),
            t => t.into(),
        }
    }

    fn doc(&self, s: &Value) -> String {
        let own = s.get("description").and_then(Value::as_str);
        let r = self.resolve(s);
        let mut doc = own
            .or_else(|| r.get("description").and_then(Value::as_str))
            .unwrap_or("")
            .replace('`', "");
        if let Some(one) = r.get("oneOf").and_then(Value::as_array) {
            let words: Vec<String> = one
                .iter()
                .filter_map(|v| {
                    Some(format!(
                        "{}: {}",
                        v.get("const")?.as_str()?,
                        v.get("description")?
                            .as_str()?
                            .trim_end_matches('.')
                            .replace('`', "")
                    ))
                })
                .collect();
            if !words.is_empty() {
                doc.push_str(&format!(" ({})", words.join("; ")));
            }
        }
        doc
    }

    fn table(&mut self, name: String, s: &'a Value, doc: String) {
        let r = self.resolve(s);
        let mut keys = Vec::new();
        let mut nested = Vec::new();
        for (k, v) in r
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Some(inner) = self.map_of(v) {
                let words = self
                    .resolve(v)
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "));
                let mut d = self.doc(v);
                if let Some(w) = words {
                    d.push_str(&format!(" KIND is one of: {w}."));
                }
                if let Some(def) = v
                    .get("default")
                    .filter(|d| d.as_object().is_some_and(|o| !o.is_empty()))
                {
                    d.push_str(&format!(" Built in: {}.", inline_tables(def)));
                }
                nested.push((format!("{name}.{k}.{}", placeholder(k)), inner, d));
            } else if self.is_table(v) {
                nested.push((format!("{name}.{k}"), v, self.doc(v)));
            } else if let Some(items) = self.resolve(v).get("items").filter(|i| self.is_table(i)) {
                nested.push((format!("[{name}.{k}]"), items, self.doc(v)));
            } else {
                keys.push(Key {
                    table: name.clone(),
                    key: k.clone(),
                    ty: self.type_text(v),
                    doc: self.doc(v),
                    default: v
                        .get("default")
                        .map_or_else(|| resolved_default(&name, k), toml_value),
                });
            }
        }
        if !keys.is_empty() || name.is_empty() {
            self.tables.push(Table {
                name: name.clone(),
                doc,
                keys,
            });
        }
        if let Some(extra) = r.get("additionalProperties").filter(|a| a.is_object()) {
            if r.get("properties").is_some() && self.is_table(extra) {
                // `[breaker."KEY"]`: the same keys again, for one key or glob.
                self.tables.push(Table {
                    name: format!("{name}.\"KEY\""),
                    doc: format!("Per key or glob (\"*-consultant\", \"*\"): any key of [{name}], merged over [{name}] from the least specific match to the most specific (the exact key last)."),
                    keys: Vec::new(),
                });
            }
        }
        for (n, s, d) in nested {
            let n = n.trim_start_matches('.').replace("[.", "[");
            self.table(n, s, d);
        }
    }
}

/// A JSON value as TOML writes it.
fn toml_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Null => "unset".into(),
        Value::Object(_) => inline_tables(v),
        v => v.to_string(),
    }
}

fn inline_tables(v: &Value) -> String {
    match v {
        Value::Object(o) => format!(
            "{{ {} }}",
            o.iter()
                .map(|(k, v)| format!("{k} = {}", toml_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        v => toml_value(v),
    }
}

/// What leaving a key out means, from the code that resolves it: the breaker's and the
/// agents' resolved defaults, and what stays off.
fn resolved_default(table: &str, key: &str) -> String {
    let policy = Policy::default();
    let found = match table {
        "breaker" if key == "upstream" => Some(Value::from(crate::core::policy::DEFAULT_UPSTREAM)),
        "breaker" | "breaker.\"KEY\"" => policy.effective()["breaker"].get(key).cloned(),
        "agents.NAME" => serde_json::to_value(policy.agent("any"))
            .ok()
            .and_then(|v| v.get(key).cloned()),
        "agents.NAME.output" if key == "max_rejections" => Some(Value::from(
            crate::core::output_check::DEFAULT_MAX_REJECTIONS,
        )),
        "[classify.rules]" if key == "name" => return "required".into(),
        _ => None,
    };
    match found {
        Some(Value::Null) if table.starts_with("breaker") => "unset (off)".into(),
        Some(Value::Null) | None => "unset".into(),
        Some(v) => toml_value(&v),
    }
}

/// The policy file's tables and keys, from the policy's own types.
pub fn tables() -> Vec<Table> {
    let schema = schema();
    let empty = serde_json::Map::new();
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut w = Walk {
        defs,
        tables: Vec::new(),
    };
    w.table(String::new(), &schema, String::new());
    w.tables.retain(|t| !t.name.is_empty());
    w.tables
}

/// The table's name with its placeholders as the example writes them.
fn concrete(table: &str) -> String {
    let mut t = table.to_string();
    for (p, v) in PLACEHOLDERS {
        t = t.replace(p, v);
    }
    t
}

/// A policy that sets every key, from [`EXAMPLES`].
pub fn example_document() -> String {
    let mut out = String::new();
    for t in tables() {
        let header = concrete(&t.name);
        // `[classify.rules]` is an array of tables: `[[classify.rules]]`.
        out.push_str(&format!("[{header}]\n"));
        for k in &t.keys {
            let value = EXAMPLES
                .iter()
                .find(|(tb, key, _)| *tb == t.name && *key == k.key)
                .map_or("MISSING", |e| e.2);
            out.push_str(&format!("{} = {value}\n", k.key));
        }
        if t.keys.is_empty() {
            for (_, key, value) in EXAMPLES.iter().filter(|e| e.0 == t.name) {
                out.push_str(&format!("{key} = {value}\n"));
            }
        }
        out.push('\n');
    }
    out
}

fn example_of(table: &str, key: &str) -> Option<&'static str> {
    let t = table.replace(".\"KEY\"", "");
    EXAMPLES
        .iter()
        .find(|(tb, k, _)| (*tb == table || *tb == t) && *k == key)
        .map(|e| e.2)
}

/// The page.
pub fn policy_page() -> String {
    use super::roff_text as r;
    let version = env!("CARGO_PKG_VERSION");
    let mut out = String::new();
    out.push_str(&format!(
        ".TH triage.toml 5 \"\" \"triage {version}\" \"triage manual\"\n.nh\n.SH NAME\ntriage.toml \\- the policy of triage: retries, breakers, thresholds, agents, output checks and classification rules\n"
    ));
    out.push_str(".SH SYNOPSIS\n\\fI.triage.toml\\fR in $CLAUDE_PROJECT_DIR, else in the current folder; or the file named by \\fB\\-\\-config\\fR or \\fBTRIAGE_CONFIG\\fR.\n");
    out.push_str(&format!(".SH DESCRIPTION\n{}\n.PP\n{}\n.PP\n{}\n",
        r("The policy is TOML. Every table and key is optional: what is left out takes the built-in default shown below. Durations are written 500ms, 30s, 2m, 1h30m, 7d."),
        r("Tables named by an agent or a breaker key accept globs (\"*-consultant\", \"*\"); fields merge from the least specific match to the most specific, the exact name last. An agent the policy does not name is critical."),
        r("triage config check FILE reports every unknown key and bad value with its line (exit 1); at run time a bad entry is dropped with a warning and every good entry still applies. triage config show prints the effective policy as JSON."),
    ));
    for t in tables() {
        let header = format!("[{}]", t.name);
        out.push_str(&format!(".SH {}\n", super::roff_quoted(&header)));
        if !t.doc.is_empty() {
            out.push_str(&r(t.doc.trim_start_matches(&format!("{header}: ")).trim()));
            out.push('\n');
        }
        for k in &t.keys {
            out.push_str(&format!(
                ".TP\n\\fB{}\\fR (\\fI{}\\fR)\n{}\n",
                r(&k.key),
                r(&k.ty),
                r(&k.doc)
            ));
            out.push_str(&format!(".br\nDefault: {}\n", r(&k.default)));
            if let Some(e) = example_of(&t.name, &k.key) {
                out.push_str(&format!(".br\nExample: \\fB{} = {}\\fR\n", r(&k.key), r(e)));
            }
        }
    }
    out.push_str(".SH EXAMPLE\nA policy that sets every key (each value a valid example, not a recommendation):\n.PP\n.RS 4\n.nf\n");
    for line in example_document().lines() {
        out.push_str(&r(line));
        out.push('\n');
    }
    out.push_str(
        ".fi\n.RE\n.SH \"SEE ALSO\"\ntriage(1), triage\\-config(1), triage\\-config\\-check(1)\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_an_example_and_every_example_a_key() {
        let tables = tables();
        let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        for want in [
            "retry",
            "retry.kinds.KIND",
            "breaker",
            "breaker.\"KEY\"",
            "thresholds",
            "phases.ID",
            "agents.NAME",
            "agents.NAME.output",
            "run",
            "saga",
            "store",
            "stdin",
            "voice",
            "[classify.rules]",
        ] {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        for t in &tables {
            for k in &t.keys {
                assert!(
                    example_of(&t.name, &k.key).is_some(),
                    "no example for {}.{}",
                    t.name,
                    k.key
                );
                assert!(!k.doc.is_empty(), "{}.{} has no doc comment", t.name, k.key);
            }
        }
        for (table, key, _) in EXAMPLES {
            let base = table.trim_end_matches(".\"KEY\"");
            let found = tables.iter().any(|t| {
                (t.name == base || t.name == *table) && t.keys.iter().any(|k| k.key == *key)
            });
            assert!(
                found,
                "example for a key the policy does not have: {table}.{key}"
            );
        }
    }

    #[test]
    fn the_example_document_is_a_valid_policy() {
        let doc = example_document();
        assert!(!doc.contains("MISSING"), "{doc}");
        let policy = crate::core::policy::load(&doc);
        assert!(policy.is_ok(), "{policy:?}\n{doc}");
        let Ok(policy) = policy else { return };
        assert_eq!(policy.agent("researcher").output.min_chars, Some(500));
        assert_eq!(policy.breaker_for("stats-consultant").failure_threshold, 3);
        assert_eq!(policy.breaker_for("researcher").failure_threshold, 2);
        assert_eq!(policy.classify.rules[0].name, "corpus-missing");
    }

    #[test]
    fn defaults_are_the_resolved_ones() {
        let tables = tables();
        let key = |t: &str, k: &str| {
            tables
                .iter()
                .find(|x| x.name == t)
                .and_then(|x| x.keys.iter().find(|y| y.key == k))
                .map(|y| y.default.clone())
        };
        assert_eq!(
            key("retry", "schedule").as_deref(),
            Some(r#"["30s", "2m"]"#)
        );
        assert_eq!(key("breaker", "cooldown").as_deref(), Some(r#""1m""#));
        assert_eq!(
            key("breaker", "failure_rate").as_deref(),
            Some("unset (off)")
        );
        assert_eq!(
            key("agents.NAME", "criticality").as_deref(),
            Some(r#""critical""#)
        );
        assert_eq!(
            key("agents.NAME.output", "max_rejections").as_deref(),
            Some("3")
        );
        assert_eq!(key("thresholds", "session_failures").as_deref(), Some("5"));
        assert_eq!(key("stdin", "hook_timeout").as_deref(), Some(r#""500ms""#));
        assert_eq!(key("stdin", "timeout").as_deref(), Some("unset"));
    }
}
