//! `triage breaker`: one circuit breaker per key, shared by every process on the machine.
//!
//! The story of one call: resolve the key (with the session for `scope = "session"`), lock the
//! sidecar `<root>/breakers/<escaped key>.json.lock`, read the state (a corrupt or unreadable
//! file is moved aside and rebuilt), apply the pure state machine in [`crate::breaker`] with
//! the key's policy and `now`, replace the file atomically if anything changed, and append one
//! line per transition to `<root>/logs/breaker-events.jsonl` — all under the one lock, so every
//! transition happens exactly once whoever races. The lock is never held while the guarded
//! call runs: `check` hands out a ticket, `record` brings it back.

mod hook;
mod view;

pub use hook::hook;
pub use view::{template4_reason, Status};

use crate::breaker::{self as core, Breaker, CallReport, Millis, Transition};
use crate::context::{Context, Outcome as Answer};
use crate::exit::{Failure, FailureClass};
use crate::policy::{BreakerSettings, Scope};
use crate::store::{self, Backup};
use crate::vocab::Kind;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::breaker::Outcome;

/// Arguments of `triage breaker`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage breaker check researcher\n  \
    triage breaker record researcher --outcome failure --kind timeout\n  \
    triage breaker status --text\n  \
    triage breaker trip statistician-consultant --for 10m\n  \
    triage breaker reset --all\n\n\
    With -e, a refused check exits 1.")]
pub struct Args {
    /// Read a Claude Code hook payload on stdin: PreToolUse checks (and denies the call with
    /// the circuit-breaker message when open), PostToolUse and PostToolUseFailure record
    #[arg(long)]
    pub hook: bool,
    /// The session, for keys whose policy says scope = "session"
    #[arg(long, global = true, value_name = "ID")]
    pub session: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub action: Option<Action>,
}

/// The breaker actions.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// May a call go ahead? Prints {key, state, allowed, reason, retry_after_s, generation, ticket}
    Check {
        /// The breaker's key (an agent name, a tool name, any text) [or stdin's "key"]
        key: Option<String>,
        /// As `breaker --hook`: the hook payload's event says whether to check or record
        #[arg(long, conflicts_with = "key")]
        hook: bool,
    },
    /// Report a call's result
    Record {
        /// The breaker's key [or stdin's "key"]
        key: Option<String>,
        /// success, failure or ignored (neutral: gives back a probe permit) [or stdin's "outcome"]
        #[arg(long, value_name = "OUTCOME")]
        outcome: Option<Outcome>,
        /// The ticket `check` gave; a ticket from an older generation is stale
        #[arg(long, value_name = "T")]
        ticket: Option<String>,
        /// The kind of failure (timeout, rate_limited, ...: `triage help classify` lists them)
        #[arg(long, value_name = "KIND")]
        kind: Option<Kind>,
        /// How long the call took (a success slower than slow_call_threshold is a failure)
        #[arg(long, value_name = "DUR")]
        duration: Option<crate::duration::Dur>,
        /// The error text, shown as the last error
        #[arg(long, value_name = "TEXT")]
        detail: Option<String>,
        /// As `breaker --hook`: the hook payload's event says whether to check or record
        #[arg(long, conflicts_with_all = ["key", "outcome", "ticket", "kind", "duration", "detail"])]
        hook: bool,
    },
    /// Show every breaker, or those named
    Status {
        /// Keys to show [default: every breaker with a state file]
        keys: Vec<String>,
    },
    /// Close a breaker (or every breaker), clearing its counts
    Reset {
        /// The breaker's key
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        key: Option<String>,
        /// Every breaker with a state file
        #[arg(long)]
        all: bool,
    },
    /// Force a breaker open, until reset or for a while (then it goes half-open)
    Trip {
        /// The breaker's key
        key: String,
        /// How long to keep it open
        #[arg(long = "for", value_name = "DUR")]
        for_: Option<crate::duration::Dur>,
    },
    /// Always allow calls and count nothing, until reset
    Disable {
        /// The breaker's key
        key: String,
    },
    /// Let an open breaker probe now, without waiting for the cooldown
    HalfOpen {
        /// The breaker's key
        key: String,
    },
}

