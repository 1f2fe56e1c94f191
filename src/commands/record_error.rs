//! `triage record-error`: append one error record (SPEC §5) to `logs/errors.jsonl` under the
//! log's lock, keep the threshold counters beside it under the same lock, and answer with the
//! record plus the thresholds it crossed (seeds 000 and 001). `--resolve ID` appends the
//! resolution of an earlier record (seed 002), never rewriting a line.
//!
//! Other commands (the hook) call [`record`] in-process.

use crate::classify::{self, ErrorObject, Overrides};
use crate::context::{Context, Outcome};
use crate::error_log::{self, Written};
use crate::error_record::{
    self, ErrorRecord, Keys, LogLine, Phase, Resolution, ResolutionLine, Warning,
};
use crate::exit::Failure;
use crate::hook_io::Payload;
use crate::policy::Policy;
use crate::vocab::{Kind, Severity};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Arguments of `triage record-error`.
#[derive(clap::Args, Debug, Default)]
#[command(after_help = "Examples:\n  \
    echo '{\"kind\": \"timeout\", \"detail\": \"Agent exceeded 5 minute timeout\"}' | triage record-error --session s1 --phase 2 --agent statistician-consultant --retry-count 2\n  \
    echo 'connection reset by peer' | triage record-error --session s1 --agent researcher\n  \
    triage record-error --resolve err-20260204T143022123Z-000001 --action-taken retry --successful true\n  \
    triage record-error --resolve --workflow w1 --phase 2 --action-taken user_escalation --user-choice proceed_without\n\n\
    --resolve with an ERROR_ID resolves that record; without one, every unresolved record that\n\
    --session, --workflow, --phase and --agent select, with one decision. A record already\n\
    resolved is left as it is and not counted again. A resolution closes its record for the\n\
    thresholds unless it says --successful false.")]
