//! A regex-automata DFA turned into the compact tables [`super::Dfa`] walks, and those tables
//! as bytes. Shared by the build script (the built-in patterns, written as Rust statics) and
//! the policy cache (a policy's patterns, written to the user's cache folder), so it needs
//! nothing but regex-automata and std.
//!
//! State 0 is dead and state 1 quits (a byte the DFA cannot decide on, such as non-ASCII
//! text under a Unicode word boundary); the others are numbered in the order they are
//! reached. Transitions are a comb: each state's most common target is its default, and its
//! other transitions sit at `base[s] + class`, owned where `check == s`, so a lookup is one
//! comparison and a sparse state costs a few slots.

use regex_automata::dfa::{dense, Automaton};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::Anchored;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// The dead state.
pub const DEAD: u16 = 0;
/// The quit state.
pub const QUIT: u16 = 1;
/// A `check` slot no state owns.
const FREE: u16 = u16::MAX;

/// Why a DFA could not be encoded.
#[derive(Debug)]
pub struct EncodeError(pub String);

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EncodeError {}

/// The tables of one DFA.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Encoded {
    /// The class of each byte (256 entries).
    pub classes: Vec<u8>,
    /// The start state with no byte before, then after each byte value (257 entries).
    pub start: Vec<u16>,
    /// Per state: the most common target.
    pub default: Vec<u16>,
    /// Per state: the target at the end of the text.
    pub eoi: Vec<u16>,
    /// Per state: where its transitions start in the comb.
    pub base: Vec<u32>,
    /// The comb: which state owns each slot.
    pub check: Vec<u16>,
    /// The comb: the target in each slot.
    pub next: Vec<u16>,
    /// Per state, and one more: its matched patterns are `pids[match_at[s]..match_at[s+1]]`.
    pub match_at: Vec<u32>,
    /// Pattern ids.
    pub pids: Vec<u16>,
    /// For an unanchored DFA: the bytes that can make it leave its start states. On any
    /// other byte it only moves to the start state after that byte, so a search skips to the
    /// next of these (`None`: too many to be worth it).
    pub accel: Option<Vec<u8>>,
}

/// More bytes than this that leave the start states: a search steps through every byte.
const ACCEL_MAX: usize = 24;

