//! What the thresholds count (seeds 000 and 001): failures that are still open.
//!
//! A failure opens when it is recorded (not an interrupt, not written already resolved) and
//! closes when a resolution line for it is appended: a person's `record-error --resolve`, or
//! the automatic one written when the same unit (the agent, or the work item's own breaker
//! key) later succeeds in the same workflow. So the thresholds count what the seeds count:
//!
//! - session: the session's unresolved failures (seed 000: 5);
//! - cascade: the units of a workflow whose latest outcome is a failure (seed 001: more than 2);
//! - phase ratio: the same within one phase of the workflow, against the fan-out's size
//!   (seed 000: more than half).
//!
//! [`OpenCounts`] is the pure state (a few integers per session and per unit), shared by the
//! counters kept beside the log and by `report`, which streams the whole log through it.
//! [`Counters`] adds what a writer needs under the log's lock: the sequence for ids, and for
//! each unit the offset in the log where its open failures begin, so that a success reads only
//! that part of the log to resolve them. Their size grows with the sessions and units, never
//! with the failures.

use super::LogLine;
use crate::core::policy::Thresholds;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The ids a threshold looks at, taken from a record or a log line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Keys<'a> {
    /// Session.
    pub session: Option<&'a str>,
    /// Workflow.
    pub workflow: Option<&'a str>,
    /// Phase, written out.
    pub phase: Option<&'a str>,
    /// The unit: the work item's breaker key, else the agent.
    pub agent: Option<&'a str>,
}

impl<'a> Keys<'a> {
    /// The keys of a log line (record or resolution line).
    pub fn of_line(l: &'a LogLine, phase: Option<&'a str>) -> Keys<'a> {
        Keys {
            session: l.session_id.as_deref(),
            workflow: l.workflow_id.as_deref(),
            phase,
            agent: l.unit(),
        }
    }

    /// Where units are told apart: the workflow, else the session, else one unnamed scope.
    pub fn scope(&self) -> &'a str {
        self.workflow.or(self.session).unwrap_or("")
    }
}

/// Per scope, per unit. Looked up by `&str`, so counting a line allocates only for a key
/// seen for the first time (a report streams millions of lines through it).
pub type Scoped = BTreeMap<String, BTreeMap<String, UnitCounts>>;

fn bump(m: &mut BTreeMap<String, u64>, key: &str) {
    match m.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            m.insert(key.to_string(), 1);
        }
    }
}

/// Applies `f` to the counts of `unit` in `scope`, created empty when missing.
fn with_unit(m: &mut Scoped, scope: &str, unit: &str, f: impl FnOnce(&mut UnitCounts)) {
    if let Some(u) = m.get_mut(scope).and_then(|units| units.get_mut(unit)) {
        f(u);
        return;
    }
    let mut u = UnitCounts::default();
    f(&mut u);
    m.entry(scope.to_string())
        .or_default()
        .insert(unit.to_string(), u);
}

/// One fewer for `unit` in `scope` (and in `phase`); entries that reach zero are dropped.
fn unit_down(m: &mut Scoped, scope: &str, unit: &str, phase: Option<&str>) {
    let Some(units) = m.get_mut(scope) else {
        return;
    };
    let Some(u) = units.get_mut(unit) else {
        return;
    };
    if let Some(p) = phase {
        if u.phases.get_mut(p).is_some_and(down) {
            u.phases.remove(p);
        }
    }
    if down(&mut u.open) {
        units.remove(unit);
        if units.is_empty() {
            m.remove(scope);
        }
    }
}

fn unit_get<'m>(m: &'m Scoped, scope: &str, unit: &str) -> Option<&'m UnitCounts> {
    m.get(scope)?.get(unit).filter(|u| u.open > 0)
}

/// One unit's open failures.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UnitCounts {
    /// Open failures of the unit.
    pub open: u64,
    /// Open failures per phase.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub phases: BTreeMap<String, u64>,
    /// Where in the log its oldest open failure may be (a byte offset, at most that of the
    /// failure; only the counters beside the log keep it).
    #[serde(skip_serializing_if = "is_zero")]
    pub since: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The open failures, as counts: per session, and per unit with its phases. Memory grows with