/// The answer to `check`.
#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
    /// The key (with its session prefix under `scope = "session"`).
    pub key: String,
    /// The state after the check; `null` when the breaker could not be read (fail open).
    pub state: Option<core::State>,
    /// Whether the call may go ahead.
    pub allowed: bool,
    /// `closed`, `open`, `forced_open`, `probe_granted`, `probes_exhausted`, `disabled`, or
    /// `unavailable` when the state could not be read or written (allowed, with a warning).
    pub reason: &'static str,
    /// When refused: seconds until it may be asked again.
    pub retry_after_s: Option<u64>,
    /// The generation; a ticket carries it.
    pub generation: u64,
    /// When allowed: hand it back to `record --ticket`.
    pub ticket: Option<String>,
    /// For Template 4: consecutive failures.
    #[serde(skip)]
    pub failures: u32,
    /// For Template 4: the last error as text.
    #[serde(skip)]
    pub last_error: Option<String>,
    /// For Template 4: seconds since the last success.
    #[serde(skip)]
    pub since_last_success_s: Option<u64>,
}

/// The answer to `record`.
#[derive(Clone, Debug, Serialize)]
pub struct RecordResult {
    /// The key.
    pub key: String,
    /// The state after the record.
    pub state: core::State,
    /// The generation after the record.
    pub generation: u64,
    /// The outcome as reported.
    pub outcome: Outcome,
    /// `counted`, `ignored`, `stale`, `late` or `disabled`.
    pub effect: core::Effect,
    /// `success` or `failure` as counted.
    pub counted_as: Option<Outcome>,
    /// A success slower than `slow_call_threshold`.
    pub slow_call: bool,
    /// Consecutive failures now.
    pub consecutive_failures: u32,
    /// The transition this result caused, if any.
    pub transition: Option<TransitionView>,
}

/// A transition as printed.
#[derive(Clone, Debug, Serialize)]
pub struct TransitionView {
    /// From.
    pub from: core::State,
    /// To.
    pub to: core::State,
    /// Why.
    pub reason: &'static str,
}

/// A breaker's key resolved: the key it is stored under and the one the policy knows.
struct Id {
    key: String,
    policy_key: String,
    session: Option<String>,
}

