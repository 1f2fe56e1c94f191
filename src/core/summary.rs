//! What the error log tells (seeds 000, 001, 002): totals, per-group counts, kinds, retries,
//! last errors, resolution rates and durations, and the thresholds crossed.
//!
//! Pure and streaming: [`Aggregator::add_with`] takes one log line at a time, parsed into a
//! borrowed [`LogLine`], and keeps only per-group sums and a fixed-size duration histogram, so
//! memory grows with the number of groups (agents, sessions), never with the number of lines.

mod query;

pub use query::Query;

use crate::core::error_record::{LogLine, OpenCounts};
use crate::core::policy::Policy;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// A time flag: a duration back from now, or a time; errors name `flag`.
pub fn time_flag(
    flag: &str,
    text: &str,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, crate::exit::Failure> {
    match crate::core::duration::Dur::parse(text) {
        Ok(d) => {
            return chrono::Duration::from_std(d.0)
                .ok()
                .and_then(|d| now.checked_sub_signed(d))
                .ok_or_else(|| {
                    crate::exit::Failure::usage(format!(
                        "{flag} {text}: reaches before the earliest time"
                    ))
                });
        }
        Err(e @ crate::core::duration::DurError::TooLong(_)) => {
            return Err(crate::exit::Failure::usage(format!("{flag}: {e}")));
        }
        Err(_) => {}
    }
    crate::core::duration::parse_now(text).ok_or_else(|| {
        crate::exit::Failure::usage(format!(
            "{flag} `{text}` is neither a duration (2h, 30m) nor a time (RFC 3339 or Unix seconds)"
        ))
    })
}

/// What to group by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    /// The agent (or skill, or tool).
    #[default]
    Agent,
    /// The error's kind.
    Kind,
    /// The phase or stage.
    Phase,
    /// The error's category (transient, skill_error, validation_failure, quality_failure).
    Category,
}

/// Which lines count.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Filter {
    /// Only this session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Only this workflow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Only this agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Only this phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Only lines at or after this time.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "rfc3339")]
    pub since: Option<DateTime<Utc>>,
    /// Only lines at or before this time.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "rfc3339")]
    pub until: Option<DateTime<Utc>>,
}

fn rfc3339<S: serde::Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        None => s.serialize_none(),
    }
}

impl Filter {
    /// True when the line is in scope.
    pub fn admits(&self, l: &LogLine) -> bool {
        let same = |want: &Option<String>, have: Option<&str>| match want {
            Some(w) => have == Some(w.as_str()),
            None => true,
        };
        if !same(&self.session, l.session_id.as_deref())
            || !same(&self.workflow, l.workflow_id.as_deref())
            || !same(&self.agent, l.agent())
        {
            return false;
        }
        if let Some(p) = &self.phase {
            if l.phase_text().as_deref() != Some(p.as_str()) {
                return false;
            }
        }
        if self.since.is_some() || self.until.is_some() {
            let at = l
                .timestamp
                .as_deref()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc));
            let Some(at) = at else {
                return false;
            };
            if self.since.is_some_and(|s| at < s) || self.until.is_some_and(|u| at > u) {
                return false;
            }
        }
        true
    }
}

// ---------------------------------------------------------------------------------------------
// Durations: a log-bucketed histogram, constant memory, within 2% of the true percentile.

const GROWTH: f64 = 1.02;

/// Durations seen, in buckets that grow by 2%.
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    buckets: BTreeMap<u32, u64>,
    n: u64,
    max: u64,
}

impl Histogram {
    /// Adds one duration.
    pub fn add(&mut self, ms: u64) {
        let i = ((ms as f64 + 1.0).ln() / GROWTH.ln()).ceil() as u32;
        *self.buckets.entry(i).or_default() += 1;
        self.n += 1;
        self.max = self.max.max(ms);
    }

    /// The `q`-quantile (0..1), within 2%; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (i, c) in &self.buckets {
            seen += c;
            if seen >= rank {
                let upper = GROWTH.powi(*i as i32) - 1.0;
                return Some((upper.round() as u64).min(self.max));
            }
        }
        Some(self.max)
    }
}

