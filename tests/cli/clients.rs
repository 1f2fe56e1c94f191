//! `triage hook` for the other agent clients: Codex CLI (payloads recorded from the real
//! client, 0.171.0), Gemini CLI (payloads of its hooks reference and its shell tool's output),
//! Cursor and Copilot CLI (the fixtures in `tests/data/clients/{cursor,copilot}/`, each citing
//! the page it follows). Per client: a failing shell command's advice, a red test's silence,
//! an open breaker's denial and an empty final answer, each in the client's own format; the
//! client told from the payload or named with `--client`; and `triage init --client` round
//! trips.

use crate::common::{Run, Sandbox};
use serde_json::{json, Value};
use std::path::Path;

const T0: &str = "2026-11-28T10:00:00Z";

fn fixture(client: &str, name: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/clients")
        .join(client)
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

/// `triage hook ARGS` on `payload` at T0.
fn hook(s: &Sandbox, args: &[&str], payload: &Value) -> Run {
    let mut argv = vec!["hook"];
    argv.extend_from_slice(args);
    s.triage(argv)
        .env("TRIAGE_NOW", T0)
        .stdin(payload.to_string())
        .run()
}

/// Stdout's JSON object, or `None` for nothing.
fn answer(r: &Run) -> Option<Value> {
    let t = r.stdout();
    (!t.trim().is_empty()).then(|| serde_json::from_str(t.trim()).unwrap())
}

/// The keys of a documented answer (its `_source` aside).
fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| *k != "_source")
        .cloned()
        .collect();
    k.sort();
    k
}

