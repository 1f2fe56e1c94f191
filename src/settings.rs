//! Claude Code's `settings.json`: adding triage's hook entries and taking exactly those away
//! again, keeping every other key, hook and the order they were written in (pure: values in,
//! values out; `commands/init.rs` reads and writes the file).

use serde_json::{json, Map, Value};

/// The oldest Claude Code the hooks are written for (the README's): an event it does not know
/// is never written where the client cannot be asked its version.
pub const OLDEST_CLIENT: &str = "2.1.330";

/// The events `triage hook` answers: each with the matcher it is installed under (`None`: the
/// event has no matcher, or every occurrence is wanted) and the first Claude Code version that
/// knows it. A client that meets an event it does not know rejects the settings (2.1.330 opens
/// every interactive session on a "Settings Warning" dialog), so `init` writes only the events
/// the installed client knows.
pub const EVENTS: &[(&str, Option<&str>, &str)] = &[
    ("SessionStart", None, OLDEST_CLIENT),
    // Where words queued for the model are delivered once the user speaks again.
    ("UserPromptSubmit", None, OLDEST_CLIENT),
    ("PreToolUse", Some("*"), OLDEST_CLIENT),
    // A skill's shell command, gated as its tool is at PreToolUse.
    ("PreSkillShellCommand", Some("Bash|PowerShell"), "2.1.332"),
    ("PostToolUse", Some("*"), OLDEST_CLIENT),
    ("PostToolUseFailure", Some("*"), OLDEST_CLIENT),
    ("SubagentStop", None, OLDEST_CLIENT),
    ("Stop", None, OLDEST_CLIENT),
    ("StopFailure", None, OLDEST_CLIENT),
];

/// Whether version `v` is `min` or newer (dotted numbers compared as numbers; what follows
/// them, such as ` (Claude Code)`, is ignored).
pub fn at_least(v: &str, min: &str) -> bool {
    let parts = |s: &str| -> Vec<u64> {
        s.trim()
            .split(|c: char| !c.is_ascii_digit() && c != '.')
            .next()
            .unwrap_or("")
            .split('.')
            .map_while(|p| p.parse().ok())
            .collect()
    };
    parts(v) >= parts(min)
}

/// The Claude Code version in `claude --version`'s output (`2.1.332 (Claude Code)`).
pub fn client_version(output: &str) -> Option<String> {
    let word = output.split_whitespace().next()?;
    let ok = word.split('.').count() >= 2 && word.split('.').all(|p| p.parse::<u64>().is_ok());
    ok.then(|| word.to_string())
}

/// Whether the client `client` (`None`: not known, so the oldest supported) knows the event
/// first known by `since`.
pub fn knows(client: Option<&str>, since: &str) -> bool {
    at_least(client.unwrap_or(OLDEST_CLIENT), since)
}

/// Seconds Claude Code waits for the hook; triage answers in milliseconds, and its own lock
/// waits are bounded by `TRIAGE_LOCK_TIMEOUT`, so this only guards against a wedged machine.
pub const HOOK_TIMEOUT_S: u64 = 30;

/// The launcher `triage init` writes beside the settings it wires (`<.claude>/hooks/`, named
/// [`LAUNCHER_FILE`]): it finds `triage` on PATH's absolute entries and runs `triage hook`,
/// failing open when there is none (`hooks/launcher.sh` says how).
pub const LAUNCHER: &str = include_str!("../hooks/launcher.sh");

/// The launcher's file name, in the `hooks/` folder beside the settings file.
pub const LAUNCHER_FILE: &str = "triage-hook";

/// The command `triage init` writes into a project's settings: the launcher beside them, found
/// through the project folder the client names (no installer's path: the shared
/// `.claude/settings.json` is committed). `|| true`: a missing launcher (the shell's status
/// 2 would be a blocking answer) never blocks anyone.
///
/// The client shows the model this whole command before every blocking answer (`… hook
/// blocking error from command: "<command>": <reason>`): it is short and holds no words of
/// its own (an earlier one was 300 characters of shell, and one before it said "triage: not
/// found on PATH; hook skipped", which the model then read before every answer triage gave).
pub const HOOK_COMMAND: &str = "sh \"$CLAUDE_PROJECT_DIR/.claude/hooks/triage-hook\" || true";

