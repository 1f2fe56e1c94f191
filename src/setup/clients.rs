//! `triage init --client NAME` for the agent clients other than Claude Code: writes that
//! client's hook file (Codex CLI `.codex/hooks.json`, Gemini CLI `.gemini/settings.json`,
//! Cursor `.cursor/hooks.json`, Copilot CLI `.github/hooks/triage.json`; `--user`: the user's
//! own, where the client has one), merged with what is there: every other key and hook is
//! kept, triage's own entries (the launcher with `--client NAME`) are put in place once per
//! event. Again is no change. `--uninstall` takes away exactly what was added: when the file is
//! as the install left it, it comes back byte for byte as it was (or goes, with the folders
//! the install made); otherwise only triage's entries are taken out of it.

use super::{diff, file_change, read_text, FileChange};
use crate::context::Context;
use crate::exit::Failure;
use crate::hook::dialect::Client;
use crate::setup::place;
use crate::store::files;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// Seconds a client waits for the hook (as for Claude Code).
const TIMEOUT_S: u64 = crate::settings::HOOK_TIMEOUT_S;

/// The folders that show a project uses a client, and the client.
pub const FOLDERS: &[(&str, Client)] = &[
    (".codex", Client::Codex),
    (".gemini", Client::Gemini),
    (".cursor", Client::Cursor),
    (".github/hooks", Client::Copilot),
];

/// The events wired for `client`, under the client's names.
fn events(client: Client) -> &'static [&'static str] {
    match client {
        Client::Claude => &[],
        Client::Codex => &[
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "Stop",
            "SubagentStop",
            "StopFailure",
        ],
        Client::Gemini => &[
            "SessionStart",
            "BeforeAgent",
            "BeforeTool",
            "AfterTool",
            "AfterAgent",
        ],
        Client::Cursor => &[
            "sessionStart",
            "preToolUse",
            "beforeShellExecution",
            "postToolUse",
            "postToolUseFailure",
            "subagentStop",
        ],
        Client::Copilot => &[
            "preToolUse",
            "postToolUse",
            "postToolUseFailure",
            "errorOccurred",
        ],
    }
}

/// The command wired for `client`'s `event`: the same fail-open launcher as Claude Code's
/// ([`crate::settings::HOOK_COMMAND`]), its `triage hook` given `--client NAME` (and, for a
/// client whose payloads do not name their event, `--event EVENT`).
pub fn command(client: Client, event: &str) -> String {
    let base = crate::settings::HOOK_COMMAND;
    let mut args = format!(" --client {}", client.name());
    if client == Client::Copilot {
        args.push_str(&format!(" --event {event}"));
    }
    let command = match base.find("triage hook") {
        Some(at) => {
            let end = at + "triage hook".len();
            format!("{}{args}{}", &base[..end], &base[end..])
        }
        None => format!("{base}{args}"),
    };
    // Codex's StopFailure is Claude Code's: it too outlives the client's exit signals.
    crate::settings::event_command(event, &command)
}

/// Whether a hook entry's command is one `triage init --client` wrote for `client`.
fn is_ours(client: Client, handler: &Value) -> bool {
    let marker = format!("hook --client {}", client.name());
    ["command", "bash"]
        .iter()
        .filter_map(|k| handler.get(*k).and_then(Value::as_str))
        .any(|c| c.contains("triage") && c.contains(&marker))
}

/// One event's entry as the client's file writes it.
fn entry(client: Client, event: &str) -> Value {
    let command = command(client, event);
    match client {
        Client::Codex | Client::Claude => {
            json!({"hooks": [{"type": "command", "command": command, "timeout": TIMEOUT_S}]})
        }
        // Gemini CLI's timeout is in milliseconds.
        Client::Gemini => json!({"hooks": [{"type": "command", "name": "triage",
            "command": command, "timeout": TIMEOUT_S * 1000}]}),
        Client::Cursor => json!({"command": command, "timeout": TIMEOUT_S}),
        Client::Copilot => {
            json!({"type": "command", "bash": command, "timeoutSec": TIMEOUT_S})
        }
    }
}

/// The handlers of an entry: a group's `hooks` (Codex, Gemini), or the entry itself.
fn handlers_of(client: Client, e: &Value) -> Vec<&Value> {
    match client {
        Client::Codex | Client::Gemini | Client::Claude => e
            .get("hooks")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
        Client::Cursor | Client::Copilot => vec![e],
    }
}

