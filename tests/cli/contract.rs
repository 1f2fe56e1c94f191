//! SPEC §1–3: dispatch, exit statuses, stdin handling.

use crate::common::{bin, Sandbox};

#[test]
fn unknown_flag_exits_64() {
    let s = Sandbox::new();
    s.cmd(&["--no-such-flag"]).assert().code(64);
    s.cmd(&["state-read", "f", "--no-such-flag"])
        .assert()
        .code(64)
        .stderr(predicates::str::starts_with("triage state-read: "));
}

#[test]
fn unknown_subcommand_lists_the_valid_ones() {
    let s = Sandbox::new();
    s.cmd(&["frobnicate"])
        .assert()
        .code(64)
        .stderr(predicates::str::contains(
            "valid subcommands: state-write, state-read",
        ));
}

#[test]
fn symlink_named_after_a_subcommand_runs_it() {
    let s = Sandbox::new();
    let link = s.path().join("state-read");
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    s.write("f.json", "{\"a\":1}");
    let out = s.command(&link).arg("f.json").run().status(0);
    let v = crate::common::json_out(&out);
    assert_eq!(v["data"]["a"], 1);
    assert_eq!(v["recovered_from"], "primary");
}

#[test]
/// Release archives and npm's platform packages name the binary `triage-linux-x64`,
/// `triage-musl`: under a name that is none of its multi-call names it answers as `triage`.
/// Failed on 9aa153f ("unknown program name", exit 64).
fn a_copy_under_another_name_answers_as_triage() {
    let s = Sandbox::new();
    for name in ["triage-linux-x64", "frobnicate"] {
        let copy = s.path().join(name);
        // Copied by cp(1): a copy written by this process could still be open for writing in
        // a child another test thread is forking, and executing it would fail (ETXTBSY).
        let cp = std::process::Command::new("cp")
            .arg(bin())
            .arg(&copy)
            .status()
            .unwrap();
        assert!(cp.success());
        let out = s.command(&copy).arg("--version").run().status(0);
        assert!(
            out.stdout().starts_with("triage "),
            "{name}: {}",
            out.stdout()
        );
        let out = s
            .command(&copy)
            .args(["classify", "--raw"])
            .stdin("connection reset by peer")
            .run()
            .status(0);
        assert_eq!(out.stdout_json()["kind"], "network_error", "{name}");
    }
}

#[test]
fn help_and_version_exit_0() {
    let s = Sandbox::new();
    s.cmd(&["--help"]).assert().code(0);
    s.cmd(&["--version"]).assert().code(0);
    s.cmd(&["state-write", "--help"]).assert().code(0);
}

#[test]
fn missing_arguments_exit_64_not_2() {
    let s = Sandbox::new();
    s.cmd(&[]).assert().code(64);
    s.cmd(&["state-write"]).assert().code(64);
    s.cmd(&["config"]).assert().code(64);
}

#[test]
fn broken_pipe_on_stdout_is_not_an_error() {
    let s = Sandbox::new();
    s.write("f.json", format!("{{\"a\":\"{}\"}}", "x".repeat(1 << 20)));
    let mut c = s.triage(["state-read", "f.json"]);
    let mut running = c.spawn();
    drop(running.child.stdout.take());
    running.wait().status(0);
}

#[test]
fn bad_triage_now_is_a_warning_and_the_clock() {
    let s = Sandbox::new();
    s.cmd(&["config", "show"])
        .env("TRIAGE_NOW", "yesterday")
        .assert()
        .code(0)
        .stderr(predicates::str::contains(
            "warning: TRIAGE_NOW=`yesterday` is not a time",
        ));
}

