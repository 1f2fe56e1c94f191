//! The attempt loop of `triage run` (and of each work item of `triage phase`): run a command
//! with the policy's timeout and retry schedule (seeds 000 and 001), stop it cleanly on Ctrl+C
//! keeping its partial output (seed 002 "Interrupt Handling"), and end like `timeout(1)`.
//!
//! Each attempt: the agent's breaker gate, the attempt, then for a failure the classifier's
//! verdict (which decides retry and delay), a record in the error log and the outcome on the
//! breaker — all through the domain modules the commands use too ([`effects`]).

mod admission;
mod effects;
mod report;

use crate::core::attempt_plan::{self, End, Next};
use crate::core::breaker::Outcome;
use crate::core::duration::Dur;
use crate::core::policy::Policy;
use crate::core::vocab::{Action, Kind};
use crate::exec::child::{self, Attempt, Interrupts, Spec};
use crate::exec::wiring::Wiring;
use crate::exit::Failure;
use crate::store::files::{self, Backup};
use crate::store::ground::Ground;
use crate::store::trace;
use effects::Gate;
use report::{finish, Report};
use serde_json::json;
use serde_json::Value;
use std::ffi::OsString;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What to run and how: `triage run`'s options, or a phase item's.
#[derive(Debug, Default)]
pub struct Request {
    /// The agent this command is (policy: timeout, side effects, retry; its breaker's key).
    pub agent: Option<String>,
    /// Stop an attempt after this long; 0 for none (default: the agent's, else the phase's).
    pub timeout: Option<Dur>,
    /// The whole run's time, attempts and waits together (Temporal's schedule-to-close): no
    /// attempt runs past it and no retry waits past it.
    pub deadline: Option<Dur>,
    /// Stop an attempt as hung when it writes nothing to stdout or stderr for this long.
    pub idle_timeout: Option<Dur>,
    /// Run this shell command instead when the breaker refuses (seed 002's
    /// `action_when_open`): the run is degraded, not failed fast.
    pub fallback: Option<String>,
    /// Retry a failure that can be retried at most N times.
    pub retries: Option<u32>,
    /// Run the command once, never again.
    pub no_retry: bool,
    /// The command has side effects: never run again automatically.
    pub side_effects: bool,
    /// Wait this long before every retry, instead of the policy's schedule.
    pub delay: Option<Dur>,
    /// No line per attempt on stderr.
    pub quiet: bool,
    /// SIGKILL this long after the timeout's SIGTERM.
    pub kill_after: Dur,
    /// After forwarding SIGINT/SIGTERM, SIGKILL this long after.
    pub grace: Dur,
    /// The phase (number or name) this runs in.
    pub phase: Option<String>,
    /// The session id, for the error log.
    pub session: Option<String>,
    /// The workflow id, for the error log.
    pub workflow: Option<String>,
    /// The task (work item) id, for the error log and the policy's breaker_key.
    pub task: Option<String>,
    /// The breaker's key (default: the agent's breaker_key template, else the agent).
    pub breaker: Option<String>,
    /// Keep failed and interrupted attempts' stdout here as NAME-ATTEMPT_partial.
    pub preserve_partial: Option<PathBuf>,
    /// The NAME of preserved files (default: the agent, else the command's file name).
    pub name: Option<String>,
    /// Check the final attempt's stdout with the agent's output rules.
    pub until_output_ok: bool,
    /// The command and its arguments.
    pub command: Vec<OsString>,
    /// Hold a permit of this key around the whole run (`[permits.KEY]`).
    pub permit: Option<String>,
    /// Wait this long for the permit (default: not at all).
    pub permit_wait: Option<Dur>,
    /// The retry budget asked before each retry and told of each attempt (`[budget.KEY]`).
    pub budget: Option<String>,
}

/// The agent's breaker is open: not run (EX_TEMPFAIL, "try again later").
const BREAKER_OPEN: u8 = 75;

/// `--until-output-ok` rejected the output.
const OUTPUT_REJECTED: u8 = 1;

/// The attempt loop under `policy`, wired by `wiring` (`triage phase` runs one per work item):
/// the exit status and the JSON report.
pub fn run(
    args: &Request,
    g: &Ground,
    policy: &Policy,
    wiring: &Wiring,
) -> Result<(u8, Value), Failure> {
    admission::with_permit(args, g, policy, wiring.interrupts, || {
        run_held(args, g, policy, wiring)
    })
}