/// Takes triage's handlers out of an event's entries; an entry left with none goes.
fn remove_ours(client: Client, list: &mut Vec<Value>) -> bool {
    let before = list.len();
    let mut removed = false;
    match client {
        Client::Codex | Client::Gemini | Client::Claude => {
            list.retain_mut(|g| {
                let Some(hs) = g.get_mut("hooks").and_then(Value::as_array_mut) else {
                    return true;
                };
                let n = hs.len();
                hs.retain(|h| !is_ours(client, h));
                if hs.len() == n {
                    return true;
                }
                removed = true;
                !hs.is_empty()
            });
        }
        Client::Cursor | Client::Copilot => list.retain(|h| !is_ours(client, h)),
    }
    removed || list.len() != before
}

/// The file with triage's entries in place, one per event; `None` when nothing changes.
fn install(client: Client, doc: &Value) -> Result<Option<Value>, String> {
    let mut out = doc.clone();
    let root = out.as_object_mut().ok_or("it is not a JSON object")?;
    if matches!(client, Client::Cursor | Client::Copilot) && !root.contains_key("version") {
        root.insert("version".into(), Value::from(1));
    }
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or("its `hooks` is not an object")?;
    for event in events(client) {
        let list = hooks
            .entry(event.to_string())
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| format!("its `hooks.{event}` is not an array"))?;
        let want = entry(client, event);
        let ours: Vec<&Value> = list
            .iter()
            .flat_map(|e| handlers_of(client, e))
            .filter(|h| is_ours(client, h))
            .collect();
        if ours.len() == 1 && list.contains(&want) {
            continue;
        }
        remove_ours(client, list);
        list.push(want);
    }
    Ok((out != *doc).then_some(out))
}

/// The file without triage's entries; an event list, and a `hooks` object, left empty go.
fn uninstall(client: Client, doc: &Value) -> Option<Value> {
    let mut out = doc.clone();
    let root = out.as_object_mut()?;
    let hooks = root.get_mut("hooks")?.as_object_mut()?;
    let names: Vec<String> = hooks.keys().cloned().collect();
    for name in names {
        if let Some(list) = hooks.get_mut(&name).and_then(Value::as_array_mut) {
            if remove_ours(client, list) && list.is_empty() {
                hooks.remove(&name);
            }
        }
    }
    if hooks.is_empty() {
        root.remove("hooks");
    }
    (out != *doc).then_some(out)
}

/// What the install changed, for the uninstall.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    /// The file as it was before the first install; `None`: it did not exist.
    original: Option<String>,
    /// The file as the install left it.
    installed: String,
    /// The folders the install created, outermost first.
    dirs_created: Vec<PathBuf>,
}

/// What `triage init --client` did (or would do): its JSON answer.
#[derive(Debug, Serialize)]
pub struct ClientReport {
    /// The client.
    pub client: &'static str,
    /// Its hook file.
    pub file: PathBuf,
    /// Whether it took triage away.
    pub uninstall: bool,
    /// The files changed.
    pub files: Vec<FileChange>,
}

/// `triage init --client`'s plan.
pub struct ClientPlan {
    /// The changes.
    pub report: ClientReport,
    record: Option<Record>,
    record_path: PathBuf,
    project: PathBuf,
    dirs_to_remove: Vec<PathBuf>,
}

