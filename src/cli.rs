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

/// The subcommands, each once: its variant, the module under `commands/` that does it, its
/// name, and for the few the binary answers to under their plain name (see [`MULTICALL`])
/// their place in that list; a module whose `run` needs more than its arguments and the
/// context says how it is called. The clap enum [`Command`], [`Command::name`], the dispatch
/// to each module's `run`, the fast parse's [`DEFINITIONS`] and [`MULTICALL`] are all made
/// from this one table. Help lists the subcommands in its order.
macro_rules! subcommands {
    (@run $args:ident $cx:ident $module:ident) => {
        commands::$module::run($args, $cx)
    };
    (@run $args:ident $cx:ident $module:ident |$a:ident, $c:ident| $run:expr) => {{
        let ($a, $c) = ($args, $cx);
        $run
    }};
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident($module:ident) $name:literal $(multicall $at:literal)?
            $(=> |$a:ident, $c:ident| $run:expr)?;
    )+) => {
        /// The subcommands. Each is added with the issue that builds it; none exists as a stub.
        #[derive(Subcommand, Debug)]
        pub(crate) enum Command {
            $(
                $(#[doc = $doc])*
                #[command(name = $name)]
                $variant(commands::$module::Args),
            )+
        }

        impl Command {
            /// The subcommand's name, which starts its messages.
            pub(crate) fn name(&self) -> &'static str {
                match self {
                    $(Command::$variant(_) => $name,)+
                }
            }

            fn run(&self, cx: &Context) -> Result<Answer, Failure> {
                match self {
                    $(Command::$variant(args) => {
                        subcommands!(@run args cx $module $(|$a, $c| $run)?)
                    })+
                }
            }
        }

        /// Each subcommand's name and its arguments' definition, as `Command` derives them
        /// (less the one-line about, which only help shows), in help's order.
        const DEFINITIONS: &[(&str, fn(clap::Command) -> clap::Command)] = &[
            $(($name, <commands::$module::Args as clap::Args>::augment_args),)+
        ];

        /// Names the binary answers to when a link or copy of it carries that name.
        pub(crate) const MULTICALL: &[&str] = &{
            let mut names = [""; 0 $($(+ [$at].len())?)+];
            $($(names[$at] = $name;)?)+
            names
        };
    };
}

subcommands! {
    /// Write a JSON state file atomically, keeping the previous version as .bak
    StateWrite(state_write) "state-write" multicall 0;
    /// Read a JSON state file, recovering from .bak or a checkpoint when it is corrupt
    StateRead(state_read) "state-read" multicall 1;
    /// Check an agent's output for silent failures: empty, short, missing sections, BLOCKED
    CheckOutput(check_output) "check-output" multicall 4;
    /// Show the effective policy, or check a policy file
    Config(config) "config";
    /// Answer a Claude Code hook event: breaker gate, classify and log failures, check outputs
    Hook(hook) "hook";
    /// Wire `triage hook` into Claude Code's settings.json, with a starter policy
    Init(init) "init";
    /// Circuit breakers shared by every process: check, record, status, reset, trip, disable
    Breaker(breaker) "breaker" multicall 3;
    /// Create the multi-call symlinks (triage-state-write, ...; --bare: state-write, ...) next to the binary
    InstallLinks(install_links) "install-links"
        => |a, cx| commands::install_links::run(a, cx, MULTICALL, Cli::command());
    /// Classify a failure: kind, tier, retryable, and what to do next
    Classify(classify) "classify" multicall 2;
    /// Append an error record to logs/errors.jsonl and report the thresholds it crosses
    RecordError(record_error) "record-error" multicall 5;
    /// Summarize the error log, render escalation messages, or prune old records
    Report(report) "report";
    /// List error records with their ids, newest first, filtered; --follow prints new ones
    Errors(errors) "errors";
    /// Print a shell's completion script (bash, zsh, fish, ...)
    Completions(completions) "completions"
        => |a, cx| commands::completions::run(a, cx, Cli::command());
    /// Print a manual page, or install them all
    Man(man) "man" => |a, cx| commands::man::run(a, cx, Cli::command());
    /// Record a workflow's steps with their compensations, and undo them in reverse
    Saga(saga) "saga";
    /// Run a command with a timeout, retries on the policy's schedule and clean interrupts
    Run(run) "run";
    /// Where breakers and the error log are kept: status, sync after an outage, migrate to Redis
    Store(store) "store";
    /// Run a phase's work items in parallel, decide once, survive interrupts and resume
    Phase(phase) "phase";
    /// Permits shared by every process (a bulkhead): acquire, renew, release, status
    Permit(permit) "permit";
    /// Retry budgets shared by every process (gRPC's retry throttling): check, record, status
    Budget(budget) "budget";
}

impl Command {
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
                | Command::StateRead(_)
                | Command::Classify(_)
                | Command::Errors(_)
                | Command::Completions(_)
                | Command::Man(_)
        )
    }
}

/// Every subcommand's name, in help's order (without building the command line).
fn subcommand_names() -> Vec<&'static str> {
    DEFINITIONS.iter().map(|(name, _)| *name).collect()
}