/// The attempt loop proper, with the run's permit (if any) held.
fn run_held(
    args: &Request,
    g: &Ground,
    policy: &Policy,
    wiring: &Wiring,
) -> Result<(u8, Value), Failure> {
    // The classifier judges by the policy with the retry flags; the breaker, the log and the
    // output check by the policy itself.
    let flagged = &retry_flags(args, policy);
    let agent = args.agent.as_deref().map(|a| flagged.agent(a));
    let timeout = args
        .timeout
        .or_else(|| agent.as_ref().and_then(|a| a.timeout))
        .or_else(|| {
            let p = args.phase.as_deref()?;
            flagged.phase(p).and_then(|p| p.timeout)
        })
        .map(|d| d.0)
        // `--timeout 0` (or a 0 in the policy) is no timeout, as in timeout(1).
        .filter(|t| !t.is_zero());
    let side_effects = args.side_effects || agent.as_ref().is_some_and(|a| a.side_effects);
    let interrupts = wiring.interrupts;
    let name = args
        .name
        .clone()
        .or_else(|| args.agent.clone())
        .unwrap_or_else(|| {
            args.command
                .first()
                .and_then(|c| Path::new(c).file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "command".into())
        });

    let key = breaker_key(args, g, agent.as_ref());
    let key = key.as_deref();
    let session = args.session.as_deref();
    // Whose failures a success resolves: the work item's own breaker key, else the agent.
    let unit = key.unwrap_or(&name).to_string();
    let own_key = key.filter(|k| Some(*k) != args.agent.as_deref());
    // The generation of the breaker this run's own failure opened: its retries go ahead.
    let mut own_open: Option<u64> = None;
    let seed = wiring.seed;
    // Attempts and waits take time: the breaker and the log get the time of each event,
    // unless TRIAGE_NOW fixes it.
    let base = g;
    let mut report = Report::new(args, &name, timeout);
    let run_deadline = args
        .deadline
        .filter(|d| !d.0.is_zero())
        .map(|d| (d, std::time::Instant::now() + d.0));
    let idle_timeout = args.idle_timeout.map(|d| d.0).filter(|d| !d.is_zero());
    let mut attempt_no = 0u32;
    let mut delay_before = Duration::ZERO;
    // The attempt before this one, whose output and status stand if the breaker refuses the
    // next: 75 is kept for a command that was never run.
    let mut previous: Option<Attempt> = None;
    let (last, status) = loop {
        attempt_no += 1;
        let before = base.later();
        let g = before.as_ref().unwrap_or(base);
        let started = g.now;
        let ticket = match effects::gate(g, policy, key, session, own_open)? {
            Gate::Go(ticket) => ticket,
            Gate::Own(ticket) => {
                // A per-attempt line: --quiet drops it.
                if !args.quiet {
                    say!(
                        "triage run: breaker {} is open from this run's own failure; attempt {attempt_no} goes ahead (within one run the retry decision comes first)",
                        key.unwrap_or_default()
                    );
                }
                Some(ticket)
            }
            Gate::Refused { message, facts } => {
                report.breaker = Some(facts);
                if let Some(command) = &args.fallback {
                    if !args.quiet {
                        say!("{message}; running the fallback instead: {command}");
                    }
                    return fallback(g, &mut report, args, wiring, command, timeout);
                }
                let Some(last) = previous else {
                    say!("{message}");
                    report.outcome = "breaker_open";
                    return finish(g, &report, BREAKER_OPEN);
                };
                report.outcome = "breaker_opened";
                // The retry the earlier attempt planned will not happen: the breaker stopped it.
                if let Some(before) = report.action {
                    report.action = Some(stopped_action(
                        &Next::Stop(String::new()),
                        before,
                        side_effects,
                        false,
                    ));
                }
                trace::retry(g, &name, attempt_no - 1, None, || {
                    format!("not retried: {message}")
                });
                report.note = Some(format!(
                    "breaker {} opened after attempt {}, so it was not run again; the exit status is that attempt's",
                    key.unwrap_or_default(),
                    attempt_no - 1
                ));
                if !args.quiet {
                    say!("{message}");
                }
                pass_stdout(last.stdout, wiring.stdout)?;
                return finish(g, &report, last.end.exit_status());
            }
        };
        let spec = Spec {
            command: &args.command,
            stdin: wiring.stdin.clone(),
            timeout: match (wiring.clamp(timeout), run_deadline) {
                (t, None) => t,
                (t, Some((_, end))) => {
                    let left = end.saturating_duration_since(std::time::Instant::now());
                    Some(t.map_or(left, |t| t.min(left)))
                }
            },
            kill_after: args.kill_after.0,
            grace: args.grace.0,
            env: [("TRIAGE_RUN_ATTEMPT".to_string(), attempt_no.to_string())]
                .into_iter()
                .chain(wiring.env.iter().cloned())
                .collect(),
            cwd: wiring.cwd,
            stderr_to: wiring.stderr_to,
            on_spawn: wiring.on_spawn,
            // A caller that takes the final stdout (a phase) reads it whole: keep it in memory.
            in_memory: wiring.stdout.is_some(),
            orphan_grace: Some(flagged.run.orphan_grace.0),
            idle_timeout,
            // Under a permit, the command must not outlive its holder.
            guarded: args.permit.is_some(),
        };
        let attempt = child::run(&spec, interrupts)
            .map_err(|e| Failure::io(format!("cannot make a temp file for stdout: {e}")))?;
        let after = base.later();
        let g = after.as_ref().unwrap_or(base);
        let mut entry = json!({
            "attempt": attempt_no,
            "delay_before_ms": delay_before.as_millis() as u64,
            "elapsed_ms": attempt.elapsed.as_millis() as u64,
            "exit_status": attempt.end.exit_status(),
            "end": attempt.end.describe(),
            "kind": attempt.end.kind(),
        });
        if let Some(left) = &attempt.leftovers {
            entry["leftovers"] = json!(left.describe());
            if !args.quiet {
                say!("triage run: attempt {attempt_no}: {}", left.describe());
            }
        }
        let (error, rejected) = if !attempt.end.success() {
            let e = effects::classify_failure(
                g,
                flagged,
                key,
                attempt_no,
                &attempt,
                seed.wrapping_add(u64::from(attempt_no)),
            )?;
            (Some(e), false)
        } else if args.until_output_ok {
            let stdout = read_back(&attempt.stdout)?;
            let e = effects::check_stdout(g, policy, key, attempt_no, &stdout)?;
            let rejected = e.is_some();
            (e, rejected)
        } else {
            (None, false)
        };
        let Some(error) = error else {
            let b = effects::breaker_outcome(
                g,
                policy,
                key,
                session,
                Outcome::Success,
                ticket,
                None,
                attempt.elapsed,
            );
            entry["breaker"] = json!(b);
            // Only a run that says who it is: without --agent, --breaker or --name the unit
            // is the program's file name, which two different commands (`sh -c …`) share.
            let named = args.agent.is_some() || args.breaker.is_some() || args.name.is_some();
            let resolved = if named {
                effects::recovered(g, args, &unit, started)
            } else {
                Vec::new()
            };
            if !resolved.is_empty() {
                entry["resolved"] = json!(resolved);
            }
            admission::budget_after(args, g, policy, false, None);
            report.attempts.push(entry);
            break (attempt, None);
        };
        entry["kind"] = json!(error.kind);
        trace::classified(g, flagged, &name, &error);
        let interrupted = matches!(attempt.end, End::Interrupted(_));
        let mut next = if rejected {
            Next::Stop(
                "the output failed its check (validation_failed), which is never retried automatically"
                    .into(),
            )
        } else {
            attempt_plan::next(&attempt.end, &error, side_effects)
        };
        // Kept with --preserve-partial (an interrupted attempt always): a failed attempt's
        // output is partial, whether it is retried or not.
        let keep = if interrupted { Some(true) } else { Some(false) };
        let mut preserved = Vec::new();
        if let Some(always) = keep {
            if let Some(p) = preserve(args, g, policy, &name, attempt_no, &attempt, always)? {
                entry["partial"] = json!(p);
                report.preserved.push(p.clone());
                preserved.push(p);
            }
        }
        let (id, crossed) = effects::record_failure(
            g,
            policy,
            args,
            &error,
            effects::Failed {
                attempt: attempt_no,
                end: attempt.end.describe(),
                elapsed: attempt.elapsed,
                preserved,
                agent: args.agent.as_deref().unwrap_or(&name),
                breaker_key: own_key,
                stderr_tail: &attempt.stderr_tail,
            },
        );
        entry["error_id"] = json!(id);
        // Seed 001: more than 2 failing in the workflow: pause, and do not continue retrying.
        if let Some(why) = wiring.veto(&next, &crossed) {
            next = Next::Stop(why);
        }
        if let (Next::Retry(delay), Some((d, end))) = (&next, run_deadline) {
            if std::time::Instant::now() + *delay >= end {
                next = Next::Stop(format!(
                    "the run's deadline ({d}) ends before attempt {} could start",
                    attempt_no + 1
                ));
            }
        }
        if !interrupted {
            if let Some(why) = admission::budget_after(args, g, policy, true, Some(&next)) {
                next = Next::Stop(why);
            }
        }
        report.note_warnings(attempt_no, crossed);
        // An interrupt is the user's doing, not the agent's failure: neutral for the breaker.
        let outcome = if interrupted {
            Outcome::Ignored
        } else {
            Outcome::Failure
        };
        let b = effects::breaker_outcome(
            g,
            policy,
            key,
            session,
            outcome,
            ticket,
            Some(&error),
            attempt.elapsed,
        );
        // A breaker this failure opened stops the next run, not this one's retries.
        if let Some(b) = b.as_ref().filter(|b| b["transition"]["to"] == "open") {
            own_open = b["generation"].as_u64();
            // Seed 000's "circuit breaker opens twice": this failure opened it again.
            let opens = b["opens_unrecovered"].as_u64().unwrap_or(0);
            let key = b["key"].as_str().unwrap_or_default();
            if let Some(w) =
                crate::core::error_record::breaker_reopened(key, opens, &policy.thresholds)
            {
                report.note_warnings(attempt_no, vec![w]);
            }
        }
        entry["breaker"] = json!(b);
        trace::retry(
            g,
            &name,
            attempt_no,
            error.retry.as_ref().map(|r| r.max_attempts),
            || match &next {
                Next::Retry(delay) => format!("retry in {}", human(*delay)),
                Next::Stop(why) => format!("not retried: {why}"),
            },
        );
        report.action = Some(stopped_action(
            &next,
            error.action,
            side_effects,
            interrupted,
        ));
        match next {
            Next::Retry(delay) => {
                report.attempts.push(entry);
                if !args.quiet {
                    say!(
                        "triage run: attempt {attempt_no} {} ({}); retrying in {}",
                        attempt.end.describe(),
                        error.kind,
                        human(delay)
                    );
                }
                if let Some(told) = wiring.on_wait {
                    told(
                        delay,
                        attempt_no + 1,
                        error.retry.as_ref().map(|r| r.max_attempts),
                    );
                }
                if let Some(sig) = wait(interrupts, delay, args.quiet) {
                    report.interrupted_between(sig);
                    let e =
                        effects::interrupted_while_waiting(g, policy, key, attempt_no + 1, sig)?;
                    let (id, crossed) = effects::record_failure(
                        g,
                        policy,
                        args,
                        &e,
                        effects::Failed {
                            attempt: attempt_no + 1,
                            end: format!("interrupted (signal {sig}) while waiting to retry"),
                            elapsed: Duration::ZERO,
                            preserved: report.preserved.clone(),
                            agent: args.agent.as_deref().unwrap_or(&name),
                            breaker_key: own_key,
                            stderr_tail: &[],
                        },
                    );
                    report.note_warnings(attempt_no + 1, crossed);
                    if let Some(last) = report.attempts.last_mut() {
                        last["error_id"] = json!(id);
                    }
                    return finish(g, &report, 130);
                }
                delay_before = delay;
            }
            Next::Stop(why) => {
                entry["stopped"] = json!(why);
                report.attempts.push(entry);
                if !interrupted && !args.quiet {
                    say!(
                        "triage run: attempt {attempt_no} {} ({}); not retried: {why}",
                        if rejected {
                            "printed an output that failed its check".to_string()
                        } else {
                            attempt.end.describe()
                        },
                        error.kind
                    );
                }
                break (attempt, rejected.then_some(OUTPUT_REJECTED));
            }
        }
        previous = Some(attempt);
    };
    // With --preserve-partial a failed attempt's output went to its marked partial file only.
    if last.end.success() && status.is_none() || args.preserve_partial.is_none() {
        pass_stdout(last.stdout, wiring.stdout)?;
    }
    if last.end.success() && status.is_none() {
        report.action = None;
    }
    report.outcome = match status {
        Some(_) => "output_rejected",
        None => outcome_word(&last.end),
    };
    finish(g, &report, status.unwrap_or_else(|| last.end.exit_status()))
}

