//! Failures grouped as an issue tracker groups them: one group per signature — the kind, the
//! tool (breaker key) when the record names one, and the message with its numbers and ids
//! blanked — with when it was first and last seen, how often, by which agents and sessions,
//! whether it is rising, what triage advises for the kind and the commands that act on it.
//!
//! Bounded: at most [`MAX_GROUPS`] signatures are told apart (later new ones share one group
//! per kind), and each keeps at most [`MAX_NAMES`] agent and session names.

use crate::core::error_record::LogLine;
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

/// Signatures told apart.
pub const MAX_GROUPS: usize = 500;
/// Names kept per group (agents, sessions); past it the count is "at least".
pub const MAX_NAMES: usize = 200;
/// Bins of the trend: 6 hours each, the last 7 days.
pub const TREND_BINS: usize = 28;
const TREND_BIN_S: i64 = 6 * 3600;
/// Raw (kind, tool, message) triples remembered with their group; past it the memory is
/// emptied and refilled, so it stays flat whatever the log.
const MAX_SEEN: usize = 4096;
/// Raw keys compared byte for byte before the hashed lookup (a log repeats a few messages).
const RECENT: usize = 16;

/// One group.
#[derive(Clone, Debug, Default)]
pub struct Group {
    /// The kind.
    pub kind: String,
    /// The breaker key the records name, if one.
    pub tool: Option<String>,
    /// The message, normalised.
    pub message: String,
    /// Records.
    pub count: u64,
    /// First and last seen (Unix seconds).
    pub first: Option<i64>,
    /// Last seen.
    pub last: Option<i64>,
    /// Agents, at most [`MAX_NAMES`].
    pub agents: BTreeSet<String>,
    /// Sessions, at most [`MAX_NAMES`].
    pub sessions: BTreeSet<String>,
    /// Whether a name was not kept.
    pub names_capped: bool,
    /// Records in the 24 hours before the end, and in the 24 before those.
    pub day: u64,
    /// The 24 hours before.
    pub day_before: u64,
    /// Records per 6 hours over the last 7 days, oldest first.
    pub trend: Vec<u64>,
    /// The worst severity seen (critical 3, error 2, warning 1).
    pub worst: u8,
}

/// The collector.
#[derive(Debug, Default)]
pub struct Groups {
    end: i64,
    index: HashMap<(String, Option<String>, String), usize>,
    /// A record's kind, breaker key and message as written (see [`raw_key`]) → its group, so
    /// a message seen before is not normalised again. A raw triple always lands in the same
    /// group: its signature's group, once made, stays; once the groups are capped, a
    /// signature not told apart goes on sharing its kind's "(other messages)".
    seen: HashMap<Vec<u8>, usize>,
    /// The key being looked up, reused from record to record.
    scratch: Vec<u8>,
    /// The last [`RECENT`] raw keys looked up and their groups, compared before hashing.
    recent: Vec<(Vec<u8>, usize)>,
    /// The entry of `recent` the next new key replaces.
    recent_next: usize,
    /// The groups, in order of first appearance.
    pub list: Vec<Group>,
}

/// A message with what varies between occurrences blanked: runs of digits become `#`, long
/// hexadecimal or mixed tokens (ids, hashes) `…`; the first line, at most 100 characters.
pub fn normalise(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    let mut out = String::new();
    for (i, word) in line.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let hexish = word.len() >= 8
            && word.chars().filter(|c| c.is_ascii_hexdigit()).count() * 10 >= word.len() * 8
            && word.chars().any(|c| c.is_ascii_digit());
        if hexish {
            out.push('…');
            continue;
        }
        let mut digits = false;
        for c in word.chars() {
            if c.is_ascii_digit() {
                if !digits {
                    out.push('#');
                }
                digits = true;
            } else {
                digits = false;
                out.push(c);
            }
        }
    }
    crate::term::cut(&out, 100)
}

/// [`crate::term::cut`], borrowed when it would change nothing.
fn cut_cow(text: &str, max: usize) -> Cow<'_, str> {
    // Most names: short, one line, no line end to look for character by character.
    if text.len() <= max.max(2) && !text.bytes().any(|b| b == b'\n' || b == b'\r') {
        return Cow::Borrowed(text);
    }
    let line = text.lines().next().unwrap_or("");
    if line.len() <= max.max(2) {
        Cow::Borrowed(line)
    } else {
        Cow::Owned(crate::term::cut(text, max))
    }
}

/// `kind`, `tool` and `message` in one unambiguous byte string: each length-prefixed, the
/// tool's absence marked apart from an empty tool.
fn raw_key(out: &mut Vec<u8>, kind: &str, tool: Option<&str>, message: &str) {
    out.clear();
    out.extend_from_slice(&(kind.len() as u64).to_le_bytes());
    out.extend_from_slice(kind.as_bytes());
    match tool {
        Some(t) => {
            out.push(1);
            out.extend_from_slice(&(t.len() as u64).to_le_bytes());
            out.extend_from_slice(t.as_bytes());
        }
        None => out.push(0),
    }
    out.extend_from_slice(message.as_bytes());
}

