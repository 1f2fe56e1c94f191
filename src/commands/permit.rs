//! `triage permit`: a bulkhead shared by every process on the machine (or, with a fleet store,
//! every host): at most `[permits.KEY] max` leases of a key are held at once. A lease runs out
//! after the key's lease time unless renewed, so a holder that dies never keeps its slot.
//!
//! `acquire` exits 0 only with a lease: 75 (EX_TEMPFAIL: try again later) with its JSON line
//! and the reason on stderr when none is free after `--wait`, its lock was not obtained in
//! time, or a fleet's Redis did not answer; 74 when the state could not be read or written.
//! `--lease-only` prints just the lease, so `lease=$(triage permit acquire api --lease-only)
//! || exit 75` carries on only with one.

use crate::context::{Answer, Context};
use crate::core::admission::{check_key, rfc3339, secs, valid_lease_id, PermitLimits};
use crate::core::duration::Dur;
use crate::exit::{Failure, FailureClass};
use crate::store::permits::{self, Op, Outcome};
use serde_json::{json, Value};

/// None free after the wait (EX_TEMPFAIL: try again later).
pub const BUSY: u8 = 75;

/// Arguments of `triage permit`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    lease=$(triage permit acquire api --wait 30s --lease-only) || exit 75\n  \
    triage permit renew api \"$lease\"\n  \
    triage permit release api \"$lease\"\n  \
    triage permit status --text\n\n\
    The limits come from the policy: [permits.api] max = 8, lease = \"60s\" (globs too:\n\
    [permits.\"*\"]). A lease runs out after its lease time unless renewed, so a holder that\n\
    dies frees its slot. Exit status: 0 granted (or renewed, released); 75 no permit was\n\
    granted after --wait: none free (the JSON line says when the first lease runs out), the\n\
    lock not obtained in time, or the fleet's Redis not answering (the reason on stderr);\n\
    74 the state could not be read or written; with -e, 1 when a lease to renew or release\n\
    is not held. With --lease-only, acquire prints the lease alone, and nothing but the\n\
    reason (on stderr) when it exits non-zero.")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The permit actions.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Take a lease of KEY: prints {key, acquired, lease, expires, held, max}; exit 75 when
    /// none was granted after --wait
    Acquire {
        /// The permits' key (`[permits.KEY]` in the policy)
        key: String,
        /// Wait this long for a lease to free [default: 0, answer at once]
        #[arg(long, value_name = "DUR")]
        wait: Option<Dur>,
        /// Print only the lease id (nothing on stdout when none is granted)
        #[arg(long)]
        lease_only: bool,
    },
    /// Extend a lease by the key's lease time
    Renew {
        /// The permits' key
        key: String,
        /// The lease id `acquire` printed
        lease: String,
    },
    /// Give a lease back
    Release {
        /// The permits' key
        key: String,
        /// The lease id `acquire` printed
        lease: String,
    },
    /// Show the leases held, of every key or those named
    Status {
        /// Keys to show [default: every key the policy or the store knows]
        keys: Vec<String>,
    },
}

