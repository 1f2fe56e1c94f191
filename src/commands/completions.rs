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
    let script = String::from_utf8_lossy(&out);
    if args.shell == clap_complete::Shell::Fish {
        return Ok(Answer::text(fish_values_escaped(&script)));
    }
    Ok(Answer::text(script))
}

/// clap_complete writes fish's value list as one double-quoted `-a "…"` argument, each value
/// with its help in single quotes, but leaves a `"` or `$` of a help text as it is: the
/// string then ends early and fish refuses the whole script (`complete: too many
/// arguments`). Escapes them (`\"`, `\$`) inside the help texts of each such list.
fn fish_values_escaped(script: &str) -> String {
    const START: &str = " -a \"";
    let mut out = String::with_capacity(script.len() + 16);
    let mut rest = script;
    while let Some(i) = rest.find(START) {
        let (before, after) = rest.split_at(i + START.len());
        out.push_str(before);
        // Up to the `"` that ends the list: one outside every help text (`'…'`, in which
        // clap writes a `'` as `\'`).
        let mut chars = after.char_indices();
        let mut in_help = false;
        let mut end = after.len();
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' if in_help => {
                    out.push(c);
                    if let Some((_, next)) = chars.next() {
                        out.push(next);
                    }
                }
                '\'' => {
                    in_help = !in_help;
                    out.push(c);
                }
                '"' if in_help => out.push_str("\\\""),
                '$' if in_help => out.push_str("\\$"),
                '"' => {
                    end = at;
                    break;
                }
                c => out.push(c),
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::fish_values_escaped;

    #[test]
    fn quotes_in_fish_value_help_are_escaped() {
        let script = "complete -c t -l x -d 'say \"hi\"' -r -f -a \"a\\t'one (\"A\"), it\\'s'\nb\\t'costs $5'\"\ncomplete -c t -f -a \"c\" -d 'x \"y\"'\n";
        assert_eq!(
            fish_values_escaped(script),
            "complete -c t -l x -d 'say \"hi\"' -r -f -a \"a\\t'one (\\\"A\\\"), it\\'s'\nb\\t'costs \\$5'\"\ncomplete -c t -f -a \"c\" -d 'x \"y\"'\n"
        );
    }
}