fn records(s: &Sandbox) -> Vec<Value> {
    std::fs::read_to_string(s.root().join("logs/errors.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Codex CLI 0.171.0's payloads as recorded (`codex exec` against a scripted model on
/// loopback; the recordings are kept in `tests/data/clients/codex/`).
fn codex(event: &str, extra: Value) -> Value {
    let mut v = json!({"session_id": "01a22483-440b-7871-98dc-ed9487869524",
        "turn_id": "01a22483-442b-73d0-bf9a-9d9f7a7a5713",
        "transcript_path": "/tmp/rc/codex/home/sessions/rollout.jsonl",
        "cwd": "/tmp/rc/codex/proj", "hook_event_name": event, "model": "gpt-e2e",
        "permission_mode": "bypassPermissions"});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// Codex CLI's PostToolUse for a shell call (the output alone, as recorded) and its rollout's
/// `item_completed` line with the exit status (as recorded from 0.171.0), in a rollout file in
/// the sandbox.
fn codex_shell(s: &Sandbox, command: &str, output: &str, code: i64) -> Value {
    let id = format!("call_{}", command.len());
    let rollout = s.path().join(format!("rollout-{id}.jsonl"));
    let line = json!({"timestamp": T0, "ordinal": 11, "type": "event_msg", "payload": {
        "type": "item_completed", "thread_id": "t", "turn_id": "u", "item": {
            "type": "CommandExecution", "id": id, "process_id": "17815",
            "command": ["/bin/bash", "-lc", command], "source": "unified_exec_startup",
            "status": if code == 0 { "completed" } else { "failed" },
            "aggregated_output": format!("{output}\n"), "exit_code": code,
            "duration": {"secs": 0, "nanos": 4748}}}});
    std::fs::write(&rollout, format!("{{\"type\":\"session_meta\"}}\n{line}\n")).unwrap();
    codex(
        "PostToolUse",
        json!({"tool_name": "Bash", "tool_use_id": id, "tool_input": {"command": command},
            "tool_response": format!("{output}\n"), "transcript_path": rollout}),
    )
}

/// A Gemini CLI payload (`docs/hooks/reference.md`: base fields and the event's own).
fn gemini(event: &str, extra: Value) -> Value {
    let mut v = json!({"session_id": "gem-1", "transcript_path": "/home/u/.gemini/tmp/chats/s.json",
        "cwd": "/work/app", "hook_event_name": event, "timestamp": T0});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// A `run_shell_command` result as Gemini CLI's shell tool words it for the model
/// (`packages/core/src/tools/shell.ts`: `Output:`, `Exit Code:`, wrapped as untrusted).
fn gemini_shell(command: &str, output: &str, code: i32) -> Value {
    gemini(
        "AfterTool",
        json!({"tool_name": "run_shell_command", "tool_input": {"command": command},
            "tool_response": {
                "llmContent": format!("<untrusted_context>\nOutput: {output}\nExit Code: {code}\nProcess Group PGID: 4242\n</untrusted_context>"),
                "returnDisplay": format!("Command exited with code: {code}")}}),
    )
}

const NETWORK: &str = "npm error code ECONNRESET\nnpm error network read ECONNRESET";
const JEST: &str = "FAIL src/sum.test.js (5.123 s)\n  ● sum › adds two numbers\n\n    expect(received).toBe(expected) // Object.is equality\n\n    Expected: 3\n    Received: 4\n\nTests:       1 failed, 1 total";

#[test]
fn a_failing_shell_command_is_advised_on_in_each_clients_format() {
    let s = Sandbox::new();
    // Gemini CLI: `additionalContext`, appended to the tool's result.
    let v =
        answer(&hook(&s, &[], &gemini_shell("npm install", NETWORK, 1)).status(0)).expect("advice");
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "AfterTool");
    let c = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(c.contains("network_error"), "{c}");
    // Cursor: `additional_context`.
    let r = hook(&s, &[], &fixture("cursor", "postToolUseFailure-network")).status(0);
    let v = answer(&r).expect("advice");
    assert_eq!(
        keys(&v),
        keys(&fixture("cursor", "answer-postToolUseFailure"))
    );
    assert!(
        v["additional_context"]
            .as_str()
            .unwrap()
            .contains("network_error"),
        "{v}"
    );
    // Copilot CLI: recovery guidance on stderr, exit 2; nothing on stdout.
    let r = hook(
        &s,
        &["--client", "copilot", "--event", "postToolUseFailure"],
        &fixture("copilot", "postToolUseFailure-network"),
    )
    .status(2);
    assert_eq!(r.stdout(), "");
    assert!(r.stderr().contains("network_error"), "{}", r.stderr());
    // Codex CLI: its payload has the output alone; the exit status is in its rollout. The
    // advice names the event Codex sent (its output schema allows no other).
    let failed = codex_shell(&s, "npm install", NETWORK, 1);
    let v = answer(&hook(&s, &[], &failed).status(0)).expect("advice");
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PostToolUse");
    assert!(v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .contains("network_error"));
    assert_eq!(
        records(&s).len(),
        4,
        "each client's failure recorded once: {:?}",
        records(&s)
    );
}

/// Codex CLI sends a failed command's output alone, without its exit status; the status is
/// read from the call's line in its rollout. Without that line it cannot be told the command
/// failed: nothing is said or recorded.
#[test]
fn a_codex_failure_is_told_by_its_rollout_and_not_without_one() {
    let s = Sandbox::new();
    let failed = codex_shell(&s, "npm install", NETWORK, 1);
    let v = answer(&hook(&s, &["--client", "codex"], &failed).status(0)).expect("advice");
    assert!(v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .contains("network_error"));
    let recs = records(&s);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["kind"], "network_error");
    let mut unknown = failed.clone();
    unknown["tool_use_id"] = json!("call_not_in_the_rollout");
    let before = records(&s).len();
    let s2 = Sandbox::new();
    unknown["transcript_path"] = json!(s2.path().join("none.jsonl"));
    assert_eq!(
        answer(&hook(&s2, &["--client", "codex"], &unknown).status(0)),
        None
    );
    assert_eq!(records(&s2), Vec::<Value>::new());
    assert_eq!(records(&s).len(), before);
    // The passing command's line says 0: a success.
    let passed = codex_shell(&s2, "echo hello-e2e", "hello-e2e", 0);
    assert_eq!(answer(&hook(&s2, &[], &passed).status(0)), None);
    assert_eq!(records(&s2), Vec::<Value>::new());
}

#[test]
fn a_red_test_is_silent_in_each_client() {
    let s = Sandbox::new();
    // The breaker of the shell must not hear of the agent's own work either.
    s.write(".triage.toml", "[breaker.Bash]\nfailure_threshold = 1\n");
    let codex_red = codex_shell(&s, "npx jest src/sum.test.js", JEST, 1);
    let runs = [
        hook(&s, &[], &codex_red),
        hook(&s, &[], &gemini_shell("npx jest src/sum.test.js", JEST, 1)),
        hook(&s, &[], &fixture("cursor", "postToolUseFailure-red-test")),
        hook(
            &s,
            &["--client", "copilot", "--event", "postToolUseFailure"],
            &fixture("copilot", "postToolUseFailure-red-test"),
        ),
    ];
    for r in runs {
        let r = r.status(0);
        assert_eq!(r.stdout(), "", "{}", r.what);
        assert_eq!(r.stderr(), "", "{}", r.what);
    }
    assert_eq!(records(&s), Vec::<Value>::new());
    let b = s
        .triage(["breaker", "status", "Bash"])
        .env("TRIAGE_NOW", T0)
        .run()
        .stdout_json();
    assert_eq!(b["breakers"][0]["state"], "closed", "{b}");
}

#[test]
fn an_open_breaker_denies_the_shell_in_each_clients_format() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker.Bash]\nfailure_threshold = 2\ncooldown = \"5m\"\n",
    );
    s.cmd(&["breaker", "trip", "Bash"])
        .env("TRIAGE_NOW", T0)
        .assert()
        .success();
    let codex_pre = codex(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "call_0",
            "tool_input": {"command": "ls /nonexistent-e2e-dir"}}),
    );
    let v = answer(&hook(&s, &[], &codex_pre).status(0)).expect("denied");
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    assert!(
        v.get("decision").is_none(),
        "not in Codex's PreToolUse schema: {v}"
    );

    let before = gemini(
        "BeforeTool",
        json!({"tool_name": "run_shell_command", "tool_input": {"command": "npm install"}}),
    );
    let v = answer(&hook(&s, &[], &before).status(0)).expect("denied");
    assert_eq!(v["decision"], "deny");
    assert!(v["reason"].as_str().unwrap().contains("Bash"), "{v}");

    let v =
        answer(&hook(&s, &[], &fixture("cursor", "preToolUse-shell")).status(0)).expect("denied");
    assert_eq!(keys(&v), keys(&fixture("cursor", "answer-preToolUse-deny")));
    assert_eq!(v["permission"], "deny");

    let r = hook(
        &s,
        &["--client", "copilot", "--event", "preToolUse"],
        &fixture("copilot", "preToolUse-bash"),
    );
    let v = answer(&r.status(0)).expect("denied");
    assert_eq!(
        keys(&v),
        keys(&fixture("copilot", "answer-preToolUse-deny"))
    );
    assert_eq!(v["permissionDecision"], "deny");
}

