//! `triage install-links [DIR]`: the multi-call symlinks (`triage-state-write`, …; with
//! `--bare` also `state-write`, …) beside the binary, so scripts can call a subcommand by
//! name; and the man pages in `DIR/../share/man`, where
//! `man` looks for the pages of the programs in `DIR` (so `man triage-classify` works).

use crate::context::{Answer, Context};
use crate::exit::Failure;
use serde_json::json;
use std::path::{Path, PathBuf};

/// Arguments of `triage install-links`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage install-links\n  \
    triage install-links ~/.cargo/bin\n  \
    triage install-links --bare ~/.local/bin\n\n\
    The links are named triage-state-write, triage-classify, …: git-style names that no \
    other program on PATH has. --bare also makes state-write, classify, breaker, … (short, \
    but names another program may have too). The man pages go to DIR/../share/man (~/.cargo/share/man for ~/.cargo/bin); a folder that \
    cannot be written is a warning, the links are still made. A name that is already taken by \
    something triage did not make is left alone, with a warning. The binary also answers to \
    git-style names: a link named triage-classify runs triage classify.")]
pub struct Args {
    /// Where to create the links [default: the folder of the running binary]
    pub dir: Option<PathBuf>,
    /// Also the bare names (state-write, classify, breaker, check-output, …), which may
    /// shadow another program of that name on PATH
    #[arg(long)]
    pub bare: bool,
}

/// Whether a link's target is a triage binary (an earlier install's, or a moved one).
fn is_triage(target: &Path) -> bool {
    target.file_name().is_some_and(|n| n == "triage")
}

/// Runs `triage install-links`.
/// `names` are the multi-call names to link, `tree` the command line's definition (for the
/// man pages), both handed in by the dispatcher.
pub fn run(
    args: &Args,
    cx: &Context,
    names: &[&str],
    tree: clap::Command,
) -> Result<Answer, Failure> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| Failure::io(format!("cannot find the running binary: {e}")))?;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => exe
            .parent()
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    if !dir.is_dir() {
        return Err(Failure::usage(format!("{} is not a folder", dir.display())));
    }
    let mut linked = Vec::new();
    let mut skipped = Vec::new();
    // `triage-NAME` always (the dispatcher answers to it as to NAME); the bare names only
    // when asked for.
    let mut wanted: Vec<String> = names.iter().map(|n| format!("triage-{n}")).collect();
    if args.bare {
        wanted.extend(names.iter().map(|n| n.to_string()));
    }
    for name in &wanted {
        let link = dir.join(name);
        if let Ok(m) = std::fs::symlink_metadata(&link) {
            let target = std::fs::read_link(&link).ok();
            if target.as_deref() == Some(exe.as_path()) {
                linked.push(link);
                continue;
            }
            // Only a link triage made (one to a binary named triage) is replaced: anything
            // else in the folder is someone else's, and stays as it is.
            if !(m.file_type().is_symlink() && target.as_deref().is_some_and(is_triage)) {
                let what = match &target {
                    Some(t) => format!("a link to {}", t.display()),
                    None => "not a link triage made".into(),
                };
                // Warnings go to stderr only: no trace file in (or beside) the bin folder.
                say!(
                    "triage install-links: warning: {} exists and is {what}; left it alone",
                    link.display()
                );
                skipped.push(link);
                continue;
            }
            std::fs::remove_file(&link)
                .map_err(|e| Failure::io(format!("cannot replace {}: {e}", link.display())))?;
        }
        std::os::unix::fs::symlink(&exe, &link)
            .map_err(|e| Failure::io(format!("cannot create {}: {e}", link.display())))?;
        linked.push(link);
    }
    let man = dir.parent().map(|p| p.join("share").join("man"));
    let pages = match &man {
        Some(m) => match crate::man::install(tree, m) {
            Ok(written) => written.len(),
            Err(f) => {
                cx.warn(&format!("man pages not installed: {}", f.message));
                0
            }
        },
        None => 0,
    };
    if cx.global.text {
        let names: Vec<String> = linked.iter().map(|p| p.display().to_string()).collect();
        let mut text = format!("-> {}\n{}", exe.display(), names.join("\n"));
        if let (Some(m), true) = (&man, pages > 0) {
            text.push_str(&format!("\n{pages} man pages in {}", m.display()));
        }
        return Ok(Answer::text(text));
    }
    Ok(Answer::json(&json!({
        "target": exe,
        "links": linked,
        "skipped": skipped,
        "man": (pages > 0).then_some(man),
        "man_pages": pages,
    })))
}
