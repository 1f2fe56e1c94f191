//! How the rule tables of [`super::rules`] are run against an error text, cheaply: the text a
//! rule may look at (stack frames are not evidence), case folding, and the prefilter that
//! passes over a rule without compiling its regex when the text lacks every literal prefix its
//! regex can start with.

use super::rules::{TextRule, API_TYPES, GENERIC, SPECIFIC, TOOL_EXIT};
use regex::bytes::{Regex, RegexBuilder};
use std::borrow::Cow;
use std::sync::OnceLock;

/// The lines of an error that are evidence, and their ASCII-lowercased bytes for matching.
pub struct Evidence<'t> {
    /// The text without stack frames, in its own case (for the detail line).
    pub text: Cow<'t, str>,
    /// `text`, ASCII-lowercased.
    pub lower: Vec<u8>,
}

impl<'t> Evidence<'t> {
    /// The evidence in `text`.
    pub fn new(text: &'t str) -> Evidence<'t> {
        let text = without_frames(text);
        let lower = text.to_ascii_lowercase().into_bytes();
        Evidence { text, lower }
    }
}

/// `text` without the lines of a stack trace: JavaScript and Java `at …` frames, Python's
/// `Traceback` header, `File "…", line N` frames and the source line under each, Go and Rust
/// backtrace lines and caret markers. Their function and file names (`Timeout._onTimeout`,
/// `socketCloseListener`, `abortSignal`) say nothing about the error and must not decide it.
fn without_frames(text: &str) -> Cow<'_, str> {
    let mut after_py_file = false;
    let mut keep = Vec::new();
    let mut dropped = false;
    for line in text.lines() {
        let frame = is_frame(line, after_py_file);
        after_py_file = is_py_file(line.trim_start());
        if frame {
            dropped = true;
        } else {
            keep.push(line);
        }
    }
    if dropped {
        Cow::Owned(keep.join("\n"))
    } else {
        Cow::Borrowed(text)
    }
}

fn is_py_file(t: &str) -> bool {
    t.starts_with("File \"") && t.contains("\", line ")
}

fn is_frame(line: &str, after_py_file: bool) -> bool {
    let t = line.trim_start();
    let indent = line.len() - t.len();
    if t.is_empty() {
        return false;
    }
    // Python: the frame, the source line below it (indented deeper), the header.
    if is_py_file(t) || (after_py_file && indent >= 4) || t == "Traceback (most recent call last):"
    {
        return true;
    }
    // A caret or tilde line pointing into the source line above.
    if indent > 0 && t.bytes().all(|b| matches!(b, b'^' | b'~' | b' ' | b'|')) {
        return true;
    }
    let t = t.trim_end();
    // JavaScript, Java, Bun, Rust's `at file:line:col`: `at name (file:line:col)` or `at file:line`.
    if indent > 0 && t.starts_with("at ") {
        let tail = t.rsplit(':').next().unwrap_or("");
        return t.ends_with(')') || (!tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()));
    }
    // Go: `\t/path/main.go:12 +0x1d`.
    if indent > 0
        && t.contains(".go:")
        && (t.contains(" +0x") || t.ends_with(|c: char| c.is_ascii_digit()))
    {
        return true;
    }
    // Rust and V8 numbered backtrace lines: `  3: core::panicking::panic`, `10: 00007FF6…`.
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && t[digits..].starts_with(": ") {
        let rest = &t[digits + 2..];
        let hex = rest
            .trim_start_matches("0x")
            .bytes()
            .take_while(u8::is_ascii_hexdigit)
            .count();
        return indent > 0 || hex >= 6;
    }
    false
}

/// Compiles an ASCII-only, case-folded regex to match against ASCII-lowercased text.
/// The wordings are ASCII; Unicode tables and `(?i)` case expansion would cost ~6 ms of
/// compile time on every call of a one-shot process, folding keeps it near 2 ms at worst.
pub fn ascii(pattern: &str) -> Option<Regex> {
    RegexBuilder::new(&fold(pattern))
        .unicode(false)
        .multi_line(true)
        .build()
        .ok()
}

