//! What `triage phase` answers: the escalation text of the decision (seed 000's Template 2 for
//! several failed items, Template 1 for one), the degradation summary, rendered from the
//! phase's records in the error log like `triage report --template`; and the JSON document.

use super::{Job, Ran};
use crate::core::error_record::LogLine;
use crate::core::phase::ItemEntry;
use crate::core::phase::{Decision, ItemState, Manifest, Verdict};
use crate::core::templates::{self, Rec, TemplateInput, TemplateName};
use crate::exit::Failure;
use crate::store::error_log;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{json, Value};
use std::collections::HashMap;

/// The texts of a decision.
pub(super) struct Texts {
    /// The escalation's fields (`template`, its lists, `options`) and text.
    pub template: Option<Value>,
    /// Its text.
    pub text: Option<String>,
    /// The degradation summary's fields and text, when items failed.
    pub degradation: Option<Value>,
}

/// Renders the texts from the phase's records in the log.
pub(super) fn texts(job: &Job, m: &Manifest, d: &Decision) -> Result<Texts, Failure> {
    let mut none = Texts {
        template: None,
        text: None,
        degradation: None,
    };
    if d.failed.is_empty() || d.decision == Verdict::Paused {
        return Ok(none);
    }
    let phase = crate::core::error_record::Phase::parse(job.phase).to_string();
    let mut recs = Vec::new();
    error_log::read_all(&job.ground.root, |bytes| {
        if let Some(l) = LogLine::parse(bytes) {
            let ours = l.workflow_id.as_deref() == Some(job.workflow)
                && l.phase_text().as_deref() == Some(phase.as_str());
            // Resolution lines name their record's ids; keep them all (they only close).
            if ours || l.resolves.is_some() {
                recs.push(Rec::from_line(&l));
            }
        }
        true
    })?;
    let completed: Vec<String> = m
        .items
        .iter()
        // A fallback's stand-in is not the agent's work.
        .filter(|e| e.state() == ItemState::Complete && !e.degraded)
        .map(|e| e.agent.clone())
        .collect();
    let failed_agents: Vec<&str> = m
        .items
        .iter()
        .filter(|e| e.state() == ItemState::Failed)
        .map(|e| e.agent.as_str())
        .collect();
    let agents: std::collections::BTreeSet<&str> =
        m.items.iter().map(|e| e.agent.as_str()).collect();
    let each_an_agent = agents.len() == m.items.len();
    let input = |agent: Option<String>| TemplateInput {
        records: recs.clone(),
        policy: &job.policy,
        now: job.ground.now,
        state_root: job.ground.root.display().to_string(),
        session: job.session.map(str::to_string),
        workflow: Some(job.workflow.to_string()),
        agent,
        phase: Some(phase.clone()),
        completed: completed.clone(),
        pipeline: Vec::new(),
        runs: None,
        items: Some((completed.len(), m.items.len(), each_an_agent)),
        breakers: Vec::new(),
    };
    if matches!(d.decision, Verdict::Stop | Verdict::Skip) {
        let single = failed_agents.len() == 1;
        let (name, agent) = if single {
            (
                TemplateName::AgentFailure,
                failed_agents.first().map(|a| a.to_string()),
            )
        } else {
            (TemplateName::MultipleFailures, None)
        };
        let mut i = input(agent.clone());
        if let Some(a) = &agent {
            i.records
                .retain(|r| r.agent.as_deref() == Some(a) || r.resolves.is_some());
        }
        match templates::build(name, &i) {
            Ok(r) => {
                none.text = Some(r.text);
                none.template = Some(r.fields);
            }
            Err(why) => job.ground.warn(&format!("no escalation text: {why}")),
        }
    }
    if let Ok(r) = templates::build(TemplateName::Degradation, &input(None)) {
        let mut f = r.fields;
        let mut text = r.text;
        // A phase that stopped is not complete, whatever the summary's own rule (no critical
        // agent failed) would say: it waits for a decision.
        if d.decision == Verdict::Stop && f["complete"] == true {
            let headline = "Workflow Incomplete (the phase stopped)";
            if let Some(old) = f["headline"].as_str() {
                text = text.replacen(old, headline, 1);
            }
            if let Some(o) = f.as_object_mut() {
                o.insert("complete".into(), false.into());
                o.insert("headline".into(), headline.into());
            }
        }
        if let Some(o) = f.as_object_mut() {
            o.insert("text".into(), text.into());
        }
        none.degradation = Some(f);
    }
    Ok(none)
}

