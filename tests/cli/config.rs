//! `config show` and `config check`, and how a broken policy degrades at run time.

use crate::common::{json_out, Sandbox};

#[test]
fn show_prints_the_seed_defaults_without_a_policy_file() {
    let s = Sandbox::new();
    let v = s.triage(["config", "show"]).run().stdout_json();
    assert_eq!(v["retry"]["schedule"], serde_json::json!(["30s", "2m"]));
    assert_eq!(v["retry"]["max_attempts"], 3);
    assert_eq!(v["thresholds"]["session_failures"], 5);
    assert_eq!(v["thresholds"]["cascade_agents"], 2);
    assert_eq!(v["breaker"]["failure_threshold"], 2);
    assert_eq!(v["breaker"]["cooldown"], "1m");
    assert_eq!(v["breaker"]["half_open_probes"], 1);
    assert!(!s.root().exists(), "config show writes nothing");
}

#[test]
fn show_reads_the_project_policy() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[breaker]\nfailure_threshold = 4\n");
    let v = s.triage(["config", "show"]).run().stdout_json();
    assert_eq!(v["breaker"]["failure_threshold"], 4);
    let p = s.write("proj/.triage.toml", "[breaker]\nfailure_threshold = 7\n");
    let v = s
        .triage(["config", "show"])
        .env("CLAUDE_PROJECT_DIR", p.parent().unwrap())
        .run()
        .stdout_json();
    assert_eq!(v["breaker"]["failure_threshold"], 7);
    s.cmd(&["config", "show", "--text"])
        .assert()
        .code(0)
        .stdout(predicates::str::contains("failure_threshold = 4"));
}

#[test]
fn check_names_file_line_key_and_the_closest_valid_key() {
    let s = Sandbox::new();
    s.write("p.toml", "[retry]\nschedule = [\"1s\"]\nmax_atempts = 2\n");
    // A checker fails on a problem.
    let out = s.triage(["config", "check", "p.toml"]).run().status(1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("p.toml:3:1: unknown key `max_atempts` in [retry]"),
        "{err}"
    );
    assert!(err.contains("did you mean `max_attempts`"), "{err}");
    let v = json_out(&out);
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"][0]["line"], 3);
    s.cmd(&["config", "check", "p.toml", "-e"]).assert().code(1);
    s.write("good.toml", include_str!("../fixtures/spec-policy.toml"));
    s.cmd(&["config", "check", "good.toml", "-e"])
        .assert()
        .code(0);
}

#[test]
fn check_reports_bad_regexes_with_their_line() {
    let s = Sandbox::new();
    s.write(
        "p.toml",
        "[[classify.rules]]\nname = \"x\"\nmatch = '(unclosed'\nkind = \"unknown\"\n",
    );
    let out = s.triage(["config", "check", "p.toml"]).run();
    let v = json_out(&out);
    assert_eq!(v["problems"][0]["line"], 3);
    assert!(v["problems"][0]["message"]
        .as_str()
        .unwrap()
        .contains("[[classify.rules]] `x`"));
}

#[test]
fn a_bad_value_warns_and_its_default_applies() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker]\nfailure_threshold = \"many\"\ncooldown = \"5s\"\n",
    );
    let out = s.triage(["config", "show"]).run().status(0);
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "policy .triage.toml:2:21: breaker.failure_threshold must be a whole number (0 or more), not the string \"many\"; the rest of the policy applies"
    ));
    assert_eq!(json_out(&out)["breaker"]["failure_threshold"], 2);
    assert_eq!(json_out(&out)["breaker"]["cooldown"], "5s");
    s.cmd(&["config", "show", "--strict"]).assert().code(65);
}

