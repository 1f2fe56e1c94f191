//! DFAs as compact tables, and the walks that search with them: the classifier's built-in
//! patterns (compiled by build.rs into Rust statics) and a policy's own patterns (compiled once
//! per policy and kept in the user's cache folder) both run here, so no call compiles a regex
//! it has seen before.
//!
//! The tables are regex-automata's minimized DFAs re-encoded ([`encode`]): states numbered as
//! `u16` (0 dead, 1 quit), byte classes, the start state after each possible preceding byte,
//! and the transitions packed in a comb (each state's most common target, its other ones at
//! `base[s] + class`). A walk reads them with bounds-checked lookups only, so tables read back
//! from a file give a wrong answer at worst, never a crash (the cache also checks a checksum
//! and this build's id before it trusts them).
//!
//! Why not regex-automata's own serialization (`to_bytes_little_endian` / `from_bytes`):
//! measured with callgrind on a release build (at 03ac2f4), its dense DFAs of the built-ins
//! take 2.25 MB (283 KB here: the specific tier alone is 4,123 states × 64 classes, 1.06 MB
//! dense), and `from_bytes` validates every transition at every process start: 4.25 M
//! instructions for the specific tier, 8.1 M for all 28 DFAs (sparse DFAs: 225 KB, but 10.8 M).
//! `triage classify` went from 0.98 M to 5.78 M instructions per call, and from 1.46 M to
//! 6.93 M with five policy patterns from a warm cache (whose file grew from 25 KB to 115 KB);
//! the walks themselves cost the same (0.19 M). Statics need no validation; the unchecked
//! `from_bytes_unchecked` is `unsafe`, denied here, and would trust a file from disk; and a
//! file's bytes would first need copying to a `u32`-aligned place. Switching would remove
//! ~450 lines, not worth 5× the instructions of a hook's call.

pub mod encode;

pub use encode::{Encoded, DEAD, QUIT};

/// One DFA's tables, borrowed (from statics, or from an [`Encoded`]).
#[derive(Clone, Copy)]
pub struct Dfa<'a> {
    /// The class of each byte.
    pub classes: &'a [u8],
    /// The start state with no byte before it, then after each byte value.
    pub start: &'a [u16],
    /// Per state: the most common target.
    pub default: &'a [u16],
    /// Per state: the target at the end of the text.
    pub eoi: &'a [u16],
    /// Per state: where its other transitions are in the comb.
    pub base: &'a [u32],
    /// The comb: which state owns each slot.
    pub check: &'a [u16],
    /// The comb: the target in each slot.
    pub next: &'a [u16],
    /// The patterns a state matches: `pids[match_at[s]..match_at[s + 1]]`.
    pub match_at: &'a [u32],
    /// Pattern ids.
    pub pids: &'a [u16],
    /// The bytes that can take an unanchored search out of its start states (see
    /// [`Encoded::accel`]).
    pub accel: Option<&'a [u8]>,
}

/// The DFA quit: the text holds a byte it cannot decide on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quit;

impl Encoded {
    /// The tables, for walking.
    pub fn dfa(&self) -> Dfa<'_> {
        Dfa {
            classes: &self.classes,
            start: &self.start,
            default: &self.default,
            eoi: &self.eoi,
            base: &self.base,
            check: &self.check,
            next: &self.next,
            match_at: &self.match_at,
            pids: &self.pids,
            accel: self.accel.as_deref(),
        }
    }
}

impl<'a> Dfa<'a> {
    /// The start state after `look` (the byte before the search, if any).
    fn start_after(&self, look: Option<&u8>) -> u16 {
        let i = look.map_or(0, |&b| usize::from(b) + 1);
        self.start.get(i).copied().unwrap_or(DEAD)
    }

    fn step(&self, s: u16, byte: u8) -> u16 {
        let s = usize::from(s);
        let class = self.classes.get(usize::from(byte)).copied().unwrap_or(0);
        let slot = self.base.get(s).map_or(0, |&b| b as usize) + usize::from(class);
        match (self.check.get(slot), self.next.get(slot)) {
            (Some(&owner), Some(&next)) if usize::from(owner) == s => next,
            _ => self.default.get(s).copied().unwrap_or(DEAD),
        }
    }

    fn end(&self, s: u16) -> u16 {
        self.eoi.get(usize::from(s)).copied().unwrap_or(DEAD)
    }

