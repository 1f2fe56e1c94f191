//! Issue 16's parsers: one duration parser with a maximum, globs confined to the project,
//! Markdown by a real parser, did-you-mean by edit distance.

use crate::common::{json_out, Sandbox};
use predicates::str::contains;

#[test]
fn overflowing_durations_are_usage_errors_naming_the_maximum() {
    let s = Sandbox::new();
    for args in [
        &["report", "--since", "200000000d"][..],
        &["breaker", "trip", "k", "--for", "100000000d"],
        &["report", "prune", "--older-than", "99999999999999999999d"],
    ] {
        s.cmd(args)
            .assert()
            .code(64)
            .stderr(contains("maximum is 36500d"));
    }
    // Nothing was tripped by the refused command.
    assert!(!s.root().join("breakers").exists());
}

#[test]
fn an_overflowing_cooldown_is_named_by_config_check_and_never_panics_a_hook() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[breaker]\ncooldown = \"100000000d\"\n");
    let out = s.triage(["config", "check", ".triage.toml"]).run();
    let v = json_out(&out);
    assert_eq!(v["ok"], false);
    assert!(
        v["problems"].to_string().contains("maximum is 36500d"),
        "{v}"
    );
    // At run time the bad policy is a warning, never a crash.
    let out = s.triage(["breaker", "trip", "k"]).run().status(0);
    json_out(&out);
}

#[test]
fn the_documented_duration_forms_stay_valid_and_print_one_way() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[retry]\nschedule = [\"30s\", \"2m\", \"1h30m\", \"500ms\", \"7d\", \"1h 30m\"]\n\
         [breaker]\ncooldown = \"3600s\"\n",
    );
    let v = s.triage(["config", "show"]).run().stdout_json();
    assert_eq!(
        v["retry"]["schedule"],
        serde_json::json!(["30s", "2m", "1h30m", "500ms", "7d", "1h30m"])
    );
    assert_eq!(v["breaker"]["cooldown"], "1h");
}

#[test]
fn did_you_mean_counts_swapped_letters_as_one_edit() {
    // Two swapped pairs: four edits for plain Levenshtein (no suggestion), two for
    // Damerau–Levenshtein.
    let s = Sandbox::new();
    s.write(".triage.toml", "[breaker]\ncoolodnw = \"1m\"\n");
    let v = s.triage(["config", "check"]).run().stdout_json();
    assert!(
        v["problems"]
            .to_string()
            .contains("did you mean `cooldown`"),
        "{v}"
    );
}

fn files_check(s: &Sandbox, globs: &[&str]) -> serde_json::Value {
    let mut args = vec!["check-output", "--raw"];
    for g in globs {
        args.extend(["--files-exist", g]);
    }
    let out = s.triage(&args).stdin("some output").run().status(0);
    json_out(&out)
}

fn file_details(v: &serde_json::Value) -> Vec<(bool, String)> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["check"] == "files_exist")
        .map(|c| {
            (
                c["ok"].as_bool().unwrap(),
                c["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn file_globs_are_real_globs_confined_to_the_project() {
    let s = Sandbox::new();
    s.write("L2/a.md", "a");
    s.write("L2/deep/b.md", "b");
    s.write("docs/c.md", "c");
    s.write("a.txt", "x");
    let v = files_check(&s, &["L2/**", "[ab].txt", "{L2,docs}/*.md"]);
    let d = file_details(&v);
    assert!(d.iter().all(|(ok, _)| *ok), "{d:?}");
    assert!(d[0].1.contains("2 non-empty"), "{d:?}");
    assert!(d[2].1.contains("2 non-empty"), "{d:?}");
    // Nothing outside the project, whatever is there.
    let v = files_check(&s, &["/etc/host*", "../*", "L2/../../*"]);
    for (ok, detail) in file_details(&v) {
        assert!(
            !ok && (detail.contains("outside the project") || detail.contains("`..`")),
            "{detail}"
        );
    }
}

#[test]
fn config_check_names_a_glob_that_reaches_outside_or_is_malformed() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[agents.a.output]\nfiles_exist = ['/etc/passwd', 'docs/[', 'out/*.md']\n",
    );
    let v = s.triage(["config", "check"]).run().stdout_json();
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("/etc/passwd") && problems.contains("docs/["),
        "{v}"
    );
    assert!(!problems.contains("out/*.md"), "{v}");
}

#[test]
fn markdown_is_read_by_a_commonmark_parser() {
    let s = Sandbox::new();
    let ok = |text: &str| {
        let out = s
            .triage(["check-output", "--raw", "--format", "markdown"])
            .stdin(text.to_string())
            .run();
        json_out(&out)["ok"].as_bool().unwrap()
    };
    assert!(
        ok("Findings\n========\n\nAll verified.\n"),
        "setext heading"
    );
    assert!(
        !ok("# Findings\n~~~\nthe output was cut"),
        "unclosed ~~~ fence"
    );
    assert!(
        ok("# Findings\n````md\n```\nquoted\n```\n````\n"),
        "a four-backtick fence holding three"
    );
}
