//! The live progress of `phase run`/`resume` for a person watching: one line per item (its id,
//! state, attempt and time so far), redrawn in place on stderr while the phase runs.
//!
//! Stderr, as `run`'s retry countdown: stdout carries the answer (JSON or `--text`), which a
//! script may read while a person watches the terminal. Nothing is drawn when stderr is not a
//! terminal. On a terminal that cannot move the cursor (`TERM=dumb`) each change is one new
//! line instead of a redraw; colour follows `NO_COLOR` and `TERM` as `--text` does (see
//! [`crate::term`]). Rendering ([`lines`]) is pure; [`Progress`] holds the clock and the tty.

use crate::core::phase::{ItemState, Manifest};
use crate::exec::phase_runner::Watch;
use crate::term::{cut, Screen, Term, Tone};
use std::time::{Duration, Instant};

/// How often the times of running items are brought up to date.
const TICK: Duration = Duration::from_millis(200);

/// The widest id column.
const ID_WIDTH: usize = 32;

/// One item as the progress shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The plan's id.
    pub id: String,
    /// Where it stands.
    pub state: ItemState,
    /// The attempt running or last run (0: none yet).
    pub attempt: u32,
    /// Time since it started (or its run's length, once ended); none before it starts.
    pub elapsed: Option<Duration>,
    /// Waiting to retry: how long the wait is, the attempt that follows and of how many.
    pub waiting: Option<(Duration, u32, Option<u32>)>,
}

/// The lines for `rows`, at most `height` of them and each at most `width` columns (a longer
/// line would wrap and break the redraw). When the rows do not fit, a summary: the count of
/// items in each state, then the slowest running items and the failed ones, as many as fit
/// (and how many more there are).
pub fn lines(rows: &[Row], height: usize, width: usize, term: &Term) -> Vec<String> {
    let height = height.max(2);
    let width = width.saturating_sub(1).max(10);
    if rows.len() <= height {
        let shown: Vec<&Row> = rows.iter().collect();
        return render(&shown, width, term);
    }
    let mut out = vec![cut(&counts(rows), width)];
    let mut running: Vec<&Row> = rows
        .iter()
        .filter(|r| r.state == ItemState::Running)
        .collect();
    // Slowest first; an item with no time yet has only just started.
    running.sort_by_key(|r| std::cmp::Reverse(r.elapsed));
    let failed: Vec<&Row> = rows
        .iter()
        .filter(|r| r.state == ItemState::Failed)
        .collect();
    let mut room = height - 1;
    if running.len() + failed.len() > room {
        room -= 1; // for the line that says how many more
    }
    let take_running = running.len().min(room - failed.len().min(room / 2));
    let take_failed = failed.len().min(room - take_running);
    let mut shown = running[..take_running].to_vec();
    shown.extend_from_slice(&failed[..take_failed]);
    out.extend(render(&shown, width, term));
    let (more_running, more_failed) = (running.len() - take_running, failed.len() - take_failed);
    if more_running + more_failed > 0 {
        out.push(cut(
            &format!("… and {more_running} more running, {more_failed} more failed"),
            width,
        ));
    }
    out
}

/// `10000 items: 512 complete, 8 running, 3 failed, 9477 not_started` (the states with any).
fn counts(rows: &[Row]) -> String {
    let states = [
        ItemState::Complete,
        ItemState::Running,
        ItemState::Failed,
        ItemState::Partial,
        ItemState::NeedsDecision,
        ItemState::Skipped,
        ItemState::NotStarted,
    ];
    let parts: Vec<String> = states
        .iter()
        .map(|s| (s, rows.iter().filter(|r| r.state == *s).count()))
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{n} {}", s.as_str()))
        .collect();
    format!("{} items: {}", rows.len(), parts.join(", "))
}

/// One line per row, ids in a column as wide as the longest shown (at most [`ID_WIDTH`]).
fn render(rows: &[&Row], width: usize, term: &Term) -> Vec<String> {
    let id_width = rows
        .iter()
        .map(|r| r.id.chars().count())
        .max()
        .unwrap_or(0)
        .min(ID_WIDTH);
    rows.iter()
        .map(|r| {
            let id = cut(&r.id, id_width);
            let pad = id_width.saturating_sub(id.chars().count());
            let word = r.state.as_str();
            let tone = match r.state {
                ItemState::Complete => Tone::Good,
                ItemState::Failed => Tone::Bad,
                ItemState::Running => Tone::Strong,
                ItemState::Partial | ItemState::NeedsDecision => Tone::Warn,
                ItemState::NotStarted | ItemState::Skipped => Tone::Dim,
            };
            let attempt = if r.attempt > 0 {
                format!("attempt {}", r.attempt)
            } else {
                String::new()
            };
            let time = r.elapsed.map(seconds).unwrap_or_default();
            // Cut before painting: the escapes take no columns.
            let plain = match r.waiting.filter(|_| r.state == ItemState::Running) {
                // Between attempts: not "running attempt 1", which ended.
                Some((delay, next, max)) => {
                    let of = max.map(|m| format!(" of {m}")).unwrap_or_default();
                    format!(
                        "{id}{:pad$}  waiting {}, then attempt {next}{of}  {time}",
                        "",
                        crate::core::duration::Dur(delay).approx(),
                        pad = pad
                    )
                }
                None => format!(
                    "{id}{:pad$}  {word:<11}  {attempt:<10}  {time}",
                    "",
                    pad = pad
                ),
            };
            let (word, tone) = if r.waiting.is_some() && r.state == ItemState::Running {
                ("waiting", Tone::Warn)
            } else {
                (word, tone)
            };
            let plain = cut(plain.trim_end(), width);
            match plain.find(word) {
                Some(at) if term.colour => format!(
                    "{}{}{}",
                    &plain[..at],
                    term.paint(word, tone),
                    &plain[at + word.len()..]
                ),
                _ => plain,
            }
        })
        .collect()
}

