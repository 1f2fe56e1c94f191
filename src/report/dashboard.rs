//! What the HTML report draws, gathered in the same single pass as the report: failures over
//! time per agent and kind, durations per agent, the most frequent error texts, and the newest
//! unresolved records. Pure, and bounded: memory grows with the number of time buckets, agents
//! and kinds — all capped — never with the number of lines, so a log of a million records
//! makes a page of the same size as one of a thousand.

use crate::core::error_record::LogLine;
use crate::core::policy::Policy;
use chrono::DateTime;
use std::collections::VecDeque;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiply-rotate hash (the Fx hash of rustc) for the per-record lookups: several times
/// quicker than SipHash on short keys. Every map it keys is capped, so keys chosen to
/// collide can slow one report by a bounded amount, never without end.
#[derive(Default, Clone, Copy)]
pub struct Fx(u64);

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        for b in chunks.remainder() {
            self.add(u64::from(*b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Fx>>;
type HashSet<K> = std::collections::HashSet<K, BuildHasherDefault<Fx>>;

/// Bucket widths, in seconds, from the finest; the collector moves to the next when the
/// buckets in use exceed [`MAX_BUCKETS`].
const WIDTHS: &[i64] = &[
    60,
    300,
    900,
    3600,
    6 * 3600,
    86_400,
    7 * 86_400,
    30 * 86_400,
];
const MAX_BUCKETS: usize = 1024;
/// Distinct agents tracked one by one; the rest count as one.
const MAX_AGENTS: usize = 2000;
/// Texts the top-texts count keeps: when twice as many are held, the less frequent half is
/// dropped (the frequent ones stay; their counts are then lower bounds).
const TEXT_SLOTS: usize = 512;
/// Unresolved records kept, newest last.
const RECENT: usize = 400;
/// Duration bins: log-spaced from 100 ms to a day.
pub const DURATION_BINS: usize = 28;
const MIN_MS: f64 = 100.0;
const MAX_MS: f64 = 86_400_000.0;

/// One record kept for the unresolved list.
#[derive(Clone, Debug)]
pub struct Recent {
    /// Its id.
    pub error_id: String,
    /// When (Unix seconds).
    pub at: i64,
    /// The agent.
    pub agent: String,
    /// The kind.
    pub kind: String,
    /// Its severity.
    pub severity: Option<String>,
    /// Its text, cut.
    pub detail: String,
}

/// Durations of one agent's failed calls.
#[derive(Clone, Debug, Default)]
pub struct DurationBins {
    /// Counts per bin.
    pub bins: Vec<u64>,
    /// Records with a duration.
    pub count: u64,
    /// The agent's timeout in the policy, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Calls that ran past it.
    pub past_timeout: u64,
}

/// Unix seconds of an RFC 3339 time. The form the log writes (`2026-02-04T14:30:22Z`, with
/// or without a fraction) is read directly, as this runs once per record; any other form goes
/// through chrono.
pub fn unix_seconds(t: &str) -> Option<i64> {
    let b = t.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<i64> {
        let mut n = 0i64;
        for &c in b.get(r)? {
            if !c.is_ascii_digit() {
                return None;
            }
            n = n * 10 + i64::from(c - b'0');
        }
        Some(n)
    };
    let fast = (|| {
        if b.len() < 20
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
        {
            return None;
        }
        let rest = &b[19..];
        let frac = rest
            .iter()
            .take_while(|c| **c == b'.' || c.is_ascii_digit())
            .count();
        if &rest[frac..] != b"Z" || (frac > 0 && rest[0] != b'.') {
            return None;
        }
        let (y, m, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
        let (hh, mm, ss) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
        if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
            return None;
        }
        // Howard Hinnant's days_from_civil.
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
    })();
    fast.or_else(|| DateTime::parse_from_rfc3339(t).ok().map(|t| t.timestamp()))
}

/// The bin of a duration.
pub fn duration_bin(ms: u64) -> usize {
    let x = (ms as f64).clamp(MIN_MS, MAX_MS);
    let f = (x / MIN_MS).ln() / (MAX_MS / MIN_MS).ln();
    ((f * DURATION_BINS as f64) as usize).min(DURATION_BINS - 1)
}

/// The lower edge of a bin, in milliseconds.
pub fn bin_start_ms(bin: usize) -> f64 {
    MIN_MS * (MAX_MS / MIN_MS).powf(bin as f64 / DURATION_BINS as f64)
}

/// The collector.
pub struct Dashboard<'p> {
    policy: &'p Policy,
    width_index: usize,
    /// (bucket start, agent, kind) → records.
    buckets: HashMap<(i64, u32, u16), u64>,
    bucket_starts: HashSet<i64>,
    agents: HashMap<String, u32>,
    agent_names: Vec<String>,
    agent_counts: Vec<u64>,
    kinds: HashMap<String, u16>,
    kind_names: Vec<String>,
    kind_counts: Vec<u64>,
    durations: Vec<DurationBins>,
    texts: HashMap<String, u64>,
    texts_evicted: bool,
    resolved: HashSet<String>,
    /// The newest records not resolved inline, as stored (buffers reused: no allocation per
    /// record once full).
    recent: VecDeque<Vec<u8>>,
    first: Option<i64>,
    last: Option<i64>,
    groups: super::groups::Groups,
}

impl<'p> Dashboard<'p> {
    /// The groups' trends end at `end` (Unix seconds): now, or the end of the range asked.
    pub fn ending(mut self, end: i64) -> Dashboard<'p> {
        self.groups = super::groups::Groups::new(end);
        self
    }

    /// Empty; the policy gives each agent's timeout.
    pub fn new(policy: &'p Policy) -> Dashboard<'p> {
        Dashboard {
            policy,
            width_index: 0,
            buckets: HashMap::default(),
            bucket_starts: HashSet::default(),
            agents: HashMap::default(),
            agent_names: Vec::new(),
            agent_counts: Vec::new(),
            kinds: HashMap::default(),
            kind_names: Vec::new(),
            kind_counts: Vec::new(),
            durations: Vec::new(),
            texts: HashMap::default(),
            texts_evicted: false,
            resolved: HashSet::default(),
            recent: VecDeque::new(),
            first: None,
            last: None,
            groups: super::groups::Groups::default(),
        }
    }

    fn agent_id(&mut self, name: &str) -> u32 {
        if let Some(id) = self.agents.get(name) {
            return *id;
        }
        let name = if self.agent_names.len() >= MAX_AGENTS {
            "(other agents)"
        } else {
            name
        };
        if let Some(id) = self.agents.get(name) {
            return *id;
        }
        let id = self.agent_names.len() as u32;
        self.agents.insert(name.to_string(), id);
        self.agent_names.push(name.to_string());
        self.agent_counts.push(0);
        self.durations.push(DurationBins {
            bins: vec![0; DURATION_BINS],
            timeout_ms: self.policy.agent(name).timeout.map(|d| d.as_millis()),
            ..DurationBins::default()
        });
        id
    }

    fn kind_id(&mut self, name: &str) -> u16 {
        if let Some(id) = self.kinds.get(name) {
            return *id;
        }
        // Kinds are a closed vocabulary; a log full of made-up ones shares one slot.
        let name = if self.kind_names.len() >= 64 {
            "(other)"
        } else {
            name
        };
        if let Some(id) = self.kinds.get(name) {
            return *id;
        }
        let id = self.kind_names.len() as u16;
        self.kinds.insert(name.to_string(), id);
        self.kind_names.push(name.to_string());
        self.kind_counts.push(0);
        id
    }

    /// Takes one line the report's filter admitted (resolution lines included), parsed and
    /// as stored.
    pub fn observe(&mut self, l: &LogLine, raw: &[u8]) {
        if let Some(id) = l.resolves.as_deref() {
            // Closed as the thresholds and `errors --unresolved` see it: by any resolution
            // that does not say it failed (a person's decision included).
            if !l.resolution.as_ref().is_some_and(|r| r.failed()) {
                self.resolved.insert(id.to_string());
            }
            return;
        }
        let agent = self.agent_id(l.agent().unwrap_or("(none)"));
        let kind = self.kind_id(l.kind().unwrap_or("unknown"));
        self.agent_counts[agent as usize] += 1;
        self.kind_counts[kind as usize] += 1;
        if let Some(ms) = l.duration_ms {
            let d = &mut self.durations[agent as usize];
            d.bins[duration_bin(ms)] += 1;
            d.count += 1;
            if d.timeout_ms.is_some_and(|t| ms > t) {
                d.past_timeout += 1;
            }
        }
        if let Some(text) = l.detail() {
            self.count_text(text);
        }
        let at = l.timestamp.as_deref().and_then(unix_seconds);
        self.groups.observe(l, &self.kind_names[kind as usize], at);
        if let Some(at) = at {
            self.first = Some(self.first.map_or(at, |f| f.min(at)));
            self.last = Some(self.last.map_or(at, |f| f.max(at)));
            let w = WIDTHS[self.width_index];
            let start = at.div_euclid(w) * w;
            match self.buckets.entry((start, agent, kind)) {
                std::collections::hash_map::Entry::Occupied(mut e) => *e.get_mut() += 1,
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(1);
                    self.bucket_starts.insert(start);
                    if self.bucket_starts.len() > MAX_BUCKETS {
                        self.coarsen();
                    }
                }
            }
        }
        let resolved_inline = l.resolution.as_ref().is_some_and(|r| r.successful());
        if !resolved_inline {
            let mut buf = if self.recent.len() == RECENT {
                self.recent.pop_front().unwrap_or_default()
            } else {
                Vec::new()
            };
            buf.clear();
            buf.extend_from_slice(raw);
            self.recent.push_back(buf);
        }
    }

    /// Counts a text; past twice [`TEXT_SLOTS`] texts, the least frequent half is dropped
    /// at once, so the cost per record stays small whatever the number of distinct texts.
    fn count_text(&mut self, text: &str) {
        // The first line, at most 160 characters: looked up without allocating.
        let line = text.lines().next().unwrap_or("");
        let key = match line.char_indices().nth(160) {
            Some((i, _)) => &line[..i],
            None => line,
        };
        if let Some(c) = self.texts.get_mut(key) {
            *c += 1;
            return;
        }
        self.texts.insert(key.to_string(), 1);
        if self.texts.len() >= 2 * TEXT_SLOTS {
            let mut counts: Vec<u64> = self.texts.values().copied().collect();
            counts.sort_unstable_by(|a, b| b.cmp(a));
            let floor = counts[TEXT_SLOTS];
            self.texts.retain(|_, c| *c > floor);
            self.texts_evicted = true;
        }
    }

    fn coarsen(&mut self) {
        while self.bucket_starts.len() > MAX_BUCKETS && self.width_index + 1 < WIDTHS.len() {
            self.width_index += 1;
            let w = WIDTHS[self.width_index];
            let old = std::mem::take(&mut self.buckets);
            self.bucket_starts.clear();
            for ((start, a, k), n) in old {
                let s = start.div_euclid(w) * w;
                *self.buckets.entry((s, a, k)).or_default() += n;
                self.bucket_starts.insert(s);
            }
        }
    }

    /// What the page draws.
    pub fn finish(self) -> Drawn {
        let (order, rank) = ranking(&self.agent_names, &self.agent_counts);
        let mut agents: Vec<(String, u64, DurationBins)> = self
            .agent_names
            .into_iter()
            .zip(self.agent_counts)
            .zip(self.durations)
            .map(|((n, c), d)| (n, c, d))
            .collect();
        let (kind_order, kind_rank) = ranking(&self.kind_names, &self.kind_counts);
        let mut kinds: Vec<(String, u64)> =
            self.kind_names.into_iter().zip(self.kind_counts).collect();
        let buckets: Vec<(i64, usize, usize, u64)> = self
            .buckets
            .into_iter()
            .map(|((s, a, k), n)| (s, rank[a as usize], kind_rank[k as usize], n))
            .collect();
        let sorted_agents: Vec<(String, u64, DurationBins)> = order
            .iter()
            .map(|i| std::mem::take(&mut agents[*i]))
            .collect();
        let sorted_kinds: Vec<(String, u64)> = kind_order
            .iter()
            .map(|i| std::mem::take(&mut kinds[*i]))
            .collect();
        let mut texts: Vec<(String, u64)> = self.texts.into_iter().collect();
        texts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        texts.truncate(15);
        let resolved = self.resolved;
        let unresolved: Vec<Recent> = self
            .recent
            .iter()
            .rev()
            .filter_map(|raw| LogLine::parse(raw))
            .filter(|l| {
                !l.error_id
                    .as_deref()
                    .is_some_and(|id| resolved.contains(id))
            })
            .take(50)
            .map(|l| Recent {
                error_id: l.error_id.as_deref().unwrap_or("").to_string(),
                at: l
                    .timestamp
                    .as_deref()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map_or(0, |t| t.timestamp()),
                agent: l.agent().unwrap_or("(none)").to_string(),
                kind: l.kind().unwrap_or("unknown").to_string(),
                severity: l.severity.as_deref().map(str::to_string),
                detail: crate::term::cut(l.detail().unwrap_or(""), 240),
            })
            .collect();
        Drawn {
            bucket_seconds: WIDTHS[self.width_index],
            buckets,
            agents: sorted_agents,
            kinds: sorted_kinds,
            texts,
            texts_approximate: self.texts_evicted,
            unresolved,
            first: self.first,
            last: self.last,
            groups: self.groups,
        }
    }
}

/// Indexes by count, most first, then by name; and the rank of each index.
fn ranking(names: &[String], counts: &[u64]) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|a, b| {
        counts[*b]
            .cmp(&counts[*a])
            .then_with(|| names[*a].cmp(&names[*b]))
    });
    let mut rank = vec![0usize; names.len()];
    for (r, i) in order.iter().enumerate() {
        rank[*i] = r;
    }
    (order, rank)
}