// ---------------------------------------------------------------------------------------------
// Groups.

/// The last error of a group.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LastError {
    /// Its id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_id: Option<String>,
    /// When.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Its kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its message, cut to 300 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Retry counts of a group.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Retries {
    /// Sum of `retry_count`.
    pub total: u64,
    /// Largest `retry_count`.
    pub max: u64,
}

/// Seed 001's "are timeouts too aggressive?": how long the failed calls ran.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Durations {
    /// Records with a `duration_ms`.
    pub count: u64,
    /// Median.
    pub p50_ms: Option<u64>,
    /// 95th percentile.
    pub p95_ms: Option<u64>,
    /// Longest.
    pub max_ms: Option<u64>,
    /// The agent's configured timeout, if the policy sets one.
    pub timeout_ms: Option<u64>,
    /// How many ran past it.
    pub past_timeout: u64,
}

/// One group's summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GroupSummary {
    /// The agent, kind, phase or category.
    pub key: String,
    /// Error records.
    pub count: u64,
    /// Records per kind.
    pub kinds: BTreeMap<String, u64>,
    /// Retry counts.
    pub retries: Retries,
    /// The last error seen.
    pub last_error: LastError,
    /// Records with a successful resolution.
    pub resolved: u64,
    /// `resolved / count`.
    pub resolution_rate: f64,
    /// Durations (`--by agent` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub durations: Option<Durations>,
}

#[derive(Clone, Debug, Default)]
struct Group {
    summary: GroupSummary,
    hist: Histogram,
    timeout_ms: Option<u64>,
    past_timeout: u64,
}

/// A threshold the log shows crossed.
#[derive(Clone, Debug, Serialize)]
pub struct Crossed {
    /// `session_failure_threshold`, `cascade` or `phase_failure_ratio`.
    pub name: String,
    /// The session, workflow, or `workflow/phase`.
    pub scope: String,
    /// What was counted.
    pub count: u64,
    /// The threshold.
    pub threshold: f64,
}

/// The whole report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Error records in scope.
    pub records: u64,
    /// Resolution lines in scope.
    pub resolutions: u64,
    /// Successfully resolved records / records.
    pub resolution_rate: f64,
    /// Distinct sessions.
    pub sessions: u64,
    /// Distinct workflows.
    pub workflows: u64,
    /// Torn or invalid lines skipped.
    pub skipped_lines: u64,
    /// What the groups are.
    pub by: By,
    /// The groups, most errors first.
    pub groups: Vec<GroupSummary>,
    /// Thresholds crossed: at most [`MAX_LISTED`] of each name, the highest counts first.
    pub thresholds: Vec<Crossed>,
    /// How many scopes crossed each threshold, listed or not.
    pub thresholds_crossed: BTreeMap<String, u64>,
}

/// How many crossings of one threshold the report lists; the rest are only counted, so that
/// a log with many sessions does not make a report of megabytes.
pub const MAX_LISTED: usize = 20;

/// Streams log lines into a [`Summary`].
pub struct Aggregator<'p> {
    filter: Filter,
    by: By,
    policy: &'p Policy,
    groups: BTreeMap<String, Group>,
    sessions: HashMap<String, u64>,
    workflows: std::collections::HashSet<String>,
    /// The open failures, as the thresholds count them (the counters' own rules).
    open: OpenCounts,
    records: u64,
    resolutions: u64,
    resolved: u64,
    skipped: u64,
}

fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    match map.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            map.insert(key.to_string(), 1);
        }
    }
}

fn reuse(slot: &mut Option<String>, value: Option<&str>) {
    match (slot.as_mut(), value) {
        (Some(s), Some(v)) => {
            s.clear();
            s.push_str(v);
        }
        (_, v) => *slot = v.map(String::from),
    }
}

