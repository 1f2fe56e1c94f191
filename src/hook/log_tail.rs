//! What the session hooks read from the end of the error log (through
//! [`crate::store::error_log::visit_tail`], whichever backend holds it): Template 5 for a session,
//! and the unresolved errors of other sessions that SessionStart names.

use crate::context::Context;
use crate::core::classify::{class_of, family_of};
use crate::core::error_record::LogLine;
use crate::core::templates::{self, Rec, TemplateInput, TemplateName};
use crate::core::vocab::{Class, Kind};
use crate::exit::Failure;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};

/// How much of the end of the error log the session hooks read (Template 5, SessionStart).
const LOG_TAIL: u64 = 4 << 20;

/// Visits the log lines in the last [`LOG_TAIL`] bytes of the error log.
fn visit_tail(cx: &Context, mut visit: impl FnMut(&LogLine)) -> Result<(), Failure> {
    let g = cx.ground();
    crate::store::error_log::visit_tail(&g, &g.root, LOG_TAIL, |line| {
        if let Some(l) = LogLine::parse(line) {
            visit(&l);
        }
    })
}

/// Template 5 for `session`, from the records of the session at the end of the log.
pub fn stability_warning(cx: &Context, session: &str) -> Result<String, Failure> {
    let mut records = Vec::new();
    visit_tail(cx, |l| {
        if l.session_id.as_deref() == Some(session) {
            records.push(Rec::from_line(l));
        }
    })?;
    let input = TemplateInput {
        records,
        policy: cx.policy()?,
        now: cx.now,
        state_root: cx.state_root().display().to_string(),
        session: Some(session.to_string()),
        workflow: None,
        agent: None,
        phase: None,
        completed: Vec::new(),
        pipeline: Vec::new(),
        runs: None,
        items: None,
        breakers: Vec::new(),
    };
    let rendered =
        templates::build(TemplateName::StabilityWarning, &input).map_err(Failure::data)?;
    Ok(rendered.text)
}

/// Unresolved errors of other sessions, near the end of the log.
#[derive(Debug, Default)]
pub struct Earlier {
    /// How many.
    pub count: usize,
    /// How many per `agent kind`.
    pub by_what: BTreeMap<String, usize>,
}

impl Earlier {
    /// `researcher timeout ×2, Bash tool_failure`, the most frequent first, at most five.
    pub fn summary(&self) -> String {
        let mut list: Vec<(&String, &usize)> = self.by_what.iter().collect();
        list.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut parts: Vec<String> = list
            .iter()
            .take(5)
            .map(|(what, n)| {
                if **n > 1 {
                    format!("{what} ×{n}")
                } else {
                    what.to_string()
                }
            })
            .collect();
        if list.len() > 5 {
            parts.push("…".into());
        }
        parts.join(", ")
    }
}

/// The errors near the end of the log that belong to another session than `current`, were
/// recorded at `since` or later, are trouble (not a family `[voice] work` names) and have no
/// resolution. Older ones stay in the log and in `triage report`, but no longer drive advice.
pub fn unresolved_elsewhere(
    cx: &Context,
    current: Option<&str>,
    since: DateTime<Utc>,
) -> Result<Earlier, Failure> {
    let voice = &cx.policy()?.voice;
    let recent = |l: &LogLine| {
        l.timestamp
            .as_deref()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .is_some_and(|t| t.with_timezone(&Utc) >= since)
    };
    let work = |l: &LogLine| {
        l.kind()
            .and_then(|k| k.parse::<Kind>().ok())
            .is_some_and(|k| {
                let tool = l.agent();
                class_of(k, tool) == Class::Work && voice.is_work(family_of(k, tool))
            })
    };
    let mut open: HashMap<String, String> = HashMap::new();
    visit_tail(cx, |l| {
        if let Some(id) = &l.resolves {
            open.remove(id.as_ref());
            return;
        }
        let Some(id) = &l.error_id else {
            return;
        };
        // Another session's failures of unguarded tools are not worth the model's attention.
        // An inline resolution that did not succeed (an agent let go, seed 002's "proceed
        // without") leaves the failure standing.
        if l.resolution.as_ref().is_some_and(|r| r.successful())
            || !l.counts()
            || l.session_id.is_some() && l.session_id.as_deref() == current
            || !recent(l)
            || work(l)
        {
            return;
        }
        // Names come from records in the root, which may be planted: only a plain
        // identifier is named; any other is "an agent" (the record stays in the report).
        let what = format!(
            "{} {}",
            // No agent: the main agent's own failure (its StopFailure), the session's.
            match l.agent() {
                None => "the session",
                Some(a) => plain(Some(a)).unwrap_or("an agent"),
            },
            plain(l.kind()).unwrap_or("unknown")
        );
        open.insert(id.to_string(), what);
    })?;
    let mut earlier = Earlier {
        count: open.len(),
        ..Earlier::default()
    };
    for what in open.into_values() {
        *earlier.by_what.entry(what).or_default() += 1;
    }
    Ok(earlier)
}

/// `s` when it is a plain identifier.
fn plain(s: Option<&str>) -> Option<&str> {
    s.filter(|s| crate::core::text::is_plain_name(s))
}