impl Groups {
    /// Empty; the trend ends at `end` (Unix seconds: now, or `--until`).
    pub fn new(end: i64) -> Groups {
        Groups {
            end,
            ..Groups::default()
        }
    }

    /// Takes one failure record (not a resolution) and its time.
    pub fn observe(&mut self, l: &LogLine, kind: &str, at: Option<i64>) {
        let raw_tool = l.breaker_key.as_deref();
        let raw_message = l.detail().unwrap_or("");
        raw_key(&mut self.scratch, kind, raw_tool, raw_message);
        if let Some((_, i)) = self.recent.iter().find(|(k, _)| *k == self.scratch) {
            let i = *i;
            self.count(i, l, at);
            return;
        }
        let i = match self.seen.get(self.scratch.as_slice()) {
            Some(i) => *i,
            None => {
                let i = self.group_of(kind, raw_tool, raw_message);
                if self.seen.len() >= MAX_SEEN {
                    self.seen.clear();
                }
                self.seen.insert(self.scratch.clone(), i);
                i
            }
        };
        if self.recent.len() < RECENT {
            self.recent.push((self.scratch.clone(), i));
        } else if let Some(slot) = self.recent.get_mut(self.recent_next) {
            slot.0.clear();
            slot.0.extend_from_slice(&self.scratch);
            slot.1 = i;
            self.recent_next = (self.recent_next + 1) % RECENT;
        }
        self.count(i, l, at);
    }

    /// The group of a signature, made if new (or its kind's "(other messages)" past
    /// [`MAX_GROUPS`]).
    fn group_of(&mut self, kind: &str, raw_tool: Option<&str>, raw_message: &str) -> usize {
        let tool = raw_tool.map(|t| crate::term::cut(t, 80));
        let message = normalise(raw_message);
        let mut key = (kind.to_string(), tool, message);
        match self.index.get(&key) {
            Some(i) => *i,
            None => {
                if self.list.len() >= MAX_GROUPS {
                    key = (kind.to_string(), None, "(other messages)".to_string());
                }
                match self.index.get(&key) {
                    Some(i) => *i,
                    None => {
                        self.list.push(Group {
                            kind: key.0.clone(),
                            tool: key.1.clone(),
                            message: key.2.clone(),
                            trend: vec![0; TREND_BINS],
                            ..Group::default()
                        });
                        self.index.insert(key, self.list.len() - 1);
                        self.list.len() - 1
                    }
                }
            }
        }
    }

    /// Adds one record to group `i`.
    fn count(&mut self, i: usize, l: &LogLine, at: Option<i64>) {
        let end = self.end;
        let g = &mut self.list[i];
        g.count += 1;
        let keep = |set: &mut BTreeSet<String>, name: Option<&str>, capped: &mut bool| {
            if let Some(n) = name {
                if set.len() < MAX_NAMES {
                    let name = cut_cow(n, 80);
                    if !set.contains(name.as_ref()) {
                        set.insert(name.into_owned());
                    }
                } else if !*capped && !set.contains(n) {
                    // Once a name was not kept, whether this one is changes nothing.
                    *capped = true;
                }
            }
        };
        keep(&mut g.agents, l.agent(), &mut g.names_capped);
        keep(
            &mut g.sessions,
            l.session_id.as_deref(),
            &mut g.names_capped,
        );
        g.worst = g.worst.max(match l.severity.as_deref() {
            Some("critical") => 3,
            Some("error") => 2,
            Some("warning") => 1,
            _ => 0,
        });
        if let Some(at) = at {
            g.first = Some(g.first.map_or(at, |f| f.min(at)));
            g.last = Some(g.last.map_or(at, |f| f.max(at)));
            let ago = end - at;
            if (0..86_400).contains(&ago) {
                g.day += 1;
            } else if (86_400..2 * 86_400).contains(&ago) {
                g.day_before += 1;
            }
            if (0..TREND_BINS as i64 * TREND_BIN_S).contains(&ago) {
                let bin = TREND_BINS - 1 - (ago / TREND_BIN_S) as usize;
                g.trend[bin] += 1;
            }
        }
    }

    /// The groups, those that need attention first: a breaker open for the tool or an agent
    /// (`open` says which keys are), then failures in the last day (critical first, then the
    /// most), then rising ones, then the most recent.
    pub fn ranked(&self, open: &dyn Fn(&Group) -> bool) -> Vec<&Group> {
        let mut list: Vec<&Group> = self.list.iter().collect();
        list.sort_by_key(|g| {
            (
                std::cmp::Reverse(open(g)),
                std::cmp::Reverse(g.day > 0),
                std::cmp::Reverse(g.worst),
                std::cmp::Reverse(g.day > g.day_before),
                std::cmp::Reverse(g.day),
                std::cmp::Reverse(g.last),
                std::cmp::Reverse(g.count),
            )
        });
        list
    }
}

