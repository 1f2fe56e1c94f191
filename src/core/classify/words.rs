//! The words of an error object: its one-line detail, its suggestions, the paragraph a hook
//! gives the model, and the kinds table of the man page.

use super::{input, rules, ErrorObject, Verdict};
use crate::core::duration::humane_secs;
use crate::core::vocab::{Action, Kind, Tier};
use serde_json::Value;

fn subject(f: &input::Facts) -> String {
    let mut s = match (&f.tool, &f.agent) {
        // The hook names a tool's caller after the tool when no subagent is involved.
        (Some(t), Some(a)) if t == a => t.clone(),
        (Some(t), Some(a)) => format!("{t} (agent {a})"),
        (Some(t), None) => t.clone(),
        (None, Some(a)) => format!("agent {a}"),
        (None, None) if f.stop_failure.is_some() => "the API request".into(),
        (None, None) => "the command".into(),
    };
    if let Some(c) = f.exit_code {
        s.push_str(&format!(" (exit {c})"));
    }
    s
}

pub(super) fn detail_line(f: &input::Facts, v: &Verdict, verb: &str) -> String {
    let mut subject = subject(f);
    // A tool's name is written as the tool spells it (`mcp__github__create_issue`), never
    // recased; only the words of a sentence start with a capital.
    if let Some(c) = subject.get(..1).filter(|_| f.tool.is_none()) {
        subject = c.to_uppercase() + &subject[1..];
    }
    let mut line = match &v.evidence {
        Some(e) if !e.is_empty() => format!("{subject} {verb}: {e}"),
        _ => format!("{subject} {verb}"),
    };
    match (v.kind, f.retry_at, f.retry_after_s) {
        (Kind::RateLimited, Some(at), Some(s)) => line.push_str(&format!(
            "; the limit resets at {} (in {})",
            at.format("%Y-%m-%d %H:%M UTC"),
            humane_secs(s)
        )),
        (Kind::RateLimited, Some(at), None) => line.push_str(&format!(
            "; the limit resets at {}",
            at.format("%Y-%m-%d %H:%M UTC")
        )),
        (Kind::RateLimited, None, Some(s)) => {
            line.push_str(&format!("; the server asks to wait {}", humane_secs(s)))
        }
        _ => {}
    }
    line
}

pub(super) fn suggestions(
    f: &input::Facts,
    v: &Verdict,
    defaults: &[&str],
    reason: Option<&str>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Some(r) = reason {
        out.push(upper_first(r));
    }
    match (v.kind, f.retry_at, f.retry_after_s) {
        (Kind::RateLimited, Some(at), _) => out.push(format!(
            "Wait until {} when the limit resets, then retry",
            at.format("%Y-%m-%d %H:%M UTC")
        )),
        (Kind::RateLimited, None, Some(s)) => out.push(format!(
            "Wait {s} s as the server asked (Retry-After), then retry"
        )),
        _ => {}
    }
    out.extend(defaults.iter().map(|s| s.to_string()));
    out
}

/// The one directive for a subagent type that does not exist: the types the client lists
/// (outside text: each shown as a name, escaped when it is not a plain identifier), or, when
/// it lists none, to use one that exists.
pub fn agent_type_directive(available: &[String]) -> String {
    if available.is_empty() {
        return "Use an agent type that exists.".to_string();
    }
    let shown: Vec<String> = available
        .iter()
        .map(|a| crate::core::text::label(a))
        .collect();
    format!("Use one of: {}.", shown.join(", "))
}

/// `s` with its first letter lowered, unless the word is an acronym or a name (`PATH`, `npm`).
fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match (c.next(), c.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && !second.is_uppercase() => {
            first.to_lowercase().chain(s.chars().skip(1)).collect()
        }
        _ => s.to_string(),
    }
}

