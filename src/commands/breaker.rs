//! `triage breaker`: one circuit breaker per key, shared by every process on the machine (or,
//! with a fleet store, every host).
//!
//! The story of one call ([`crate::store::breakers::calls`], shared with the other commands):
//! resolve the key (with the session for `scope = "session"`), then
//! [`crate::store::breakers::update`] applies the pure state machine in [`crate::core::breaker`]
//! with the key's policy and `now` under the key's exclusion, storing the state and one event per
//! transition, so every transition happens exactly once whoever races. The exclusion is never held
//! while the guarded call runs: `check` hands out a ticket, `record` brings it back.

mod view;

use crate::context::{Answer, Context};
use crate::core::breaker::{self as machine, call_input};
use crate::core::vocab::Kind;
use crate::exit::{Failure, FailureClass};
use crate::store::breakers;
use crate::store::breakers::calls::{
    check_id, record_id, resolve, status_all, status_id, stored_ids,
};
use crate::store::breakers::manual::{existing, manual, no_breaker, Manual};
use serde_json::Value;

use crate::core::breaker::Outcome;

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
        duration: Option<crate::core::duration::Dur>,
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
        /// Every breaker with a state file; prints {"breakers": [{key, state, generation,
        /// changed, transition}, ...]} however many there are
        #[arg(long)]
        all: bool,
    },
    /// Force a breaker open, until reset or for a while (then it goes half-open)
    Trip {
        /// The breaker's key
        key: String,
        /// How long to keep it open
        #[arg(long = "for", value_name = "DUR")]
        for_: Option<crate::core::duration::Dur>,
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
        let payload = crate::core::hook_payload::Payload::redacted(
            cx.read_json()?.unwrap_or(Value::Null),
            cx.redactor(),
        );
        return Ok(Answer::hook(&crate::hook::breaker::answer(cx, &payload)?));
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
        Ok(v) => {
            let mut v = v.unwrap_or(Value::Null);
            cx.redactor().value(&mut v);
            v
        }
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
    let g = cx.ground();
    match action {
        Action::Check { key, .. } => {
            let key = key_of(key)?;
            let policy = cx.policy()?;
            let id = resolve(&g, policy, &key, session.as_deref(), false)?;
            let r = check_id(&g, policy, &id)?;
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
            let report =
                call_input::from_input(&input, *outcome, ticket, *kind, *duration, detail)?;
            let key = key_of(key)?;
            let policy = cx.policy()?;
            let id = resolve(&g, policy, &key, session.as_deref(), false)?;
            let r = record_id(&g, policy, &id, &report)?;
            if cx.global.text {
                return Ok(Answer::text(view::record_text(&r)));
            }
            Ok(Answer::json(&r))
        }
        Action::Status { keys } => {
            let list = if keys.is_empty() {
                status_all(&g, || cx.policy())?
            } else {
                let mut list = Vec::new();
                for k in keys {
                    let id = resolve(&g, cx.policy()?, k, session.as_deref(), false)?;
                    if breakers::exists(&g, &id) {
                        list.push(status_id(&g, cx.policy()?, &id)?);
                    } else {
                        cx.warn(&no_breaker(&g, &id, "nothing to show"));
                    }
                }
                list
            };
            // A key named that has no breaker is a negative verdict (a typo, most likely).
            let negative = list.len() < keys.len();
            if cx.global.text {
                let term = crate::term::terminal();
                let text = view::status_table(&list, &breakers::location(&g), &term, cx.now);
                return Ok(Answer::for_terminal(text, term.colour).negative(negative));
            }
            Ok(Answer::json(&serde_json::json!({ "breakers": list })).negative(negative))
        }
        Action::Reset { key, all } => {
            let ids = if *all {
                stored_ids(&g)?
            } else {
                let key = key_of(key)?;
                vec![existing(&g, cx.policy()?, &key, session.as_deref())?]
            };
            let mut done = Vec::new();
            for id in &ids {
                done.push(manual(&g, cx.policy()?, id, |b, now| {
                    Ok(machine::reset(b, now))
                })?);
            }
            Ok(manual_answer(cx, done, *all))
        }
        Action::Trip { key, for_ } => {
            let policy = cx.policy()?;
            let id = resolve(&g, policy, key, session.as_deref(), false)?;
            if !breakers::exists(&g, &id) {
                // Tripping a key before its first call is how an operator fences it off.
                say!(
                    "triage breaker: note: {}",
                    no_breaker(&g, &id, "tripping a new one")
                );
            }
            // Until when is counted from the store's `now` (a fleet's server clock), as every
            // time the machine compares it with.
            let for_ms = for_.map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            let r = manual(&g, policy, &id, |b, now| {
                Ok(machine::trip(b, for_ms.map(|d| now.saturating_add(d)), now))
            })?;
            Ok(manual_answer(cx, vec![r], false))
        }
        Action::Disable { key } => {
            let policy = cx.policy()?;
            let id = existing(&g, policy, key, session.as_deref())?;
            let r = manual(&g, policy, &id, |b, now| Ok(machine::disable(b, now)))?;
            Ok(manual_answer(cx, vec![r], false))
        }
        Action::HalfOpen { key } => {
            let policy = cx.policy()?;
            let id = existing(&g, policy, key, session.as_deref())?;
            let r = manual(&g, policy, &id, |b, now| {
                machine::half_open(b, now).map_err(|r| {
                    Failure::usage(format!(
                        "breaker `{}` is {}; only an open or forced-open breaker can go half-open (reset it to close it)",
                        b.key, r.from
                    ))
                })
            })?;
            Ok(manual_answer(cx, vec![r], false))
        }
    }
}

/// What an operator's change prints: the one breaker's object, or with `--all` always
/// `{"breakers": [...]}`, however many there were (none, one or more).
fn manual_answer(cx: &Context, done: Vec<Manual>, all: bool) -> Answer {
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
        Ok([one]) if !all => Answer::json(&one),
        Ok(one) => Answer::json(&serde_json::json!({ "breakers": one })),
        Err(many) => Answer::json(&serde_json::json!({ "breakers": many })),
    }
}
