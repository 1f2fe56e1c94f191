//! Seed 001's sequential pipeline status: where a pipeline halted, which stages completed
//! before it, which failed or have not started, and the options (`pipeline-status`).

use super::view::{or_unknown, Unit, View};
use serde_json::{json, Value};

pub(super) fn pipeline_status(v: &View) -> Result<(Value, String), String> {
    let pipeline = &v.input.pipeline;
    if pipeline.is_empty() {
        return Err("pipeline-status needs --pipeline A,B,C (the agents in order)".into());
    }
    let units = v.units(|_| true);
    let unit = |a: &str| units.iter().find(|u| u.name == a);
    let failing = |a: &str| unit(a).is_some_and(Unit::failing);
    let failed_at = pipeline
        .iter()
        .position(|a| failing(a))
        .ok_or_else(|| "no agent of the pipeline has an unresolved failure in scope".to_string())?;
    let agent = &pipeline[failed_at];
    let last = unit(agent)
        .and_then(|u| u.open.last().copied())
        .ok_or("no failure")?;
    let mut failure = or_unknown(last.kind.as_deref()).to_uppercase();
    if let Some(ms) = last.duration_ms {
        failure.push_str(&format!(" after {} minutes", ms.div_ceil(60_000)));
    }
    let extended = v
        .input
        .policy
        .agent(agent)
        .timeout
        .map(|d| (d.as_millis().div_ceil(60_000) * 4).div_ceil(3));
    // Sequential: the stages before the halt completed. After it, a stage the log or
    // --completed shows is placed by what they show; the others have not started.
    let after = &pipeline[failed_at + 1..];
    let mut completed: Vec<&String> = pipeline[..failed_at].iter().collect();
    let mut also_failed: Vec<&String> = Vec::new();
    let mut not_started: Vec<&String> = Vec::new();
    for a in after {
        if failing(a) {
            also_failed.push(a);
        } else if v.input.completed.contains(a) || unit(a).is_some_and(Unit::recovered) {
            completed.push(a);
        } else if unit(a).is_some() {
            also_failed.push(a);
        } else {
            not_started.push(a);
        }
    }
    let next = not_started.first();
    let opts: Vec<String> = vec![
        match extended {
            Some(m) => format!("Retry {agent} with extended timeout ({m} min)"),
            None => format!("Retry {agent} with extended timeout"),
        },
        "Retry with narrowed scope".into(),
        match next {
            Some(n) => format!("Skip {agent}, continue with {n}"),
            None => format!("Skip {agent}, finish the pipeline"),
        },
        "Abort pipeline, keep completed outputs".into(),
    ];
    let mut text = format!(
        "Pipeline Status: HALTED at skill {}/{}\n\n",
        failed_at + 1,
        pipeline.len()
    );
    if !completed.is_empty() {
        text.push_str("Completed successfully:\n");
        for a in &completed {
            text.push_str(&format!("- [x] {a}\n"));
        }
        text.push('\n');
    }
    text.push_str(&format!("Failed:\n- [ ] {agent}: {failure}\n"));
    if let Some(p) = &last.last_progress {
        text.push_str(&format!(
            "      Last progress: {}\n",
            crate::core::text::quoted(p)
        ));
    }
    for p in &last.preserved {
        text.push_str(&format!("      Partial output: {p}\n"));
    }
    for a in &also_failed {
        let kind = unit(a)
            .and_then(|u| u.last.kind.clone())
            .map(|k| k.to_uppercase())
            .unwrap_or_else(|| "UNKNOWN".into());
        let how = match unit(a).and_then(Unit::decided) {
            Some(d) => format!("{kind} (decided: {d})"),
            None => kind,
        };
        text.push_str(&format!("- [ ] {a}: {how}\n"));
    }
    if !not_started.is_empty() {
        text.push_str("\nNot started:\n");
        for a in &not_started {
            text.push_str(&format!("- [ ] {a}\n"));
        }
    }
    text.push_str(if completed.is_empty() {
        "\nOptions:\n"
    } else {
        "\nCompleted outputs preserved. Options:\n"
    });
    let letters = ["A", "B", "C", "D"];
    for (l, o) in letters.iter().zip(&opts) {
        text.push_str(&format!("({l}) {o}\n"));
    }
    let fields = json!({
        "status": "HALTED", "failed_index": failed_at + 1, "total": pipeline.len(),
        "completed": completed, "failed": {"name": agent, "error": failure,
        "last_progress": last.last_progress, "partial_outputs": last.preserved},
        "also_failed": also_failed, "not_started": not_started,
        "options": letters.iter().zip(&opts).map(|(l, t)| json!({"letter": l, "text": t})).collect::<Vec<_>>(),
    });
    Ok((fields, text.trim_end().to_string()))
}