/// `--config FILE` names a file the user wants: when it does not exist, the command stops
/// with a usage error (64) that names the file and what to do, and creates nothing.
/// `TRIAGE_CONFIG` stays forgiving (a warning and the built-in defaults), and `triage hook`
/// only warns: it exits 0 whatever it is given.
#[test]
fn a_missing_config_file_named_with_the_flag_is_a_usage_error() {
    let s = crate::common::Sandbox::new();
    for (args, name) in [
        (&["--config", "nope.toml", "config", "show"][..], "config"),
        (
            &["classify", "--config", "nope.toml", "--message", "boom"][..],
            "classify",
        ),
        (&["breaker", "status", "--config=nope.toml"][..], "breaker"),
    ] {
        let out = s.triage(args).run().status(64);
        let err = out.stderr();
        assert!(
            err.starts_with(&format!("triage {name}: --config nope.toml: no such file")),
            "{args:?}: {err}"
        );
        assert!(err.contains("triage init"), "{err}");
    }
    assert!(!s.root().exists(), "nothing was created");
    let out = s
        .triage(["classify", "--message", "boom"])
        .env("TRIAGE_CONFIG", "nope.toml")
        .run()
        .status(0);
    assert!(out.stderr().contains("does not exist"), "{}", out.stderr());
    let out = s
        .triage(["hook", "--config", "nope.toml"])
        .stdin(r#"{"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Bash", "tool_input": {}}"#)
        .run()
        .status(0);
    assert!(out.stderr().contains("nope.toml"), "{}", out.stderr());
}

/// `[permits.*]` and `[budget.*]` values their types cannot judge are named with their key and
/// the fix: a max of 0, a lease of no time, an entry with no max, a budget of no tokens, a
/// ratio outside (0, 1]; good entries (globs filling a max, a ratio of exactly 1) pass.
#[test]
fn check_validates_permits_and_budgets_naming_the_key_and_the_fix() {
    let s = Sandbox::new();
    s.write(
        "p.toml",
        "[permits.api]\nmax = 0\nlease = \"0s\"\n[permits.db]\nlease = \"10s\"\n\
         [permits.\"*-pool\"]\nmax = 3\n[permits.web-pool]\nlease = \"5s\"\n\
         [budget.api]\nmax_tokens = 0\ntoken_ratio = 1.5\n[budget.ok]\nmax_tokens = 5\ntoken_ratio = 1\n\
         [budget.\"web sites\"]\nmax_tokens = -2\ntoken_ratio = 0\n",
    );
    let out = s
        .triage(["config", "check", "p.toml", "--text"])
        .run()
        .status(1);
    let text = out.stdout();
    let want = [
        "p.toml:2:1: permits.api.max = 0 grants no permit, so every acquire of `api` is refused; write 1 or more",
        "p.toml:3:1: permits.api.lease = 0s frees a permit as soon as it is taken; write a duration above 0, like \"60s\" (the default, 60s, applies)",
        "p.toml:4:10: permits.db sets no `max`, so `db` has no permits to take; add `max = 8` (how many may be held at once)",
        "p.toml:11:1: budget.api.max_tokens = 0 is no budget; write a number of tokens above 0, like 10 (the default, 10, applies)",
        "p.toml:12:1: budget.api.token_ratio = 1.5 is not what a success gives back; write a number above 0 and at most 1, like 0.1 (the default, 0.1, applies)",
        "p.toml:17:1: budget.\"web sites\".max_tokens = -2 is no budget;",
        "p.toml:18:1: budget.\"web sites\".token_ratio = 0 is not what a success gives back;",
    ];
    for w in want {
        assert!(text.contains(w), "missing {w:?} in:\n{text}");
    }
    assert!(text.trim_end().ends_with("7 problems"), "{text}");
    // At run time the bad values are left out with a warning and the defaults apply; a max
    // of 0 is kept (it grants nothing: leaving it out would leave the key unlimited).
    s.write(
        ".triage.toml",
        "[permits.api]\nmax = 0\n[budget.api]\nmax_tokens = 4\ntoken_ratio = 7\n",
    );
    let r = s.triage(["permit", "acquire", "api"]).run().status(75);
    assert!(r.stderr().contains("permits.api.max = 0"), "{}", r.stderr());
    let v = s
        .triage(["budget", "check", "api"])
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(v["token_ratio"], 0.1, "{v}");
}
