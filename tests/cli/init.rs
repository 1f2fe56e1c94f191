//! `triage init`: settings.json gets the hook entries and keeps everything else; twice is
//! idempotent; `--uninstall` restores the original byte for byte; `--dry-run` changes nothing.

use crate::common::{json_out, Run, Sandbox};

/// A settings file as Claude Code writes it, with hooks and keys of the user's own.
const EXISTING: &str = r#"{
  "permissions": {
    "allow": [
      "Bash(npm test)"
    ]
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "./guard.sh"
          }
        ]
      }
    ]
  },
  "model": "opus"
}
"#;

fn snapshot(sb: &Sandbox) -> Vec<(String, Option<String>)> {
    [
        ".claude/settings.json",
        ".claude/settings.json.bak",
        ".triage.toml",
        ".gitignore",
    ]
    .iter()
    .map(|f| {
        let p = sb.path().join(f);
        (f.to_string(), std::fs::read_to_string(p).ok())
    })
    .collect()
}

/// The one backup of the settings in `.triage/init/`.
fn init_backup(sb: &Sandbox) -> std::path::PathBuf {
    let baks: Vec<_> = std::fs::read_dir(sb.root().join("init"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bak"))
        .collect();
    assert_eq!(baks.len(), 1, "{baks:?}");
    baks[0].clone()
}

#[test]
fn keeps_existing_hooks_and_keys_is_idempotent_and_uninstalls_byte_for_byte() {
    let sb = Sandbox::new();
    sb.write(".claude/settings.json", EXISTING);
    sb.write(".gitignore", "target/\n");
    let before = snapshot(&sb);

    // A client that knows every event.
    let claude = crate::common::fake_claude(sb.path(), "2.1.332");
    let out = sb
        .triage(["init"])
        .env("PATH", crate::common::path_with(&claude))
        .run()
        .status(0);
    let report = json_out(&out);
    assert_eq!(report["events_added"].as_array().unwrap().len(), 9);
    assert_eq!(report["client"], "2.1.332");
    let settings: serde_json::Value =
        serde_json::from_str(&sb.read(".claude/settings.json")).unwrap();
    assert_eq!(settings["model"], "opus");
    assert_eq!(settings["permissions"]["allow"][0], "Bash(npm test)");
    let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre[0]["hooks"][0]["command"], "./guard.sh");
    let cmd = pre[1]["hooks"][0]["command"].as_str().unwrap();
    // No installer's path in the shared file: `triage` as each teammate's PATH finds it.
    let exe_dir = crate::common::bin().parent().unwrap().display().to_string();
    assert!(!cmd.contains(&exe_dir), "{cmd}");
    assert_eq!(
        cmd,
        r#"sh "$CLAUDE_PROJECT_DIR/.claude/hooks/triage-hook" || true"#
    );
    assert!(sb
        .read(".claude/hooks/triage-hook")
        .contains("exec triage hook"));
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PreSkillShellCommand",
        "PostToolUse",
        "PostToolUseFailure",
        "SubagentStop",
        "Stop",
        "StopFailure",
    ] {
        assert!(settings["hooks"][event].is_array(), "{event}");
    }
    // The settings as they were are kept beside init's record, in the state root.
    assert!(!sb.exists(".claude/settings.json.bak"));
    assert_eq!(std::fs::read_to_string(init_backup(&sb)).unwrap(), EXISTING);
    assert!(sb.read(".gitignore").ends_with("target/\n.triage/\n"));
    assert!(sb.read(".triage.toml").starts_with("# triage policy"));
    sb.cmd(&["config", "check", ".triage.toml"])
        .assert()
        .success();

    let installed = snapshot(&sb);
    let again = sb.triage(["init"]).run().stdout_json();
    assert_eq!(again["files"].as_array().unwrap().len(), 0, "{again}");
    assert_eq!(snapshot(&sb), installed, "init twice changes nothing");

    sb.triage(["init", "--uninstall"]).run().status(0);
    assert_eq!(
        snapshot(&sb),
        before,
        "uninstall restores every file byte for byte"
    );
}

