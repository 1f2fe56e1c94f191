//! `triage report`: what the error log tells (seeds 000, 001, 002), streamed in constant
//! memory; `--template NAME` renders the seeds' escalation texts from it; `report prune` moves
//! old records to `logs/archive/` under the log's lock, losing nothing (seed 002's retention).

use crate::context::{Answer, Context};
use crate::core::duration::Dur;
use crate::core::error_record::LogLine;
use crate::core::summary::time_flag;
use crate::core::summary::{By, Filter};
use crate::core::templates::{self, Rec, TemplateInput, TemplateName};
use crate::exit::Failure;
use crate::report::admission;
use crate::report::text::{self, Hourly, Source};
use crate::store::breakers::calls::{self, Status};
use crate::store::error_log;
use crate::store::error_log::log_path;
use crate::store::files;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Arguments of `triage report`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage report --by agent --text\n  \
    triage report --session s1 --since 2h\n  \
    triage report --session s1 --template stability-warning\n  \
    triage report --workflow w1 --template pipeline-status --pipeline researcher,synthesizer,devils-advocate,fact-checker,editor\n  \
    triage report prune --older-than 30d\n\n\
    The JSON report lists at most 20 crossings of each threshold (highest counts first) in \
    `thresholds`; `thresholds_crossed` counts them all.")]
pub struct Args {
    /// Maintenance instead of a report
    #[command(subcommand)]
    pub action: Option<Action>,
    /// Only this session
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only this workflow
    #[arg(long, value_name = "ID")]
    pub workflow: Option<String>,
    /// Only this agent
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Only this phase
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// Only records this recent (a duration like 2h) or since this time (RFC 3339)
    #[arg(long, value_name = "DUR|TIME")]
    pub since: Option<String>,
    /// Only records this old or older (a duration like 1d) or until this time (RFC 3339)
    #[arg(long, value_name = "DUR|TIME")]
    pub until: Option<String>,
    /// Group by
    #[arg(long, value_enum, default_value_t = By::Agent)]
    pub by: By,
    /// Render an escalation message instead (JSON with the same fields unless --text)
    #[arg(long, value_enum, value_name = "NAME")]
    pub template: Option<TemplateName>,
    /// Templates: an agent (or item) that completed (repeatable)
    #[arg(long, value_name = "NAME")]
    pub completed: Vec<String>,
    /// Templates: the agents of a sequential pipeline, in order (comma-separated)
    #[arg(long, value_name = "A,B,..", value_delimiter = ',')]
    pub pipeline: Vec<String>,
    /// Templates: agent runs in the session, for the failure rate
    #[arg(long, value_name = "N")]
    pub runs: Option<u64>,
    /// Write a self-contained HTML dashboard to FILE instead (`-`, or no FILE: stdout)
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "template",
        num_args = 0..=1,
        default_missing_value = "-",
        require_equals = false
    )]
    pub html: Option<std::path::PathBuf>,
}

/// `triage report prune`.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Move records older than a duration to logs/archive/, under the log's lock
    Prune {
        /// Records older than this (e.g. 30d) are moved
        #[arg(long, value_name = "DUR")]
        older_than: Dur,
    },
}

/// Runs `triage report`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    if let Some(Action::Prune { older_than }) = &args.action {
        return prune(*older_than, cx);
    }
    let filter = Filter {
        session: args.session.clone(),
        workflow: args.workflow.clone(),
        agent: args.agent.clone(),
        phase: args.phase.clone(),
        since: args
            .since
            .as_deref()
            .map(|s| time_flag("--since", s, cx.now))
            .transpose()?,
        until: args
            .until
            .as_deref()
            .map(|s| time_flag("--until", s, cx.now))
            .transpose()?,
    };
    if let (Some(a), Some(b)) = (filter.since, filter.until) {
        if a > b {
            return Err(Failure::usage(
                "--since is later than --until: no record can be in between",
            ));
        }
    }
    // With a fleet store the log is the fleet's stream, named by its URL and namespace.
    let fleet_log = match cx.fleet_config() {
        Some(Ok(c)) => Some(PathBuf::from(format!(
            "{} namespace {}",
            c.target, c.namespace
        ))),
        _ => None,
    };
    let log = fleet_log
        .clone()
        .unwrap_or_else(|| log_path(&cx.state_root()));
    if let Some(name) = args.template {
        return template(name, args, filter, cx);
    }
    if let Some(target) = &args.html {
        return html(target, args, filter, &log, cx);
    }
    let mut hourly = Hourly::new(cx.now);
    let g = cx.ground();
    let policy = cx.policy()?;
    // The hourly timeline is the text view's: the JSON report does not parse every record's
    // time a second time for it.
    let text = cx.global.text;
    let summary = error_log::summarize(&g, filter.clone(), args.by, policy, |l, _, a| {
        if text {
            hourly.observe(l, a)
        }
    })?;
    let root = cx.state_root();
    let states = calls::peek_all_or_warn(&g, policy);
    let breakers: Vec<&Status> = not_closed(&states).collect();
    if cx.global.text {
        let source = Source {
            root: &root,
            log: &log,
            root_exists: root.is_dir(),
            log_exists: fleet_log.is_some() || error_log::local_exists(&root),
            records_in_log: hourly.records_in_log,
        };
        let term = crate::term::terminal();
        let mut text = text::render(
            &summary, &source, &filter, &hourly, &breakers, &term, cx.now,
        );
        text.push_str(&text::admission(&admission::read(&g, policy), &term));
        return Ok(Answer::for_terminal(text, term.colour));
    }
    let mut out = serde_json::to_value(&summary).unwrap_or_default();
    if let Some(o) = out.as_object_mut() {
        o.insert("log".into(), json!(log));
        o.insert("filter".into(), json!(filter));
        o.insert(
            "breakers_open".into(),
            json!(not_closed(&states).map(breaker_json).collect::<Vec<_>>()),
        );
        o.insert(
            "breakers".into(),
            json!(states.iter().map(breaker_json).collect::<Vec<_>>()),
        );
        let adm = admission::read(&g, policy);
        o.insert("permits".into(), admission::permits_json(&adm));
        o.insert("budgets".into(), admission::budgets_json(&adm));
    }
    Ok(Answer::json(&out))
}

