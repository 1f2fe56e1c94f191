//! The built-in patterns as automata compiled at build time (`build/automata.rs` makes them from
//! the rule table), and the walk that runs them: no regex is compiled when a call classifies.
//!
//! A table's automaton is anchored and reports every rule that matches from a given start, so
//! running it from each position of a text gives each rule's leftmost match start — the start
//! `regex`'s leftmost-first `find` reports, which is all precedence needs (the line a match
//! starts on). A fact's automaton also gives the end of its leftmost-first match, the span its
//! captures are read from. The transitions are a comb: a state's default, and its other
//! transitions where `check` says the slot is the state's.

/// One compiled DFA. State 0 is dead; every match is reported one byte late (after the byte
/// that follows it, or at the end of the text), so look-ahead (`\b`, `$`) is exact.
pub struct Dfa {
    classes: &'static [u8],
    /// The start state with no byte before it, then after each byte value.
    start: &'static [u16],
    default: &'static [u16],
    eoi: &'static [u16],
    base: &'static [u32],
    check: &'static [u16],
    next: &'static [u16],
    /// The patterns a state matches: `pids[match_at[s]..match_at[s + 1]]`.
    match_at: &'static [u32],
    pids: &'static [u16],
}

/// What a match of the table's automaton means.
#[derive(Clone, Copy, Debug)]
pub enum Action {
    /// Rule `n` matches.
    Rule(u16),
    /// The head of a branch of rule `n` that was cut at a wide run: `cuts[g]` must follow.
    Cut(u16, u16),
}

/// After a cut: between `min` and `max` bytes of `set`, then `then` (if the branch goes on).
pub struct Step {
    set: [u8; 32],
    min: u32,
    max: u32,
    then: Option<&'static Dfa>,
}

/// A rule table as automata.
pub struct Table {
    union: Dfa,
    actions: &'static [Action],
    cuts: &'static [&'static [Step]],
}

include!(concat!(env!("OUT_DIR"), "/builtin_automata.rs"));

impl Dfa {
    fn step(&self, s: u16, byte: u8) -> u16 {
        let s = usize::from(s);
        let class = self.classes.get(usize::from(byte)).copied().unwrap_or(0);
        let slot = self.base.get(s).map_or(0, |&b| b as usize) + usize::from(class);
        match (self.check.get(slot), self.next.get(slot)) {
            (Some(&owner), Some(&next)) if usize::from(owner) == s => next,
            _ => self.default.get(s).copied().unwrap_or(0),
        }
    }