/// The gathered numbers, sorted: agents and kinds by count, most first.
#[derive(Debug, Default)]
pub struct Drawn {
    /// The width of a time bucket, in seconds.
    pub bucket_seconds: i64,
    /// (bucket start, agent rank, kind rank, records).
    pub buckets: Vec<(i64, usize, usize, u64)>,
    /// Agents: name, records, durations.
    pub agents: Vec<(String, u64, DurationBins)>,
    /// Kinds: name, records.
    pub kinds: Vec<(String, u64)>,
    /// The most frequent texts and their counts.
    pub texts: Vec<(String, u64)>,
    /// Whether text counts are estimates (more distinct texts than slots).
    pub texts_approximate: bool,
    /// The newest unresolved records, newest first.
    pub unresolved: Vec<Recent>,
    /// The first record's time.
    pub first: Option<i64>,
    /// The last record's time.
    pub last: Option<i64>,
    /// Failures by signature.
    pub groups: super::groups::Groups,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(d: &mut Dashboard<'_>, line: &str) {
        let l = LogLine::parse(line.as_bytes()).expect("line");
        d.observe(&l, line.as_bytes());
    }

    #[test]
    fn gathers_agents_kinds_texts_and_unresolved() {
        let policy = Policy::default();
        let mut d = Dashboard::new(&policy);
        for i in 0..10 {
            feed(
                &mut d,
                &format!(
                    r#"{{"error_id":"e{i}","timestamp":"2026-02-04T14:{i:02}:00Z","agent":"{}","kind":"{}","detail":"t{}","duration_ms":{}}}"#,
                    if i < 7 { "a" } else { "b" },
                    if i % 2 == 0 { "timeout" } else { "crash" },
                    i % 3,
                    1000 * (i + 1)
                ),
            );
        }
        feed(
            &mut d,
            r#"{"resolves":"e9","resolution":{"successful":true}}"#,
        );
        // A person's decision closes e8 too; a resolution that says it failed leaves e7 open.
        feed(
            &mut d,
            r#"{"resolves":"e8","resolution":{"action_taken":"user_escalation","user_choice":"B"}}"#,
        );
        feed(
            &mut d,
            r#"{"resolves":"e7","resolution":{"action_taken":"retry","successful":false}}"#,
        );
        let out = d.finish();
        assert_eq!(out.agents[0].0, "a");
        assert_eq!(out.agents[0].1, 7);
        assert_eq!(out.agents[0].2.count, 7);
        assert_eq!(out.kinds[0], ("crash".to_string(), 5));
        assert_eq!(out.texts[0], ("t0".to_string(), 4));
        assert_eq!(out.unresolved.len(), 8);
        assert_eq!(
            out.unresolved[0].error_id, "e7",
            "newest first, e9 resolved and e8 decided"
        );
        assert_eq!(out.bucket_seconds, 60);
        let total: u64 = out.buckets.iter().map(|b| b.3).sum();
        assert_eq!(total, 10);
    }

