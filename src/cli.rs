//! The command line: clap definitions, multi-call dispatch on the program's name, and the one
//! place where a command's result becomes an exit status (SPEC §2).

use crate::commands;
use crate::context::{self, Context, GlobalArgs, Outcome};
use crate::exit::{ExitStatus, Failure};
use clap::{CommandFactory, Parser, Subcommand};
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

const EXAMPLES: &str = "\
Examples:
  echo '{\"stage\": 2}' | triage state-write run/state.json --require stage
  triage state-read run/state.json
  triage state-write run/state.json --update '.stage += 1'
  triage config show

Exit status: 0 done (or best effort: could not be done, warning on stderr); 1 negative verdict
with -e; 64 usage error; 65, 74, 75 with --strict: bad data, I/O error, lock timeout.";

/// `triage --version`: the version, the commit it was built from and the build date (build.rs).
/// `-V` and the man pages show the version alone, so they do not change with every commit.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TRIAGE_COMMIT"),
    ", built ",
    env!("TRIAGE_BUILD_DATE"),
    ")"
);

/// `triage`: the error-handling layer for LLM-agent workflows.
#[derive(Parser, Debug)]
#[command(
    name = "triage",
    version,
    long_version = LONG_VERSION,
    about = "The error-handling layer for LLM-agent workflows",
    long_about = "The error-handling layer for LLM-agent workflows: classify failures, decide \
                  retries, circuit-break failing agents, catch silent failures, log errors and \
                  write workflow state so that it survives a crash. Every subcommand reads JSON \
                  on stdin and prints one JSON line.",
    after_help = EXAMPLES,
    disable_help_subcommand = true
)]
pub struct Cli {
    /// Options every subcommand takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands. Each is added with the issue that builds it; none exists as a stub.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write a JSON state file atomically, keeping the previous version as .bak
    StateWrite(commands::state_write::Args),
    /// Read a JSON state file, recovering from .bak or a checkpoint when it is corrupt
    StateRead(commands::state_read::Args),
    /// Check an agent's output for silent failures: empty, short, missing sections, BLOCKED
    CheckOutput(commands::check_output::Args),
    /// Show the effective policy, or check a policy file
    Config(commands::config::Args),
    /// Answer a Claude Code hook event: breaker gate, classify and log failures, check outputs
    Hook(commands::hook::Args),
    /// Wire `triage hook` into Claude Code's settings.json, with a starter policy
    Init(commands::init::Args),
    /// Circuit breakers shared by every process: check, record, status, reset, trip, disable
    Breaker(commands::breaker::Args),
    /// Create the multi-call symlinks (state-write, ...) next to the binary
    InstallLinks(commands::install_links::Args),
    /// Classify a failure: kind, tier, retryable, and what to do next
    Classify(commands::classify::Args),
    /// Append an error record to logs/errors.jsonl and report the thresholds it crosses
    RecordError(commands::record_error::Args),
    /// Summarize the error log, render the seeds' escalation texts, or prune old records
    Report(commands::report::Args),
    /// List error records with their ids, newest first, filtered; --follow prints new ones
    Errors(commands::errors::Args),
    /// Print a shell's completion script (bash, zsh, fish, ...)
    Completions(commands::completions::Args),
    /// Print a manual page, or install them all
    Man(commands::man::Args),
    /// Record a workflow's steps with their compensations, and undo them in reverse
    Saga(commands::saga::Args),
    /// Run a command with a timeout, retries on the policy's schedule and clean interrupts
    Run(commands::run::Args),
    /// Where breakers and the error log are kept: status, sync after an outage, migrate to Redis
    Store(commands::store::Args),
}

/// Names the binary answers to when a link or copy of it carries that name.
pub const MULTICALL: &[&str] = &[
    "state-write",
    "state-read",
    "classify",
    "breaker",
    "check-output",
    "record-error",
];