/// the sessions and units, never with the lines.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OpenCounts {
    /// Open failures per session.
    pub sessions: BTreeMap<String, u64>,
    /// Open failures per scope (workflow, else session) and unit (a unit with none is
    /// dropped).
    pub units: Scoped,
}

fn down(n: &mut u64) -> bool {
    *n = n.saturating_sub(1);
    *n == 0
}

impl OpenCounts {
    /// One more open failure.
    pub fn open(&mut self, k: &Keys) {
        if let Some(s) = k.session {
            bump(&mut self.sessions, s);
        }
        if let Some(a) = k.agent {
            with_unit(&mut self.units, k.scope(), a, |u| {
                u.open += 1;
                if let Some(p) = k.phase {
                    bump(&mut u.phases, p);
                }
            });
        }
    }

    /// One failure closed. Never below zero: a hand-written resolution of something that was
    /// not open costs nothing.
    pub fn close(&mut self, k: &Keys) {
        if let Some(s) = k.session {
            if self.sessions.get_mut(s).is_some_and(down) {
                self.sessions.remove(s);
            }
        }
        if let Some(a) = k.agent {
            unit_down(&mut self.units, k.scope(), a, k.phase);
        }
    }

    /// Counts one log line: a record that opens, or a resolution line that closes.
    pub fn count_line(&mut self, l: &LogLine) {
        let mut buf = [0; 20];
        let phase = l.phase_in(&mut buf);
        let k = Keys::of_line(l, phase);
        if l.opens() {
            self.open(&k);
        } else if l.closes() {
            self.close(&k);
        }
    }

    /// The session's open failures.
    pub fn session(&self, s: &str) -> u64 {
        self.sessions.get(s).copied().unwrap_or(0)
    }

    /// The units of `scope` with an open failure (in `phase`, when given), sorted.
    pub fn failing(&self, scope: &str, phase: Option<&str>) -> Vec<String> {
        self.units
            .get(scope)
            .into_iter()
            .flatten()
            .filter(|(_, u)| u.open > 0 && phase.is_none_or(|p| u.phases.contains_key(p)))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Every scope with a failing unit, with its units; and every `(scope, phase)` likewise.
    #[allow(clippy::type_complexity)]
    pub fn by_scope(&self) -> (BTreeMap<&str, Vec<&str>>, BTreeMap<(&str, &str), Vec<&str>>) {
        let mut scopes: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut phases: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
        for (scope, units) in &self.units {
            for (unit, u) in units.iter().filter(|(_, u)| u.open > 0) {
                scopes.entry(scope).or_default().push(unit);
                for p in u.phases.keys() {
                    phases.entry((scope, p)).or_default().push(unit);
                }
            }
        }
        (scopes, phases)
    }
}

/// The threshold counters kept beside the log, under its lock, so that no threshold (and no
/// automatic resolution) re-reads the log.
///
/// They are a cache of the log up to byte `log_len`: when the log's length differs (a crash
/// between the append and the counters' write, an edit, a prune), they are rebuilt from it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "CountersFile")]
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
    /// The open failures, counted (`sessions`, `units`).
    pub open: OpenCounts,
    /// Interrupts not resolved yet, per scope and unit: they count toward no threshold, but
    /// the unit's next success resolves them too (a resume that worked).
    pub interrupts: Scoped,
}

/// [`Counters`] as written: the open counts at the top level, without `serde(flatten)` (whose
/// buffering made reading them the costliest part of a hook's success path).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct CountersFile {
    version: u32,
    log_len: u64,
    log_ino: u64,
    seq: u64,
    sessions: BTreeMap<String, u64>,
    units: Scoped,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    interrupts: Scoped,
}

