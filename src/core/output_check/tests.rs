//! Unit tests of the output checks: one group per check, then classification.

use super::*;
use serde_json::json;

fn rules(toml_text: &str) -> OutputRules {
    toml::from_str(toml_text).expect("rules")
}

fn run(r: &OutputRules, output: Value) -> Verdict {
    judge(
        r,
        Criticality::Critical,
        &Subject {
            agent: Some("researcher"),
            output: Some(&output),
            ..Subject::default()
        },
    )
}

fn check<'a>(v: &'a Verdict, name: &str) -> &'a Check {
    v.checks
        .iter()
        .find(|c| c.check == name)
        .expect("the check ran")
}

fn failed(v: &Verdict) -> Vec<&'static str> {
    v.failed().map(|c| c.check).collect()
}

#[test]
fn missing_and_empty_output() {
    let r = OutputRules::default();
    let none = judge(&r, Criticality::Critical, &Subject::default());
    assert!(!none.ok);
    assert_eq!(failed(&none), vec!["output_present"]);
    assert_eq!(
        none.error.as_ref().map(|e| e.kind),
        Some(Kind::OutputMissing)
    );
    for empty in [json!(""), json!("  \n "), json!(null), json!({}), json!([])] {
        let v = run(&r, empty.clone());
        assert_eq!(failed(&v), vec!["output_present"], "{empty}");
        assert!(check(&v, "output_present").detail.contains("empty"));
    }
    let v = run(&r, json!("fine"));
    assert!(v.ok, "{v:?}");
    assert_eq!(check(&v, "output_present").detail, "4 characters");
}

#[test]
fn empty_output_skips_the_content_checks() {
    let v = run(&rules("min_chars = 10\nrequire_all = ['x']"), json!(""));
    assert_eq!(failed(&v), vec!["output_present"]);
}

#[test]
fn explicit_error_status() {
    let r = OutputRules::default();
    let out = json!({"status": "error", "kind": "timeout", "detail": "corpus index not found"});
    let v = run(&r, out);
    assert_eq!(failed(&v), vec!["status"]);
    assert!(check(&v, "status")
        .detail
        .contains("corpus index not found"));
    let e = v.error.expect("error");
    assert_eq!((e.kind, e.retryable), (Kind::ValidationFailed, false));
    let v = judge(
        &r,
        Criticality::Critical,
        &Subject {
            output: Some(&json!("text")),
            status: Some("ERROR"),
            ..Subject::default()
        },
    );
    assert_eq!(failed(&v), vec!["status"]);
}

#[test]
fn blocked_status_and_blocked_text() {
    let r = OutputRules::default();
    let v = judge(
        &r,
        Criticality::Critical,
        &Subject {
            output: Some(&json!("some text")),
            status: Some("BLOCKED"),
            ..Subject::default()
        },
    );
    assert_eq!(failed(&v), vec!["not_blocked"]);
    assert!(check(&v, "not_blocked").detail.contains("BLOCKED"));
    for text in [
        "BLOCKED: need the API key",
        "Work so far.\n\n**Status: BLOCKED** waiting for input",
        "## BLOCKED",
        "status: BLOCKED",
    ] {
        assert_eq!(failed(&run(&r, json!(text))), vec!["not_blocked"], "{text}");
    }
    for text in [
        "Nothing is BLOCKEDX here",
        "The task was blocked once, then done",
        "UNBLOCKED",
    ] {
        assert!(run(&r, json!(text)).ok, "{text}");
    }
    let v = run(&r, json!({"agent": "a", "status": "blocked"}));
    assert_eq!(failed(&v), vec!["not_blocked"]);
}

#[test]
fn min_chars_says_found_and_required() {
    let r = rules("min_chars = 500");
    let v = run(&r, json!("x".repeat(412)));
    assert_eq!(
        check(&v, "min_chars").detail,
        "412 characters, at least 500 required"
    );
    assert_eq!(v.error.map(|e| e.kind), Some(Kind::QualityFailed));
    assert!(run(&r, json!("é".repeat(500))).ok, "characters, not bytes");
    assert!(
        !run(&r, json!(format!("{}   ", "a".repeat(499)))).ok,
        "trimmed"
    );
}

#[test]
fn original_length() {
    let r = OutputRules::default();
    let out = json!("short edit");
    let s = |n| Subject {
        output: Some(&out),
        original_chars: Some(n),
        ..Subject::default()
    };
    assert!(judge(&r, Criticality::Critical, &s(5)).ok);
    let v = judge(&r, Criticality::Critical, &s(400));
    assert_eq!(failed(&v), vec!["original_length"]);
    assert!(check(&v, "original_length").detail.contains("400"));
}