/// Runs `--fallback`'s command once, in place of the attempts the breaker refused: its stdout
/// is the run's, its status the run's, and the report says the run is degraded.
fn fallback(
    g: &Ground,
    report: &mut Report,
    args: &Request,
    wiring: &Wiring,
    command: &str,
    timeout: Option<Duration>,
) -> Result<(u8, Value), Failure> {
    let argv = [OsString::from("sh"), "-c".into(), command.into()];
    let spec = Spec {
        command: &argv,
        stdin: wiring.stdin.clone(),
        timeout: wiring.clamp(timeout),
        kill_after: args.kill_after.0,
        grace: args.grace.0,
        env: [("TRIAGE_RUN_FALLBACK".to_string(), "1".to_string())]
            .into_iter()
            .chain(wiring.env.iter().cloned())
            .collect(),
        cwd: wiring.cwd,
        stderr_to: wiring.stderr_to,
        on_spawn: wiring.on_spawn,
        in_memory: wiring.stdout.is_some(),
        orphan_grace: Some(Duration::from_millis(100)),
        idle_timeout: None,
        guarded: args.permit.is_some(),
    };
    let ran = child::run(&spec, wiring.interrupts)
        .map_err(|e| Failure::io(format!("cannot make a temp file for stdout: {e}")))?;
    report.fallback = Some(json!({
        "command": command,
        "exit_status": ran.end.exit_status(),
        "end": ran.end.describe(),
        "elapsed_ms": ran.elapsed.as_millis() as u64,
    }));
    report.outcome = if ran.end.success() {
        "fallback"
    } else {
        "fallback_failed"
    };
    g.trace(
        "info",
        &format!(
            "degraded: the breaker refused `{}`, so the fallback `{command}` ran ({})",
            report.head["name"].as_str().unwrap_or_default(),
            ran.end.describe()
        ),
    );
    if !ran.end.success() && !args.quiet {
        say!("triage run: the fallback {}", ran.end.describe());
    }
    pass_stdout(ran.stdout, wiring.stdout)?;
    finish(g, report, ran.end.exit_status())
}