/// The JSON answer of `run` and `resume`.
pub(super) fn document(
    job: &Job,
    m: &Manifest,
    d: &Decision,
    ran: &Ran,
    texts: Texts,
    abort_ratio: f64,
    resumed: Option<Value>,
) -> Value {
    let mut counts = serde_json::Map::new();
    for s in [
        ItemState::Complete,
        ItemState::Failed,
        ItemState::Partial,
        ItemState::NotStarted,
        ItemState::Skipped,
        ItemState::NeedsDecision,
    ] {
        counts.insert(s.as_str().into(), m.ids(s).len().into());
    }
    // A degraded item is complete, but not counted as a success.
    counts.insert("complete".into(), d.complete.len().into());
    counts.insert("degraded".into(), d.degraded.len().into());
    let name = job.policy.phase(job.phase).and_then(|p| p.name.clone());
    json!({
        "workflow_id": m.workflow_id,
        "phase": m.phase,
        "name": name,
        "decision": d.decision,
        "reason": d.reason,
        "exit_status": d.decision.exit_status(),
        "failure_ratio": d.failure_ratio,
        "abort_ratio": abort_ratio,
        "counts": counts,
        "failed": d.failed,
        "critical_failed": d.critical_failed,
        "complete": d.complete,
        "degraded": d.degraded,
        "needs_decision": d.needs_decision,
        "items": null,
        "template": texts.template,
        "text": texts.text,
        "degradation": texts.degradation,
        "budget_ended": ran.budget_ended,
        "interrupted_by": ran.interrupted,
        "message": m.message,
        "resumed": resumed,
        "manifest": job.manifest.display().to_string(),
    })
}

/// What the answer keeps of an item's `triage run` report.
pub struct Kept {
    attempts: Box<str>,
    warnings: Option<Box<str>>,
}

impl Kept {
    /// Its attempts and (non-empty) warnings, as compact JSON text.
    pub fn of(report: &Value) -> Kept {
        Kept {
            attempts: report["attempts"].to_string().into(),
            warnings: report
                .get("warnings")
                .filter(|w| w.as_array().is_some_and(|a| !a.is_empty()))
                .map(|w| w.to_string().into()),
        }
    }
}

/// An item as the answer shows it: its manifest entry, and the attempts and warnings of its
/// run when it ran.
pub struct ItemOut {
    entry: ItemEntry,
    kept: Option<Kept>,
}

/// The answer's items, from the manifest's and the reports kept.
pub fn items(entries: Vec<ItemEntry>, mut kept: HashMap<String, Kept>) -> Vec<ItemOut> {
    entries
        .into_iter()
        .map(|entry| ItemOut {
            kept: kept.remove(&entry.id),
            entry,
        })
        .collect()
}

impl Serialize for ItemOut {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            #[serde(flatten)]
            e: &'a ItemEntry,
            #[serde(skip_serializing_if = "Option::is_none")]
            attempt_log: Option<Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            warnings: Option<Value>,
        }
        let tree = |t: &str| serde_json::from_str::<Value>(t).unwrap_or(Value::Null);
        Out {
            e: &self.entry,
            attempt_log: self.kept.as_ref().map(|k| tree(&k.attempts)),
            warnings: self
                .kept
                .as_ref()
                .and_then(|k| k.warnings.as_deref().map(tree)),
        }
        .serialize(s)
    }
}

/// The answer's document with its items written in their place.
pub struct Document<'a> {
    pub(super) doc: &'a Value,
    pub(super) items: &'a [ItemOut],
}

impl Serialize for Document<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Some(o) = self.doc.as_object() else {
            return self.doc.serialize(s);
        };
        let mut map = s.serialize_map(Some(o.len()))?;
        for (k, v) in o {
            if k == "items" {
                map.serialize_entry(k, self.items)?;
            } else {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}
