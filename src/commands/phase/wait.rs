//! `triage phase wait`: seed 002's "User Response Handling" — a stopped phase waits for a
//! person until its decision's deadline, then its default is taken ("Log 'User response
//! timeout'; take default action (if safe); continue workflow with note in state").
//!
//! The wait reads the manifest without its lock (a `phase decide` from another terminal must
//! get in); only at the deadline does it take the lock, read the manifest again, and apply
//! the default if the decision is still pending: two waits racing at the deadline apply it
//! once. The deadline is read against `TRIAGE_NOW` when set, so a wait whose deadline has
//! passed applies the default without sleeping.

use super::busy::{hold, Held};
use super::{settle, text, Which};
use crate::context::{Answer, Context};
use crate::core::phase::{self as model, Manifest};
use crate::exit::Failure;
use crate::store::manifests;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// `--timeout` ended first: the decision is still pending (EX_TEMPFAIL: try again later).
const STILL_PENDING: u8 = 75;

/// How often the manifest is read again while waiting.
const POLL: Duration = Duration::from_millis(100);

/// `triage phase wait`.
pub fn wait(a: &super::WaitArgs, cx: &Context) -> Result<Answer, Failure> {
    a.which.check()?;
    let path = a.which.manifest(cx);
    let (doc, status) = wait_for(cx, &a.which, &path, a.timeout.map(|t| t.0))?;
    Ok(render(cx, &doc).exit(status))
}

/// Waits for the decision of the phase at `path` (at most `timeout`), applying its default at
/// its deadline; the caller holds no lock. Answers what happened and the exit status (0
/// decided, 75 still pending).
pub fn wait_for(
    cx: &Context,
    w: &Which,
    path: &Path,
    timeout: Option<Duration>,
) -> Result<(Value, u8), Failure> {
    let started = Instant::now();
    let now = cx.ground().now;
    let m = read(cx, w, path, true)?;
    if !model::is_pending(m.decision.as_ref()) {
        return Ok((answered(w, &m, started), 0));
    }
    let d = m.decision.as_ref();
    let deadline = model::deadline(d);
    let default = default_of(&m);
    if deadline.is_none() {
        cx.warn("the pending decision has no readable deadline; no default is applied");
    }
    // How long until the default applies (never, without a deadline or a default).
    let until_default = match (deadline, &default) {
        (Some(t), Some(_)) => Some((t - now).to_std().unwrap_or(Duration::ZERO)),
        _ => None,
    };
    let limit = match (until_default, timeout) {
        (Some(l), Some(t)) => l.min(t),
        (l, t) => l.or(t).unwrap_or(Duration::MAX),
    };
    loop {
        let m = read(cx, w, path, false)?;
        if !model::is_pending(m.decision.as_ref()) {
            return Ok((answered(w, &m, started), 0));
        }
        let spent = started.elapsed();
        if spent >= limit {
            break;
        }
        std::thread::sleep(POLL.min(limit - spent));
    }
    let reached = until_default.is_some_and(|l| timeout.is_none_or(|t| t >= l));
    if !reached {
        let m = read(cx, w, path, false)?;
        let mut doc = json!({
            "workflow_id": w.workflow, "phase": w.phase, "pending": true,
            "waited_ms": ms(started.elapsed()),
            "deadline": m.decision.as_ref().map(|d| d["deadline"].clone()),
            "default": default.as_ref().map(|(l, a)| json!({"choice": l, "action": a})),
            "reason": "--timeout ended before the decision was taken; it is still pending",
        });
        doc["exit_status"] = STILL_PENDING.into();
        return Ok((doc, STILL_PENDING));
    }
    // The deadline: under the lock, the decision read again, the default applied once.
    let _lock = match hold(cx, path, w)? {
        Held::Lock(l) => l,
        Held::Busy(_) => {
            let doc = json!({
                "workflow_id": w.workflow, "phase": w.phase, "pending": true,
                "waited_ms": ms(started.elapsed()), "refused": "busy",
                "reason": "the deadline passed, but another process holds the phase; run `triage phase wait` again",
                "exit_status": STILL_PENDING,
            });
            return Ok((doc, STILL_PENDING));
        }
    };
    let mut m = read(cx, w, path, false)?;
    if !model::is_pending(m.decision.as_ref()) {
        return Ok((answered(w, &m, started), 0));
    }
    let Some((letter, action)) = default_of(&m) else {
        return Err(Failure::data(
            "the pending decision's default changed while waiting and is not an option",
        ));
    };
    cx.trace(
        "phase",
        "User response timeout: the default action is taken",
    );
    let mut doc = settle(cx, w, path, &mut m, (letter, action), model::BY_DEFAULT)?;
    doc["pending"] = false.into();
    doc["applied_default"] = true.into();
    doc["waited_ms"] = ms(started.elapsed()).into();
    doc["deadline"] = m
        .decision
        .as_ref()
        .map_or(Value::Null, |d| d["deadline"].clone());
    Ok((doc, 0))
}

/// The default of the pending decision, as an option `phase decide` takes (the manifest is
/// not trusted: a default that is no option of the phase is none).
fn default_of(m: &Manifest) -> Option<(&'static str, &'static str)> {
    let d = m.decision.as_ref()?;
    let template = d["template"].as_str();
    model::choice(d["default"]["action"].as_str()?, template)
}

fn read(cx: &Context, w: &Which, path: &Path, first: bool) -> Result<Manifest, Failure> {
    let warn = |s: &str| {
        if first {
            cx.warn(s);
        }
    };
    manifests::read(path, &warn)?
        .map(|(m, _)| m)
        .ok_or_else(|| {
            Failure::usage(format!(
                "no manifest for phase {} of workflow {} ({}); run the phase first",
                w.phase,
                w.workflow,
                path.display()
            ))
        })
}

/// Nothing (or nothing more) to wait for: what the manifest says of its decision.
fn answered(w: &Which, m: &Manifest, started: Instant) -> Value {
    let d = m.decision.clone().unwrap_or(Value::Null);
    let choice = &d["choice"];
    json!({
        "workflow_id": w.workflow, "phase": w.phase, "pending": false,
        "decision": d["decision"], "waited_ms": ms(started.elapsed()),
        "choice": choice["choice"], "action": choice["action"],
        "decided_by": choice["decided_by"], "decided_at": choice["at"],
        "applied_default": false,
    })
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn render(cx: &Context, doc: &Value) -> Answer {
    if cx.global.text {
        Answer::text(text::waited(doc))
    } else {
        Answer::json(doc)
    }
}
