//! `triage init`: wire `triage hook` into Claude Code's `settings.json` in one step, keeping
//! every existing key and hook; write a starter `.triage.toml` and ignore `.triage/` in git.
//! `--uninstall` takes away exactly what was added: when nothing else changed in between, the
//! files come back byte for byte (the originals are kept in `<root>/init/`).

use crate::context::{Context, Outcome};
use crate::exit::Failure;
use crate::settings::{self, Change};
use crate::store;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The starter policy: the seeds' rules, as shipped in `hooks/triage.example.toml`.
pub const STARTER: &str = include_str!("../../hooks/triage.example.toml");

const STARTER_HEADER: &str = "\
# triage policy: written by `triage init` from hooks/triage.example.toml.
# Every section is optional; what is left out takes the built-in defaults
# (`triage config show` prints them). Check your edits with `triage config check .triage.toml`.

";

const GITIGNORE_LINE: &str = ".triage/";

/// Arguments of `triage init`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  triage init --dry-run\n  triage init\n  \
    triage init --uninstall\n  triage init --user")]
pub struct Args {
    /// Install into ~/.claude/settings.json instead of the project's .claude/settings.json
    #[arg(long)]
    pub user: bool,
    /// Print the diff of every file it would change, and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Remove exactly what `triage init` added
    #[arg(long)]
    pub uninstall: bool,
}

/// What init remembers so that `--uninstall` can give the files back as they were.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    /// settings.json as it was before the first install; `None`: it did not exist.
    settings_original: Option<String>,
    /// Whether init wrote `.triage.toml`.
    toml_created: bool,
    /// `created` or `appended` when init touched `.gitignore`.
    gitignore: Option<String>,
}

/// One file's fate.
#[derive(Debug, Serialize)]
struct FileChange {
    path: PathBuf,
    action: &'static str,
    #[serde(skip)]
    before: String,
    #[serde(skip)]
    after: Option<String>,
}

#[derive(Debug, Serialize)]
struct Report {
    settings: PathBuf,
    uninstall: bool,
    dry_run: bool,
    hook_command: Option<String>,
    events_added: Vec<String>,
    events_removed: Vec<String>,
    files: Vec<FileChange>,
}

/// Runs `triage init`.
pub fn run(args: &Args, cx: &Context) -> Result<Outcome, Failure> {
    let project = cx.project();
    let settings_path = if args.user {
        home()?.join(".claude").join("settings.json")
    } else {
        project.join(".claude").join("settings.json")
    };
    let manifest_path = cx.state_root().join("init").join(format!(
        "{}.json",
        store::escape_key(&settings_path.to_string_lossy())
    ));
    let manifest = read_manifest(&manifest_path)?;
    let (report, new_manifest) = if args.uninstall {
        plan_uninstall(&settings_path, &project, args.user, manifest)?
    } else {
        plan_install(&settings_path, &project, args.user, manifest)?
    };
    let report = Report {
        dry_run: args.dry_run,
        ..report
    };
    if args.dry_run {
        return Ok(Outcome::text(diff(&report.files)));
    }
    apply(cx, &report, &manifest_path, new_manifest)?;
    if cx.global.text {
        return Ok(Outcome::text(text(&report)));
    }
    Ok(Outcome::json(&report))
}

fn home() -> Result<PathBuf, Failure> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| Failure::usage("--user needs HOME to be set"))
}

fn read_text(path: &Path) -> Result<Option<String>, Failure> {
    match store::read_optional(path)? {
        None => Ok(None),
        Some(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| Failure::data(format!("{} is not UTF-8 text", path.display()))),
    }
}

fn read_manifest(path: &Path) -> Result<Option<Manifest>, Failure> {
    let Some(text) = read_text(path)? else {
        return Ok(None);
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        Failure::data(format!(
            "{} is corrupt ({e}); move it aside and run again",
            path.display()
        ))
    })
}

fn parse_settings(path: &Path, text: &str) -> Result<Value, Failure> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(text).map_err(|e| {
        Failure::data(format!(
            "{} is not valid JSON ({e}); fix it, then run `triage init` again",
            path.display()
        ))
    })
}

fn running_binary() -> Result<String, Failure> {
    std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|e| Failure::io(format!("cannot find the running binary: {e}")))
}

fn plan_install(
    settings_path: &Path,
    project: &Path,
    user: bool,
    manifest: Option<Manifest>,
) -> Result<(Report, Option<Manifest>), Failure> {
    let command = settings::hook_command(&running_binary()?);
    let before = read_text(settings_path)?;
    let value = parse_settings(settings_path, before.as_deref().unwrap_or(""))?;
    let (after, change) = settings::install(&value, &command)
        .map_err(|e| Failure::data(format!("{}: {e}", settings_path.display())))?;
    let newline = before.as_deref().is_none_or(|b| b.ends_with('\n'));
    let mut files = Vec::new();
    let mut first = Manifest {
        settings_original: before.clone(),
        ..Manifest::default()
    };
    if !change.is_empty() {
        files.push(file_change(
            settings_path,
            before,
            Some(settings::render(&after, newline)),
        ));
    }
    if !user {
        let toml = project.join(".triage.toml");
        if read_text(&toml)?.is_none() {
            first.toml_created = true;
            files.push(file_change(&toml, None, Some(starter())));
        }
        let gitignore = project.join(".gitignore");
        let old = read_text(&gitignore)?;
        if !ignores_state(old.as_deref().unwrap_or("")) {
            first.gitignore = Some(if old.is_some() { "appended" } else { "created" }.into());
            let mut new = old.clone().unwrap_or_default();
            if !new.is_empty() && !new.ends_with('\n') {
                new.push('\n');
            }
            new.push_str(GITIGNORE_LINE);
            new.push('\n');
            files.push(file_change(&gitignore, old, Some(new)));
        }
    }
    // The first install's originals are the ones to give back; a later install keeps them.
    let manifest = match manifest {
        Some(m) => Some(Manifest {
            toml_created: m.toml_created || first.toml_created,
            gitignore: m.gitignore.or(first.gitignore),
            ..m
        }),
        None if files.is_empty() => None,
        None => Some(first),
    };
    Ok((
        report(settings_path, false, Some(command), change, files),
        manifest,
    ))
}

