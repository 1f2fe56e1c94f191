//! `triage run --text`: the final report for a person, from the same document as the JSON
//! report (so the two never disagree).

use crate::core::duration::Dur;
use serde_json::Value;
use std::time::Duration;

/// The report as a few lines: how it ended, one line per attempt, what was kept.
pub fn report(doc: &Value) -> String {
    let str_of = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let name = str_of(doc, "name");
    let attempts = doc["attempts"].as_array().map_or(&[][..], Vec::as_slice);
    let status = doc["exit_status"].as_u64().unwrap_or_default();
    let n = attempts.len();
    let tries = if n == 1 {
        "1 attempt".to_string()
    } else {
        format!("{n} attempts")
    };
    let headline = match doc["outcome"].as_str().unwrap_or_default() {
        "succeeded" => format!("{name} succeeded after {tries}"),
        "breaker_open" => format!("{name} was not run: its breaker is open"),
        "breaker_opened" => format!("{name} failed; its breaker opened after {tries}"),
        "output_rejected" => format!("{name}'s output failed its check after {tries}"),
        "timed_out" => format!("{name} timed out after {tries}"),
        "interrupted" => format!("{name} was interrupted after {tries}"),
        "cannot_run" => format!("{name} could not run"),
        _ => format!("{name} failed after {tries}"),
    };
    let mut out = vec![format!("triage run: {headline} (exit status {status})")];
    for a in attempts {
        let ms = |k: &str| Dur(Duration::from_millis(a[k].as_u64().unwrap_or_default()));
        let waited = match a["delay_before_ms"].as_u64() {
            Some(d) if d > 0 => format!(" after a {} wait", ms("delay_before_ms")),
            _ => String::new(),
        };
        let kind = match a["kind"].as_str() {
            Some(k) => format!(" ({k})"),
            None => String::new(),
        };
        let mut line = format!(
            "  attempt {}{waited}: {}{kind} in {}",
            a["attempt"],
            str_of(a, "end"),
            ms("elapsed_ms")
        );
        if let Some(left) = a["leftovers"].as_str() {
            line.push_str(&format!("; {left}"));
        }
        if let Some(why) = a["stopped"].as_str() {
            line.push_str(&format!("; not retried: {why}"));
        }
        if let Some(id) = a["error_id"].as_str() {
            line.push_str(&format!(" [{id}]"));
        }
        out.push(line);
    }
    if let Some(note) = doc["note"].as_str() {
        out.push(format!("  {note}"));
    }
    if let Some(at) = doc["breaker"]["retry_at"].as_str() {
        out.push(format!("  the breaker lets calls through again at {at}"));
    }
    for p in doc["preserved_outputs"].as_array().into_iter().flatten() {
        out.push(format!("  kept: {}", p.as_str().unwrap_or_default()));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_line_per_attempt_under_a_headline() {
        let doc = json!({
            "name": "fetch", "outcome": "failed", "exit_status": 1,
            "attempts": [
                {"attempt": 1, "delay_before_ms": 0, "elapsed_ms": 12, "end": "exited with status 1",
                 "kind": "tool_failure", "error_id": "err-1",
                 "leftovers": "ended 1 process left running in its group after it exited"},
                {"attempt": 2, "delay_before_ms": 30000, "elapsed_ms": 1500, "end": "exited with status 1",
                 "kind": "tool_failure", "stopped": "all 2 attempts failed"}
            ],
            "preserved_outputs": ["p/fetch-1_partial"]
        });
        assert_eq!(
            report(&doc),
            "triage run: fetch failed after 2 attempts (exit status 1)\n  \
             attempt 1: exited with status 1 (tool_failure) in 12ms; ended 1 process left running in its group after it exited [err-1]\n  \
             attempt 2 after a 30s wait: exited with status 1 (tool_failure) in 1s500ms; not retried: all 2 attempts failed\n  \
             kept: p/fetch-1_partial"
        );
    }
}