/// Encodes `dfa`, with its start states for `anchored` searches.
pub fn encode(dfa: &dense::DFA<Vec<u32>>, anchored: Anchored) -> Result<Encoded, EncodeError> {
    let err = |m: &str| EncodeError(m.to_string());
    let bc = dfa.byte_classes();
    let mut classes = vec![0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    for b in 0..=255u8 {
        let c = bc.get(b);
        classes[usize::from(b)] = c;
        if usize::from(c) == reps.len() {
            reps.push(b);
        }
    }
    if reps.len() + 1 != bc.alphabet_len() {
        return Err(err("byte classes are not numbered in byte order"));
    }
    let mut ids: HashMap<StateID, u16> = HashMap::new();
    let mut queue: VecDeque<StateID> = VecDeque::new();
    let mut count: usize = 2;
    let mut number = |id: StateID, queue: &mut VecDeque<StateID>| -> Result<u16, EncodeError> {
        if dfa.is_dead_state(id) {
            return Ok(DEAD);
        }
        if dfa.is_quit_state(id) {
            return Ok(QUIT);
        }
        if let Some(&n) = ids.get(&id) {
            return Ok(n);
        }
        let n = u16::try_from(count)
            .ok()
            .filter(|&n| n < FREE)
            .ok_or_else(|| err("more than 65534 states"))?;
        count += 1;
        ids.insert(id, n);
        queue.push_back(id);
        Ok(n)
    };
    let mut start = Vec::with_capacity(257);
    for look in std::iter::once(None).chain((0..=255u8).map(Some)) {
        let cfg = start::Config::new().anchored(anchored).look_behind(look);
        start.push(match dfa.start_state(&cfg) {
            Ok(id) => number(id, &mut queue)?,
            // A start after a byte the DFA quits on.
            Err(_) => QUIT,
        });
    }
    let mut rows: Vec<Vec<u16>> = vec![vec![DEAD; reps.len()], vec![QUIT; reps.len()]];
    let mut eoi = vec![DEAD, QUIT];
    let mut matches: Vec<Vec<u16>> = vec![Vec::new(), Vec::new()];
    while let Some(id) = queue.pop_front() {
        let mut row = Vec::with_capacity(reps.len());
        for &b in &reps {
            row.push(number(dfa.next_state(id, b), &mut queue)?);
        }
        rows.push(row);
        eoi.push(number(dfa.next_eoi_state(id), &mut queue)?);
        let mut pids = Vec::new();
        if dfa.is_match_state(id) {
            for i in 0..dfa.match_len(id) {
                let p = dfa.match_pattern(id, i).as_usize();
                pids.push(u16::try_from(p).map_err(|_| err("too many patterns"))?);
            }
        }
        matches.push(pids);
    }
    let accel = (anchored == Anchored::No)
        .then(|| leaving_bytes(&classes, &start, &rows))
        .flatten();
    let (default, base, check, next) = comb(&rows);
    let mut match_at = vec![0u32];
    let mut pids = Vec::new();
    for m in &matches {
        pids.extend_from_slice(m);
        match_at.push(u32::try_from(pids.len()).map_err(|_| err("too many matches"))?);
    }
    Ok(Encoded {
        classes,
        start,
        default,
        eoi,
        base,
        check,
        next,
        match_at,
        pids,
        accel,
    })
}

/// The bytes on which some start state after a byte goes anywhere but the start state after
/// that byte (see [`Encoded::accel`]), when there are few. (The start at the very beginning
/// of the text is left out: a search never skips from there.)
fn leaving_bytes(classes: &[u8], start: &[u16], rows: &[Vec<u16>]) -> Option<Vec<u8>> {
    let mut idle: Vec<u16> = start.get(1..)?.to_vec();
    idle.sort_unstable();
    idle.dedup();
    let mut out = Vec::new();
    for b in 0..=255u8 {
        let class = usize::from(classes[usize::from(b)]);
        let after = start[usize::from(b) + 1];
        let stays = idle.iter().all(|&s| {
            s > QUIT && rows.get(usize::from(s)).and_then(|r| r.get(class)) == Some(&after)
        });
        if !stays {
            out.push(b);
        }
    }
    (out.len() <= ACCEL_MAX).then_some(out)
}

/// The comb of `rows`: `(default, base, check, next)`.
#[allow(clippy::type_complexity)]
fn comb(rows: &[Vec<u16>]) -> (Vec<u16>, Vec<u32>, Vec<u16>, Vec<u16>) {
    let mut default = Vec::with_capacity(rows.len());
    let mut exceptions: Vec<Vec<(usize, u16)>> = Vec::with_capacity(rows.len());
    for row in rows {
        let mut counts: BTreeMap<u16, usize> = BTreeMap::new();
        for &t in row {
            *counts.entry(t).or_default() += 1;
        }
        let d = counts
            .iter()
            .max_by_key(|(t, n)| (**n, std::cmp::Reverse(**t)))
            .map_or(DEAD, |(t, _)| *t);
        default.push(d);
        exceptions.push(
            row.iter()
                .enumerate()
                .filter(|(_, &t)| t != d)
                .map(|(c, &t)| (c, t))
                .collect(),
        );
    }
    // The widest rows first, each at the first base where all its slots are free.
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&s| std::cmp::Reverse(exceptions[s].len()));
    let mut base = vec![0u32; rows.len()];
    let mut check: Vec<u16> = Vec::new();
    let mut next: Vec<u16> = Vec::new();
    let mut first_free = 0usize;
    for s in order {
        let ex = &exceptions[s];
        let Some(&(lead, _)) = ex.first() else {
            continue;
        };
        let mut b = first_free.saturating_sub(lead);
        while !ex
            .iter()
            .all(|&(c, _)| check.get(b + c).is_none_or(|&o| o == FREE))
        {
            b += 1;
        }
        for &(c, t) in ex {
            let k = b + c;
            if check.len() <= k {
                check.resize(k + 1, FREE);
                next.resize(k + 1, DEAD);
            }
            check[k] = s as u16;
            next[k] = t;
        }
        base[s] = b as u32;
        while check.get(first_free).is_some_and(|&o| o != FREE) {
            first_free += 1;
        }
    }
    (default, base, check, next)
}

