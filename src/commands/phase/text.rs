//! `triage phase --text`: the answer of `run` and `resume` for a person (a line per item, then
//! the texts), and `status`'s.

use crate::core::phase::Manifest;
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

/// `phase status --text`.
pub fn status_text(m: &Manifest) -> String {
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
    out.push_str(&table(&items));
    if let Some(msg) = &m.message {
        out.push('\n');
        out.push_str(msg);
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
