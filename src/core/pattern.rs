//! One policy regex, matched as `regex::Regex::find` would match it, by automata when it can:
//! an ASCII tier (the pattern with every class and literal cut down to ASCII, which matches
//! exactly as the pattern does on ASCII text, and stays small), a Unicode tier (the pattern as
//! it is, when its DFA is small enough to build), and the regex itself, compiled only when
//! neither tier can answer (non-ASCII text with no Unicode tier, a Unicode word boundary).
//!
//! Each pattern has one [`Matcher`] per process ([`matcher`]), so a tier is built at most once
//! per process; the policy cache (`crate::store::pattern_cache`) saves the tiers built and
//! installs those of an earlier call, so that a pattern is compiled once per policy.

use crate::core::dfa::{encode, Encoded, Quit};
use regex_automata::dfa::{dense, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::{self, Class, ClassBytes, ClassBytesRange, Hir, HirKind, Look};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A DFA state count past which the Unicode tier is not built (its build would cost more than
/// the regex compile it saves); the pattern is then matched by the regex on non-ASCII text.
const UNICODE_LIMIT: usize = 512 * 1024;

/// The same for the ASCII tier, which is small for any pattern one writes by hand: a bound
/// on what a pathological one can cost (it is then matched by the regex).
const ASCII_LIMIT: usize = 8 * 1024 * 1024;

/// Set when a tier was built in this process, so the cache is worth writing.
pub(crate) static BUILT: AtomicBool = AtomicBool::new(false);

/// A forward DFA (unanchored, leftmost-first) and the reversed pattern's (anchored), which
/// together find a match's span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    pub(crate) fwd: Encoded,
    pub(crate) rev: Encoded,
}

/// A tier: not tried yet, tried and not buildable, or built.
pub(crate) type Tier = OnceLock<Option<Pair>>;

/// One pattern of the policy.
pub struct Matcher {
    pub(crate) pattern: String,
    /// Whether `regex` compiles it, and if not why: found out once per policy (the first
    /// call compiles it), so a pattern `regex` refuses is refused here too.
    pub(crate) usable: OnceLock<Result<(), String>>,
    pub(crate) ascii: Tier,
    pub(crate) unicode: Tier,
    pub(crate) regex: OnceLock<Result<regex::Regex, String>>,
}

impl Matcher {
    pub(crate) fn new(pattern: &str) -> Matcher {
        Matcher {
            pattern: pattern.to_string(),
            usable: OnceLock::new(),
            ascii: OnceLock::new(),
            unicode: OnceLock::new(),
            regex: OnceLock::new(),
        }
    }

    /// Whether the pattern can be used, and if not why (the regex's own error, last line).
    pub fn check(&self) -> Result<(), String> {
        self.usable
            .get_or_init(|| {
                BUILT.store(true, Ordering::Relaxed);
                self.regex().map(|_| ())
            })
            .clone()
    }

    /// The span of the leftmost-first match in `hay` (what `regex::Regex::find` returns), or
    /// why the pattern cannot be used.
    pub fn find(&self, hay: &str) -> Result<Option<(usize, usize)>, String> {
        self.check()?;
        let tier = if hay.is_ascii() {
            self.ascii.get_or_init(|| built(ascii_tier(&self.pattern)))
        } else {
            self.unicode
                .get_or_init(|| built(unicode_tier(&self.pattern)))
        };
        if let Some(Ok(found)) = tier.as_ref().map(|p| p.find(hay)) {
            return Ok(found);
        }
        self.regex()
            .map(|r| r.find(hay).map(|m| (m.start(), m.end())))
    }

    fn regex(&self) -> Result<&regex::Regex, String> {
        self.regex
            .get_or_init(|| {
                regex::Regex::new(&self.pattern).map_err(|e| {
                    let why = e.to_string();
                    why.lines().last().unwrap_or_default().trim().to_string()
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// The matchers known in this process, by pattern.
fn known() -> std::sync::MutexGuard<'static, HashMap<String, Arc<Matcher>>> {
    static K: OnceLock<Mutex<HashMap<String, Arc<Matcher>>>> = OnceLock::new();
    let m = K.get_or_init(Mutex::default);
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The matcher of `pattern`: the one this process knows (made or installed before), else made
/// now (its automata are built the first time a text needs them).
pub fn matcher(pattern: &str) -> Arc<Matcher> {
    let mut k = known();
    if let Some(m) = k.get(pattern) {
        return m.clone();
    }
    let m = Arc::new(Matcher::new(pattern));
    k.insert(pattern.to_string(), m.clone());
    m
}

/// Makes `m` the matcher of its pattern (the policy cache installs what it read).
pub(crate) fn install(m: Matcher) {
    known().insert(m.pattern.clone(), Arc::new(m));
}

/// Every matcher known, by pattern (the policy cache saves them).
pub(crate) fn all() -> Vec<(String, Arc<Matcher>)> {
    known()
        .iter()
        .map(|(p, m)| (p.clone(), m.clone()))
        .collect()
}

fn built(tier: Option<Pair>) -> Option<Pair> {
    BUILT.store(true, Ordering::Relaxed);
    tier
}

impl Pair {
    /// The leftmost-first match's span; `Quit` when the DFAs cannot tell (a byte they quit
    /// on, or an empty match inside a character, which `regex` would step over).
    fn find(&self, hay: &str) -> Result<Option<(usize, usize)>, Quit> {
        let bytes = hay.as_bytes();
        let Some(end) = self.fwd.dfa().find_end(bytes)? else {
            return Ok(None);
        };
        let start = self.rev.dfa().rfind_start(bytes, end)?.ok_or(Quit)?;
        // `regex` never reports a span that splits a character (it steps over an empty match
        // inside one); nor do sound tables, but a span is checked before anyone slices by it.
        if start > end || !hay.is_char_boundary(start) || !hay.is_char_boundary(end) {
            return Err(Quit);
        }
        Ok(Some((start, end)))
    }
}

fn parse(pattern: &str) -> Option<Hir> {
    regex_syntax::Parser::new().parse(pattern).ok()
}

/// The pattern for ASCII text: each class cut to its ASCII part, each literal with a
/// non-ASCII byte made unmatchable, each Unicode word boundary made the ASCII one. On text
/// that is all ASCII this matches exactly where the pattern does.
fn ascii_tier(pattern: &str) -> Option<Pair> {
    pair(&to_ascii(&parse(pattern)?), ASCII_LIMIT, false)
}

/// The pattern as it is, unless it has a Unicode word boundary (its DFA would quit on every
/// non-ASCII byte) or its DFA is too large.
fn unicode_tier(pattern: &str) -> Option<Pair> {
    let hir = parse(pattern)?;
    if hir.properties().look_set().contains_word_unicode() {
        return None;
    }
    pair(&hir, UNICODE_LIMIT, true)
}

/// The two DFAs of `hir`. `utf8`: a search steps over whole characters (the unanchored start
/// of the Unicode tier); the ASCII tier only ever sees ASCII text, so it steps over bytes,
/// which keeps its start state a plain loop a search can skip through.
fn pair(hir: &Hir, limit: usize, utf8: bool) -> Option<Pair> {
    let dfa = |reverse: bool| -> Option<Encoded> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(utf8)
                    .reverse(reverse)
                    .which_captures(thompson::WhichCaptures::None),
            )
            .build_from_hir(hir)
            .ok()?;
        let (kind, start, anchored) = if reverse {
            (MatchKind::All, StartKind::Anchored, Anchored::Yes)
        } else {
            (
                MatchKind::LeftmostFirst,
                StartKind::Unanchored,
                Anchored::No,
            )
        };
        let limit = Some(limit);
        let d = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(kind)
                    .start_kind(start)
                    .minimize(true)
                    .dfa_size_limit(limit)
                    .determinize_size_limit(limit),
            )
            .build_from_nfa(&nfa)
            .ok()?;
        encode::encode(&d, anchored).ok()
    };
    Some(Pair {
        fwd: dfa(false)?,
        rev: dfa(true)?,
    })
}

fn to_ascii(h: &Hir) -> Hir {
    match h.kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(hir::Literal(bytes)) if bytes.is_ascii() => Hir::literal(bytes.clone()),
        HirKind::Literal(_) => Hir::fail(),
        HirKind::Class(Class::Unicode(c)) => {
            let ranges = c.ranges().iter().filter_map(|r| {
                let (lo, hi) = (u32::from(r.start()), u32::from(r.end()).min(0x7f));
                (lo <= hi).then(|| ClassBytesRange::new(lo as u8, hi as u8))
            });
            Hir::class(Class::Bytes(ClassBytes::new(ranges)))
        }
        HirKind::Class(Class::Bytes(c)) => {
            let ranges = c
                .ranges()
                .iter()
                .filter(|r| r.start() <= 0x7f)
                .map(|r| ClassBytesRange::new(r.start(), r.end().min(0x7f)));
            Hir::class(Class::Bytes(ClassBytes::new(ranges)))
        }
        HirKind::Look(look) => Hir::look(match look {
            Look::WordUnicode => Look::WordAscii,
            Look::WordUnicodeNegate => Look::WordAsciiNegate,
            Look::WordStartUnicode => Look::WordStartAscii,
            Look::WordEndUnicode => Look::WordEndAscii,
            Look::WordStartHalfUnicode => Look::WordStartHalfAscii,
            Look::WordEndHalfUnicode => Look::WordEndHalfAscii,
            other => *other,
        }),
        HirKind::Repetition(r) => Hir::repetition(hir::Repetition {
            sub: Box::new(to_ascii(&r.sub)),
            ..r.clone()
        }),
        HirKind::Capture(c) => Hir::capture(hir::Capture {
            sub: Box::new(to_ascii(&c.sub)),
            ..c.clone()
        }),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(to_ascii).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(to_ascii).collect()),
    }
}