impl Encoded {
    /// The tables as little-endian bytes (see [`Encoded::read`]).
    pub fn write(&self, out: &mut Vec<u8>) {
        fn len(out: &mut Vec<u8>, n: usize) {
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
        len(out, self.default.len());
        len(out, self.check.len());
        len(out, self.pids.len());
        match &self.accel {
            None => out.push(0xff),
            Some(a) => {
                out.push(a.len() as u8);
                out.extend_from_slice(a);
            }
        }
        out.extend_from_slice(&self.classes);
        for v in [
            &self.start,
            &self.default,
            &self.eoi,
            &self.check,
            &self.next,
            &self.pids,
        ] {
            for x in v.iter() {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        for v in [&self.base, &self.match_at] {
            for x in v.iter() {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
    }

    /// Reads what [`Encoded::write`] wrote at the start of `bytes`: the tables and the bytes
    /// after them, or `None` when they are cut short or do not fit together.
    pub fn read(bytes: &[u8]) -> Option<(Encoded, &[u8])> {
        let mut r = Reader(bytes);
        let states = r.u32()? as usize;
        let slots = r.u32()? as usize;
        let npids = r.u32()? as usize;
        let accel = match r.take(1)?[0] {
            0xff => None,
            n if usize::from(n) <= ACCEL_MAX => Some(r.take(usize::from(n))?.to_vec()),
            _ => return None,
        };
        if states < 2 || states > usize::from(FREE) {
            return None;
        }
        let classes = r.take(256)?.to_vec();
        let start = r.u16s(257)?;
        let default = r.u16s(states)?;
        let eoi = r.u16s(states)?;
        let check = r.u16s(slots)?;
        let next = r.u16s(slots)?;
        let pids = r.u16s(npids)?;
        let base = r.u32s(states)?;
        let match_at = r.u32s(states + 1)?;
        let e = Encoded {
            classes,
            start,
            default,
            eoi,
            base,
            check,
            next,
            match_at,
            pids,
            accel,
        };
        e.is_consistent().then_some((e, r.0))
    }

    /// Every state id is a state, and every match range is in bounds (the walk would be
    /// memory-safe anyway; this rejects tables that cannot have been written).
    fn is_consistent(&self) -> bool {
        let n = self.default.len();
        let state = |s: &u16| usize::from(*s) < n;
        self.start.iter().all(state)
            && self.default.iter().all(state)
            && self.eoi.iter().all(state)
            && self.next.iter().all(state)
            && self.check.iter().all(|&c| c == FREE || usize::from(c) < n)
            && self.match_at.windows(2).all(|w| w[0] <= w[1])
            && self
                .match_at
                .last()
                .is_some_and(|&m| m as usize == self.pids.len())
    }
}

struct Reader<'b>(&'b [u8]);

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u16s(&mut self, n: usize) -> Option<Vec<u16>> {
        let b = self.take(n.checked_mul(2)?)?;
        Some(
            b.chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect(),
        )
    }

    fn u32s(&mut self, n: usize) -> Option<Vec<u32>> {
        let b = self.take(n.checked_mul(4)?)?;
        Some(
            b.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    }
}
