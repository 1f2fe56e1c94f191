//! Setting a project up for triage (`triage init`): wire `triage hook` into Claude Code's
//! `settings.json` in one step, keeping
//! every existing key and hook and the file's own indentation; write a starter `.triage.toml`
//! and ignore `.triage/` in git. `--local` touches only the person's own files: the project's
//! `.claude/settings.local.json`, and `.triage/` ignored in the repository's `info/exclude`
//! (no `.triage.toml`, no `.gitignore`: both are shared). `--uninstall` takes away exactly what was added: when nothing
//! else changed in between, every file it touched comes back byte for byte (the originals are
//! kept in `<project>/.triage/init/`, or for `--user` under the user's config folder); the
//! state triage wrote meanwhile stays in `.triage/`, which then ignores itself.
//!
//! The project is found as a Claude Code session would see it: `$CLAUDE_PROJECT_DIR` when
//! set; else, inside a git work tree, the nearest folder at or above this one that already has
//! Claude Code settings, or the work tree's top; else this folder ([`place`]).

pub mod clients;
mod gitignore;
pub mod place;

use crate::context::Context;
use crate::exit::Failure;
use crate::settings::{self, Change};
use crate::store::files;
use gitignore::{ignores_state, with_state_line, without_state_line};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The starter policy: quiet and right for any project (`hooks/triage.starter.toml`); the
/// seeds' project-specific agent rules stay an opt-in example in `hooks/triage.example.toml`.
pub const STARTER: &str = include_str!("../hooks/triage.starter.toml");

const STARTER_HEADER: &str = "\
# triage policy: written by `triage init` (hooks/triage.starter.toml).
# Every section is optional; what is left out takes the built-in defaults
# (`triage config show` prints them). Check your edits with `triage config check .triage.toml`.
#
";

/// What init remembers so that `--uninstall` can give the files back as they were.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    /// settings.json as it was before the first install; `None`: it did not exist.
    settings_original: Option<String>,
    /// Whether init wrote `.triage.toml`.
    toml_created: bool,
    /// `created` or `appended` when init touched `.gitignore`.
    gitignore: Option<String>,
    /// `.gitignore` as it was before init appended to it.
    #[serde(default)]
    gitignore_original: Option<String>,
    /// The ignore file init added `.triage/` to when it is not the project's `.gitignore`
    /// (`--local`: the repository's `info/exclude`).
    #[serde(default)]
    ignore_file: Option<PathBuf>,
    /// Whether init created that file's folder (`info/`).
    #[serde(default)]
    ignore_dir_created: bool,
    /// The settings file's `.bak` as it was before the first install (`None`: there was none),
    /// for a record of an older triage, which kept the previous settings beside them.
    #[serde(default)]
    settings_bak_original: Option<String>,
    /// Whether the install kept the previous settings as a `.bak` beside them (an older
    /// triage did: its records lack the field); `false`, it keeps them beside this record.
    #[serde(default = "kept_beside")]
    settings_bak_beside: bool,
    /// Whether init created the settings file's folder (`.claude/`).
    #[serde(default)]
    settings_dir_created: bool,
}

/// A record without `settings_bak_beside` is an older triage's, which kept the `.bak` beside
/// the settings.
fn kept_beside() -> bool {
    true
}

/// Where init keeps the settings as they were before it changed them: beside its record (in
/// the state root, which git ignores, or for `--user` in the user's config folder), never
/// beside the settings, where a `.bak` would be an untracked file in the project.
fn settings_backup(manifest_path: &Path) -> PathBuf {
    manifest_path.with_extension("bak")
}

/// One file's fate.
#[derive(Debug, Serialize)]
pub struct FileChange {
    /// The file.
    pub path: PathBuf,
    /// `created`, `updated` or `removed`.
    pub action: &'static str,
    #[serde(skip)]
    before: String,
    #[serde(skip)]
    after: Option<String>,
}

/// What init did (or would do): its JSON answer.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The settings file.
    pub settings: PathBuf,
    /// What to give back besides the files (uninstall only).
    #[serde(skip)]
    restore: Option<Manifest>,
    /// Whether it took triage away.
    pub uninstall: bool,
    dry_run: bool,
    hook_command: Option<String>,
    events_added: Vec<String>,
    events_removed: Vec<String>,
    /// Events left out, as the installed client does not know them: each with the first
    /// Claude Code version that does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    events_left_out: Vec<LeftOut>,
    /// The installed Claude Code's version, when it could be told.
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<String>,
    /// What to know of the client and the events left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_note: Option<String>,
    /// The files changed.
    pub files: Vec<FileChange>,
}

/// An event left out, and the first Claude Code version that knows it.
#[derive(Debug, serde::Serialize)]
struct LeftOut {
    event: String,
    since: String,
}

