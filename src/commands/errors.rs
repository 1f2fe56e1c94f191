//! `triage errors`: the error records with their ids, newest first — the way to find the id
//! that `record-error --resolve` needs. Filters by agent, kind, session, workflow, phase, time
//! and resolution; prints JSON lines (each record as stored) or, with `--text`, a table that
//! fits the terminal. `--follow` then prints new records as they are appended, like
//! `tail -f`, and goes on across a `report prune`.

use crate::context::{Context, Outcome};
use crate::core::error_record::LogLine;
use crate::core::summary::{time_flag, Filter};
use crate::exit::Failure;
use crate::report::text::shown_path;
use crate::store::error_log;
use crate::store::error_log::log_path;
use crate::term::{count, cut, when_text, Term, Tone};
use chrono::{DateTime, Utc};
use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// How often `--follow` looks for new lines.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// Arguments of `triage errors`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage errors --unresolved --text\n  \
    triage errors --agent researcher --since 2h\n  \
    triage errors --kind timeout --follow\n  \
    triage errors --unresolved -n 1 | jq -r .error_id\n\n\
    Without --text, each record is printed as stored in logs/errors.jsonl, one per line. With \
    --follow, the last records (10 unless -n says) come first, oldest first, then new ones as \
    they are written; it runs until interrupted.")]
pub struct Args {
    /// Only this agent
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Only this kind (timeout, rate_limited, ...)
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// Only this session
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only this workflow
    #[arg(long, value_name = "ID")]
    pub workflow: Option<String>,
    /// Only this phase
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// Only records this recent (a duration like 2h) or since this time (RFC 3339)
    #[arg(long, value_name = "DUR|TIME")]
    pub since: Option<String>,
    /// Only records older than this (a duration like 1d) or until this time (RFC 3339)
    #[arg(long, value_name = "DUR|TIME")]
    pub until: Option<String>,
    /// Only open records: none written as resolved, none closed by a later resolution
    #[arg(long)]
    pub unresolved: bool,
    /// At most this many records [default: all; 10 with --follow]
    #[arg(short = 'n', long, value_name = "N")]
    pub limit: Option<usize>,
    /// Then print new records as they are appended, until interrupted
    #[arg(short = 'f', long)]
    pub follow: bool,
}

/// Which records are listed.
struct Query {
    filter: Filter,
    kind: Option<String>,
    until: Option<DateTime<Utc>>,
    unresolved: bool,
}

impl Query {
    fn admits(&self, l: &LogLine, resolved: &HashSet<String>) -> bool {
        if l.is_resolution() || !self.filter.admits(l) {
            return false;
        }
        if self.kind.as_deref().is_some_and(|k| l.kind() != Some(k)) {
            return false;
        }
        if let Some(until) = self.until {
            let at = l
                .timestamp
                .as_deref()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok());
            if at.is_none_or(|t| t.with_timezone(&Utc) > until) {
                return false;
            }
        }
        if self.unresolved {
            let inline = l.resolution.as_ref().is_some_and(|r| r.successful());
            let later = l
                .error_id
                .as_deref()
                .is_some_and(|id| resolved.contains(id));
            if inline || later {
                return false;
            }
        }
        true
    }

    fn describe(&self, now: DateTime<Utc>) -> String {
        let f = &self.filter;
        let mut parts = Vec::new();
        for (name, v) in [
            ("agent", &f.agent),
            ("kind", &self.kind),
            ("session", &f.session),
            ("workflow", &f.workflow),
            ("phase", &f.phase),
        ] {
            if let Some(v) = v {
                parts.push(format!("{name} {v}"));
            }
        }
        if let Some(t) = f.since {
            parts.push(format!("since {}", crate::term::when(t, now)));
        }
        if let Some(t) = self.until {
            parts.push(format!("until {}", crate::term::when(t, now)));
        }
        if self.unresolved {
            parts.push("unresolved".into());
        }
        if parts.is_empty() {
            "all records".into()
        } else {
            parts.join(", ")
        }
    }
}

/// A listed record: its line as stored, and whether a later line resolved it.
struct Listed {
    raw: Vec<u8>,
    resolved: bool,
}

