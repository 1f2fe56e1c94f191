//! The error record (SPEC §5, seeds 000, 001 and 002 unified), the resolution line that
//! `record-error --resolve` appends for an earlier record, the borrowed view a reader parses
//! each log line into, and the threshold counters with their pure threshold logic.
//!
//! Nothing here opens a file or reads the clock: the command hands in `now` and the policy.

use crate::policy::Thresholds;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A phase: a number in seed 000 (`"phase": 2`), a name elsewhere.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Phase {
    /// `2`
    Number(u64),
    /// `"review"`
    Name(String),
}

impl Phase {
    /// A number when the text is one, else a name.
    pub fn parse(text: &str) -> Phase {
        match text.trim().parse::<u64>() {
            Ok(n) => Phase::Number(n),
            Err(_) => Phase::Name(text.trim().to_string()),
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Number(n) => write!(f, "{n}"),
            Phase::Name(s) => f.write_str(s),
        }
    }
}

/// What was done about an error (seed 002's `resolution`, seed 000's `user_choice`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// What was done: `retry`, `user_escalation`, `proceed_without`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_taken: Option<String>,
    /// Whether it worked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful: Option<bool>,
    /// What the person chose, when one was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_choice: Option<String>,
}

/// One line of `logs/errors.jsonl`: the error object plus the ids that place it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorRecord {
    /// Unique and sortable by time: `err-20260204T143022123Z-000042`.
    #[serde(default)]
    pub error_id: String,
    /// RFC 3339, UTC, milliseconds.
    #[serde(default)]
    pub timestamp: String,
    /// The agent session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The workflow (seed 001's cascade scope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// The phase or stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The agent, skill or tool that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Retries already made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<u32>,
    /// How long the failed call ran (Claude Code sends it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Partial outputs kept (seed 001).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preserved_outputs: Vec<String>,
    /// The options offered (seed 001).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recovery_options: Vec<Value>,
    /// What was done about it, when known at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
    /// The error object: `status`, `kind`, `detail`, `suggestions`, `retryable`, `context`, …
    #[serde(flatten)]
    pub error: Map<String, Value>,
}

impl ErrorRecord {
    /// The error object's `kind`, if any.
    pub fn kind(&self) -> Option<&str> {
        self.error.get("kind").and_then(Value::as_str)
    }
}

/// A line appended by `record-error --resolve`: the resolution of an earlier record, with
/// copies of the ids that group it, so a reader needs no join (and no memory) to count it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResolutionLine {
    /// The `error_id` this resolves.
    pub resolves: String,
    /// When it was resolved.
    pub timestamp: String,
    /// Copied from the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Copied from the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// Copied from the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Copied from the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Copied from the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Copied from the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// What was done.
    pub resolution: Resolution,
}

/// An `error_id` unique without the log's lock (a record spooled while the log was busy, or
/// a sequence that ran out): the time, then the process id and a random part. Its last part
/// is not a number, so it never counts as a sequence number.
pub fn unique_error_id(millis: i64, random: u64) -> String {
    let t = chrono::DateTime::from_timestamp_millis(millis).unwrap_or_default();
    format!(
        "err-{}-p{}x{random:08x}",
        t.format("%Y%m%dT%H%M%S%3fZ"),
        std::process::id()
    )
}

/// The marker that ends a text cut to keep a record within the log's line limit.
pub fn cut_marker(cut: usize) -> String {
    format!("…[truncated {cut} bytes]")
}

/// Cuts a record (as JSON) until it serializes within `max` bytes: first every long text,
/// more and more (each ends with [`cut_marker`]), then, if that is not enough, everything
/// but the ids and the error's short fields. Returns whether anything was cut.
pub fn fit(record: &mut Value, max: usize) -> bool {
    let size = |v: &Value| serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
    if size(record) <= max {
        return false;
    }
    let mut limit = 16 * 1024;
    while limit >= 64 {
        cut_texts(record, limit);
        if size(record) <= max {
            return true;
        }
        limit /= 4;
    }
    // Very many short fields: keep the ids and the short top-level texts and numbers.
    let Value::Object(m) = record else {
        *record = Value::Null;
        return true;
    };
    let mut kept = Map::new();
    let mut used = 32;
    for (k, v) in std::mem::take(m) {
        let short = match &v {
            Value::String(s) => s.len() <= 256,
            Value::Number(_) | Value::Bool(_) | Value::Null => true,
            _ => false,
        };
        let len = k.len() + serde_json::to_vec(&v).map_or(usize::MAX, |b| b.len()) + 8;
        if short && used + len <= max {
            used += len;
            kept.insert(k, v);
        }
    }
    kept.insert("truncated".into(), Value::Bool(true));
    *m = kept;
    true
}