impl From<CountersFile> for Counters {
    fn from(f: CountersFile) -> Counters {
        Counters {
            version: f.version,
            log_len: f.log_len,
            log_ino: f.log_ino,
            seq: f.seq,
            open: OpenCounts {
                sessions: f.sessions,
                units: f.units,
            },
            interrupts: f.interrupts,
        }
    }
}

/// The same layout, borrowed: written without copying the counters.
#[derive(Serialize)]
struct CountersOut<'a> {
    version: u32,
    log_len: u64,
    log_ino: u64,
    seq: u64,
    sessions: &'a BTreeMap<String, u64>,
    units: &'a Scoped,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    interrupts: &'a Scoped,
}

impl Serialize for Counters {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        CountersOut {
            version: self.version,
            log_len: self.log_len,
            log_ino: self.log_ino,
            seq: self.seq,
            sessions: &self.open.sessions,
            units: &self.open.units,
            interrupts: &self.interrupts,
        }
        .serialize(s)
    }
}

/// The format version written now (2: open failures instead of every failure ever).
pub const COUNTERS_VERSION: u32 = 2;

impl Counters {
    /// Empty counters of the current version.
    pub fn new() -> Counters {
        Counters {
            version: COUNTERS_VERSION,
            ..Counters::default()
        }
    }

    /// Counts one log line that starts at byte `at` of the log: records open, resolution
    /// lines close, ids set the sequence.
    pub fn count_line(&mut self, line: &LogLine, at: u64) {
        self.open.count_line(line);
        if line.is_interrupt() {
            let k = Keys::of_line(line, None);
            if let Some(a) = k.agent {
                if line.error_id.is_some() && !line.is_resolution() {
                    with_unit(&mut self.interrupts, k.scope(), a, |u| {
                        u.open += 1;
                        if u.open == 1 {
                            u.since = at;
                        }
                    });
                } else if line.is_resolution()
                    && !line.resolution.as_ref().is_some_and(|r| r.failed())
                {
                    unit_down(&mut self.interrupts, k.scope(), a, None);
                }
            }
        }
        if line.opens() {
            let k = Keys::of_line(line, None);
            if let Some(u) = k
                .agent
                .and_then(|a| self.open.units.get_mut(k.scope())?.get_mut(a))
            {
                if u.open == 1 {
                    u.since = at;
                }
            }
        }
        if let Some(seq) = line
            .error_id
            .as_deref()
            .and_then(|id| id.rsplit('-').next())
            .and_then(|n| n.parse::<u64>().ok())
        {
            self.seq = self.seq.max(seq);
        }
    }

    /// The open failures of `unit` in `scope`, and where in the log to look for them.
    pub fn unit(&self, scope: &str, unit: &str) -> Option<&UnitCounts> {
        unit_get(&self.open.units, scope, unit)
    }

