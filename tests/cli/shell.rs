//! The shell contract (issue 16): forgiving environment values, refusals that print their one
//! JSON line, `run`'s own options, `install-links`, operator commands on unknown keys, resets
//! that make old tickets stale, and help. Each section names the item it pins; each test is
//! named after the behaviour.

use crate::common::{json_out, Sandbox};
use predicates::str::contains;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Item 1: environment values are forgiving.

/// The README's `TRIAGE_STRICT=1` (and every other spelling of yes) makes a failure exit
/// non-zero; every spelling of no, an empty value and a malformed one leave it off. Before,
/// `TRIAGE_STRICT=1` made every command exit 64.
#[test]
fn triage_strict_takes_every_boolean_spelling() {
    let s = Sandbox::new();
    let run = |v: &str| {
        s.triage(["state-write", "s.json"])
            .env("TRIAGE_STRICT", v)
            .stdin("not json")
            .run()
    };
    for yes in ["1", "true", "TRUE", "yes", "Yes", "on", "ON"] {
        run(yes).status(65);
    }
    for no in ["0", "false", "False", "no", "NO", "off", ""] {
        let out = run(no).status(0);
        assert!(!stderr(&out).contains("TRIAGE_STRICT"), "{}", stderr(&out));
    }
    let out = run("maybe").status(0);
    assert!(
        stderr(&out).contains("warning: TRIAGE_STRICT=`maybe` is not a yes or no"),
        "{}",
        stderr(&out)
    );
}

/// An empty `TRIAGE_DIR=` or `TRIAGE_CONFIG=` is unset: the defaults apply (before: exit 64,
/// "a value is required").
#[test]
fn empty_environment_values_are_unset() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[breaker]\nfailure_threshold = 4\n");
    let out = s
        .triage(["config", "show"])
        .env("TRIAGE_DIR", "")
        .env("TRIAGE_CONFIG", "")
        .env("TRIAGE_STRICT", "")
        .env("TRIAGE_NOW", "")
        .run()
        .status(0);
    assert_eq!(json_out(&out)["breaker"]["failure_threshold"], 4);
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    s.cmd(&["breaker", "check", "k"])
        .env("TRIAGE_DIR", "")
        .assert()
        .code(0);
    assert!(s.exists(".triage/breakers"), "the default root was used");
}

