//! `triage run [options] -- COMMAND [ARGS...]`: run a command with the policy's timeout and
//! retry schedule (seeds 000 and 001), stop it cleanly on Ctrl+C keeping its partial output
//! (seed 002 "Interrupt Handling"), and end like `timeout(1)`: the command's own status, 124
//! on timeout, 126/127 when it cannot run, 128+signal, 130 when interrupted, 125 when `triage
//! run` itself fails; 75 when the agent's breaker is open, 1 when `--until-output-ok` rejects
//! the output. A JSON report of the attempts is the last line of stderr (or `--report`).
//!
//! The attempt loop is [`crate::exec::attempts`]; this is its options, its stdin and its
//! report.

mod text;

use crate::context::{Answer, Context};
use crate::core::duration::Dur;
use crate::exec::attempts::{self, Request};
use crate::exec::child::Interrupts;
use crate::exec::wiring::Wiring;
use crate::exit::Failure;
use crate::store::files::{self, Backup};
use serde_json::Value;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

/// `triage run` itself failed (like `timeout(1)`'s 125).
const OWN_FAILURE: u8 = 125;

/// Arguments of `triage run`.
#[derive(clap::Args, Debug, Default)]
#[command(after_help = "Examples:\n  \
    triage run --timeout 5m -- ./fetch-papers.sh topic.txt\n  \
    triage run --agent researcher --preserve-partial scratchpad/researcher -- claude -p 'summarize'\n  \
    triage run --retries 5 --delay 2s --quiet -- curl -fsS https://example.org/\n  \
    triage run --deadline 10m --idle-timeout 2m -- ./long-agent.sh\n  \
    triage run --agent reviewer --fallback 'cat reviews/last-good.md' -- ./review.sh\n  \
    echo '{\"q\": 1}' | triage run --report run-report.json -- ./step.sh\n\n\