#[test]
fn on_an_empty_project_creates_and_uninstall_removes() {
    let sb = Sandbox::new();
    sb.cmd(&["init"]).assert().success();
    assert!(sb.exists(".claude/settings.json"));
    assert_eq!(sb.read(".gitignore"), ".triage/\n");
    sb.cmd(&["init", "--uninstall"]).assert().success();
    for f in [
        ".claude/settings.json",
        ".claude/settings.json.bak",
        ".triage.toml",
        ".gitignore",
    ] {
        assert!(!sb.exists(f), "{f} should be gone");
    }
}

#[test]
fn uninstall_after_other_edits_keeps_them() {
    let sb = Sandbox::new();
    sb.write(".claude/settings.json", EXISTING);
    sb.cmd(&["init"]).assert().success();
    let mut v: serde_json::Value = serde_json::from_str(&sb.read(".claude/settings.json")).unwrap();
    v["model"] = "sonnet".into();
    sb.write(
        ".claude/settings.json",
        serde_json::to_string_pretty(&v).unwrap() + "\n",
    );
    sb.cmd(&["init", "--uninstall"]).assert().success();
    let back: serde_json::Value = serde_json::from_str(&sb.read(".claude/settings.json")).unwrap();
    let mut want: serde_json::Value = serde_json::from_str(EXISTING).unwrap();
    want["model"] = "sonnet".into();
    assert_eq!(back, want);
    assert_eq!(
        sb.read(".claude/settings.json"),
        EXISTING.replace("opus", "sonnet")
    );
}

#[test]
fn dry_run_prints_the_diff_and_changes_nothing() {
    let sb = Sandbox::new();
    sb.write(".claude/settings.json", EXISTING);
    let before = snapshot(&sb);
    let out = sb.triage(["init", "--dry-run"]).run().status(0);
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("--- a/.claude/settings.json\n"), "{diff}");
    assert!(diff.contains("+++ b/.claude/settings.json\n"), "{diff}");
    assert!(!diff.contains("a//") && !diff.contains("a/./"), "{diff}");
    assert!(diff.contains("+        \"matcher\": \"*\""), "{diff}");
    assert!(diff.contains("+.triage/"), "{diff}");
    assert_eq!(snapshot(&sb), before);
    assert!(!sb.exists(".triage"), "a dry run writes no state either");
}

#[test]
fn user_settings_live_under_home() {
    let sb = Sandbox::new();
    let home = sb.path().join("home");
    std::fs::create_dir(&home).unwrap();
    sb.cmd(&["init", "--user"])
        .env("HOME", &home)
        .assert()
        .success();
    assert!(home.join(".claude/settings.json").exists());
    assert!(!sb.exists(".triage.toml"), "--user touches no project file");
    // Its undo record lives under the user's config, not in the current folder.
    assert!(!sb.exists(".triage"), "no record in the current folder");
    assert!(home.join(".config/triage/init").is_dir());
    let out = sb
        .triage(["init", "--user", "--dry-run"])
        .env("HOME", &home)
        .run();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("a//"));
    sb.cmd(&["init", "--user", "--uninstall"])
        .env("HOME", &home)
        .assert()
        .success();
    assert!(!home.join(".claude/settings.json").exists());
}

#[test]
fn broken_settings_are_left_alone_with_a_clear_message() {
    let sb = Sandbox::new();
    sb.write(".claude/settings.json", "{\"hooks\": [");
    // Best effort: 0, and a message.
    let out = sb.triage(["init"]).run().status(0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("triage init: "), "{err}");
    assert!(err.contains("not valid JSON"), "{err}");
    assert_eq!(sb.read(".claude/settings.json"), "{\"hooks\": [");
    sb.cmd(&["init", "--strict"]).assert().code(65);
    sb.write(".claude/settings.json", "{\"hooks\": 3}");
    sb.cmd(&["init", "--strict"]).assert().code(65);
    assert_eq!(sb.read(".claude/settings.json"), "{\"hooks\": 3}");
}