/// Runs `triage breaker`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    // The hook payload's event says whether to check or record, so `breaker check --hook`
    // and `breaker record --hook` are `breaker --hook`.
    let by_hook = args.hook
        || matches!(
            args.action,
            Some(Action::Check { hook: true, .. }) | Some(Action::Record { hook: true, .. })
        );
    if args.hook && args.action.is_some() {
        return Err(Failure::usage(
            "--hook reads the key and the event from the hook payload; give it alone, or as `breaker check --hook`",
        ));
    }
    if by_hook {
        let payload = crate::hook_io::Payload::new(cx.read_json()?.unwrap_or(Value::Null));
        return Ok(Answer::hook(&hook(cx, &payload)?));
    }
    let Some(action) = &args.action else {
        return Err(Failure::usage(
            "say what to do: check, record, status, reset, trip, disable or half-open (or --hook)",
        ));
    };
    // Stdin is read only when the arguments leave something to say, so `breaker check KEY`
    // works in a `while read` loop and never waits on an open pipe. Bad stdin must not stop
    // a check a hook depends on: the flags alone may still say enough.
    let needs_stdin = match action {
        Action::Check { key, .. } => key.is_none(),
        Action::Record { key, outcome, .. } => key.is_none() || outcome.is_none(),
        Action::Reset { key, all } => key.is_none() && !all,
        _ => false,
    };
    let read = if needs_stdin {
        cx.read_json()
    } else {
        Ok(None)
    };
    let input = match read {
        Ok(v) => v.unwrap_or(Value::Null),
        Err(f) if f.class == FailureClass::Data && !cx.global.strict => {
            cx.warn(&format!("ignoring stdin: {f}"));
            Value::Null
        }
        Err(f) => return Err(f),
    };
    let field = |name: &str| input.get(name).and_then(Value::as_str).map(str::to_string);
    let session = args.session.clone().or_else(|| field("session_id"));
    let key_of = |k: &Option<String>| {
        k.clone().or_else(|| field("key")).ok_or_else(|| {
            Failure::usage(
                "name the breaker: `triage breaker <action> KEY` (or send {\"key\": ...})",
            )
        })
    };
    match action {
        Action::Check { key, .. } => {
            let id = resolve(cx, &key_of(key)?, session.as_deref(), false)?;
            let r = check_id(cx, &id)?;
            let negative = !r.allowed;
            let out = if cx.global.text {
                Answer::text(view::check_text(&r))
            } else {
                Answer::json(&r)
            };
            Ok(out.negative(negative))
        }
        Action::Record {
            key,
            outcome,
            ticket,
            kind,
            duration,
            detail,
            ..
        } => {
            let report = report_from(&input, *outcome, ticket, *kind, *duration, detail)?;
            let id = resolve(cx, &key_of(key)?, session.as_deref(), false)?;
            let r = record_id(cx, &id, &report)?;
            if cx.global.text {
                return Ok(Answer::text(view::record_text(&r)));
            }
            Ok(Answer::json(&r))
        }
        Action::Status { keys } => {
            let list = if keys.is_empty() {
                status_all(cx)?
            } else {
                let mut list = Vec::new();
                for k in keys {
                    let id = resolve(cx, k, session.as_deref(), false)?;
                    if exists(cx, &id) {
                        list.push(status_id(cx, &id)?);
                    } else {
                        cx.warn(&no_breaker(cx, &id, "nothing to show"));
                    }
                }
                list
            };
            // A key named that has no breaker is a negative verdict (a typo, most likely).
            let negative = list.len() < keys.len();
            if cx.global.text {
                let root = cx.state_root();
                let term = crate::context::terminal();
                let dir = root.join("breakers");
                let text = view::status_table(&list, &dir, root.is_dir(), &term, cx.now);
                return Ok(Answer::for_terminal(text, term.colour).negative(negative));
            }
            Ok(Answer::json(&serde_json::json!({ "breakers": list })).negative(negative))
        }
        Action::Reset { key, all } => {
            let ids = if *all {
                stored_ids(cx)?
            } else {
                vec![existing(cx, &key_of(key)?, session.as_deref())?]
            };
            let mut done = Vec::new();
            for id in &ids {
                done.push(manual(cx, id, |b, now| Ok(core::reset(b, now)))?);
            }
            Ok(manual_answer(cx, done))
        }
        Action::Trip { key, for_ } => {
            let id = resolve(cx, key, session.as_deref(), false)?;
            if !exists(cx, &id) {
                // Tripping a key before its first call is how an operator fences it off.
                eprintln!(
                    "triage breaker: note: {}",
                    no_breaker(cx, &id, "tripping a new one")
                );
            }
            let now = millis(cx);
            let until =
                for_.map(|d| now.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)));
            let r = manual(cx, &id, |b, now| Ok(core::trip(b, until, now)))?;
            Ok(manual_answer(cx, vec![r]))
        }
        Action::Disable { key } => {
            let id = existing(cx, key, session.as_deref())?;
            let r = manual(cx, &id, |b, now| Ok(core::disable(b, now)))?;
            Ok(manual_answer(cx, vec![r]))
        }
        Action::HalfOpen { key } => {
            let id = existing(cx, key, session.as_deref())?;
            let r = manual(cx, &id, |b, now| {
                core::half_open(b, now).map_err(|r| {
                    Failure::usage(format!(
                        "breaker `{}` is {}; only an open or forced-open breaker can go half-open (reset it to close it)",
                        b.key, r.from
                    ))
                })
            })?;
            Ok(manual_answer(cx, vec![r]))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The in-process API (`triage hook`, `triage run`, `report`).

/// May a call to `key` go ahead? (global scope; see [`check_in`] for a session).
pub fn check(cx: &Context, key: &str) -> Result<CheckResult, Failure> {
    check_in(cx, key, None)
}

/// [`check`] within a session, for keys whose policy says `scope = "session"`.
pub fn check_in(cx: &Context, key: &str, session: Option<&str>) -> Result<CheckResult, Failure> {
    check_id(cx, &resolve(cx, key, session, true)?)
}

/// Reports a call's result (global scope; see [`record_in`]).
pub fn record(
    cx: &Context,
    key: &str,
    outcome: Outcome,
    ticket: Option<&str>,
    kind: Option<Kind>,
    duration: Option<Duration>,
) -> Result<RecordResult, Failure> {
    let report = CallReport {
        outcome: Some(outcome),
        ticket: ticket.map(str::to_string),
        kind,
        detail: None,
        duration_ms: duration.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    };
    record_in(cx, key, None, &report)
}

/// [`record`] within a session, with the error text as well.
pub fn record_in(
    cx: &Context,
    key: &str,
    session: Option<&str>,
    report: &CallReport,
) -> Result<RecordResult, Failure> {
    record_id(cx, &resolve(cx, key, session, true)?, report)
}

/// Every breaker with a state file, as it stands now (open ones first, then by key).
pub fn status_all(cx: &Context) -> Result<Vec<Status>, Failure> {
    let mut list = Vec::new();
    for id in stored_ids(cx)? {
        list.push(status_id(cx, &id)?);
    }
    list.sort_by(|a, b| {
        (a.state == core::State::Closed, &a.key).cmp(&(b.state == core::State::Closed, &b.key))
    });
    Ok(list)
}

/// Every breaker as stored, read without its lock and never written: for reports, which
/// must not change state (a transition that is due is shown, not recorded). Unreadable files
/// are left out.
pub fn peek_all(cx: &Context) -> Result<Vec<Status>, Failure> {
    let dir = cx.state_root().join("breakers");
    let policy = cx.policy()?;
    let mut list = Vec::new();
    for id in stored_ids(cx)? {
        let path = dir.join(format!("{}.json", store::escape_key(&id.key)));
        let Ok(Some(bytes)) = store::read_optional(&path) else {
            continue;
        };
        let Ok(mut b) = serde_json::from_slice::<Breaker>(&bytes) else {
            continue;
        };
        let (st, _) = core::status(&mut b, &policy.breaker_for(&id.policy_key), millis(cx));
        list.push(view::status(st));
    }
    Ok(list)
}

// ---------------------------------------------------------------------------------------------
// The glue.

fn check_id(cx: &Context, id: &Id) -> Result<CheckResult, Failure> {
    let result = with_breaker(cx, id, |b, s, now| {
        let (p, tr) = core::check(b, s, now);
        let failures = b.consecutive_failures;
        let last_error = b.last_error.as_ref().map(view::error_text);
        let since = b
            .last_success
            .map(|t| u64::try_from(now.saturating_sub(t)).unwrap_or(0) / 1000);
        let r = CheckResult {
            key: b.key.clone(),
            state: Some(b.state),
            allowed: p.allowed,
            reason: p.reason,
            retry_after_s: p.retry_after_s,
            generation: b.generation,
            ticket: p.ticket,
            failures,
            last_error,
            since_last_success_s: since,
        };
        Ok((r, tr))
    });
    match result {
        Ok(r) => Ok(r),
        // A broken breaker must never stop the agents: fail open (SPEC §2), unless --strict.
        Err(f) if f.class != FailureClass::Usage && !cx.global.strict => {
            cx.warn(&format!(
                "breaker `{}` unavailable, allowing the call: {f}",
                id.key
            ));
            Ok(CheckResult {
                key: id.key.clone(),
                state: None,
                allowed: true,
                reason: "unavailable",
                retry_after_s: None,
                generation: 0,
                ticket: None,
                failures: 0,
                last_error: None,
                since_last_success_s: None,
            })
        }
        Err(f) => Err(f),
    }
}

fn record_id(cx: &Context, id: &Id, report: &CallReport) -> Result<RecordResult, Failure> {
    with_breaker(cx, id, |b, s, now| {
        let (r, tr) = core::record(b, s, report, now).map_err(Failure::usage)?;
        let out = RecordResult {
            key: b.key.clone(),
            state: b.state,
            generation: b.generation,
            outcome: report.outcome.unwrap_or(Outcome::Failure),
            effect: r.effect,
            counted_as: r.counted_as,
            slow_call: r.slow_call,
            consecutive_failures: b.consecutive_failures,
            transition: tr.last().map(|t| TransitionView {
                from: tr.first().map_or(t.from, |f| f.from),
                to: t.to,
                reason: t.reason,
            }),
        };
        Ok((out, tr))
    })
}

fn status_id(cx: &Context, id: &Id) -> Result<Status, Failure> {
    with_breaker(cx, id, |b, s, now| {
        let (st, tr) = core::status(b, s, now);
        Ok((view::status(st), tr))
    })
}

/// What reset, trip, disable and half-open print.
#[derive(Serialize)]
struct Manual {
    key: String,
    state: core::State,
    generation: u64,
    changed: bool,
    transition: Option<TransitionView>,
}

fn manual(
    cx: &Context,
    id: &Id,
    f: impl FnOnce(&mut Breaker, Millis) -> Result<Vec<Transition>, Failure>,
) -> Result<Manual, Failure> {
    with_breaker(cx, id, |b, s, now| {
        // Lazy transitions first, so the event log shows open → half_open before a reset.
        let (_, mut tr) = core::status(b, s, now);
        let mine = f(b, now)?;
        let out = Manual {
            key: b.key.clone(),
            state: b.state,
            generation: b.generation,
            changed: !mine.is_empty(),
            transition: mine.first().map(|t| TransitionView {
                from: t.from,
                to: t.to,
                reason: t.reason,
            }),
        };
        tr.extend(mine);
        Ok((out, tr))
    })
}

fn manual_answer(cx: &Context, done: Vec<Manual>) -> Answer {
    if cx.global.text {
        let lines: Vec<String> = done
            .iter()
            .map(|m| {
                let how = if m.changed { "now" } else { "already" };
                format!("{}: {how} {}", m.key, m.state)
            })
            .collect();
        return Answer::text(lines.join("\n"));
    }
    match <[Manual; 1]>::try_from(done) {
        Ok([one]) => Answer::json(&one),
        Err(many) => Answer::json(&serde_json::json!({ "breakers": many })),
    }
}

/// Lock, load (rebuilding a corrupt state), apply, store if changed, log the transitions.
fn with_breaker<T>(
    cx: &Context,
    id: &Id,
    apply: impl FnOnce(&mut Breaker, &BreakerSettings, Millis) -> Result<(T, Vec<Transition>), Failure>,
) -> Result<T, Failure> {
    let dir = cx.ensure_root()?.join("breakers");
    store::ensure_dir(&dir)?;
    let path = dir.join(format!("{}.json", store::escape_key(&id.key)));
    let _lock = store::lock(&path, cx.lock_wait())?;
    let (mut b, rebuilt) = load(cx, &path, id)?;
    let before = b.clone();
    let settings = cx.policy()?.breaker_for(&id.policy_key);
    let now = millis(cx);
    let (out, transitions) = apply(&mut b, &settings, now)?;
    if rebuilt || b != before {
        let mut bytes = serde_json::to_vec(&b)
            .map_err(|e| Failure::data(format!("cannot serialize breaker `{}`: {e}", id.key)))?;
        bytes.push(b'\n');
        if !rebuilt && bookkeeping_only(&before, &b) {
            // Only the status counters moved (a success on a closed breaker with no window),
            // so no fsync: a power cut that loses this version restores the previous one, and
            // one that tears it has `load` set it aside and rebuild a closed breaker. Either
            // way every rule reads what it read before: closed, no failures counted, no
            // window; only `breaker status`'s totals and time of the last success lag.
            store::replace_unsynced(&path, &bytes, Backup::Skip)?;
        } else {
            store::replace(&path, &bytes, Backup::Skip)?;
        }
    }
    log_transitions(cx, &b, &transitions);
    Ok(out)
}

/// Whether `after` differs from `before` only in what no rule reads: the totals and the time
/// of the last success (`breaker status` shows them). A failure-rate window, an interval,
/// a consecutive count or a state that moved is not bookkeeping.
fn bookkeeping_only(before: &Breaker, after: &Breaker) -> bool {
    let mut same = after.clone();
    same.totals = before.totals;
    same.last_success = before.last_success;
    &same == before && after.state == core::State::Closed
}

/// The state in `path`; a missing file is a new breaker, a corrupt or unreadable one is moved
/// aside (never deleted) and rebuilt, with a warning.
fn load(cx: &Context, path: &Path, id: &Id) -> Result<(Breaker, bool), Failure> {
    let fresh = || Breaker {
        session: id.session.clone(),
        ..Breaker::new(&id.key)
    };
    let problem = match store::read_optional(path) {
        Ok(None) => return Ok((fresh(), false)),
        Ok(Some(bytes)) => match serde_json::from_slice::<Breaker>(&bytes) {
            Ok(b) if b.key == id.key => return Ok((b, false)),
            Ok(b) => format!("it holds key `{}`", b.key),
            Err(e) => e.to_string(),
        },
        // A link, a FIFO or a folder in its place is moved aside like a corrupt file (the
        // entry itself, never what a link points to).
        Err(e) => e.to_string(),
    };
    let moved = store::quarantine(path, &cx.stamp())?;
    cx.warn(&format!(
        "breaker `{}` state was unusable ({problem}); kept it as {} and started afresh (closed)",
        id.key,
        moved.display()
    ));
    Ok((fresh(), true))
}

/// One line per transition in `logs/breaker-events.jsonl`. The state file is the truth; a log
/// line that cannot be written is a warning, never a failure of the call.
fn log_transitions(cx: &Context, b: &Breaker, transitions: &[Transition]) {
    if transitions.is_empty() {
        return;
    }
    let logs = cx.state_root().join("logs");
    if let Err(e) = store::ensure_dir(&logs) {
        cx.warn(&format!("cannot log breaker transitions: {e}"));
        return;
    }
    let path = logs.join("breaker-events.jsonl");
    for t in transitions {
        let line = serde_json::json!({
            "key": b.key,
            "from": t.from,
            "to": t.to,
            "at": view::rfc3339(t.at),
            "reason": t.reason,
            "generation": t.generation,
            "pid": std::process::id(),
        });
        if let Err(e) = store::append_line(&path, line.to_string().as_bytes(), cx.lock_wait()) {
            cx.warn(&format!("cannot log breaker transition: {e}"));
        }
    }
}

/// The key as stored: with `scope = "session"`, prefixed by the session id. Without a session,
/// the command line is told to pass one; in-process callers (`lenient`) fall back to the
/// global key with a warning, since a hook must keep working.
fn resolve(cx: &Context, key: &str, session: Option<&str>, lenient: bool) -> Result<Id, Failure> {
    let scope = cx.policy()?.breaker_for(key).scope;
    let session = session.filter(|s| !s.is_empty());
    match (scope, session) {
        (Scope::Session, Some(s)) => Ok(Id {
            key: format!("{s}/{key}"),
            policy_key: key.to_string(),
            session: Some(s.to_string()),
        }),
        (Scope::Session, None) if !lenient => Err(Failure::usage(format!(
            "breaker `{key}` has scope = \"session\" in the policy; pass --session ID (or send {{\"session_id\": ...}})"
        ))),
        (scope, _) => {
            if scope == Scope::Session {
                cx.warn(&format!("breaker `{key}` has scope = \"session\" but no session id was given; using the global breaker"));
            }
            Ok(Id {
                key: key.to_string(),
                policy_key: key.to_string(),
                session: None,
            })
        }
    }
}

/// Every breaker with a state file, read from the files themselves (a shortened file name
/// cannot be unescaped; a file that cannot be read is named from its file name).
fn stored_ids(cx: &Context) -> Result<Vec<Id>, Failure> {
    let dir: PathBuf = cx.state_root().join("breakers");
    let mut ids = Vec::new();
    for entry in store::list_dir(&dir)? {
        let name = entry.name.to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".json").filter(|s| !s.starts_with('.')) else {
            continue;
        };
        let stored = store::read_optional(&dir.join(&entry.name))
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice::<Breaker>(&b).ok());
        let id = match stored {
            Some(b) => Id {
                policy_key: match &b.session {
                    Some(s) => b
                        .key
                        .strip_prefix(&format!("{s}/"))
                        .unwrap_or(&b.key)
                        .to_string(),
                    None => b.key.clone(),
                },
                key: b.key,
                session: b.session,
            },
            None => match store::unescape_key(stem) {
                Some(k) => Id {
                    policy_key: k.clone(),
                    key: k,
                    session: None,
                },
                None => continue,
            },
        };
        ids.push(id);
    }
    ids.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(ids)
}