/// Lowercases a pattern's ASCII letters, leaving escapes (`\S`, `\d`, `\b`) alone, and drops
/// `(?i)`: the text it runs on is lowercased instead.
pub fn fold(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut escaped = false;
    for c in pattern.replace("(?i)", "").chars() {
        out.push(if escaped { c } else { c.to_ascii_lowercase() });
        escaped = !escaped && c == '\\';
    }
    out
}

/// One compiled regex per rule, compiled the first time it is needed.
pub type Cells = [OnceLock<Option<Regex>>];

/// The first rule of [`SPECIFIC`] that matches.
pub fn specific(lower: &[u8]) -> Option<(&'static TextRule, usize)> {
    static CELLS: [OnceLock<Option<Regex>>; SPECIFIC.len()] =
        [const { OnceLock::new() }; SPECIFIC.len()];
    first_match(SPECIFIC, &CELLS, lower)
}

/// The first rule of [`API_TYPES`] that matches.
pub fn api_type(lower: &[u8]) -> Option<(&'static TextRule, usize)> {
    static CELLS: [OnceLock<Option<Regex>>; API_TYPES.len()] =
        [const { OnceLock::new() }; API_TYPES.len()];
    first_match(API_TYPES, &CELLS, lower)
}

/// The rule of [`GENERIC`] that matches on the earliest line.
pub fn generic(lower: &[u8]) -> Option<(&'static TextRule, usize)> {
    static CELLS: [OnceLock<Option<Regex>>; GENERIC.len()] =
        [const { OnceLock::new() }; GENERIC.len()];
    earliest_match(GENERIC, &CELLS, lower)
}

/// [`TOOL_EXIT`], when it matches.
pub fn tool_exit(lower: &[u8]) -> Option<(&'static TextRule, usize)> {
    static CELLS: [OnceLock<Option<Regex>>; 1] = [const { OnceLock::new() }; 1];
    first_match(std::slice::from_ref(&TOOL_EXIT), &CELLS, lower)
}

/// The first rule (in table order) that matches `lower`, with the byte offset of the match.
/// A failure that matches early never pays for compiling the rest.
fn first_match(
    rules: &'static [TextRule],
    cells: &'static Cells,
    lower: &[u8],
) -> Option<(&'static TextRule, usize)> {
    rules.iter().zip(cells).find_map(|(r, cell)| {
        if cell.get().is_none() && earliest_prefix(r.pattern, lower) == Prefix::Absent {
            return None;
        }
        let re = cell.get_or_init(|| ascii(r.pattern)).as_ref()?;
        re.find(lower).map(|m| (r, m.start()))
    })
}

/// The rule whose match starts on the earliest line of `lower`; on one line, the first in
/// table order. A rule whose literal prefixes first occur on a later line than the best match
/// so far cannot beat it, so it is passed over without compiling its regex.
fn earliest_match(
    rules: &'static [TextRule],
    cells: &'static Cells,
    lower: &[u8],
) -> Option<(&'static TextRule, usize)> {
    let mut best: Option<(usize, &'static TextRule, usize)> = None;
    for (r, cell) in rules.iter().zip(cells) {
        let limit = best.map(|(line, _, _)| line);
        if cell.get().is_none() {
            match earliest_prefix(r.pattern, lower) {
                Prefix::Absent => continue,
                Prefix::At(at) if limit.is_some_and(|l| line_start(lower, at) >= l) => continue,
                _ => {}
            }
        }
        let Some(re) = cell.get_or_init(|| ascii(r.pattern)).as_ref() else {
            continue;
        };
        if let Some(m) = re.find(lower) {
            let line = line_start(lower, m.start());
            if limit.is_none_or(|l| line < l) {
                best = Some((line, r, m.start()));
            }
        }
    }
    best.map(|(_, r, at)| (r, at))
}

fn line_start(text: &[u8], at: usize) -> usize {
    text[..at.min(text.len())]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1)
}

