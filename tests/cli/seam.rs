//! Issue 20, item 1: one seam for shared state. Every persisted operation (a breaker's
//! load-apply-store, the log's append, read and resolve, its counters, the loop guard's
//! rejections, the hooks' per-session files) lives in the domain module that owns it
//! (`breaker::store` and `breaker::calls`, `error_log`, `output_check::rejections`,
//! `session`), whatever the backend; the commands are glue over them. This reads the
//! commands' source and fails when one reaches into another command's code or into those
//! files, keys or streams itself.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code lines of a file (comments and doc comments left out), with their numbers.
fn code(path: &Path) -> Vec<(usize, String)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(n, l)| (n + 1, l.to_string()))
        .collect()
}

/// The command a file under `src/commands` belongs to (`hook` for `hook/log_tail.rs`).
fn owner(commands: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(commands).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn violations(check: impl Fn(&str, &str) -> Option<String>) -> Vec<String> {
    let commands = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands");
    let mut files = Vec::new();
    sources(&commands, &mut files);
    assert!(files.len() > 10, "the commands' sources were not found");
    let mut found = Vec::new();
    for f in &files {
        let me = owner(&commands, f);
        for (n, line) in code(f) {
            if let Some(why) = check(&me, &line) {
                found.push(format!("{}:{n}: {why}: {}", f.display(), line.trim()));
            }
        }
    }
    found
}

#[test]
fn no_command_calls_another_commands_breaker_log_or_session_code() {
    // What used to be shared this way: the breaker calls, record/resolve/recover, the hook's
    // session files, the report's log path.
    let owned = [
        "breaker",
        "record_error",
        "report",
        "hook",
        "errors",
        "store",
    ];
    let found = violations(|me, line| {
        owned
            .iter()
            .filter(|m| **m != me)
            .find(|m| line.contains(&format!("commands::{m}")))
            .map(|m| format!("`{me}` reaches into `commands::{m}`"))
            .or_else(|| {
                line.contains("super::super::")
                    .then(|| "reaches into a parent command".to_string())
            })
    });
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_command_opens_the_shared_state_itself() {
    // The files, keys and streams the domain modules own, and the store calls that write the
    // log outside its seam.
    let owned = [
        "join(\"breakers\")",
        "join(\"sessions\")",
        "join(\"rejections\")",
        "errors.counters",
        "errors.pending",
        "breaker-events.jsonl",
        "fleet.outbox",
        "fleet::log::",
        "breaker_put_new",
        "read_log(",
        "Append {",
        "store::append_line",
        "store::move_lines",
        "Follower::at_end",
    ];
    let found = violations(|_, line| {
        owned
            .iter()
            .find(|o| line.contains(*o))
            .map(|o| format!("uses `{o}`"))
    });
    assert!(found.is_empty(), "{}", found.join("\n"));
}