/// `sh -c COMMAND` as Claude Code runs a hook, with `payload` on stdin and PATH as given.
fn run_hook_command(cmd: &str, path: &str, dir: &std::path::Path, payload: &str) -> Run {
    use std::io::Write;
    let mut c = std::process::Command::new("sh");
    c.args(["-c", cmd])
        .env_clear()
        .env("PATH", path)
        .env("CLAUDE_PROJECT_DIR", dir)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    // Written whole before the wait: a command that does not drain its stdin fails here.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    Run::of(&c, child.wait_with_output().unwrap())
}

#[test]
fn the_command_finds_triage_on_path_and_fails_open_without_it() {
    let sb = Sandbox::new();
    sb.cmd(&["init"]).assert().success();
    let settings: serde_json::Value =
        serde_json::from_str(&sb.read(".claude/settings.json")).unwrap();
    let cmd = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let bin_dir = crate::common::bin().parent().unwrap().to_path_buf();
    let payload = r#"{"hook_event_name":"SessionStart","session_id":"s"}"#;
    // With triage on PATH the hook runs it (SessionStart with nothing to report prints nothing,
    // and leaves a trace that it ran: the state root).
    let path = format!("{}:/usr/bin:/bin", bin_dir.display());
    run_hook_command(&cmd, &path, sb.path(), payload).status(0);
    let out = run_hook_command(
        &cmd,
        &path,
        sb.path(),
        r#"{"hook_event_name":"PostToolUseFailure","session_id":"s","tool_name":"Bash","error":"Exit code 1"}"#,
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("additionalContext"),
        "{out:?}"
    );
    // A teammate without triage: drained, exit 0, nothing said (the client shows the model the
    // command's text, which therefore holds no words of its own).
    let out = run_hook_command(&cmd, "/usr/bin:/bin", sb.path(), &"x".repeat(200_000)).status(0);
    assert!(out.stdout.is_empty());
    assert!(!cmd.contains("not found") && !cmd.contains("echo"), "{cmd}");
}

#[test]
fn local_installs_into_the_personal_settings_file() {
    let sb = Sandbox::new();
    sb.write(".claude/settings.json", EXISTING);
    sb.cmd(&["init", "--local"]).assert().success();
    assert_eq!(
        sb.read(".claude/settings.json"),
        EXISTING,
        "the shared file is untouched"
    );
    let local: serde_json::Value =
        serde_json::from_str(&sb.read(".claude/settings.local.json")).unwrap();
    assert!(local["hooks"]["Stop"].is_array());
    sb.cmd(&["init", "--local", "--uninstall"])
        .assert()
        .success();
    assert!(!sb.exists(".claude/settings.local.json"));
    assert!(!sb.exists(".claude/settings.local.json.bak"));
    assert_eq!(sb.read(".claude/settings.json"), EXISTING);
}

#[test]
fn keeps_the_files_own_indentation() {
    let sb = Sandbox::new();
    let four =
        "{\n    \"model\": \"opus\",\n    \"permissions\": {\n        \"allow\": []\n    }\n}\n";
    sb.write(".claude/settings.json", four);
    sb.cmd(&["init"]).assert().success();
    let text = sb.read(".claude/settings.json");
    assert!(text.starts_with("{\n    \"model\": \"opus\",\n    \"permissions\": {\n        \"allow\": []\n    },\n    \"hooks\": {\n"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("  \"")), "{text}");
    sb.cmd(&["init", "--uninstall"]).assert().success();
    assert_eq!(sb.read(".claude/settings.json"), four);
}

#[test]
fn in_a_subfolder_it_installs_at_the_project_root() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.path().join(".git")).unwrap();
    std::fs::create_dir_all(sb.path().join("src/deep")).unwrap();
    sb.triage(["init"])
        .current_dir(sb.path().join("src/deep"))
        .run()
        .status(0);
    assert!(sb.exists(".claude/settings.json"));
    assert!(sb.exists(".triage.toml"));
    assert!(sb.exists(".gitignore"));
    assert!(!sb.exists("src/deep/.claude"));
    assert!(!sb.exists("src/deep/.triage"));
    // A folder in between that already has Claude Code settings is the project.
    sb.write("pkg/.claude/settings.json", "{}\n");
    std::fs::create_dir_all(sb.path().join("pkg/sub")).unwrap();
    sb.cmd(&["init"])
        .current_dir(sb.path().join("pkg/sub"))
        .assert()
        .success();
    assert!(sb
        .read("pkg/.claude/settings.json")
        .contains("hooks/triage-hook"));
    assert!(sb.exists("pkg/.claude/hooks/triage-hook"));
    assert!(!sb.exists("pkg/sub/.claude"));
}