impl<'p> Aggregator<'p> {
    /// An empty report over lines that pass `filter`, grouped `by`.
    pub fn new(filter: Filter, by: By, policy: &'p Policy) -> Aggregator<'p> {
        Aggregator {
            filter,
            by,
            policy,
            groups: BTreeMap::new(),
            sessions: HashMap::new(),
            workflows: std::collections::HashSet::new(),
            open: OpenCounts::default(),
            records: 0,
            resolutions: 0,
            resolved: 0,
            skipped: 0,
        }
    }

    /// Counts a line the reader skipped without showing it (a torn last line).
    pub fn skipped(&mut self, n: u64) {
        self.skipped += n;
    }

    /// Lines skipped so far.
    pub fn rejected(&self) -> u64 {
        self.skipped
    }

    /// Takes one line (false when it is not a JSON object: it is then counted as skipped), and
    /// hands every parsed line, with whether the filter admits it, to `also`: the text report's
    /// timeline and the HTML report's charts ride on the same pass and the same parse.
    pub fn add_with(&mut self, bytes: &[u8], also: &mut impl FnMut(&LogLine, &[u8], bool)) -> bool {
        let Some(line) = LogLine::parse(bytes) else {
            self.skipped += 1;
            return false;
        };
        let admitted = self.filter.admits(&line);
        if admitted {
            self.add_line(&line);
        }
        also(&line, bytes, admitted);
        true
    }

    fn key<'l>(&self, l: &'l LogLine) -> std::borrow::Cow<'l, str> {
        use std::borrow::Cow;
        let k = match self.by {
            By::Agent => l.agent().map(Cow::Borrowed),
            By::Kind => l.kind().map(Cow::Borrowed),
            By::Phase => l.phase_text().map(Cow::Owned),
            By::Category => l.category.as_deref().map(Cow::Borrowed),
        };
        k.unwrap_or(Cow::Borrowed("(none)"))
    }

    fn group(&mut self, l: &LogLine) -> Option<&mut Group> {
        let key = self.key(l);
        // A new group resolves its agent's policy once: glob matching on every line is slow.
        if !self.groups.contains_key(key.as_ref()) {
            let timeout_ms = match self.by {
                By::Agent => self.policy.agent(&key).timeout.map(|d| d.as_millis()),
                _ => None,
            };
            let group = Group {
                summary: GroupSummary {
                    key: key.to_string(),
                    ..GroupSummary::default()
                },
                timeout_ms,
                ..Group::default()
            };
            self.groups.insert(key.to_string(), group);
        }
        self.groups.get_mut(key.as_ref())
    }

    fn add_line(&mut self, l: &LogLine) {
        self.open.count_line(l);
        let successful = l.resolution.as_ref().is_some_and(|r| r.successful());
        if l.is_resolution() {
            self.resolutions += 1;
            if successful {
                self.resolved += 1;
                if let Some(g) = self.group(l) {
                    g.summary.resolved += 1;
                }
            }
            return;
        }
        self.records += 1;
        if successful {
            self.resolved += 1;
        }
        if let Some(s) = l.session_id.as_deref() {
            match self.sessions.get_mut(s) {
                Some(n) => *n += 1,
                None => {
                    self.sessions.insert(s.to_string(), 1);
                }
            }
        }
        if let Some(w) = l.workflow_id.as_deref() {
            if !self.workflows.contains(w) {
                self.workflows.insert(w.to_string());
            }
        }
        let by_agent = self.by == By::Agent;
        let Some(g) = self.group(l) else {
            return;
        };
        let s = &mut g.summary;
        s.count += 1;
        bump(&mut s.kinds, l.kind().unwrap_or("unknown"));
        let r = l.retry_count.unwrap_or(0);
        s.retries.total += r;
        s.retries.max = s.retries.max.max(r);
        if successful {
            s.resolved += 1;
        }
        // Overwritten on every line: reuse the buffers rather than allocate four strings.
        let last = &mut s.last_error;
        reuse(&mut last.error_id, l.error_id.as_deref());
        reuse(&mut last.timestamp, l.timestamp.as_deref());
        reuse(&mut last.kind, l.kind());
        let detail = l.detail().map(|d| match d.char_indices().nth(300) {
            Some((i, _)) => &d[..i],
            None => d,
        });
        reuse(&mut last.detail, detail);
        if detail.map(str::len) != l.detail().map(str::len) {
            if let Some(d) = last.detail.as_mut() {
                d.push('…');
            }
        }
        if let (true, Some(ms)) = (by_agent, l.duration_ms) {
            g.hist.add(ms);
            if g.timeout_ms.is_some_and(|t| ms > t) {
                g.past_timeout += 1;
            }
        }
    }

    /// The report.
    pub fn finish(self) -> Summary {
        let t = &self.policy.thresholds;
        let mut thresholds = Vec::new();
        // What is open at the end of the log: failures resolved since (a retry that worked, a
        // person's decision) and interrupts are not counted, as the counters do.
        for (s, n) in &self.open.sessions {
            if t.session_failures > 0 && *n >= u64::from(t.session_failures) {
                thresholds.push(Crossed {
                    name: "session_failure_threshold".into(),
                    scope: s.clone(),
                    count: *n,
                    threshold: f64::from(t.session_failures),
                });
            }
        }
        let (scopes, phases) = self.open.by_scope();
        for (w, units) in &scopes {
            if self.workflows.contains(*w) && units.len() as u64 > u64::from(t.cascade_agents) {
                thresholds.push(Crossed {
                    name: "cascade".into(),
                    scope: w.to_string(),
                    count: units.len() as u64,
                    threshold: f64::from(t.cascade_agents),
                });
            }
        }
        for ((scope, phase), units) in &phases {
            let size = self.policy.phase(phase).and_then(|p| p.size).unwrap_or(0);
            let n = units.len() as u64;
            if size > 0 && n as f64 / f64::from(size) > t.phase_failure_ratio {
                thresholds.push(Crossed {
                    name: "phase_failure_ratio".into(),
                    scope: format!("{scope}/{phase}"),
                    count: n,
                    threshold: t.phase_failure_ratio,
                });
            }
        }
        thresholds.sort_by(|a, b| {
            a.name
                .cmp(&b.name)
                .then_with(|| b.count.cmp(&a.count))
                .then_with(|| a.scope.cmp(&b.scope))
        });
        let mut thresholds_crossed: BTreeMap<String, u64> = BTreeMap::new();
        thresholds.retain(|c| {
            let n = thresholds_crossed.entry(c.name.clone()).or_default();
            *n += 1;
            *n as usize <= MAX_LISTED
        });
        let by_agent = self.by == By::Agent;
        let mut groups: Vec<GroupSummary> = self
            .groups
            .into_values()
            .map(|g| {
                let mut s = g.summary;
                s.resolved = s.resolved.min(s.count);
                s.resolution_rate = rate(s.resolved, s.count);
                if by_agent {
                    s.durations = Some(Durations {
                        count: g.hist.n,
                        p50_ms: g.hist.quantile(0.5),
                        p95_ms: g.hist.quantile(0.95),
                        max_ms: (g.hist.n > 0).then_some(g.hist.max),
                        timeout_ms: g.timeout_ms,
                        past_timeout: g.past_timeout,
                    });
                }
                s
            })
            .filter(|s| s.count > 0)
            .collect();
        groups.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        Summary {
            records: self.records,
            resolutions: self.resolutions,
            resolution_rate: rate(self.resolved.min(self.records), self.records),
            sessions: self.sessions.len() as u64,
            workflows: self.workflows.len() as u64,
            skipped_lines: self.skipped,
            by: self.by,
            groups,
            thresholds,
            thresholds_crossed,
        }
    }
}

