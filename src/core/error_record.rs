//! The error record (SPEC §5, seeds 000, 001 and 002 unified), the resolution line that
//! `record-error --resolve` appends for an earlier record, the borrowed view a reader parses
//! each log line into, and the threshold counters with their pure threshold logic.
//!
//! Nothing here opens a file or reads the clock: the command hands in `now` and the policy.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

mod counts;
mod input;
pub mod parse;

pub use counts::{
    breaker_reopened, warnings, Counters, Keys, OpenCounts, Warning, COUNTERS_VERSION,
};
pub use input::{classified_at, classified_record, error_fields, record_from_input};

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
    /// True when triage resolved it itself (a later success of the same agent), not a person.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub automatic: bool,
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
    /// The breaker of this work item, when it has one of its own (`--breaker`, or the policy's
    /// `breaker_key`): the unit whose failures a later success resolves, instead of the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker_key: Option<String>,
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
    /// False for a record kept out of the thresholds (`counts_toward_thresholds: false`).
    pub fn counts_toward_thresholds(&self) -> bool {
        self.error.get("counts_toward_thresholds") != Some(&Value::Bool(false))
    }

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
    pub breaker_key: Option<String>,
    /// Copied from the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Copied from the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// What was done.
    pub resolution: Resolution,
    /// What resolved it, for an automatic resolution: `run`, `hook PostToolUse`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Copied from a record kept out of the thresholds (`false`), so its resolution closes
    /// nothing either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts_toward_thresholds: Option<bool>,
}

impl ResolutionLine {
    /// The resolution of the record `l` (its id and the ids that group it, copied), with
    /// `resolution` at `timestamp`; `None` for a line that is not a record.
    pub fn of(l: &LogLine, timestamp: &str, resolution: Resolution) -> Option<ResolutionLine> {
        if l.is_resolution() {
            return None;
        }
        Some(ResolutionLine {
            resolves: l.error_id.as_deref()?.to_string(),
            timestamp: timestamp.to_string(),
            session_id: l.session_id.as_deref().map(String::from),
            workflow_id: l.workflow_id.as_deref().map(String::from),
            phase: l.phase().map(|p| p.to_phase()),
            agent: l.agent().map(String::from),
            breaker_key: l.breaker_key.as_deref().map(String::from),
            kind: l.kind().map(String::from),
            category: l.category.as_deref().map(String::from),
            resolution,
            by: None,
            counts_toward_thresholds: l.counts_toward_thresholds,
        })
    }

    /// Whether this line closes its record: every resolution does, except one that says it
    /// did not work (`successful: false`), and none closes an interrupt (never opened).
    pub fn closes(&self) -> bool {
        self.resolution.successful != Some(false)
            && self.kind.as_deref() != Some(crate::core::vocab::Kind::Interrupted.as_str())
            && self.counts_toward_thresholds != Some(false)
    }
}