/// The policy with `--retries`, `--no-retry` and `--delay` applied: the flags replace the
/// number of attempts and the waits for every kind, written per kind so that they also beat
/// a kind's or a rule's own cap (a plain non-zero exit, `tool_failure`, is otherwise retried
/// once whatever `--retries` says).
fn retry_flags(args: &Request, policy: &Policy) -> Policy {
    let mut p = policy.clone();
    let retries = if args.no_retry { Some(0) } else { args.retries };
    if let Some(n) = retries {
        p.retry.max_attempts = n.saturating_add(1);
    }
    if let Some(d) = args.delay {
        p.retry.schedule = vec![d];
        p.retry.backoff = None;
    }
    if retries.is_some() || args.delay.is_some() {
        for kind in Kind::ALL {
            let k = p.retry.kinds.entry(*kind).or_default();
            if let Some(n) = retries {
                k.max_attempts = Some(n.saturating_add(1));
            }
            if args.delay.is_some() {
                k.delay = args.delay;
            }
        }
    }
    p
}

/// The breaker of this run: `--breaker`, else the agent's `breaker_key` template, else the
/// agent; none without either flag. A template that cannot be filled in keys it by the agent,
/// with a warning.
fn breaker_key(
    args: &Request,
    g: &Ground,
    agent: Option<&crate::core::policy::AgentSettings>,
) -> Option<String> {
    if let Some(k) = &args.breaker {
        return Some(k.clone());
    }
    let name = args.agent.as_deref()?;
    let Some(template) = agent.and_then(|a| a.breaker_key.as_deref()) else {
        return Some(name.to_string());
    };
    let vars = crate::core::policy::KeyVars {
        agent: name,
        task_id: args.task.as_deref(),
        phase: args.phase.as_deref(),
        session: args.session.as_deref(),
        workflow: args.workflow.as_deref(),
    };
    match crate::core::policy::expand_key(template, &vars) {
        Ok(k) => Some(k),
        Err(why) => {
            g.warn(&format!(
                "breaker_key of agent `{name}`: {why}; using the breaker `{name}`"
            ));
            Some(name.to_string())
        }
    }
}