/// `0.4s`, `12.0s`, `3m05s`.
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        let whole = d.as_secs();
        format!("{}m{:02}s", whole / 60, whole % 60)
    }
}

/// The progress on stderr, when it is a terminal.
pub struct Progress {
    term: Term,
    /// Cursor movement allowed (not `TERM=dumb`).
    redraw: bool,
    height: usize,
    /// Lines drawn last time (redraw mode), or each item's last line (line mode).
    drawn: Vec<String>,
    started: Vec<Option<Instant>>,
    ended: Vec<Option<Duration>>,
    attempts: Vec<u32>,
    /// Each item's wait before its next attempt, while it waits.
    waits: Vec<Option<(Duration, u32, Option<u32>)>>,
    last: Option<Instant>,
    changed: bool,
}

impl Progress {
    /// A progress for `items` items, or none when stderr is not a terminal.
    pub fn on_stderr(items: usize) -> Option<Progress> {
        let screen = Screen::of(&std::io::stderr());
        if !screen.is_terminal {
            return None;
        }
        Some(Progress {
            term: screen.term,
            redraw: screen.redraw,
            height: screen.height.saturating_sub(1),
            drawn: Vec::new(),
            started: vec![None; items],
            ended: vec![None; items],
            attempts: vec![0; items],
            waits: vec![None; items],
            last: None,
            changed: true,
        })
    }
}

impl Watch for Progress {
    /// Item `i` was filed as running.
    fn started(&mut self, i: usize) {
        if let Some(s) = self.started.get_mut(i) {
            *s = Some(Instant::now());
        }
        if let Some(e) = self.ended.get_mut(i) {
            *e = None;
        }
        self.changed = true;
    }

    /// Item `i` started an attempt.
    fn attempt(&mut self, i: usize) {
        if let Some(a) = self.attempts.get_mut(i) {
            *a += 1;
        }
        if let Some(w) = self.waits.get_mut(i) {
            *w = None;
        }
        self.changed = true;
    }

    /// Item `i` waits `delay` before attempt `next` (of at most `max`).
    fn waiting(&mut self, i: usize, delay: Duration, next: u32, max: Option<u32>) {
        if let Some(w) = self.waits.get_mut(i) {
            *w = Some((delay, next, max));
        }
        self.changed = true;
    }

    /// Item `i` ended.
    fn ended(&mut self, i: usize) {
        let took = self.started.get(i).copied().flatten().map(|s| s.elapsed());
        if let Some(e) = self.ended.get_mut(i) {
            *e = took;
        }
        if let Some(w) = self.waits.get_mut(i) {
            *w = None;
        }
        self.changed = true;
    }

    /// Draws what changed (and, every [`TICK`], the times of running items).
    fn draw(&mut self, m: &Manifest, force: bool) {
        let due = self.last.is_none_or(|t| t.elapsed() >= TICK);
        // A phase larger than the screen is summarised from every item: redrawn at most
        // every tick, not at every item's change (which made the runner's work the square
        // of the plan).
        let large = self.redraw && m.items.len() > self.height;
        let changed = self.changed && (due || !large);
        if !(force || changed || (self.redraw && due)) {
            return;
        }
        self.changed = false;
        self.last = Some(Instant::now());
        let rows: Vec<Row> = m
            .items
            .iter()
            .enumerate()
            .map(|(i, e)| Row {
                id: e.id.clone(),
                state: e.state(),
                attempt: self
                    .attempts
                    .get(i)
                    .copied()
                    .filter(|a| *a > 0)
                    .unwrap_or(e.attempts),
                elapsed: self
                    .ended
                    .get(i)
                    .copied()
                    .flatten()
                    .or_else(|| self.started.get(i).copied().flatten().map(|s| s.elapsed())),
                waiting: self.waits.get(i).copied().flatten(),
            })
            .collect();
        let mut out = String::new();
        if self.redraw {
            let now = lines(&rows, self.height, self.term.width, &self.term);
            if now == self.drawn {
                return;
            }
            if !self.drawn.is_empty() {
                // Back to the first line of the block, and clear it to the end of the screen.
                out.push_str(&format!("\x1b[{}A\r\x1b[J", self.drawn.len()));
            }
            for l in &now {
                out.push_str(l);
                out.push('\n');
            }
            self.drawn = now;
        } else {
            // A line per item whose line changed, times left out (they change all the time).
            let now: Vec<Row> = rows
                .into_iter()
                .map(|r| Row {
                    elapsed: r.elapsed.filter(|_| r.state != ItemState::Running),
                    ..r
                })
                .collect();
            let all = lines(&now, usize::MAX, self.term.width, &self.term);
            self.drawn.resize(all.len(), String::new());
            for ((l, was), r) in all.iter().zip(self.drawn.iter_mut()).zip(&now) {
                if l != was && r.state != ItemState::NotStarted {
                    out.push_str(l);
                    out.push('\n');
                    *was = l.clone();
                }
            }
        }
        // Kept as the live area while it redraws, so a warning goes above it (see
        // [`crate::live`]); the last draw stays on the screen as plain lines.
        let area = (self.redraw && !force).then(|| {
            self.drawn
                .iter()
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        });
        crate::live::draw(&out, area);
    }
}

#[cfg(test)]
mod tests;
