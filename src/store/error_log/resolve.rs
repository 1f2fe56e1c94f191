//! Resolving records: by selection (`record-error --resolve`, one decision for every open
//! record it picks, never one twice), and automatically after a success
//! (`recovered_by_retry`). Both read the log through the seam and append through
//! [`super::append_resolutions`] / [`super::recover`], whichever backend holds it.

use crate::core::error_record::{LogLine, Resolution, ResolutionLine};
use crate::exit::Failure;
use crate::store::ground::Ground;
use chrono::{DateTime, Utc};

/// Which records `--resolve` closes.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// This one record.
    pub id: Option<String>,
    /// Every unresolved record of this session…
    pub session: Option<String>,
    /// …workflow…
    pub workflow: Option<String>,
    /// …phase (written out)…
    pub phase: Option<String>,
    /// …and agent.
    pub agent: Option<String>,
}

impl Selection {
    fn admits(&self, l: &LogLine) -> bool {
        let same = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_none_or(|w| have == Some(w))
        };
        same(&self.id, l.error_id.as_deref())
            && same(&self.session, l.session_id.as_deref())
            && same(&self.workflow, l.workflow_id.as_deref())
            && same(&self.agent, l.agent())
            && self
                .phase
                .as_deref()
                .is_none_or(|p| l.phase_text().as_deref() == Some(p))
    }
}

/// What `--resolve` did.
#[derive(Debug, Default)]
pub struct Resolved {
    /// The resolution lines appended, one per record closed.
    pub lines: Vec<ResolutionLine>,
    /// Selected records that were already resolved (left as they were).
    pub already_resolved: usize,
    /// Other failures of the same unit resolved because this resolution is a success.
    pub recovered: Vec<ResolutionLine>,
}

/// The records a selection names, and which of them are resolved, from the lines in log order.
#[derive(Default)]
struct Picked {
    /// Unresolved records picked, by id, with their place in the log.
    open: std::collections::HashMap<String, (usize, ResolutionLine)>,
    resolved: std::collections::HashSet<String>,
    found: bool,
    seen: usize,
}

impl Picked {
    fn see(&mut self, sel: &Selection, bytes: &[u8]) {
        let Some(l) = LogLine::parse(bytes) else {
            return;
        };
        if let Some(id) = l.resolves.as_deref() {
            let works = !l.resolution.as_ref().is_some_and(|r| r.failed());
            if works && self.open.remove(id).is_some() {
                self.resolved.insert(id.to_string());
            }
            return;
        }
        let Some(id) = l.error_id.as_deref() else {
            return;
        };
        if !sel.admits(&l) {
            return;
        }
        self.found = true;
        if self.resolved.contains(id) || self.open.contains_key(id) {
            return;
        }
        if l.resolution.as_ref().is_some_and(|r| r.successful()) {
            self.resolved.insert(id.to_string());
            return;
        }
        self.seen += 1;
        if let Some(line) = ResolutionLine::of(&l, "", Resolution::default()) {
            self.open.insert(id.to_string(), (self.seen, line));
        }
    }

    /// The unresolved records picked, in log order.
    fn in_order(&self) -> Vec<&ResolutionLine> {
        let mut v: Vec<&(usize, ResolutionLine)> = self.open.values().collect();
        v.sort_by_key(|(n, _)| *n);
        v.into_iter().map(|(_, l)| l).collect()
    }
}

/// Appends the resolution of every record `sel` picks that is not resolved yet, copying the
/// ids that group each. The log is read without the lock (lines are never rewritten), then
/// the lines appended since are read under it, so two people resolving at once never
/// resolve one record twice.
///
/// A resolution that says a retry worked (`--successful true`, an action that starts with
/// `retry` or `recover`) is a success of the record's agent: its earlier open failures in the
/// workflow are resolved too, as `recovered_by_retry`.
pub fn resolve(g: &Ground, sel: &Selection, resolution: Resolution) -> Result<Resolved, Failure> {
    let root = g.ensure_root()?;
    let mut picked = Picked::default();
    let scanned = super::scan(g, &root, |bytes| picked.see(sel, bytes))?;
    if let (Some(id), false) = (&sel.id, picked.found) {
        return Err(Failure::data(format!(
            "no record with error_id `{id}` in {}; copy the id from record-error's output or `triage errors`",
            super::log_path(&root).display()
        )));
    }
    let at = g.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let picked = std::cell::RefCell::new(picked);
    let lines = super::append_resolutions(
        g,
        &root,
        Some(scanned),
        |bytes| picked.borrow_mut().see(sel, bytes),
        |_| {
            Ok(picked
                .borrow()
                .in_order()
                .into_iter()
                .map(|o| ResolutionLine {
                    timestamp: at.clone(),
                    resolution: resolution.clone(),
                    ..o.clone()
                })
                .collect())
        },
    )?;
    let mut done = Resolved {
        already_resolved: picked.borrow().resolved.len(),
        lines,
        recovered: Vec::new(),
    };
    let retried = resolution.successful == Some(true)
        && resolution.action_taken.as_deref().is_some_and(|a| {
            let a = a.trim().to_ascii_lowercase();
            a.starts_with("retry") || a.starts_with("recover")
        });
    if let (Some(id), true, Some(line)) = (&sel.id, retried, done.lines.first()) {
        let scope = line
            .workflow_id
            .as_deref()
            .or(line.session_id.as_deref())
            .unwrap_or("");
        if let Some(unit) = line.breaker_key.as_deref().or(line.agent.as_deref()) {
            let by = format!("record-error --resolve {id}");
            let r = super::Recovery {
                scope,
                unit,
                by: &by,
                upto: Some(id),
                started: None,
            };
            match super::recover(g, &root, r) {
                Ok(more) => done.recovered = more,
                Err(f) => g.warn(&format!(
                    "the agent's other open failures were not resolved: {f}"
                )),
            }
        }
    }
    Ok(done)
}

/// When a call that ran `elapsed_ms` and ended now started (now, when its duration is not
/// known).
pub fn started_at(g: &Ground, elapsed_ms: Option<u64>) -> DateTime<Utc> {
    elapsed_ms
        .and_then(|ms| chrono::Duration::try_milliseconds(i64::try_from(ms).ok()?))
        .and_then(|d| g.now.checked_sub_signed(d))
        .unwrap_or(g.now)
}

/// A success of `unit` (an agent, or a work item's breaker key) in `scope` (the workflow,
/// else the session), by a call that `started` then: its open failures there, recorded by
/// then, are resolved as `recovered_by_retry`. Best effort: returns the ids resolved, and a
/// failure (a busy log) is a warning that leaves them open for the next success or a person.
pub fn recovered(
    g: &Ground,
    scope: &str,
    unit: &str,
    by: &str,
    started: Option<DateTime<Utc>>,
) -> Vec<String> {
    let root = match g.ensure_root() {
        Ok(r) => r,
        Err(f) => {
            g.warn(&format!("{unit}'s earlier failures were not resolved: {f}"));
            return Vec::new();
        }
    };
    let r = super::Recovery {
        scope,
        unit,
        by,
        upto: None,
        started,
    };
    match super::recover(g, &root, r) {
        Ok(lines) => lines.into_iter().map(|l| l.resolves).collect(),
        Err(f) => {
            g.warn(&format!("{unit}'s earlier failures were not resolved: {f}"));
            Vec::new()
        }
    }
}
