//! What the start-up fast paths must not change: a policy's regexes are only parsed when it
//! is loaded (and compiled where they are used), yet every bad one is still reported.

use crate::common::*;

#[test]
fn a_bad_classify_regex_drops_its_rule_alone_with_a_warning() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker]\nfailure_threshold = 7\n\n[[classify.rules]]\nname = \"x\"\nmatch = '(unclosed'\nkind = \"unknown\"\n",
    );
    let out = s.triage(["classify", "--message", "boom"]).run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning")
            && err.contains(".triage.toml:6:9: [[classify.rules]] `x`: bad regex `(unclosed`")
            && err.contains("the rest of the policy applies"),
        "{err}"
    );
    // Only the rule is set aside, not the whole policy.
    let out = s.triage(["config", "show"]).run();
    assert_eq!(json_out(&out)["breaker"]["failure_threshold"], 7);
    assert_eq!(json_out(&out)["classify"]["rules"], serde_json::json!([]));
    s.cmd(&["breaker", "check", "k", "--strict"])
        .assert()
        .code(65);
}

#[test]
fn a_regex_too_big_to_compile_is_named_by_config_check_and_skipped_where_used() {
    let s = Sandbox::new();
    let huge = r"\w{1000}\w{1000}\w{1000}";
    s.write(
        ".triage.toml",
        format!("[agents.researcher.output]\nrequire_all = ['{huge}']\n"),
    );
    let out = s.triage(["config", "check", ".triage.toml"]).run();
    let v = json_out(&out);
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"][0]["line"], 2);
    assert!(
        v["problems"][0]["message"]
            .as_str()
            .unwrap()
            .contains("agents.researcher.output.require_all: bad regex"),
        "{v}"
    );
    // At run time it parses, so the policy loads; check-output cannot build it and says so.
    let out = s
        .triage(["check-output", "--agent", "researcher"])
        .stdin(r#"{"agent": "researcher", "output": "fine"}"#)
        .run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("skipped the bad regex") && err.contains("triage config check"),
        "{err}"
    );
    assert_eq!(json_out(&out)["ok"], true);
}

#[test]
fn jq_filters_with_and_without_the_standard_library() {
    let s = Sandbox::new();
    s.cmd(&["state-write", "s.json", "--update", ".n += 1"])
        .assert()
        .success();
    s.cmd(&[
        "state-write",
        "s.json",
        "--update",
        ".tags = ([.n, 2] | map(tostring)) | .ok = (.n | select(. > 0) | true)",
    ])
    .assert()
    .success();
    let out = s.triage(["state-read", "s.json"]).run();
    let v = &json_out(&out)["data"];
    assert_eq!(v["n"], 1, "{v}");
    assert_eq!(v["tags"], serde_json::json!(["1", "2"]), "{v}");
    assert_eq!(v["ok"], true, "{v}");
    let out = s
        .triage(["state-write", "s.json", "--update", "map(nosuchfn)"])
        .run()
        .status(64);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("undefined") && err.contains("nosuchfn"),
        "{err}"
    );
}