triage run's own options come before the command (or before --); everything after the command's\n\
name is the command's. An unknown option before it is a usage error, as in timeout(1).\n\n\
Before each attempt the --agent's breaker (or --breaker KEY's) is asked; when it is open the\n\
command is not run. A failure is classified (exit status, the last 8 KiB of stderr, timeout,\n\
interrupt), recorded in logs/errors.jsonl and on the breaker, and retried only when the\n\
classifier advises it (never for an agent with side_effects = true, nor a failed output\n\
check, nor once the cascade rule fires). Within one run the retry decision comes first: a\n\
breaker this run's own failures opened does not stop its retries (it stops the next run),\n\
and a retry that succeeds closes it. A success resolves the agent's open failures in the\n\
workflow (recovered_by_retry). The report's `warnings` lists the thresholds crossed.\n\n\
How long it can take: without a policy and without --retries, --no-retry or --delay, a\n\
failure that can be retried gets 3 attempts, 30s then 2m apart, so the worst case is 3 times\n\
the timeout plus 2m30s (plus --kill-after for each attempt that ignores SIGTERM):\n\
`triage run --timeout 1s -- sleep 5` gives up after about 2m33s. --no-retry runs it once.\n\n\
Exit status: the command's own (also when a breaker opened by someone else stopped the\n\
retries: the report says so); 1 --until-output-ok rejected the output; 75 the breaker is\n\
open and the command was never run (stderr says when to retry); 124 timed out (--timeout,\n\
--deadline or --idle-timeout); 125 triage run failed; 126 cannot execute; 127 not found;\n\
128+N killed by signal N; 130 interrupted (SIGINT or SIGTERM); 64 usage error.")]
pub struct Args {
    /// The agent this command is (policy: timeout, side effects, retry; its breaker's key)
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Stop an attempt after this long; 0 for none [default: the agent's, else the phase's
    /// timeout, else none]
    #[arg(long, value_name = "DUR")]
    pub timeout: Option<Dur>,
    /// The whole run's time limit, every attempt and every wait between them together: an
    /// attempt still running then is stopped as for --timeout, and no retry starts after it;
    /// 0 for none
    #[arg(long, value_name = "DUR")]
    pub deadline: Option<Dur>,
    /// Stop an attempt as hung when it writes nothing to stdout or stderr for this long
    /// (kind `unresponsive`, exit 124, not retried by default); 0 for none
    #[arg(long, value_name = "DUR")]
    pub idle_timeout: Option<Dur>,
    /// When the breaker refuses, run this shell command instead (once, `sh -c`, stdin replayed)
    /// and end with its status: the report's outcome is `fallback` and it says `degraded`
    /// (without it, a refused run exits 75 at once)
    #[arg(long, value_name = "COMMAND")]
    pub fallback: Option<String>,
    /// Retry a failure that can be retried at most N times (N + 1 attempts in all) [default:
    /// the policy's max_attempts - 1, else 2]
    #[arg(long, value_name = "N", conflicts_with = "no_retry")]
    pub retries: Option<u32>,
    /// Run the command once, never again (--retries 0)
    #[arg(long)]
    pub no_retry: bool,
    /// The command has side effects (sends, writes, deploys): never run again automatically,
    /// whatever the classifier or --retries advise; a failure asks the user, as for an agent
    /// with side_effects = true
    #[arg(long)]
    pub side_effects: bool,
    /// Wait this long before every retry, instead of the policy's schedule [default: 30s,
    /// then 2m]
    #[arg(long, value_name = "DUR")]
    pub delay: Option<Dur>,
    /// No line per attempt on stderr (the command's own stderr and the report still come)
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// SIGKILL this long after the timeout's SIGTERM
    #[arg(long, value_name = "DUR", default_value = "10s")]
    pub kill_after: Dur,
    /// After forwarding SIGINT/SIGTERM, SIGKILL this long after
    #[arg(long, value_name = "DUR", default_value = "30s")]
    pub grace: Dur,
    /// The phase (number or name) this runs in
    #[arg(long, value_name = "N")]
    pub phase: Option<String>,
    /// The session id, for the error log
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// The workflow id, for the error log
    #[arg(long, value_name = "ID")]
    pub workflow: Option<String>,
    /// The task (work item) id, for the error log and the policy's breaker_key
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// The breaker's key [default: the agent's breaker_key template, else the agent]
    #[arg(long, value_name = "KEY")]
    pub breaker: Option<String>,
    /// Keep failed and interrupted attempts' stdout here as NAME-ATTEMPT_partial
    #[arg(long, value_name = "DIR")]
    pub preserve_partial: Option<PathBuf>,
    /// The NAME of preserved files [default: the agent, else the command's file name]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Check the final attempt's stdout with the agent's output rules (check-output); a
    /// rejected output is a validation_failed failure, not retried, exit 1
    #[arg(long)]
    pub until_output_ok: bool,
    /// Write the JSON report here instead of as the last line of stderr (with --text, the
    /// report on stderr is for a person)
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Hold a permit of KEY (`[permits.KEY]`) around the whole run, renewed while it runs and
    /// released at the end; none free after --permit-wait: exit 75, the command not run
    #[arg(long, value_name = "KEY")]
    pub permit: Option<String>,
    /// How long to wait for the --permit [default: 0, answer at once]
    #[arg(long, value_name = "DUR", requires = "permit")]
    pub permit_wait: Option<Dur>,
    /// Ask this retry budget (`[budget.KEY]`) before each retry and tell it each attempt's
    /// outcome; a spent budget stops the retries (fail fast)
    #[arg(long, value_name = "KEY")]
    pub budget: Option<String>,
    /// The command and its arguments; everything from the command's name on is the command's
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// Runs `triage run`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    match run_attempts(args, cx) {
        Ok(status) => Ok(Answer::nothing().exit(status)),
        Err(f) if f.class == crate::exit::FailureClass::Usage => Err(f),
        Err(f) => {
            say!("triage run: {}", f.message);
            cx.trace(f.class_name(), &f.message);
            Ok(Answer::nothing().exit(OWN_FAILURE))
        }
    }
}

fn run_attempts(args: &Args, cx: &Context) -> Result<u8, Failure> {
    let stdin = read_stdin(cx)?.map(Arc::new);
    let interrupts = Interrupts::install()
        .map_err(|e| Failure::io(format!("cannot catch SIGINT/SIGTERM: {e}")))?;
    let wiring = Wiring::own(stdin, &interrupts, cx.jitter_seed());
    let (status, doc) = attempts::run(&request(args), &cx.ground(), cx.policy()?, &wiring)?;
    emit(args, cx, &doc)?;
    Ok(status)
}

/// The attempt loop's request: the options, less `--report` (where the report goes is this
/// command's business).
fn request(args: &Args) -> Request {
    Request {
        agent: args.agent.clone(),
        timeout: args.timeout,
        deadline: args.deadline,
        idle_timeout: args.idle_timeout,
        fallback: args.fallback.clone(),
        retries: args.retries,
        no_retry: args.no_retry,
        side_effects: args.side_effects,
        delay: args.delay,
        quiet: args.quiet,
        kill_after: args.kill_after,
        grace: args.grace,
        phase: args.phase.clone(),
        session: args.session.clone(),
        workflow: args.workflow.clone(),
        task: args.task.clone(),
        breaker: args.breaker.clone(),
        preserve_partial: args.preserve_partial.clone(),
        name: args.name.clone(),
        until_output_ok: args.until_output_ok,
        command: args.command.clone(),
        permit: args.permit.clone(),
        permit_wait: args.permit_wait,
        budget: args.budget.clone(),
    }
}

/// Stdin, read whole when it is not a terminal, to replay to every attempt; reading stops
/// at the limit (`yes | triage run ...` ends), and at the policy's `[stdin] timeout` when
/// the writer keeps the pipe open without ending it: then what arrived is replayed, with a
/// warning (an I/O failure under `--strict`).
fn read_stdin(cx: &Context) -> Result<Option<Vec<u8>>, Failure> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Ok(None);
    }
    match crate::stdin::read_bounded(cx.stdin_input(&stdin), cx.max_input) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(crate::stdin::InputError::TimedOut { got, .. }) => {
            cx.stdin_cut_short(&got)?;
            Ok(Some(got))
        }
        Err(crate::stdin::InputError::TooLarge { limit }) => Err(Failure::data(format!(
            "stdin is more than the {limit} bytes that can be replayed (TRIAGE_MAX_INPUT); raise it or send less"
        ))),
        Err(e) => Err(Failure::io(format!("cannot read stdin: {e}"))),
    }
}

/// Writes the report to `--report`, else as the last line of stderr.
fn emit(args: &Args, cx: &Context, doc: &Value) -> Result<(), Failure> {
    let line = doc.to_string();
    match &args.report {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                files::ensure_dir(dir)?;
            }
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            if let Err(e) = files::replace(path, &bytes, Backup::Skip) {
                cx.warn(&format!("cannot write the report: {e}"));
            }
        }
        None if !cx.global.text => say!("{line}"),
        None => {}
    }
    if cx.global.text {
        say!("{}", crate::core::text::printable(&text::report(doc)));
    }
    Ok(())
}
