//! The records as the templates look at them: the failures in scope and what closed each
//! ([`View`]), how each unit stands at the end of the log ([`Unit`]), and the pieces of text
//! every template shares (options, lists, phase labels, elapsed times).

use super::{Rec, TemplateInput};
use crate::core::vocab::Criticality;
use serde_json::{json, Value};
use std::collections::HashMap;

/// The records in scope, as every template reads them.
pub(super) struct View<'a> {
    pub(super) input: &'a TemplateInput<'a>,
    /// The error records in scope (not resolution lines), in log order.
    pub(super) failures: Vec<&'a Rec>,
    /// The resolution line that closed each record, by id.
    pub(super) closed_by: HashMap<&'a str, &'a Rec>,
}

/// How a unit (an agent, or a work item) stands at the end of the log.
#[derive(Clone, Debug)]
pub(super) struct Unit<'a> {
    pub(super) name: &'a str,
    /// Its last failure that counts (not an interrupt).
    pub(super) last: &'a Rec,
    /// Its failures not resolved yet.
    pub(super) open: Vec<&'a Rec>,
    /// How its last failure was resolved, when it was.
    pub(super) resolution: Option<&'a Rec>,
}

impl Unit<'_> {
    pub(super) fn failing(&self) -> bool {
        !self.open.is_empty()
    }

    /// Resolved because it later succeeded (an automatic recovery, or a retry that worked).
    pub(super) fn recovered(&self) -> bool {
        !self.failing()
            && self.resolution.is_some_and(|r| {
                r.resolved_ok
                    && r.action.as_deref().is_some_and(|a| {
                        let a = a.to_ascii_lowercase();
                        a.starts_with("retry") || a.starts_with("recover")
                    })
            })
    }

    /// Resolved by a decision, not a success (proceed without it, skip, ...): what was decided.
    pub(super) fn decided(&self) -> Option<String> {
        if self.failing() || self.recovered() {
            return None;
        }
        let r = self.resolution?;
        Some(
            r.user_choice
                .clone()
                .or_else(|| r.action.clone())
                .unwrap_or_else(|| "resolved".into()),
        )
    }
}

impl<'a> View<'a> {
    pub(super) fn new(input: &'a TemplateInput<'a>) -> View<'a> {
        let closed_by = input
            .records
            .iter()
            .filter(|r| r.closes)
            .filter_map(|r| Some((r.resolves.as_deref()?, r)))
            .collect();
        let failures = input
            .records
            .iter()
            .filter(|r| r.resolves.is_none())
            .collect();
        View {
            input,
            failures,
            closed_by,
        }
    }

    pub(super) fn resolved(&self, r: &Rec) -> bool {
        r.resolved_ok
            || r.error_id
                .as_deref()
                .is_some_and(|id| self.closed_by.contains_key(id))
    }

    /// A failure that still counts: not an interrupt, not resolved.
    pub(super) fn is_open(&self, r: &Rec) -> bool {
        r.opens && !self.resolved(r)
    }

    /// The last failure that counts (an interrupt is not the agent's failure); an unresolved
    /// one when there is one.
    pub(super) fn last(&self) -> Result<&'a Rec, String> {
        let counted = || {
            self.failures
                .iter()
                .rev()
                .filter(|r| r.opens || r.resolved_ok)
        };
        counted()
            .find(|r| self.is_open(r))
            .or_else(|| counted().next())
            .copied()
            .ok_or_else(|| {
                "no error records match; widen the filter (--session, --workflow, --agent, --phase, --since)".to_string()
            })
    }

    pub(super) fn phase_name(&self, phase: &str) -> Option<String> {
        self.input.policy.phase(phase).and_then(|p| p.name.clone())
    }

    /// Every unit with a failure that counts among the records `pred` admits, in order of
    /// first failure.
    pub(super) fn units(&self, pred: impl Fn(&Rec) -> bool) -> Vec<Unit<'a>> {
        let mut out: Vec<Unit<'a>> = Vec::new();
        for r in self.failures.iter().copied() {
            if !(r.opens || r.resolved_ok) || !pred(r) {
                continue;
            }
            let Some(name) = r.name() else {
                continue;
            };
            let resolution = match r.error_id.as_deref() {
                Some(id) => self.closed_by.get(id).copied(),
                None => None,
            }
            .or(r.resolved_ok.then_some(r));
            let open = self.is_open(r);
            match out.iter_mut().find(|u| u.name == name) {
                Some(u) => {
                    u.last = r;
                    u.resolution = resolution;
                    if open {
                        u.open.push(r);
                    }
                }
                None => out.push(Unit {
                    name,
                    last: r,
                    open: if open { vec![r] } else { Vec::new() },
                    resolution,
                }),
            }
        }
        out
    }

    pub(super) fn criticality(&self, r: &Rec) -> Criticality {
        self.input
            .policy
            .agent(r.agent.as_deref().or(r.unit.as_deref()).unwrap_or(""))
            .criticality
    }
}

/// A name, kind or phase from the records, or `unknown`: as it is when it is a plain
/// identifier, else quoted as outside text (a record may have been planted in the root).
pub(super) fn or_unknown(s: Option<&str>) -> String {
    crate::core::text::label(s.unwrap_or("unknown"))
}

pub(super) fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// Options as JSON and as seed 000's indented lines. The seed's "Enter choice" prompt is not
/// part of the text (a model may read it, and nothing reads its answer): see
/// [`prompt`](super::prompt).
pub(super) fn options(texts: &[String]) -> (Value, String) {
    let mut json = Vec::new();
    let mut text = String::from("Options:");
    for (l, t) in LETTERS.iter().zip(texts) {
        json.push(json!({"letter": l, "text": t}));
        text.push_str(&format!("\n  ({l}) {t}"));
    }
    (Value::Array(json), text)
}

pub(super) const LETTERS: [&str; 6] = ["A", "B", "C", "D", "E", "F"];

pub(super) fn phase_label(v: &View, phase: Option<&str>) -> String {
    match phase {
        None => "unknown".into(),
        Some(p) => match v.phase_name(p) {
            Some(n) => format!("{p} ({n})"),
            None => p.to_string(),
        },
    }
}

pub(super) fn elapsed(ms: i64) -> String {
    let whole_seconds = u64::try_from(ms.max(0) / 1000).unwrap_or(0) * 1000;
    crate::core::duration::Dur::millis(whole_seconds)
        .approx()
        .to_string()
}

/// The phase a template is about: `--phase`, else the phase of the last failure `pred`
/// admits (an unresolved one first).
pub(super) fn target_phase(v: &View, pred: impl Fn(&Rec) -> bool) -> Result<String, String> {
    if let Some(p) = &v.input.phase {
        return Ok(p.clone());
    }
    let with_phase = |open: bool| {
        v.failures
            .iter()
            .rev()
            .filter(|r| pred(r) && (!open || v.is_open(r)))
            .find_map(|r| r.phase.clone())
    };
    with_phase(true)
        .or_else(|| with_phase(false))
        .ok_or_else(|| "no error record in scope names a phase; give --phase".to_string())
}
