//! `triage errors --text`: the records as a table that fits the terminal, or (`--follow`) one
//! line each.

use super::text::shown_path;
use crate::context::Context;
use crate::core::error_record::LogLine;
use crate::core::summary::Query;
use crate::store::error_log::{self, Listed};
use crate::term::{count, cut, when, when_text, Term, Tone};
use chrono::{DateTime, Utc};
use std::io::Write;
use std::path::Path;

/// The query in words: `agent researcher, since 2h ago, unresolved`.
pub fn describe(q: &Query, now: DateTime<Utc>) -> String {
    let f = &q.filter;
    let mut parts = Vec::new();
    for (name, v) in [
        ("agent", &f.agent),
        ("kind", &q.kind),
        ("session", &f.session),
        ("workflow", &f.workflow),
        ("phase", &f.phase),
    ] {
        if let Some(v) = v {
            parts.push(format!("{name} {v}"));
        }
    }
    if let Some(t) = f.since {
        parts.push(format!("since {}", when(t, now)));
    }
    if let Some(t) = q.until {
        parts.push(format!("until {}", when(t, now)));
    }
    if q.unresolved {
        parts.push("unresolved".into());
    }
    if parts.is_empty() {
        "all records".into()
    } else {
        parts.join(", ")
    }
}

/// One record as one line of text, or as stored; false when the reader is gone.
pub fn emit(out: &mut impl Write, raw: &[u8], text: bool, term: &Term, now: DateTime<Utc>) -> bool {
    let line = if text {
        match LogLine::parse(raw) {
            Some(l) => one_line(&l, term, now).into_bytes(),
            None => return true,
        }
    } else {
        raw.to_vec()
    };
    out.write_all(&line)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .is_ok()
}

fn severity_tone(s: Option<&str>) -> Option<Tone> {
    match s {
        Some("critical") => Some(Tone::Bad),
        Some("error") => Some(Tone::Warn),
        Some("warning") => Some(Tone::Manual),
        _ => None,
    }
}

/// `--follow --text`: `14:02:07  err-…  timeout  researcher: the detail`, cut to the width.
fn one_line(l: &LogLine, term: &Term, now: DateTime<Utc>) -> String {
    // Every piece from the log made printable first: only our colours reach the terminal.
    let shown = |s: Option<&str>, none: &str| crate::core::text::printable(s.unwrap_or(none));
    let at = shown(
        l.timestamp.as_deref().map(|t| when_text(t, now)).as_deref(),
        "-",
    );
    let id = shown(l.error_id.as_deref(), "-");
    let kind = shown(l.kind(), "unknown");
    let agent = shown(l.agent(), "-");
    let head = format!("{at}  {id}  {kind}  {agent}: ");
    let room = term.width.saturating_sub(head.chars().count()).max(10);
    let detail = crate::core::text::printable(&cut(l.detail().unwrap_or(""), room));
    let tone = severity_tone(l.severity.as_deref());
    format!(
        "{}  {}  {}  {agent}: {detail}",
        term.paint(&at, Tone::Dim),
        id,
        match tone {
            Some(t) => term.paint(&kind, t),
            None => kind,
        }
    )
}

/// The table for `--text`, or why there is nothing in it.
pub fn table(
    listed: &[Listed],
    query: &Query,
    root: &Path,
    log: &Path,
    in_log: u64,
    term: &Term,
    cx: &Context,
) -> String {
    if listed.is_empty() {
        let why = if !root.is_dir() {
            format!(
                "no state root at {}: nothing has been recorded there.\nPass --dir or set TRIAGE_DIR to the state root (default: $CLAUDE_PROJECT_DIR/.triage, else ./.triage).",
                shown_path(root)
            )
        } else if !error_log::local_exists(root) {
            format!(
                "no error log at {}: no error has been recorded under {} yet.",
                shown_path(log),
                shown_path(root)
            )
        } else {
            format!(
                "{}: no error record matches {} ({} in the log).",
                shown_path(log),
                describe(query, cx.now),
                count(in_log, "record", "records")
            )
        };
        return term.wrap(&why);
    }
    let mut out = term.wrap(&format!(
        "{} in {} ({}), newest first",
        count(listed.len() as u64, "error record", "error records"),
        shown_path(log),
        describe(query, cx.now)
    ));
    if term.width < 110 {
        out.push_str(&narrow(listed, term, cx.now));
        return out;
    }
    let wide = term.width >= 140;
    let mut head = vec!["ID", "WHEN", "KIND"];
    if wide {
        head.extend(["SEVERITY", "SESSION", "RESOLVED"]);
    }
    head.push("AGENT: DETAIL");
    let mut rows = Vec::new();
    for item in listed {
        let Some(l) = LogLine::parse(&item.raw) else {
            continue;
        };
        let tone = severity_tone(l.severity.as_deref());
        let mut row = vec![
            term.cell(l.error_id.as_deref().unwrap_or("-"), None),
            term.cell(
                l.timestamp
                    .as_deref()
                    .map_or("-".into(), |t| when_text(t, cx.now)),
                Some(Tone::Dim),
            ),
            term.cell(l.kind().unwrap_or("unknown"), tone),
        ];
        if wide {
            row.push(term.cell(l.severity.as_deref().unwrap_or("-"), tone));
            row.push(term.cell(l.session_id.as_deref().unwrap_or("-"), None));
            row.push(term.cell(
                if item.resolved { "yes" } else { "no" },
                (!item.resolved).then_some(Tone::Warn),
            ));
        }
        row.push(term.cell(
            format!(
                "{}: {}",
                l.agent().unwrap_or("-"),
                cut(l.detail().unwrap_or(""), 200)
            ),
            None,
        ));
        rows.push(row);
    }
    out.push_str(&term.table(&head, &[head.len() - 1], rows));
    out
}

/// Below 110 columns: the id, time and kind on one line (an id never wraps: it is copied
/// into `--resolve`), the agent and detail wrapped under it.
fn narrow(listed: &[Listed], term: &Term, now: DateTime<Utc>) -> String {
    let inner = Term {
        width: term.width.saturating_sub(4),
        ..*term
    };
    let mut out = String::new();
    for item in listed {
        let Some(l) = LogLine::parse(&item.raw) else {
            continue;
        };
        let kind = l.kind().unwrap_or("unknown");
        let kind = match severity_tone(l.severity.as_deref()) {
            Some(t) => term.paint(kind, t),
            None => kind.to_string(),
        };
        let at = l
            .timestamp
            .as_deref()
            .map_or("-".into(), |t| when_text(t, now));
        out.push_str(&format!(
            "{}  {}  {kind}{}\n",
            l.error_id.as_deref().unwrap_or("-"),
            term.paint(&at, Tone::Dim),
            if item.resolved { "  (resolved)" } else { "" }
        ));
        let detail = format!(
            "{}: {}",
            l.agent().unwrap_or("-"),
            cut(l.detail().unwrap_or(""), 300)
        );
        for line in inner.wrap(&detail).lines() {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