    #[test]
    fn buckets_coarsen_to_stay_bounded() {
        let policy = Policy::default();
        let mut d = Dashboard::new(&policy);
        for i in 0..20_000i64 {
            let t = chrono::DateTime::from_timestamp(1_700_000_000 + i * 120, 0).expect("time");
            feed(
                &mut d,
                &format!(
                    r#"{{"timestamp":"{}","agent":"a","kind":"timeout"}}"#,
                    t.to_rfc3339()
                ),
            );
        }
        let out = d.finish();
        assert!(out.bucket_seconds >= 900, "{}", out.bucket_seconds);
        assert!(out.buckets.len() <= MAX_BUCKETS);
        assert_eq!(out.buckets.iter().map(|b| b.3).sum::<u64>(), 20_000);
    }

    #[test]
    fn frequent_texts_survive_many_distinct_ones() {
        let policy = Policy::default();
        let mut d = Dashboard::new(&policy);
        for i in 0..5000 {
            feed(&mut d, &format!(r#"{{"agent":"a","detail":"unique {i}"}}"#));
            if i % 5 == 0 {
                feed(&mut d, r#"{"agent":"a","detail":"the usual"}"#);
            }
        }
        let out = d.finish();
        assert_eq!(out.texts[0].0, "the usual");
        assert!(out.texts[0].1 >= 1000);
        assert!(out.texts_approximate);
    }

    #[test]
    fn times_read_fast_agree_with_chrono() {
        for t in [
            "2026-02-04T14:30:22Z",
            "2024-02-29T00:00:00.123Z",
            "1999-12-31T23:59:59Z",
            "2026-02-04T14:30:22+02:00",
            "2026-01-01T00:00:00.5-07:30",
        ] {
            let want = DateTime::parse_from_rfc3339(t).map(|x| x.timestamp()).ok();
            assert_eq!(unix_seconds(t), want, "{t}");
        }
        assert_eq!(unix_seconds("2026-13-04T14:30:22Z"), None);
        assert_eq!(unix_seconds("soon"), None);
        assert_eq!(unix_seconds("2026-02-04T14:30:22Zjunk"), None);
    }

    #[test]
    fn duration_bins_are_log_spaced() {
        assert_eq!(duration_bin(0), 0);
        assert_eq!(duration_bin(u64::MAX), DURATION_BINS - 1);
        assert!(duration_bin(1_000) < duration_bin(60_000));
        assert!(bin_start_ms(duration_bin(300_000)) <= 300_000.0);
    }
}