#[test]
fn an_empty_final_answer_is_sent_back_in_each_clients_format() {
    let s = Sandbox::new();
    // Codex CLI: `last_assistant_message: null` when the final text is empty.
    let stop = codex(
        "Stop",
        json!({"stop_hook_active": false, "last_assistant_message": null}),
    );
    let v = answer(&hook(&s, &[], &stop).status(0)).expect("blocked");
    assert_eq!(v["decision"], "block");
    assert!(v["reason"].as_str().unwrap().contains("empty"), "{v}");
    // Gemini CLI: AfterAgent's `prompt_response`, an empty one as the client's placeholder
    // (recorded from 0.61.0); `deny` sends the reason as a new prompt.
    for said in ["[no response text]", ""] {
        let after = gemini(
            "AfterAgent",
            json!({"prompt": "go", "prompt_response": said, "stop_hook_active": false}),
        );
        let s = Sandbox::new();
        let v = answer(&hook(&s, &[], &after).status(0)).expect("rejected");
        assert_eq!(v["decision"], "deny");
        assert!(
            v["reason"].as_str().unwrap().contains("empty"),
            "{said:?}: {v}"
        );
    }
    // Cursor: a subagent's empty result gets a follow-up message.
    let v = answer(&hook(&s, &[], &fixture("cursor", "subagentStop-empty")).status(0))
        .expect("a follow-up");
    assert_eq!(keys(&v), keys(&fixture("cursor", "answer-subagentStop")));
    assert!(
        v["followup_message"].as_str().unwrap().contains("empty"),
        "{v}"
    );
    // Cursor's `stop` and Copilot CLI's `agentStop` carry no final text: cannot be checked,
    // and nothing is said.
    let r = hook(&s, &[], &fixture("cursor", "stop")).status(0);
    assert_eq!((r.stdout(), r.stderr()), (String::new(), String::new()));
    let r = hook(
        &s,
        &["--client", "copilot", "--event", "agentStop"],
        &fixture("copilot", "agentStop"),
    )
    .status(0);
    assert_eq!((r.stdout(), r.stderr()), (String::new(), String::new()));
}