pub struct Args {
    /// Session id (else the input's `session_id`)
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Workflow id (else the input's `workflow_id`)
    #[arg(long, value_name = "ID")]
    pub workflow: Option<String>,
    /// Phase or stage, a number or a name
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// The agent (or skill, or tool) that failed
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Task id
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// Retries already made
    #[arg(long, value_name = "N")]
    pub retry_count: Option<u32>,
    /// What was done about it (the resolution's action_taken)
    #[arg(long, value_name = "ACTION")]
    pub resolution: Option<String>,
    /// A partial output that was kept (repeatable)
    #[arg(long = "preserved", value_name = "PATH")]
    pub preserved: Vec<String>,
    /// critical, error, warning or info
    #[arg(long, value_name = "SEVERITY")]
    pub severity: Option<Severity>,
    /// The error's kind, overriding the input's
    #[arg(long, value_name = "KIND")]
    pub kind: Option<Kind>,
    /// The error's message, overriding the input's
    #[arg(long, value_name = "TEXT")]
    pub detail: Option<String>,
    /// Also record the failure on this breaker, and resolve it by this key rather than the agent
    /// [default: the agent's breaker_key template; without one, no breaker]
    #[arg(long, value_name = "KEY")]
    pub breaker: Option<String>,
    /// Agents in this phase's fan-out [default: the policy's phases.<phase>.size]
    #[arg(long, value_name = "N")]
    pub phase_size: Option<u32>,
    /// Append the resolution of the record with this error_id instead; without an id, of every
    /// unresolved record --session, --workflow, --phase and --agent select
    #[arg(long, value_name = "ERROR_ID", num_args = 0..=1, default_missing_value = "")]
    pub resolve: Option<String>,
    /// With --resolve: what was done
    #[arg(long, value_name = "ACTION", requires = "resolve")]
    pub action_taken: Option<String>,
    /// With --resolve: whether it worked (false leaves the error open for the thresholds)
    #[arg(long, value_name = "BOOL", requires = "resolve")]
    pub successful: Option<bool>,
    /// What the person chose, when one was asked
    #[arg(long, value_name = "CHOICE")]
    pub user_choice: Option<String>,
}

/// A written record and the thresholds it crossed.
#[derive(Clone, Debug, Serialize)]
pub struct Recorded {
    /// The record as written.
    #[serde(flatten)]
    pub record: ErrorRecord,
    /// `session_failure_threshold`, `cascade`, `phase_failure_ratio`.
    pub warnings: Vec<Warning>,
    /// The breaker the failure was recorded on (`--breaker`, or the policy's `breaker_key`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<Value>,
}

/// Runs `triage record-error`.
pub fn run(args: &Args, cx: &Context) -> Result<Outcome, Failure> {
    if let Some(id) = &args.resolve {
        return resolve_command(args, id, cx);
    }
    let input = read_input(cx)?;
    let mut rec = match &input {
        Some(v) => {
            let (rec, object) = classified_at(v, cx.policy()?, args.retry_count, Some(cx.now));
            object.warnings.iter().for_each(|w| cx.warn(w));
            rec
        }
        None if args.kind.is_some() || args.detail.is_some() => ErrorRecord::default(),
        None => {
            return Err(Failure::data(
                "stdin is empty; send an error object, a raw error or a hook payload, or give --kind/--detail",
            ))
        }
    };
    apply_flags(&mut rec, args);
    let key = breaker_key(cx, args, &rec)?;
    if let Some(k) = &key {
        if rec.agent.as_deref() != Some(k.as_str()) {
            rec.breaker_key = Some(k.clone());
        }
    }
    let size = match (args.phase_size, &rec.phase) {
        (Some(n), _) => Some(n),
        (None, Some(p)) => cx.policy()?.phase(&p.to_string()).and_then(|p| p.size),
        (None, None) => None,
    };
    let mut done = record(cx, rec, size)?;
    if let Some(k) = &key {
        done.breaker = on_breaker(cx, k, &done.record);
    }
    let negative = !done.warnings.is_empty();
    if cx.global.text {
        return Ok(Outcome::text(text(&done)).negative(negative));
    }
    Ok(Outcome::json(&done).negative(negative))
}

/// The breaker a record goes on: `--breaker`, else the agent's `breaker_key` template (a
/// template that cannot be filled in is a warning, and no breaker).
fn breaker_key(cx: &Context, args: &Args, rec: &ErrorRecord) -> Result<Option<String>, Failure> {
    if let Some(k) = &args.breaker {
        return Ok(Some(k.clone()));
    }
    let Some(agent) = rec.agent.as_deref() else {
        return Ok(None);
    };
    let Some(template) = cx.policy()?.agent(agent).breaker_key else {
        return Ok(None);
    };
    let phase = rec.phase.as_ref().map(Phase::to_string);
    let vars = crate::policy::KeyVars {
        agent,
        task_id: rec.task_id.as_deref(),
        phase: phase.as_deref(),
        session: rec.session_id.as_deref(),
        workflow: rec.workflow_id.as_deref(),
    };
    match crate::policy::expand_key(&template, &vars) {
        Ok(k) => Ok(Some(k)),
        Err(why) => {
            cx.warn(&format!(
                "breaker_key of agent `{agent}`: {why}; the failure was not recorded on a breaker"
            ));
            Ok(None)
        }
    }
}

/// Records the failure on breaker `key` (an interrupt as neutral); a failure is a warning.
fn on_breaker(cx: &Context, key: &str, rec: &ErrorRecord) -> Option<Value> {
    let interrupt = rec.kind() == Some(Kind::Interrupted.as_str());
    let report = crate::breaker::CallReport {
        outcome: Some(if interrupt {
            crate::breaker::Outcome::Ignored
        } else {
            crate::breaker::Outcome::Failure
        }),
        kind: rec.kind().and_then(|k| k.parse().ok()),
        detail: rec
            .error
            .get("detail")
            .and_then(Value::as_str)
            .map(String::from),
        duration_ms: rec.duration_ms,
        ticket: None,
    };
    match crate::commands::breaker::record_in(cx, key, rec.session_id.as_deref(), &report) {
        Ok(r) => Some(serde_json::json!({"key": r.key, "state": r.state, "effect": r.effect})),
        Err(f) => {
            cx.warn(&format!(
                "the failure was not recorded on breaker `{key}`: {f}"
            ));
            None
        }
    }
}

fn text(done: &Recorded) -> String {
    let r = &done.record;
    let mut out = format!(
        "recorded {} ({}) for {}",
        r.error_id,
        r.kind().unwrap_or("unknown"),
        r.agent.as_deref().unwrap_or("an unnamed agent")
    );
    for w in &done.warnings {
        out.push_str(&format!("\nwarning: {}: {}", w.name, w.message));
    }
    out
}

/// Stdin as JSON, as a record in YAML (seeds 001 and 002 write theirs so), or as the text of
/// a raw error.
fn read_input(cx: &Context) -> Result<Option<Value>, Failure> {
    let Some(bytes) = cx.read_stdin()? else {
        return Ok(None);
    };
    if let Ok(v) = crate::input::parse_json(&bytes) {
        return Ok(Some(v));
    }
    if let Some(v) = yaml_record(&bytes) {
        return Ok(Some(v));
    }
    // A raw error is kept even when it is not UTF-8 (invalid bytes become U+FFFD), as
    // `classify` reads it: a failure is never dropped for its encoding.
    Ok(Some(Value::String(
        String::from_utf8_lossy(&bytes).trim_end().to_string(),
    )))
}

/// Field names that say a YAML text is an error record, not the text of an error (which YAML
/// would read as a mapping too: `Error: connection refused`).
const YAML_RECORD_KEYS: &[&str] = &[
    "error_type",
    "error_message",
    "message",
    "skill",
    "stage",
    "agent",
    "kind",
    "detail",
    "error_id",
    "timestamp",
    "workflow_id",
    "session_id",
    "task_id",
    "severity",
    "resolution",
];

/// A YAML error record: seed 001's `error_context:` or log entry (`- timestamp: …`), seed
/// 002's `error_log:`, or a mapping with at least two of a record's field names.
fn yaml_record(bytes: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(bytes).ok()?;
    let v = crate::output_check::yaml_value(text).ok()?;
    let obj = match &v {
        Value::Array(a) if a.len() == 1 => a[0].as_object()?,
        Value::Object(o) => o,
        _ => return None,
    };
    let wrapped = ["error_context", "error_log"]
        .iter()
        .any(|k| obj.get(*k).is_some_and(Value::is_object));
    let known = obj
        .keys()
        .filter(|k| YAML_RECORD_KEYS.contains(&k.as_str()))
        .count();
    (wrapped || known >= 2).then_some(v)
}

/// An input in a seed's own shape, in ours: seed 001's `error_context` and seed 002's
/// `error_log` unwrapped (a list of one record too); `error_type` and a kind in a seed's
/// words (`SKILL_TIMEOUT`, `Validation error`) as a kind with the seed's category;
/// `error_message`/`message` as `detail`, `skill` as `agent`, `stage` as `phase`; the agent
/// and attempt inside `context` (seed 002) lifted out; `outcome: "SUCCESS on retry"` and
/// `resolution: "User selected: …"` (seed 001) read into the resolution. Every other field,
/// and every original word, is kept as given.
pub fn normalize(v: &Value) -> Value {
    let v = match v {
        Value::Array(a) if a.len() == 1 && a[0].is_object() => &a[0],
        v => v,
    };
    let Some(obj) = v.as_object() else {
        return v.clone();
    };
    if obj.contains_key("hook_event_name") {
        return v.clone();
    }
    let mut m = Map::new();
    for wrapper in ["error_context", "error_log"] {
        if let Some(Value::Object(inner)) = obj.get(wrapper) {
            m.extend(inner.clone());
        }
    }
    for (k, x) in obj {
        if !m.contains_key(k) && !(x.is_object() && (k == "error_context" || k == "error_log")) {
            m.insert(k.clone(), x.clone());
        }
    }
    let rename = |m: &mut Map<String, Value>, from: &str, to: &str| {
        if !m.contains_key(to) {
            if let Some(x) = m.remove(from) {
                m.insert(to.into(), x);
            }
        }
    };
    rename(&mut m, "error_message", "detail");
    rename(&mut m, "message", "detail");
    rename(&mut m, "skill", "agent");
    rename(&mut m, "stage", "phase");
    // The kind: ours, or a seed's word (kept as `error_type` when it was not ours).
    let word = ["kind", "error_type"]
        .iter()
        .filter_map(|k| m.get(*k).and_then(Value::as_str))
        .flat_map(|w| w.split('|'))
        .find_map(crate::vocab::seed_kind);
    if let Some(Value::String(k)) = m.get("kind") {
        if k.parse::<Kind>().is_err() {
            let k = k.clone();
            m.remove("kind");
            m.entry("error_type").or_insert(k.into());
        }
    }
    if let Some((kind, category)) = word {
        m.insert("kind".into(), kind.as_str().into());
        if let Some(c) = category {
            m.entry("category").or_insert(c.as_str().into());
        }
    }
    // Seed 002's context{agent, section, attempt}.
    let lifted = m.get("context").and_then(Value::as_object).map(|c| {
        (
            c.get("agent").filter(|a| a.is_string()).cloned(),
            c.get("attempt").and_then(Value::as_u64),
        )
    });
    if let Some((agent, attempt)) = lifted {
        if let Some(a) = agent {
            m.entry("agent").or_insert(a);
        }
        if let Some(n) = attempt {
            m.entry("retry_count")
                .or_insert(Value::from(n.saturating_sub(1)));
        }
    }
    // Seed 001's log: `resolution: "User selected: …"`, `outcome: "SUCCESS on retry"`.
    if let Some(Value::String(r)) = m.get("resolution") {
        if let Some(choice) = r.trim().strip_prefix("User selected:") {
            let choice = choice.trim().to_string();
            m.entry("user_choice").or_insert(choice.into());
        }
    }
    let outcome = m
        .get("outcome")
        .and_then(Value::as_str)
        .map(|o| o.trim().to_ascii_uppercase());
    let worked = match outcome.as_deref() {
        Some(o) if o.starts_with("SUCCESS") || o.starts_with("SUCCEEDED") => Some(true),
        Some(o) if o.starts_with("FAIL") => Some(false),
        _ => None,
    };
    if let Some(ok) = worked {
        let r = match m.remove("resolution") {
            Some(Value::Object(mut r)) => {
                r.entry("successful").or_insert(ok.into());
                Value::Object(r)
            }
            Some(Value::String(a)) => serde_json::json!({"action_taken": a, "successful": ok}),
            _ => serde_json::json!({"successful": ok}),
        };
        m.insert("resolution".into(), r);
    }
    // The caller's own id is kept beside ours.
    if let Some(id) = m.remove("error_id") {
        let ctx = m
            .entry("context")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(c) = ctx {
            c.entry("error_id").or_insert(id);
        }
    }
    Value::Object(m)
}

/// The log under the state root.
pub fn log_path(root: &Path) -> PathBuf {
    error_log::log_path(root)
}

/// Writes one record (see [`error_log::write_record`]) and evaluates the thresholds on the
/// counters. A record spooled because the log was busy crosses no threshold now; it is
/// counted when the next writer adds it to the log.
///
/// `error_id` is always assigned here (unique under the lock); `timestamp` is kept when the
/// caller set a valid one, else it is now.
pub fn record(
    cx: &Context,
    mut rec: ErrorRecord,
    phase_size: Option<u32>,
) -> Result<Recorded, Failure> {
    let thresholds = cx.policy()?.thresholds.clone();
    let root = cx.ensure_root()?;
    rec.timestamp = normalized_time(&rec.timestamp)
        .unwrap_or_else(|| cx.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    if !rec.error.contains_key("status") {
        rec.error.insert("status".into(), "error".into());
    }
    let warnings = match error_log::write_record(cx, &root, &mut rec)? {
        Written::Logged(counters) if opens(&rec) => {
            let phase = rec.phase.as_ref().map(Phase::to_string);
            let keys = Keys {
                session: rec.session_id.as_deref(),
                workflow: rec.workflow_id.as_deref(),
                phase: phase.as_deref(),
                agent: rec.breaker_key.as_deref().or(rec.agent.as_deref()),
            };
            error_record::warnings(&counters.open, &keys, &thresholds, phase_size)
        }
        Written::Logged(_) | Written::Pending(_) => Vec::new(),
    };
    Ok(Recorded {
        record: rec,
        warnings,
        breaker: None,
    })
}

/// Whether a record counts toward the thresholds (as [`LogLine::opens`] reads it back): not
/// an interrupt, not kept out of them (an unguarded tool's failure), and not written already
/// resolved.
fn opens(rec: &ErrorRecord) -> bool {
    rec.kind() != Some(Kind::Interrupted.as_str())
        && rec.counts_toward_thresholds()
        && rec
            .resolution
            .as_ref()
            .is_none_or(|r| r.successful != Some(true))
}

fn normalized_time(text: &str) -> Option<String> {
    let t = chrono::DateTime::parse_from_rfc3339(text.trim()).ok()?;
    Some(
        t.with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    )
}

/// `--resolve [ID]`: one record, or every unresolved one the selectors pick.
fn resolve_command(args: &Args, id: &str, cx: &Context) -> Result<Outcome, Failure> {
    if args.action_taken.is_none() && args.user_choice.is_none() {
        return Err(Failure::usage(
            "--resolve needs what was done: --action-taken ACTION (and --successful BOOL) or --user-choice CHOICE",
        ));
    }
    let sel = Selection {
        id: Some(id.trim()).filter(|i| !i.is_empty()).map(String::from),
        session: args.session.clone(),
        workflow: args.workflow.clone(),
        phase: args.phase.as_deref().map(|p| Phase::parse(p).to_string()),
        agent: args.agent.clone(),
    };
    if sel.id.is_none()
        && sel.session.is_none()
        && sel.workflow.is_none()
        && sel.phase.is_none()
        && sel.agent.is_none()
    {
        return Err(Failure::usage(
            "say which errors --resolve closes: an ERROR_ID, or --session, --workflow, --phase and/or --agent",
        ));
    }
    let resolution = Resolution {
        action_taken: args.action_taken.clone(),
        successful: args.successful,
        user_choice: args.user_choice.clone(),
        automatic: false,
    };
    let done = resolve(cx, &sel, resolution)?;
    if cx.global.text {
        let mut text = match (&sel.id, done.lines.first()) {
            (Some(id), Some(_)) => format!("resolved {id}"),
            (Some(id), None) => format!("{id} was already resolved; nothing changed"),
            (None, _) => format!(
                "resolved {} errors ({} already resolved were left as they were)",
                done.lines.len(),
                done.already_resolved
            ),
        };
        if !done.recovered.is_empty() {
            text.push_str(&format!(
                "\nalso resolved {} earlier failures of the same agent as recovered_by_retry",
                done.recovered.len()
            ));
        }
        return Ok(Outcome::text(text));
    }
    let mut out = match (&sel.id, done.lines.first()) {
        (Some(_), Some(line)) => serde_json::to_value(line).unwrap_or_default(),
        (Some(id), None) => serde_json::json!({"resolves": id, "already_resolved": true}),
        (None, _) => serde_json::json!({
            "error_ids": done.lines.iter().map(|l| l.resolves.as_str()).collect::<Vec<_>>(),
            "already_resolved": done.already_resolved,
            "resolution": done.lines.first().map(|l| &l.resolution),
        }),
    };
    if let Some(o) = out.as_object_mut() {
        o.insert("resolved".into(), done.lines.len().into());
        if !done.recovered.is_empty() {
            let ids: Vec<&str> = done.recovered.iter().map(|l| l.resolves.as_str()).collect();
            o.insert("recovered".into(), serde_json::json!(ids));
        }
    }
    Ok(Outcome::json(&out))
}

/// Which records `--resolve` closes.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// This one record.
    pub id: Option<String>,
    /// Every unresolved record of this session…
    pub session: Option<String>,
    /// …workflow…
    pub workflow: Option<String>,
    /// …phase (written out)…
    pub phase: Option<String>,
    /// …and agent.
    pub agent: Option<String>,
}

impl Selection {
    fn admits(&self, l: &LogLine) -> bool {
        let same = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_none_or(|w| have == Some(w))
        };
        same(&self.id, l.error_id.as_deref())
            && same(&self.session, l.session_id.as_deref())
            && same(&self.workflow, l.workflow_id.as_deref())
            && same(&self.agent, l.agent())
            && self
                .phase
                .as_deref()
                .is_none_or(|p| l.phase_text().as_deref() == Some(p))
    }
}