pub(super) fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The one short paragraph a hook puts in `additionalContext`: what failed (the kind, its
/// tier and the detail line) and one directive for the model to act on. Never a menu: the
/// suggestions stay in the error object for a person (`classify --text`, `report`).
pub fn hook_context(e: &ErrorObject) -> String {
    let tool = e.context.get("tool").and_then(Value::as_str);
    let shell = matches!(tool, Some("Bash" | "PowerShell"));
    let next = match (e.action, &e.retry) {
        // A command that ran out of the tool's time limit fails the same way on a plain
        // retry: the fix is a longer limit, or not waiting for it; the attempt it would be is
        // the record's, so a repeat never reads as the first.
        (Action::Retry, Some(r)) if e.kind == Kind::Timeout && shell => format!(
            "rerun it with a longer timeout or in the background (attempt {} of {})",
            r.attempt, r.max_attempts
        ),
        (Action::Retry, None) if e.kind == Kind::Timeout && shell => {
            "rerun it with a longer timeout or in the background".to_string()
        }
        (Action::Retry, Some(r)) if r.delay_s <= 0.0 => format!(
            "retry the same call once more now (attempt {} of {})",
            r.attempt, r.max_attempts
        ),
        (Action::Retry, Some(r)) => format!(
            "wait {}, then retry the same call (attempt {} of {})",
            humane_secs(r.delay_s),
            r.attempt,
            r.max_attempts
        ),
        (Action::Retry, None) => "retry the same call".into(),
        _ if e.tier == Tier::PipelineAffecting => {
            "stop this step and tell the lead or the user what failed".into()
        }
        // The kind's usual action, not a retry: its first suggestion says what to do about
        // it ("fix the reported compile errors"), which beats "stop and report".
        _ if !e.context.contains_key("action_reason") && !e.suggestions.is_empty() => {
            lower_first(e.suggestions[0].trim_end_matches('.'))
        }
        (Action::AskUser, _) => "do not retry on your own; ask the user how to proceed".into(),
        (Action::ProceedDegraded, _) => {
            "continue without this result and say what is missing".into()
        }
        // Seed 004: a tier-1 error is one the agent handles itself.
        _ if e.tier == Tier::SelfRecoverable && e.action != Action::Abort => {
            "handle it yourself, without repeating the same call".into()
        }
        (Action::Escalate, _) => "stop retrying and tell the user what failed".into(),
        (Action::Skip, _) => "skip this step and go on".into(),
        (Action::Abort, _) => "stop the workflow and keep what is done".into(),
    };
    // The detail carries the tool's own words: quoted as data, after triage's.
    let mut p = format!(
        "triage: `{}` (tier {}, {}): {}. Next step: {}.",
        e.kind,
        e.tier.number(),
        e.tier.name(),
        crate::core::text::quoted(e.detail.trim_end_matches('.')),
        next
    );
    // The reason the action is not the kind's usual one is a fact worth the model's reading
    // only where it explains a question for the user (side effects, a failed validation).
    if e.action == Action::AskUser {
        if let Some(reason) = e.context.get("action_reason").and_then(Value::as_str) {
            p.push_str(&format!(
                " Why: {}.",
                crate::core::text::quoted(reason.trim_end_matches('.'))
            ));
        }
    }
    p.replace('\n', " ")
}

/// A wait for a person or a model to read: `30 s`, `12 min`, `5 h 12 min`.
pub fn fmt_wait(s: f64) -> String {
    let s = s.max(0.0);
    if s < 120.0 {
        format!("{} s", fmt_secs(s))
    } else if s < 7200.0 {
        format!("{} min", (s / 60.0).round())
    } else {
        let m = (s / 60.0).round() as u64;
        format!("{} h {} min", m / 60, m % 60)
    }
}

fn fmt_secs(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

/// The man page's table: every kind with its default tier, category, retryability and
/// severity (narrow enough for an 80-column man page).
pub fn kinds_table() -> String {
    let mut out = String::from(
        "Kinds and their defaults. [[classify.rules]] and [retry.kinds.KIND] change them.\n\n",
    );
    // Padded by hand: `classify`'s long help is built on every call that parses its
    // arguments, and `format!` padding cost ~0.1 M instructions of each.
    let mut row = |cells: [&str; 5]| {
        for (cell, width) in cells.iter().zip([17, 4, 18, 9, 0]) {
            out.push(' ');
            out.push_str(cell);
            out.extend(std::iter::repeat_n(' ', width - cell.len().min(width)));
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    row(["kind", "tier", "category", "retryable", "severity"]);
    for k in Kind::ALL {
        let d = rules::defaults(*k);
        let tier = d.tier.number().to_string();
        let retry = if d.retryable { "yes" } else { "no" };
        let severity = [d.severity.as_str(), " (", d.severity.priority(), ")"].concat();
        row([k.as_str(), &tier, d.category.as_str(), retry, &severity]);
    }
    out
}
