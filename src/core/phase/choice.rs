//! A person's word on a phase: `phase decide --choice` (the options of the escalation text),
//! and `phase resume --rerun ID` (leave to start an item with side effects again).

use super::{ItemState, Manifest};
use crate::core::policy::DefaultAction;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::time::Duration;

/// A choice: its letter and the action recorded; `None` when `word` is not an option.
/// After one failed item (`agent-failure`'s text) C is giving its output by hand.
pub fn choice(word: &str, template: Option<&str>) -> Option<(&'static str, &'static str)> {
    let single = template == Some("agent-failure");
    Some(match word.trim().to_ascii_lowercase().as_str() {
        "a" | "retry" => ("A", "retry"),
        "b" | "proceed" | "proceed_without" | "skip" => ("B", "proceed_without"),
        "c" if single => ("C", "manual_input"),
        "manual_input" => ("C", "manual_input"),
        "c" | "abort_phase" => ("C", "abort_phase"),
        "d" | "abort" | "abort_workflow" => ("D", "abort_workflow"),
        _ => return None,
    })
}

/// Who decides a pending decision when a person has not: seed 002's "take default action",
/// as `phase wait` records it.
pub const BY_DEFAULT: &str = "default after timeout";

/// The options of a decision the phase stopped for: each option's letter, the action
/// `phase decide` records for it, and its text (the escalation's own, when it has one).
pub fn options(template: Option<&str>, texts: Option<&Value>) -> Vec<Value> {
    let fallback = [
        "Retry the failed items (items with side effects included)",
        "Proceed without the failed items",
        if template == Some("agent-failure") {
            "Provide manual input for the failed item's output"
        } else {
            "Abort the phase"
        },
        "Abort the workflow",
    ];
    ["A", "B", "C", "D"]
        .iter()
        .zip(fallback)
        .filter_map(|(letter, plain)| {
            let (_, action) = choice(letter, template)?;
            let text = texts
                .and_then(Value::as_array)
                .and_then(|o| o.iter().find(|o| o["letter"] == *letter))
                .and_then(|o| o["text"].as_str())
                .unwrap_or(plain);
            Some(json!({"choice": letter, "action": action, "text": text}))
        })
        .collect()
}

/// The fields of a pending decision (seed 002's escalation: `options`, `default_action`,
/// and when it applies): merged into the manifest's `decision` when the phase stops. The
/// deadline is `at` plus `timeout`; `default` is the choice `phase wait` applies then (null
/// for `wait_for_user`: nothing is applied).
pub fn pending(
    template: Option<&str>,
    texts: Option<&Value>,
    default: DefaultAction,
    at: DateTime<Utc>,
    timeout: Duration,
) -> Value {
    let deadline = chrono::Duration::from_std(timeout)
        .ok()
        .and_then(|d| at.checked_add_signed(d))
        .unwrap_or(at);
    let chosen = default
        .choice_word()
        .and_then(|w| choice(w, template))
        .map(|(letter, action)| json!({"choice": letter, "action": action}));
    json!({
        "pending": true,
        "options": options(template, texts),
        "default_action": default.as_str(),
        "default": chosen,
        "timeout_s": timeout.as_secs(),
        "deadline": crate::core::saga::stamp(deadline),
    })
}

/// Whether the manifest's decision waits for a person (a phase that stopped, not decided).
pub fn is_pending(decision: Option<&Value>) -> bool {
    decision.is_some_and(|d| d["pending"] == true && d.get("choice").is_none_or(Value::is_null))
}