/// Runs `triage errors`.
pub fn run(args: &Args, cx: &Context) -> Result<Outcome, Failure> {
    let time = |flag: &str, v: &Option<String>| {
        v.as_deref().map(|t| time_flag(flag, t, cx.now)).transpose()
    };
    let query = Query {
        filter: Filter {
            session: args.session.clone(),
            workflow: args.workflow.clone(),
            agent: args.agent.clone(),
            phase: args.phase.clone(),
            since: time("--since", &args.since)?,
        },
        kind: args.kind.clone(),
        until: time("--until", &args.until)?,
        unresolved: args.unresolved,
    };
    let root = cx.state_root();
    let log = log_path(&root);
    let limit = args.limit.or(args.follow.then_some(10));
    let fleet = crate::store::fleet::select::configured(cx);
    let mut follower = if args.follow && !fleet {
        Some(error_log::follow_local(&root)?)
    } else {
        None
    };
    let (listed, in_log, position) = newest(
        cx,
        &root,
        &query,
        limit,
        follower.as_ref().map(|f| f.offset()),
    )?;
    if args.follow {
        if let error_log::Position::Fleet(after) = position {
            return follow_fleet(cx, &listed, &query, after);
        }
    }
    let term = crate::context::terminal();
    let Some(follower) = follower.as_mut() else {
        if cx.global.text {
            let text = table(&listed, &query, &root, &log, in_log, &term, cx);
            return Ok(Outcome::for_terminal(text, term.colour));
        }
        let mut out = Vec::new();
        for l in &listed {
            out.extend_from_slice(&l.raw);
            out.push(b'\n');
        }
        // Each record as stored: JSON, whose strings carry no raw control character.
        return Ok(Outcome {
            stdout: Some(String::from_utf8_lossy(&out).trim_end().to_string()),
            ..Outcome::default()
        });
    };
    // Following: the last records oldest first, then each new one as it comes.
    let mut out = std::io::stdout().lock();
    for l in listed.iter().rev() {
        if !emit(&mut out, &l.raw, cx.global.text, &term, cx.now) {
            return Ok(Outcome::nothing());
        }
    }
    let none = HashSet::new();
    loop {
        let mut open = true;
        follower.poll(|bytes| {
            if !open {
                return;
            }
            if LogLine::parse(bytes).is_some_and(|l| query.admits(&l, &none)) {
                open = emit(&mut out, bytes, cx.global.text, &term, chrono::Utc::now());
            }
        })?;
        if !open {
            // The reader went away (a closed pipe): done, like `tail -f | head`.
            return Ok(Outcome::nothing());
        }
        std::thread::sleep(FOLLOW_EVERY);
    }
}

/// `--follow` on a fleet's log: the last records oldest first, then each new one as any host
/// writes it (polled; a Redis that stops answering is asked again at the next poll).
fn follow_fleet(
    cx: &Context,
    listed: &[Listed],
    query: &Query,
    mut after: Option<String>,
) -> Result<Outcome, Failure> {
    let term = crate::context::terminal();
    let mut out = std::io::stdout().lock();
    for l in listed.iter().rev() {
        if !emit(&mut out, &l.raw, cx.global.text, &term, cx.now) {
            return Ok(Outcome::nothing());
        }
    }
    let none = HashSet::new();
    loop {
        let mut open = true;
        let polled = error_log::fleet_after(cx, after.as_deref(), |bytes| {
            if open && LogLine::parse(bytes).is_some_and(|l| query.admits(&l, &none)) {
                open = emit(&mut out, bytes, cx.global.text, &term, chrono::Utc::now());
            }
        });
        if let Some(Some(last)) = polled {
            after = Some(last);
        }
        if !open {
            return Ok(Outcome::nothing());
        }
        std::thread::sleep(FOLLOW_EVERY);
    }
}

/// Reads from the end: the records that match, newest first, at most `limit`; how many
/// records the log holds when none matched (to say so); where its newest line is.
fn newest(
    cx: &Context,
    root: &Path,
    query: &Query,
    limit: Option<usize>,
    end: Option<u64>,
) -> Result<(Vec<Listed>, u64, error_log::Position), Failure> {
    let mut resolved: HashSet<String> = HashSet::new();
    let mut listed = Vec::new();
    let mut in_log = 0u64;
    // A resolution line comes after its record, so reading backwards meets it first.
    let position = error_log::visit_rev(cx, root, end, |bytes| {
        let Some(l) = LogLine::parse(bytes) else {
            return true;
        };
        if let Some(id) = l.resolves.as_deref() {
            // A later resolution closes its record unless it says it did not work: a person's
            // decision (`--resolve --user-choice B`, `phase decide`) closes it as the
            // counters do, though it is no success.
            if !l.resolution.as_ref().is_some_and(|r| r.failed()) {
                resolved.insert(id.to_string());
            }
            return true;
        }
        in_log += 1;
        if limit.is_some_and(|n| listed.len() >= n) {
            // Enough listed; go on only to count, when nothing was listed.
            return listed.is_empty();
        }
        if query.admits(&l, &resolved) {
            let inline = l.resolution.as_ref().is_some_and(|r| r.successful());
            let later = l
                .error_id
                .as_deref()
                .is_some_and(|id| resolved.contains(id));
            listed.push(Listed {
                raw: bytes.to_vec(),
                resolved: inline || later,
            });
        }
        true
    })?;
    Ok((listed, in_log, position))
}

/// One record as one line of text, or as stored; false when stdout is closed.
fn emit(out: &mut impl Write, raw: &[u8], text: bool, term: &Term, now: DateTime<Utc>) -> bool {
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
    let shown = |s: Option<&str>, none: &str| crate::context::printable(s.unwrap_or(none));
    let at = shown(
        l.timestamp.as_deref().map(|t| when_text(t, now)).as_deref(),
        "-",
    );
    let id = shown(l.error_id.as_deref(), "-");
    let kind = shown(l.kind(), "unknown");
    let agent = shown(l.agent(), "-");
    let head = format!("{at}  {id}  {kind}  {agent}: ");
    let room = term.width.saturating_sub(head.chars().count()).max(10);
    let detail = crate::context::printable(&cut(l.detail().unwrap_or(""), room));
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
fn table(
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
                query.describe(cx.now),
                count(in_log, "record", "records")
            )
        };
        return term.wrap(&why);
    }
    let mut out = term.wrap(&format!(
        "{} in {} ({}), newest first",
        count(listed.len() as u64, "error record", "error records"),
        shown_path(log),
        query.describe(cx.now)
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