/// Runs `triage permit`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    let g = cx.ground();
    match &args.action {
        Action::Acquire {
            key,
            wait,
            lease_only,
        } => {
            let limits = limits(cx, key)?;
            let wait = wait.map_or(std::time::Duration::ZERO, |d| d.0);
            match permits::acquire(&g, key, limits, wait) {
                Ok((out, lease)) => Ok(acquired(
                    cx,
                    key,
                    limits,
                    &out,
                    lease.as_deref(),
                    *lease_only,
                )),
                Err(f) if f.class == FailureClass::Usage => Err(f),
                Err(f) => Ok(not_acquired(cx, key, limits, &f, *lease_only)),
            }
        }
        Action::Renew { key, lease } | Action::Release { key, lease } => {
            let limits = limits(cx, key)?;
            if !valid_lease_id(lease) {
                return Err(Failure::usage(format!(
                    "`{}` is not a lease id (1 to 128 letters, digits, `-`, `_` or `.`, as `permit acquire` prints it)",
                    crate::core::text::printable(lease)
                )));
            }
            let renew = matches!(args.action, Action::Renew { .. });
            let op = if renew {
                Op::Renew(lease.clone())
            } else {
                Op::Release(lease.clone())
            };
            let out = permits::call(&g, key, limits, &op)?;
            let verb = if renew { "renewed" } else { "released" };
            let mut v = json!({
                "key": key,
                "lease": lease,
                verb: out.done,
                "held": out.held,
                "max": limits.max,
                "backend": out.backend,
            });
            if let Some(e) = out.expires_ms {
                v["expires"] = json!(rfc3339(e));
                v["expires_in_s"] = json!(secs(e - out.now_ms));
            }
            if let Some(why) = &out.unavailable {
                let reason = format!(
                    "lease {lease} of `{key}` was not {verb}: {why}{}",
                    if renew {
                        ""
                    } else {
                        "; it frees itself when its lease runs out"
                    }
                );
                say!("triage permit: {}", crate::core::text::printable(&reason));
                v["reason"] = json!(reason);
                v["exit_status"] = json!(BUSY);
                let answer = if cx.global.text {
                    Answer::text(reason)
                } else {
                    Answer::json(&v)
                };
                return Ok(answer.exit(BUSY));
            }
            if !out.done {
                let reason = format!(
                    "lease {lease} of `{key}` is not held: it was released, ran out, or was never granted{}",
                    if renew { "; acquire a new one" } else { "" }
                );
                say!("triage permit: {}", crate::core::text::printable(&reason));
                v["reason"] = json!(reason);
            }
            let text = if out.done {
                format!("lease {lease} of `{key}` {verb}")
            } else {
                format!("lease {lease} of `{key}` is not held")
            };
            let answer = if cx.global.text {
                Answer::text(text)
            } else {
                Answer::json(&v)
            };
            Ok(answer.negative(!out.done))
        }
        Action::Status { keys } => status(cx, keys),
    }
}

/// The limits of `key`, or a usage error that says how to set them.
fn limits(cx: &Context, key: &str) -> Result<PermitLimits, Failure> {
    check_key(key).map_err(|why| Failure::usage(format!("bad key: {why}")))?;
    cx.policy()?.permits_for(key).ok_or_else(|| {
        Failure::usage(format!(
            "the policy sets no permits for `{}`: add `[permits.{}] max = 8` (or a glob such as `[permits.\"*\"]`) to {}",
            crate::core::text::printable(key),
            toml_key(key),
            cx.policy_path()
                .map_or(".triage.toml".to_string(), |p| p.display().to_string())
        ))
    })
}

/// `key` as a TOML key: bare when it can be.
fn toml_key(key: &str) -> String {
    if !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
    {
        key.to_string()
    } else {
        format!("{key:?}")
    }
}

fn acquired(
    cx: &Context,
    key: &str,
    limits: PermitLimits,
    out: &Outcome,
    lease: Option<&str>,
    lease_only: bool,
) -> Answer {
    if let (Some(lease), Some(e)) = (lease, out.expires_ms) {
        if lease_only {
            return Answer::text(lease);
        }
        let v = json!({
            "key": key,
            "acquired": true,
            "lease": lease,
            "expires": rfc3339(e),
            "expires_in_s": secs(e - out.now_ms),
            "held": out.held,
            "max": limits.max,
            "backend": out.backend,
        });
        return if cx.global.text {
            Answer::text(format!(
                "{lease}\t`{key}` until {} ({} of {} held)",
                rfc3339(e),
                out.held,
                limits.max
            ))
        } else {
            Answer::json(&v)
        };
    }
    if let Some(why) = &out.unavailable {
        let reason = format!("no permit of `{key}` was granted: {why}");
        return refused(cx, key, limits, "unavailable", &reason, BUSY, lease_only);
    }
    let retry = out.next_free_ms().map(|t| secs(t - out.now_ms));
    let reason = format!(
        "no permit of `{key}` is free: {} of {} held{}",
        out.held,
        limits.max,
        match retry {
            Some(s) => format!("; the first runs out in {s:.0}s unless renewed"),
            None => String::new(),
        }
    );
    say!("triage permit: {}", crate::core::text::printable(&reason));
    cx.trace("busy", &reason);
    let answer = if lease_only {
        Answer::default()
    } else if cx.global.text {
        Answer::text(reason.clone())
    } else {
        Answer::json(&json!({
            "key": key,
            "acquired": false,
            "refused": "busy",
            "held": out.held,
            "max": limits.max,
            "retry_after_s": retry,
            "reason": reason,
            "backend": out.backend,
            "exit_status": BUSY,
        }))
    };
    answer.exit(BUSY)
}

