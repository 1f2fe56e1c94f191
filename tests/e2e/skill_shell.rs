//! A skill's shell command (a `` !`command` `` line of its `SKILL.md`, run as the skill loads)
//! through `triage hook` as `PreSkillShellCommand`, which Claude Code 2.1.332 added: with
//! `[breaker.Bash]` open the command is refused and never runs; closed, it runs and triage
//! says nothing. An older client ignores the event (it warns about the unknown key in
//! `settings.json` and runs every other hook): there the command runs whatever the breaker.

use crate::client::Project;
use crate::server::{FakeApi, Reply};
use serde_json::Value;

type Outcome = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

/// What the command prints: found in the prompt only when it ran.
const RAN: &str = "skill-shell-ran-42";

const SKILL: &str = "---
name: tree-status
description: Shows the state of the working tree
---
Tree marker: !`echo skill-shell-ran-$((6*7))`

Say what the marker was.
";

/// One `/tree-status` run: the prompts the fake API received, the answers of the
/// PreSkillShellCommand hook, and the debug lines that name the event.
fn load_the_skill(p: &Project) -> Result<(String, Vec<String>, Vec<String>), String> {
    let api = FakeApi::start(|_| Reply::text("The marker was shown."));
    let run = p.claude(&api, "/tree-status", &[]);
    ensure!(
        !run.timed_out,
        "the client did not finish in time\n{}",
        run.debug_tail()
    );
    let bad = run.failed_hooks();
    ensure!(bad.is_empty(), "hooks that did not end well: {bad:#?}");
    let sent: String = api
        .messages()
        .iter()
        .map(|r| r.raw.clone())
        .collect::<Vec<_>>()
        .join("\n");
    let debug = run.debug_lines("PreSkillShellCommand");
    Ok((sent, run.hook_outputs("PreSkillShellCommand"), debug))
}

pub fn a_skills_shell_command_is_gated_by_the_bash_breaker() -> Outcome {
    let p = Project::new("skill-shell");
    p.policy("[breaker.Bash]\nfailure_threshold = 1\ncooldown = \"10m\"\n");
    let skill = p.dir.join(".claude/skills/tree-status/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap_or(&p.dir)).map_err(|e| e.to_string())?;
    std::fs::write(&skill, SKILL).map_err(|e| e.to_string())?;
    let current = crate::client_at_least("2.1.332");

    // Closed: the command runs and triage says nothing.
    let (sent, said, debug) = load_the_skill(&p)?;
    ensure!(
        sent.contains(RAN),
        "the skill's command did not run with the breaker closed: {sent}\n{debug:#?}"
    );
    ensure!(
        said.iter().all(|s| s.trim().is_empty()),
        "triage said something on a closed breaker: {said:?}"
    );
    if current {
        ensure!(
            debug.iter().any(|l| l.contains("hooks/triage-hook")),
            "the client did not run triage on PreSkillShellCommand: {debug:#?}"
        );
    }

    let out = p.triage(
        &[
            "breaker",
            "record",
            "Bash",
            "--outcome",
            "failure",
            "--kind",
            "crash",
            "--detail",
            "bash: fork: Resource temporarily unavailable",
        ],
        None,
    );
    ensure!(out.status.success(), "{out:?}");
    ensure!(p.breaker("Bash", None)["state"] == "open", "not open");

    // Open: refused on the current client; an older one never asks.
    let (sent, said, debug) = load_the_skill(&p)?;
    if !current {
        ensure!(
            sent.contains(RAN) && said.is_empty(),
            "an older client ran the hook or not the command: {said:?}\n{sent}"
        );
        return Ok(());
    }
    ensure!(
        !sent.contains(RAN),
        "the skill's command ran with the Bash breaker open: {sent}\n{debug:#?}"
    );
    // The client puts the refusal where the output would have been: the model reads why.
    ensure!(
        sent.contains("[not run: blocked by hook: ") && sent.contains("Bash circuit breaker"),
        "the refusal did not reach the model: {sent}"
    );
    ensure!(said.len() == 1, "one PreSkillShellCommand answer: {said:?}");
    let answer: Value = serde_json::from_str(said[0].trim()).unwrap_or(Value::Null);
    let out = &answer["hookSpecificOutput"];
    ensure!(
        out["hookEventName"] == "PreSkillShellCommand" && out["permissionDecision"] == "deny",
        "not a deny in the event's own name: {answer}"
    );
    ensure!(
        p.breaker("Bash", None)["probes_in_flight"] == 0,
        "the skill's command took a probe: {}",
        p.breaker("Bash", None)
    );
    Ok(())
}