#[test]
fn the_client_is_told_from_the_payload_or_named_on_the_command() {
    let s = Sandbox::new();
    // Copilot CLI's camelCase payload, neither client nor event named: both told from its
    // fields, and answered in its format.
    let r = hook(&s, &[], &fixture("copilot", "postToolUseFailure-network")).status(2);
    assert!(r.stderr().contains("network_error"), "{}", r.stderr());
    // Its VS Code compatible form: a failed result is a failure (its answer is not read).
    hook(&s, &[], &fixture("copilot", "PostToolUse-vscode-failure")).status(0);
    // Named: the name wins over the fields (a Cursor payload read as Claude Code's is a
    // Claude Code payload with an event the core does not know: nothing).
    let r = hook(
        &s,
        &["--client", "claude"],
        &fixture("cursor", "postToolUseFailure-network"),
    )
    .status(0);
    assert_eq!(r.stdout(), "");
    let r = hook(
        &s,
        &["--client", "cursor"],
        &fixture("cursor", "postToolUseFailure-network"),
    )
    .status(0);
    assert!(answer(&r).unwrap().get("additional_context").is_some());
    // Claude Code's own payload: its own format, as before.
    let claude = json!({"hook_event_name": "PostToolUseFailure", "session_id": "cc",
        "tool_name": "Bash", "tool_use_id": "t", "tool_input": {"command": "npm install"},
        "error": format!("Exit code 1\n{NETWORK}")});
    let v = answer(&hook(&s, &[], &claude).status(0)).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["hookEventName"],
        "PostToolUseFailure"
    );
    // A client name triage does not know: the hook still exits 0.
    hook(&s, &["--client", "nonesuch"], &claude).status(0);
    assert_eq!(records(&s).len(), 4, "{:?}", records(&s));
}

/// Copilot CLI reports the model API's failure (`errorOccurred`, `model_call`): it is
/// classified and recorded as Claude Code's StopFailure is.
#[test]
fn copilots_model_call_error_is_recorded_as_the_apis_failure() {
    let s = Sandbox::new();
    let r = hook(
        &s,
        &["--client", "copilot", "--event", "errorOccurred"],
        &fixture("copilot", "errorOccurred-model-call"),
    )
    .status(0);
    assert_eq!(r.stdout(), "");
    let recs = records(&s);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["kind"], "rate_limited", "{recs:?}");
    assert_eq!(recs[0]["session_id"], "cop-5521");
}

