//! The facts an error text states besides its kind — exit status, HTTP status, Retry-After, a
//! usage limit's reset, errno — found by the automata built from [`super::rules::facts`], with
//! their captures read by hand from the span of each leftmost-first match (a DFA finds spans,
//! not groups). Each reader follows its pattern's groups; `tests` compares them with `regex`.

use super::builtin;

/// Where each fact pattern's leftmost-first match is in one ASCII-lowercased text.
pub struct Found<'t> {
    text: &'t [u8],
    starts: Vec<Option<usize>>,
}

// The order of `rules::facts` (checked by `builtin::tests`).
const USAGE_EPOCH: usize = 0;
const USAGE_CLOCK: usize = 1;
const EXIT_STATUS: usize = 2;
const HTTP_STATUS: usize = 3;
const HTTP_PHRASE: usize = 4;
const RETRY_AFTER: usize = 5;
const ERRNO: usize = 6;

/// A reset time's groups: `resets Jan 18, 11:30am (Asia/Calcutta)`.
#[derive(Debug, PartialEq, Eq)]
pub struct Clock<'t> {
    /// The month's first three letters (group 1), with the day (group 2).
    pub month: Option<(&'t [u8], &'t [u8])>,
    /// Group 3.
    pub hour: &'t [u8],
    /// Group 4.
    pub minute: Option<&'t [u8]>,
    /// `am` or `pm` (group 5).
    pub half: &'t [u8],
    /// The zone in parentheses (group 6).
    pub zone: Option<&'t [u8]>,
}

impl<'t> Found<'t> {
    /// Runs the fact automata once over `lower`.
    pub fn new(lower: &'t [u8]) -> Found<'t> {
        #[cfg(test)]
        tests::check_lower(lower);
        Found::build(lower)
    }

    fn build(lower: &'t [u8]) -> Found<'t> {
        Found {
            text: lower,
            starts: builtin::FACTS.leftmost_starts(lower),
        }
    }

    /// The leftmost-first match of fact `n`.
    fn span(&self, n: usize) -> Option<&'t [u8]> {
        let start = (*self.starts.get(n)?)?;
        let (s, e) = builtin::fact_span(n, self.text, start)?;
        self.text.get(s..e)
    }

    /// `limit reached|(\d{9,11})`: the epoch seconds.
    pub fn usage_epoch(&self) -> Option<&'t [u8]> {
        let m = self.span(USAGE_EPOCH)?;
        let bar = m.iter().rposition(|&b| b == b'|')?;
        m.get(bar + 1..)
    }

    /// A reset time's groups.
    pub fn usage_clock(&self) -> Option<Clock<'t>> {
        clock(self.span(USAGE_CLOCK)?)
    }

    /// The exit status after `exit code`, `exit status`, …: `-?\d+` at the end of the match.
    pub fn exit_status(&self) -> Option<&'t [u8]> {
        let m = self.span(EXIT_STATUS)?;
        let digits = trailing(m, |b| b.is_ascii_digit());
        let sign = usize::from(m.len() > digits && m[m.len() - digits - 1] == b'-');
        m.get(m.len() - digits - sign..)
    }

    /// The status after what names it (the last three bytes of the match), else the one
    /// before its reason phrase (the first three).
    pub fn http_status(&self) -> Option<&'t [u8]> {
        if let Some(m) = self.span(HTTP_STATUS) {
            return m.get(m.len().checked_sub(3)?..);
        }
        self.span(HTTP_PHRASE)?.get(..3)
    }

    /// The seconds of `Retry-After: N` (group 1) or `try again in Ns` (group 2).
    pub fn retry_after(&self) -> Option<&'t [u8]> {
        let m = self.span(RETRY_AFTER)?;
        let after_form = m.len() > 11
            && matches!(m.get(5), Some(b'-' | b'_' | b' '))
            && m.get(6..11) == Some(b"after");
        if m.starts_with(b"retry") && after_form {
            // `(\d+(?:\.\d+)?)` ends the match, and nothing before it is a digit or a dot.
            let n = trailing(m, |b| b.is_ascii_digit() || b == b'.');
            return m.get(m.len() - n..);
        }
        // `… in (\d+(?:\.\d+)?)\s*s`.
        let at = memchr::memmem::find(m, b" in ")? + 4;
        number(m.get(at..)?)
    }

    /// The errno name: the whole match.
    pub fn errno(&self) -> Option<&'t [u8]> {
        self.span(ERRNO)
    }
}