#[test]
fn require_all_every_pattern() {
    let r = rules("require_all = ['(?i)strong points', '(?i)challenges']");
    let v = run(&r, json!("## Strong points\nGood.\n"));
    assert_eq!(failed(&v), vec!["require_all"]);
    assert_eq!(
        v.failed().next().map(|c| c.detail.clone()),
        Some("expected a match for `(?i)challenges`, found none".into())
    );
    assert!(run(&r, json!("## Strong points\n## Challenges\n")).ok);
}

#[test]
fn require_any_one_pattern() {
    let r = rules("require_any = ['Verified', 'Issues found']");
    assert!(run(&r, json!("Issues found: 2")).ok);
    assert!(run(&r, json!("All claims Verified")).ok);
    let v = run(&r, json!("I looked at it"));
    assert!(check(&v, "require_any")
        .detail
        .contains("one of `Verified`, `Issues found`"));
    assert!(run(&rules("require_any = []"), json!("x")).ok);
}

#[test]
fn forbid_shows_where() {
    let r = rules("forbid = ['TODO', '(?i)lorem ipsum', \"(?i)^I'm sorry\"]");
    let v = run(&r, json!("Intro text here. TODO: write the conclusion"));
    assert_eq!(failed(&v), vec!["forbid"]);
    assert!(check(&v, "forbid").detail.contains("TODO: write"), "{v:?}");
    assert_eq!(
        failed(&run(&r, json!("I'm sorry, I can't"))),
        vec!["forbid"]
    );
    assert!(run(&r, json!("A finished answer")).ok);
}

#[test]
fn format_json_and_keys_and_jq() {
    let r = rules(
        "format = 'json'\nrequired_keys = ['agent', 'phase', 'status', 'l1.count']\n\
         jq = ['.evidence_count > 0']",
    );
    let good = json!({"agent": "a", "phase": 2, "status": "complete", "l1": {"count": 1},
                      "evidence_count": 3});
    assert!(run(&r, good.clone()).ok);
    assert!(run(&r, json!(good.to_string())).ok, "JSON text");
    assert!(
        run(&r, json!(format!("```json\n{good}\n```"))).ok,
        "fenced JSON"
    );
    let v = run(
        &r,
        json!({"agent": "a", "status": null, "evidence_count": 0}),
    );
    assert_eq!(failed(&v), vec!["required_keys", "jq"]);
    assert_eq!(
        check(&v, "required_keys").detail,
        "missing keys: phase, status, l1.count (expected agent, phase, status, l1.count)"
    );
    assert_eq!(
        check(&v, "jq").detail,
        "`.evidence_count > 0` yielded “false”, expected true"
    );
    assert_eq!(v.error.map(|e| e.kind), Some(Kind::ValidationFailed));
    let v = run(&r, json!("{\"agent\": "));
    assert_eq!(failed(&v), vec!["format"]);
    assert!(check(&v, "format")
        .detail
        .starts_with("expected JSON, found invalid JSON"));
}

#[test]
fn jq_errors_and_empty_results_fail() {
    let r = rules("jq = ['.a + 1', 'empty']");
    let v = run(&r, json!({"a": "x"}));
    assert_eq!(failed(&v), vec!["jq", "jq"]);
    assert!(v
        .checks
        .iter()
        .any(|c| c.detail.contains("failed: jq error")));
    assert!(v
        .checks
        .iter()
        .any(|c| c.detail.contains("yielded nothing")));
    let v = run(&rules("jq = ['.n']"), json!("plain words"));
    assert_eq!(failed(&v), vec!["format"]);
}

#[test]
fn format_yaml() {
    let r = rules("format = 'yaml'\nrequired_keys = ['agent', 'phase', 'status']\njq = ['.evidence_count > 0']");
    let v = run(
        &r,
        json!("agent: implementer\nphase: 6\nstatus: complete\nevidence_count: 4\n"),
    );
    assert!(v.ok, "{v:?}");
    let v = run(&r, json!("agent: x\nphase: [unclosed\n"));
    assert_eq!(failed(&v), vec!["format"]);
    assert!(check(&v, "format").detail.contains("invalid YAML"));
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    assert!(
        !run(&r, json!(deep)).ok,
        "deep YAML is refused, not a crash"
    );
}

#[test]
fn format_markdown_and_text() {
    let r = rules("format = 'markdown'");
    assert!(run(&r, json!("# Title\n\nBody\n```\ncode\n```\n")).ok);
    let v = run(&r, json!("# Title\n```rust\nfn main() {"));
    assert!(check(&v, "format").detail.contains("unclosed"));
    let v = run(&r, json!("no heading"));
    assert!(check(&v, "format").detail.contains("heading"));
    // CommonMark, not line counting (issue 16).
    assert!(
        run(&r, json!("Title\n=====\n\nBody\n")).ok,
        "setext heading"
    );
    assert!(
        run(&r, json!("Title\n-----\n\nBody\n")).ok,
        "setext heading"
    );
    let v = run(&r, json!("# T\n~~~\ncut off"));
    assert!(check(&v, "format").detail.contains("unclosed ~~~"));
    assert!(run(&r, json!("# T\n````md\n```\ninner\n```\n````\n")).ok);
    let v = run(&r, json!("# T\n````\n```\ninner\n```\n"));
    assert!(check(&v, "format").detail.contains("unclosed ````"));
    assert!(run(&rules("format = 'text'"), json!("anything")).ok);
}