fn rate(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    (part as f64 / whole as f64 * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lines: &[&str], filter: Filter, by: By, policy: &Policy) -> Summary {
        let mut a = Aggregator::new(filter, by, policy);
        for l in lines {
            a.add_with(l.as_bytes(), &mut |_, _, _| {});
        }
        a.finish()
    }

    const LOG: &[&str] = &[
        r#"{"error_id":"e1","timestamp":"2026-02-04T14:00:00Z","session_id":"s","workflow_id":"w","phase":2,"agent":"a","kind":"timeout","retry_count":1,"duration_ms":300000}"#,
        r#"{"error_id":"e2","timestamp":"2026-02-04T14:10:00Z","session_id":"s","workflow_id":"w","phase":2,"agent":"a","kind":"crash","retry_count":2,"duration_ms":100}"#,
        r#"{"error_id":"e3","timestamp":"2026-02-04T14:20:00Z","session_id":"s","workflow_id":"w","phase":2,"agent":"b","kind":"timeout"}"#,
        r#"{"resolves":"e3","timestamp":"2026-02-04T14:30:00Z","session_id":"s","workflow_id":"w","phase":2,"agent":"b","resolution":{"successful":true}}"#,
        r#"not json"#,
        r#"{"error_id":"e5","timestamp":"2026-02-04T15:00:00Z","session_id":"t","workflow_id":"w","stage":3,"skill":"c","error_type":"timeout","resolution":"user_escalation"}"#,
        r#"{"error_id":"e6","timestamp":"2026-02-04T15:10:00Z","session_id":"t","workflow_id":"w","agent":"d","kind":"interrupted"}"#,
        r#"{"error_id":"e7","timestamp":"2026-02-04T15:20:00Z","session_id":"t","workflow_id":"w","agent":"e","kind":"crash"}"#,
    ];

    #[test]
    fn groups_count_kinds_retries_and_resolutions() {
        let policy = Policy::default();
        let s = run(LOG, Filter::default(), By::Agent, &policy);
        assert_eq!((s.records, s.resolutions, s.skipped_lines), (6, 1, 1));
        assert_eq!(s.groups[0].key, "a");
        assert_eq!(s.groups[0].count, 2);
        assert_eq!(s.groups[0].kinds.get("crash"), Some(&1));
        assert_eq!((s.groups[0].retries.total, s.groups[0].retries.max), (3, 2));
        assert_eq!(s.groups[0].last_error.error_id.as_deref(), Some("e2"));
        let b = s.groups.iter().find(|g| g.key == "b").expect("b");
        assert_eq!(b.resolution_rate, 1.0);
        assert_eq!(s.resolution_rate, 0.167);
        let names: Vec<&str> = s.thresholds.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["cascade"]);
        // Agent `a` failed twice in workflow `w`: it counts once among a, c and e; `b` was
        // resolved, and `d` was only interrupted.
        assert_eq!(
            (s.thresholds[0].scope.as_str(), s.thresholds[0].count),
            ("w", 3)
        );
    }

    #[test]
    fn filters_narrow_the_scope() {
        let policy = Policy::default();
        let f = Filter {
            session: Some("s".into()),
            since: Some("2026-02-04T14:05:00Z".parse().expect("time")),
            ..Filter::default()
        };
        let s = run(LOG, f, By::Kind, &policy);
        assert_eq!(s.records, 2);
        let keys: Vec<&str> = s.groups.iter().map(|g| g.key.as_str()).collect();
        assert_eq!(keys, ["crash", "timeout"]);
    }

    #[test]
    fn durations_count_runs_past_the_agents_timeout() {
        let policy = crate::core::policy::load("[agents.a]\ntimeout = \"5m\"\n").expect("policy");
        let s = run(LOG, Filter::default(), By::Agent, &policy);
        let d = s.groups[0].durations.clone().expect("durations");
        assert_eq!(
            (d.count, d.max_ms, d.timeout_ms, d.past_timeout),
            (2, Some(300_000), Some(300_000), 0)
        );
        assert_eq!(d.p50_ms.map(|v| v.abs_diff(100) <= 2), Some(true));
    }

    #[test]
    fn histogram_percentiles_are_within_two_percent() {
        let mut h = Histogram::default();
        for ms in 1..=10_000u64 {
            h.add(ms);
        }
        for (q, want) in [(0.5, 5000.0), (0.95, 9500.0)] {
            let got = h.quantile(q).expect("value") as f64;
            assert!((got - want).abs() / want <= 0.021, "{q}: {got}");
        }
        assert_eq!(h.quantile(1.0), Some(10_000));
        assert_eq!(Histogram::default().quantile(0.5), None);
    }
}
