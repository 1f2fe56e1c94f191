//! `triage man [PAGE]`: prints a manual page (roff, for `man -l -`), or with `--install DIR`
//! writes every page into `DIR/man1` and `DIR/man5`, where `man` finds them.

use crate::context::{Answer, Context};
use crate::exit::Failure;
use crate::man::{install, pages};
use serde_json::json;
use std::path::PathBuf;

/// Arguments of `triage man`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage man classify | man -l -\n  \
    triage man triage.toml | man -l -\n  \
    triage man --install ~/.local/share/man\n\n\
    triage install-links also installs the pages, in the share/man folder beside the binary's \
    folder (~/.cargo/share/man for ~/.cargo/bin), which man finds through PATH.")]
pub struct Args {
    /// The page: a subcommand (`breaker check`, `breaker-check`), `triage` or `triage.toml`
    #[arg(value_name = "PAGE", num_args = 0..)]
    pub page: Vec<String>,
    /// Write every page under DIR (DIR/man1, DIR/man5) instead
    #[arg(long, value_name = "DIR", conflicts_with = "page")]
    pub install: Option<PathBuf>,
}

/// Runs `triage man`.
pub fn run(args: &Args, cx: &Context, tree: clap::Command) -> Result<Answer, Failure> {
    if let Some(dir) = &args.install {
        let written = install(tree, dir)?;
        if cx.global.text {
            return Ok(Answer::text(format!(
                "{} pages in {}",
                written.len(),
                dir.display()
            )));
        }
        return Ok(Answer::json(&json!({"dir": dir, "pages": written.len()})));
    }
    let wanted = match args.page.join("-").as_str() {
        "" | "triage" => "triage".to_string(),
        "triage.toml" | "triage.toml.5" | "policy" => "triage.toml".to_string(),
        w if w.starts_with("triage-") => w.to_string(),
        w => format!("triage-{w}"),
    };
    let all = pages(tree);
    let page = all
        .iter()
        .find(|p| p.file.rsplit_once('.').map(|(n, _)| n) == Some(wanted.as_str()))
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|p| p.file.as_str()).collect();
            Failure::usage(format!(
                "no page `{wanted}`; the pages are: {}",
                names.join(", ")
            ))
        })?;
    Ok(Answer::text(page.body.clone()))
}