#[test]
fn uninstall_gives_back_a_gitignore_without_its_final_newline_byte_for_byte() {
    let sb = Sandbox::new();
    sb.write(".gitignore", "target/");
    sb.cmd(&["init"]).assert().success();
    assert_eq!(sb.read(".gitignore"), "target/\n.triage/\n");
    sb.cmd(&["init", "--uninstall"]).assert().success();
    assert_eq!(sb.read(".gitignore"), "target/");
    // Edited in between: only init's line goes, the rest stays as edited.
    sb.cmd(&["init"]).assert().success();
    sb.write(".gitignore", "target/\n.triage/\n*.log\n");
    sb.cmd(&["init", "--uninstall"]).assert().success();
    assert_eq!(sb.read(".gitignore"), "target/\n*.log\n");
    assert!(
        !sb.exists(".claude"),
        "no .claude/ left behind that init created"
    );
}

/// Files a teammate shares (committed) that `init --local` must never touch.
fn shared_files(sb: &Sandbox) -> Vec<(String, Option<String>)> {
    [".claude/settings.json", ".triage.toml", ".gitignore"]
        .iter()
        .map(|f| {
            (
                f.to_string(),
                std::fs::read_to_string(sb.path().join(f)).ok(),
            )
        })
        .collect()
}

#[test]
fn local_init_in_a_git_repository_ignores_the_state_in_info_exclude_and_writes_no_shared_file() {
    let sb = Sandbox::new();
    // A repository whose git folder has no info/ yet.
    std::fs::create_dir_all(sb.path().join(".git")).unwrap();
    sb.write(".claude/settings.json", EXISTING);
    sb.write(".gitignore", "target/\n");
    let shared = shared_files(&sb);

    let report = sb.triage(["init", "--local"]).run().status(0).stdout_json();
    assert_eq!(shared_files(&sb), shared, "no shared file is touched");
    assert!(
        !sb.exists(".triage.toml"),
        "the policy is shared: not written"
    );
    assert_eq!(sb.read(".git/info/exclude"), ".triage/\n");
    let local: serde_json::Value =
        serde_json::from_str(&sb.read(".claude/settings.local.json")).unwrap();
    assert!(local["hooks"]["PreToolUse"].is_array());
    let written: Vec<&str> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(written.len(), 3, "{report}");
    assert!(
        written[0].ends_with(".claude/settings.local.json"),
        "{report}"
    );
    // The launcher the command runs: the same file a shared install writes, nothing personal.
    assert!(
        written[1].ends_with(".claude/hooks/triage-hook"),
        "{report}"
    );
    assert!(written[2].ends_with(".git/info/exclude"), "{report}");

    // Twice: nothing more.
    let again = sb.triage(["init", "--local"]).run().status(0).stdout_json();
    assert_eq!(again["files"].as_array().unwrap().len(), 0, "{again}");

    sb.cmd(&["init", "--local", "--uninstall"])
        .assert()
        .success();
    assert_eq!(shared_files(&sb), shared);
    assert!(!sb.exists(".claude/settings.local.json"));
    assert!(
        !sb.exists(".claude/hooks"),
        "the launcher and its folder are gone"
    );
    assert!(
        !sb.exists(".git/info"),
        "no info/ left behind that init created"
    );
}

