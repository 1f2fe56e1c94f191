//! The state root never shows up in `git status`: it carries a `.gitignore` of its own (`*`)
//! from the moment triage makes it, an existing default root gets one at its next write, one
//! already there (the user's, or a link) is never replaced, and `triage init` leaves no
//! untracked `settings.json.bak` in the project.

use crate::common::{skip_unless_tool, Sandbox};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const FAILURE: &str = r#"{"hook_event_name":"PostToolUseFailure","session_id":"s1","tool_name":"Bash","tool_use_id":"t1","error":"boom"}"#;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn hook(s: &Sandbox) {
    s.triage(["hook"])
        .env("TRIAGE_NOW", "2026-11-23T10:00:00Z")
        .stdin(FAILURE)
        .run()
        .status(0);
}

#[test]
fn a_hook_call_in_a_fresh_git_repository_leaves_nothing_for_git_status() {
    if !skip_unless_tool("git", "TRIAGE_REQUIRE_GIT") {
        return;
    }
    let s = Sandbox::new();
    git(s.path(), &["init", "-q", "."]);
    hook(&s);
    assert!(s.root().join("logs/errors.jsonl").is_file());
    assert_eq!(
        git(s.path(), &["status", "--porcelain", "--ignored=no"]),
        ""
    );
    // And `git add -A` commits none of it.
    git(s.path(), &["add", "-A"]);
    assert_eq!(git(s.path(), &["diff", "--cached", "--name-only"]), "");
    let ignore = s.root().join(".gitignore");
    assert!(std::fs::read_to_string(&ignore)
        .unwrap()
        .lines()
        .any(|l| l == "*"));
    let mode = std::fs::metadata(&ignore).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn an_existing_root_gets_its_gitignore_at_the_next_write_and_a_users_own_is_kept() {
    if !skip_unless_tool("git", "TRIAGE_REQUIRE_GIT") {
        return;
    }
    // A root an older triage made, without one.
    let s = Sandbox::new();
    git(s.path(), &["init", "-q", "."]);
    std::fs::create_dir(s.root()).unwrap();
    std::fs::set_permissions(s.root(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::create_dir(s.root().join("logs")).unwrap();
    std::fs::write(s.root().join("logs/old.txt"), "x").unwrap();
    assert_ne!(git(s.path(), &["status", "--porcelain"]), "");
    hook(&s);
    assert_eq!(git(s.path(), &["status", "--porcelain"]), "");

    // One of the user's own is never replaced.
    let s = Sandbox::new();
    std::fs::create_dir(s.root()).unwrap();
    std::fs::set_permissions(s.root(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(s.root().join(".gitignore"), "logs/\n").unwrap();
    hook(&s);
    assert_eq!(s.read(".triage/.gitignore"), "logs/\n");

    // Nor a link there, nor what it points to.
    let s = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "mine\n").unwrap();
    std::fs::create_dir(s.root()).unwrap();
    std::fs::set_permissions(s.root(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&victim, s.root().join(".gitignore")).unwrap();
    hook(&s);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine\n");
    assert!(std::fs::symlink_metadata(s.root().join(".gitignore"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_root_the_user_named_gets_a_gitignore_only_when_triage_made_it() {
    let s = Sandbox::new();
    // Made by triage: all of it is triage's.
    s.triage(["--dir", "made", "hook"])
        .stdin(FAILURE)
        .run()
        .status(0);
    assert!(s.path().join("made/.gitignore").is_file());
    // A folder of the user's own: left as it is.
    let own = s.path().join("own");
    std::fs::create_dir(&own).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o700)).unwrap();
    s.triage(["--dir", "own", "hook"])
        .stdin(FAILURE)
        .run()
        .status(0);
    assert!(own.join("logs/errors.jsonl").is_file());
    assert!(!own.join(".gitignore").exists());
}

#[test]
fn init_in_a_git_repository_leaves_no_untracked_backup_of_the_settings() {
    if !skip_unless_tool("git", "TRIAGE_REQUIRE_GIT") {
        return;
    }
    let s = Sandbox::new();
    git(s.path(), &["init", "-q", "."]);
    s.write(".claude/settings.json", "{\n  \"model\": \"opus\"\n}\n");
    s.write(".gitignore", "target/\n");
    git(s.path(), &["add", "-A"]);
    git(s.path(), &["commit", "-q", "-m", "start"]);
    s.triage(["init"]).run().status(0);
    let status = git(
        s.path(),
        &["status", "--porcelain", "--untracked-files=all"],
    );
    let untracked: Vec<&str> = status.lines().filter(|l| l.starts_with("??")).collect();
    // Only the hook launcher and the starter policy are new (both for the team to commit);
    // the settings and .gitignore are changed in place.
    assert_eq!(
        untracked,
        ["?? .claude/hooks/triage-hook", "?? .triage.toml"],
        "{status}"
    );
    assert!(!s.exists(".claude/settings.json.bak"));
    // The settings as they were are kept in the state root, beside init's record.
    let kept: Vec<String> = std::fs::read_dir(s.root().join("init"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(
        kept.iter().any(|t| t == "{\n  \"model\": \"opus\"\n}\n"),
        "{kept:?}"
    );
    // Uninstall gives the settings back and leaves nothing behind either.
    s.triage(["init", "--uninstall"]).run().status(0);
    let status = git(
        s.path(),
        &["status", "--porcelain", "--untracked-files=all"],
    );
    assert_eq!(status, "", "{status}");
}