/// `triage hook` exits 0 and still does its job whatever its environment holds; a bad value
/// is a warning naming the variable and the default used.
#[test]
fn hook_exits_0_whatever_its_environment_holds() {
    let s = Sandbox::new();
    s.cmd(&["breaker", "trip", "researcher"]).assert().code(0);
    let payload = r#"{"hook_event_name":"PreToolUse","session_id":"s1","tool_name":"Agent","tool_input":{"subagent_type":"researcher"}}"#;
    let bad: &[(&str, &str)] = &[
        ("TRIAGE_STRICT", "maybe"),
        ("TRIAGE_NOW", "yesterday"),
        ("TRIAGE_LOCK_TIMEOUT", "soon"),
        ("TRIAGE_MAX_INPUT", "lots"),
        ("TRIAGE_SEED", "x"),
        ("TRIAGE_CONFIG", "no-such-policy.toml"),
    ];
    let mut c = s.triage(["hook"]);
    for (k, v) in bad {
        c.env(k, v);
    }
    let out = c.stdin(payload).run().status(0);
    let v = json_out(&out);
    assert_eq!(
        v["hookSpecificOutput"]["permissionDecision"], "deny",
        "the gate still works"
    );
    for (k, _) in &bad[..5] {
        assert!(
            stderr(&out).contains(&format!("warning: {k}=")),
            "{k}: {}",
            stderr(&out)
        );
    }
    // Strict in the environment, a state root that cannot be made: still 0.
    s.write("file", "x");
    for strict in ["1", "yes"] {
        s.cmd(&["hook"])
            .env("TRIAGE_STRICT", strict)
            .env("TRIAGE_DIR", s.path().join("file/root"))
            .write_stdin(payload)
            .assert()
            .code(0);
    }
    // Each variable alone, with an empty and with a bad value.
    for (k, v) in bad {
        for value in ["", *v] {
            s.cmd(&["hook"])
                .env(k, value)
                .write_stdin(payload)
                .assert()
                .code(0);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Item 5: every refusal prints its one JSON line; -e makes it exit 1.

/// The refusals the issue found silent: each prints one JSON line saying it was not done, and
/// exits 1 with `-e` (0 without).
#[test]
fn refusals_print_their_json_line_and_exit_1_with_e() {
    let s = Sandbox::new();
    let cases: &[(&[&str], &str, &str, &str)] = &[
        (
            &["state-write", "s.json", "--require", "b"],
            "{\"a\":1}",
            "written",
            "required key missing: b",
        ),
        (&["state-write", "s.json"], "", "written", "stdin is empty"),
        (
            &["saga", "step", "nosuch", "x"],
            "",
            "ok",
            "no saga `nosuch`",
        ),
        (&["saga", "status", "nosuch"], "", "ok", "no saga `nosuch`"),
        (&["check-output"], "not json", "ok", "not valid JSON"),
        (&["record-error"], "", "recorded", "stdin is empty"),
    ];
    for (args, stdin, key, why) in cases {
        for e in [false, true] {
            let mut a = args.to_vec();
            if e {
                a.insert(0, "-e");
            }
            let out = s.triage(&a).stdin(*stdin).run().status(i32::from(e));
            let v = json_out(&out);
            assert_eq!(v[key], false, "{a:?}: {v}");
            assert!(
                v["problems"][0].as_str().unwrap().contains(why),
                "{a:?}: {v}"
            );
            assert!(stderr(&out).starts_with(&format!("triage {}: ", args[0])));
        }
    }
    assert!(!s.exists("s.json"));
}

// ---------------------------------------------------------------------------------------------
// Item 9: help.

/// `triage help SUB` prints SUB's help (before: "unrecognized subcommand 'help'", exit 64).
#[test]
fn help_sub_prints_the_subcommands_help() {
    let s = Sandbox::new();
    let via_help = s.triage(["help", "run"]).run().status(0);
    let via_flag = s.triage(["run", "--help"]).run();
    assert_eq!(via_help.stdout, via_flag.stdout);
    s.cmd(&["help", "breaker", "check"])
        .assert()
        .code(0)
        .stdout(contains("Usage: triage breaker check"));
    s.cmd(&["help"])
        .assert()
        .code(0)
        .stdout(contains("Usage: triage"));
    s.cmd(&["help", "nosuch"]).assert().code(64);
}

// ---------------------------------------------------------------------------------------------
// Item 6: install-links.

/// A link triage did not make (`breaker -> /bin/true`) and a plain file are left alone with a
/// warning on stderr; no trace file appears in or under the bin folder; a link to an earlier
/// triage is replaced.
#[test]
fn install_links_never_replaces_what_triage_did_not_make() {
    let s = Sandbox::new();
    let bin = s.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink("/bin/true", bin.join("breaker")).unwrap();
    std::fs::write(bin.join("classify"), "#!/bin/sh\n").unwrap();
    std::os::unix::fs::symlink("/old/place/triage", bin.join("state-read")).unwrap();
    let out = s
        .triage(["install-links", "--bare", bin.to_str().unwrap()])
        .current_dir(&bin)
        .run()
        .status(0);
    assert_eq!(
        std::fs::read_link(bin.join("breaker")).unwrap(),
        std::path::Path::new("/bin/true")
    );
    assert_eq!(
        std::fs::read_to_string(bin.join("classify")).unwrap(),
        "#!/bin/sh\n"
    );
    assert_eq!(
        std::fs::read_link(bin.join("state-read")).unwrap(),
        crate::common::bin().canonicalize().unwrap()
    );
    let err = stderr(&out);
    assert!(
        err.contains("breaker exists and is a link to /bin/true; left it alone"),
        "{err}"
    );
    assert!(err.contains("classify exists"), "{err}");
    let v = json_out(&out);
    assert_eq!(v["skipped"].as_array().unwrap().len(), 2, "{v}");
    let traces: Vec<_> = walk(s.path())
        .into_iter()
        .filter(|p| p.ends_with("triage.log"))
        .collect();
    assert!(traces.is_empty(), "{traces:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// A link named `triage-classify` runs `triage classify`, as git runs `git-foo`.
#[test]
fn git_style_names_run_their_subcommand() {
    let s = Sandbox::new();
    for name in ["triage-classify", "classify"] {
        let link = s.path().join(name);
        std::os::unix::fs::symlink(crate::common::bin(), &link).unwrap();
        let out = s
            .command(&link)
            .args(["--message", "HTTP 429 Too Many Requests"])
            .run()
            .status(0);
        assert_eq!(json_out(&out)["kind"], "rate_limited", "{name}");
    }
    let link = s.path().join("triage-state-read");
    std::os::unix::fs::symlink(crate::common::bin(), &link).unwrap();
    s.write("f.json", "{\"a\":3}");
    let out = s.command(&link).arg("f.json").run();
    assert_eq!(json_out(&out)["data"]["a"], 3);
}

// ---------------------------------------------------------------------------------------------
// Item 7: operator commands on a key with no breaker.

/// `breaker reset reseacher` (meaning `researcher`) used to print "already closed", exit 0
/// and create a phantom `reseacher.json`. Now each operator command on a missing key says so
/// with the closest existing key and creates nothing; `trip` of a new key still works.
#[test]
fn operator_commands_on_a_missing_key_suggest_and_create_nothing() {
    let s = Sandbox::new();
    s.cmd(&["breaker", "record", "researcher", "--outcome", "success"])
        .assert()
        .code(0);
    let files = || {
        let mut v: Vec<String> = std::fs::read_dir(s.root().join("breakers"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let before = files();
    for action in ["reset", "disable", "half-open"] {
        let out = s.triage(["breaker", action, "reseacher"]).run().status(0);
        assert!(
            stderr(&out).contains("no breaker `reseacher`")
                && stderr(&out).contains("did you mean `researcher`?"),
            "{action}: {}",
            stderr(&out)
        );
        assert_eq!(json_out(&out)["ok"], false, "{action}");
        s.cmd(&["-e", "breaker", action, "reseacher"])
            .assert()
            .code(1);
    }
    let out = s.triage(["breaker", "status", "reseacher", "--text"]).run();
    assert!(stderr(&out).contains("did you mean `researcher`?"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("reseacher"));
    s.cmd(&["-e", "breaker", "status", "reseacher"])
        .assert()
        .code(1);
    assert_eq!(files(), before, "nothing was created");
    let out = s.triage(["breaker", "trip", "fresh"]).run();
    assert_eq!(json_out(&out)["state"], "forced_open");
    assert!(
        stderr(&out).contains("note: no breaker `fresh` (tripping a new one)"),
        "{}",
        stderr(&out)
    );
}

// ---------------------------------------------------------------------------------------------
// Item 8: a reset makes old tickets stale; `breaker check --hook` is `breaker --hook`.

/// A ticket taken before `breaker reset` of a closed breaker was still counted afterwards.
#[test]
fn a_ticket_from_before_a_reset_is_stale() {
    let s = Sandbox::new();
    let v = s.triage(["breaker", "check", "k"]).run().stdout_json();
    let ticket = v["ticket"].as_str().unwrap().to_string();
    s.cmd(&["breaker", "reset", "k"]).assert().code(0);
    let v = s
        .triage([
            "breaker",
            "record",
            "k",
            "--outcome",
            "failure",
            "--ticket",
            &ticket,
        ])
        .run()
        .stdout_json();
    assert_eq!(v["effect"], "stale", "{v}");
    assert_eq!(v["consecutive_failures"], 0);
}

/// `breaker check --hook` (and `record --hook`) answer the hook like `breaker --hook`.
#[test]
fn breaker_check_hook_works_as_breaker_hook() {
    let s = Sandbox::new();
    s.cmd(&["breaker", "trip", "researcher"]).assert().code(0);
    let pre = r#"{"hook_event_name":"PreToolUse","tool_name":"Agent","tool_input":{"subagent_type":"researcher"}}"#;
    let plain = s.triage(["breaker", "--hook"]).stdin(pre).run();
    for args in [
        &["breaker", "check", "--hook"][..],
        &["breaker", "record", "--hook"],
    ] {
        let out = s.triage(args).stdin(pre).run().status(0);
        assert_eq!(out.stdout, plain.stdout, "{args:?}");
    }
    assert_eq!(
        json_out(&plain)["hookSpecificOutput"]["permissionDecision"],
        "deny"
    );
    s.cmd(&["breaker", "status", "--hook"]).assert().code(64);
    s.cmd(&["breaker", "check", "k", "--hook"])
        .assert()
        .code(64);
}

// ---------------------------------------------------------------------------------------------
// Item 4: run's own options.

fn report_of(out: &std::process::Output) -> serde_json::Value {
    let err = stderr(out);
    let last = err.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {err}"))
}

/// `triage run --agent x --timout 5m -- echo hi` ran `--timout` as the command (exit 127, an
/// error record, a breaker failure). An unknown option before the command is a usage error
/// that runs nothing; after the command's name, everything is the command's.
#[test]
fn run_refuses_an_unknown_option_before_the_command_as_a_usage_error() {
    let s = Sandbox::new();
    let out = s
        .triage(["run", "--agent", "x", "--timout", "5m", "--", "echo", "hi"])
        .run()
        .status(64);
    assert!(stderr(&out).starts_with("triage run: "), "{}", stderr(&out));
    assert!(stderr(&out).contains("--timeout"), "did-you-mean");
    assert!(out.stdout.is_empty());
    assert!(!s.root().exists(), "nothing recorded, no breaker touched");
    s.cmd(&["run", "--bogus", "echo", "hi"]).assert().code(64);
    let out = s
        .triage(["run", "--no-retry", "echo", "--timout", "-x"])
        .run()
        .status(0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "--timout -x\n");
}

/// --retries N, --no-retry and --delay set the attempts and the wait; --quiet drops the
/// per-attempt lines; --report FILE still takes the JSON report; --text is for a person.
#[test]
fn run_takes_retries_no_retry_delay_quiet_and_text() {
    let s = Sandbox::new();
    let fail = ["sh", "-c", "echo oops >&2; exit 3"];
    let run = |flags: &[&str]| {
        let mut a = vec!["run"];
        a.extend_from_slice(flags);
        a.extend_from_slice(&fail);
        s.triage(&a).run()
    };
    let out = run(&["--retries", "3", "--delay", "1ms"]).status(3);
    let r = report_of(&out);
    assert_eq!(r["attempts"].as_array().unwrap().len(), 4, "{r}");
    // A plain non-zero exit is a tool_failure, whose own cap (one retry) --retries replaces.
    assert_eq!(r["attempts"][3]["kind"], "tool_failure", "{r}");
    assert_eq!(r["attempts"][1]["delay_before_ms"], 1);
    assert_eq!(stderr(&out).matches("triage run: attempt").count(), 4);

    let out = run(&["--no-retry"]);
    assert_eq!(report_of(&out)["attempts"].as_array().unwrap().len(), 1);

    let out = run(&["--retries", "1", "--delay", "1ms", "--quiet"]);
    assert_eq!(report_of(&out)["attempts"].as_array().unwrap().len(), 2);
    assert!(
        !stderr(&out).contains("triage run: attempt"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        stderr(&out).lines().filter(|l| *l == "oops").count(),
        2,
        "the command's stderr"
    );

    let out = run(&["--no-retry", "--report", "r.json", "-q"]);
    let r: serde_json::Value = serde_json::from_str(&s.read("r.json")).unwrap();
    assert_eq!(r["exit_status"], 3);
    assert_eq!(stderr(&out), "oops\n");

    let out = run(&["--retries", "1", "--delay", "1ms", "--text"]);
    let err = stderr(&out);
    assert!(
        err.contains("triage run: sh failed after 2 attempts (exit status 3)")
            && err.contains("  attempt 2 after a 1ms wait: exited with status 3 (tool_failure)"),
        "{err}"
    );
    assert!(!err.contains("{\"command\""), "{err}");
    s.cmd(&["run", "--retries", "1", "--no-retry", "true"])
        .assert()
        .code(64);
}

/// --help says how long the worst case takes with the built-in schedule.
#[test]
fn run_help_says_how_long_the_worst_case_takes() {
    let s = Sandbox::new();
    s.cmd(&["run", "--help"])
        .assert()
        .code(0)
        .stdout(contains("3 attempts, 30s then 2m apart"))
        .stdout(contains("about 2m33s"));
}

/// 75 only when the command was never run: a breaker that someone else opens between
/// attempts (here the command trips it itself, as a second run or an operator would) stops
/// the retries but leaves the last attempt's status and output, and the report says why.
/// A breaker the run's own failures opened does not stop its retries at all.
#[test]
fn run_keeps_the_last_status_when_a_breaker_opens_after_its_attempts() {
    let s = Sandbox::new();
    let bin = crate::common::bin();
    let script = format!(
        "echo partial; '{}' breaker trip flaky >/dev/null 2>&1; exit 3",
        bin.display()
    );
    let out = s
        .triage([
            "run",
            "--agent",
            "flaky",
            "--retries",
            "5",
            "--delay",
            "1ms",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .run()
        .status(3);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "partial\n");
    let r = report_of(&out);
    assert_eq!(r["outcome"], "breaker_opened", "{r}");
    assert_eq!(r["attempts"].as_array().unwrap().len(), 1, "{r}");
    assert!(
        r["note"]
            .as_str()
            .unwrap()
            .contains("opened after attempt 1"),
        "{r}"
    );
    // Now it is open: the command is never run, and that alone is 75.
    let out = s
        .triage(["run", "--agent", "flaky", "--", "sh", "-c", "echo ran"])
        .run()
        .status(75);
    assert!(out.stdout.is_empty());
    assert_eq!(report_of(&out)["outcome"], "breaker_open");

    // The run's own failures open a breaker after two attempts: its retries go on (the
    // count says so), and the status is the last attempt's, never 75.
    let out = s
        .triage([
            "run",
            "--agent",
            "own",
            "--retries",
            "3",
            "--delay",
            "1ms",
            "--quiet",
            "--",
            "sh",
            "-c",
            "echo again; exit 4",
        ])
        .run()
        .status(4);
    // --quiet: no line per attempt, the breaker's "goes ahead" included; only the report.
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "again\n");
    let r = report_of(&out);
    assert_eq!(r["attempts"].as_array().unwrap().len(), 4, "{r}");
    assert_eq!(r["outcome"], "failed", "{r}");
}

/// `--timeout 0` is no timeout, as in timeout(1) (it was 10 ms).
#[test]
fn run_timeout_0_is_no_timeout() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[retry]\nschedule = [\"1ms\"]\n");
    let out = s
        .triage([
            "run",
            "--timeout",
            "0",
            "--",
            "sh",
            "-c",
            "sleep 0.2; echo done",
        ])
        .run()
        .status(0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    assert_eq!(report_of(&out)["timeout_ms"], serde_json::Value::Null);
}

// ---------------------------------------------------------------------------------------------
// Items 2 and 3, and the acceptance: a policy with eight mistakes.

const EIGHT: &str = include_str!("../fixtures/eight-mistakes.toml");

/// The issue's example: one bad regex (or a typo) made triage ignore the whole policy, so
/// `min_chars = 10` was not applied and `hello` passed.
#[test]
fn one_bad_entry_never_drops_the_whole_policy() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[breaker]\nfailure_treshold = 3\n\n[agents.researcher.output]\nmin_chars = 10\nrequire_all = ['(unclosed']\n",
    );
    let out = s
        .triage(["check-output", "--raw", "--agent", "researcher"])
        .stdin("hello")
        .run()
        .status(0);
    let v = json_out(&out);
    assert_eq!(v["ok"], false, "min_chars = 10 still applies: {v}");
    let err = stderr(&out);
    assert!(
        err.contains("policy .triage.toml:2:1: unknown key `failure_treshold` in [breaker]; did you mean `failure_threshold`?"),
        "{err}"
    );
    assert!(
        err.contains(
            "policy .triage.toml:6:16: agents.researcher.output.require_all: bad regex `(unclosed`"
        ),
        "{err}"
    );
    assert_eq!(err.matches("warning: policy").count(), 2, "{err}");
    // --strict still refuses a policy with a problem.
    s.cmd(&["check-output", "--raw", "--agent", "researcher", "--strict"])
        .write_stdin("hello")
        .assert()
        .code(65);
}

/// `config check` lists every problem in file order as FILE:LINE:COL, in the policy's words,
/// and exits 1 (0 only for a clean file); a file that does not exist is an error.
#[test]
fn config_check_lists_every_problem_and_exits_1() {
    let s = Sandbox::new();
    s.write("eight.toml", EIGHT);
    let out = s.triage(["config", "check", "eight.toml"]).run().status(1);
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    let expected = [
        "eight.toml:6:1: unknown key `max_atempts` in [retry]; did you mean `max_attempts`?",
        "eight.toml:9:1: unknown key `failure_treshold` in [breaker]; did you mean `failure_threshold`?",
        "eight.toml:13:12: breaker.\"*-consultant\".cooldown: bad duration `soon`",
        "eight.toml:17:20: thresholds.session_failures must be a whole number (0 or more), not the string \"five\"",
        "eight.toml:22:16: agents.researcher.output.require_all: bad regex `(unclosed`: unclosed group",
        "eight.toml:23:16: agents.researcher.output.files_exist: glob `../outside/*.md`",
        "eight.toml:26:11: agents.writer.timeout: duration `200000d` is too long: the maximum is 36500d",
        "eight.toml:29:1: [[classify.rules]] entry needs `name` (a required key)",
    ];
    assert_eq!(lines.len(), 8, "{err}");
    for (line, want) in lines.iter().zip(expected) {
        assert!(line.starts_with(want), "{line}\n  wanted: {want}");
    }
    let v = json_out(&out);
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"].as_array().unwrap().len(), 8);
    assert_eq!(v["problems"][2]["line"], 13);
    assert_eq!(v["problems"][2]["column"], 12);
    let text = s
        .triage(["config", "check", "eight.toml", "--text"])
        .run()
        .status(1);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.ends_with("8 problems\n"), "{stdout}");
    assert_eq!(stdout.lines().count(), 9);

    s.write("good.toml", include_str!("../fixtures/spec-policy.toml"));
    s.cmd(&["config", "check", "good.toml"]).assert().code(0);
    let out = s
        .triage(["config", "check", "nonexist.toml"])
        .run()
        .status(1);
    assert!(
        stderr(&out).starts_with("nonexist.toml: cannot read it: "),
        "{}",
        stderr(&out)
    );
    // Runtime checks too: a jq filter that does not compile, a regex too big to build.
    s.write(
        "more.toml",
        "[agents.a.output]\njq = ['.a |']\nforbid = ['\\w{1000}\\w{1000}\\w{1000}']\n",
    );
    let out = s.triage(["config", "check", "more.toml"]).run();
    let err = stderr(&out);
    assert!(
        err.contains("more.toml:2:7: agents.a.output.jq: jq filter `.a |`"),
        "{err}"
    );
    assert!(
        err.contains("more.toml:3:11: agents.a.output.forbid: bad regex"),
        "{err}"
    );
}

/// The same eight-mistake file at run time: every good entry applies, one warning per bad one.
#[test]
fn a_policy_with_eight_mistakes_applies_every_good_entry_and_warns_once_per_bad_one() {
    let s = Sandbox::new();
    s.write(".triage.toml", EIGHT);
    let out = s.triage(["config", "show"]).run().status(0);
    let err = stderr(&out);
    assert_eq!(
        err.matches("warning: policy .triage.toml:").count(),
        8,
        "{err}"
    );
    for line in [6, 9, 13, 17, 22, 23, 26, 29] {
        assert!(
            err.contains(&format!("warning: policy .triage.toml:{line}:")),
            "line {line}: {err}"
        );
    }
    let v = json_out(&out);
    assert_eq!(v["retry"]["schedule"], serde_json::json!(["1s", "2s"]));
    assert_eq!(v["breaker"]["cooldown"], "5s");
    assert_eq!(v["breaker"]["*-consultant"]["failure_threshold"], 4);
    assert_eq!(v["thresholds"]["cascade_agents"], 3);
    assert_eq!(v["agents"]["researcher"]["output"]["min_chars"], 10);
    assert_eq!(
        v["agents"]["researcher"]["output"]["require_all"],
        serde_json::json!(["hello"])
    );
    assert_eq!(v["agents"]["writer"]["criticality"], "optional");
    assert_eq!(v["classify"]["rules"][0]["name"], "quota");
    // The good entries act: the rule classifies, the output rules judge.
    let out = s
        .triage(["classify", "--message", "Quota exceeded for today"])
        .run();
    assert_eq!(json_out(&out)["matched_rule"], "config:quota");
    assert_eq!(stderr(&out).matches("warning: policy").count(), 8);
    let out = s
        .triage(["check-output", "--raw", "--agent", "researcher"])
        .stdin("hello")
        .run();
    assert_eq!(json_out(&out)["ok"], false, "min_chars = 10");
    let out = s
        .triage(["check-output", "--raw", "--agent", "researcher"])
        .stdin("hello, and long enough")
        .run();
    assert_eq!(json_out(&out)["ok"], true);
}

/// Words from our design notes that mean nothing to a user or a model.
fn design_words(text: &str) -> Vec<String> {
    static RE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)\bseeds? ?\d{3}|\bseeds?'s?\W|\bthe seeds\b|\btemplate \d|§|\bissue \d",
        )
        .unwrap()
    });
    RE.find_iter(text).map(|m| m.as_str().to_string()).collect()
}

/// No help text at any depth says "seed 000", "Template 4" or "SPEC §5"; the top-level help
/// does not claim that every subcommand prints one JSON line.
#[test]
fn help_at_any_depth_says_what_things_are_without_design_note_words() {
    // Each subcommand's long help, as `triage PATH... --help` prints it, at every depth.
    fn walk(path: &mut Vec<String>, found: &mut Vec<String>) -> usize {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let out = crate::common::command(crate::common::bin())
            .args(&args)
            .arg("--help")
            .run()
            .status(0);
        let name = std::iter::once("triage")
            .chain(args.iter().copied())
            .collect::<Vec<_>>();
        for w in design_words(&out.stdout()) {
            found.push(format!("{}: {w}", name.join(" ")));
        }
        let mut seen = 1;
        for sub in crate::common::subcommands(&args) {
            path.push(sub);
            seen += walk(path, found);
            path.pop();
        }
        seen
    }
    let mut found = Vec::new();
    let helps = walk(&mut Vec::new(), &mut found);
    assert!(helps > 30, "only {helps} help texts found");
    assert!(found.is_empty(), "{found:#?}");
    let top = Sandbox::new().triage(["--help"]).run();
    let top = String::from_utf8_lossy(&top.stdout);
    assert!(!top.contains("Every subcommand"), "{top}");
    assert!(
        top.contains("run passes its command's output through"),
        "{top}"
    );
}

/// Model-facing texts (hook answers, classify's advice, check-output's suggestions) come from
/// string literals in the source: none carries a design-note word. Comments may.
#[test]
fn no_design_note_words_in_the_programs_strings() {
    let mut found = Vec::new();
    let mut stack = vec![std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            for (i, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                let code = code.split(" // ").next().unwrap_or_default();
                for w in design_words(code) {
                    found.push(format!("{}:{}: {w}: {line}", p.display(), i + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// The table of what `-e` turns into exit 1 (`docs/exit-status.md`), row by row: each negative
/// verdict is 1 with `-e` and 0 without; every subcommand has its row.
#[test]
fn each_negative_verdict_in_the_exit_status_table_exits_1_with_e_and_0_without() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/exit-status.md"),
    )
    .unwrap();
    let table: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("| subcommand | `-e` exits 1 when |"))
        .take_while(|l| l.starts_with('|'))
        .collect();
    for sub in crate::common::subcommands(&[]) {
        let (whole, first_word) = (format!("`{sub}`"), format!("`{sub} "));
        assert!(
            table.iter().any(|row| row
                .split('|')
                .nth(1)
                .is_some_and(|c| c.contains(&whole) || c.contains(&first_word))),
            "the -e table of docs/exit-status.md has no row for {whole}"
        );
    }
    let s = Sandbox::new();
    // Each case: arguments, stdin, and the verdict's field in the JSON line.
    s.cmd(&["breaker", "trip", "open-one"]).assert().code(0);
    s.write("bad.json", "{");
    // A fleet's Redis on a port nothing listens on: refused at once.
    s.write("fleet.toml", "[store]\nurl = \"redis://127.0.0.1:1/0\"\n");
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["state-write", "s.json", "--require", "x"],
            "{}",
            "written",
        ),
        (&["state-read", "missing.json"], "", "data"),
        (
            &["classify", "--message", "error[E0308]: mismatched types"],
            "",
            "retry",
        ),
        (&["check-output", "--raw"], "", "ok"),
        (&["breaker", "check", "open-one"], "", "allowed"),
        (&["breaker", "reset", "no-such-key"], "", "ok"),
        (&["saga", "status", "no-such-saga"], "", "ok"),
        (&["report", "--dir", "bad.json"], "", "ok"),
        (
            &["--config", "fleet.toml", "store", "status"],
            "",
            "reachable",
        ),
    ];
    for (args, stdin, field) in cases {
        s.triage(*args).stdin(*stdin).run().status(0);
        let mut a = vec!["-e"];
        a.extend_from_slice(args);
        let out = s.triage(&a).stdin(*stdin).run().status(1);
        let v = json_out(&out);
        assert!(
            matches!(
                &v[field],
                serde_json::Value::Bool(false) | serde_json::Value::Null
            ),
            "{args:?}: {v}"
        );
    }
    // record-error: a record that crosses a threshold.
    for i in 1..=5 {
        let crossed = i == 5;
        let out = s
            .triage([
                "-e",
                "record-error",
                "--session",
                "t",
                "--kind",
                "timeout",
                "--agent",
                "a",
            ])
            .run()
            .context(format!("record {i}"))
            .status(i32::from(crossed));
        assert_eq!(
            json_out(&out)["warnings"].as_array().unwrap().is_empty(),
            !crossed
        );
    }
    // saga: a compensation that fails.
    s.cmd(&["saga", "begin", "w"]).assert().code(0);
    s.cmd(&["saga", "step", "w", "one", "--compensate", "exit 3"])
        .assert()
        .code(0);
    s.cmd(&["-e", "saga", "compensate", "w"]).assert().code(1);
    // init: a job that cannot be done (settings.json is broken) is 1 with -e.
    s.write(".claude/settings.json", "{");
    s.cmd(&["init"]).assert().code(0);
    s.cmd(&["-e", "init"]).assert().code(1);
    // config check: 1 on a problem, with or without -e.
    s.write("p.toml", "[retyr]\n");
    s.cmd(&["config", "check", "p.toml"]).assert().code(1);
    // hook: never.
    let pre = r#"{"hook_event_name":"PreToolUse","tool_name":"Agent","tool_input":{"subagent_type":"open-one"}}"#;
    let out = s.triage(["-e", "hook"]).stdin(pre).run().status(0);
    assert_eq!(
        json_out(&out)["hookSpecificOutput"]["permissionDecision"],
        "deny"
    );
    // run: its command's status, -e or not.
    s.cmd(&["-e", "run", "--no-retry", "true"]).assert().code(0);
}

/// `install-links` makes `triage-classify`-style links, which run their subcommand; the bare
/// names (`classify`, `breaker`, …), which another program may have, only with `--bare`.
#[test]
fn install_links_makes_prefixed_names_and_bare_ones_only_on_request() {
    let s = Sandbox::new();
    let bin = s.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    s.triage(["install-links", bin.to_str().unwrap()])
        .run()
        .status(0);
    for name in ["classify", "breaker", "check-output", "state-read"] {
        assert!(
            bin.join(format!("triage-{name}")).is_symlink(),
            "triage-{name}"
        );
        assert!(!bin.join(name).exists(), "bare {name} without --bare");
    }
    let out = s
        .command(bin.join("triage-classify"))
        .args(["--message", "HTTP 429 Too Many Requests"])
        .run()
        .status(0);
    assert_eq!(json_out(&out)["kind"], "rate_limited");
    s.triage(["install-links", "--bare", bin.to_str().unwrap()])
        .run()
        .status(0);
    assert!(bin.join("classify").is_symlink());
    assert!(bin.join("triage-classify").is_symlink());
}
