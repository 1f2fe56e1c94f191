//! `triage install-links [DIR]`: the multi-call symlinks (`state-write`, …) beside the binary,
//! so scripts can call a subcommand by name; and the man pages in `DIR/../share/man`, where
//! `man` looks for the pages of the programs in `DIR` (so `man triage-classify` works).

use crate::cli::MULTICALL;
use crate::context::{Context, Outcome};
use crate::exit::Failure;
use serde_json::json;
use std::path::PathBuf;

/// Arguments of `triage install-links`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    triage install-links\n  \
    triage install-links ~/.cargo/bin\n\n\
    The man pages go to DIR/../share/man (~/.cargo/share/man for ~/.cargo/bin); a folder that \
    cannot be written is a warning, the links are still made.")]
pub struct Args {
    /// Where to create the links [default: the folder of the running binary]
    pub dir: Option<PathBuf>,
}

/// Runs `triage install-links`.
pub fn run(args: &Args, cx: &Context) -> Result<Outcome, Failure> {
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
    for name in MULTICALL {
        let link = dir.join(name);
        match std::fs::symlink_metadata(&link) {
            Ok(m) if m.file_type().is_symlink() => {
                if std::fs::read_link(&link).ok().as_deref() == Some(exe.as_path()) {
                    linked.push(link);
                    continue;
                }
                std::fs::remove_file(&link)
                    .map_err(|e| Failure::io(format!("cannot replace {}: {e}", link.display())))?;
            }
            Ok(_) => {
                cx.warn(&format!(
                    "{} exists and is not a link; left it alone",
                    link.display()
                ));
                skipped.push(link);
                continue;
            }
            Err(_) => {}
        }
        std::os::unix::fs::symlink(&exe, &link)
            .map_err(|e| Failure::io(format!("cannot create {}: {e}", link.display())))?;
        linked.push(link);
    }
    let man = dir.parent().map(|p| p.join("share").join("man"));
    let pages = match &man {
        Some(m) => match crate::commands::man::install(m) {
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
        return Ok(Outcome::text(text));
    }
    Ok(Outcome::json(&json!({
        "target": exe,
        "links": linked,
        "skipped": skipped,
        "man": (pages > 0).then_some(man),
        "man_pages": pages,
    })))
}
