//! `triage phase --text`: the answer of `run` and `resume` for a person (a line per item, then
//! the texts), and `status`'s.

use crate::core::duration::Dur;
use crate::core::phase::{self as model, Manifest};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// The answer for a person: a line per item, then the texts.
pub fn text(doc: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let mut out = format!(
        "Phase {}{} of workflow {}: {} — {}\n\n",
        s(&doc["phase"]),
        doc["name"]
            .as_str()
            .map_or(String::new(), |n| format!(" ({n})")),
        s(&doc["workflow_id"]),
        s(&doc["decision"]),
        s(&doc["reason"]),
    );
    out.push_str(&table(doc["items"].as_array().map_or(&[][..], |v| v)));
    if let Some(r) = doc["resumed"].as_object() {
        out.push_str("\nResumed:\n");
        for k in [
            "complete",
            "partial",
            "not_started",
            "failed",
            "skipped",
            "needs_decision",
            "rerun",
        ] {
            let ids: Vec<String> = r
                .get(k)
                .and_then(Value::as_array)
                .map(|v| v.iter().map(s).collect())
                .unwrap_or_default();
            out.push_str(&format!(
                "  - {}: {}\n",
                k.replace('_', " "),
                if ids.is_empty() {
                    "none".into()
                } else {
                    ids.join(", ")
                }
            ));
        }
    }
    for t in [&doc["text"], &doc["degradation"]["text"], &doc["message"]] {
        if let Some(t) = t.as_str() {
            out.push('\n');
            out.push_str(t);
            out.push('\n');
        }
    }
    let p = &doc["pending_decision"];
    let at = model::deadline(Some(&json!({"deadline": p["at"]})));
    if let Some(t) = at.and_then(|at| {
        let which = (s(&doc["workflow_id"]), s(&doc["phase"]));
        pending_text(Some(p), (&which.0, &which.1), at, false)
    }) {
        out.push('\n');
        out.push_str(&t);
        out.push('\n');
    }
    out.trim_end().to_string()
}

fn table(items: &[Value]) -> String {
    let rows: Vec<[String; 5]> = items
        .iter()
        .map(|i| {
            let secs = i["duration_ms"]
                .as_u64()
                .map_or("-".to_string(), |ms| format!("{:.1}s", ms as f64 / 1000.0));
            let what = i["note"]
                .as_str()
                .or(i["kind"].as_str())
                .or(i["output"].as_str())
                .unwrap_or("")
                .to_string();
            [
                i["id"].as_str().unwrap_or("").to_string(),
                i["state"].as_str().unwrap_or("").to_string(),
                i["attempts"].as_u64().unwrap_or(0).to_string(),
                secs,
                what,
            ]
        })
        .collect();
    let head = ["ITEM", "STATE", "ATTEMPTS", "TIME", "DETAIL"];
    let mut w = head.map(str::len);
    for r in &rows {
        for (k, c) in r.iter().enumerate() {
            w[k] = w[k].max(c.chars().count());
        }
    }
    let line = |r: &[String]| {
        let mut l = String::from("  ");
        for (k, c) in r.iter().enumerate() {
            if k + 1 == r.len() {
                l.push_str(c);
            } else {
                l.push_str(&format!("{c:<width$}  ", width = w[k]));
            }
        }
        l.trim_end().to_string() + "\n"
    };
    let mut out = line(&head.map(str::to_string));
    for r in &rows {
        out.push_str(&line(r));
    }
    crate::core::text::printable(&out)
}

/// What a person at a terminal does about a pending decision: what is pending, the choices,
/// what happens at the deadline and when.
/// `options`: list them (the answer of `run` has them in its escalation text already).
fn pending_text(
    decision: Option<&Value>,
    (workflow, phase): (&str, &str),
    now: DateTime<Utc>,
    options: bool,
) -> Option<String> {
    let d = decision.filter(|d| model::is_pending(Some(d)))?;
    let which = format!("--workflow {} --phase {}", shell(workflow), shell(phase));
    let mut t = format!(
        "Waiting for your decision: {}\n",
        d["reason"].as_str().unwrap_or("the phase stopped")
    );
    let default = d["default"]["choice"].as_str();
    for o in d["options"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|_| options)
    {
        let letter = o["choice"].as_str().unwrap_or("?");
        t.push_str(&format!(
            "  ({letter}) {} [{}]{}\n",
            o["text"].as_str().unwrap_or(""),
            o["action"].as_str().unwrap_or(""),
            if default == Some(letter) {
                " (the default)"
            } else {
                ""
            }
        ));
    }
    t.push_str(&format!(
        "Decide with: triage phase decide {which} --choice LETTER\n"
    ));
    let deadline = model::deadline(Some(d));
    let when = deadline.map(|at| {
        let left = (at - now)
            .to_std()
            .map(|d| Dur(std::time::Duration::from_secs(d.as_secs())));
        let stamp = crate::core::saga::stamp(at);
        match left {
            Ok(l) if !l.0.is_zero() => format!("at {stamp} (in {l})"),
            _ => format!(
                "since {stamp} (the deadline passed {} ago)",
                (now - at)
                    .to_std()
                    .map(|d| Dur(std::time::Duration::from_secs(d.as_secs())))
                    .unwrap_or_default()
            ),
        }
    });
    match (default, d["default"]["action"].as_str(), when) {
        (Some(letter), Some(action), Some(when)) => t.push_str(&format!(
            "The default, ({letter}) {action}, applies {when}: `triage phase wait {which}` applies it then, if nobody decided; nothing applies it while nobody waits.",
        )),
        (_, _, Some(when)) => t.push_str(&format!(
            "No default applies (the policy's default_action is {}): the phase waits for a person; its deadline is {when}.",
            d["default_action"].as_str().unwrap_or("wait_for_user")
        )),
        _ => t.push_str("No deadline is recorded: nothing is applied without a person."),
    }
    Some(crate::core::text::printable(&t))
}