/// What init will change, and the record that lets `--uninstall` give it back.
pub struct Plan {
    /// The changes.
    pub report: Report,
    manifest: Option<Manifest>,
    manifest_path: PathBuf,
    project: PathBuf,
}

/// Plans `triage init` (`uninstall`: `--uninstall`) into the user's settings (`user`), the
/// project's local ones (`local`), or the project's shared ones.
pub fn plan(
    cx: &Context,
    user: bool,
    local: bool,
    uninstall: bool,
    dry_run: bool,
) -> Result<Plan, Failure> {
    let project = place::project_root(cx)?;
    let (settings_path, manifest_dir) = if user {
        let settings = place::claude_config_dir()?.join("settings.json");
        (
            settings,
            place::user_config_dir()?.join("triage").join("init"),
        )
    } else {
        let name = if local {
            "settings.local.json"
        } else {
            "settings.json"
        };
        let state = cx
            .global
            .dir
            .clone()
            .unwrap_or_else(|| project.join(".triage"));
        (project.join(".claude").join(name), state.join("init"))
    };
    let manifest_path = manifest_dir.join(format!(
        "{}.json",
        files::escape_key(&settings_path.to_string_lossy())
    ));
    let manifest = read_manifest(&manifest_path)?;
    let (report, new_manifest) = if uninstall {
        plan_uninstall(&settings_path, &project, user, manifest)?
    } else {
        // The events written are the ones the installed client knows.
        let client = place::claude_version(std::time::Duration::from_secs(10));
        plan_install(
            &settings_path,
            &project,
            Scope::of(user, local),
            manifest,
            client,
        )?
    };
    Ok(Plan {
        report: Report { dry_run, ..report },
        manifest: new_manifest,
        manifest_path,
        project,
    })
}

impl Plan {
    /// The unified diff of every change (`--dry-run`).
    pub fn diff(&self) -> String {
        diff(&self.report.files, &self.project)
    }

    /// Makes the changes.
    pub fn apply(self) -> Result<Report, Failure> {
        apply(&self.report, &self.manifest_path, self.manifest)?;
        Ok(self.report)
    }
}