/// The client's hook file in the project (or, `user`, the user's own).
fn hook_file(client: Client, project: &Path, user: bool) -> Result<PathBuf, Failure> {
    let scope = if user {
        match client {
            Client::Codex => std::env::var_os("CODEX_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map_or_else(|| place::home().map(|h| h.join(".codex")), Ok)?,
            Client::Gemini => place::home()?.join(".gemini"),
            Client::Cursor => place::home()?.join(".cursor"),
            _ => {
                return Err(Failure::usage(format!(
                    "--user: {} reads hooks from the repository only (.github/hooks/); run it without --user in the project",
                    client.name()
                )))
            }
        }
    } else {
        project.to_path_buf()
    };
    Ok(match (client, user) {
        (Client::Codex, true) => scope.join("hooks.json"),
        (Client::Codex, false) => scope.join(".codex/hooks.json"),
        (Client::Gemini, true) => scope.join("settings.json"),
        (Client::Gemini, false) => scope.join(".gemini/settings.json"),
        (Client::Cursor, true) => scope.join("hooks.json"),
        (Client::Cursor, false) => scope.join(".cursor/hooks.json"),
        _ => scope.join(".github/hooks/triage.json"),
    })
}

/// Plans `triage init --client NAME` (`uninstall`: `--uninstall`).
pub fn plan(
    cx: &Context,
    client: Client,
    user: bool,
    uninstall: bool,
) -> Result<ClientPlan, Failure> {
    let project = place::project_root(cx)?;
    let path = hook_file(client, &project, user)?;
    let record_dir = if user {
        place::user_config_dir()?.join("triage").join("init")
    } else {
        cx.global
            .dir
            .clone()
            .unwrap_or_else(|| project.join(".triage"))
            .join("init")
    };
    let record_path = record_dir.join(format!(
        "{}.json",
        files::escape_key(&path.to_string_lossy())
    ));
    let record: Option<Record> = match read_text(&record_path)? {
        Some(t) => Some(serde_json::from_str(&t).map_err(|e| {
            Failure::data(format!(
                "{} is corrupt ({e}); move it aside and run again",
                record_path.display()
            ))
        })?),
        None => None,
    };
    let before = read_text(&path)?;
    let doc = match before.as_deref().map(str::trim) {
        None | Some("") => Value::Object(Map::new()),
        Some(t) => serde_json::from_str(t).map_err(|e| {
            Failure::data(format!(
                "{} is not valid JSON ({e}); fix it, then run `triage init --client {}` again",
                path.display(),
                client.name()
            ))
        })?,
    };
    let bad = |e: String| Failure::data(format!("{}: {e}", path.display()));
    let mut files = Vec::new();
    let mut dirs_to_remove = Vec::new();
    let new_record = if uninstall {
        match (&record, &before) {
            // As the install left it: back to the bytes it had, or gone.
            (Some(r), Some(now)) if *now == r.installed => {
                files.push(file_change(&path, before.clone(), r.original.clone()));
                if r.original.is_none() {
                    dirs_to_remove = r.dirs_created.iter().rev().cloned().collect();
                }
            }
            _ => {
                if let Some(after) = uninstall_text(client, &doc, before.as_deref()) {
                    files.push(file_change(&path, before.clone(), Some(after)));
                }
            }
        }
        None
    } else {
        let after = install(client, &doc).map_err(bad)?;
        match after {
            None => None,
            Some(after) => {
                let text = render(&after, before.as_deref());
                let mut dirs = Vec::new();
                let mut d = path.parent();
                while let Some(dir) = d.filter(|d| !d.exists() && *d != project) {
                    dirs.push(dir.to_path_buf());
                    d = dir.parent();
                }
                dirs.reverse();
                // The first install's original is the one an uninstall gives back.
                let rec = Record {
                    original: record
                        .as_ref()
                        .map_or(before.clone(), |r| r.original.clone()),
                    installed: text.clone(),
                    dirs_created: record.as_ref().map_or(dirs, |r| r.dirs_created.clone()),
                };
                files.push(file_change(&path, before.clone(), Some(text)));
                Some(rec)
            }
        }
    };
    Ok(ClientPlan {
        report: ClientReport {
            client: client.name(),
            file: path,
            uninstall,
            files,
        },
        record: new_record,
        record_path,
        project,
        dirs_to_remove,
    })
}

/// The file without triage's entries, as text; `None` when there are none. A file left with
/// no member but what the install adds (`version`) is removed.
fn uninstall_text(client: Client, doc: &Value, before: Option<&str>) -> Option<String> {
    let after = uninstall(client, doc)?;
    Some(render(&after, before))
}

/// A document in the indentation of the text it replaces (two spaces for a new file), with a
/// final newline.
fn render(v: &Value, before: Option<&str>) -> String {
    let indent = crate::settings::indent_of(before.unwrap_or(""));
    let newline = before.is_none_or(|b| b.ends_with('\n') || b.is_empty());
    crate::settings::render_with(v, &indent, newline)
}

impl ClientPlan {
    /// The unified diff of every change (`--dry-run`).
    pub fn diff(&self) -> String {
        diff(&self.report.files, &self.project)
    }

    /// Makes the changes.
    pub fn apply(self) -> Result<ClientReport, Failure> {
        if let Some(r) = &self.record {
            if let Some(dir) = self.record_path.parent() {
                files::ensure_dir(dir)?;
            }
            let bytes = serde_json::to_vec_pretty(r)
                .map_err(|e| Failure::io(format!("cannot encode the init record: {e}")))?;
            files::replace(&self.record_path, &bytes, files::Backup::Skip)?;
        }
        for f in &self.report.files {
            match &f.after {
                Some(text) => {
                    if let Some(dir) = f.path.parent() {
                        files::create_dirs(dir)?;
                    }
                    files::replace(&f.path, text.as_bytes(), files::Backup::Skip)?;
                }
                None => remove(&f.path)?,
            }
        }
        for dir in &self.dirs_to_remove {
            // Only an empty folder goes: anything put there since stays.
            let _ = std::fs::remove_dir(dir);
        }
        if self.report.uninstall && !self.report.files.is_empty() {
            remove(&self.record_path)?;
        }
        Ok(self.report)
    }
}

fn remove(path: &Path) -> Result<(), Failure> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Failure::io(format!(
            "cannot remove {}: {e}",
            path.display()
        ))),
    }
}