#[test]
fn local_init_keeps_an_existing_exclude_file_and_gives_it_back_byte_for_byte() {
    let sb = Sandbox::new();
    let git = crate::common::skip_unless_tool("git", "TRIAGE_REQUIRE_GIT");
    let git_cmd = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(sb.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", sb.path())
            .status()
            .unwrap()
    };
    if git {
        // A real repository: git writes its own commented info/exclude.
        assert!(git_cmd(&["init", "-q"]).success());
    } else {
        sb.write(
            ".git/info/exclude",
            "# git ls-files --others --exclude-from=.git/info/exclude\n*.swp",
        );
    }
    let exclude = sb.read(".git/info/exclude");
    sb.cmd(&["init", "--local"]).assert().success();
    let sep = if exclude.is_empty() || exclude.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    assert_eq!(
        sb.read(".git/info/exclude"),
        format!("{exclude}{sep}.triage/\n")
    );
    assert!(!sb.exists(".gitignore"));
    assert!(!sb.exists(".triage.toml"));
    if git {
        // git itself now ignores the state root.
        sb.write(".triage/x", "");
        assert!(
            git_cmd(&["check-ignore", "-q", ".triage/x"]).success(),
            "git does not ignore .triage/"
        );
    }
    sb.cmd(&["init", "--local", "--uninstall"])
        .assert()
        .success();
    assert_eq!(sb.read(".git/info/exclude"), exclude);
}

#[test]
fn local_init_outside_git_writes_no_ignore_file_and_no_policy() {
    let sb = Sandbox::new();
    sb.cmd(&["init", "--local"]).assert().success();
    assert!(sb.exists(".claude/settings.local.json"));
    assert!(!sb.exists(".gitignore"));
    assert!(!sb.exists(".triage.toml"));
    assert!(!sb.exists(".claude/settings.json"));
}

/// Whether git ignores `path` in the sandbox's repository.
fn git_ignores(sb: &Sandbox, path: &str) -> bool {
    std::process::Command::new("git")
        .args(["check-ignore", "-q", path])
        .current_dir(sb.path())
        .status()
        .unwrap()
        .success()
}

/// `--uninstall` gives back the user's ignore file and keeps what triage wrote meanwhile out
/// of git: `.triage/` (the error log and breakers stay) is still ignored afterwards, whether
/// init added the line or the user's `.gitignore` had it before.
#[test]
fn uninstall_leaves_the_state_root_ignored() {
    if !crate::common::skip_unless_tool("git", "TRIAGE_REQUIRE_GIT") {
        return;
    }
    for before in [
        None,
        Some("node_modules/\n"),
        Some("node_modules/\n.triage/\n"),
    ] {
        let sb = Sandbox::new();
        let git = std::process::Command::new("git")
            .args(["init", "-q", "."])
            .current_dir(sb.path())
            .status()
            .unwrap();
        assert!(git.success());
        if let Some(text) = before {
            sb.write(".gitignore", text);
        }
        sb.cmd(&["init"]).assert().success();
        sb.triage(["record-error", "--kind", "timeout", "--detail", "slow"])
            .run()
            .status(0);
        assert!(git_ignores(&sb, ".triage/logs/errors.jsonl"), "{before:?}");
        sb.cmd(&["init", "--uninstall"]).assert().success();
        // The user's own file comes back as it was.
        assert_eq!(
            std::fs::read_to_string(sb.path().join(".gitignore"))
                .ok()
                .as_deref(),
            before,
            "{before:?}"
        );
        assert!(sb.exists(".triage/logs/errors.jsonl"), "the state is kept");
        assert!(
            git_ignores(&sb, ".triage/logs/errors.jsonl"),
            "{before:?}: .triage/ is no longer ignored after --uninstall"
        );
    }
}

