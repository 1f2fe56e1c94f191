//! `triage install-links [DIR]`: the multi-call symlinks (`state-write`, …) beside the binary,
//! so scripts can call a subcommand by name.

use crate::cli::MULTICALL;
use crate::context::{Context, Outcome};
use crate::exit::Failure;
use serde_json::json;
use std::path::PathBuf;

/// Arguments of `triage install-links`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  triage install-links ~/.cargo/bin")]
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
    if cx.global.text {
        let names: Vec<String> = linked.iter().map(|p| p.display().to_string()).collect();
        return Ok(Outcome::text(format!(
            "-> {}\n{}",
            exe.display(),
            names.join("\n")
        )));
    }
    Ok(Outcome::json(
        &json!({"target": exe, "links": linked, "skipped": skipped}),
    ))
}
