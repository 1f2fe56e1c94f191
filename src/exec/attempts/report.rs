//! The JSON report of `triage run`'s attempts (the last line of its stderr, or `--report`; a
//! phase keeps one per item).

use super::Request;
use crate::core::vocab::Kind;
use crate::exit::Failure;
use crate::store::ground::Ground;
use serde_json::{json, Value};
use std::time::Duration;

/// The final report of the attempts.
pub(super) struct Report {
    pub(super) head: Value,
    pub(super) attempts: Vec<Value>,
    pub(super) preserved: Vec<String>,
    pub(super) outcome: &'static str,
    pub(super) breaker: Option<Value>,
    /// Why the run ended as it did, when the attempts do not say (a breaker that opened).
    pub(super) note: Option<String>,
    /// The thresholds the run's failures crossed, with the attempt that crossed each.
    pub(super) warnings: Vec<Value>,
    /// What the last failure calls for (the classifier's action), when the run failed.
    pub(super) action: Option<crate::core::vocab::Action>,
    /// The fallback that ran because the breaker refused (`--fallback`): the run is degraded.
    pub(super) fallback: Option<Value>,
}

impl Report {
    pub(super) fn new(args: &Request, name: &str, timeout: Option<Duration>) -> Report {
        let command: Vec<String> = args
            .command
            .iter()
            .map(|c| crate::core::redact::redact(&c.to_string_lossy()).into_owned())
            .collect();
        Report {
            head: json!({
                "command": command,
                "name": name,
                "agent": args.agent,
                "phase": args.phase,
                "session_id": args.session,
                "workflow_id": args.workflow,
                "task_id": args.task,
                "timeout_ms": timeout.map(|t| t.as_millis() as u64),
            }),
            attempts: Vec::new(),
            preserved: Vec::new(),
            outcome: "failed",
            breaker: None,
            note: None,
            warnings: Vec::new(),
            action: None,
            fallback: None,
        }
    }

    /// Keeps the thresholds an attempt's record crossed (the last crossing of each).
    pub(super) fn note_warnings(
        &mut self,
        attempt: u32,
        crossed: Vec<crate::core::error_record::Warning>,
    ) {
        for w in crossed {
            self.warnings.retain(|o| o["name"] != w.name.as_str());
            let mut v = json!(w);
            v["attempt"] = json!(attempt);
            self.warnings.push(v);
        }
    }

    pub(super) fn interrupted_between(&mut self, sig: i32) {
        self.outcome = "interrupted";
        self.attempts.push(json!({
            "attempt": self.attempts.len() + 1,
            "end": format!("interrupted (signal {sig}) while waiting to retry"),
            "kind": Kind::Interrupted,
            "exit_status": 130,
        }));
    }
}

pub(super) fn finish(g: &Ground, report: &Report, status: u8) -> Result<(u8, Value), Failure> {
    let mut doc = report.head.clone();
    if let Some(o) = doc.as_object_mut() {
        o.insert("outcome".into(), json!(report.outcome));
        o.insert("exit_status".into(), json!(status));
        o.insert("attempts".into(), json!(report.attempts));
        o.insert("preserved_outputs".into(), json!(report.preserved));
        o.insert("warnings".into(), json!(report.warnings));
        if let Some(a) = report.action {
            o.insert("action".into(), json!(a));
        }
        if let Some(b) = &report.breaker {
            o.insert("breaker".into(), b.clone());
        }
        if let Some(f) = &report.fallback {
            o.insert("fallback".into(), f.clone());
            o.insert("degraded".into(), json!(true));
        }
        if let Some(n) = &report.note {
            o.insert("note".into(), json!(n));
        }
        o.insert("at".into(), json!(crate::core::saga::stamp(g.now)));
    }
    Ok((status, doc))
}
