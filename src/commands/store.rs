//! `triage store`: where shared state is kept, for an operator. `status` says which backend is
//! in use and how it answers; `sync` pushes the records written locally while the fleet's
//! Redis was away; `migrate --to URL` copies the local breakers and error log into a Redis
//! (idempotent: run it again and nothing is copied twice).

use crate::context::{Answer, Context};
use crate::exit::Failure;
use crate::store::breakers;
use crate::store::error_log;
use crate::store::fleet::{Config, Remote, Target};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Arguments of `triage store`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage store status --text\n  \
    TRIAGE_STORE=redis://cache.internal:6379/0 triage store sync\n  \
    triage store migrate --to redis://cache.internal:6379/0\n\n\
    The store is the local files unless TRIAGE_STORE or the policy's [store] url names a Redis.")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The store actions.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Which backend is in use, its latency, namespace and what it holds
    Status,
    /// Push the records written locally while the fleet's Redis was away
    Sync,
    /// Copy the local breakers and error log into a Redis (run again, it copies nothing twice)
    Migrate {
        /// The Redis to copy into [default: TRIAGE_STORE or the policy's [store] url]
        #[arg(long, value_name = "URL")]
        to: Option<String>,
    },
}

/// Operator commands wait longer than hooks for an answer.
const OPERATOR_TIMEOUT: Duration = Duration::from_secs(2);

/// What `status` prints.
#[derive(Serialize)]
struct Status {
    backend: &'static str,
    /// The Redis, without its password.
    url: Option<String>,
    namespace: Option<String>,
    reachable: Option<bool>,
    /// The median of a few PINGs, in milliseconds.
    latency_ms: Option<f64>,
    /// The server's clock minus this host's, in milliseconds.
    clock_offset_ms: Option<i64>,
    error: Option<String>,
    breakers: u64,
    records: u64,
    breaker_events: u64,
    /// Records written locally during an outage, waiting for `store sync`.
    waiting: u64,
    state_root: String,
}

/// Runs `triage store`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    match &args.action {
        Action::Status => status(cx),
        Action::Sync => sync(cx),
        Action::Migrate { to } => migrate(cx, to.as_deref()),
    }
}

fn config(cx: &Context, url: Option<&str>) -> Result<Config, Failure> {
    let mut config = match (url, cx.fleet_config()) {
        (None, None) => {
            return Err(Failure::usage(
                "no fleet store is configured: set TRIAGE_STORE=redis://host:6379/0 or [store] url in the policy",
            ))
        }
        (None, Some(c)) => c.map_err(Failure::usage)?,
        (Some(u), c) => {
            let target = Target::parse(u, cx.redis_password.as_deref().filter(|p| !p.is_empty()))
                .map_err(Failure::usage)?;
            let base = match c {
                Some(Ok(c)) => c,
                _ => default_config(cx, target.clone()),
            };
            Config { target, ..base }
        }
    };
    config.connect_timeout = config.connect_timeout.max(OPERATOR_TIMEOUT);
    config.command_timeout = config.command_timeout.max(OPERATOR_TIMEOUT);
    Ok(config)
}

fn default_config(cx: &Context, target: Target) -> Config {
    let store = cx.policy().map(|p| p.store.clone()).unwrap_or_default();
    Config {
        target,
        namespace: store
            .namespace
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| cx.project_name()),
        connect_timeout: store.connect_timeout.0,
        command_timeout: store.command_timeout.0,
        log_max_len: store.log_max_len,
    }
}

fn connect(config: &Config) -> Result<Remote, Failure> {
    Remote::connect(config).map_err(|e| Failure::io(e.to_string()))
}

fn remote_failure(e: crate::store::fleet::RemoteError) -> Failure {
    Failure::io(e.to_string())
}

fn status(cx: &Context) -> Result<Answer, Failure> {
    let root = cx.state_root();
    let waiting = error_log::waiting(&root).map_or(0, |w| w.len() as u64);
    let mut st = Status {
        backend: "files",
        url: None,
        namespace: None,
        reachable: None,
        latency_ms: None,
        clock_offset_ms: None,
        error: None,
        breakers: 0,
        records: 0,
        breaker_events: 0,
        waiting,
        state_root: root.display().to_string(),
    };
    let fleet = match cx.fleet_config() {
        None => None,
        Some(c) => Some(c.map_err(Failure::usage)?),
    };
    match fleet {
        None => {
            st.breakers = breakers::stored_ids(&cx.ground())?.len() as u64;
            let mut n = 0u64;
            error_log::read_all(&root, |_| {
                n += 1;
                true
            })?;
            st.records = n;
            st.breaker_events = breakers::file_events(&root);
        }
        Some(mut c) => {
            c.connect_timeout = c.connect_timeout.max(OPERATOR_TIMEOUT);
            c.command_timeout = c.command_timeout.max(OPERATOR_TIMEOUT);
            st.backend = "redis";
            st.url = Some(c.target.to_string());
            st.namespace = Some(c.namespace.clone());
            match crate::store::fleet::probe(&c) {
                Ok((latency, offset, counts)) => {
                    st.reachable = Some(true);
                    st.latency_ms = Some(latency);
                    st.clock_offset_ms = Some(offset);
                    st.breakers = counts.breakers;
                    st.records = counts.records;
                    st.breaker_events = counts.events;
                }
                Err(e) => {
                    st.reachable = Some(false);
                    st.error = Some(e.to_string());
                    cx.warn(&format!("{e}; calls use the local files until it answers"));
                }
            }
        }
    }
    let negative = st.reachable == Some(false);
    if cx.global.text {
        return Ok(Answer::text(status_text(&st)).negative(negative));
    }
    Ok(Answer::json(&st).negative(negative))
}