/// What triage advises for a kind (classify's suggestions for it), if it is one of triage's.
pub fn advice(kind: &str) -> &'static [&'static str] {
    match kind.parse::<crate::core::vocab::Kind>() {
        Ok(k) => crate::core::classify::rules::defaults(k).suggestions,
        Err(_) => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> LogLine<'_> {
        LogLine::parse(s.as_bytes()).expect("line")
    }

    #[test]
    fn messages_that_differ_in_numbers_and_ids_share_a_signature() {
        assert_eq!(
            normalise("HTTP 429: retry in 17 s (req 9f8e7d6c5b4a)"),
            "HTTP #: retry in # s (req …"
        );
        assert_eq!(
            normalise("read paper 5 of 8"),
            normalise("read paper 7 of 8")
        );
        assert_ne!(normalise("no citation"), normalise("no answer"));
        assert!(normalise(&"x".repeat(500)).chars().count() <= 100);
    }

    #[test]
    fn a_name_cut_borrowed_reads_as_the_cut_one() {
        let long = "é".repeat(81);
        for n in [
            "",
            "a",
            "ab\ncd",
            "tab\r\nnext",
            "cr\r",
            "\r",
            "\n",
            &"x".repeat(80),
            &"x".repeat(81),
            &"é".repeat(80),
            &long,
            "🚀 42",
        ] {
            assert_eq!(cut_cow(n, 80), crate::term::cut(n, 80), "{n:?}");
        }
    }

    #[test]
    fn a_message_seen_again_lands_in_the_same_group_past_every_cap() {
        // Past MAX_SEEN raw messages (their memory emptied) and MAX_GROUPS signatures, each
        // record counts once, in the group its signature was given the first time.
        let mut g = Groups::new(0);
        let n = MAX_SEEN + 100;
        for round in 0..2 {
            for i in 0..n {
                let word: String = i
                    .to_string()
                    .chars()
                    .map(|d| char::from(b'a' + d.to_digit(10).unwrap_or(0) as u8))
                    .collect();
                let text = format!(r#"{{"kind":"crash","detail":"w{word} {i}"}}"#);
                g.observe(&line(&text), "crash", None);
            }
            assert_eq!(g.list.len(), MAX_GROUPS + 1, "round {round}");
        }
        assert_eq!(g.list[0].message, "wa #");
        assert_eq!(g.list[0].count, 2);
        assert_eq!(g.list[MAX_GROUPS].message, "(other messages)");
        assert_eq!(g.list[MAX_GROUPS].count, 2 * (n - MAX_GROUPS) as u64);
        assert!(g.seen.len() <= MAX_SEEN);
    }

    #[test]
    fn groups_count_first_last_agents_sessions_and_trend() {
        let mut g = Groups::new(1_000_000);
        for (i, (agent, session, detail)) in [
            ("a", "s1", "paper 5 of 8"),
            ("b", "s2", "paper 6 of 8"),
            ("a", "s1", "other thing"),
        ]
        .iter()
        .enumerate()
        {
            let text = format!(
                r#"{{"agent":"{agent}","session_id":"{session}","kind":"timeout","detail":"{detail}"}}"#
            );
            let l = line(&text);
            g.observe(&l, "timeout", Some(1_000_000 - 100_000 + i as i64 * 50_000));
        }
        let list = g.ranked(&|_| false);
        assert_eq!(list.len(), 2);
        let paper = list
            .iter()
            .find(|x| x.message == "paper # of #")
            .expect("group");
        assert_eq!(paper.count, 2);
        assert_eq!(paper.agents.len(), 2);
        assert_eq!(paper.sessions.len(), 2);
        assert_eq!(paper.first, Some(900_000));
        assert_eq!(paper.last, Some(950_000));
        assert_eq!((paper.day, paper.day_before), (1, 1));
        assert_eq!(paper.trend.iter().sum::<u64>(), 2);
        // The other group's one record is in the last day and newer: it comes first.
        assert_eq!(list[0].message, "other thing");
        assert!(!advice("timeout").is_empty());
        assert!(advice("made-up").is_empty());
    }

    #[test]
    fn an_open_breaker_puts_its_group_first() {
        let mut g = Groups::new(1_000_000);
        let a = line(r#"{"agent":"a","kind":"crash","detail":"x"}"#);
        let b = line(r#"{"agent":"b","kind":"crash","detail":"y"}"#);
        g.observe(&a, "crash", Some(999_000));
        g.observe(&b, "crash", Some(100));
        let list = g.ranked(&|x| x.agents.contains("b"));
        assert_eq!(list[0].message, "y");
    }

    #[test]
    fn signatures_are_capped() {
        let mut g = Groups::new(0);
        for i in 0..(MAX_GROUPS + 50) {
            let word: String = i
                .to_string()
                .chars()
                .map(|d| char::from(b'a' + d.to_digit(10).unwrap_or(0) as u8))
                .collect();
            let text = format!(r#"{{"kind":"crash","detail":"w{word}"}}"#);
            g.observe(&line(&text), "crash", None);
        }
        assert!(g.list.len() <= MAX_GROUPS + 1);
        assert_eq!(
            g.list.iter().map(|x| x.count).sum::<u64>(),
            (MAX_GROUPS + 50) as u64
        );
    }
}
