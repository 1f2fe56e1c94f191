//! The command line: clap definitions, multi-call dispatch on the program's name, and the one
//! place where a command's result becomes an exit status (SPEC §2).

use crate::commands;
use crate::context::{self, Answer, Context, GlobalArgs};
use crate::env::Env;
use crate::exit::{ExitStatus, Failure, FailureClass};
use crate::version::LONG_VERSION;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
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

/// `triage`: the error-handling layer for LLM-agent workflows.
#[derive(Parser, Debug)]
#[command(
    name = "triage",
    version,
    long_version = LONG_VERSION,
    about = "The error-handling layer for LLM-agent workflows",
    long_about = "The error-handling layer for LLM-agent workflows: classify failures, decide \
                  retries, circuit-break failing agents, catch silent failures, log errors and \
                  write workflow state so that it survives a crash. The subcommands that judge \
                  or record something read JSON on stdin and print one JSON line (--text: lines \
                  for a person); run passes its command's output through and reports on \
                  stderr, hook answers in Claude Code's hook format, and init and \
                  install-links say what they changed. `triage help SUBCOMMAND` for more.",
    after_help = EXAMPLES,
    disable_help_subcommand = true
)]
pub(crate) struct Cli {
    /// Options every subcommand takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands. Each is added with the issue that builds it; none exists as a stub.
#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
    /// Summarize the error log, render escalation messages, or prune old records
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
    /// Run a phase's work items in parallel, decide once, survive interrupts and resume
    Phase(commands::phase::Args),
}

/// Names the binary answers to when a link or copy of it carries that name.
pub(crate) const MULTICALL: &[&str] = &[
    "state-write",
    "state-read",
    "classify",
    "breaker",
    "check-output",
    "record-error",
];