/// Multi-call: under the name of a subcommand (or `triage-SUBCOMMAND`), run that subcommand;
/// under any other name (`triage-linux-x64`, `triage-musl`: release archives and npm's
/// platform packages name the binary so), answer as `triage`. Returns the argument list to
/// parse.
pub(crate) fn dispatch_args(argv: Vec<OsString>) -> Vec<OsString> {
    let mut args = argv.into_iter();
    let argv0 = args.next().unwrap_or_else(|| "triage".into());
    let name = Path::new(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == "triage" {
        return std::iter::once(argv0).chain(args).collect();
    }
    // Git style, `triage-classify` for `triage classify`, for every subcommand; the plain
    // names only for the few that cannot be mistaken for another program.
    let sub = match name.strip_prefix("triage-") {
        Some(sub) if subcommand_names().contains(&sub) => Some(sub.to_string()),
        _ => MULTICALL.contains(&name.as_str()).then_some(name.clone()),
    };
    let head = std::iter::once(OsString::from("triage"));
    match sub {
        Some(sub) => head
            .chain(std::iter::once(OsString::from(sub)))
            .chain(args)
            .collect(),
        None => head.chain(args).collect(),
    }
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
    // Not a subcommand: the guard `run` starts a command under when it holds a permit.
    if argv.get(1).is_some_and(|a| a == crate::exec::guard::ARG) {
        return crate::exec::guard::main(argv.get(2..).unwrap_or_default());
    }
    let args = help_as_flag(dispatch_args(argv));
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
    if let Some(f) = cx.explicit_config_missing() {
        // `triage hook` goes on with the built-in defaults (the policy's load warns): it exits
        // 0 whatever it is given.
        if name != "hook" {
            return failed(name, &f, Some(&cx), &cx.global, None);
        }
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
            "--text" | "--strict" | "-e" | "--exit-status" | "-v" | "--verbose" => {}
            _ if a.starts_with("--dir=") || a.starts_with("--config=") => {}
            _ if a.starts_with('-') => return None,
            _ => return Some(a),
        }
    }
    None
}

/// One subcommand's definition (see [`DEFINITIONS`]).
fn subcommand_definition(name: &str) -> Option<clap::Command> {
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
    // clap quotes the argument it could not take: a credential typed on the command line is
    // not repeated.
    let text = e.render().to_string();
    let text = crate::core::redact::redact(&text);
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    say_more!("{prefix}{text}");
    if e.kind() == ErrorKind::InvalidSubcommand {
        // The subcommands of the command whose subcommand was misspelled (`triage breaker
        // stauts`: breaker's), not the top level's.
        let (path, valid) = subcommands_at(args);
        let whose = if path.is_empty() {
            String::new()
        } else {
            format!(" of `triage {}`", path.join(" "))
        };
        say!("valid subcommands{whose}: {}", valid.join(", "));
    }
    // `triage hook` exits 0 whatever its input holds (SPEC §2): a misspelled flag in a hook's
    // command line must not block the agent, nor show it an error every call.
    if sub == Some("hook") {
        return ExitStatus::Success.into();
    }
    ExitStatus::Usage.into()
}

/// The subcommands named in `args` (global options and flags skipped), deepest last, and the
/// names of the subcommands the deepest takes (the top level's when none is named).
fn subcommands_at(args: &[OsString]) -> (Vec<String>, Vec<String>) {
    let mut cmd = Cli::command();
    let mut path = Vec::new();
    for a in args.iter().skip(1).filter_map(|a| a.to_str()) {
        if a == "--" {
            break;
        }
        let next = cmd
            .get_subcommands()
            .find(|c| c.get_name() == a || c.get_all_aliases().any(|x| x == a))
            .cloned();
        if let Some(c) = next {
            path.push(c.get_name().to_string());
            cmd = c;
        }
    }
    let valid = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect();
    (path, valid)
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

    /// The subcommands clap knows, from the full definition.
    fn clap_names() -> Vec<String> {
        Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect()
    }

    #[test]
    fn every_subcommand_has_a_fast_parse() {
        for name in clap_names() {
            assert!(subcommand_definition(&name).is_some(), "{name}");
        }
        // In help's order, the one the usage error lists.
        assert_eq!(subcommand_names(), clap_names());
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
        let names = clap_names();
        for m in MULTICALL {
            assert!(names.iter().any(|n| n == m), "{m}");
        }
    }

    #[test]
    fn program_name_selects_the_subcommand() {
        assert_eq!(
            dispatch_args(os(&["/usr/local/bin/state-read", "f.json"])),
            os(&["triage", "state-read", "f.json"])
        );
        assert_eq!(
            dispatch_args(os(&["./triage", "x"])),
            os(&["./triage", "x"])
        );
        assert_eq!(
            dispatch_args(os(&["/usr/bin/triage-classify", "--raw"])),
            os(&["triage", "classify", "--raw"])
        );
        assert_eq!(
            dispatch_args(os(&["triage-run", "true"])),
            os(&["triage", "run", "true"])
        );
    }

    #[test]
    fn any_other_name_answers_as_triage() {
        for name in [
            "triage-linux-x64",
            "/opt/bin/triage-musl",
            "frobnicate",
            "triage-nosuch",
        ] {
            assert_eq!(
                dispatch_args(os(&[name, "classify", "--raw"])),
                os(&["triage", "classify", "--raw"]),
                "{name}"
            );
        }
    }
}