/// Whether the breaker exists: its first check or record made its lock sidecar (a check of
/// a closed breaker writes no state file, yet its ticket must go stale on a reset).
fn exists(cx: &Context, id: &Id) -> bool {
    let path = cx
        .state_root()
        .join("breakers")
        .join(format!("{}.json", store::escape_key(&id.key)));
    path.symlink_metadata().is_ok()
        || store::with_suffix(&path, ".lock")
            .symlink_metadata()
            .is_ok()
}

/// The breaker `key` names, which must exist: an operator's typo (`reseacher`) must not make
/// a phantom breaker, nor report a reset that changed nothing.
fn existing(cx: &Context, key: &str, session: Option<&str>) -> Result<Id, Failure> {
    let id = resolve(cx, key, session, false)?;
    if exists(cx, &id) {
        return Ok(id);
    }
    Err(Failure::data(no_breaker(cx, &id, "nothing changed")))
}

/// "no breaker `KEY` (WHAT); did you mean `K`?", or the existing keys when none is close.
fn no_breaker(cx: &Context, id: &Id, what: &str) -> String {
    let keys: Vec<String> = stored_ids(cx)
        .unwrap_or_default()
        .into_iter()
        .map(|i| i.key)
        .collect();
    let hint = match crate::policy::closest(&id.key, &keys) {
        Some(k) => format!("; did you mean `{k}`?"),
        None if keys.is_empty() => "; there are no breakers yet".into(),
        None => {
            let shown: Vec<String> = keys.iter().take(8).map(|k| format!("`{k}`")).collect();
            let more = if keys.len() > 8 { ", …" } else { "" };
            format!("; the breakers are {}{more}", shown.join(", "))
        }
    };
    format!("no breaker `{}` ({what}){hint}", id.key)
}

