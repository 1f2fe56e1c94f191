//! Credentials are never stored nor repeated: every synthetic sample of
//! `tests/data/credentials.txt` goes through every way text enters triage (hook events,
//! `record-error`, `classify`, `run`, a phase's items), then through every view of what was
//! kept (`report --text`, `--html`, `errors`); no file under the state root, no stdout and
//! no stderr holds any of the secrets afterwards.

use crate::common::Sandbox;
use serde_json::{json, Value};
use std::path::Path;

const NOW: &str = "2026-02-04T14:30:00Z";

/// One sample: its kind, the secret, the text around it.
struct Sample {
    kind: String,
    secret: String,
    text: String,
}

fn samples() -> Vec<Sample> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/credentials.txt");
    let corpus = std::fs::read_to_string(path).unwrap();
    corpus
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let text = f[3]
                .replace("{{", "\u{1}")
                .replace("}}", "\u{2}")
                .replace("{}", f[2])
                .replace('\u{1}', "{")
                .replace('\u{2}', "}")
                .replace("\\n", "\n");
            Sample {
                kind: f[0].into(),
                secret: f[2].into(),
                text,
            }
        })
        .collect()
}

/// Every file under `dir`, with its bytes.
fn files_under(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            files_under(&p, out);
        } else if t.is_file() {
            out.push((
                p.display().to_string(),
                std::fs::read(&p).unwrap_or_default(),
            ));
        }
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// What every call printed, to search for the secrets at the end.
#[derive(Default)]
struct Said(Vec<(String, Vec<u8>)>);

impl Said {
    fn keep(&mut self, what: &str, out: &std::process::Output) {
        self.0.push((format!("{what} stdout"), out.stdout.clone()));
        self.0.push((format!("{what} stderr"), out.stderr.clone()));
    }
}