/// Cuts every text in `v` longer than `limit` bytes (at a character boundary), without
/// recursion: a record can be deep.
fn cut_texts(v: &mut Value, limit: usize) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if s.len() > limit => {
                let mut cut = limit;
                while !s.is_char_boundary(cut) {
                    cut -= 1;
                }
                let dropped = s.len() - cut;
                s.truncate(cut);
                s.push_str(&cut_marker(dropped));
            }
            Value::Array(a) => stack.extend(a.iter_mut()),
            Value::Object(m) => stack.extend(m.values_mut()),
            _ => {}
        }
    }
}

/// `error_id` for the `seq`-th record written at `millis` (Unix milliseconds): the time first,
/// so ids sort by time, and the sequence kept under the log's lock, so no two are equal.
pub fn error_id(millis: i64, seq: u64) -> String {
    let t = chrono::DateTime::from_timestamp_millis(millis).unwrap_or_default();
    format!("err-{}-{seq:06}", t.format("%Y%m%dT%H%M%S%3fZ"))
}

// ---------------------------------------------------------------------------------------------
// The borrowed view of a log line.

/// A phase as a reader sees it, without allocating.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum PhaseRef<'a> {
    /// A number.
    Number(u64),
    /// A name.
    #[serde(borrow)]
    Name(Cow<'a, str>),
}

impl PhaseRef<'_> {
    /// The owned phase.
    pub fn to_phase(&self) -> Phase {
        match self {
            PhaseRef::Number(n) => Phase::Number(*n),
            PhaseRef::Name(s) => Phase::Name(s.to_string()),
        }
    }
}

/// The resolution as a reader sees it: an object, or seed 000's plain string.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ResolutionRef<'a> {
    /// `{action_taken, successful, user_choice}`
    Object {
        /// What was done.
        #[serde(default, borrow)]
        action_taken: Option<Cow<'a, str>>,
        /// Whether it worked.
        #[serde(default)]
        successful: Option<bool>,
    },
    /// `"user_escalation"`
    #[serde(borrow)]
    Text(Cow<'a, str>),
}

impl ResolutionRef<'_> {
    /// True when the resolution says it worked.
    pub fn successful(&self) -> bool {
        matches!(
            self,
            ResolutionRef::Object {
                successful: Some(true),
                ..
            }
        )
    }

    /// What was done, if said.
    pub fn action(&self) -> Option<&str> {
        match self {
            ResolutionRef::Object { action_taken, .. } => action_taken.as_deref(),
            ResolutionRef::Text(t) => Some(t),
        }
    }
}