/// A result from flags over stdin's fields.
fn report_from(
    input: &Value,
    outcome: Option<Outcome>,
    ticket: &Option<String>,
    kind: Option<Kind>,
    duration: Option<crate::duration::Dur>,
    detail: &Option<String>,
) -> Result<CallReport, Failure> {
    let text = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
    let parse = |k: &str, what: &str| -> Result<Option<String>, Failure> {
        Ok(text(k)).and_then(|v| match v {
            Some(s) if s.trim().is_empty() => {
                Err(Failure::data(format!("stdin's \"{k}\" is empty; {what}")))
            }
            v => Ok(v),
        })
    };
    let outcome = match outcome {
        Some(o) => o,
        None => match parse("outcome", "send success, failure or ignored")? {
            Some(s) => s
                .parse()
                .map_err(|e: String| Failure::data(format!("stdin's \"outcome\": {e}")))?,
            None => return Err(Failure::usage(
                "say what happened: --outcome success|failure|ignored (or send {\"outcome\": ...})",
            )),
        },
    };
    let kind = match kind {
        Some(k) => Some(k),
        None => match text("kind") {
            Some(k) => Some(
                k.parse()
                    .map_err(|e: String| Failure::data(format!("stdin's \"kind\": {e}")))?,
            ),
            None => None,
        },
    };
    let duration_ms = match duration {
        Some(d) => Some(d.as_millis()),
        None => match (
            text("duration"),
            input.get("duration_ms").and_then(Value::as_u64),
        ) {
            (Some(d), _) => Some(
                d.parse::<crate::duration::Dur>()
                    .map_err(|e| Failure::data(format!("stdin's \"duration\": {e}")))?
                    .as_millis(),
            ),
            (None, ms) => ms,
        },
    };
    Ok(CallReport {
        outcome: Some(outcome),
        ticket: ticket.clone().or_else(|| text("ticket")),
        kind,
        detail: detail
            .clone()
            .or_else(|| text("detail"))
            .or_else(|| text("error")),
        duration_ms,
    })
}