/// A hook file of the user's own for `client`, with a hook and a key of theirs.
fn their_file(client: &str) -> Option<(&'static str, &'static str)> {
    match client {
        "codex" => Some((
            ".codex/hooks.json",
            "{\n    \"hooks\": {\n        \"PreToolUse\": [\n            {\n                \"matcher\": \"Bash\",\n                \"hooks\": [{\"type\": \"command\", \"command\": \"./guard.sh\"}]\n            }\n        ]\n    }\n}\n",
        )),
        "gemini" => Some((
            ".gemini/settings.json",
            "{\n  \"theme\": \"GitHub\",\n  \"hooks\": {\n    \"AfterTool\": [\n      {\"matcher\": \"write_file\", \"hooks\": [{\"type\": \"command\", \"command\": \"./fmt.sh\"}]}\n    ]\n  }\n}",
        )),
        "cursor" => Some((
            ".cursor/hooks.json",
            "{\"version\": 1, \"hooks\": {\"afterFileEdit\": [{\"command\": \"./fmt.sh\"}]}}\n",
        )),
        _ => None,
    }
}

fn init(s: &Sandbox, args: &[&str]) -> Run {
    let mut argv = vec!["init"];
    argv.extend_from_slice(args);
    s.triage(argv).run()
}

#[test]
fn init_for_each_client_merges_is_idempotent_and_uninstalls_byte_for_byte() {
    for (client, file) in [
        ("codex", ".codex/hooks.json"),
        ("gemini", ".gemini/settings.json"),
        ("cursor", ".cursor/hooks.json"),
        ("copilot", ".github/hooks/triage.json"),
    ] {
        let s = Sandbox::new();
        let theirs = their_file(client);
        if let Some((path, text)) = theirs {
            s.write(path, text);
        }
        let r = init(&s, &["--client", client]).status(0);
        let installed = s.read(file);
        assert!(
            installed.contains(&format!("triage hook --client {client}")),
            "{client}: {installed}\n{}",
            r.stderr()
        );
        let doc: Value = serde_json::from_str(&installed).unwrap();
        if let Some((_, text)) = theirs {
            // Theirs kept: the hook and the key.
            assert!(installed.contains(if text.contains("guard") {
                "./guard.sh"
            } else {
                "./fmt.sh"
            }));
            if client == "gemini" {
                assert_eq!(doc["theme"], "GitHub");
            }
        }
        if matches!(client, "cursor" | "copilot") {
            assert_eq!(doc["version"], 1, "{client}");
        }
        // Again: no change, to the byte.
        let again = init(&s, &["--client", client]).status(0);
        assert_eq!(s.read(file), installed, "{client}");
        assert!(
            again.stdout().contains("\"files\":[]"),
            "{client}: {}",
            again.stdout()
        );
        // Uninstall: the original bytes, or no file (and no folder) at all.
        init(&s, &["--client", client, "--uninstall"]).status(0);
        match theirs {
            Some((path, text)) => assert_eq!(s.read(path), text, "{client}"),
            None => {
                assert!(!s.exists(file), "{client}");
                assert!(
                    !s.exists(".github"),
                    "{client}: the folders init made go too"
                );
            }
        }
    }
}

#[test]
fn init_wires_the_events_each_client_answers_with_the_launcher() {
    let s = Sandbox::new();
    // --dry-run: the diff, and nothing written.
    let dry = init(&s, &["--client", "copilot", "--dry-run"]).status(0);
    assert!(
        dry.stdout().contains("+++ b/.github/hooks/triage.json"),
        "{}",
        dry.stdout()
    );
    assert!(!s.exists(".github"));
    init(&s, &["--client", "copilot"]).status(0);
    let doc: Value = serde_json::from_str(&s.read(".github/hooks/triage.json")).unwrap();
    let pre = &doc["hooks"]["preToolUse"][0];
    assert_eq!(pre["type"], "command");
    let bash = pre["bash"].as_str().unwrap();
    assert!(
        bash.contains("triage hook --client copilot --event preToolUse"),
        "{bash}"
    );
    // The same fail-open launcher as Claude Code's: without triage on PATH it exits 0.
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", bash])
        .env("PATH", "/nonexistent")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    init(&s, &["--client", "codex"]).status(0);
    let doc: Value = serde_json::from_str(&s.read(".codex/hooks.json")).unwrap();
    for event in ["PreToolUse", "PostToolUse", "Stop", "SessionStart"] {
        let c = doc["hooks"][event][0]["hooks"][0]["command"]
            .as_str()
            .unwrap();
        assert!(c.contains("triage hook --client codex"), "{event}: {c}");
    }
    // Copilot CLI reads the repository's hooks only.
    let r = init(&s, &["--client", "copilot", "--user"]).status(64);
    assert!(r.stderr().contains("--user"), "{}", r.stderr());
}