/// The client folders in `project` (`.codex/`, ...), for `init` without `--client` to name.
pub fn found(project: &Path) -> Vec<(&'static str, Client)> {
    FOLDERS
        .iter()
        .filter(|(dir, _)| project.join(dir).is_dir())
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command of the Codex plugin's hook for `event` (`plugin/hooks/codex.json`): the
    /// plugin's launcher, found through the root Codex gives a plugin's hooks.
    fn codex_plugin_command(event: &str) -> String {
        crate::settings::event_command(
            event,
            "sh \"${PLUGIN_ROOT}/bin/triage\" hook --client codex",
        )
    }

    /// The Codex plugin's hooks file (`plugin/hooks/codex.json`, named by
    /// `plugin/.codex-plugin/plugin.json`): every event `init --client codex` wires, each
    /// running the plugin's launcher.
    fn codex_plugin_hooks() -> Value {
        let mut hooks = Map::new();
        for event in events(Client::Codex) {
            hooks.insert(
                (*event).to_string(),
                json!([{"hooks": [{"type": "command", "command": codex_plugin_command(event), "timeout": TIMEOUT_S}]}]),
            );
        }
        json!({
            "description": "triage hook on every event `triage init --client codex` wires, through the plugin's launcher, which fails open when no triage binary is found.",
            "hooks": hooks,
        })
    }

    /// The Codex plugin (`plugin/.codex-plugin/plugin.json`) names its own hooks file, which
    /// Codex then loads instead of `hooks/hooks.json` (Claude Code's); that file wires what
    /// `init --client codex` wires, through the plugin's launcher.
    #[test]
    fn the_codex_plugin_wires_what_init_wires() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin");
        let read = |p: &str| -> Value {
            serde_json::from_str(&std::fs::read_to_string(root.join(p)).unwrap()).unwrap()
        };
        assert_eq!(
            read(".codex-plugin/plugin.json")["hooks"],
            "./hooks/codex.json"
        );
        assert_eq!(read("hooks/codex.json"), codex_plugin_hooks());
        let installed = install(Client::Codex, &json!({})).unwrap().unwrap();
        let keys = |v: &Value| {
            v["hooks"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(&read("hooks/codex.json")), keys(&installed));
    }

    #[test]
    fn the_command_is_the_launcher_with_the_client_named() {
        let c = command(Client::Codex, "PreToolUse");
        assert!(c.contains("triage hook --client codex"), "{c}");
        let c = command(Client::Copilot, "preToolUse");
        assert!(
            c.contains("triage hook --client copilot --event preToolUse"),
            "{c}"
        );
        assert!(is_ours(Client::Copilot, &json!({"bash": c})));
        assert!(!is_ours(
            Client::Cursor,
            &json!({"command": command(Client::Codex, "x")})
        ));
    }

    #[test]
    fn install_keeps_other_hooks_and_is_idempotent_and_uninstall_undoes_it() {
        for client in [
            Client::Codex,
            Client::Gemini,
            Client::Cursor,
            Client::Copilot,
        ] {
            let theirs = match client {
                Client::Codex | Client::Gemini => {
                    json!({"theme": "dark", "hooks": {events(client)[0]: [{"hooks": [{"type": "command", "command": "./mine.sh"}]}]}})
                }
                _ => {
                    json!({"version": 1, "hooks": {events(client)[0]: [{"command": "./mine.sh"}]}})
                }
            };
            let once = install(client, &theirs).unwrap().expect("a change");
            assert_eq!(
                install(client, &once).unwrap(),
                None,
                "{client:?}: again, no change"
            );
            let list = once["hooks"][events(client)[0]].as_array().unwrap();
            assert_eq!(list.len(), 2, "{client:?}: theirs kept beside ours");
            assert_eq!(uninstall(client, &once), Some(theirs.clone()), "{client:?}");
            assert_eq!(uninstall(client, &theirs), None);
        }
    }
}
