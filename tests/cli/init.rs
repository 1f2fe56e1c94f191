//! `triage init`: settings.json gets the hook entries and keeps everything else; twice is
//! idempotent; `--uninstall` restores the original byte for byte; `--dry-run` changes nothing.

use crate::common::{json_out, Sandbox};

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
    [".claude/settings.json", ".triage.toml", ".gitignore"]
        .iter()
        .map(|f| {
            let p = sb.path().join(f);
            (f.to_string(), std::fs::read_to_string(p).ok())
        })
        .collect()
}

#[test]
fn keeps_existing_hooks_and_keys_is_idempotent_and_uninstalls_byte_for_byte() {
    let sb = Sandbox::new();
    sb.write(".claude/settings.json", EXISTING);
    sb.write(".gitignore", "target/\n");
    let before = snapshot(&sb);

    let out = sb.cmd(&["init"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report = json_out(&out);
    assert_eq!(report["events_added"].as_array().unwrap().len(), 7);
    let settings: serde_json::Value =
        serde_json::from_str(&sb.read(".claude/settings.json")).unwrap();
    assert_eq!(settings["model"], "opus");
    assert_eq!(settings["permissions"]["allow"][0], "Bash(npm test)");
    let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre[0]["hooks"][0]["command"], "./guard.sh");
    let cmd = pre[1]["hooks"][0]["command"].as_str().unwrap();
    let exe = crate::common::bin().canonicalize().unwrap();
    assert!(
        cmd.starts_with(exe.to_str().unwrap()),
        "absolute path: {cmd}"
    );
    assert!(cmd.ends_with(" hook"));
    for event in [
        "SessionStart",
        "PostToolUse",
        "PostToolUseFailure",
        "SubagentStop",
        "Stop",
        "StopFailure",
    ] {
        assert!(settings["hooks"][event].is_array(), "{event}");
    }
    assert_eq!(sb.read(".claude/settings.json.bak"), EXISTING);
    assert!(sb.read(".gitignore").ends_with("target/\n.triage/\n"));
    assert!(sb.read(".triage.toml").starts_with("# triage policy"));
    sb.cmd(&["config", "check", ".triage.toml"])
        .assert()
        .success();

    let installed = snapshot(&sb);
    let again = json_out(&sb.cmd(&["init"]).output().unwrap());
    assert_eq!(again["files"].as_array().unwrap().len(), 0, "{again}");
    assert_eq!(snapshot(&sb), installed, "init twice changes nothing");

    let out = sb.cmd(&["init", "--uninstall"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
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
    let out = sb.cmd(&["init", "--dry-run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("--- a/./.claude/settings.json"), "{diff}");
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
    let out = sb.cmd(&["init"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "best effort");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("triage init: "), "{err}");
    assert!(err.contains("not valid JSON"), "{err}");
    assert_eq!(sb.read(".claude/settings.json"), "{\"hooks\": [");
    sb.cmd(&["init", "--strict"]).assert().code(65);
    sb.write(".claude/settings.json", "{\"hooks\": 3}");
    sb.cmd(&["init", "--strict"]).assert().code(65);
    assert_eq!(sb.read(".claude/settings.json"), "{\"hooks\": 3}");
}