/// The deadline of a pending decision.
pub fn deadline(decision: Option<&Value>) -> Option<DateTime<Utc>> {
    let d = decision?["deadline"].as_str()?;
    DateTime::parse_from_rfc3339(d)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// What a choice did to the items.
#[derive(Debug, Default)]
pub struct Applied {
    /// Items skipped (B, or C as manual input).
    pub skipped: Vec<String>,
    /// Items given leave to run again, side effects and all (A).
    pub rerun: Vec<String>,
}

impl Manifest {
    /// Applies choice `letter` (`action`) at `at` to the failed items and those waiting for a
    /// decision: skipped when it goes on without them, given leave to run again on retry.
    pub fn apply_choice(&mut self, letter: &str, action: &str, at: &str) -> Applied {
        let skips = matches!(action, "proceed_without" | "manual_input");
        let mut done = Applied::default();
        for e in self.items.iter_mut() {
            let open = matches!(e.state(), ItemState::Failed | ItemState::NeedsDecision);
            if open && skips {
                e.state = Some(ItemState::Skipped);
                e.note = Some(format!("skipped by decision {letter} ({action})"));
                e.rerun = None;
                done.skipped.push(e.id.clone());
            } else if open
                && action == "retry"
                && (e.state() == ItemState::NeedsDecision || e.side_effects && e.may_have_run())
            {
                // Retry is a person's leave to start them again, side effects and all.
                e.rerun = Some(format!("decision {letter} ({action}) at {at}"));
                done.rerun.push(e.id.clone());
            }
        }
        done
    }

    /// `--rerun ID...`: a person's leave to start those items again (recorded on each, used
    /// up when it starts). An id the phase does not have, or an item that is complete or
    /// skipped, is refused (with why) before anything runs.
    pub fn leave_to_rerun(&mut self, ids: &[String], at: &str) -> Result<Vec<String>, String> {
        let mut given = Vec::new();
        for id in ids {
            let Some(e) = self.items.iter_mut().find(|e| &e.id == id) else {
                let known: Vec<&str> = self.items.iter().map(|e| e.id.as_str()).collect();
                return Err(format!(
                    "--rerun `{id}`: phase {} of workflow {} has no such item (its items: {})",
                    self.phase,
                    self.workflow_id,
                    known.join(", ")
                ));
            };
            if matches!(e.state(), ItemState::Complete | ItemState::Skipped) {
                return Err(format!(
                    "--rerun `{id}`: the item is {}; resume runs only what is unfinished",
                    e.state().as_str()
                ));
            }
            e.rerun = Some(format!("`phase resume --rerun` at {at}"));
            if !given.contains(id) {
                given.push(id.clone());
            }
        }
        Ok(given)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-02-04T14:30:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    #[test]
    fn a_pending_decision_names_its_options_default_and_deadline() {
        let p = pending(
            Some("multiple-failures"),
            None,
            DefaultAction::ProceedWithPartial,
            at(),
            Duration::from_secs(300),
        );
        assert!(is_pending(Some(&p)));
        assert_eq!(p["deadline"], "2026-02-04T14:35:00.000Z");
        assert_eq!(
            p["default"],
            json!({"choice": "B", "action": "proceed_without"})
        );
        let actions: Vec<&str> = p["options"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["action"].as_str())
            .collect();
        assert_eq!(
            actions,
            ["retry", "proceed_without", "abort_phase", "abort_workflow"]
        );
        assert_eq!(
            deadline(Some(&p)).map(|d| d - at()),
            Some(chrono::Duration::seconds(300))
        );
        // wait_for_user: no default at all.
        let p = pending(None, None, DefaultAction::WaitForUser, at(), Duration::ZERO);
        assert!(p["default"].is_null());
    }

    #[test]
    fn a_decision_is_pending_only_until_a_choice_and_a_forged_deadline_is_none() {
        let mut d = json!({"pending": true, "deadline": "yesterday"});
        assert!(is_pending(Some(&d)));
        assert_eq!(deadline(Some(&d)), None);
        d["choice"] = json!({"choice": "B"});
        assert!(!is_pending(Some(&d)));
        assert!(!is_pending(Some(&json!({"decision": "stop"}))));
        assert!(!is_pending(Some(&json!("pending"))));
        assert!(!is_pending(None));
    }
}