/// No input of any kind makes any subcommand exit 2 (clap's usage status) or panic (101).
#[test]
fn no_input_makes_any_subcommand_exit_2_or_panic() {
    let names = crate::common::subcommands(&[]);
    assert!(names.len() > 10, "{names:?}");
    let inputs: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"\xff\xfe garbage \0".to_vec(),
        b"{\"hook_event_name\": \"PreToolUse\", \"tool_name\": 7".to_vec(),
        "[".repeat(100_000).into_bytes(),
        b"{\"hook_event_name\": 42, \"session_id\": [], \"error\": {}}".to_vec(),
    ];
    let arg_sets: [&[&str]; 4] = [&[], &["--bogus"], &["x", "y", "z", "w"], &["--help"]];
    let s = Sandbox::new();
    for name in &names {
        for args in arg_sets {
            for input in &inputs {
                let mut a = vec![name.as_str()];
                a.extend_from_slice(args);
                let out = s
                    .triage(&a)
                    .env("TRIAGE_LOCK_TIMEOUT", "100ms")
                    .stdin(input.clone())
                    .run();
                let code = out.status.code();
                assert!(
                    code != Some(2) && code != Some(101) && code.is_some(),
                    "triage {a:?} exited {code:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// A misspelled sub-subcommand (`triage breaker stauts`) lists the subcommands of the command
/// it belongs to, not the top level's.
#[test]
fn a_misspelled_sub_subcommand_lists_its_command_s_subcommands() {
    let s = Sandbox::new();
    for (line, whose, expect) in [
        (
            &["breaker", "stauts"][..],
            "breaker",
            "check, record, status",
        ),
        (
            &["saga", "stauts"][..],
            "saga",
            "begin, step, compensate, status",
        ),
        (&["--text", "phase", "bogus"][..], "phase", "resume"),
        (&["store", "stauts"][..], "store", "status"),
    ] {
        let out = s.triage(line).run().status(64);
        let err = out.stderr();
        let valid = err
            .lines()
            .find(|l| l.starts_with("valid subcommands"))
            .unwrap_or_else(|| panic!("{line:?}: {err}"));
        assert!(
            valid.starts_with(&format!("valid subcommands of `triage {whose}`: ")),
            "{line:?}: {valid}"
        );
        assert!(valid.contains(expect), "{line:?}: {valid}");
        assert!(!valid.contains("state-write"), "{line:?}: {valid}");
    }
}

/// `triage hook` exits 0 whatever it is given (SPEC §2), a misspelled flag included: the
/// message still goes to stderr.
#[test]
fn hook_with_an_unknown_flag_exits_0() {
    let s = Sandbox::new();
    let out = s
        .triage(["hook", "--evnt", "PreToolUse"])
        .stdin("{}")
        .run()
        .status(0);
    assert!(
        out.stderr().starts_with("triage hook: "),
        "{}",
        out.stderr()
    );
    assert!(out.stderr().contains("--evnt"), "{}", out.stderr());
    assert_eq!(out.stdout(), "");
    s.triage(["hook", "--block-with-exit-2", "--bogus"])
        .stdin("{}")
        .run()
        .status(0);
    // Any other subcommand's usage error is still 64.
    s.triage(["classify", "--evnt"]).run().status(64);
}

/// A subcommand's help lists its own options first and the global ones after them, under
/// their own heading, never in between.
#[test]
fn help_lists_global_options_after_the_command_s_own() {
    let s = Sandbox::new();
    for line in [
        &["classify", "--help"][..],
        &["man", "--help"][..],
        &["breaker", "check", "--help"][..],
        &["run", "-h"][..],
    ] {
        let help = s.triage(line).run().status(0).stdout();
        let global = help
            .find("\nGlobal options:\n")
            .unwrap_or_else(|| panic!("{line:?}: no Global options heading:\n{help}"));
        let (own, globals) = help.split_at(global);
        // An option's own line starts with it (`-e, --exit-status` with its short form).
        let lists = |text: &str, flag: &str| {
            text.lines().any(|l| {
                let l = l.trim_start();
                l.starts_with(flag) || l.starts_with(&format!("-e, {flag}"))
            })
        };
        for flag in [
            "--dir <DIR>",
            "--config <FILE>",
            "--text",
            "--exit-status",
            "--strict",
        ] {
            assert!(
                !lists(own, flag),
                "{line:?}: {flag} among the command's own:\n{help}"
            );
            assert!(lists(globals, flag), "{line:?}: {flag}:\n{help}");
        }
        assert!(own.contains("\nOptions:\n"), "{line:?}:\n{help}");
    }
}