fn millis(cx: &Context) -> Millis {
    cx.now.timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn success(b: &mut Breaker, s: &BreakerSettings, now: Millis) {
        let report = CallReport {
            outcome: Some(core::Outcome::Success),
            ..CallReport::default()
        };
        let _ = core::record(b, s, &report, now);
    }

    #[test]
    fn only_a_success_that_moves_nothing_a_rule_reads_is_bookkeeping() {
        let plain = crate::policy::Policy::default().breaker_for("k");
        let closed = Breaker::new("k");
        let mut after = closed.clone();
        success(&mut after, &plain, 1_000);
        assert_ne!(after, closed);
        assert!(bookkeeping_only(&closed, &after));
        // A success after a failure resets the consecutive count: a rule reads it.
        let mut failed = closed.clone();
        failed.consecutive_failures = 1;
        let mut reset = failed.clone();
        success(&mut reset, &plain, 1_000);
        assert!(!bookkeeping_only(&failed, &reset));
        // A failure-rate window counts successes too.
        let windowed = BreakerSettings {
            failure_rate: Some(0.5),
            window_size: Some(10),
            ..plain.clone()
        };
        let mut counted = closed.clone();
        success(&mut counted, &windowed, 1_000);
        assert_eq!(counted.calls.len(), 1, "{counted:?}");
        assert!(!bookkeeping_only(&closed, &counted));
    }
}