/// Where a regex can first match in a text, as far as its literals tell.
#[derive(Debug, PartialEq, Eq)]
enum Prefix {
    /// A literal every match needs is missing: the regex cannot match.
    Absent,
    /// No match can start before this offset.
    At(usize),
    /// It may match; where, the literals do not say.
    Unknown,
}

/// What the literals of `pattern` say about `lower`. Every match of a regex matches one branch
/// of its top-level alternation, and every literal run of that branch (outside classes and
/// optional parts; a group of plain words counts as a choice of runs) appears in the match: a
/// branch with a run missing from the text cannot match. When every branch begins with its
/// first run, the earliest occurrence of those runs bounds where a match can start. This
/// reads the pattern text directly (a scan, not a parse, and no allocation per run), so
/// passing over a rule costs next to nothing.
fn earliest_prefix(pattern: &str, lower: &[u8]) -> Prefix {
    let mut eval = Eval {
        lower,
        scratch: Vec::new(),
        branch_alive: true,
        branch_first: None,
        branch_runs: 0,
        earliest: None,
        bounded: true,
        possible: false,
    };
    if scan_runs(pattern.as_bytes(), &mut eval).is_none() {
        return Prefix::Unknown;
    }
    match (eval.possible, eval.bounded, eval.earliest) {
        (false, _, _) => Prefix::Absent,
        (true, true, Some(at)) => Prefix::At(at),
        _ => Prefix::Unknown,
    }
}

/// What a scan reports: each literal run as it ends, and the end of each branch.
trait RunVisitor {
    /// A run: one of `prefix + word + suffix` (for each word; just `prefix` when there are
    /// none) must appear in every match of the branch.
    fn run(&mut self, prefix: &[u8], words: &[&[u8]], suffix: &[u8]);
    /// The branch ended; `anchored` when its first run is where its matches begin.
    fn branch(&mut self, anchored: bool);
}

/// Checks runs against the text as the scan reports them.
struct Eval<'t> {
    lower: &'t [u8],
    scratch: Vec<u8>,
    branch_alive: bool,
    branch_first: Option<usize>,
    branch_runs: usize,
    earliest: Option<usize>,
    bounded: bool,
    possible: bool,
}

impl RunVisitor for Eval<'_> {
    fn run(&mut self, prefix: &[u8], words: &[&[u8]], suffix: &[u8]) {
        if !self.branch_alive {
            return;
        }
        let first = self.branch_runs == 0;
        self.branch_runs += 1;
        let mut at = None;
        if words.is_empty() {
            at = memchr::memmem::find(self.lower, prefix);
        } else {
            for w in words {
                self.scratch.clear();
                self.scratch.extend_from_slice(prefix);
                self.scratch.extend_from_slice(w);
                self.scratch.extend_from_slice(suffix);
                if let Some(p) = memchr::memmem::find(self.lower, &self.scratch) {
                    at = Some(at.map_or(p, |a: usize| a.min(p)));
                    if !first {
                        break;
                    }
                }
            }
        }
        match at {
            None => self.branch_alive = false,
            Some(p) if first => self.branch_first = Some(p),
            Some(_) => {}
        }
    }

    fn branch(&mut self, anchored: bool) {
        if self.branch_alive {
            self.possible = true;
            match (anchored, self.branch_first) {
                (true, Some(at)) => {
                    self.earliest = Some(self.earliest.map_or(at, |e| e.min(at)));
                }
                _ => self.bounded = false,
            }
        }
        self.branch_alive = true;
        self.branch_first = None;
        self.branch_runs = 0;
    }
}

/// The run being read: literal bytes, then at most one group of words, then more bytes.
#[derive(Default)]
struct RunBuf<'p> {
    prefix: Vec<u8>,
    words: Vec<&'p [u8]>,
    suffix: Vec<u8>,
}

impl<'p> RunBuf<'p> {
    fn is_empty(&self) -> bool {
        self.prefix.is_empty() && self.words.is_empty() && self.suffix.is_empty()
    }

    fn push(&mut self, b: u8) {
        if self.words.is_empty() {
            self.prefix.push(b);
        } else {
            self.suffix.push(b);
        }
    }