fn plan_uninstall(
    settings_path: &Path,
    project: &Path,
    user: bool,
    manifest: Option<Manifest>,
) -> Result<(Report, Option<Manifest>), Failure> {
    let manifest = manifest.unwrap_or_default();
    let mut files = Vec::new();
    let mut change = Change::default();
    if let Some(before) = read_text(settings_path)? {
        let value = parse_settings(settings_path, &before)?;
        let (after, removed) = settings::uninstall(&value)
            .map_err(|e| Failure::data(format!("{}: {e}", settings_path.display())))?;
        if !removed.is_empty() {
            let restored = restore(&after, &manifest.settings_original, before.ends_with('\n'));
            files.push(file_change(settings_path, Some(before), restored));
        }
        change = removed;
    }
    if !user {
        let toml = project.join(".triage.toml");
        if manifest.toml_created && read_text(&toml)?.as_deref() == Some(starter().as_str()) {
            files.push(file_change(&toml, Some(starter()), None));
        }
        let gitignore = project.join(".gitignore");
        if let (Some(how), Some(old)) = (&manifest.gitignore, read_text(&gitignore)?) {
            let line = format!("{GITIGNORE_LINE}\n");
            let new = match how.as_str() {
                "created" if old == line => None,
                _ => Some(old.strip_suffix(&line).unwrap_or(&old).to_string()),
            };
            if new.as_deref() != Some(old.as_str()) {
                files.push(file_change(&gitignore, Some(old), new));
            }
        }
    }
    Ok((report(settings_path, true, None, change, files), None))
}

/// The settings after removal: the original bytes when nothing else changed since the first
/// install (so the file comes back byte for byte), or `None` (remove the file) when there was
/// none; else the document without triage's entries.
fn restore(after: &Value, original: &Option<String>, newline: bool) -> Option<String> {
    let rendered = settings::render(after, newline);
    match original {
        Some(orig) => {
            let same = serde_json::from_str::<Value>(orig)
                .ok()
                .or_else(|| {
                    orig.trim()
                        .is_empty()
                        .then(|| Value::Object(Default::default()))
                })
                .is_some_and(|v| settings::render(&v, newline) == rendered);
            Some(if same { orig.clone() } else { rendered })
        }
        None if after.as_object().is_some_and(|m| m.is_empty()) => None,
        None => Some(rendered),
    }
}

fn starter() -> String {
    format!("{STARTER_HEADER}{STARTER}")
}

fn ignores_state(gitignore: &str) -> bool {
    gitignore
        .lines()
        .map(str::trim)
        .any(|l| matches!(l, ".triage" | ".triage/" | "/.triage" | "/.triage/"))
}

fn file_change(path: &Path, before: Option<String>, after: Option<String>) -> FileChange {
    let action = match (&before, &after) {
        (None, _) => "created",
        (Some(_), None) => "removed",
        (Some(_), Some(_)) => "updated",
    };
    FileChange {
        path: path.to_path_buf(),
        action,
        before: before.unwrap_or_default(),
        after,
    }
}

fn report(
    settings: &Path,
    uninstall: bool,
    hook_command: Option<String>,
    change: Change,
    files: Vec<FileChange>,
) -> Report {
    Report {
        settings: settings.to_path_buf(),
        uninstall,
        dry_run: false,
        hook_command,
        events_added: change.added,
        events_removed: change.removed,
        files,
    }
}

fn apply(
    cx: &Context,
    report: &Report,
    manifest_path: &Path,
    manifest: Option<Manifest>,
) -> Result<(), Failure> {
    // The manifest goes first: a crash after it and before the settings leaves a manifest of
    // the untouched originals, which is still right.
    if let Some(m) = &manifest {
        let dir = cx.ensure_root()?.join("init");
        store::ensure_dir(&dir)?;
        let bytes = serde_json::to_vec_pretty(m)
            .map_err(|e| Failure::io(format!("cannot encode the init manifest: {e}")))?;
        store::replace(manifest_path, &bytes, store::Backup::Skip)?;
    }
    for f in &report.files {
        match &f.after {
            Some(text) => {
                if let Some(dir) = f.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    store::create_dirs(dir)?;
                }
                // Only settings.json keeps a .bak: the other files are new or one line longer.
                let backup = if f.path == report.settings {
                    store::Backup::Keep
                } else {
                    store::Backup::Skip
                };
                store::replace(&f.path, text.as_bytes(), backup)?;
            }
            None => {
                store::remove(&f.path)?;
                if f.path == report.settings {
                    store::remove(&store::with_suffix(&f.path, ".bak"))?;
                }
            }
        }
    }
    if report.uninstall {
        store::remove(manifest_path)?;
    }
    Ok(())
}

fn diff(files: &[FileChange]) -> String {
    let mut out = String::new();
    for f in files {
        let name = f.path.display().to_string();
        let after = f.after.as_deref().unwrap_or("");
        let d = similar::TextDiff::from_lines(f.before.as_str(), after);
        out.push_str(
            &d.unified_diff()
                .header(&format!("a/{name}"), &format!("b/{name}"))
                .to_string(),
        );
    }
    if out.is_empty() {
        out.push_str("nothing to change\n");
    }
    out
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