    fn matches(&self, s: u16) -> &'a [u16] {
        let s = usize::from(s);
        match (self.match_at.get(s), self.match_at.get(s + 1)) {
            (Some(&a), Some(&b)) => self.pids.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    fn is_match(&self, s: u16) -> bool {
        !self.matches(s).is_empty()
    }

    /// Runs an anchored DFA from `at`, calling `hit(pattern, end)` for each match (each is
    /// seen one byte late, so look-ahead is exact) until `hit` returns true (then true) or the
    /// DFA dies or quits (then false).
    pub fn run(&self, hay: &[u8], at: usize, mut hit: impl FnMut(u16, usize) -> bool) -> bool {
        let mut s = self.start_after(at.checked_sub(1).and_then(|i| hay.get(i)));
        for (i, &b) in hay.iter().enumerate().skip(at) {
            s = self.step(s, b);
            if s <= QUIT {
                return false;
            }
            for &p in self.matches(s) {
                if hit(p, i) {
                    return true;
                }
            }
        }
        self.matches(self.end(s)).iter().any(|&p| hit(p, hay.len()))
    }

    /// The end of the last match of an anchored run from `at`: for a leftmost-first DFA, the
    /// end of the leftmost-first match that starts there.
    pub fn last_end(&self, hay: &[u8], at: usize) -> Option<usize> {
        let mut end = None;
        self.run(hay, at, |_, e| {
            end = Some(e);
            false
        });
        end
    }

    /// With an unanchored leftmost-first DFA: where the leftmost-first match of `hay` ends.
    /// While it is in a start state, it skips ahead to the next byte that can take it out.
    pub fn find_end(&self, hay: &[u8]) -> Result<Option<usize>, Quit> {
        let mut s = self.start_after(None);
        let mut last = None;
        let skip = self.accel.map(Skip::new);
        let mut i = 0;
        while i < hay.len() {
            if let (Some(skip), Some(prev)) = (&skip, i.checked_sub(1).and_then(|p| hay.get(p))) {
                if s == self.start_after(Some(prev)) {
                    let j = skip.next(hay, i);
                    if j > i {
                        s = self.start_after(hay.get(j - 1));
                        i = j;
                        continue;
                    }
                }
            }
            let b = hay[i];
            s = self.step(s, b);
            match s {
                DEAD => return Ok(last),
                QUIT => return Err(Quit),
                _ if self.is_match(s) => last = Some(i),
                _ => {}
            }
            i += 1;
        }
        match self.end(s) {
            QUIT => Err(Quit),
            s if self.is_match(s) => Ok(Some(hay.len())),
            _ => Ok(last),
        }
    }

    /// With an anchored DFA of the reversed pattern: where the longest match that ends at
    /// `end` starts (the start of the leftmost-first match [`Dfa::find_end`] found).
    pub fn rfind_start(&self, hay: &[u8], end: usize) -> Result<Option<usize>, Quit> {
        let mut s = self.start_after(hay.get(end));
        let mut last = None;
        for i in (0..end.min(hay.len())).rev() {
            s = self.step(s, hay[i]);
            match s {
                DEAD => return Ok(last),
                QUIT => return Err(Quit),
                _ if self.is_match(s) => last = Some(i + 1),
                _ => {}
            }
        }
        match self.end(s) {
            QUIT => Err(Quit),
            s if self.is_match(s) => Ok(Some(0)),
            _ => Ok(last),
        }
    }
}

/// Finds the next byte of a small set: memchr for up to three, a table for more.
enum Skip {
    None,
    One(u8),
    Two(u8, u8),
    Three(u8, u8, u8),
    Table([u64; 4]),
}

impl Skip {
    fn new(bytes: &[u8]) -> Skip {
        match *bytes {
            [] => Skip::None,
            [a] => Skip::One(a),
            [a, b] => Skip::Two(a, b),
            [a, b, c] => Skip::Three(a, b, c),
            _ => {
                let mut t = [0u64; 4];
                for &b in bytes {
                    t[usize::from(b >> 6)] |= 1 << (b & 63);
                }
                Skip::Table(t)
            }
        }
    }

    /// The position of the next byte of the set at or after `from`, or the end.
    fn next(&self, hay: &[u8], from: usize) -> usize {
        let rest = hay.get(from..).unwrap_or_default();
        let found = match self {
            Skip::None => None,
            Skip::One(a) => memchr::memchr(*a, rest),
            Skip::Two(a, b) => memchr::memchr2(*a, *b, rest),
            Skip::Three(a, b, c) => memchr::memchr3(*a, *b, *c, rest),
            Skip::Table(t) => rest
                .iter()
                .position(|&b| t[usize::from(b >> 6)] & (1 << (b & 63)) != 0),
        };
        from + found.unwrap_or(rest.len())
    }
}

#[cfg(test)]
mod tests {
    include!(concat!(env!("CARGO_MANIFEST_DIR"), "/build/stamp.rs"));

    /// The committed automata (what every build copies while their stamp holds) were made
    /// from today's rule table, generator and regex crates: a change to any of them fails here
    /// until `TRIAGE_REFRESH_AUTOMATA=1 cargo build` rewrites the copy.
    #[test]
    fn committed_automata_are_not_stale() {
        let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let want = automata_stamp(manifest).expect("the automata's inputs are readable");
        let text = std::fs::read_to_string(manifest.join("src/core/classify/builtin_automata.rs"))
            .expect("src/core/classify/builtin_automata.rs is committed");
        assert_eq!(
            automata_stamp_of(&text),
            Some(want.as_str()),
            "src/core/classify/builtin_automata.rs is stale: run `TRIAGE_REFRESH_AUTOMATA=1 cargo build` and commit it"
        );
    }

    /// A stamp changes with its inputs and is read back from the line that carries it.
    #[test]
    fn the_stamp_follows_its_inputs() {
        let dir = tempfile::tempdir().expect("tempdir");
        for f in AUTOMATA_INPUTS {
            let path = dir.path().join(f);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, "a\nb\n").expect("write");
        }
        let before = automata_stamp(dir.path()).expect("stamp");
        std::fs::write(dir.path().join(AUTOMATA_INPUTS[0]), "a\r\nb\r\n").expect("write");
        assert_eq!(
            automata_stamp(dir.path()).expect("stamp"),
            before,
            "CRLF is LF"
        );
        std::fs::write(dir.path().join(AUTOMATA_INPUTS[0]), "a\nc\n").expect("write");
        let after = automata_stamp(dir.path()).expect("stamp");
        assert_ne!(after, before);
        let file =
            format!("// @generated\n{AUTOMATA_STAMP_PREFIX}{after}\npub static X: u8 = 0;\n");
        assert_eq!(automata_stamp_of(&file), Some(after.as_str()));
        assert_eq!(
            automata_stamp_of("// @generated\npub static X: u8 = 0;\n"),
            None
        );
    }
}