/// An acquire that could not be decided (its lock not obtained in time: 75; the state not
/// read or written: 74): never a grant, whatever `--strict` says.
fn not_acquired(
    cx: &Context,
    key: &str,
    limits: PermitLimits,
    f: &Failure,
    lease_only: bool,
) -> Answer {
    let (refused_as, status) = match f.class {
        FailureClass::Lock => ("lock", BUSY),
        _ => ("io", crate::exit::ExitStatus::IoErr as u8),
    };
    let reason = format!("no permit of `{key}` was granted: {f}");
    refused(cx, key, limits, refused_as, &reason, status, lease_only)
}

/// A refusal other than "none free": the reason on stderr, the JSON line, exit `status`.
fn refused(
    cx: &Context,
    key: &str,
    limits: PermitLimits,
    refused_as: &str,
    reason: &str,
    status: u8,
    lease_only: bool,
) -> Answer {
    say!("triage permit: {}", crate::core::text::printable(reason));
    cx.trace(refused_as, reason);
    let answer = if lease_only {
        Answer::default()
    } else if cx.global.text {
        Answer::text(reason)
    } else {
        Answer::json(&json!({
            "key": key,
            "acquired": false,
            "refused": refused_as,
            "max": limits.max,
            "reason": reason,
            "exit_status": status,
        }))
    };
    answer.exit(status)
}

fn status(cx: &Context, named: &[String]) -> Result<Answer, Failure> {
    let g = cx.ground();
    let policy = cx.policy()?;
    let keys: Vec<String> = if named.is_empty() {
        crate::core::admission::shown_keys(permits::keys(&g)?, policy.permits.keys())
    } else {
        for k in named {
            check_key(k).map_err(|why| Failure::usage(format!("bad key: {why}")))?;
        }
        named.to_vec()
    };
    let mut rows = Vec::new();
    for key in &keys {
        let limits = policy.permits_for(key);
        let judge = limits.unwrap_or(PermitLimits {
            max: 0,
            lease_ms: 60_000,
        });
        let out = permits::peek(&g, key, judge)?;
        rows.push(json!({
            "key": key,
            "max": limits.map(|l| l.max),
            "lease_s": limits.map(|l| secs(i64::try_from(l.lease_ms).unwrap_or(i64::MAX))),
            "held": out.held,
            "free": limits.map(|l| l.max.saturating_sub(out.held)),
            "leases": out.leases.iter().map(|l| json!({
                "lease": l.id,
                "expires": rfc3339(l.expires_ms),
                "expires_in_s": secs(l.expires_ms - out.now_ms),
                "holder": l.holder,
            })).collect::<Vec<Value>>(),
            "backend": out.backend,
        }));
    }
    if cx.global.text {
        return Ok(Answer::text(status_text(&rows)));
    }
    Ok(Answer::json(&json!({ "permits": rows })))
}

fn status_text(rows: &[Value]) -> String {
    if rows.is_empty() {
        return "no permits: the policy sets none ([permits.KEY] max = N) and none was taken"
            .into();
    }
    let width = rows
        .iter()
        .filter_map(|r| r["key"].as_str())
        .map(str::len)
        .max()
        .unwrap_or(3)
        .max(3);
    let mut out = format!("{:width$}  HELD  MAX  NEXT FREE\n", "KEY");
    for r in rows {
        let max = r["max"].as_u64().map_or("-".to_string(), |m| m.to_string());
        let next = r["leases"]
            .as_array()
            .and_then(|l| l.first())
            .and_then(|l| l["expires_in_s"].as_f64())
            .map_or("-".to_string(), |s| format!("in {s:.0}s"));
        out.push_str(&format!(
            "{:width$}  {:>4}  {:>3}  {next}\n",
            r["key"].as_str().unwrap_or_default(),
            r["held"],
            max
        ));
    }
    out
}