/// What `--resolve` did.
#[derive(Debug, Default)]
pub struct Resolved {
    /// The resolution lines appended, one per record closed.
    pub lines: Vec<ResolutionLine>,
    /// Selected records that were already resolved (left as they were).
    pub already_resolved: usize,
    /// Other failures of the same unit resolved because this resolution is a success.
    pub recovered: Vec<ResolutionLine>,
}

/// The records a selection names, and which of them are resolved, from the lines in log order.
#[derive(Default)]
struct Picked {
    /// Unresolved records picked, by id, with their place in the log.
    open: std::collections::HashMap<String, (usize, ResolutionLine)>,
    resolved: std::collections::HashSet<String>,
    found: bool,
    seen: usize,
}

impl Picked {
    fn see(&mut self, sel: &Selection, bytes: &[u8]) {
        let Some(l) = LogLine::parse(bytes) else {
            return;
        };
        if let Some(id) = l.resolves.as_deref() {
            let works = !l.resolution.as_ref().is_some_and(|r| r.failed());
            if works && self.open.remove(id).is_some() {
                self.resolved.insert(id.to_string());
            }
            return;
        }
        let Some(id) = l.error_id.as_deref() else {
            return;
        };
        if !sel.admits(&l) {
            return;
        }
        self.found = true;
        if self.resolved.contains(id) || self.open.contains_key(id) {
            return;
        }
        if l.resolution.as_ref().is_some_and(|r| r.successful()) {
            self.resolved.insert(id.to_string());
            return;
        }
        self.seen += 1;
        if let Some(line) = ResolutionLine::of(&l, "", Resolution::default()) {
            self.open.insert(id.to_string(), (self.seen, line));
        }
    }

