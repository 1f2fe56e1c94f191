//! `triage errors`: the error records with their ids, newest first — the way to find the id
//! that `record-error --resolve` needs. Filters by agent, kind, session, workflow, phase, time
//! and resolution; prints JSON lines (each record as stored) or, with `--text`, a table that
//! fits the terminal. `--follow` then prints new records as they are appended, like
//! `tail -f`, and goes on across a `report prune`.

use crate::context::{Answer, Context};
use crate::core::error_record::LogLine;
use crate::core::summary::{time_flag, Filter, Query};
use crate::exit::Failure;
use crate::report::listing::{emit, table};
use crate::store::error_log::{self, log_path, newest, Listed};
use std::collections::HashSet;
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

/// Runs `triage errors`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
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
            until: None,
        },
        kind: args.kind.clone(),
        until: time("--until", &args.until)?,
        unresolved: args.unresolved,
    };
    let root = cx.state_root();
    let log = log_path(&root);
    let limit = args.limit.or(args.follow.then_some(10));
    let g = cx.ground();
    let fleet = crate::store::fleet::select::configured(&g);
    let mut follower = if args.follow && !fleet {
        Some(error_log::follow_local(&root)?)
    } else {
        None
    };
    let (listed, in_log, position) = newest(
        &g,
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
    let term = crate::term::terminal();
    let Some(follower) = follower.as_mut() else {
        if cx.global.text {
            let text = table(&listed, &query, &root, &log, in_log, &term, cx);
            return Ok(Answer::for_terminal(text, term.colour));
        }
        let mut out = Vec::new();
        for l in &listed {
            out.extend_from_slice(&l.raw);
            out.push(b'\n');
        }
        // Each record as stored: JSON, whose strings carry no raw control character.
        return Ok(Answer {
            stdout: Some(String::from_utf8_lossy(&out).trim_end().to_string()),
            ..Answer::default()
        });
    };
    // Following: the last records oldest first, then each new one as it comes.
    let mut out = std::io::stdout().lock();
    for l in listed.iter().rev() {
        if !emit(&mut out, &l.raw, cx.global.text, &term, cx.now) {
            return Ok(Answer::nothing());
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
            return Ok(Answer::nothing());
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
) -> Result<Answer, Failure> {
    let term = crate::term::terminal();
    let mut out = std::io::stdout().lock();
    for l in listed.iter().rev() {
        if !emit(&mut out, &l.raw, cx.global.text, &term, cx.now) {
            return Ok(Answer::nothing());
        }
    }
    let none = HashSet::new();
    let g = cx.ground();
    loop {
        let mut open = true;
        let polled = error_log::fleet_after(&g, after.as_deref(), |bytes| {
            if open && LogLine::parse(bytes).is_some_and(|l| query.admits(&l, &none)) {
                open = emit(&mut out, bytes, cx.global.text, &term, chrono::Utc::now());
            }
        });
        if let Some(Some(last)) = polled {
            after = Some(last);
        }
        if !open {
            return Ok(Answer::nothing());
        }
        std::thread::sleep(FOLLOW_EVERY);
    }
}