/// The failure left breaker `key` open after `failures` consecutive failures: its next call is
/// denied until the cooldown ends, so a retry advised now would not happen. An error whose
/// `action` is `retry` becomes `escalate` (no `retry` advice, the reason in
/// `context.action_reason`), as the hook's and `run`'s answers say; the reason is returned.
/// Any other action stands (`None`).
pub fn no_retry_while_open(error: &mut Map<String, Value>, key: &str) -> Option<String> {
    if error.get("action").and_then(Value::as_str) != Some("retry") {
        return None;
    }
    let why = format!(
        "the breaker `{key}` is open after this failure, so the next call is denied until its cooldown ends"
    );
    error.insert("action".into(), Value::from("escalate"));
    error.insert("retry".into(), Value::Null);
    match error.get_mut("context") {
        Some(Value::Object(c)) => {
            c.insert("action_reason".into(), Value::from(why.clone()));
        }
        _ => {
            let mut c = Map::new();
            c.insert("action_reason".into(), Value::from(why.clone()));
            error.insert("context".into(), Value::Object(c));
        }
    }
    Some(why)
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PhaseRef<'a> {
    /// A number.
    Number(u64),
    /// A name.
    Name(Cow<'a, str>),
}

/// A number that fits a `u64`, or a string (borrowed when it has no escapes); anything else
/// is an error, as it was when this was an untagged enum. Written by hand because an untagged
/// enum first copies the value into a buffer of its own, on every record that has a phase.
impl<'de: 'a, 'a> Deserialize<'de> for PhaseRef<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = PhaseRef<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a phase number or name")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<PhaseRef<'a>, E> {
                Ok(PhaseRef::Number(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<PhaseRef<'a>, E> {
                u64::try_from(n)
                    .map(PhaseRef::Number)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(n), &self))
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                s: &'de str,
            ) -> Result<PhaseRef<'a>, E> {
                Ok(PhaseRef::Name(Cow::Borrowed(s)))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<PhaseRef<'a>, E> {
                Ok(PhaseRef::Name(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<PhaseRef<'a>, E> {
                Ok(PhaseRef::Name(Cow::Owned(s)))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
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
        /// What the person chose.
        #[serde(default, borrow)]
        user_choice: Option<Cow<'a, str>>,
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

    /// True when the resolution says it did not work.
    pub fn failed(&self) -> bool {
        matches!(
            self,
            ResolutionRef::Object {
                successful: Some(false),
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

    /// What the person chose, if said.
    pub fn user_choice(&self) -> Option<&str> {
        match self {
            ResolutionRef::Object { user_choice, .. } => user_choice.as_deref(),
            ResolutionRef::Text(_) => None,
        }
    }
}

/// One log line, parsed only as far as a reader needs: strings borrowed where the JSON has no
/// escapes, every other field skipped. Seed spellings are accepted (`error_type`, `skill`,
/// `stage`, `error_message`, `message`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct LogLine<'a> {
    /// Set on records.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub error_id: Option<Cow<'a, str>>,
    /// Set on resolution lines.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub resolves: Option<Cow<'a, str>>,
    /// RFC 3339.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub timestamp: Option<Cow<'a, str>>,
    /// Session.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub session_id: Option<Cow<'a, str>>,
    /// Workflow.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub workflow_id: Option<Cow<'a, str>>,
    /// Phase.
    #[serde(default, borrow)]
    pub phase: Option<PhaseRef<'a>>,
    /// Seed 002's word for a phase.
    #[serde(default, borrow)]
    pub stage: Option<PhaseRef<'a>>,
    /// Agent.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub agent: Option<Cow<'a, str>>,
    /// Seed 001's word for an agent.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub skill: Option<Cow<'a, str>>,
    /// The work item's own breaker, when it has one.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub breaker_key: Option<Cow<'a, str>>,
    /// Kind.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub kind: Option<Cow<'a, str>>,
    /// Seeds 000–002's word for a kind.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub error_type: Option<Cow<'a, str>>,
    /// Category.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub category: Option<Cow<'a, str>>,
    /// The message.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub detail: Option<Cow<'a, str>>,
    /// Seed 000's message.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub error_message: Option<Cow<'a, str>>,
    /// Seed 001's message.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
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
    /// `false` on a record kept for the log that does not count toward the thresholds (a
    /// failure of a tool no breaker guards, under the default policy).
    #[serde(default)]
    pub counts_toward_thresholds: Option<bool>,
    /// Seed 001's severity, for `triage errors`.
    #[serde(default, borrow, deserialize_with = "borrowed_str")]
    pub severity: Option<Cow<'a, str>>,
}

/// An optional string, borrowed from the line when it has no escapes. (serde borrows a bare
/// `Cow<str>` field marked `borrow`, but reads an `Option<Cow<str>>` into a new `String`:
/// nine allocations and frees on every record of a report.) Accepts and rejects what
/// `Option<Cow<str>>` does: null, or a string.
fn borrowed_str<'de: 'a, 'a, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    struct Str<'a>(std::marker::PhantomData<&'a ()>);
    impl<'de: 'a, 'a> serde::de::Visitor<'de> for Str<'a> {
        type Value = Cow<'a, str>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> Result<Cow<'a, str>, E> {
            Ok(Cow::Borrowed(s))
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Cow<'a, str>, E> {
            Ok(Cow::Owned(s.to_owned()))
        }
        fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Cow<'a, str>, E> {
            Ok(Cow::Owned(s))
        }
        fn visit_bytes<E: serde::de::Error>(self, b: &[u8]) -> Result<Cow<'a, str>, E> {
            std::str::from_utf8(b)
                .map(|s| Cow::Owned(s.to_owned()))
                .map_err(|_| E::invalid_value(serde::de::Unexpected::Bytes(b), &self))
        }
    }
    struct Opt<'a>(std::marker::PhantomData<&'a ()>);
    impl<'de: 'a, 'a> serde::de::Visitor<'de> for Opt<'a> {
        type Value = Option<Cow<'a, str>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string or null")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(Str(std::marker::PhantomData)).map(Some)
        }
    }
    d.deserialize_option(Opt(std::marker::PhantomData))
}