impl Command {
    /// The subcommand's name, which starts its messages.
    pub fn name(&self) -> &'static str {
        match self {
            Command::StateWrite(_) => "state-write",
            Command::StateRead(_) => "state-read",
            Command::CheckOutput(_) => "check-output",
            Command::Config(_) => "config",
            Command::Hook(_) => "hook",
            Command::Init(_) => "init",
            Command::InstallLinks(_) => "install-links",
            Command::Classify(_) => "classify",
            Command::Breaker(_) => "breaker",
            Command::RecordError(_) => "record-error",
            Command::Report(_) => "report",
            Command::Errors(_) => "errors",
            Command::Completions(_) => "completions",
            Command::Man(_) => "man",
            Command::Saga(_) => "saga",
            Command::Run(_) => "run",
            Command::Store(_) => "store",
        }
    }

    /// Whether the command writes under the state root (and so may leave a trace there).
    fn writes_state(&self) -> bool {
        !matches!(
            self,
            Command::Config(_)
                | Command::Classify(_)
                | Command::Errors(_)
                | Command::Completions(_)
                | Command::Man(_)
        )
    }

    fn run(&self, cx: &Context) -> Result<Outcome, Failure> {
        match self {
            Command::StateWrite(a) => commands::state_write::run(a, cx),
            Command::StateRead(a) => commands::state_read::run(a, cx),
            Command::CheckOutput(a) => commands::check_output::run(a, cx),
            Command::Config(a) => commands::config::run(a, cx),
            Command::Hook(a) => commands::hook::run(a, cx),
            Command::Init(a) => commands::init::run(a, cx),
            Command::InstallLinks(a) => commands::install_links::run(a, cx),
            Command::Classify(a) => commands::classify::run(a, cx),
            Command::Breaker(a) => commands::breaker::run(a, cx),
            Command::RecordError(a) => commands::record_error::run(a, cx),
            Command::Report(a) => commands::report::run(a, cx),
            Command::Errors(a) => commands::errors::run(a, cx),
            Command::Completions(a) => commands::completions::run(a, cx),
            Command::Man(a) => commands::man::run(a, cx),
            Command::Saga(a) => commands::saga::run(a, cx),
            Command::Run(a) => commands::run::run(a, cx),
            Command::Store(a) => commands::store::run(a, cx),
        }
    }
}

fn subcommand_names() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect()
}

/// Multi-call: under the name of a subcommand, run that subcommand.
/// Returns the argument list to parse, or the usage error for an unknown program name.
pub fn dispatch_args(argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let mut args = argv.into_iter();
    let argv0 = args.next().unwrap_or_else(|| "triage".into());
    let name = Path::new(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == "triage" {
        return Ok(std::iter::once(argv0).chain(args).collect());
    }
    if MULTICALL.contains(&name.as_str()) {
        return Ok([OsString::from("triage"), OsString::from(name)]
            .into_iter()
            .chain(args)
            .collect());
    }
    Err(format!(
        "triage: unknown program name `{name}`; run it as `triage` or under one of these names: {}",
        MULTICALL.join(", ")
    ))
}

/// Runs the command line and returns the exit status.
pub fn main(argv: Vec<OsString>) -> ExitCode {
    let args = match dispatch_args(argv) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitStatus::Usage.into();
        }
    };
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e, &args),
    };
    let name = cli.command.name();
    let strict = cli.global.strict;
    let exit_status = cli.global.exit_status;
    let cx = match Context::new(name, cli.global.clone(), cli.command.writes_state()) {
        Ok(cx) => cx,
        Err(f) => return failed(name, &f, None, strict),
    };
    match cli.command.run(&cx) {
        Ok(outcome) => {
            if let Some(out) = &outcome.stdout {
                if let Err(e) = context::print_line(out) {
                    let f = Failure::io(format!("cannot write to stdout: {e}"));
                    return failed(name, &f, Some(&cx), strict);
                }
            }
            if let Some(status) = outcome.exit {
                ExitCode::from(status)
            } else if outcome.block {
                ExitStatus::Block.into()
            } else if outcome.negative && exit_status {
                ExitStatus::Negative.into()
            } else {
                ExitStatus::Success.into()
            }
        }
        Err(f) => failed(name, &f, Some(&cx), strict),
    }
}

fn failed(name: &str, f: &Failure, cx: Option<&Context>, strict: bool) -> ExitCode {
    eprintln!("triage {name}: {}", f.message);
    if let Some(cx) = cx {
        if f.class != crate::exit::FailureClass::Usage {
            cx.trace(f.class_name(), &f.message);
        }
    }
    f.status(strict).into()
}

/// clap's errors, prefixed with the subcommand's name, exit 64 (help and version exit 0).
fn usage_error(e: clap::Error, args: &[OsString]) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitStatus::Success.into();
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = e.print();
        return ExitStatus::Usage.into();
    }
    let names = subcommand_names();
    let sub = args
        .iter()
        .skip(1)
        .filter_map(|a| a.to_str())
        .find(|a| names.iter().any(|n| n == a));
    let prefix = match sub {
        Some(s) => format!("triage {s}: "),
        None => "triage: ".into(),
    };
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    eprint!("{prefix}{text}");
    if e.kind() == ErrorKind::InvalidSubcommand {
        eprintln!("valid subcommands: {}", names.join(", "));
    }
    ExitStatus::Usage.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn clap_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn multicall_names_are_subcommands() {
        let names = subcommand_names();
        for m in MULTICALL {
            assert!(names.iter().any(|n| n == m), "{m}");
        }
    }

    #[test]
    fn program_name_selects_the_subcommand() {
        assert_eq!(
            dispatch_args(os(&["/usr/local/bin/state-read", "f.json"])),
            Ok(os(&["triage", "state-read", "f.json"]))
        );
        assert_eq!(
            dispatch_args(os(&["./triage", "x"])),
            Ok(os(&["./triage", "x"]))
        );
        let err = dispatch_args(os(&["/tmp/frobnicate"])).expect_err("unknown name");
        assert!(
            err.contains("frobnicate") && err.contains("state-write"),
            "{err}"
        );
    }
}