/// The breakers that refuse calls or test them: open, half-open and forced open.
fn not_closed(states: &[Status]) -> impl Iterator<Item = &Status> {
    use crate::core::breaker::State;
    states
        .iter()
        .filter(|b| matches!(b.state, State::Open | State::HalfOpen | State::ForcedOpen))
}

/// A breaker in the report: its state, how often it opened (seed 000: "circuit breaker opens
/// twice" is a reason to abort), its failures, and when it lets a probe through.
fn breaker_json(b: &Status) -> Value {
    json!({
        "key": b.key, "state": b.state, "opened": b.totals.opened,
        "consecutive_failures": b.consecutive_failures, "half_open_in_s": b.half_open_in_s,
    })
}

/// `--html FILE|-`: the dashboard, from one pass over the log (the report's own), the breaker
/// events and the breakers' states, read without changing them.
fn html(
    target: &Path,
    args: &Args,
    filter: Filter,
    log: &Path,
    cx: &Context,
) -> Result<Answer, Failure> {
    use crate::report::dashboard::Dashboard;
    use crate::report::html::{self, BreakerNow, Breakers, Page};
    let policy = cx.policy()?;
    let end = filter.until.unwrap_or(cx.now).min(cx.now);
    let mut dash = Dashboard::new(policy).ending(end.timestamp());
    let g = cx.ground();
    let summary = error_log::summarize(&g, filter.clone(), args.by, policy, |l, raw, a| {
        if a {
            dash.observe(l, raw);
        }
    })?;
    let drawn = dash.finish();
    let root = cx.state_root();
    let mut breakers = Breakers::default();
    crate::store::breakers::events(&g, &root, |b| breakers.observe_event(b))?;
    breakers.now = crate::store::breakers::calls::peek_all(&g, policy)?
        .into_iter()
        .map(BreakerNow::from)
        .collect();
    let admission = admission::read(&g, policy);
    let page = html::render(&Page {
        summary: &summary,
        drawn: &drawn,
        breakers: &breakers,
        admission: &admission,
        log: &log.display().to_string(),
        filters: &text::filters_utc(&filter, cx.now),
        now: cx.now,
        range: (filter.since, filter.until),
        version: crate::version::LONG_VERSION,
    });
    if target == Path::new("-") {
        return Ok(Answer::text(page));
    }
    files::replace(target, page.as_bytes(), files::Backup::Skip)?;
    Ok(Answer::json(&json!({
        "html": target,
        "bytes": page.len(),
        "records": summary.records,
        "log": log,
        "filter": filter,
    })))
}

fn template(
    name: TemplateName,
    args: &Args,
    filter: Filter,
    cx: &Context,
) -> Result<Answer, Failure> {
    let mut recs: Vec<Rec> = Vec::new();
    let g = cx.ground();
    error_log::read_all_in(&g, &g.root, |bytes| match LogLine::parse(bytes) {
        Some(l) => {
            if filter.admits(&l) {
                recs.push(Rec::from_line(&l));
            }
            true
        }
        None => false,
    })?;
    let input = TemplateInput {
        records: recs,
        policy: cx.policy()?,
        now: cx.now,
        // In text, a control character of the root's path is shown, not sent; JSON escapes it.
        state_root: if cx.global.text {
            text::shown_path(&cx.state_root())
        } else {
            cx.state_root().display().to_string()
        },
        session: filter.session.clone(),
        workflow: filter.workflow.clone(),
        agent: filter.agent.clone(),
        phase: filter.phase.clone(),
        completed: args.completed.clone(),
        pipeline: args.pipeline.clone(),
        runs: args.runs,
        items: None,
        breakers: calls::peek_all_or_warn(&g, cx.policy()?)
            .iter()
            .map(Status::facts)
            .collect(),
    };
    let rendered = templates::build(name, &input).map_err(Failure::data)?;
    if cx.global.text {
        let mut text = rendered.text;
        // The seed's "Enter choice" line asks a person; only a terminal has one to ask.
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            if let Some(prompt) = templates::prompt(&rendered.fields) {
                text.push_str("\n\n");
                text.push_str(&prompt);
            }
        }
        return Ok(Answer::text(text));
    }
    Ok(Answer::json(&rendered.fields))
}

fn prune(older_than: Dur, cx: &Context) -> Result<Answer, Failure> {
    let root = cx.ensure_root()?;
    let cutoff = chrono::Duration::from_std(older_than.0)
        .ok()
        .and_then(|age| cx.now.checked_sub_signed(age))
        .ok_or_else(|| Failure::usage("--older-than: reaches before the earliest time"))?;
    let g = cx.ground();
    if crate::store::fleet::select::configured(&g) {
        cx.warn("the fleet's log is trimmed by [store] log_max_len, not pruned; pruning only what this host kept in its own files");
    }
    let moved = error_log::prune(&g, &root, cutoff)?;
    let out = json!({
        "moved": moved.moved,
        "kept": moved.kept,
        "archive": moved.archive,
        "cutoff": cutoff.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    });
    if cx.global.text {
        return Ok(Answer::text(format!(
            "moved {} older than {} to logs/archive/; {} kept",
            crate::core::text::count(moved.moved, "record"),
            older_than,
            moved.kept
        )));
    }
    Ok(Answer::json(&out))
}