/// A nested field that, when it has another shape than expected, is ignored rather than
/// making the whole line unreadable.
#[derive(Clone, Debug)]
pub enum Lenient<T> {
    /// The expected shape.
    Value(T),
    /// Anything else.
    Other(serde::de::IgnoredAny),
}

/// A list of strings (each borrowed when it has no escapes), or — any other value, or a list
/// with anything but strings in it — [`Lenient::Other`]. Read in one pass without buffering
/// (an untagged enum copied the value into a buffer of its own first, on every record); what
/// is not kept is read as [`AnyValue`], so the same lines as before are rejected.
impl<'de: 'a, 'a> Deserialize<'de> for Lenient<Vec<Cow<'a, str>>> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        /// One item of the list: a string, or anything else (skipped).
        struct Item<'a>(Option<Cow<'a, str>>);
        impl<'de: 'a, 'a> Deserialize<'de> for Item<'a> {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(ItemVisitor(std::marker::PhantomData))
            }
        }
        struct ItemVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for ItemVisitor<'a> {
            type Value = Item<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Item<'a>, E> {
                Ok(Item(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Item<'a>, E> {
                Ok(Item(Some(Cow::Owned(s.to_owned()))))
            }
            fn visit_string<E>(self, s: String) -> Result<Item<'a>, E> {
                Ok(Item(Some(Cow::Owned(s))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Item<'a>, E> {
                Ok(Item(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Item<'a>, E> {
                Ok(Item(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Item<'a>, E> {
                Ok(Item(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Item<'a>, E> {
                Ok(Item(None))
            }
            fn visit_unit<E>(self) -> Result<Item<'a>, E> {
                Ok(Item(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Item<'a>, A::Error> {
                AnyVisitor.visit_seq(a).map(|_| Item(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Item<'a>, A::Error> {
                AnyVisitor.visit_map(a).map(|_| Item(None))
            }
        }
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Lenient<Vec<Cow<'a, str>>>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                let mut strings = true;
                while let Some(Item(item)) = a.next_element()? {
                    match item {
                        Some(s) if strings => items.push(s),
                        _ => strings = false,
                    }
                }
                Ok(if strings {
                    Lenient::Value(items)
                } else {
                    Lenient::Other(IgnoredAny)
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
                AnyVisitor.visit_map(a).map(|_| Lenient::Other(IgnoredAny))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Lenient::Other(IgnoredAny))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Lenient::Other(IgnoredAny))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Lenient::Other(IgnoredAny))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Lenient::Other(IgnoredAny))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Lenient::Other(IgnoredAny))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Lenient::Other(IgnoredAny))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
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

/// Any JSON value, read and dropped as it is read: what reading it into a `serde_json::Value`
/// accepts and rejects (numbers are parsed, so one out of a double's range is an error; strings
/// are decoded, so a lone surrogate escape is one), without building it. (`IgnoredAny` only
/// scans numbers and strings, and so accepts more; the untagged enums and the `Value` these
/// readers replace rejected those lines.)
struct AnyValue;

struct AnyVisitor;

impl<'de> Deserialize<'de> for AnyValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AnyVisitor)
    }
}

impl<'de> serde::de::Visitor<'de> for AnyVisitor {
    type Value = AnyValue;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_i64<E>(self, _: i64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_u64<E>(self, _: u64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_f64<E>(self, _: f64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_str<E>(self, _: &str) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_unit<E>(self) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<AnyValue, A::Error> {
        while a.next_element::<AnyValue>()?.is_some() {}
        Ok(AnyValue)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<AnyValue, A::Error> {
        while a.next_entry::<AnyValue, AnyValue>()?.is_some() {}
        Ok(AnyValue)
    }
}

/// A string, or any other value read as [`AnyValue`] and dropped.
struct StringOrSkip(Option<String>);

impl<'de> Deserialize<'de> for StringOrSkip {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{MapAccess, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StringOrSkip;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E>(self, s: &str) -> Result<StringOrSkip, E> {
                Ok(StringOrSkip(Some(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<StringOrSkip, E> {
                Ok(StringOrSkip(Some(s)))
            }
            fn visit_bool<E>(self, _: bool) -> Result<StringOrSkip, E> {
                Ok(StringOrSkip(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<StringOrSkip, E> {
                Ok(StringOrSkip(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<StringOrSkip, E> {
                Ok(StringOrSkip(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<StringOrSkip, E> {
                Ok(StringOrSkip(None))
            }
            fn visit_unit<E>(self) -> Result<StringOrSkip, E> {
                Ok(StringOrSkip(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<StringOrSkip, A::Error> {
                AnyVisitor.visit_seq(a).map(|_| StringOrSkip(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<StringOrSkip, A::Error> {
                AnyVisitor.visit_map(a).map(|_| StringOrSkip(None))
            }
        }
        d.deserialize_any(V)
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
                if let StringOrSkip(Some(s)) = m.next_value()? {
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
    ///
    /// The line is checked as UTF-8 once, whole (a word at a time while it is ASCII), so that
    /// serde_json does not check every key and kept string again one by one: that was a fifth
    /// of a report's time. A line that is not UTF-8 somewhere is read as bytes as before (an
    /// invalid byte in a field no reader keeps does not make the line unreadable).
    pub fn parse(bytes: &'a [u8]) -> Option<LogLine<'a>> {
        match std::str::from_utf8(bytes) {
            Ok(text) => serde_json::from_str(text).ok(),
            Err(_) => serde_json::from_slice(bytes).ok(),
        }
    }

    /// False for a record that does not count toward the thresholds.
    pub fn counts(&self) -> bool {
        self.counts_toward_thresholds != Some(false)
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

    /// What a later success resolves: the work item's own breaker key, else the agent.
    pub fn unit(&self) -> Option<&str> {
        self.breaker_key.as_deref().or(self.agent())
    }

    /// [`phase_text`](Self::phase_text) without allocating: a number is written into `buf`.
    /// For the report's pass over every line of a large log.
    pub fn phase_in<'b>(&'b self, buf: &'b mut [u8; 20]) -> Option<&'b str> {
        match self.phase()? {
            PhaseRef::Name(s) => Some(s),
            PhaseRef::Number(n) => {
                let mut n = *n;
                let mut at = buf.len();
                loop {
                    at -= 1;
                    buf[at] = b'0' + (n % 10) as u8;
                    n /= 10;
                    if n == 0 {
                        break;
                    }
                }
                std::str::from_utf8(&buf[at..]).ok()
            }
        }
    }

    /// The phase written out, for keys and filters (the one place a phase becomes text).
    pub fn phase_text(&self) -> Option<String> {
        self.phase().map(|p| match p {
            PhaseRef::Number(n) => n.to_string(),
            PhaseRef::Name(s) => s.to_string(),
        })
    }

    /// An interrupt: recorded, but never counted as a failure of the agent.
    pub fn is_interrupt(&self) -> bool {
        self.kind() == Some(crate::core::vocab::Kind::Interrupted.as_str())
    }

    /// A failure that counts toward the thresholds until it is resolved: a record with an id,
    /// not an interrupt, not kept out of the thresholds (`counts_toward_thresholds: false`),
    /// and not written already resolved (`resolution.successful: true`).
    pub fn opens(&self) -> bool {
        !self.is_resolution()
            && self.error_id.is_some()
            && !self.is_interrupt()
            && self.counts()
            && !self.resolution.as_ref().is_some_and(|r| r.successful())
    }

    /// A resolution line that closes its record (see [`ResolutionLine::closes`]).
    pub fn closes(&self) -> bool {
        self.is_resolution()
            && !self.is_interrupt()
            && self.counts()
            && !self.resolution.as_ref().is_some_and(|r| r.failed())
    }

    /// The message, by any of its names.
    pub fn detail(&self) -> Option<&str> {
        self.detail
            .as_deref()
            .or(self.error_message.as_deref())
            .or(self.message.as_deref())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_open_breaker_turns_a_retry_into_an_escalation_and_leaves_other_actions() {
        let mut e =
            serde_json::json!({"action": "retry", "retry": {"attempt": 2}, "context": {"x": 1}})
                .as_object()
                .cloned()
                .unwrap_or_default();
        let why = super::no_retry_while_open(&mut e, "k");
        assert!(why.is_some_and(|w| w.contains("breaker `k` is open")));
        assert_eq!(e["action"], "escalate");
        assert!(e["retry"].is_null());
        assert_eq!(e["context"]["x"], 1);
        assert!(e["context"]["action_reason"].is_string());
        let mut asked = serde_json::json!({"action": "ask_user"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(super::no_retry_while_open(&mut asked, "k"), None);
        assert_eq!(asked["action"], "ask_user");
    }

    use super::*;

    #[test]
    fn a_phase_is_written_the_same_with_or_without_allocating() {
        for line in [
            r#"{"phase": 0}"#,
            r#"{"phase": 7}"#,
            r#"{"phase": 18446744073709551615}"#,
            r#"{"stage": 42}"#,
            r#"{"phase": "review"}"#,
            r#"{}"#,
        ] {
            let l = LogLine::parse(line.as_bytes());
            let l = l.as_ref();
            let mut buf = [0; 20];
            assert_eq!(
                l.and_then(|l| l.phase_in(&mut buf)).map(str::to_string),
                l.and_then(LogLine::phase_text),
                "{line}"
            );
        }
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
    fn ids_sort_by_time_then_sequence() {
        let a = error_id(1_770_215_422_123, 41);
        let b = error_id(1_770_215_422_123, 42);
        let c = error_id(1_770_215_423_000, 7);
        assert_eq!(a, "err-20260204T143022123Z-000041");
        assert!(a < b && b < c);
    }

    /// The readers of a log line's phase, its kept outputs and its context's last progress,
    /// as they were (untagged enums, a `serde_json::Value`): the hand-written ones must accept
    /// and reject the same lines and read the same values.
    mod before {
        use serde::Deserialize;
        use std::borrow::Cow;

        #[derive(Deserialize)]
        #[serde(untagged)]
        pub enum Phase<'a> {
            Number(u64),
            #[serde(borrow)]
            Name(Cow<'a, str>),
        }

        #[derive(Deserialize)]
        #[serde(untagged)]
        pub enum Lenient<T> {
            Value(T),
            Other(serde::de::IgnoredAny),
        }

        #[derive(Deserialize)]
        pub struct Context {
            #[serde(default)]
            pub last_progress: Option<serde_json::Value>,
        }

        #[derive(Deserialize)]
        pub struct Line<'a> {
            #[serde(default, borrow)]
            pub agent: Option<Cow<'a, str>>,
            #[serde(default, borrow)]
            pub phase: Option<Phase<'a>>,
            #[serde(default, borrow)]
            pub stage: Option<Phase<'a>>,
            #[serde(default, borrow)]
            pub preserved_outputs: Option<Lenient<Vec<Cow<'a, str>>>>,
            #[serde(default)]
            pub context: Option<Context>,
        }
    }

    #[test]
    fn hostile_phases_outputs_and_progress_read_as_they_did_with_untagged_enums() {
        let values = [
            "0",
            "7",
            "-1",
            "2.5",
            "1e400",
            "18446744073709551616",
            r#""review""#,
            r#""a\"b""#,
            r#""\u00e9t\u00e9""#,
            r#""\ud800""#,
            r#""\ud83d\ude00""#,
            "true",
            "null",
            "[]",
            r#"["a","b"]"#,
            r#"["a\nb","c"]"#,
            r#"["a",1]"#,
            r#"["a",null]"#,
            "[1e400]",
            r#"["a",["\ud800"]]"#,
            r#"{"a":[1e400]}"#,
            r#"{"a":"b"}"#,
            "{}",
            r#"[[["deep"]]]"#,
        ];
        for v in values {
            for line in [
                format!(r#"{{"error_id":"e","phase":{v}}}"#),
                format!(r#"{{"error_id":"e","agent":{v}}}"#),
                format!(r#"{{"error_id":"e","stage":{v},"agent":"a"}}"#),
                format!(r#"{{"error_id":"e","preserved_outputs":{v}}}"#),
                format!(r#"{{"error_id":"e","context":{{"tool":"t","last_progress":{v}}}}}"#),
            ] {
                let now = LogLine::parse(line.as_bytes());
                let was = serde_json::from_slice::<before::Line>(line.as_bytes()).ok();
                assert_eq!(now.is_some(), was.is_some(), "{line}");
                let (Some(now), Some(was)) = (now, was) else {
                    continue;
                };
                let phase = |p: &Option<before::Phase>| match p {
                    Some(before::Phase::Number(n)) => Some(PhaseRef::Number(*n)),
                    Some(before::Phase::Name(s)) => Some(PhaseRef::Name(Cow::Owned(s.to_string()))),
                    None => None,
                };
                assert_eq!(now.phase, phase(&was.phase), "{line}");
                assert_eq!(now.agent, was.agent, "{line}");
                assert_eq!(now.stage, phase(&was.stage), "{line}");
                let outputs = match &was.preserved_outputs {
                    Some(before::Lenient::Value(v)) => Some(v),
                    _ => None,
                };
                assert_eq!(
                    now.preserved_outputs.as_ref().and_then(Lenient::get),
                    outputs,
                    "{line}"
                );
                let progress = was
                    .context
                    .and_then(|c| c.last_progress)
                    .and_then(|p| p.as_str().map(str::to_string));
                assert_eq!(
                    now.context.and_then(|c| c.last_progress),
                    progress,
                    "{line}"
                );
            }
        }
    }

    #[test]
    fn a_log_lines_strings_are_borrowed_from_it_unless_escaped() {
        let l = LogLine::parse(
            br#"{"error_id":"e","agent":"a","kind":"k\u0041","phase":"p","preserved_outputs":["o"]}"#,
        )
        .expect("parses");
        assert!(matches!(l.error_id, Some(Cow::Borrowed("e"))));
        assert!(matches!(l.agent, Some(Cow::Borrowed("a"))));
        assert!(matches!(l.phase, Some(PhaseRef::Name(Cow::Borrowed("p")))));
        let outputs = l.preserved_outputs.as_ref().and_then(Lenient::get);
        assert!(matches!(
            outputs.map(Vec::as_slice),
            Some([Cow::Borrowed("o")])
        ));
        assert!(matches!(&l.kind, Some(Cow::Owned(k)) if k == "kA"));
        let none = LogLine::parse(br#"{"agent":null}"#).expect("parses");
        assert_eq!(none.agent, None);
    }

    #[test]
    fn a_line_not_utf8_only_in_a_field_no_reader_keeps_is_still_read() {
        let mut line = br#"{"error_id":"e","agent":"a","status":"x"#.to_vec();
        line.extend_from_slice(b"\xff\xfe\"}");
        let l = LogLine::parse(&line).expect("parses");
        assert_eq!(l.agent(), Some("a"));
        let mut kept = br#"{"error_id":"e","agent":"a"#.to_vec();
        kept.extend_from_slice(b"\xff\"}");
        assert!(LogLine::parse(&kept).is_none());
        let escaped = LogLine::parse(br#"{"agent":"a\"b","phase":"\u00e9"}"#).expect("parses");
        assert_eq!(escaped.agent(), Some("a\"b"));
        assert_eq!(escaped.phase_text().as_deref(), Some("\u{e9}"));
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