/// The command for the user's own settings: the launcher at its absolute path (that file is
/// nobody else's), quoted for `sh`.
pub fn user_hook_command(launcher: &std::path::Path) -> String {
    let path = launcher.to_string_lossy().replace('\'', "'\\''");
    format!("sh '{path}' || true")
}

/// Whether `cmd` runs a launcher `triage init` wrote (`sh "…/hooks/triage-hook" || true`, or
/// StopFailure's `exec sh "…/hooks/triage-hook"`).
fn runs_launcher(cmd: &str) -> bool {
    let cmd = cmd.strip_prefix("exec ").unwrap_or(cmd);
    let cmd = cmd.strip_suffix(" || true").unwrap_or(cmd);
    cmd.strip_prefix("sh ")
        .map(|c| c.trim_matches(|q| q == '"' || q == '\''))
        .is_some_and(|c| c.ends_with(&format!("/hooks/{LAUNCHER_FILE}")))
}

/// The launcher's work in one line, for a client whose hook files hold no launcher of their
/// own (`triage init --client`): `triage` found on PATH's absolute entries, or the payload
/// drained (at most 5 s) and status 0. Claude Code's `init` wrote it before the launcher.
pub const INLINE_HOOK_COMMAND: &str = "p=; IFS=:; set -f; for d in $PATH; do case $d in /*) p=$p${p:+:}$d;; esac; done; unset IFS; set +f; PATH=${p:-/nonexistent}; command -v triage >/dev/null 2>&1 && exec triage hook; exec 3<&0; cat <&3 >/dev/null 2>&1 3<&- & c=$!; exec 3<&-; (sleep 5 && kill $c) </dev/null >/dev/null 2>&1 & wait $c 2>/dev/null; exit 0";

/// Commands earlier versions of `triage init` wrote: still ours, so a reinstall replaces them
/// and an uninstall takes them away.
const EARLIER_HOOK_COMMANDS: &[&str] = &[
    INLINE_HOOK_COMMAND,
    "p=; IFS=:; set -f; for d in $PATH; do case $d in /*) p=$p${p:+:}$d;; esac; done; unset IFS; set +f; PATH=${p:-/nonexistent}; command -v triage >/dev/null 2>&1 && exec triage hook; exec 3<&0; cat <&3 >/dev/null 2>&1 3<&- & c=$!; exec 3<&-; (sleep 5 && kill $c) </dev/null >/dev/null 2>&1 & wait $c 2>/dev/null; echo 'triage: not found on PATH; hook skipped' >&2",
    "command -v triage >/dev/null 2>&1 && exec triage hook; cat >/dev/null; echo 'triage: not found on PATH; hook skipped' >&2",
];

/// What StopFailure's command starts with. Claude Code sends StopFailure as `-p` exits and
/// sends the hook SIGTERM when it does, 20 to 80 ms after starting it (2.1.330); a kill that
/// comes while the binary is still loading loses the record. Ignored signals stay ignored
/// across `exec`, so the record (bounded by its own 25 ms lock deadline) is always finished.
pub const STOP_FAILURE_PREFIX: &str = "trap '' TERM HUP; ";

/// The command installed for `event`: StopFailure's ignores the client's exit signals, and
/// runs the launcher in place of its shell (`exec`, one process less before the record on a
/// path the client cuts short; the client ignores StopFailure's status, so a missing launcher
/// needs no `|| true` there).
pub fn event_command(event: &str, command: &str) -> String {
    if event != "StopFailure" {
        return command.to_string();
    }
    match command
        .strip_suffix(" || true")
        .filter(|c| runs_launcher(c))
    {
        Some(launcher) => format!("{STOP_FAILURE_PREFIX}exec {launcher}"),
        None => format!("{STOP_FAILURE_PREFIX}{command}"),
    }
}

