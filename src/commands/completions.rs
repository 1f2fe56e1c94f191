//! `triage completions SHELL`: the shell's completion script, from the clap definitions.

use crate::context::{Answer, Context};
use crate::exit::Failure;

/// Arguments of `triage completions`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage completions bash > ~/.local/share/bash-completion/completions/triage\n  \
    triage completions zsh > ~/.zfunc/_triage\n  \
    triage completions fish > ~/.config/fish/completions/triage.fish")]
pub struct Args {
    /// The shell
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Runs `triage completions`.
/// `tree` is the command line's definition (`Cli::command()`), handed in by the dispatcher.
pub fn run(args: &Args, _cx: &Context, mut tree: clap::Command) -> Result<Answer, Failure> {
    let cmd = &mut tree;
    let mut out = Vec::new();
    clap_complete::generate(args.shell, cmd, "triage", &mut out);
    Ok(Answer::text(String::from_utf8_lossy(&out)))
}