/// How many bytes at the end of `m` satisfy `f`.
fn trailing(m: &[u8], f: impl Fn(u8) -> bool) -> usize {
    m.iter().rev().take_while(|&&b| f(b)).count()
}

/// `\d+(?:\.\d+)?` at the start of `m`.
fn number(m: &[u8]) -> Option<&[u8]> {
    let int = m.iter().take_while(|b| b.is_ascii_digit()).count();
    if int == 0 {
        return None;
    }
    let frac = match m.get(int) {
        Some(b'.') => m[int + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count(),
        _ => 0,
    };
    m.get(..if frac > 0 { int + 1 + frac } else { int })
}

/// A cursor over a match, for reading its groups in the pattern's order.
struct Cursor<'t> {
    m: &'t [u8],
    at: usize,
}

impl<'t> Cursor<'t> {
    fn rest(&self) -> &'t [u8] {
        self.m.get(self.at..).unwrap_or_default()
    }

    fn lit(&mut self, s: &[u8]) -> bool {
        let hit = self.rest().starts_with(s);
        if hit {
            self.at += s.len();
        }
        hit
    }

    /// Up to `max` bytes satisfying `f` (greedy), at least `min`.
    fn run(&mut self, min: usize, max: usize, f: impl Fn(u8) -> bool) -> Option<&'t [u8]> {
        let n = self.rest().iter().take(max).take_while(|&&b| f(b)).count();
        if n < min {
            return None;
        }
        let s = self.rest().get(..n)?;
        self.at += n;
        Some(s)
    }
}

/// `\s` without Unicode.
fn space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

/// The groups of [`super::rules::facts::USAGE_CLOCK`] in its match `m`. Every choice the
/// pattern makes is forced by the bytes that follow it (a greedy part that took too much
/// leaves a byte the next part cannot take), so reading left to right takes the regex's path.
fn clock(m: &[u8]) -> Option<Clock<'_>> {
    let mut c = Cursor { m, at: 0 };
    if !c.lit(b"reset") {
        return None;
    }
    let _ = c.lit(b"s") || c.lit(b"ting");
    c.run(1, usize::MAX, space)?;
    let before_at = c.at;
    if c.lit(b"at") && c.run(1, usize::MAX, space).is_none() {
        c.at = before_at;
    }
    const MONTHS: [&[u8]; 12] = [
        b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov",
        b"dec",
    ];
    let mut month = None;
    if let Some(name) = MONTHS.iter().find(|n| c.rest().starts_with(n)) {
        let before = c.at;
        c.at += 3;
        c.run(0, usize::MAX, |b| b.is_ascii_lowercase());
        let _ = c.lit(b".");
        let day = if c.lit(b" ") {
            c.run(1, 2, |b| b.is_ascii_digit())
        } else {
            None
        };
        let _ = c.lit(b",");
        match day {
            Some(day) if c.lit(b" ") => {
                let _ = c.lit(b"at ");
                month = Some((*name, day));
            }
            _ => c.at = before,
        }
    }
    let hour = c.run(1, 2, |b| b.is_ascii_digit())?;
    let before_minute = c.at;
    let minute = if c.lit(b":") {
        let mm = c.run(2, 2, |b| b.is_ascii_digit());
        if mm.is_none() {
            c.at = before_minute;
        }
        mm
    } else {
        None
    };
    c.run(0, usize::MAX, space);
    let half = c.run(2, 2, |b| b == b'a' || b == b'p' || b == b'm')?;
    // What is left is ` (zone)` or nothing.
    let rest = c.rest();
    let zone = match rest.iter().position(|&b| b == b'(') {
        Some(open) if rest.ends_with(b")") => rest.get(open + 1..rest.len() - 1),
        _ => None,
    };
    Some(Clock {
        month,
        hour,
        minute,
        half,
        zone,
    })
}