/// Keeps an attempt's stdout as `DIR/NAME-ATTEMPT_partial` (seed 001). An interrupted attempt
/// is kept even without `--preserve-partial`, under `<dir>/partial/`.
fn preserve(
    args: &Request,
    g: &Ground,
    policy: &Policy,
    name: &str,
    attempt_no: u32,
    attempt: &Attempt,
    always: bool,
) -> Result<Option<String>, Failure> {
    let dir = match (&args.preserve_partial, always) {
        (Some(d), _) => d.clone(),
        (None, true) => g.root.join("partial"),
        (None, false) => return Ok(None),
    };
    let bytes = read_back(&attempt.stdout)?;
    // Nothing printed, nothing to keep (or to list as an artifact).
    if bytes.is_empty() {
        return Ok(None);
    }
    files::ensure_dir(&dir)?;
    let path = dir.join(format!("{}-{attempt_no}_partial", files::escape_key(name)));
    let bytes = policy.redact.redactor().bytes(&bytes).into_owned();
    files::replace(&path, &bytes, Backup::Skip)?;
    Ok(Some(path.display().to_string()))
}

/// An attempt's stdout, read whole, the file rewound for whoever reads it next.
fn read_back(file: &std::fs::File) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    let mut out = file;
    out.read_to_end(&mut bytes)
        .map_err(|e| Failure::io(format!("cannot read the attempt's stdout back: {e}")))?;
    let mut rewound = file;
    std::io::Seek::rewind(&mut rewound)
        .map_err(|e| Failure::io(format!("cannot read the attempt's stdout back: {e}")))?;
    Ok(bytes)
}

