//! The built-in patterns as automata compiled at build time (`build/automata.rs` makes them from
//! the rule table), and the walk that runs them: no regex is compiled when a call classifies.
//!
//! A table's automaton is anchored and reports every rule that matches from a given start, so
//! running it from each position of a text gives each rule's leftmost match start — the start
//! `regex`'s leftmost-first `find` reports, which is all precedence needs (the line a match
//! starts on). A fact's automaton also gives the end of its leftmost-first match, the span its
//! captures are read from.

use crate::core::dfa::Dfa;

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
    then: Option<&'static Dfa<'static>>,
}

/// A rule table as automata.
pub struct Table {
    union: Dfa<'static>,
    actions: &'static [Action],
    cuts: &'static [&'static [Step]],
}

include!(concat!(env!("OUT_DIR"), "/builtin_automata.rs"));

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