    /// Where in the log the unresolved failures and interrupts of `unit` in `scope` begin;
    /// `None` when it has none.
    pub fn unresolved_since(&self, scope: &str, unit: &str) -> Option<u64> {
        let a = self.unit(scope, unit).map(|u| u.since);
        let b = unit_get(&self.interrupts, scope, unit).map(|u| u.since);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A threshold crossed, as `record-error` and `run` report it in `warnings`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    /// `session_failure_threshold`, `cascade`, `agent_failure_threshold` or
    /// `phase_failure_ratio`.
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

/// Seed 000's "circuit breaker opens twice": the warning when a failure has just opened
/// breaker `key` for the `opens`th time without a success in between, at `t.breaker_opens`.
pub fn breaker_reopened(key: &str, opens: u64, t: &Thresholds) -> Option<Warning> {
    // Names in a warning come from records and payloads: quoted unless plain identifiers.
    let key = crate::core::text::label(key);
    (t.breaker_opens > 0 && opens >= u64::from(t.breaker_opens)).then(|| Warning {
        name: "breaker_reopened".into(),
        message: format!(
            "breaker {key} has opened {opens} times without a success in between (threshold {}): what it guards is not recovering; stop retrying through it, abort the workflow and troubleshoot {key}",
            t.breaker_opens
        ),
        count: opens,
        threshold: f64::from(t.breaker_opens),
        agents: Vec::new(),
    })
}

/// The thresholds a record with `keys` crosses, once it has been counted.
pub fn warnings(c: &OpenCounts, k: &Keys, t: &Thresholds, phase_size: Option<u32>) -> Vec<Warning> {
    let mut out = Vec::new();
    if let Some(s) = k.session {
        let n = c.session(s);
        if t.session_failures > 0 && n >= u64::from(t.session_failures) {
            out.push(Warning {
                name: "session_failure_threshold".into(),
                message: format!(
                    "session {} has {n} unresolved failures (threshold {}): consider aborting the workflow and troubleshooting",
                    crate::core::text::label(s),
                    t.session_failures
                ),
                count: n,
                threshold: f64::from(t.session_failures),
                agents: Vec::new(),
            });
        }
    }
    if let Some(w) = k.workflow {
        let agents = c.failing(w, None);
        let n = agents.len() as u64;
        if n > u64::from(t.cascade_agents) {
            out.push(Warning {
                name: "cascade".into(),
                message: format!(
                    "{n} agents are failing in workflow {}, more than {}: pause the workflow, stop automatic retries and escalate with the full context",
                    crate::core::text::label(w),
                    t.cascade_agents
                ),
                count: n,
                threshold: f64::from(t.cascade_agents),
                agents,
            });
        }
    }
    // Within a named workflow only: without one, an agent's failures would add up across
    // every unrelated run of the project.
    if let (Some(a), Some(w), true) = (k.agent, k.workflow, t.agent_failures > 0) {
        let n = unit_get(&c.units, w, a).map_or(0, |u| u.open);
        if n >= u64::from(t.agent_failures) {
            out.push(Warning {
                name: "agent_failure_threshold".into(),
                message: format!(
                    "agent {a} has failed {n} times in workflow {} without a success (threshold {}): stop retrying it, abort the workflow and troubleshoot {a}",
                    crate::core::text::label(w),
                    t.agent_failures,
                    a = crate::core::text::label(a),
                ),
                count: n,
                threshold: f64::from(t.agent_failures),
                agents: vec![a.to_string()],
            });
        }
    }
    if let (Some(size), Some(phase)) = (phase_size.filter(|s| *s > 0), k.phase) {
        let agents = c.failing(k.scope(), Some(phase));
        let n = agents.len() as u64;
        if n as f64 / f64::from(size) > t.phase_failure_ratio {
            out.push(Warning {
                name: "phase_failure_ratio".into(),
                message: format!(
                    "{n} of {size} agents are failing in phase {}, more than {}%: abort the phase and escalate (retry all, return to the previous phase, or abort)",
                    crate::core::text::label(phase),
                    (t.phase_failure_ratio * 100.0).round()
                ),
                count: n,
                threshold: t.phase_failure_ratio,
                agents,
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

    fn line(text: &str) -> LogLine<'_> {
        LogLine::parse(text.as_bytes()).expect("parses")
    }

    #[test]
    fn fifth_open_failure_in_a_session_crosses_the_session_threshold() {
        let t = Thresholds::default();
        let mut c = OpenCounts::default();
        for i in 1..=5 {
            let k = keys("s1", "w1", "2", "researcher");
            c.open(&k);
            let w = warnings(&c, &k, &t, None);
            assert_eq!(
                names(&w).contains(&"session_failure_threshold"),
                i == 5,
                "{i}"
            );
        }
        assert!(warnings(&c, &keys("s2", "w9", "2", "x"), &t, None).is_empty());
        // One resolved: four open, under the threshold again.
        c.close(&keys("s1", "w1", "2", "researcher"));
        assert!(!names(&warnings(
            &c,
            &keys("s1", "w1", "2", "researcher"),
            &t,
            None
        ))
        .contains(&"session_failure_threshold"));
    }

    /// Seed 000, "When to Retry vs Abort": abort when the same agent fails 3+ times.
    #[test]
    fn third_unresolved_failure_of_one_agent_is_the_abort_threshold() {
        let t = Thresholds::default();
        let mut c = OpenCounts::default();
        for (i, s) in ["s1", "s2", "s3"].iter().enumerate() {
            let i = i + 1;
            let k = keys(s, "w1", "2", "writer");
            c.open(&k);
            let w = warnings(&c, &k, &t, None);
            assert_eq!(
                names(&w) == ["agent_failure_threshold"],
                i == 3,
                "{i}: {w:?}"
            );
        }
        let w = warnings(&c, &keys("s1", "w1", "2", "writer"), &t, None);
        assert!(w[0]
            .message
            .contains("agent writer has failed 3 times in workflow w1"));
        // Another workflow's failures of the same agent are not counted together.
        assert!(warnings(&c, &keys("s1", "w2", "2", "writer"), &t, None).is_empty());
        // A success resolves one: two open, under it again; 0 turns it off.
        c.close(&keys("s1", "w1", "2", "writer"));
        assert!(warnings(&c, &keys("s1", "w1", "2", "writer"), &t, None).is_empty());
        let off = Thresholds {
            agent_failures: 0,
            ..Thresholds::default()
        };
        c.open(&keys("s1", "w1", "2", "writer"));
        assert!(warnings(&c, &keys("s1", "w1", "2", "writer"), &off, None).is_empty());
    }

    #[test]
    fn third_failing_agent_is_a_cascade_until_one_recovers() {
        let t = Thresholds::default();
        let mut c = OpenCounts::default();
        for (i, agent) in ["a", "a", "b", "c"].iter().enumerate() {
            let k = keys(&"s1x"[..(i % 2) + 2], "w1", "2", agent);
            c.open(&k);
            let w = warnings(&c, &k, &t, None);
            assert_eq!(names(&w) == ["cascade"], i == 3, "{i}: {w:?}");
        }
        // `a` recovers (both its failures are resolved): two failing agents, no cascade.
        c.close(&keys("s1", "w1", "2", "a"));
        c.close(&keys("s1x", "w1", "2", "a"));
        assert_eq!(c.failing("w1", None), ["b", "c"]);
        assert!(warnings(&c, &keys("s1", "w1", "2", "c"), &t, None).is_empty());
    }

    #[test]
    fn more_than_half_of_a_phase_is_a_phase_failure() {
        let t = Thresholds::default();
        let mut c = OpenCounts::default();
        let k = keys("s", "w", "2", "a");
        c.open(&k);
        assert!(
            warnings(&c, &k, &t, Some(2)).is_empty(),
            "1 of 2 is not more than half"
        );
        let k = keys("s", "w", "2", "b");
        c.open(&k);
        assert_eq!(
            names(&warnings(&c, &k, &t, Some(3))),
            ["phase_failure_ratio"]
        );
        assert!(warnings(&c, &k, &t, None).is_empty(), "size unknown");
        assert!(warnings(&c, &k, &t, Some(4)).is_empty());
        // Another phase of the same workflow is counted apart.
        assert_eq!(c.failing("w", Some("3")), Vec::<String>::new());
    }

    #[test]
    fn interrupts_and_records_written_resolved_never_open() {
        let mut c = Counters::new();
        c.count_line(
            &line(
                r#"{"error_id":"err-1-000001","session_id":"s","agent":"a","kind":"interrupted"}"#,
            ),
            0,
        );
        c.count_line(&line(
            r#"{"error_id":"err-1-000002","session_id":"s","skill":"a","error_type":"SKILL_TIMEOUT","resolution":{"action_taken":"retry","successful":true}}"#,
        ), 100);
        assert_eq!((c.open.session("s"), c.seq), (0, 2));
        assert!(c.open.units.is_empty());
        // A resolution of an interrupt closes nothing.
        c.count_line(
            &line(r#"{"error_id":"err-1-000003","session_id":"s","agent":"a","kind":"timeout"}"#),
            200,
        );
        c.count_line(&line(
            r#"{"resolves":"err-1-000001","session_id":"s","agent":"a","kind":"interrupted","resolution":{"successful":true}}"#,
        ), 300);
        assert_eq!(c.open.session("s"), 1);
        assert_eq!(c.unit("s", "a").map(|u| u.since), Some(200));
        // The interrupt was resolved; the timeout is what a success would resolve now.
        assert!(c.interrupts.is_empty());
        assert_eq!(c.unresolved_since("s", "a"), Some(200));
    }

    #[test]
    fn resolution_lines_close_what_they_name_unless_they_failed() {
        let mut c = Counters::new();
        let rec = r#"{"error_id":"err-20260204T143022123Z-000042","session_id":"s","workflow_id":"w","phase":"2","agent":"a"}"#;
        c.count_line(&line(rec), 7);
        assert_eq!(c.unit("w", "a").map(|u| (u.open, u.since)), Some((1, 7)));
        assert_eq!(c.open.failing("w", Some("2")), ["a"]);
        c.count_line(&line(
            r#"{"resolves":"err-20260204T143022123Z-000042","session_id":"s","workflow_id":"w","phase":"2","agent":"a","resolution":{"action_taken":"retry","successful":false}}"#,
        ), 200);
        assert_eq!(c.open.session("s"), 1, "a failed retry closes nothing");
        c.count_line(&line(
            r#"{"resolves":"err-20260204T143022123Z-000042","session_id":"s","workflow_id":"w","phase":"2","agent":"a","resolution":{"action_taken":"recovered_by_retry","successful":true,"automatic":true}}"#,
        ), 400);
        let mut empty = Counters::new();
        empty.seq = 42;
        assert_eq!(c, empty, "everything closed, nothing left over");
    }

    #[test]
    fn a_record_kept_out_of_the_thresholds_opens_nothing_and_its_resolution_closes_nothing() {
        let mut c = Counters::new();
        c.count_line(
            &line(
                r#"{"error_id":"err-20260204T143022123Z-000042","session_id":"s","agent":"Bash"}"#,
            ),
            0,
        );
        c.count_line(&line(
            r#"{"error_id":"err-20260204T143022123Z-000043","session_id":"s","workflow_id":"w","agent":"Bash","counts_toward_thresholds":false}"#,
        ), 100);
        c.count_line(&line(
            r#"{"resolves":"err-20260204T143022123Z-000043","session_id":"s","workflow_id":"w","agent":"Bash","counts_toward_thresholds":false,"resolution":{"user_choice":"ignore"}}"#,
        ), 200);
        assert_eq!(
            (c.open.session("s"), c.seq),
            (1, 43),
            "the counted one stays open"
        );
    }

    #[test]
    fn a_work_items_breaker_key_is_its_unit() {
        let mut c = Counters::new();
        for (at, ch) in [(0, "ch1"), (90, "ch2")] {
            c.count_line(&line(&format!(
                r#"{{"error_id":"e-{ch}","workflow_id":"w","agent":"notebook-generator","breaker_key":"notebook-generator:{ch}"}}"#
            )), at);
        }
        assert_eq!(
            c.open.failing("w", None),
            ["notebook-generator:ch1", "notebook-generator:ch2"]
        );
        assert_eq!(
            c.unit("w", "notebook-generator:ch2").map(|u| u.since),
            Some(90)
        );
        assert!(c.unit("w", "notebook-generator").is_none());
    }

    #[test]
    fn unique_ids_never_count_as_a_sequence() {
        let mut c = Counters::new();
        let id = super::super::unique_error_id(1_770_215_422_123, 0xabc);
        assert!(id.starts_with("err-20260204T143022123Z-p"), "{id}");
        c.count_line(
            &line(&format!(r#"{{"error_id":"{id}","session_id":"s"}}"#)),
            0,
        );
        assert_eq!(c.seq, 0);
    }
}