#[test]
fn files_exist_and_not_empty() {
    let files = vec![
        FileFacts {
            pattern: "docs/*.md".into(),
            found: vec![("docs/a.md".into(), 10)],
            ..FileFacts::default()
        },
        FileFacts {
            pattern: "L2/*.md".into(),
            found: vec![],
            ..FileFacts::default()
        },
        FileFacts {
            pattern: "out.json".into(),
            found: vec![("out.json".into(), 0)],
            ..FileFacts::default()
        },
    ];
    let v = judge(
        &OutputRules::default(),
        Criticality::Critical,
        &Subject {
            output: Some(&json!("text")),
            files: &files,
            ..Subject::default()
        },
    );
    assert_eq!(failed(&v), vec!["files_exist", "files_exist"]);
    assert!(v
        .checks
        .iter()
        .any(|c| c.detail.contains("matching `L2/*.md`, found none")));
    assert!(v
        .checks
        .iter()
        .any(|c| c.detail.contains("empty file out.json")));
    assert_eq!(v.error.map(|e| e.kind), Some(Kind::OutputMissing));
}

#[test]
fn bad_rules_are_warnings_not_crashes() {
    let r = rules(
        "require_all = ['(unclosed', 'ok']\nrequire_any = ['[']\nforbid = ['*']\njq = ['.a |']",
    );
    let v = run(&r, json!("ok"));
    assert!(v.ok, "{v:?}");
    assert_eq!(v.warnings.len(), 4, "{:?}", v.warnings);
    assert!(v.warnings[0].contains("(unclosed"));
}

#[test]
fn classification_prefers_missing_then_invalid_then_quality() {
    let r = rules("min_chars = 100\nrequired_keys = ['a']");
    let v = run(&r, json!({"b": 1}));
    let e = v.error.expect("error");
    assert_eq!(e.kind, Kind::ValidationFailed);
    assert_eq!(e.category, Category::ValidationFailure);
    assert_eq!(
        (e.tier, e.severity, e.action),
        (Tier::EscalationRequired, Severity::Error, Action::Escalate)
    );
    assert_eq!(
        e.context["failed_checks"],
        json!(["min_chars", "required_keys"])
    );
    let q = run(&rules("min_chars = 100"), json!("short"))
        .error
        .expect("q");
    assert_eq!(
        (q.category, q.action),
        (Category::QualityFailure, Action::AskUser)
    );
}

#[test]
fn optional_agents_degrade() {
    let out = json!("");
    let v = judge(
        &OutputRules::default(),
        Criticality::Optional,
        &Subject {
            agent: Some("mathematician-consultant"),
            output: Some(&out),
            ..Subject::default()
        },
    );
    let e = v.error.expect("error");
    assert_eq!(
        (e.tier, e.severity, e.action),
        (
            Tier::SelfRecoverable,
            Severity::Warning,
            Action::ProceedDegraded
        )
    );
    assert!(e.suggestions.iter().any(|s| s.contains("optional")));
}

#[test]
fn verdict_serializes_in_the_issue_shape() {
    let v = run(&rules("min_chars = 5"), json!("abc"));
    let j = serde_json::to_value(&v).expect("json");
    assert_eq!(j["ok"], false);
    assert_eq!(j["agent"], "researcher");
    assert_eq!(
        j["checks"][0],
        json!({"check": "output_present", "ok": true, "detail": "3 characters"})
    );
    assert_eq!(j["error"]["kind"], "quality_failed");
    assert_eq!(j["error"]["status"], "error");
    assert!(j.get("warnings").is_none());
    assert_eq!(v.reason(), "- min_chars: 3 characters, at least 5 required");
}

#[test]
fn overlay_prefers_flags() {
    let base = rules("min_chars = 500\nforbid = ['x']");
    let over = rules("min_chars = 10");
    let o = overlay(&base, &over);
    assert_eq!(o.min_chars, Some(10));
    assert_eq!(o.forbid, Some(vec!["x".to_string()]));
}

#[test]
fn a_large_output_is_judged_in_one_pass() {
    let big = "word ".repeat(3_000_000);
    let r = rules("min_chars = 500\nrequire_all = ['\\[\\d+\\]']\nforbid = ['TODO']");
    let v = run(&r, json!(format!("{big} [1]")));
    assert!(v.ok, "{:?}", v.failed().collect::<Vec<_>>());
}