#[test]
fn init_without_a_client_names_the_client_folder_it_found() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.path().join(".codex")).unwrap();
    let r = init(&s, &[]).status(0);
    assert!(
        r.stderr().contains("found .codex/") && r.stderr().contains("triage init --client codex"),
        "{}",
        r.stderr()
    );
    // Claude Code's own settings were written as ever; nothing of Codex's was.
    assert!(s.exists(".claude/settings.json"));
    assert!(!s.exists(".codex/hooks.json"));
}

/// The Codex plugin's hooks run the plugin's launcher as `hook --client codex`: it judges the
/// event even where Claude Code's settings hold `triage init`'s hooks (it stands aside only
/// for Claude Code's own `hook`).
#[test]
fn the_plugin_launcher_judges_codex_events_beside_claude_codes_init() {
    let s = Sandbox::new();
    let real = s.path().join("real");
    std::fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(crate::common::bin(), real.join("triage")).unwrap();
    std::fs::create_dir_all(s.path().join(".claude")).unwrap();
    std::fs::write(
        s.path().join(".claude/settings.json"),
        "{\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/x/bin/triage' hook\"}]}]}}",
    )
    .unwrap();
    let launcher = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin/bin/triage");
    let stop = codex(
        "Stop",
        json!({"stop_hook_active": false, "last_assistant_message": null}),
    );
    let run = |args: &[&str]| {
        let mut c = std::process::Command::new("/bin/sh");
        c.arg(&launcher)
            .args(args)
            .current_dir(s.path())
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", real.display()))
            .env("HOME", s.path().join("home"))
            .env("TRIAGE_NOW", T0)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stop.to_string().as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(&["hook", "--client", "codex"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("Codex's answer");
    assert_eq!(v["decision"], "block");
    // Claude Code's own `hook` still stands aside for init's hooks.
    let out = run(&["hook"]);
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("stands aside"));
}

/// `--user`: the user's own hook file of the client (Codex: `$CODEX_HOME`, else `~/.codex`),
/// merged, again no change, and given back byte for byte.
#[test]
fn init_for_a_client_in_the_users_scope_round_trips() {
    let s = Sandbox::new();
    let home = s.path().join("home");
    let mine = "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send done\"}]}]}}";
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(home.join(".gemini/settings.json"), mine).unwrap();
    for (client, file, env) in [
        (
            "codex",
            home.join("codex-home/hooks.json"),
            Some(home.join("codex-home")),
        ),
        ("gemini", home.join(".gemini/settings.json"), None),
        ("cursor", home.join(".cursor/hooks.json"), None),
    ] {
        let before = std::fs::read(&file).ok();
        let run = |extra: &[&str]| {
            let mut argv = vec!["init", "--client", client, "--user"];
            argv.extend_from_slice(extra);
            let mut c = s.triage(argv);
            c.env("HOME", &home);
            if let Some(dir) = &env {
                c.env("CODEX_HOME", dir);
            }
            c.run().status(0)
        };
        run(&[]);
        let installed = std::fs::read_to_string(&file).unwrap();
        assert!(
            installed.contains(&format!("--client {client}")),
            "{installed}"
        );
        run(&[]);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), installed);
        assert!(
            !s.exists(".codex") && !s.exists(".cursor"),
            "the project is left alone"
        );
        run(&["--uninstall"]);
        assert_eq!(std::fs::read(&file).ok(), before, "{client}");
    }
}
