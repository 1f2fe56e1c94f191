//! The standing hostile-input suite (issue 14): every parser that reads input — hook payloads,
//! stdin JSON, policy TOML, durations, globs, transcripts, Markdown and YAML outputs — fed
//! generated garbage and near-valid input. In-process properties (many cases, fast) assert
//! no panic and the invariants each parser promises (here for the library's surface, beside
//! the code for the rest: `stdin`, `core::transcript`, `store::project_files`); subprocess properties (few cases) run the
//! real binary under `timeout` and assert no crash, no exit 2, one JSON line (or nothing for
//! a hook), and that it ended.

use crate::common::{bin, Sandbox};
#[path = "../../src/hostile_input.rs"]
mod hostile_input;
use hostile_input::hostile_text;
use proptest::prelude::*;
use serde_json::{json, Value};
use triage::core::duration::{Dur, MAX};
use triage::core::output_check::{self, Subject};
use triage::core::policy::{self, OutputFormat, OutputRules};
use triage::core::vocab::Criticality;

/// Hook payloads: valid events with fields of every type, sometimes broken.
fn payload() -> impl Strategy<Value = String> {
    let event = prop_oneof![
        Just("PreToolUse"),
        Just("PostToolUse"),
        Just("PostToolUseFailure"),
        Just("SubagentStop"),
        Just("Stop"),
        Just("StopFailure"),
        Just("SessionStart"),
        Just("Other"),
    ];
    let field = prop_oneof![
        Just(json!(null)),
        Just(json!(1e308)),
        Just(json!(-1)),
        Just(json!([])),
        Just(json!({"content": [{"type": "text", "text": 5}]})),
        hostile_text().prop_map(Value::from),
    ];
    (
        event,
        field.clone(),
        field.clone(),
        field,
        hostile_text(),
        any::<u8>(),
    )
        .prop_map(|(event, error, response, input, junk, cut)| {
            let p = json!({
                "hook_event_name": event,
                "session_id": "s1",
                "tool_name": "Agent",
                "tool_use_id": "t1",
                "tool_input": input,
                "tool_response": response,
                "error": error,
                "agent_type": "researcher",
                "last_assistant_message": junk,
                "transcript_path": "transcript.jsonl",
            })
            .to_string();
            // Sometimes cut the payload short, as a killed writer would.
            match cut % 4 {
                0 => {
                    // Cut on a character boundary: the text holds multi-byte characters.
                    let mut half = p.len() / 2;
                    while !p.is_char_boundary(half) {
                        half -= 1;
                    }
                    p[..half].to_string()
                }
                1 => p.replace("\\\\", "\\"),
                _ => p,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn durations_parse_within_the_maximum_and_print_back(text in hostile_text()) {
        if let Ok(d) = Dur::parse(&text) {
            prop_assert!(d.0 <= MAX);
            prop_assert_eq!(d.to_string().parse::<Dur>().ok(), Some(d));
        }
    }

    #[test]
    fn any_duration_number_is_parsed_or_refused(n in any::<u64>(), unit in "(ms|s|m|h|d|w|y)") {
        let text = format!("{n}{unit}");
        match Dur::parse(&text) {
            Ok(d) => prop_assert!(d.0 <= MAX),
            Err(e) => prop_assert!(e.to_string().contains(&text)),
        }
    }

    #[test]
    fn policies_load_or_say_why(text in hostile_text()) {
        if let Err(problems) = policy::load(&text) {
            prop_assert!(!problems.is_empty());
        }
    }

    #[test]
    fn outputs_of_every_format_are_judged_without_panic(
        text in hostile_text(),
        format in prop_oneof![
            Just(OutputFormat::Json),
            Just(OutputFormat::Yaml),
            Just(OutputFormat::Markdown),
            Just(OutputFormat::Text),
        ],
    ) {
        let rules = OutputRules {
            format: Some(format),
            required_keys: Some(vec!["a.b".into()]),
            ..OutputRules::default()
        };
        let output = Value::from(text);
        let v = output_check::judge(
            &rules,
            Criticality::Critical,
            &Subject { output: Some(&output), ..Subject::default() },
        );
        prop_assert_eq!(v.ok, v.error.is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]


}

/// `timeout 5 triage ARGS` with `input` on stdin; asserts the contract of one run: it ended,
/// exited 0 (or 1), did not panic, and printed at most one line of JSON — exactly one when
/// `json_line`.
fn run_hostile(s: &Sandbox, args: &[&str], input: &str, json_line: bool) {
    let out = s
        .command("timeout")
        .arg("5")
        .arg(bin())
        .args(args)
        .env("TRIAGE_NOW", "2026-01-02T03:04:05Z")
        .env("TRIAGE_MAX_INPUT", "65536")
        .stdin(input)
        .run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(124),
        "{args:?} never ended on {input:?}"
    );
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?} exited {:?} on {input:?}: {err}",
        out.status
    );
    assert!(
        !err.contains("panicked"),
        "{args:?} panicked on {input:?}: {err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    if json_line || !lines.is_empty() {
        assert_eq!(lines.len(), 1, "{args:?} on {input:?}: {stdout}");
        assert!(
            serde_json::from_str::<Value>(lines[0]).is_ok(),
            "{args:?} on {input:?}: {stdout}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn the_binary_keeps_its_contract_on_hostile_stdin(p in payload(), text in hostile_text()) {
        let s = Sandbox::new();
        s.write("transcript.jsonl", format!("{text}\n{p}\n"));
        s.write(".triage.toml", "[agents.researcher.output]\nmin_chars = 10\nformat = 'markdown'\n");
        run_hostile(&s, &["hook"], &p, false);
        run_hostile(&s, &["classify"], &p, true);
        run_hostile(&s, &["classify"], &text, true);
        // A refusal of bad JSON prints nothing yet (issue 16's "one JSON line everywhere"):
        // at most one line here.
        run_hostile(&s, &["check-output", "--agent", "researcher"], &p, false);
        run_hostile(&s, &["record-error"], &text, !text.trim().is_empty());
        run_hostile(&s, &["breaker", "check"], &format!("{{\"key\": {}}}", json!(text)), true);
    }

    #[test]
    fn the_binary_keeps_its_contract_on_a_hostile_policy(text in hostile_text()) {
        let s = Sandbox::new();
        s.write(".triage.toml", &text);
        run_hostile(&s, &["config", "check"], "", true);
        run_hostile(&s, &["breaker", "check", "k"], "", true);
        run_hostile(&s, &["classify", "--message", "boom"], "", true);
    }
}