fn hook(s: &Sandbox, said: &mut Said, what: &str, payload: Value) -> Value {
    let out = s
        .triage(["hook"])
        .env("TRIAGE_NOW", NOW)
        .stdin(payload.to_string())
        .run()
        .status(0);
    said.keep(what, &out);
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

const POLICY: &str = r#"
[breaker]
failure_threshold = 1
cooldown = "10m"

[breaker.WebFetch]
failure_threshold = 1

[agents.researcher.output]
min_chars = 100000
max_rejections = 1

[retry]
max_attempts = 1
"#;

#[test]
fn no_credential_of_the_corpus_is_stored_or_repeated_by_any_entry_point() {
    let s = Sandbox::new();
    s.write(".triage.toml", POLICY);
    let all = samples();
    assert!(all.len() >= 50);
    let mut said = Said::default();
    for (i, x) in all.iter().enumerate() {
        let session = format!("s{i}");
        let text = &x.text;
        // The subagent tool: its launch, its failure (the secret in its prompt, its command
        // and its error), its answer at SubagentStop, the turn's API failure.
        hook(
            &s,
            &mut said,
            "PreToolUse",
            json!({"hook_event_name": "PreToolUse", "session_id": session, "tool_name": "Agent",
                "tool_use_id": format!("t{i}"),
                "tool_input": {"subagent_type": "researcher", "prompt": text, "command": text}}),
        );
        hook(
            &s,
            &mut said,
            "PostToolUseFailure Agent",
            json!({"hook_event_name": "PostToolUseFailure", "session_id": session, "tool_name": "Agent",
                "tool_use_id": format!("t{i}"),
                "tool_input": {"subagent_type": "researcher", "prompt": text, "command": text},
                "error": format!("API Error: 401 {text}")}),
        );
        hook(
            &s,
            &mut said,
            "PostToolUseFailure WebFetch",
            json!({"hook_event_name": "PostToolUseFailure", "session_id": session, "tool_name": "WebFetch",
                "tool_use_id": format!("w{i}"),
                "tool_input": {"url": format!("https://example.test/?q={}", x.secret), "command": text},
                "error": format!("Request failed with status code 500: {text}")}),
        );
        hook(
            &s,
            &mut said,
            "PreToolUse WebFetch",
            json!({"hook_event_name": "PreToolUse", "session_id": session, "tool_name": "WebFetch",
                "tool_use_id": format!("w{i}b"), "tool_input": {"command": text}}),
        );
        for active in [false, true] {
            hook(
                &s,
                &mut said,
                "SubagentStop",
                json!({"hook_event_name": "SubagentStop", "session_id": session,
                    "agent_id": format!("a{i}"), "agent_type": "researcher",
                    "stop_hook_active": active, "last_assistant_message": text}),
            );
        }
        hook(
            &s,
            &mut said,
            "StopFailure",
            json!({"hook_event_name": "StopFailure", "session_id": session,
                "error": "authentication_failed",
                "last_assistant_message": format!("API Error: 401 {text}")}),
        );
        hook(
            &s,
            &mut said,
            "UserPromptSubmit",
            json!({"hook_event_name": "UserPromptSubmit", "session_id": session, "prompt": text}),
        );
        // record-error, from stdin and from --detail.
        let out = s
            .triage(["record-error", "--session", &session, "--agent", "runner"])
            .env("TRIAGE_NOW", NOW)
            .stdin(text.as_bytes().to_vec())
            .run();
        said.keep("record-error", &out);
        let out = s
            .triage(["record-error", "--session", &session, "--detail", text])
            .env("TRIAGE_NOW", NOW)
            .stdin_null()
            .run();
        said.keep("record-error --detail", &out);
        // classify, from stdin and from --message, and in its hook form.
        let out = s
            .triage(["classify", "--raw"])
            .stdin(format!("HTTP 401 Unauthorized: {text}").into_bytes())
            .run();
        said.keep("classify", &out);
        let out = s.triage(["classify", "--message", text]).stdin_null().run();
        said.keep("classify --message", &out);
        // run: the secret in the command line and on the command's stderr.
        let out = s
            .triage([
                "run",
                "--agent",
                "runner",
                "--session",
                &session,
                "--",
                "sh",
                "-c",
                "printf '%s\\n' \"$1\" >&2; exit 3",
                "sh",
                text,
            ])
            .env("TRIAGE_NOW", NOW)
            .stdin_null()
            .run();
        said.keep("run", &out);
        s.write(&format!("sample-{i}.txt"), text);
    }
    // A new session hears of the earlier ones.
    hook(
        &s,
        &mut said,
        "SessionStart",
        json!({"hook_event_name": "SessionStart", "session_id": "later", "source": "startup"}),
    );
    // A phase whose items print the samples on stdout and stderr.
    let mut plan = String::new();
    for i in 0..all.len() {
        plan.push_str(&format!(
            "[[items]]\nid = \"item-{i}\"\ncommand = \"cat sample-{i}.txt; cat sample-{i}.txt >&2\"\n\n"
        ));
    }
    s.write("plan.toml", plan);
    let out = s
        .triage([
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "w",
            "--phase",
            "1",
        ])
        .env("TRIAGE_NOW", NOW)
        .stdin_null()
        .run();
    said.keep("phase run", &out);
    // Every view of what was kept.
    for args in [
        vec!["report", "--text"],
        vec!["report", "--html", "-"],
        vec!["report"],
        vec!["errors", "--text"],
        vec!["errors"],
        vec!["breaker", "status", "--text"],
        vec![
            "phase",
            "status",
            "--workflow",
            "w",
            "--phase",
            "1",
            "--text",
        ],
    ] {
        let out = s.triage(&args).env("TRIAGE_NOW", NOW).stdin_null().run();
        said.keep(&args.join(" "), &out);
    }

    let mut files = Vec::new();
    files_under(&s.root(), &mut files);
    assert!(
        files.iter().any(|(p, _)| p.ends_with("errors.jsonl")),
        "records were written: {:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let mut leaks = Vec::new();
    // `run` passes its command's own stderr through (what the command said is not triage's
    // word): that stream is left out, what triage keeps of it is in the files.
    said.0.retain(|(what, _)| what != "run stderr");
    for x in &all {
        for (where_, bytes) in files.iter().chain(said.0.iter()) {
            if contains(bytes, &x.secret) {
                leaks.push(format!("{} ({}) in {where_}", x.kind, x.secret));
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "{} leaks:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
    // The markers stand where the secrets were.
    let log = std::fs::read_to_string(s.root().join("logs/errors.jsonl")).unwrap();
    assert!(log.contains("[redacted anthropic-api-key]"), "{log}");
    assert!(log.contains("[redacted aws-access-key]"));
    let items = files.iter().filter(|(p, _)| p.ends_with(".out")).count();
    assert!(items > 0, "the phase kept its items' output");
}

#[test]
fn a_401_with_a_redacted_key_is_still_auth_failed() {
    let s = Sandbox::new();
    let key = samples()
        .into_iter()
        .find(|x| x.kind == "anthropic-api-key")
        .unwrap()
        .secret;
    let out = s
        .triage(["classify", "--raw"])
        .stdin(format!(
            "Error: 401 {{\"type\":\"error\",\"error\":{{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key {key}\"}}}}"
        ))
        .run()
        .status(0);
    let v = out.stdout_json();
    assert_eq!(v["kind"], "auth_failed", "{v}");
    assert!(!out.stdout().contains(&key));
    assert!(
        out.stdout().contains("[redacted anthropic-api-key]"),
        "{}",
        out.stdout()
    );
}

#[test]
fn the_policy_adds_shapes_and_names_fields_never_kept() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[redact]\npatterns = [{name = \"acme-key\", regex = 'acme_[0-9a-f]{16}'}]\nfields = [\"session_cookie\"]\n",
    );
    s.triage(["config", "check", ".triage.toml"])
        .run()
        .status(0);
    hook_plain(
        &s,
        json!({"hook_event_name": "PostToolUseFailure", "session_id": "p1", "tool_name": "WebFetch",
            "tool_input": {"url": "https://x.test", "session_cookie": "choc-chip-0042"},
            "error": "Request failed with status code 503 for acme_0123456789abcdef"}),
    );
    let log = std::fs::read_to_string(s.root().join("logs/errors.jsonl")).unwrap();
    assert!(!log.contains("acme_0123456789abcdef"), "{log}");
    assert!(log.contains("[redacted acme-key]"), "{log}");
    assert!(!log.contains("choc-chip-0042"), "{log}");

    s.write(
        "bad.toml",
        "[redact]\npatterns = [{name = \"bad name\", regex = 'x'}, {name = \"ok\", regex = '('}]\n",
    );
    let out = s.triage(["config", "check", "bad.toml"]).run().status(1);
    let err = format!("{}{}", out.stdout(), out.stderr());
    assert!(err.contains("bad.toml:2:"), "{err}");
    assert!(err.contains("is not a plain name"), "{err}");
    assert!(err.contains("bad regex `(`"), "{err}");
}

fn hook_plain(s: &Sandbox, payload: Value) {
    s.triage(["hook"])
        .env("TRIAGE_NOW", NOW)
        .stdin(payload.to_string())
        .run()
        .status(0);
}

/// `report --html` and the `--text` views keep their escaping and show the markers.
#[test]
fn the_report_views_show_markers_not_secrets_and_keep_their_escaping() {
    let s = Sandbox::new();
    let secret = "ghp_FAKE0123456789abcdefghijABCDEFGHIJKL";
    let detail = format!("{secret} <script>alert(1)</script> \u{1b}[31mred");
    s.triage(["record-error", "--agent", "researcher", "--detail", &detail])
        .env("TRIAGE_NOW", NOW)
        .stdin_null()
        .run()
        .status(0);
    let html = s
        .triage(["report", "--html", "-"])
        .env("TRIAGE_NOW", NOW)
        .stdin_null()
        .run()
        .status(0)
        .stdout();
    assert!(!html.contains(secret));
    assert!(html.contains("[redacted github-token]"), "{html}");
    assert!(!html.contains("<script>alert"), "escaped");
    for args in [vec!["report", "--text"], vec!["errors", "--text"]] {
        let t = s
            .triage(&args)
            .env("TRIAGE_NOW", NOW)
            .env("COLUMNS", "250")
            .stdin_null()
            .run()
            .status(0)
            .stdout();
        assert!(!t.contains(secret), "{t}");
        assert!(!t.contains('\u{1b}'), "{t}");
        assert!(t.contains("[redacted github-token]"), "{args:?}: {t}");
    }
}