/// Waits before a retry, with a countdown on stderr when a person is watching.
fn wait(interrupts: &Interrupts, delay: Duration, quiet: bool) -> Option<i32> {
    if quiet || !std::io::stderr().is_terminal() || delay < Duration::from_secs(2) {
        return interrupts.sleep(delay);
    }
    let mut left = delay;
    while !left.is_zero() {
        say_more!("\rtriage run: retrying in {:>4}s ", left.as_secs().max(1));
        let step = left.min(Duration::from_secs(1));
        if let Some(sig) = interrupts.sleep(step) {
            say!();
            return Some(sig);
        }
        left -= step;
    }
    say!();
    None
}

fn pass_stdout(mut file: std::fs::File, to: Option<&std::fs::File>) -> Result<(), Failure> {
    let mut out: Box<dyn std::io::Write> = match to {
        Some(f) => Box::new(f),
        None => Box::new(std::io::stdout().lock()),
    };
    match std::io::copy(&mut file, &mut out).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::io(format!(
            "cannot write the command's stdout: {e}"
        ))),
        _ => Ok(()),
    }
}

/// What the report advises: the verdict's action, unless that is a retry this run did not
/// make (the cascade rule, the phase's time budget, side effects): then a person decides.
fn stopped_action(next: &Next, action: Action, side_effects: bool, interrupted: bool) -> Action {
    match (next, action) {
        (Next::Stop(_), Action::Retry) if side_effects => Action::AskUser,
        (Next::Stop(_), Action::Retry) if !interrupted => Action::Escalate,
        _ => action,
    }
}

fn outcome_word(end: &End) -> &'static str {
    match end {
        End::Exited(0) => "succeeded",
        End::TimedOut { .. } => "timed_out",
        End::Idle { .. } => "idle",
        End::Interrupted(_) => "interrupted",
        End::CannotRun { .. } => "cannot_run",
        _ => "failed",
    }
}

fn human(d: Duration) -> String {
    Dur(d).approx().to_string()
}