impl Command {
    /// The subcommand's name, which starts its messages.
    pub(crate) fn name(&self) -> &'static str {
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
            Command::Phase(_) => "phase",
        }
    }

    /// The key of the JSON line a refusal prints (`{"written": false, "problems": [...]}`), or
    /// `None` for a command whose stdout is something else: a hook answer, the command `run`
    /// runs, `init`'s diff, the links made, or text for a person.
    fn refusal_key(&self, global: &GlobalArgs) -> Option<&'static str> {
        match self {
            _ if global.text => None,
            Command::Hook(_)
            | Command::Run(_)
            | Command::Init(_)
            | Command::InstallLinks(_)
            | Command::Completions(_)
            | Command::Man(_) => None,
            Command::Breaker(a) if a.hook => None,
            Command::Classify(a) if a.hook => None,
            Command::CheckOutput(a) if a.hook => None,
            Command::StateWrite(_) => Some("written"),
            Command::RecordError(_) => Some("recorded"),
            _ => Some("ok"),
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

    fn run(&self, cx: &Context) -> Result<Answer, Failure> {
        match self {
            Command::StateWrite(a) => commands::state_write::run(a, cx),
            Command::StateRead(a) => commands::state_read::run(a, cx),
            Command::CheckOutput(a) => commands::check_output::run(a, cx),
            Command::Config(a) => commands::config::run(a, cx),
            Command::Hook(a) => commands::hook::run(a, cx),
            Command::Init(a) => commands::init::run(a, cx),
            Command::InstallLinks(a) => {
                commands::install_links::run(a, cx, MULTICALL, Cli::command())
            }
            Command::Classify(a) => commands::classify::run(a, cx),
            Command::Breaker(a) => commands::breaker::run(a, cx),
            Command::RecordError(a) => commands::record_error::run(a, cx),
            Command::Report(a) => commands::report::run(a, cx),
            Command::Errors(a) => commands::errors::run(a, cx),
            Command::Completions(a) => commands::completions::run(a, cx, Cli::command()),
            Command::Man(a) => commands::man::run(a, cx, Cli::command()),
            Command::Saga(a) => commands::saga::run(a, cx),
            Command::Run(a) => commands::run::run(a, cx),
            Command::Store(a) => commands::store::run(a, cx),
            Command::Phase(a) => commands::phase::run(a, cx),
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
pub(crate) fn dispatch_args(argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let mut args = argv.into_iter();
    let argv0 = args.next().unwrap_or_else(|| "triage".into());
    let name = Path::new(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == "triage" {
        return Ok(std::iter::once(argv0).chain(args).collect());
    }
    // Git style, `triage-classify` for `triage classify`, for every subcommand; the plain
    // names only for the few that cannot be mistaken for another program.
    let sub = match name.strip_prefix("triage-") {
        Some(sub) if subcommand_names().iter().any(|n| n == sub) => Some(sub.to_string()),
        _ => MULTICALL.contains(&name.as_str()).then_some(name.clone()),
    };
    if let Some(sub) = sub {
        return Ok([OsString::from("triage"), OsString::from(sub)]
            .into_iter()
            .chain(args)
            .collect());
    }
    Err(format!(
        "triage: unknown program name `{name}`; run it as `triage`, as triage-SUBCOMMAND, or under one of these names: {}",
        MULTICALL.join(", ")
    ))
}

/// `triage help [SUB...]` is `triage [SUB...] --help`, as in git and cargo.
fn help_as_flag(mut args: Vec<OsString>) -> Vec<OsString> {
    if args.get(1).is_some_and(|a| a == "help") {
        args.remove(1);
        args.push("--help".into());
    }
    args
}

/// Runs the command line and returns the exit status.
pub fn main(argv: Vec<OsString>) -> ExitCode {
    let args = match dispatch_args(argv) {
        Ok(a) => help_as_flag(a),
        Err(msg) => {
            say!("{msg}");
            return ExitStatus::Usage.into();
        }
    };
    if let [_, flag] = args.as_slice() {
        if let Some(line) = version_line(flag) {
            // The one line clap would print, without building every subcommand to print it
            // (and, like clap, never failing on a closed stdout).
            use std::io::Write;
            let _ = std::io::stdout().write_all(line.as_bytes());
            return ExitStatus::Success.into();
        }
    }
    let cli = match parse_fast(&args).map_or_else(|| Cli::try_parse_from(&args), Ok) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e, &args),
    };
    let name = cli.command.name();
    let refusal = cli.command.refusal_key(&cli.global);
    let env = Env::from_process();
    let cx = match Context::new(name, cli.global.clone(), cli.command.writes_state(), &env) {
        Ok(cx) => cx,
        Err(f) => return failed(name, &f, None, &cli.global, None),
    };
    // Before anything is read or written, the environment's warnings traced included.
    cx.anchor_folders();
    for w in &env.warnings {
        cx.warn(w);
    }
    let global = &cx.global;
    let result = cli.command.run(&cx);
    cx.save_policy_cache();
    match result {
        Ok(outcome) => {
            if let Some(out) = &outcome.stdout {
                if let Err(e) = context::print_line(out) {
                    let f = Failure::io(format!("cannot write to stdout: {e}"));
                    return failed(name, &f, Some(&cx), global, None);
                }
            }
            if let Some(status) = outcome.exit {
                ExitCode::from(status)
            } else if outcome.block {
                ExitStatus::Block.into()
            } else if outcome.negative && global.exit_status {
                ExitStatus::Negative.into()
            } else {
                ExitStatus::Success.into()
            }
        }
        Err(f) => failed(name, &f, Some(&cx), global, refusal),
    }
}

/// What `triage --version` (the long version) and `-V` print, as clap renders them.
fn version_line(flag: &OsString) -> Option<String> {
    if flag == "--version" {
        Some(format!("triage {LONG_VERSION}\n"))
    } else if flag == "-V" {
        Some(format!("triage {}\n", env!("CARGO_PKG_VERSION")))
    } else {
        None
    }
}

/// The command line, parsed with only the subcommand it names defined: clap otherwise builds
/// the definition of every subcommand, with all their arguments, on every call (~0.6 M
/// instructions, most of what `triage` itself did before a hook's work began). `None`
/// whenever that parse is not a plain success (help, version, a usage error, a name that is
/// not a subcommand): the full parse then answers, with clap's own words. Where both succeed
/// they agree (`the_fast_parse_agrees_with_the_full_one`).
fn parse_fast(args: &[OsString]) -> Option<Cli> {
    let sub = subcommand_definition(named_subcommand(args)?)?;
    let cmd = <GlobalArgs as clap::Args>::augment_args(clap::Command::new("triage"))
        .subcommand(sub)
        .subcommand_required(true);
    let matches = cmd.try_get_matches_from(args).ok()?;
    Cli::from_arg_matches(&matches).ok()
}

/// The first argument that is neither a global option nor its value: the subcommand's name.
fn named_subcommand(args: &[OsString]) -> Option<&str> {
    let mut rest = args.iter().skip(1);
    while let Some(a) = rest.next() {
        let a = a.to_str()?;
        match a {
            "--dir" | "--config" => {
                rest.next()?;
            }
            "--text" | "--strict" | "-e" | "--exit-status" => {}
            _ if a.starts_with("--dir=") || a.starts_with("--config=") => {}
            _ if a.starts_with('-') => return None,
            _ => return Some(a),
        }
    }
    None
}

/// One subcommand's definition, as `Command` derives it (less its one-line about, which only
/// help shows).
fn subcommand_definition(name: &str) -> Option<clap::Command> {
    use clap::Args;
    type Augment = fn(clap::Command) -> clap::Command;
    const DEFINITIONS: &[(&str, Augment)] = &[
        ("state-write", commands::state_write::Args::augment_args),
        ("state-read", commands::state_read::Args::augment_args),
        ("check-output", commands::check_output::Args::augment_args),
        ("config", commands::config::Args::augment_args),
        ("hook", commands::hook::Args::augment_args),
        ("init", commands::init::Args::augment_args),
        ("breaker", commands::breaker::Args::augment_args),
        ("install-links", commands::install_links::Args::augment_args),
        ("classify", commands::classify::Args::augment_args),
        ("record-error", commands::record_error::Args::augment_args),
        ("report", commands::report::Args::augment_args),
        ("errors", commands::errors::Args::augment_args),
        ("completions", commands::completions::Args::augment_args),
        ("man", commands::man::Args::augment_args),
        ("saga", commands::saga::Args::augment_args),
        ("run", commands::run::Args::augment_args),
        ("phase", commands::phase::Args::augment_args),
        ("store", commands::store::Args::augment_args),
    ];
    let (name, augment) = DEFINITIONS.iter().find(|(n, _)| *n == name)?;
    Some(augment(clap::Command::new(*name)))
}

/// A command that could not do its job: the message on stderr (and in the trace), its one
/// JSON line on stdout (`{"written": false, "problems": [...]}`) for a command that answers in
/// JSON, and the status — 64 for a usage error, else 65/74/75 with `--strict`, 1 with `-e`
/// (the job not done is a negative verdict), 0 otherwise (best effort).
fn failed(
    name: &str,
    f: &Failure,
    cx: Option<&Context>,
    global: &GlobalArgs,
    refusal: Option<&str>,
) -> ExitCode {
    say!("triage {name}: {}", f.message);
    if f.class == FailureClass::Usage {
        return ExitStatus::Usage.into();
    }
    if let Some(cx) = cx {
        if name != "install-links" {
            cx.trace(f.class_name(), &f.message);
        }
    }
    if let Some(key) = refusal {
        let line = serde_json::json!({ key: false, "problems": [f.message] });
        let _ = context::print_line(&line.to_string());
    }
    match f.status(global.strict) {
        ExitStatus::Success if global.exit_status => ExitStatus::Negative.into(),
        s => s.into(),
    }
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
    say_more!("{prefix}{text}");
    if e.kind() == ErrorKind::InvalidSubcommand {
        say!("valid subcommands: {}", names.join(", "));
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
    fn the_version_lines_are_clap_s() {
        let long = version_line(&"--version".into());
        assert_eq!(long, Some(Cli::command().render_long_version().to_string()));
        let short = version_line(&"-V".into());
        assert_eq!(short, Some(Cli::command().render_version().to_string()));
        assert_eq!(version_line(&"--help".into()), None);
    }

    #[test]
    fn every_subcommand_has_a_fast_parse() {
        for name in subcommand_names() {
            assert!(subcommand_definition(&name).is_some(), "{name}");
        }
    }

    /// Where the fast parse succeeds, it parses as the full one does; where it does not, the
    /// full parse (and its message) is what the user gets.
    #[test]
    fn the_fast_parse_agrees_with_the_full_one() {
        let lines: &[&[&str]] = &[
            &["triage", "classify"],
            &[
                "triage",
                "classify",
                "--raw",
                "--message",
                "boom",
                "--exit-code",
                "1",
            ],
            &[
                "triage", "--dir", "/tmp/x", "--text", "classify", "--agent", "a",
            ],
            &[
                "triage",
                "--config=/p.toml",
                "-e",
                "breaker",
                "check",
                "researcher",
            ],
            &[
                "triage",
                "breaker",
                "record",
                "researcher",
                "--outcome",
                "success",
            ],
            &["triage", "breaker", "check", "k", "--strict"],
            &["triage", "hook"],
            &["triage", "--strict", "hook", "--dir", "d"],
            &[
                "triage",
                "check-output",
                "--agent",
                "researcher",
                "--require-any",
                "x",
            ],
            &["triage", "record-error", "--session", "s1", "--phase", "2"],
            &["triage", "state-write", "st.json", "--update", ".n += 1"],
            &["triage", "state-read", "st.json", "--data"],
            &["triage", "report", "--by", "agent"],
            &["triage", "report", "prune", "--older-than", "30d"],
            &["triage", "saga", "status", "review-42", "--text"],
            &["triage", "run", "--timeout", "5s", "--", "sleep", "1"],
            &["triage", "config", "show"],
            &["triage", "init", "--dry-run"],
            &["triage", "install-links", "/tmp/bin"],
            &["triage", "errors", "--follow"],
            &["triage", "completions", "bash"],
            &["triage", "man"],
            // Not plain successes: help, version, errors, unknown names.
            &["triage", "--version"],
            &["triage", "classify", "--help"],
            &["triage", "classify", "--bogus"],
            &["triage", "breaker"],
            &["triage", "help"],
            &["triage", "clasify"],
            &["triage", "--dir"],
            &["triage"],
        ];
        for line in lines {
            let args = os(line);
            let full = Cli::try_parse_from(&args);
            match parse_fast(&args) {
                Some(fast) => {
                    let full = full.expect("the full parse takes what the fast one does");
                    assert_eq!(format!("{fast:?}"), format!("{full:?}"), "{line:?}");
                }
                None => assert!(
                    full.is_err(),
                    "{line:?}: the fast parse gave up on a line the full one takes"
                ),
            }
        }
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
        assert_eq!(
            dispatch_args(os(&["/usr/bin/triage-classify", "--raw"])),
            Ok(os(&["triage", "classify", "--raw"]))
        );
        assert_eq!(
            dispatch_args(os(&["triage-run", "true"])),
            Ok(os(&["triage", "run", "true"]))
        );
        assert!(dispatch_args(os(&["triage-nosuch"])).is_err());
        let err = dispatch_args(os(&["/tmp/frobnicate"])).expect_err("unknown name");
        assert!(
            err.contains("frobnicate") && err.contains("state-write"),
            "{err}"
        );
    }
}
