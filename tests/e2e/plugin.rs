//! The Claude Code plugin (`plugin/`, listed by `.claude-plugin/marketplace.json`) against the
//! real client: its own validator passes on both, the marketplace installs it the way a user
//! would (`claude plugin marketplace add`, `claude plugin install`), and in a project where
//! `triage init` never ran, its hooks judge a failing Bash call and an empty subagent exactly
//! as init's hooks do in a project where it did.

use crate::client::{Project, Run};
use crate::server::{FakeApi, Reply, Request};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

type Outcome = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `claude ARGS` (not a session: `plugin ...`) with the project's home.
fn client(p: &Project, args: &[&str]) -> Output {
    let claude = std::env::var_os("TRIAGE_E2E_CLAUDE").expect("TRIAGE_E2E_CLAUDE");
    Command::new(claude)
        .args(args)
        .current_dir(&p.dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &p.home)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run claude")
}

fn said(out: &Output) -> String {
    format!(
        "status {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The plugin and its marketplace pass the client's validator, strictly, on every supported
/// client, the plugin also as the plugin directory would check a submission.
pub fn plugin_and_marketplace_pass_the_clients_strict_validator() -> Outcome {
    let p = Project::bare("validate");
    let plugin = repo().join("plugin");
    let out = client(
        &p,
        &[
            "plugin",
            "validate",
            "--strict",
            "--profile",
            "directory",
            plugin.to_str().unwrap_or_default(),
        ],
    );
    // Strictly, on every supported client: the plugin carries only the events the oldest
    // knows (2.1.330 fails --strict on an event it does not know, PreSkillShellCommand).
    ensure!(
        !said(&out).contains("unknown hook event"),
        "the plugin names an event this client does not know: {}",
        said(&out)
    );
    ensure!(out.status.success(), "the plugin: {}", said(&out));
    // --profile directory checks plugins only (given a marketplace it fails, saying so).
    let out = client(
        &p,
        &[
            "plugin",
            "validate",
            "--strict",
            repo().to_str().unwrap_or_default(),
        ],
    );
    ensure!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("marketplace"),
        "the marketplace: {}",
        said(&out)
    );
    Ok(())
}

/// The user's way in: the repository as a marketplace, the plugin installed from it.
fn install_plugin(p: &Project) -> Outcome {
    let out = client(
        p,
        &[
            "plugin",
            "marketplace",
            "add",
            repo().to_str().unwrap_or_default(),
        ],
    );
    ensure!(out.status.success(), "marketplace add: {}", said(&out));
    let out = client(p, &["plugin", "install", "triage@agent-triage"]);
    ensure!(out.status.success(), "plugin install: {}", said(&out));
    Ok(())
}

fn agent(prompt: &str) -> Value {
    json!({"description": "one small task", "prompt": prompt,
        "subagent_type": "general-purpose", "run_in_background": false})
}

/// A session with a failing Bash call, then one with an empty foreground subagent.
fn script(r: &Request) -> Reply {
    if r.is("SUBTASK-EMPTY") {
        return Reply::empty();
    }
    match (r.is("E2E-PLUGIN-BASH"), r.tool_calls()) {
        (true, 0) => Reply::tool(
            "Bash",
            json!({"command": "false", "description": "run the check"}),
        ),
        (true, _) => Reply::text("The needle is not there."),
        (false, 0) => Reply::tool("Agent", agent("SUBTASK-EMPTY: check the links")),
        (false, _) => Reply::text("The link check gave nothing usable."),
    }
}

/// What a project's hooks made of the two sessions, to compare.
#[derive(Debug, PartialEq)]
struct Judged {
    bash_advice: String,
    bash_advice_reached_the_model: bool,
    rejections: Vec<bool>,
    parent_told: bool,
    records: Vec<(String, String, String)>,
    breaker_failures: Value,
}

fn judge(p: &Project) -> Result<Judged, String> {
    let api = FakeApi::start(script);
    let run = p.claude(&api, "E2E-PLUGIN-BASH: is the needle there?", &[]);
    finished(&run, p)?;
    let answers = run.hook_outputs("PostToolUseFailure");
    ensure!(
        answers.len() == 1,
        "one PostToolUseFailure answer: {answers:?}\n{}",
        run.debug_tail()
    );
    let bash_advice = serde_json::from_str::<Value>(answers[0].trim())
        .ok()
        .and_then(|v| {
            v["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_default();
    let reqs = api.messages();
    let bash_advice_reached_the_model = reqs.len() == 2
        && reqs[1].says("PostToolUseFailure:Bash hook additional context")
        && reqs[1].says(bash_advice.lines().next().unwrap_or("?"));

    let run = p.claude(&api, "E2E-PLUGIN-FG: check the links", &[]);
    finished(&run, p)?;
    let fed: Vec<Request> = api
        .messages()
        .into_iter()
        .filter(|r| r.is("SUBTASK-EMPTY") && r.says("Stop hook feedback"))
        .collect();
    let rejections = (1..=4)
        .map(|n| fed.iter().any(|r| r.says(&format!("rejection {n} of 3"))))
        .collect();
    let parent_told = api
        .messages()
        .into_iter()
        .filter(|r| r.is("E2E-PLUGIN-FG"))
        .last()
        .is_some_and(|r| {
            r.says("PostToolUseFailure:Agent hook additional context")
                && r.says("output is unusable")
        });
    let records = p
        .records()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (s("kind"), s("action"), s("agent"))
        })
        .collect();
    let breaker_failures = p.breaker("general-purpose", None)["totals"]["failures"].clone();
    Ok(Judged {
        bash_advice,
        bash_advice_reached_the_model,
        rejections,
        parent_told,
        records,
        breaker_failures,
    })
}

fn finished(run: &Run, p: &Project) -> Outcome {
    ensure!(
        !run.timed_out && run.status == Some(0),
        "the client exited with {:?} (timed out: {})\nstderr: {}\n{}",
        run.status,
        run.timed_out,
        run.stderr,
        run.debug_tail()
    );
    let bad = run.failed_hooks();
    ensure!(
        bad.is_empty(),
        "hooks that did not end well: {bad:#?}\ntrace: {}",
        p.trace()
    );
    Ok(())
}

/// In a project with no `triage init` (no settings, no `.triage.toml`), the installed plugin's
/// hooks judge a failing Bash call and an empty foreground subagent as init's hooks do.
pub fn plugin_hooks_judge_like_init_in_a_project_without_init() -> Outcome {
    let plugin = Project::bare("plugin");
    install_plugin(&plugin)?;
    ensure!(
        !plugin.dir.join(".claude").exists() && !plugin.dir.join(".triage.toml").exists(),
        "the project was touched by the install"
    );
    let by_plugin = judge(&plugin)?;
    ensure!(
        !plugin.dir.join(".claude").exists(),
        "the plugin's hooks wrote Claude Code settings"
    );

    // What init's hooks make of the same sessions: absolute checks first, then the same.
    let init = Project::new("plugin-init");
    let by_init = judge(&init)?;
    ensure!(
        by_init.bash_advice.contains("`tool_failure`") && by_init.bash_advice_reached_the_model,
        "init's hooks: {by_init:#?}"
    );
    ensure!(
        by_init.rejections == [true, true, true, false] && by_init.parent_told,
        "init's hooks: {by_init:#?}"
    );
    ensure!(
        by_init.records.len() == 2 && by_init.breaker_failures == 1,
        "init's hooks: {by_init:#?}"
    );
    ensure!(
        by_plugin == by_init,
        "the plugin's hooks judged otherwise:\nplugin: {by_plugin:#?}\ninit: {by_init:#?}\nplugin trace: {}",
        plugin.trace()
    );
    Ok(())
}