    /// Reports the run (when there is one) and empties it; returns whether there was.
    fn end(&mut self, v: &mut impl RunVisitor) -> bool {
        if self.is_empty() {
            return false;
        }
        v.run(&self.prefix, &self.words, &self.suffix);
        self.prefix.clear();
        self.words.clear();
        self.suffix.clear();
        true
    }
}

/// Scans a folded pattern, reporting each branch's literal runs to `v`. `None` when a branch
/// has no run, or the pattern uses syntax this scan does not know (then the regex is simply
/// compiled).
fn scan_runs(b: &[u8], v: &mut impl RunVisitor) -> Option<()> {
    let mut run = RunBuf::default();
    let mut runs_in_branch = 0usize;
    // Known once the branch's first run starts: whether nothing was consumed before it.
    let mut anchored: Option<bool> = None;
    // Whether a token that consumes text has been seen in this branch.
    let mut consumed = false;
    let mut i = 0;
    while i <= b.len() {
        if i == b.len() || b[i] == b'|' {
            runs_in_branch += usize::from(run.end(v));
            if runs_in_branch == 0 {
                return None;
            }
            v.branch(anchored.unwrap_or(false));
            runs_in_branch = 0;
            anchored = None;
            consumed = false;
            i += 1;
            continue;
        }
        // What this token is: a literal byte, a group of plain words, or something else.
        enum Tok<'p> {
            Byte(u8),
            Words(Vec<&'p [u8]>),
            Other,
        }
        let (tok, next) = match b[i] {
            b'\\' => {
                let e = *b.get(i + 1)?;
                match e {
                    b'b' | b'B' => {
                        runs_in_branch += usize::from(run.end(v));
                        i += 2;
                        continue;
                    }
                    b'd' | b'D' | b'w' | b'W' | b's' | b'S' => (Tok::Other, i + 2),
                    b'n' => (Tok::Byte(b'\n'), i + 2),
                    b't' => (Tok::Byte(b'\t'), i + 2),
                    _ if e.is_ascii_punctuation() => (Tok::Byte(e), i + 2),
                    _ => return None,
                }
            }
            b'^' | b'$' => {
                runs_in_branch += usize::from(run.end(v));
                i += 1;
                continue;
            }
            b'(' => {
                let end = group_end(b, i)?;
                match word_choices(&b[i + 1..end - 1]) {
                    Some(words) => (Tok::Words(words), end),
                    None => (Tok::Other, end),
                }
            }
            b'[' => (Tok::Other, class_end(b, i)?),
            b'.' => (Tok::Other, i + 1),
            b')' | b'*' | b'+' | b'?' | b'{' | b'}' => return None,
            c => (Tok::Byte(c), i + 1),
        };
        // A quantifier after the token: an optional one (`?`, `*`, `{0,…}`) drops a literal;
        // any ends the run, since what follows is no longer adjacent for sure.
        let (min_one, quantified, after) = quantifier(b, next)?;
        let starts = run.is_empty() && runs_in_branch == 0;
        match tok {
            Tok::Byte(c) if min_one => {
                if starts {
                    anchored = Some(!consumed);
                }
                run.push(c);
                if quantified {
                    runs_in_branch += usize::from(run.end(v));
                }
            }
            Tok::Words(words) if min_one => {
                if starts {
                    anchored = Some(!consumed);
                }
                if !run.words.is_empty() {
                    runs_in_branch += usize::from(run.end(v));
                }
                run.words = words;
                if quantified {
                    runs_in_branch += usize::from(run.end(v));
                }
            }
            _ => runs_in_branch += usize::from(run.end(v)),
        }
        consumed = true;
        i = after;
    }
    Some(())
}