    fn matches(&self, s: u16) -> &'static [u16] {
        let s = usize::from(s);
        match (self.match_at.get(s), self.match_at.get(s + 1)) {
            (Some(&a), Some(&b)) => self.pids.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// Runs the DFA anchored at `at`, calling `hit(pattern, end)` for each match until it
    /// returns true (then true) or the DFA dies (then false).
    fn run(&self, hay: &[u8], at: usize, mut hit: impl FnMut(u16, usize) -> bool) -> bool {
        let look = match at.checked_sub(1).and_then(|i| hay.get(i)) {
            Some(&b) => usize::from(b) + 1,
            None => 0,
        };
        let mut s = self.start.get(look).copied().unwrap_or(0);
        for (i, &b) in hay.iter().enumerate().skip(at) {
            s = self.step(s, b);
            if s == 0 {
                return false;
            }
            for &p in self.matches(s) {
                if hit(p, i) {
                    return true;
                }
            }
        }
        s = self.eoi.get(usize::from(s)).copied().unwrap_or(0);
        self.matches(s).iter().any(|&p| hit(p, hay.len()))
    }

    /// The end of the last match of a run from `at`: for a leftmost-first DFA, the end of the
    /// leftmost-first match that starts there.
    fn last_end(&self, hay: &[u8], at: usize) -> Option<usize> {
        let mut end = None;
        self.run(hay, at, |_, e| {
            end = Some(e);
            false
        });
        end
    }
}

impl Step {
    fn has(&self, b: u8) -> bool {
        self.set
            .get(usize::from(b / 8))
            .is_some_and(|x| x & (1 << (b % 8)) != 0)
    }
}

/// Whether `steps` match from `at` (the end of a cut branch's head).
fn rest_matches(steps: &[Step], hay: &[u8], at: usize) -> bool {
    let Some((step, rest)) = steps.split_first() else {
        return true;
    };
    let mut len = 0u32;
    let mut pos = at;
    loop {
        if len >= step.min {
            let found = match step.then {
                None => rest_matches(rest, hay, pos),
                Some(dfa) => dfa.run(hay, pos, |_, end| rest_matches(rest, hay, end)),
            };
            if found {
                return true;
            }
        }
        if len == step.max {
            return false;
        }
        match hay.get(pos) {
            Some(&b) if step.has(b) => {
                pos += 1;
                len += 1;
            }
            _ => return false,
        }
    }
}

impl Table {
    /// Calls `hit(rule)` for each rule with a match that starts at `at` (a rule may be named
    /// more than once).
    fn starts_at(&self, hay: &[u8], at: usize, mut hit: impl FnMut(usize)) {
        self.union.run(hay, at, |p, end| {
            match self.actions.get(usize::from(p)) {
                Some(Action::Rule(r)) => hit(usize::from(*r)),
                Some(Action::Cut(r, g)) => {
                    let steps = self.cuts.get(usize::from(*g)).copied().unwrap_or(&[]);
                    if rest_matches(steps, hay, end) {
                        hit(usize::from(*r));
                    }
                }
                None => {}
            }
            false
        });
    }

    /// The first rule in table order that matches `hay`, with where its leftmost match starts.
    pub fn first(&self, hay: &[u8]) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        for at in 0..=hay.len() {
            self.starts_at(hay, at, |r| {
                if best.is_none_or(|(b, _)| r < b) {
                    best = Some((r, at));
                }
            });
            if best.is_some_and(|(r, _)| r == 0) {
                break;
            }
        }
        best
    }

    /// The rule whose match starts on the earliest line of `hay` (on one line, the first in
    /// table order), with where its leftmost match starts.
    pub fn earliest_line(&self, hay: &[u8]) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        // Once a rule matched: where its line ends (its line break is still on the line).
        let mut line_end: Option<usize> = None;
        for at in 0..=hay.len() {
            if line_end.is_some_and(|e| at > e) {
                break;
            }
            self.starts_at(hay, at, |r| {
                if best.is_none_or(|(b, _)| r < b) {
                    best = Some((r, at));
                }
            });
            if best.is_some() && line_end.is_none() {
                let rest = hay.get(at..).unwrap_or_default();
                line_end = Some(memchr::memchr(b'\n', rest).map_or(hay.len(), |i| at + i));
            }
        }
        best
    }

    /// Each rule's leftmost match start in `hay`, or `None`.
    pub fn leftmost_starts(&self, hay: &[u8]) -> Vec<Option<usize>> {
        let mut starts = vec![None; self.rules()];
        for at in 0..=hay.len() {
            self.starts_at(hay, at, |r| {
                if let Some(s) = starts.get_mut(r) {
                    s.get_or_insert(at);
                }
            });
        }
        starts
    }

    fn rules(&self) -> usize {
        self.actions
            .iter()
            .map(|a| match a {
                Action::Rule(r) | Action::Cut(r, _) => usize::from(*r) + 1,
            })
            .max()
            .unwrap_or(0)
    }
}

/// The span of the leftmost-first match of fact `n` (in `rules::facts` order), given where its
/// leftmost match starts.
pub fn fact_span(n: usize, hay: &[u8], start: usize) -> Option<(usize, usize)> {
    let end = FACT_ENDS.get(n)?.last_end(hay, start)?;
    Some((start, end))
}

#[cfg(test)]
pub mod tests;