/// One log line, parsed only as far as a reader needs: strings borrowed where the JSON has no
/// escapes, every other field skipped. Seed spellings are accepted (`error_type`, `skill`,
/// `stage`, `error_message`, `message`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct LogLine<'a> {
    /// Set on records.
    #[serde(default, borrow)]
    pub error_id: Option<Cow<'a, str>>,
    /// Set on resolution lines.
    #[serde(default, borrow)]
    pub resolves: Option<Cow<'a, str>>,
    /// RFC 3339.
    #[serde(default, borrow)]
    pub timestamp: Option<Cow<'a, str>>,
    /// Session.
    #[serde(default, borrow)]
    pub session_id: Option<Cow<'a, str>>,
    /// Workflow.
    #[serde(default, borrow)]
    pub workflow_id: Option<Cow<'a, str>>,
    /// Phase.
    #[serde(default, borrow)]
    pub phase: Option<PhaseRef<'a>>,
    /// Seed 002's word for a phase.
    #[serde(default, borrow)]
    pub stage: Option<PhaseRef<'a>>,
    /// Agent.
    #[serde(default, borrow)]
    pub agent: Option<Cow<'a, str>>,
    /// Seed 001's word for an agent.
    #[serde(default, borrow)]
    pub skill: Option<Cow<'a, str>>,
    /// Kind.
    #[serde(default, borrow)]
    pub kind: Option<Cow<'a, str>>,
    /// Seeds 000–002's word for a kind.
    #[serde(default, borrow)]
    pub error_type: Option<Cow<'a, str>>,
    /// Category.
    #[serde(default, borrow)]
    pub category: Option<Cow<'a, str>>,
    /// The message.
    #[serde(default, borrow)]
    pub detail: Option<Cow<'a, str>>,
    /// Seed 000's message.
    #[serde(default, borrow)]
    pub error_message: Option<Cow<'a, str>>,
    /// Seed 001's message.
    #[serde(default, borrow)]
    pub message: Option<Cow<'a, str>>,
    /// Retries made.
    #[serde(default)]
    pub retry_count: Option<u64>,
    /// How long the call ran.
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// What was done.
    #[serde(default, borrow)]
    pub resolution: Option<ResolutionRef<'a>>,
    /// Partial outputs kept.
    #[serde(default, borrow)]
    pub preserved_outputs: Option<Lenient<Vec<Cow<'a, str>>>>,
    /// The error's context, for `last_progress` (seed 001).
    #[serde(default)]
    pub context: Option<ContextRef>,
    /// Seed 001's severity, for `triage errors`.
    #[serde(default, borrow)]
    pub severity: Option<Cow<'a, str>>,
}

/// A nested field that, when it has another shape than expected, is ignored rather than
/// making the whole line unreadable.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Lenient<T> {
    /// The expected shape.
    Value(T),
    /// Anything else.
    Other(serde::de::IgnoredAny),
}

impl<T> Lenient<T> {
    /// The value, when it had the expected shape.
    pub fn get(&self) -> Option<&T> {
        match self {
            Lenient::Value(v) => Some(v),
            Lenient::Other(_) => None,
        }
    }
}

/// The part of an error's `context` a reader uses. Read field by field, skipping the rest
/// without buffering it, and ignored whole when `context` is not an object: most records
/// carry a context, so this is on the report's hot path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextRef {
    /// Seed 001's "Last progress".
    pub last_progress: Option<String>,
}

impl<'de> Deserialize<'de> for ContextRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContextVisitor)
    }
}

struct ContextVisitor;

struct IsLastProgress(bool);

impl<'de> Deserialize<'de> for IsLastProgress {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct K;
        impl serde::de::Visitor<'_> for K {
            type Value = IsLastProgress;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, v: &str) -> Result<IsLastProgress, E> {
                Ok(IsLastProgress(v == "last_progress"))
            }
        }
        d.deserialize_str(K)
    }
}