/// The words of a group body like `?:agent|teammate|worker`, when that is all it holds (no
/// escape, no metacharacter, no empty word).
fn word_choices(body: &[u8]) -> Option<Vec<&[u8]>> {
    let body = body.strip_prefix(b"?:").unwrap_or(body);
    let mut words = Vec::new();
    for w in body.split(|&c| c == b'|') {
        let plain = !w.is_empty()
            && w.iter().all(|c| {
                !matches!(
                    c,
                    b'\\'
                        | b'('
                        | b')'
                        | b'['
                        | b']'
                        | b'.'
                        | b'*'
                        | b'+'
                        | b'?'
                        | b'{'
                        | b'}'
                        | b'^'
                        | b'$'
                )
            });
        if !plain {
            return None;
        }
        words.push(w);
    }
    Some(words)
}

/// The end of the group that opens at `b[i] == b'('` (one past its `)`).
fn group_end(b: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 1,
            b'[' => {
                j = class_end(b, j)?;
                continue;
            }
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            _ => {}
        }
        j += 1;
    }
    None
}

/// The end of the class that opens at `b[i] == b'['` (one past its `]`).
fn class_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    if b.get(j) == Some(&b'^') {
        j += 1;
    }
    if b.get(j) == Some(&b']') {
        j += 1;
    }
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b']' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// The quantifier at `b[i..]`, if any: whether it requires at least one repetition, whether
/// there was one, and where the pattern goes on after it (a lazy `?` included).
fn quantifier(b: &[u8], i: usize) -> Option<(bool, bool, usize)> {
    let (min_one, mut after) = match b.get(i) {
        Some(b'?') | Some(b'*') => (false, i + 1),
        Some(b'+') => (true, i + 1),
        Some(b'{') => {
            let close = i + b[i..].iter().position(|&c| c == b'}')?;
            let body = std::str::from_utf8(&b[i + 1..close]).ok()?;
            let min: u32 = body.split(',').next()?.trim().parse().ok()?;
            (min >= 1, close + 1)
        }
        _ => return Some((true, false, i)),
    };
    if b.get(after) == Some(&b'?') {
        after += 1;
    }
    Some((min_one, true, after))
}

/// True when `pattern` may match `lower` (the prefilter's answer, for tests).
#[cfg(test)]
pub fn may_match(pattern: &str, lower: &[u8]) -> bool {
    earliest_prefix(pattern, lower) != Prefix::Absent
}