    /// The unresolved records picked, in log order.
    fn in_order(&self) -> Vec<&ResolutionLine> {
        let mut v: Vec<&(usize, ResolutionLine)> = self.open.values().collect();
        v.sort_by_key(|(n, _)| *n);
        v.into_iter().map(|(_, l)| l).collect()
    }
}

/// Appends the resolution of every record `sel` picks that is not resolved yet, copying the
/// ids that group each. The log is read without the lock (lines are never rewritten), then
/// the lines appended since are read under it, so two people resolving at once never
/// resolve one record twice.
///
/// A resolution that says a retry worked (`--successful true`, an action that starts with
/// `retry` or `recover`) is a success of the record's agent: its earlier open failures in the
/// workflow are resolved too, as `recovered_by_retry`.
pub fn resolve(cx: &Context, sel: &Selection, resolution: Resolution) -> Result<Resolved, Failure> {
    let root = cx.ensure_root()?;
    let mut picked = Picked::default();
    let scanned = error_log::scan(cx, &root, |bytes| picked.see(sel, bytes))?;
    if let (Some(id), false) = (&sel.id, picked.found) {
        return Err(Failure::data(format!(
            "no record with error_id `{id}` in {}; copy the id from record-error's output or `triage errors`",
            log_path(&root).display()
        )));
    }
    let at = cx.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let picked = std::cell::RefCell::new(picked);
    let lines = error_log::append_resolutions(
        cx,
        &root,
        Some(scanned),
        |bytes| picked.borrow_mut().see(sel, bytes),
        |_| {
            Ok(picked
                .borrow()
                .in_order()
                .into_iter()
                .map(|o| ResolutionLine {
                    timestamp: at.clone(),
                    resolution: resolution.clone(),
                    ..o.clone()
                })
                .collect())
        },
    )?;
    let mut done = Resolved {
        already_resolved: picked.borrow().resolved.len(),
        lines,
        recovered: Vec::new(),
    };
    let retried = resolution.successful == Some(true)
        && resolution.action_taken.as_deref().is_some_and(|a| {
            let a = a.trim().to_ascii_lowercase();
            a.starts_with("retry") || a.starts_with("recover")
        });
    if let (Some(id), true, Some(line)) = (&sel.id, retried, done.lines.first()) {
        let scope = line
            .workflow_id
            .as_deref()
            .or(line.session_id.as_deref())
            .unwrap_or("");
        if let Some(unit) = line.breaker_key.as_deref().or(line.agent.as_deref()) {
            let by = format!("record-error --resolve {id}");
            let r = error_log::Recovery {
                scope,
                unit,
                by: &by,
                upto: Some(id),
                started: None,
            };
            match error_log::recover(cx, &root, r) {
                Ok(more) => done.recovered = more,
                Err(f) => cx.warn(&format!(
                    "the agent's other open failures were not resolved: {f}"
                )),
            }
        }
    }
    Ok(done)
}