/// A settings file written compactly stays compact: init adds its `hooks` on the same line and
/// rewrites nothing else; a compact part of an indented file (`"allow": [...]`) keeps its bytes.
#[test]
fn init_keeps_a_compact_settings_file_compact() {
    let sb = Sandbox::new();
    let compact = r#"{"model":"opus","permissions":{"allow":["Bash(npm test)"]}}"#;
    sb.write(".claude/settings.json", compact);
    sb.cmd(&["init"]).assert().success();
    let text = sb.read(".claude/settings.json");
    assert!(!text.trim_end().contains('\n'), "re-expanded:\n{text}");
    assert!(
        text.starts_with(r#"{"model":"opus","permissions":{"allow":["Bash(npm test)"]},"hooks":{"#),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(v["hooks"]["PreToolUse"].is_array(), "{v}");
    // A later change by the user, then uninstall: still compact, the user's change kept.
    let edited = text.replace(r#""model":"opus""#, r#""model":"sonnet""#);
    sb.write(".claude/settings.json", &edited);
    sb.cmd(&["init", "--uninstall"]).assert().success();
    assert_eq!(
        sb.read(".claude/settings.json"),
        compact.replace("opus", "sonnet")
    );

    let sb = Sandbox::new();
    let mixed = "{\n  \"permissions\": {\"allow\": [\"Bash(ls)\"]},\n  \"model\": \"opus\"\n}\n";
    sb.write(".claude/settings.json", mixed);
    sb.cmd(&["init"]).assert().success();
    let text = sb.read(".claude/settings.json");
    assert!(
        text.starts_with("{\n  \"permissions\": {\"allow\": [\"Bash(ls)\"]},\n  \"model\": \"opus\",\n  \"hooks\": {\n"),
        "{text}"
    );
}

#[test]
fn the_command_never_runs_a_triage_from_a_relative_path_entry() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    sb.cmd(&["init"]).assert().success();
    let settings: serde_json::Value =
        serde_json::from_str(&sb.read(".claude/settings.json")).unwrap();
    let cmd = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    // A cloned project's own `triage`, where `bin` or an empty entry (a trailing `:`) finds it.
    let marker = sb.path().join("planted-ran");
    for rel in ["bin/triage", "triage"] {
        let path = sb.write(
            rel,
            format!("#!/bin/sh\necho planted >> '{}'\n", marker.display()),
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let payload = r#"{"hook_event_name":"SessionStart","session_id":"s"}"#;
    for path in ["bin:/usr/bin:/bin:", "/usr/bin::/bin", ".:/usr/bin:/bin"] {
        let out = run_hook_command(&cmd, path, sb.path(), payload).status(0);
        assert!(out.stdout.is_empty(), "{path}: {out:?}");
        assert!(!marker.exists(), "{path}: the project's triage was run");
    }
    // The real one, on an absolute entry after them, is run.
    let bin_dir = crate::common::bin().parent().unwrap().to_path_buf();
    let path = format!("bin::{}:/usr/bin:/bin:", bin_dir.display());
    let out = run_hook_command(
        &cmd,
        &path,
        sb.path(),
        r#"{"hook_event_name":"PostToolUseFailure","session_id":"s","tool_name":"Bash","error":"Exit code 1"}"#,
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("additionalContext"),
        "{out:?}"
    );
    assert!(!marker.exists(), "the project's triage was run");
}

#[test]
fn the_shared_and_local_installs_share_one_launcher_kept_until_neither_runs_it() {
    let sb = Sandbox::new();
    sb.cmd(&["init"]).assert().success();
    sb.cmd(&["init", "--local"]).assert().success();
    let launcher = sb.read(".claude/hooks/triage-hook");
    // Taking the local install away keeps the launcher the shared settings still run.
    sb.cmd(&["init", "--local", "--uninstall"])
        .assert()
        .success();
    assert_eq!(sb.read(".claude/hooks/triage-hook"), launcher);
    sb.cmd(&["init", "--uninstall"]).assert().success();
    assert!(!sb.exists(".claude/hooks/triage-hook"));
    assert!(!sb.exists(".claude"));
}

#[test]
fn an_edited_launcher_is_left_as_the_user_made_it() {
    let sb = Sandbox::new();
    let mine = "#!/bin/sh\nexec /opt/triage/bin/triage hook \"$@\"\n";
    sb.write(".claude/hooks/triage-hook", mine);
    let report = sb.triage(["init"]).run().status(0).stdout_json();
    assert!(
        !report["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["path"].as_str().unwrap().ends_with("triage-hook")),
        "{report}"
    );
    sb.cmd(&["init", "--uninstall"]).assert().success();
    assert_eq!(sb.read(".claude/hooks/triage-hook"), mine);
}