/// Whether a hook handler is one that `triage init` installed (by this binary or another
/// triage binary: a reinstall at another path replaces the old entry rather than doubling it).
pub fn is_ours(handler: &Value) -> bool {
    let Some(cmd) = handler.get("command").and_then(Value::as_str) else {
        return false;
    };
    let cmd = cmd.strip_prefix(STOP_FAILURE_PREFIX).unwrap_or(cmd);
    if cmd == HOOK_COMMAND || runs_launcher(cmd) || EARLIER_HOOK_COMMANDS.contains(&cmd) {
        return true;
    }
    let Some(program) = cmd.strip_suffix(" hook") else {
        return false;
    };
    let program = program.trim_matches('\'');
    program == "triage" || program.ends_with("/triage")
}

/// What a merge or removal changed.
#[derive(Debug, Default, PartialEq)]
pub struct Change {
    /// Events that got an entry.
    pub added: Vec<String>,
    /// Events whose entry was taken away.
    pub removed: Vec<String>,
    /// Events left out, as the client does not know them: (event, first version knowing it).
    pub left_out: Vec<(String, String)>,
}

impl Change {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// The settings with triage's entries in place (exactly one per event the client `client`
/// knows, for `command`; `None`: the events every supported client knows); an entry of ours
/// for an event the client does not know is taken away; every other key and hook is kept
/// where it was.
pub fn install(
    settings: &Value,
    command: &str,
    client: Option<&str>,
) -> Result<(Value, Change), String> {
    let mut out = settings.clone();
    let root = out
        .as_object_mut()
        .ok_or("settings.json is not a JSON object")?;
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let hooks = hooks
        .as_object_mut()
        .ok_or("settings.json has a `hooks` that is not an object")?;
    let mut change = Change::default();
    for (event, matcher, since) in EVENTS {
        if !knows(client, since) {
            let groups = hooks.get_mut(*event).and_then(Value::as_array_mut);
            // A client that cannot be asked may know it: an entry already there stays.
            if client.is_none()
                && groups
                    .as_ref()
                    .is_some_and(|g| g.iter().flat_map(handlers).any(is_ours))
            {
                continue;
            }
            change.left_out.push((event.to_string(), since.to_string()));
            let Some(groups) = groups else {
                continue;
            };
            if remove_ours(groups) {
                change.removed.push(event.to_string());
                if groups.is_empty() {
                    hooks.remove(*event);
                }
            }
            continue;
        }
        let groups = hooks
            .entry(event.to_string())
            .or_insert_with(|| Value::Array(Vec::new()));
        let groups = groups
            .as_array_mut()
            .ok_or_else(|| format!("settings.json has `hooks.{event}` that is not an array"))?;
        let command = event_command(event, command);
        let command = command.as_str();
        if has_exact(groups, *matcher, command) {
            continue;
        }
        // An older entry (another path to triage) is replaced, not doubled.
        if remove_ours(groups) {
            change.removed.push(event.to_string());
        }
        groups.push(group(*matcher, command));
        change.added.push(event.to_string());
    }
    Ok((out, change))
}

/// The settings with every triage entry taken away; a group, event list or `hooks` object
/// that held only triage's entries goes too, so an install followed by an uninstall gives back
/// the original document.
pub fn uninstall(settings: &Value) -> Result<(Value, Change), String> {
    let mut out = settings.clone();
    let mut change = Change::default();
    let Some(root) = out.as_object_mut() else {
        return Err("settings.json is not a JSON object".into());
    };
    let Some(hooks) = root.get_mut("hooks").and_then(Value::as_object_mut) else {
        return Ok((out, change));
    };
    let events: Vec<String> = hooks.keys().cloned().collect();
    for event in events {
        let Some(groups) = hooks.get_mut(&event).and_then(Value::as_array_mut) else {
            continue;
        };
        let before = groups.len();
        if remove_ours(groups) {
            change.removed.push(event.clone());
            if groups.is_empty() && before > 0 {
                hooks.remove(&event);
            }
        }
    }
    if !change.removed.is_empty() && hooks.is_empty() {
        root.remove("hooks");
    }
    Ok((out, change))
}

fn group(matcher: Option<&str>, command: &str) -> Value {
    let handler = json!({"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S});
    match matcher {
        Some(m) => json!({"matcher": m, "hooks": [handler]}),
        None => json!({"hooks": [handler]}),
    }
}

fn has_exact(groups: &[Value], matcher: Option<&str>, command: &str) -> bool {
    let ours: Vec<&Value> = groups
        .iter()
        .flat_map(handlers)
        .filter(|h| is_ours(h))
        .collect();
    ours.len() == 1
        && groups.iter().any(|g| {
            g.get("matcher").and_then(Value::as_str) == matcher
                && handlers(g).any(|h| h.get("command").and_then(Value::as_str) == Some(command))
        })
}

fn handlers(group: &Value) -> impl Iterator<Item = &Value> {
    group
        .get("hooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Takes triage's handlers out of every group; a group left with no handler goes.
/// Returns whether anything was taken.
fn remove_ours(groups: &mut Vec<Value>) -> bool {
    let mut removed = false;
    groups.retain_mut(|g| {
        let Some(list) = g.get_mut("hooks").and_then(Value::as_array_mut) else {
            return true;
        };
        let before = list.len();
        list.retain(|h| !is_ours(h));
        if list.len() == before {
            return true;
        }
        removed = true;
        !list.is_empty()
    });
    removed
}

/// The indentation a settings file is written with: the whitespace before its first indented
/// line (two spaces when it has none, as Claude Code writes).
pub fn indent_of(text: &str) -> String {
    text.lines()
        .skip(1)
        .map(|l| &l[..l.len() - l.trim_start_matches([' ', '\t']).len()])
        .find(|w| !w.is_empty())
        .unwrap_or("  ")
        .to_string()
}

/// Serializes settings with the file's own indentation, keys in their original order, with a
/// final newline when the original had one.
pub fn render_with(settings: &Value, indent: &str, final_newline: bool) -> String {
    use serde::Serialize;
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    let mut s = match settings.serialize(&mut ser) {
        Ok(()) => String::from_utf8(out).unwrap_or_else(|_| "{}".into()),
        Err(_) => "{}".into(),
    };
    if final_newline {
        s.push('\n');
    }
    s
}

/// The settings file `before` with its `hooks` member made `after`'s, and nothing else of it
/// rewritten: the other members keep their bytes (a compact `"allow": ["Bash(ls)"]` stays
/// compact), and a file written on one line stays on one line. `None` when that cannot be
/// done (a member other than `hooks` differs, or the text is not one object): then
/// [`render_with`] writes the whole document.
pub fn render_edit(before: &str, after: &Value) -> Option<String> {
    let orig: Value = serde_json::from_str(before).ok()?;
    let (o, a) = (orig.as_object()?, after.as_object()?);
    let others = |m: &'_ Map<String, Value>| -> Vec<(String, Value)> {
        m.iter()
            .filter(|(k, _)| *k != "hooks")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    if others(o) != others(a) || (o.get("hooks") == a.get("hooks")) {
        return None;
    }
    let (open, close, members) = top_level(before)?;
    let one_line = !before.trim_end().contains('\n');
    // `"key": value` or `"key":value`, as the file writes it.
    let space = members
        .first()
        .is_some_and(|m| before[m.colon + 1..].starts_with(' '));
    let hooks = members.iter().position(|m| m.key == "hooks");
    // The indentation of a member's line in a file of many lines.
    let line_indent = |at: usize| -> String {
        let start = before[..at].rfind('\n').map_or(0, |i| i + 1);
        before[start..at].to_string()
    };
    let indent_unit = indent_of(before);
    let render = |v: &Value, member_indent: &str| -> Option<String> {
        if one_line {
            let s = if space {
                // serde_json's compact form has no spaces; keep the file's `, ` and `: `.
                spaced(v)
            } else {
                serde_json::to_string(v).ok()?
            };
            return Some(s);
        }
        let pretty = render_with(v, &indent_unit, false);
        Some(pretty.replace('\n', &format!("\n{member_indent}")))
    };
    let mut out = before.to_string();
    match (hooks, a.get("hooks")) {
        (Some(i), Some(v)) => {
            let m = &members[i];
            let text = render(v, &line_indent(m.key_start))?;
            out.replace_range(m.value_start..m.value_end, &text);
        }
        (Some(i), None) => {
            let m = &members[i];
            let range = if i > 0 {
                members[i - 1].value_end..m.value_end
            } else if let Some(next) = members.get(1) {
                m.key_start..next.key_start
            } else {
                open + 1..close
            };
            out.replace_range(range, "");
        }
        (None, Some(v)) => {
            let member_indent = if one_line {
                String::new()
            } else {
                members
                    .first()
                    .map_or_else(|| indent_unit.clone(), |m| line_indent(m.key_start))
            };
            let colon = if space || !one_line { ": " } else { ":" };
            let text = format!("\"hooks\"{colon}{}", render(v, &member_indent)?);
            match members.last() {
                Some(last) => {
                    let sep = match (one_line, space) {
                        (true, true) => ", ".to_string(),
                        (true, false) => ",".to_string(),
                        (false, _) => format!(",\n{member_indent}"),
                    };
                    out.insert_str(last.value_end, &format!("{sep}{text}"));
                }
                None if one_line => out.replace_range(open + 1..close, &text),
                None => out.replace_range(open + 1..close, &format!("\n{member_indent}{text}\n")),
            }
        }
        (None, None) => return None,
    }
    // Still the document asked for; anything else is a bug of the splice: write it whole.
    (serde_json::from_str::<Value>(&out).ok()? == *after).then_some(out)
}

/// Compact JSON with `, ` and `: ` between items, as a hand-written one-line file has them.
fn spaced(v: &Value) -> String {
    match v {
        Value::Array(a) => format!("[{}]", a.iter().map(spaced).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", Value::from(k.as_str()), spaced(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// One member of the top-level object: its key, and where its key, colon and value are.
struct Member {
    key: String,
    key_start: usize,
    colon: usize,
    value_start: usize,
    value_end: usize,
}

/// The top-level object of `text`: where its braces are and its members, or `None` when the
/// text is not one object.
fn top_level(text: &str) -> Option<(usize, usize, Vec<Member>)> {
    let b = text.as_bytes();
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    // The end (exclusive) of the string that starts at `i`.
    let string_end = |mut i: usize| -> Option<usize> {
        i += 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    };
    // The end (exclusive) of the value that starts at `i`.
    let value_end = |mut i: usize| -> Option<usize> {
        let mut depth = 0usize;
        loop {
            match *b.get(i)? {
                b'"' => i = string_end(i)?,
                b'{' | b'[' => {
                    depth += 1;
                    i += 1;
                }
                b'}' | b']' if depth == 0 => return Some(i),
                b'}' | b']' => {
                    depth -= 1;
                    i += 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                b',' if depth == 0 => return Some(i),
                c if depth == 0 && c.is_ascii_whitespace() => return Some(i),
                _ => i += 1,
            }
        }
    };
    let open = skip_ws(0);
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let mut members = Vec::new();
    let mut i = skip_ws(open + 1);
    loop {
        match *b.get(i)? {
            b'}' => return Some((open, i, members)),
            b',' => i = skip_ws(i + 1),
            b'"' => {
                let key_end = string_end(i)?;
                let key: String = serde_json::from_str(&text[i..key_end]).ok()?;
                let colon = skip_ws(key_end);
                if b.get(colon) != Some(&b':') {
                    return None;
                }
                let value_start = skip_ws(colon + 1);
                let end = value_end(value_start)?;
                members.push(Member {
                    key,
                    key_start: i,
                    colon,
                    value_start,
                    value_end: end,
                });
                i = skip_ws(end);
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    /// A client that knows every event.
    const ALL: Option<&str> = Some("2.1.332");
    use super::*;

    #[test]
    fn an_edit_rewrites_only_the_hooks_member() {
        let compact = r#"{"model":"opus","permissions":{"allow":["Bash(ls)"]}}"#;
        let mut v: Value = serde_json::from_str(compact).unwrap();
        v["hooks"] = json!({"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]});
        let out = render_edit(compact, &v).unwrap();
        assert_eq!(
            out,
            r#"{"model":"opus","permissions":{"allow":["Bash(ls)"]},"hooks":{"Stop":[{"hooks":[{"type":"command","command":"x"}]}]}}"#
        );
        let back = render_edit(&out, &serde_json::from_str(compact).unwrap()).unwrap();
        assert_eq!(back, compact);
        let mixed =
            "{\n  \"permissions\": {\"allow\": [\"Bash(ls)\"]},\n  \"model\": \"opus\"\n}\n";
        let mut v: Value = serde_json::from_str(mixed).unwrap();
        v["hooks"] = json!({"Stop": []});
        let out = render_edit(mixed, &v).unwrap();
        assert!(
            out.contains("\"permissions\": {\"allow\": [\"Bash(ls)\"]},"),
            "{out}"
        );
        assert!(
            out.ends_with("\"model\": \"opus\",\n  \"hooks\": {\n    \"Stop\": []\n  }\n}\n"),
            "{out}"
        );
        let spaced_one = r#"{"model": "opus"}"#;
        let mut v: Value = serde_json::from_str(spaced_one).unwrap();
        v["hooks"] = json!({"Stop": [1]});
        assert_eq!(
            render_edit(spaced_one, &v).unwrap(),
            r#"{"model": "opus", "hooks": {"Stop": [1]}}"#
        );
        assert_eq!(
            render_edit("{}", &json!({"hooks": {}})).unwrap(),
            r#"{"hooks":{}}"#
        );
    }

    const CMD: &str = "/usr/local/bin/triage hook";

    fn existing() -> Value {
        json!({
            "model": "opus",
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [
                    {"type": "command", "command": "./guard.sh"}]}],
                "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}]
            },
            "permissions": {"allow": ["Bash(ls)"]}
        })
    }

    #[test]
    fn install_keeps_every_other_key_and_hook() {
        let (out, change) = install(&existing(), CMD, ALL).unwrap();
        assert_eq!(change.added.len(), EVENTS.len());
        assert_eq!(out["model"], "opus");
        assert_eq!(out["permissions"], existing()["permissions"]);
        assert_eq!(
            out["hooks"]["Notification"],
            existing()["hooks"]["Notification"]
        );
        let pre = out["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre[0], existing()["hooks"]["PreToolUse"][0]);
        assert_eq!(pre[1]["hooks"][0]["command"], CMD);
        let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["model", "hooks", "permissions"]);
    }

    #[test]
    fn install_twice_changes_nothing() {
        let (once, _) = install(&existing(), CMD, ALL).unwrap();
        let (twice, change) = install(&once, CMD, ALL).unwrap();
        assert!(change.is_empty());
        assert_eq!(once, twice);
    }

    #[test]
    fn a_new_path_replaces_the_old_entry() {
        let (once, _) = install(&json!({}), "/old/triage hook", ALL).unwrap();
        let (twice, change) = install(&once, CMD, ALL).unwrap();
        assert_eq!(change.added.len(), EVENTS.len());
        let pre = twice["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 1);
        assert_eq!(pre[0]["hooks"][0]["command"], CMD);
    }

    #[test]
    fn uninstall_gives_back_the_original() {
        for original in [existing(), json!({}), json!({"a": [1, {"b": null}]})] {
            let (installed, _) = install(&original, CMD, ALL).unwrap();
            let (back, change) = uninstall(&installed).unwrap();
            assert_eq!(change.removed.len(), EVENTS.len());
            assert_eq!(
                render_with(&back, "  ", true),
                render_with(&original, "  ", true)
            );
        }
    }

    #[test]
    fn uninstall_keeps_a_group_shared_with_other_handlers() {
        let shared = json!({"hooks": {"Stop": [{"hooks": [
            {"type": "command", "command": "triage hook"},
            {"type": "command", "command": "./mine.sh"}]}]}});
        let (out, change) = uninstall(&shared).unwrap();
        assert_eq!(change.removed, ["Stop"]);
        assert_eq!(
            out,
            json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./mine.sh"}]}]}})
        );
    }

    #[test]
    fn odd_shapes_are_errors_not_panics() {
        assert!(install(&json!([]), CMD, ALL).is_err());
        assert!(install(&json!({"hooks": 3}), CMD, ALL).is_err());
        assert!(install(&json!({"hooks": {"Stop": {}}}), CMD, ALL).is_err());
        assert!(uninstall(&json!("x")).is_err());
        assert_eq!(
            uninstall(&json!({"hooks": 3})).unwrap().1,
            Change::default()
        );
    }

    #[test]
    fn recognises_only_triage_hook_commands() {
        let h = |c: &str| json!({"command": c});
        assert!(is_ours(&h("triage hook")));
        assert!(is_ours(&h("'/my dir/triage' hook")));
        assert!(!is_ours(&h("/bin/nottriage hook")));
        assert!(!is_ours(&h("triage hook --extra")));
        assert!(!is_ours(&json!({"type": "http"})));
    }

    #[test]
    fn the_files_own_indentation_is_kept() {
        assert_eq!(indent_of("{\n    \"a\": 1\n}\n"), "    ");
        assert_eq!(indent_of("{\n\t\"a\": [\n\t\t1\n\t]\n}"), "\t");
        assert_eq!(indent_of("{\"a\": 1}"), "  ");
        let v = json!({"a": {"b": 1}});
        assert_eq!(
            render_with(&v, "    ", true),
            "{\n    \"a\": {\n        \"b\": 1\n    }\n}\n"
        );
        assert_eq!(
            render_with(&v, "  ", false),
            serde_json::to_string_pretty(&v).unwrap()
        );
    }

    #[test]
    fn the_path_command_is_ours_and_fails_open() {
        assert!(is_ours(&json!({"command": HOOK_COMMAND})));
        // What an earlier version wrote is replaced by a reinstall, not doubled.
        let earlier = json!({"command": EARLIER_HOOK_COMMANDS[0]});
        assert!(is_ours(&earlier));
        let old = json!({"hooks": {"Stop": [{"hooks": [earlier]}]}});
        let (now, change) = install(&old, HOOK_COMMAND, ALL).unwrap();
        assert_eq!(change.removed, ["Stop"]);
        assert_eq!(now["hooks"]["Stop"].as_array().unwrap().len(), 1);
        let stop_failure = event_command("StopFailure", HOOK_COMMAND);
        assert_eq!(
            stop_failure,
            "trap '' TERM HUP; exec sh \"$CLAUDE_PROJECT_DIR/.claude/hooks/triage-hook\""
        );
        assert!(is_ours(&json!({"command": stop_failure})));
        assert!(is_ours(
            &json!({"command": event_command("StopFailure", CMD)})
        ));
        // The user's own settings run the launcher at its path, quoted for sh.
        let user = user_hook_command(std::path::Path::new(
            "/home/o'neil/.claude/hooks/triage-hook",
        ));
        assert_eq!(
            user,
            "sh '/home/o'\\''neil/.claude/hooks/triage-hook' || true"
        );
        assert!(is_ours(&json!({"command": user})));
        assert!(!is_ours(&json!({"command": "sh ./other-hook || true"})));
        // The client shows the model this text: short, no words of its own.
        assert!(HOOK_COMMAND.len() < 64, "{HOOK_COMMAND}");
        assert!(!HOOK_COMMAND.contains("not found") && !HOOK_COMMAND.contains("echo"));
    }

    /// Runs `sh -c command` with `CLAUDE_PROJECT_DIR=project`, a PATH of the shell's tools and
    /// `input` on stdin; `None` where the shell finds a triage on that PATH (the fail-open
    /// path cannot be shown there).
    fn run_without_triage(
        command: &str,
        project: &std::path::Path,
        input: &[u8],
    ) -> Option<std::process::Output> {
        use std::io::Write;
        let path = "/usr/bin:/bin";
        let found = std::process::Command::new("sh")
            .args(["-c", "command -v triage"])
            .env("PATH", path)
            .output()
            .is_ok_and(|o| o.status.success());
        if found {
            eprintln!("skipped: a triage is on {path}");
            return None;
        }
        let mut child = std::process::Command::new("sh")
            .args(["-c", command])
            .env_clear()
            .env("PATH", path)
            .env("CLAUDE_PROJECT_DIR", project)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("sh runs");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("the payload is read whole");
        Some(child.wait_with_output().expect("sh ends"))
    }

    #[test]
    fn the_command_and_its_launcher_fail_open_without_triage() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let payload = vec![b'x'; 200_000];
        // No launcher (a clone without it): status 0, nothing said; a status 2 would block.
        let Some(out) = run_without_triage(HOOK_COMMAND, dir.path(), b"{}") else {
            return;
        };
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(out.stdout.is_empty());
        // The launcher without triage on PATH: the payload drained (larger than a pipe's
        // buffer, so an undrained one fails the write above), status 0, nothing said.
        let hooks = dir.path().join(".claude/hooks");
        std::fs::create_dir_all(&hooks).expect("mkdir");
        std::fs::write(hooks.join(LAUNCHER_FILE), LAUNCHER).expect("write");
        let out = run_without_triage(HOOK_COMMAND, dir.path(), &payload).expect("checked above");
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    }

    #[test]
    fn a_skills_shell_commands_and_the_users_prompts_are_wired() {
        let (out, _) = install(&json!({}), CMD, ALL).unwrap();
        let skill = &out["hooks"]["PreSkillShellCommand"][0];
        assert_eq!(skill["matcher"], "Bash|PowerShell");
        assert_eq!(skill["hooks"][0]["command"], CMD);
        let prompt = &out["hooks"]["UserPromptSubmit"][0];
        assert!(prompt.get("matcher").is_none());
        assert_eq!(prompt["hooks"][0]["command"], CMD);
    }

    #[test]
    fn an_older_client_gets_only_the_events_it_knows_and_loses_ours_it_does_not() {
        let (all, _) = install(&json!({}), CMD, ALL).unwrap();
        assert!(all["hooks"]["PreSkillShellCommand"].is_array());
        // The same file, under 2.1.330: the newer event is taken away, said left out.
        let (old, change) = install(&all, CMD, Some("2.1.330")).unwrap();
        assert!(
            old["hooks"].get("PreSkillShellCommand").is_none(),
            "{old:#}"
        );
        assert_eq!(change.removed, ["PreSkillShellCommand"]);
        assert_eq!(
            change.left_out,
            [("PreSkillShellCommand".to_string(), "2.1.332".to_string())]
        );
        assert_eq!(old["hooks"].as_object().unwrap().len(), EVENTS.len() - 1);
        // Not knowing the client: what every supported client knows.
        let (unknown, _) = install(&json!({}), CMD, None).unwrap();
        assert_eq!(unknown, old);
        // After the client's update, again: the new event is added.
        let (again, change) = install(&old, CMD, Some("2.1.340")).unwrap();
        assert_eq!(change.added, ["PreSkillShellCommand"]);
        assert_eq!(again, all);
        // Somebody's own hook on the event the client does not know stays theirs.
        let mine = json!({"hooks": {"PreSkillShellCommand": [{"hooks": [{"type": "command", "command": "mine"}]}]}});
        let (kept, _) = install(&mine, CMD, Some("2.1.330")).unwrap();
        assert_eq!(
            kept["hooks"]["PreSkillShellCommand"],
            mine["hooks"]["PreSkillShellCommand"]
        );
    }

    #[test]
    fn versions_compare_as_numbers_and_come_from_the_clients_words() {
        assert!(at_least("2.1.332 (Claude Code)", "2.1.332"));
        assert!(at_least("2.1.1000", "2.1.332"));
        assert!(!at_least("2.1.330", "2.1.332"));
        assert!(at_least("3.0.0", "2.1.332"));
        assert_eq!(
            client_version("2.1.330 (Claude Code)\n").as_deref(),
            Some("2.1.330")
        );
        assert_eq!(client_version("command not found"), None);
        assert_eq!(client_version(""), None);
    }
}