/// A word as a shell reads it back.
fn shell(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/+=@".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// `phase wait --text`.
pub fn waited(doc: &Value) -> String {
    let s = |k: &str| doc[k].as_str().unwrap_or_default().to_string();
    let head = format!("Phase {} of {}", s("phase"), s("workflow_id"));
    let secs = doc["waited_ms"].as_u64().unwrap_or(0) as f64 / 1000.0;
    if doc["pending"] == true {
        return format!(
            "{head}: still waiting for a decision after {secs:.1}s ({})",
            s("reason")
        );
    }
    if doc["applied_default"] == true {
        let mut t = format!(
            "{head}: nobody decided by the deadline {}; the default ({}) {} was applied",
            s("deadline"),
            s("choice"),
            s("action")
        );
        if let Some(n) = doc["next"].as_str() {
            t.push_str(&format!("\nGo on with: {n}"));
        }
        return t;
    }
    match doc["choice"].as_str() {
        Some(c) => format!(
            "{head}: decided ({c}) {} by {} at {}",
            s("action"),
            doc["decided_by"].as_str().unwrap_or("a person"),
            s("decided_at")
        ),
        None => format!("{head}: no decision is pending"),
    }
}

/// What `phase resume` would run: every unfinished item's command and fallback, as a shell
/// would read them back, an item held for a decision said so; and whether the manifest's seal
/// is the user's (`sealed`), since resume runs nothing of a manifest that is not unasked.
pub fn resume_would_run(m: &Manifest, sealed: bool) -> String {
    let mut out = String::from("Resume would run:");
    let mut any = false;
    for (e, item) in m.items.iter().zip(&m.plan.items) {
        if !e.state().unfinished() {
            continue;
        }
        any = true;
        let words: Vec<String> = item
            .command
            .argv()
            .iter()
            .map(|w| model::shell_word(w))
            .collect();
        let held = e.side_effects && e.may_have_run() && e.rerun.is_none();
        out.push_str(&format!(
            "\n  {}: {}{}",
            e.id,
            words.join(" "),
            if held {
                "  (held: side effects; runs only with --rerun)"
            } else {
                ""
            }
        ));
        let fallback = item.fallback.as_ref().or(m.plan.defaults.fallback.as_ref());
        if let Some(f) = fallback {
            out.push_str(&format!(
                "\n  {} (its fallback, when its breaker is open): sh -c {}",
                e.id,
                model::shell_word(f)
            ));
        }
    }
    if !any {
        out.push_str(" nothing (every item has ended)");
    }
    if let Some(file) = &m.plan_file {
        out.push_str(&format!("\nPlan: {file}"));
    }
    out.push_str(if sealed {
        "\nSealed: yes, this is a manifest you ran"
    } else {
        "\nSealed: no; triage cannot show you ran it, and `phase resume` refuses it without --trust-plan"
    });
    out
}

/// `phase status --text` (`now`: the deadline is told from it).
pub fn status_text(m: &Manifest, now: DateTime<Utc>) -> String {
    let items: Vec<Value> = m.items.iter().map(|e| json!(e)).collect();
    let mut out = format!(
        "Phase {} of workflow {}: {}{}\n\n",
        m.phase,
        m.workflow_id,
        json!(m.status).as_str().unwrap_or(""),
        m.decision
            .as_ref()
            .and_then(|d| d["decision"].as_str())
            .map_or(String::new(), |d| format!(" ({d})")),
    );
    if model::is_pending(m.decision.as_ref()) {
        out = out.replacen(": decided (stop)", ": stopped, waiting for a decision", 1);
    }
    out.push_str(&table(&items));
    if let Some(msg) = &m.message {
        out.push('\n');
        out.push_str(msg);
    }
    if let Some(p) = pending_text(m.decision.as_ref(), (&m.workflow_id, &m.phase), now, true) {
        out.push('\n');
        out.push_str(&p);
    } else if let Some(c) = m
        .decision
        .as_ref()
        .map(|d| &d["choice"])
        .filter(|c| c.is_object())
    {
        out.push_str(&format!(
            "\nDecided: ({}) {} by {} at {}",
            c["choice"].as_str().unwrap_or("?"),
            c["action"].as_str().unwrap_or("?"),
            c["decided_by"].as_str().unwrap_or("a person"),
            c["at"].as_str().unwrap_or("?")
        ));
    }
    out.trim_end().to_string()
}

/// `phase decide --text`.
pub fn decided(doc: &Value) -> String {
    let list = |k: &str| -> Vec<String> {
        doc[k]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (resolved, skipped, rerun) = (list("resolved"), list("skipped"), list("rerun"));
    let s = |k: &str| doc[k].as_str().unwrap_or_default().to_string();
    let (letter, action) = (s("choice"), s("action"));
    let mut t = format!(
        "Phase {} of {}: choice {letter} ({action}) recorded on {} open error{}",
        s("phase"),
        s("workflow_id"),
        resolved.len(),
        if resolved.len() == 1 { "" } else { "s" }
    );
    if !skipped.is_empty() {
        t.push_str(&format!("; skipped: {}", skipped.join(", ")));
    }
    if !rerun.is_empty() {
        t.push_str(&format!(
            "; may run again, side effects and all: {}",
            rerun.join(", ")
        ));
    }
    if let Some(n) = doc["next"].as_str() {
        let what = match action.as_str() {
            "retry" => "Retry the failed items",
            _ => "Go on with the phase",
        };
        t.push_str(&format!("\n{what} with: {n}"));
    }
    t
}