fn read_text(path: &Path) -> Result<Option<String>, Failure> {
    match files::read_optional(path)? {
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

/// Where init installs: the project's shared files, the person's own files in the project
/// (`--local`), or the user's settings (`--user`).
#[derive(Clone, Copy, PartialEq)]
enum Scope {
    Shared,
    Local,
    User,
}

impl Scope {
    fn of(user: bool, local: bool) -> Scope {
        match (user, local) {
            (true, _) => Scope::User,
            (false, true) => Scope::Local,
            (false, false) => Scope::Shared,
        }
    }
}

/// The file `.triage/` is ignored in: the project's `.gitignore` (shared, committed), or for
/// `--local` the repository's `info/exclude` (this clone only; `None` outside git); the user's
/// settings need none.
fn ignore_file(project: &Path, scope: Scope) -> Option<PathBuf> {
    match scope {
        Scope::Shared => Some(project.join(".gitignore")),
        Scope::Local => place::git_exclude(project),
        Scope::User => None,
    }
}

fn plan_install(
    settings_path: &Path,
    project: &Path,
    scope: Scope,
    manifest: Option<Manifest>,
    client: Result<String, String>,
) -> Result<(Report, Option<Manifest>), Failure> {
    let command = settings::HOOK_COMMAND.to_string();
    let before = read_text(settings_path)?;
    let value = parse_settings(settings_path, before.as_deref().unwrap_or(""))?;
    let (after, change) = settings::install(&value, &command, client.as_deref().ok())
        .map_err(|e| Failure::data(format!("{}: {e}", settings_path.display())))?;
    let client_note = client_note(&client, &change);
    let newline = before.as_deref().is_none_or(|b| b.ends_with('\n'));
    let indent = settings::indent_of(before.as_deref().unwrap_or(""));
    let mut files = Vec::new();
    let mut first = Manifest {
        settings_original: before.clone(),
        settings_bak_original: None,
        settings_bak_beside: false,
        settings_dir_created: settings_path.parent().is_some_and(|d| !d.exists()),
        ..Manifest::default()
    };
    if !change.is_empty() {
        // Only the `hooks` member is rewritten: a compact file stays compact.
        let text = before
            .as_deref()
            .and_then(|b| settings::render_edit(b, &after))
            .unwrap_or_else(|| settings::render_with(&after, &indent, newline));
        files.push(file_change(settings_path, before, Some(text)));
    }
    // The policy is shared: only the project's shared install writes a starter one.
    if scope == Scope::Shared {
        let toml = project.join(".triage.toml");
        if read_text(&toml)?.is_none() {
            first.toml_created = true;
            files.push(file_change(&toml, None, Some(starter())));
        }
    }
    if let Some(ignore) = ignore_file(project, scope) {
        let old = read_text(&ignore)?;
        // Already ignored where the whole team's clones see it: nothing to add.
        let shared = match scope {
            Scope::Local => read_text(&project.join(".gitignore"))?,
            _ => None,
        };
        let ignored = [&old, &shared]
            .into_iter()
            .any(|t| ignores_state(t.as_deref().unwrap_or("")));
        if !ignored {
            first.gitignore = Some(if old.is_some() { "appended" } else { "created" }.into());
            first.gitignore_original = old.clone();
            if scope == Scope::Local {
                first.ignore_dir_created = ignore.parent().is_some_and(|d| !d.exists());
                first.ignore_file = Some(ignore.clone());
            }
            let new = with_state_line(old.as_deref());
            files.push(file_change(&ignore, old, Some(new)));
        }
    }
    // The first install's originals are the ones to give back; a later install keeps them.
    let manifest = match manifest {
        Some(m) => Some(Manifest {
            toml_created: m.toml_created || first.toml_created,
            gitignore: m.gitignore.clone().or(first.gitignore),
            gitignore_original: if m.gitignore.is_some() {
                m.gitignore_original.clone()
            } else {
                first.gitignore_original
            },
            ignore_file: if m.gitignore.is_some() {
                m.ignore_file.clone()
            } else {
                first.ignore_file
            },
            ignore_dir_created: if m.gitignore.is_some() {
                m.ignore_dir_created
            } else {
                first.ignore_dir_created
            },
            ..m
        }),
        None if files.is_empty() => None,
        None => Some(first),
    };
    let mut report = report(settings_path, false, Some(command), change, files);
    report.client = client.ok();
    report.client_note = client_note;
    Ok((report, manifest))
}

/// What `init` says of the client it wrote the events for, and of the events it left out.
fn client_note(client: &Result<String, String>, change: &Change) -> Option<String> {
    let left: Vec<String> = change
        .left_out
        .iter()
        .map(|(event, since)| format!("{event} (Claude Code {since} or later)"))
        .collect();
    match (client, left.is_empty()) {
        (Ok(_), true) => None,
        (Ok(v), false) => Some(format!(
            "left out {}: this Claude Code is {v}; run `triage init` again after updating it",
            left.join(", ")
        )),
        (Err(why), _) => Some(format!(
            "cannot tell which Claude Code is installed ({why}): wrote the events every Claude Code since {} knows{}",
            settings::OLDEST_CLIENT,
            if left.is_empty() {
                String::new()
            } else {
                format!("; left out {}", left.join(", "))
            }
        )),
    }
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
            let indent = settings::indent_of(&before);
            let restored = restore(
                &after,
                &manifest.settings_original,
                &before,
                &indent,
                before.ends_with('\n'),
            );
            files.push(file_change(settings_path, Some(before), restored));
        }
        change = removed;
    }
    if !user {
        let toml = project.join(".triage.toml");
        if manifest.toml_created && read_text(&toml)?.as_deref() == Some(starter().as_str()) {
            files.push(file_change(&toml, Some(starter()), None));
        }
        // The file init added the line to (an older `--local` wrote `.gitignore` too).
        let gitignore = manifest
            .ignore_file
            .clone()
            .unwrap_or_else(|| project.join(".gitignore"));
        if let (Some(how), Some(old)) = (&manifest.gitignore, read_text(&gitignore)?) {
            let new = without_state_line(
                &old,
                manifest.gitignore_original.as_deref(),
                how == "created",
            );
            let new = match new {
                Some(n) if n.is_empty() && how == "created" => None,
                n => n,
            };
            if new.as_deref() != Some(old.as_str()) {
                let unignored = !ignores_state(new.as_deref().unwrap_or(""));
                files.push(file_change(&gitignore, Some(old), new));
                if unignored {
                    files.extend(state_kept_ignored(project)?);
                }
            }
        }
    }
    let mut report = report(settings_path, true, None, change, files);
    report.restore = Some(manifest);
    Ok((report, None))
}

/// What triage wrote while it was installed (the error log, breakers, …) stays in
/// `<project>/.triage/` after `--uninstall`: the user's ignore file gets its own bytes back,
/// so the state root ignores itself instead (`.triage/.gitignore` with `*`, as pytest's cache
/// does), and is never committed by accident. Nothing when the root holds only init's record
/// (it goes with the uninstall) or already ignores itself.
fn state_kept_ignored(project: &Path) -> Result<Option<FileChange>, Failure> {
    let root = project.join(".triage");
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Ok(None);
    };
    let kept = entries
        .flatten()
        .any(|e| e.file_name() != "init" && e.file_name() != ".gitignore");
    let own = root.join(".gitignore");
    if !kept || read_text(&own)?.is_some() {
        return Ok(None);
    }
    Ok(Some(file_change(
        &own,
        None,
        Some(STATE_IGNORES_ITSELF.into()),
    )))
}

