//! `triage init`: wire `triage hook` into Claude Code's `settings.json` in one step, keeping
//! every existing key and hook and the file's own indentation; write a starter `.triage.toml`
//! and ignore `.triage/` in git (`--local`: only per-person files). `--uninstall` takes away exactly what was added
//! ([`crate::setup`] plans and makes the changes).

use crate::context::{Answer, Context};
use crate::exit::Failure;
use crate::hook::dialect::Client;
use crate::setup::{self, clients, place, Report};

/// Arguments of `triage init`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  triage init --dry-run\n  triage init\n  \
    triage init --local\n  triage init --uninstall\n  triage init --user\n  \
    triage init --client codex\n  triage init --client cursor --uninstall")]
pub struct Args {
    /// Install into ~/.claude/settings.json (every project of yours) instead of the project's
    /// shared .claude/settings.json
    #[arg(long, conflicts_with = "local")]
    pub user: bool,
    /// Install into the project's .claude/settings.local.json: yours only, not committed; no
    /// .triage.toml is written, and .triage/ is ignored in .git/info/exclude, not .gitignore
    #[arg(long)]
    pub local: bool,
    /// Print the diff of every file it would change, and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Remove exactly what `triage init` added
    #[arg(long)]
    pub uninstall: bool,
    /// The agent client to wire triage into: claude (Claude Code's settings.json, the
    /// default), codex (.codex/hooks.json), gemini (.gemini/settings.json), cursor
    /// (.cursor/hooks.json) or copilot (.github/hooks/triage.json)
    #[arg(long, value_enum, value_name = "NAME")]
    pub client: Option<Client>,
}

/// Runs `triage init`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    if let Some(client) = args.client.filter(|c| *c != Client::Claude) {
        return other_client(args, cx, client);
    }
    let plan = setup::plan(cx, args.user, args.local, args.uninstall, args.dry_run)?;
    if args.dry_run {
        return Ok(Answer::text(plan.diff()));
    }
    if !args.uninstall && !place::on_path("triage") {
        // Said, not traced: the trace would land in this folder's .triage/, which need not be
        // the project's.
        say!(
            "triage init: warning: `triage` is not on this shell's PATH: the hooks skip themselves until it is (put the binary's folder on PATH, e.g. ~/.cargo/bin)"
        );
    }
    let report = plan.apply()?;
    if let Some(note) = &report.client_note {
        say!("triage init: {note}");
    }
    if args.client.is_none() {
        // Another client's folder: say which, and the command that wires triage into it.
        if let Ok(project) = place::project_root(cx) {
            for (dir, client) in clients::found(&project) {
                say!(
                    "triage init: found {dir}/: for that client run `triage init --client {}`",
                    client.name()
                );
            }
        }
    }
    if cx.global.text {
        return Ok(Answer::text(text(&report)));
    }
    Ok(Answer::json(&report))
}

fn text(report: &Report) -> String {
    let verb = if report.uninstall {
        "removed from"
    } else {
        "installed in"
    };
    let mut out = if report.files.is_empty() {
        format!("nothing to change in {}\n", report.settings.display())
    } else {
        format!("triage hook {verb} {}\n", report.settings.display())
    };
    for f in &report.files {
        out.push_str(&format!("  {:<8} {}\n", f.action, f.path.display()));
    }
    out
}

/// `triage init --client NAME` for a client other than Claude Code.
fn other_client(args: &Args, cx: &Context, client: Client) -> Result<Answer, Failure> {
    if args.local {
        return Err(Failure::usage(format!(
            "--local is Claude Code's settings.local.json; {} has no such file: drop --local",
            client.name()
        )));
    }
    let plan = clients::plan(cx, client, args.user, args.uninstall)?;
    if args.dry_run {
        return Ok(Answer::text(plan.diff()));
    }
    if !args.uninstall && !place::on_path("triage") {
        say!(
            "triage init: warning: `triage` is not on this shell's PATH: the hooks skip themselves until it is (put the binary's folder on PATH, e.g. ~/.cargo/bin)"
        );
    }
    let report = plan.apply()?;
    if cx.global.text {
        let verb = if report.uninstall {
            "removed from"
        } else {
            "installed in"
        };
        let mut out = if report.files.is_empty() {
            format!("nothing to change in {}\n", report.file.display())
        } else {
            format!("triage hook {verb} {}\n", report.file.display())
        };
        for f in &report.files {
            out.push_str(&format!("  {:<8} {}\n", f.action, f.path.display()));
        }
        return Ok(Answer::text(out));
    }
    Ok(Answer::json(&report))
}