impl<'de> serde::de::Visitor<'de> for ContextVisitor {
    type Value = ContextRef;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<ContextRef, A::Error> {
        let mut out = ContextRef::default();
        while let Some(IsLastProgress(wanted)) = m.next_key()? {
            if wanted {
                if let Value::String(s) = m.next_value::<Value>()? {
                    out.last_progress = Some(s);
                }
            } else {
                m.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(out)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<ContextRef, A::Error> {
        while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(ContextRef::default())
    }
    fn visit_bool<E>(self, _: bool) -> Result<ContextRef, E> {
        Ok(ContextRef::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<ContextRef, E> {
        Ok(ContextRef::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<ContextRef, E> {
        Ok(ContextRef::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<ContextRef, E> {
        Ok(ContextRef::default())
    }
    fn visit_str<E>(self, _: &str) -> Result<ContextRef, E> {
        Ok(ContextRef::default())
    }
    fn visit_unit<E>(self) -> Result<ContextRef, E> {
        Ok(ContextRef::default())
    }
}

impl<'a> LogLine<'a> {
    /// Parses one line; `None` when it is not a JSON object (a torn or foreign line).
    pub fn parse(bytes: &'a [u8]) -> Option<LogLine<'a>> {
        serde_json::from_slice(bytes).ok()
    }

    /// True for a resolution line appended by `--resolve`.
    pub fn is_resolution(&self) -> bool {
        self.resolves.is_some()
    }

    /// The agent, by any of its names.
    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref().or(self.skill.as_deref())
    }

    /// The phase, by either of its names.
    pub fn phase(&self) -> Option<&PhaseRef<'a>> {
        self.phase.as_ref().or(self.stage.as_ref())
    }

    /// The kind, by either of its names.
    pub fn kind(&self) -> Option<&str> {
        self.kind.as_deref().or(self.error_type.as_deref())
    }

    /// The message, by any of its names.
    pub fn detail(&self) -> Option<&str> {
        self.detail
            .as_deref()
            .or(self.error_message.as_deref())
            .or(self.message.as_deref())
    }
}

// ---------------------------------------------------------------------------------------------
// Threshold counters.

/// Small counters kept beside the log, under its lock, so thresholds never re-read the log.
///
/// They are a cache of the log up to byte `log_len`: when the log's length differs (a crash
/// between the append and the counters' write, an edit, a prune), they are rebuilt from it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counters {
    /// Format version.
    pub version: u32,
    /// The log's length when these were last brought up to date.
    pub log_len: u64,
    /// The log's inode then: another inode is another file (a prune replaced it), so these
    /// no longer describe it.
    pub log_ino: u64,
    /// The last sequence number handed out for an `error_id`.
    pub seq: u64,
    /// Error records per session.
    pub sessions: BTreeMap<String, u64>,
    /// Distinct failing agents per workflow.
    pub workflows: BTreeMap<String, BTreeSet<String>>,
    /// Distinct failing agents per phase (keyed by workflow or session, then phase).
    pub phases: BTreeMap<String, BTreeSet<String>>,
}

/// The format version written now.
pub const COUNTERS_VERSION: u32 = 1;

/// The ids a threshold looks at, taken from a record or a log line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Keys<'a> {
    /// Session.
    pub session: Option<&'a str>,
    /// Workflow.
    pub workflow: Option<&'a str>,
    /// Phase, written out.
    pub phase: Option<&'a str>,
    /// Agent.
    pub agent: Option<&'a str>,
}

fn phase_key(k: &Keys) -> Option<String> {
    let phase = k.phase?;
    let scope = k.workflow.or(k.session).unwrap_or("");
    Some(format!("{scope}\u{1f}{phase}"))
}

impl Counters {
    /// Empty counters of the current version.
    pub fn new() -> Counters {
        Counters {
            version: COUNTERS_VERSION,
            ..Counters::default()
        }
    }

    /// Counts one error record.
    pub fn count(&mut self, k: &Keys) {
        if let Some(s) = k.session {
            *self.sessions.entry(s.to_string()).or_default() += 1;
        }
        let Some(agent) = k.agent else {
            return;
        };
        if let Some(w) = k.workflow {
            self.workflows
                .entry(w.to_string())
                .or_default()
                .insert(agent.to_string());
        }
        if let Some(p) = phase_key(k) {
            self.phases.entry(p).or_default().insert(agent.to_string());
        }
    }

    /// Counts one log line (resolution lines and foreign lines are not failures).
    pub fn count_line(&mut self, line: &LogLine) {
        if line.is_resolution() || line.error_id.is_none() {
            return;
        }
        let phase = line.phase().map(|p| match p {
            PhaseRef::Number(n) => n.to_string(),
            PhaseRef::Name(s) => s.to_string(),
        });
        self.count(&Keys {
            session: line.session_id.as_deref(),
            workflow: line.workflow_id.as_deref(),
            phase: phase.as_deref(),
            agent: line.agent(),
        });
        if let Some(seq) = line
            .error_id
            .as_deref()
            .and_then(|id| id.rsplit('-').next())
            .and_then(|n| n.parse::<u64>().ok())
        {
            self.seq = self.seq.max(seq);
        }
    }
}

/// A threshold crossed, as `record-error` reports it in `warnings`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    /// `session_failure_threshold`, `cascade` or `phase_failure_ratio`.
    pub name: String,
    /// What it means and what to do, for a person or an agent.
    pub message: String,
    /// What was counted.
    pub count: u64,
    /// The threshold it crossed.
    pub threshold: f64,
    /// The failing agents, where that is what was counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
}

/// The thresholds the record with `keys` crosses, once it has been counted.
pub fn warnings(c: &Counters, k: &Keys, t: &Thresholds, phase_size: Option<u32>) -> Vec<Warning> {
    let mut out = Vec::new();
    if let Some(s) = k.session {
        let n = c.sessions.get(s).copied().unwrap_or(0);
        if t.session_failures > 0 && n >= u64::from(t.session_failures) {
            out.push(Warning {
                name: "session_failure_threshold".into(),
                message: format!(
                    "session {s} has had {n} failures (threshold {}): consider aborting the workflow and troubleshooting",
                    t.session_failures
                ),
                count: n,
                threshold: f64::from(t.session_failures),
                agents: Vec::new(),
            });
        }
    }
    if let Some(agents) = k.workflow.and_then(|w| c.workflows.get(w)) {
        let n = agents.len() as u64;
        if n > u64::from(t.cascade_agents) {
            out.push(Warning {
                name: "cascade".into(),
                message: format!(
                    "{n} agents have failed in workflow {}, more than {}: pause the workflow, stop automatic retries and escalate with the full context",
                    k.workflow.unwrap_or_default(),
                    t.cascade_agents
                ),
                count: n,
                threshold: f64::from(t.cascade_agents),
                agents: agents.iter().cloned().collect(),
            });
        }
    }
    if let (Some(size), Some(agents)) = (
        phase_size.filter(|s| *s > 0),
        phase_key(k).and_then(|p| c.phases.get(&p)),
    ) {
        let n = agents.len() as u64;
        if n as f64 / f64::from(size) > t.phase_failure_ratio {
            out.push(Warning {
                name: "phase_failure_ratio".into(),
                message: format!(
                    "{n} of {size} agents failed in phase {}, more than {}%: abort the phase and escalate (retry all, return to the previous phase, or abort)",
                    k.phase.unwrap_or_default(),
                    (t.phase_failure_ratio * 100.0).round()
                ),
                count: n,
                threshold: t.phase_failure_ratio,
                agents: agents.iter().cloned().collect(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys<'a>(s: &'a str, w: &'a str, p: &'a str, a: &'a str) -> Keys<'a> {
        Keys {
            session: Some(s),
            workflow: Some(w),
            phase: Some(p),
            agent: Some(a),
        }
    }

    fn names(w: &[Warning]) -> Vec<&str> {
        w.iter().map(|w| w.name.as_str()).collect()
    }

    #[test]
    fn fifth_error_in_a_session_crosses_the_session_threshold() {
        let t = Thresholds::default();
        let mut c = Counters::new();
        for i in 1..=5 {
            let k = keys("s1", "w1", "2", "researcher");
            c.count(&k);
            let w = warnings(&c, &k, &t, None);
            assert_eq!(
                names(&w).contains(&"session_failure_threshold"),
                i == 5,
                "{i}"
            );
        }
        assert!(warnings(&c, &keys("s2", "w9", "2", "x"), &t, None).is_empty());
    }

    #[test]
    fn third_distinct_failing_agent_is_a_cascade() {
        let t = Thresholds::default();
        let mut c = Counters::new();
        for (i, agent) in ["a", "a", "b", "c"].iter().enumerate() {
            let k = keys(&"s1x"[..(i % 2) + 2], "w1", "2", agent);
            c.count(&k);
            let w = warnings(&c, &k, &t, None);
            assert_eq!(names(&w) == ["cascade"], i == 3, "{i}: {w:?}");
        }
    }

    #[test]
    fn more_than_half_of_a_phase_is_a_phase_failure() {
        let t = Thresholds::default();
        let mut c = Counters::new();
        let k = keys("s", "w", "2", "a");
        c.count(&k);
        assert!(
            warnings(&c, &k, &t, Some(2)).is_empty(),
            "1 of 2 is not more than half"
        );
        let k = keys("s", "w", "2", "b");
        c.count(&k);
        assert_eq!(
            names(&warnings(&c, &k, &t, Some(3))),
            ["phase_failure_ratio"]
        );
        assert!(warnings(&c, &k, &t, None).is_empty(), "size unknown");
        assert!(warnings(&c, &k, &t, Some(4)).is_empty());
    }

    #[test]
    fn a_record_is_cut_to_fit_with_a_marker() {
        let mut r = serde_json::json!({
            "error_id": "e",
            "session_id": "s",
            "detail": "d".repeat(1 << 20),
            "context": {"tool_response": "r".repeat(200_000), "n": 1},
        });
        assert!(fit(&mut r, 60 * 1024));
        let len = serde_json::to_vec(&r)
            .map(|b| b.len())
            .unwrap_or(usize::MAX);
        assert!(len <= 60 * 1024, "{len}");
        assert_eq!(r["session_id"], "s");
        let detail = r["detail"].as_str().unwrap_or_default();
        assert!(
            detail.ends_with("bytes]") && detail.contains("…[truncated"),
            "{}",
            &detail[detail.len() - 40..]
        );
        assert_eq!(r["context"]["n"], 1);
        // Many small fields: the ids stay.
        let mut wide = serde_json::json!({"error_id": "e"});
        for i in 0..20_000 {
            wide[format!("k{i}")] = serde_json::json!([i]);
        }
        assert!(fit(&mut wide, 60 * 1024));
        assert_eq!(wide["error_id"], "e");
        assert_eq!(wide["truncated"], true);
        let mut small = serde_json::json!({"a": 1});
        assert!(!fit(&mut small, 100));
    }

    #[test]
    fn unique_ids_never_count_as_a_sequence() {
        let mut c = Counters::new();
        let id = unique_error_id(1_770_215_422_123, 0xabc);
        assert!(id.starts_with("err-20260204T143022123Z-p"), "{id}");
        let line = format!(r#"{{"error_id":"{id}","session_id":"s"}}"#);
        c.count_line(&LogLine::parse(line.as_bytes()).expect("parses"));
        assert_eq!(c.seq, 0);
    }

    #[test]
    fn ids_sort_by_time_then_sequence() {
        let a = error_id(1_770_215_422_123, 41);
        let b = error_id(1_770_215_422_123, 42);
        let c = error_id(1_770_215_423_000, 7);
        assert_eq!(a, "err-20260204T143022123Z-000041");
        assert!(a < b && b < c);
    }

    #[test]
    fn log_lines_accept_the_seeds_spellings() {
        let l = LogLine::parse(
            br#"{"timestamp":"2026-02-04T14:30:22Z","session_id":"s","stage":2,"skill":"researcher","error_type":"timeout","message":"m","resolution":"user_escalation","x":[1,{"y":2}]}"#,
        )
        .expect("parses");
        assert_eq!(l.agent(), Some("researcher"));
        assert_eq!(l.phase(), Some(&PhaseRef::Number(2)));
        assert_eq!(l.kind(), Some("timeout"));
        assert_eq!(l.detail(), Some("m"));
        assert_eq!(
            l.resolution.as_ref().and_then(|r| r.action()),
            Some("user_escalation")
        );
        assert!(LogLine::parse(b"[1,2]").is_none());
        assert!(LogLine::parse(b"{\"a\":").is_none());
    }

    #[test]
    fn counters_rebuilt_from_lines_match_counting_records() {
        let mut c = Counters::new();
        let line = br#"{"error_id":"err-20260204T143022123Z-000042","session_id":"s","workflow_id":"w","phase":"2","agent":"a"}"#;
        c.count_line(&LogLine::parse(line).expect("parses"));
        c.count_line(&LogLine::parse(br#"{"resolves":"err-x","session_id":"s"}"#).expect("parses"));
        let mut d = Counters::new();
        d.count(&keys("s", "w", "2", "a"));
        d.seq = 42;
        assert_eq!(c, d);
    }

    #[test]
    fn records_round_trip_with_the_error_object_flattened() {
        let r: ErrorRecord = serde_json::from_str(
            r#"{"error_id":"e","timestamp":"t","phase":2,"status":"error","kind":"timeout","context":{"a":1}}"#,
        )
        .expect("parses");
        assert_eq!(r.kind(), Some("timeout"));
        assert_eq!(r.phase, Some(Phase::Number(2)));
        let back = serde_json::to_value(&r).expect("serializes");
        assert_eq!(back["context"]["a"], 1);
        assert_eq!(back["phase"], 2);
    }
}