/// The prefilter's answer as (may match, no match before this offset), for tests.
#[cfg(test)]
pub fn bound(pattern: &str, lower: &[u8]) -> (bool, Option<usize>) {
    match earliest_prefix(pattern, lower) {
        Prefix::Absent => (false, None),
        Prefix::At(at) => (true, Some(at)),
        Prefix::Unknown => (true, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_frames_are_not_evidence() {
        let js = "Error: Request was aborted.\n    at Ho._createMessage (file:///cli.js:1373:6810)\n    at node:internal/main/run_main_module:28:49";
        assert_eq!(Evidence::new(js).text, "Error: Request was aborted.");
        let py = "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    raise ReadTimeoutError('x')\nKeyError: 'x'";
        assert_eq!(Evidence::new(py).text, "KeyError: 'x'");
        let rust = "thread 'main' panicked at src/main.rs:2:5:\nboom\nstack backtrace:\n   0: rust_begin_unwind\n             at /rustc/x/panicking.rs:689:5";
        assert_eq!(
            Evidence::new(rust).text,
            "thread 'main' panicked at src/main.rs:2:5:\nboom\nstack backtrace:"
        );
        let v8 = "FATAL ERROR: heap out of memory\n 1: 0xb8d11b node::OOMErrorHandler\n10: 00007FF61C10DD3B v8::internal";
        assert_eq!(Evidence::new(v8).text, "FATAL ERROR: heap out of memory");
        // A wrapped message line that happens to begin with "at" is kept.
        let wrapped = "Your limit will reset\n     at 3pm (America/Santiago).";
        assert_eq!(Evidence::new(wrapped).text, wrapped);
        assert!(matches!(Evidence::new("plain").text, Cow::Borrowed(_)));
    }

    /// The runs a scan reports, as strings, per branch with its anchoring.
    fn runs(p: &str) -> Option<Vec<(Vec<Vec<String>>, bool)>> {
        #[derive(Default)]
        struct Collect {
            branches: Vec<(Vec<Vec<String>>, bool)>,
            runs: Vec<Vec<String>>,
        }
        impl RunVisitor for Collect {
            fn run(&mut self, prefix: &[u8], words: &[&[u8]], suffix: &[u8]) {
                let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                self.runs.push(if words.is_empty() {
                    vec![s(prefix)]
                } else {
                    words
                        .iter()
                        .map(|w| format!("{}{}{}", s(prefix), s(w), s(suffix)))
                        .collect()
                });
            }
            fn branch(&mut self, anchored: bool) {
                self.branches
                    .push((std::mem::take(&mut self.runs), anchored));
            }
        }
        let mut c = Collect::default();
        scan_runs(p.as_bytes(), &mut c)?;
        Some(c.branches)
    }

    #[test]
    fn literal_runs_of_a_pattern() {
        // Each run is one string here unless a group of words offers a choice.
        let s = |v: &[&str]| v.iter().map(|x| vec![x.to_string()]).collect::<Vec<_>>();
        assert_eq!(
            runs(r"\bhook error\b|foo\.bar"),
            Some(vec![(s(&["hook error"]), true), (s(&["foo.bar"]), true)])
        );
        assert_eq!(
            runs(r"conflict \((?:content|add)\)|\d+ fail\s*$"),
            Some(vec![
                (
                    vec![vec![
                        "conflict (content)".to_string(),
                        "conflict (add)".to_string()
                    ]],
                    true
                ),
                (s(&[" fail"]), false)
            ])
        );
        assert_eq!(runs(r"ab*c"), Some(vec![(s(&["a", "c"]), true)]));
        assert_eq!(runs(r"ab+c"), Some(vec![(s(&["ab", "c"]), true)]));
        assert_eq!(runs(r"a{0,3}bc"), Some(vec![(s(&["bc"]), false)]));
        assert_eq!(runs(r"[a-z]x"), Some(vec![(s(&["x"]), false)]));
        assert_eq!(runs(r"x(?:y|z)?w"), Some(vec![(s(&["x", "w"]), true)]));
        assert_eq!(runs(r"x(?:y.|z)w"), Some(vec![(s(&["x", "w"]), true)]));
        assert_eq!(
            runs(r"(?:y|z)"),
            Some(vec![(vec![vec!["y".to_string(), "z".to_string()]], true)])
        );
        // A second group of words starts a new run.
        assert_eq!(
            runs(r"(?:a|b)(?:c|d)"),
            Some(vec![(
                vec![
                    vec!["a".to_string(), "b".to_string()],
                    vec!["c".to_string(), "d".to_string()]
                ],
                true
            )])
        );
        assert_eq!(runs(r"x|(?:y|)"), None, "a branch with no run");
    }

    #[test]
    fn earliest_prefix_bounds_the_match() {
        assert_eq!(earliest_prefix("foo|bar", b"xx bar foo"), Prefix::At(3));
        assert_eq!(earliest_prefix("foo|bar", b"nothing"), Prefix::Absent);
        // A run inside the branch still rules the branch out when it is missing…
        assert_eq!(earliest_prefix(r"\w+error: ", b"no colon"), Prefix::Absent);
        // …but does not say where the match starts.
        assert_eq!(
            earliest_prefix(r"\w+error: ", b"typeerror: x"),
            Prefix::Unknown
        );
        // Every run of a branch must be there: "too many" alone is not "too many tokens".
        assert_eq!(
            earliest_prefix(r"too many (?:input )?tokens", b"429 too many requests"),
            Prefix::Absent
        );
        assert_eq!(earliest_prefix(r"ab?c", b"ac"), Prefix::At(0));
        assert_eq!(earliest_prefix(r"x(?:a|b)", b"xa"), Prefix::At(0));
        assert_eq!(earliest_prefix(r"(?:a|b)", b"xb"), Prefix::At(1));
        assert_eq!(earliest_prefix(r"(?:a.|b)", b"xb"), Prefix::Unknown);
    }
}