/// `.triage/.gitignore` after an uninstall: the folder ignores itself, whatever the project's
/// ignore files say.
const STATE_IGNORES_ITSELF: &str =
    "# triage's state (written by `triage init --uninstall`): never committed\n*\n";

/// The settings after removal: the original bytes when nothing else changed since the first
/// install (so the file comes back byte for byte), or `None` (remove the file) when there was
/// none; else the document without triage's entries.
fn restore(
    after: &Value,
    original: &Option<String>,
    current: &str,
    indent: &str,
    newline: bool,
) -> Option<String> {
    let rendered = settings::render_edit(current, after)
        .unwrap_or_else(|| settings::render_with(after, indent, newline));
    match original {
        Some(orig) => {
            let same = serde_json::from_str::<Value>(orig)
                .ok()
                .or_else(|| {
                    orig.trim()
                        .is_empty()
                        .then(|| Value::Object(Default::default()))
                })
                .is_some_and(|v| &v == after);
            Some(if same { orig.clone() } else { rendered })
        }
        None if after.as_object().is_some_and(|m| m.is_empty()) => None,
        None => Some(rendered),
    }
}

fn starter() -> String {
    format!("{STARTER_HEADER}{STARTER}")
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
        restore: None,
        uninstall,
        dry_run: false,
        hook_command,
        events_added: change.added,
        events_removed: change.removed,
        events_left_out: change
            .left_out
            .into_iter()
            .map(|(event, since)| LeftOut { event, since })
            .collect(),
        client: None,
        client_note: None,
        files,
    }
}

fn apply(report: &Report, manifest_path: &Path, manifest: Option<Manifest>) -> Result<(), Failure> {
    // The manifest goes first: a crash after it and before the settings leaves a manifest of
    // the untouched originals, which is still right.
    if let Some(m) = &manifest {
        if let Some(dir) = manifest_path.parent() {
            files::ensure_dir(dir)?;
        }
        let bytes = serde_json::to_vec_pretty(m)
            .map_err(|e| Failure::io(format!("cannot encode the init manifest: {e}")))?;
        files::replace(manifest_path, &bytes, files::Backup::Skip)?;
    }
    for f in &report.files {
        match &f.after {
            Some(text) => {
                if let Some(dir) = f.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    files::create_dirs(dir)?;
                }
                // Only the settings are kept as they were (the other files are new or one
                // line longer), beside init's record: an install can be undone by hand too.
                if f.path == report.settings && !report.uninstall && f.action != "created" {
                    files::replace(
                        &settings_backup(manifest_path),
                        f.before.as_bytes(),
                        files::Backup::Skip,
                    )?;
                }
                files::replace(&f.path, text.as_bytes(), files::Backup::Skip)?;
            }
            None => files::remove(&f.path)?,
        }
    }
    if let Some(m) = &report.restore {
        // The settings' .bak as it was before the first install (where an older triage kept
        // one beside them), and no .claude/ left empty by init.
        let bak = files::with_suffix(&report.settings, ".bak");
        if m.settings_bak_beside && report.files.iter().any(|f| f.path == report.settings) {
            match &m.settings_bak_original {
                Some(text) => {
                    files::replace(&bak, text.as_bytes(), files::Backup::Skip)?;
                }
                None => files::remove(&bak)?,
            }
        }
        if m.settings_dir_created {
            if let Some(dir) = report.settings.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
        // Only when empty, like `.claude/`.
        if let (true, Some(file)) = (m.ignore_dir_created, &m.ignore_file) {
            if let Some(dir) = file.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
    if report.uninstall {
        files::remove(&settings_backup(manifest_path))?;
        files::remove(manifest_path)?;
        if let Some(dir) = manifest_path.parent() {
            // Only when empty: another settings file's record may live beside it.
            let _ = std::fs::remove_dir(dir);
        }
    }
    Ok(())
}

/// The unified diff of every change, named like `git diff` names them: `a/.claude/settings.json`
/// for a file of the project, the absolute path for one outside it.
fn diff(files: &[FileChange], project: &Path) -> String {
    let mut out = String::new();
    for f in files {
        let (a, b) = match f.path.strip_prefix(project) {
            Ok(rel) => {
                let rel = rel.display();
                (format!("a/{rel}"), format!("b/{rel}"))
            }
            Err(_) => (f.path.display().to_string(), f.path.display().to_string()),
        };
        let after = f.after.as_deref().unwrap_or("");
        let d = similar::TextDiff::from_lines(f.before.as_str(), after);
        out.push_str(&d.unified_diff().header(&a, &b).to_string());
    }
    if out.is_empty() {
        out.push_str("nothing to change\n");
    }
    out
}