/// When a call that ran `elapsed_ms` and ended now started (now, when its duration is not
/// known).
pub fn started_at(cx: &Context, elapsed_ms: Option<u64>) -> DateTime<Utc> {
    elapsed_ms
        .and_then(|ms| chrono::Duration::try_milliseconds(i64::try_from(ms).ok()?))
        .and_then(|d| cx.now.checked_sub_signed(d))
        .unwrap_or(cx.now)
}

/// A success of `unit` (an agent, or a work item's breaker key) in `scope` (the workflow,
/// else the session), by a call that `started` then: its open failures there, recorded by
/// then, are resolved as `recovered_by_retry`. Best effort: returns the ids resolved, and a
/// failure (a busy log) is a warning that leaves them open for the next success or a person.
pub fn recovered(
    cx: &Context,
    scope: &str,
    unit: &str,
    by: &str,
    started: Option<DateTime<Utc>>,
) -> Vec<String> {
    let root = match cx.ensure_root() {
        Ok(r) => r,
        Err(f) => {
            cx.warn(&format!("{unit}'s earlier failures were not resolved: {f}"));
            return Vec::new();
        }
    };
    let r = error_log::Recovery {
        scope,
        unit,
        by,
        upto: None,
        started,
    };
    match error_log::recover(cx, &root, r) {
        Ok(lines) => lines.into_iter().map(|l| l.resolves).collect(),
        Err(f) => {
            cx.warn(&format!("{unit}'s earlier failures were not resolved: {f}"));
            Vec::new()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Input: an error object, a raw error, or a hook payload.

/// The error object for an input, as given: `status`, a `kind` that names one of SPEC §5's
/// kinds, else `unknown`, the message as `detail`, every other field as is. The classifier's
/// decision is laid over it by [`classified_record`].
pub fn error_fields(input: &Value) -> Map<String, Value> {
    let mut m = match input {
        Value::Object(o) => o.clone(),
        Value::Null => Map::new(),
        Value::String(s) => {
            let mut m = Map::new();
            m.insert("detail".into(), s.clone().into());
            m
        }
        other => {
            let mut m = Map::new();
            m.insert("detail".into(), other.to_string().into());
            m
        }
    };
    m.entry("status").or_insert_with(|| "error".into());
    let kind = ["kind", "error_type"]
        .iter()
        .filter_map(|k| m.get(*k).and_then(Value::as_str))
        .find_map(kind_word)
        .unwrap_or(Kind::Unknown);
    m.insert("kind".into(), kind.as_str().into());
    if !m.contains_key("detail") {
        let msg = ["error_message", "message", "error"]
            .iter()
            .find_map(|k| m.get(*k).and_then(Value::as_str).map(String::from));
        if let Some(msg) = msg {
            m.insert("detail".into(), msg.into());
        }
    }
    m
}

/// A kind written in SPEC §5's words or a seed's (`TIMEOUT`, `SKILL_TIMEOUT`).
fn kind_word(text: &str) -> Option<Kind> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_prefix("skill_").unwrap_or(&t);
    t.parse().ok()
}

const RECORD_FIELDS: &[&str] = &[
    "error_id",
    "timestamp",
    "session_id",
    "workflow_id",
    "phase",
    "stage",
    "agent",
    "skill",
    "task_id",
    "retry_count",
    "duration_ms",
    "preserved_outputs",
    "recovery_options",
    "resolution",
    "user_choice",
    "hook_event_name",
];

fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The record an input describes, its error object decided by the classifier (kind, tier,
/// retry advice, …); a kind the input names in a seed's words (`error_type: "TIMEOUT"`) is kept
/// when the classifier finds none.
pub fn classified_record(v: &Value, policy: &Policy, retry_count: Option<u32>) -> ErrorRecord {
    classified_at(v, policy, retry_count, None).0
}

/// [`classified_record`], with the classifier's error object as well (for the advice a hook
/// gives the model).
pub fn classified(
    v: &Value,
    policy: &Policy,
    retry_count: Option<u32>,
) -> (ErrorRecord, ErrorObject) {
    classified_at(v, policy, retry_count, None)
}

/// [`classified`] at time `now` (a usage limit's reset time becomes `retry_after_s`).
pub fn classified_at(
    v: &Value,
    policy: &Policy,
    retry_count: Option<u32>,
    now: Option<DateTime<Utc>>,
) -> (ErrorRecord, ErrorObject) {
    let v = &normalize(v);
    let mut rec = record_from_input(v);
    let given = std::mem::take(&mut rec.error);
    let overrides = Overrides {
        agent: rec.agent.clone(),
        attempt: retry_count.or(rec.retry_count).map(|n| n.saturating_add(1)),
        now,
        ..Overrides::default()
    };
    let object = classify::classify(v, &overrides, policy, 0);
    if let Ok(Value::Object(mut m)) = serde_json::to_value(&object) {
        if object.kind == Kind::Unknown {
            if let Some(k) = given.get("kind") {
                m.insert("kind".into(), k.clone());
            }
        }
        if v.get("hook_event_name").is_none() {
            keep_given(&mut m, given);
        }
        rec.error = m;
    } else {
        rec.error = given;
    }
    (rec, object)
}

/// Lays the input's own fields over the classifier's error object wherever the classifier
/// says nothing: nothing the caller wrote is dropped. `context` is merged (the caller's keys
/// win); the hook payload's own fields are not the caller's words and stay out.
fn keep_given(object: &mut Map<String, Value>, given: Map<String, Value>) {
    for (k, v) in given {
        match (k.as_str(), object.get_mut(&k), v) {
            ("context", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (ck, cv) in theirs {
                    mine.insert(ck, cv);
                }
            }
            (_, Some(_), _) => {}
            (_, None, v) => {
                object.insert(k, v);
            }
        }
    }
}

/// The record an input describes (ids from its fields; the rest is the error object).
pub fn record_from_input(v: &Value) -> ErrorRecord {
    let Some(obj) = v.as_object() else {
        return ErrorRecord {
            error: error_fields(v),
            ..ErrorRecord::default()
        };
    };
    if obj.contains_key("hook_event_name") {
        return record_from_hook(&Payload::new(v.clone()));
    }
    let rest: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| !RECORD_FIELDS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let phase = obj.get("phase").or_else(|| obj.get("stage"));
    let mut resolution = match obj.get("resolution") {
        Some(Value::String(s)) => Some(Resolution {
            action_taken: Some(s.clone()),
            ..Resolution::default()
        }),
        Some(r @ Value::Object(_)) => serde_json::from_value(r.clone()).ok(),
        _ => None,
    };
    if let Some(choice) = text_of(obj.get("user_choice")) {
        resolution
            .get_or_insert_with(Resolution::default)
            .user_choice = Some(choice);
    }
    ErrorRecord {
        timestamp: text_of(obj.get("timestamp")).unwrap_or_default(),
        session_id: text_of(obj.get("session_id")),
        workflow_id: text_of(obj.get("workflow_id")),
        phase: phase.and_then(|p| match p {
            Value::Number(n) => n.as_u64().map(Phase::Number),
            Value::String(s) if !s.is_empty() => Some(Phase::parse(s)),
            _ => None,
        }),
        agent: text_of(obj.get("agent")).or_else(|| text_of(obj.get("skill"))),
        task_id: text_of(obj.get("task_id")),
        retry_count: obj
            .get("retry_count")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        duration_ms: obj.get("duration_ms").and_then(Value::as_u64),
        preserved_outputs: strings(obj.get("preserved_outputs")),
        recovery_options: obj
            .get("recovery_options")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        resolution,
        error: error_fields(&Value::Object(rest)),
        ..ErrorRecord::default()
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A hook payload (`PostToolUseFailure`, `StopFailure`, …) as a record.
fn record_from_hook(p: &Payload) -> ErrorRecord {
    let mut raw = Map::new();
    let detail = p
        .error()
        .map(String::from)
        .or_else(|| p.tool_response_text());
    if let Some(d) = detail.filter(|d| !d.is_empty()) {
        raw.insert("detail".into(), d.into());
    }
    if p.is_interrupt() {
        raw.insert("kind".into(), Kind::Interrupted.as_str().into());
    }
    let mut context = Map::new();
    for key in [
        "hook_event_name",
        "tool_name",
        "tool_use_id",
        "error_details",
        "agent_id",
    ] {
        if let Some(v) = p.0.get(key).filter(|v| !v.is_null()) {
            context.insert(key.into(), v.clone());
        }
    }
    raw.insert("context".into(), Value::Object(context));
    let agent = if p.is_subagent_tool() {
        p.subagent_type()
    } else {
        p.agent_type().or_else(|| p.tool_name())
    };
    ErrorRecord {
        session_id: p.session_id().map(String::from),
        agent: agent.map(String::from),
        task_id: p.tool_use_id().map(String::from),
        duration_ms: p.duration_ms(),
        error: error_fields(&Value::Object(raw)),
        ..ErrorRecord::default()
    }
}

/// Flags override the input's fields.
fn apply_flags(rec: &mut ErrorRecord, a: &Args) {
    let set = |slot: &mut Option<String>, v: &Option<String>| {
        if let Some(v) = v {
            *slot = Some(v.clone());
        }
    };
    set(&mut rec.session_id, &a.session);
    set(&mut rec.workflow_id, &a.workflow);
    set(&mut rec.agent, &a.agent);
    set(&mut rec.task_id, &a.task);
    if let Some(p) = &a.phase {
        rec.phase = Some(Phase::parse(p));
    }
    if let Some(n) = a.retry_count {
        rec.retry_count = Some(n);
    }
    rec.preserved_outputs.extend(a.preserved.iter().cloned());
    if a.resolution.is_some() || a.user_choice.is_some() {
        let r = rec.resolution.get_or_insert_with(Resolution::default);
        set(&mut r.action_taken, &a.resolution);
        set(&mut r.user_choice, &a.user_choice);
    }
    if let Some(s) = a.severity {
        rec.error.insert("severity".into(), s.as_str().into());
    }
    if let Some(k) = a.kind {
        rec.error.insert("kind".into(), k.as_str().into());
    }
    if let Some(d) = &a.detail {
        rec.error.insert("detail".into(), d.clone().into());
    }
    if rec.error.is_empty() {
        rec.error = error_fields(&Value::Object(std::mem::take(&mut rec.error)));
    }
    if !rec.error.contains_key("kind") {
        rec.error
            .insert("kind".into(), Kind::Unknown.as_str().into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seed_000_log_lines_keep_their_meaning() {
        let r = record_from_input(&json!({
            "timestamp": "2026-02-04T14:30:22Z",
            "session_id": "session-20260204-143022-12345",
            "phase": 2,
            "agent": "statistician-consultant",
            "error_type": "timeout",
            "error_message": "Agent exceeded 5 minute timeout",
            "retry_count": 2,
            "resolution": "user_escalation",
            "user_choice": "proceed_without"
        }));
        assert_eq!(r.kind(), Some("timeout"));
        assert_eq!(r.phase, Some(Phase::Number(2)));
        assert_eq!(r.retry_count, Some(2));
        assert_eq!(r.error["detail"], "Agent exceeded 5 minute timeout");
        let res = r.resolution.expect("resolution");
        assert_eq!(res.action_taken.as_deref(), Some("user_escalation"));
        assert_eq!(res.user_choice.as_deref(), Some("proceed_without"));
        assert!(!r.error.contains_key("session_id"));
    }

    #[test]
    fn raw_text_becomes_an_unknown_error_with_its_detail() {
        let r = record_from_input(&json!("connection reset by peer"));
        assert_eq!(r.kind(), Some("unknown"));
        assert_eq!(r.error["detail"], "connection reset by peer");
        assert_eq!(r.error["status"], "error");
    }

    #[test]
    fn hook_payloads_name_the_subagent_and_session() {
        let r = record_from_input(&json!({
            "hook_event_name": "PostToolUseFailure",
            "session_id": "s9",
            "tool_name": "Agent",
            "tool_input": {"subagent_type": "researcher"},
            "tool_use_id": "toolu_1",
            "error": "Command timed out after 2m 0s",
            "duration_ms": 120000
        }));
        assert_eq!(r.session_id.as_deref(), Some("s9"));
        assert_eq!(r.agent.as_deref(), Some("researcher"));
        assert_eq!(r.duration_ms, Some(120_000));
        assert_eq!(r.error["detail"], "Command timed out after 2m 0s");
        assert_eq!(r.error["context"]["hook_event_name"], "PostToolUseFailure");
    }

    #[test]
    fn seed_001_error_types_map_to_kinds() {
        assert_eq!(kind_word("SKILL_TIMEOUT"), Some(Kind::Timeout));
        assert_eq!(kind_word("rate_limited"), Some(Kind::RateLimited));
        assert_eq!(kind_word("QUALITY_FAILURE"), None);
    }
}