#[cfg(test)]
pub mod tests {
    use super::super::rules::facts;
    use super::*;
    use proptest::prelude::*;
    use regex::bytes::{Captures, Regex, RegexBuilder};
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    fn re(p: &'static str) -> &'static Regex {
        static CACHE: OnceLock<Mutex<HashMap<&'static str, &'static Regex>>> = OnceLock::new();
        let mut m = CACHE.get_or_init(Default::default).lock().unwrap();
        m.entry(p).or_insert_with(|| {
            Box::leak(Box::new(
                RegexBuilder::new(p)
                    .unicode(false)
                    .multi_line(true)
                    .build()
                    .unwrap(),
            ))
        })
    }

    fn group<'t>(c: &Captures<'t>, i: usize) -> Option<&'t [u8]> {
        c.get(i).map(|m| m.as_bytes())
    }

    fn check(text: &str) {
        check_lower(text.to_ascii_lowercase().as_bytes());
    }

    /// What `regex` captures, next to what the readers above take from the automata's spans.
    /// Also called on every text the classifier's unit tests read facts from.
    pub fn check_lower(t: &[u8]) {
        let text = String::from_utf8_lossy(t);
        let f = Found::build(t);
        let epoch = re(facts::USAGE_EPOCH).captures(t);
        assert_eq!(
            f.usage_epoch(),
            epoch.as_ref().and_then(|c| group(c, 1)),
            "{text:?}"
        );
        let clock = re(facts::USAGE_CLOCK).captures(t).map(|c| Clock {
            month: group(&c, 1).zip(group(&c, 2)),
            hour: group(&c, 3).unwrap_or_default(),
            minute: group(&c, 4),
            half: group(&c, 5).unwrap_or_default(),
            zone: group(&c, 6),
        });
        assert_eq!(f.usage_clock(), clock, "{text:?}");
        let exit = re(facts::EXIT_STATUS).captures(t);
        assert_eq!(
            f.exit_status(),
            exit.as_ref().and_then(|c| group(c, 1)),
            "{text:?}"
        );
        let http = re(facts::HTTP_STATUS)
            .captures(t)
            .or_else(|| re(facts::HTTP_PHRASE).captures(t));
        assert_eq!(
            f.http_status(),
            http.as_ref().and_then(|c| group(c, 1)),
            "{text:?}"
        );
        let retry = re(facts::RETRY_AFTER).captures(t);
        assert_eq!(
            f.retry_after(),
            retry
                .as_ref()
                .and_then(|c| group(c, 1).or_else(|| group(c, 2))),
            "{text:?}"
        );
        let errno = re(facts::ERRNO).captures(t);
        assert_eq!(
            f.errno(),
            errno.as_ref().and_then(|c| group(c, 1)),
            "{text:?}"
        );
    }

    #[test]
    fn captures_read_from_spans_are_regexs() {
        for t in [
            "Claude AI usage limit reached|1753077600",
            "limit reached|12345678901234",
            "You've hit your limit · resets 9am (Europe/London)",
            "Opus weekly limit reached ∙ resets Oct 31, 9am",
            "resets Jan 18, 11:30am (Asia/Calcutta)",
            "resetting at 2:10 PM",
            "reset at aug 5, at 10pm",
            "resets at9am; resets 12:3pm; resets 1230pm; resets 7 am (this zone name is much too long to be one)",
            "resets jan 5 9:15am(UTC)",
            "resets sept. 3, 4pm",
            "Exit code 1\nboom",
            "Error: Exit code: -9",
            "Command failed with exit code 128",
            "subprocess returned non-zero exit status 2.",
            "HTTP/1.1 429 Too Many Requests",
            "status code 401",
            "API Error: 529 {\"type\":\"error\"}",
            "API Error (500 internal)",
            "curl: (22) The requested URL returned error: 404",
            "request rejected (403)",
            "503 Service Unavailable",
            "Retry-After: 30",
            "retry_after=\"2.5\"",
            "retry-after: 1.2.3",
            "please try again in 20s",
            "retry in 1.5 s",
            "retry in 5.s",
            "Error: ENOENT: no such file",
            "connect ECONNREFUSED 127.0.0.1:8080",
            "enoentx eacces",
        ] {
            check(t);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Texts made of the fragments the patterns look for, in any order.
        #[test]
        fn captures_agree_on_fragments(parts in proptest::collection::vec(prop::sample::select(vec![
            "reset", "resets", "resetting", " ", "  ", "\n", "at", "at ", "jan", "sept", ".", ",",
            "5", "18", "123", ":", "30", "am", "pm", "(", ")", "utc", "x", "limit reached|",
            "1753077600", "exit code", "error: ", "exit status", "-", "http", "/1.1", "status",
            "code", "=", "api error", "429", "503", "404 not found", "retry", "-after", "_after",
            "\"", "'", "try again", " in ", "s", "enoent", "econnrefused", "\t",
        ]), 0..24)) {
            check(&parts.concat());
        }
    }
}
