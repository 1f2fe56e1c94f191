//! An interactive start, as a person meets it: the real client in a terminal (tmux), in a
//! project `triage init` set up. A client that meets a hook event it does not know opens the
//! session on a blocking "Settings Warning" dialog (2.1.330 with `PreSkillShellCommand`), every
//! time; `init` writes only the events the installed client knows, so none may show.

use crate::client::Project;
use crate::server::{FakeApi, Reply};
use std::process::Command;
use std::time::{Duration, Instant};

type Outcome = Result<(), String>;

/// What the client shows once it waits for the person's first prompt.
const READY: &[&str] = &["shift+tab to cycle", "for shortcuts", "Try \""];
/// What it shows when it refused the settings.
const REFUSED: &[&str] = &["Settings Warning", "Invalid setting", "Fix with Claude"];

pub fn an_interactive_start_of_an_init_project_shows_no_settings_warning() -> Outcome {
    if !crate::common::on_path("tmux") {
        let require = std::env::var_os("TRIAGE_REQUIRE_TMUX").is_some_and(|v| !v.is_empty());
        if require {
            return Err("tmux is not installed, and TRIAGE_REQUIRE_TMUX is set".into());
        }
        println!("skipped: tmux is not installed");
        return Ok(());
    }
    let p = Project::new("interactive");
    let api = FakeApi::start(|_| Reply::text("Hello."));
    let key = "sk-ant-e2e-dummy";
    // A person who has used the client before: onboarding done, this folder trusted, the key
    // accepted; what is left on screen is the client's own judgement of the settings.
    let dir = p.dir.display().to_string();
    let state = serde_json::json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [key], "rejected": []},
        "projects": {dir.clone(): {"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}},
    });
    std::fs::write(p.home.join(".claude.json"), state.to_string())
        .map_err(|e| format!("cannot write .claude.json: {e}"))?;
    let socket = p.dir.with_file_name("tmux.sock");
    let tmux = |args: &[&str]| -> Result<String, String> {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .map_err(|e| format!("tmux: {e}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let start = format!(
        "exec env -i PATH='{}' HOME='{}' TERM=xterm-256color ANTHROPIC_API_KEY={key} ANTHROPIC_BASE_URL='{}' CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 IS_SANDBOX=1 claude",
        p.path_env(),
        p.home.display(),
        api.url()
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        "cc",
        "-x",
        "160",
        "-y",
        "50",
        "-c",
        &dir,
        "sh",
        "-c",
        &start,
    ])?;
    let began = Instant::now();
    let mut screen = String::new();
    let verdict = loop {
        screen = tmux(&["capture-pane", "-p", "-t", "cc"]).unwrap_or(screen);
        if REFUSED.iter().any(|w| screen.contains(w)) {
            break Err(format!("the client refused the settings:\n{screen}"));
        }
        if READY.iter().any(|w| screen.contains(w)) {
            break Ok(());
        }
        if began.elapsed() > Duration::from_secs(60) {
            break Err(format!(
                "the client never came to its prompt within 60 s:\n{screen}"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = tmux(&["kill-server"]);
    verdict
}