fn status_text(st: &Status) -> String {
    let mut out = match (st.backend, &st.url) {
        ("redis", Some(url)) => format!(
            "store: redis {url}, namespace {}\n",
            st.namespace.as_deref().unwrap_or("")
        ),
        _ => format!("store: local files under {}\n", st.state_root),
    };
    match (st.reachable, &st.error) {
        (Some(false), Some(e)) => out.push_str(&format!("unreachable: {e}\n")),
        (Some(true), _) => out.push_str(&format!(
            "latency {:.2} ms, server clock {:+} ms from this host's\n",
            st.latency_ms.unwrap_or(0.0),
            st.clock_offset_ms.unwrap_or(0)
        )),
        _ => {}
    }
    if st.reachable != Some(false) {
        out.push_str(&format!(
            "{}, {}, {}\n",
            crate::core::text::count(st.breakers, "breaker"),
            crate::core::text::count(st.records, "log line"),
            crate::core::text::count(st.breaker_events, "breaker event")
        ));
    }
    if st.waiting > 0 || st.backend == "redis" {
        out.push_str(&format!(
            "{} records written locally wait for `triage store sync`",
            st.waiting
        ));
    }
    out
}

fn sync(cx: &Context) -> Result<Answer, Failure> {
    let c = config(cx, None)?;
    let root = cx.state_root();
    let mut r = connect(&c)?;
    let done = error_log::sync(&cx.ground(), &root, &mut r, usize::MAX).map_err(remote_failure)?;
    // The retry budgets' records taken locally during an outage, likewise.
    let budgets = crate::store::budget::sync(&cx.ground(), &root, &mut r, usize::MAX)
        .map_err(remote_failure)?;
    if cx.global.text {
        return Ok(Answer::text(format!(
            "pushed {} records to {} ({} were there already); {} waiting; {} retry budget records pushed, {} waiting",
            done.pushed, c.target, done.already, done.waiting, budgets.pushed, budgets.waiting
        )));
    }
    let mut v = serde_json::to_value(done).unwrap_or_default();
    v["budget_records"] = serde_json::to_value(budgets).unwrap_or_default();
    Ok(Answer::json(&v))
}

/// What `migrate` did.
#[derive(Serialize, Default)]
struct Migrated {
    to: String,
    namespace: String,
    breakers_copied: u64,
    breakers_kept: u64,
    records_copied: u64,
    records_already: u64,
    unreadable: u64,
    seconds: f64,
}

fn migrate(cx: &Context, to: Option<&str>) -> Result<Answer, Failure> {
    let start = Instant::now();
    let c = config(cx, to)?;
    let root = cx.state_root();
    let mut r = connect(&c)?;
    let mut done = Migrated {
        to: c.target.to_string(),
        namespace: c.namespace.clone(),
        ..Migrated::default()
    };
    // Breakers: each copied as it is unless the fleet has that key already (the fleet's is
    // newer: hosts have been using it). Then the log, keyed by content: nothing twice.
    let b = breakers::migrate(&cx.ground(), &root, &mut r)?.map_err(remote_failure)?;
    let l = error_log::migrate(&root, &mut r)?.map_err(remote_failure)?;
    done.breakers_copied = b.copied;
    done.breakers_kept = b.kept;
    done.records_copied = l.copied;
    done.records_already = l.already;
    done.unreadable = b.unreadable + l.unreadable;
    done.seconds = start.elapsed().as_secs_f64();
    if cx.global.text {
        return Ok(Answer::text(format!(
            "copied {} breakers ({} kept as the fleet has them) and {} log lines ({} there already) to {}, namespace {}",
            done.breakers_copied,
            done.breakers_kept,
            done.records_copied,
            done.records_already,
            done.to,
            done.namespace
        )));
    }
    Ok(Answer::json(&done))
}
