//! `permit` and `budget` on bad input and a hostile state root: every mistake is named in the
//! subcommand's words, and a planted lease table or budget never grants more than the policy.

use crate::common::Sandbox;

fn sandbox() -> Sandbox {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.api]\nmax = 2\nlease = \"10s\"\n[budget.api]\nmax_tokens = 4\n",
    );
    s
}

#[test]
fn a_bad_key_duration_or_lease_id_is_a_usage_error_in_the_subcommands_words() {
    let s = sandbox();
    let cases: &[(&[&str], &str)] = &[
        (
            &["permit", "acquire", ""],
            "triage permit: bad key: the key is empty",
        ),
        (
            &["permit", "acquire", "a\u{1b}b"],
            "triage permit: bad key: the key holds a control character",
        ),
        (
            &["permit", "acquire", "api", "--wait", "3x"],
            "triage permit: invalid value '3x' for '--wait <DUR>'",
        ),
        (
            &["permit", "renew", "api", "../etc"],
            "triage permit: `../etc` is not a lease id",
        ),
        (
            &["permit", "acquire", "other"],
            "triage permit: the policy sets no permits for `other`: add `[permits.other] max = 8`",
        ),
        (
            &["budget", "check", "other"],
            "triage budget: the policy sets no retry budget for `other`",
        ),
        (
            &["budget", "record", "api", "--outcome", "maybe"],
            "triage budget: invalid value 'maybe' for '--outcome <OUTCOME>'",
        ),
    ];
    for (args, want) in cases {
        let r = s.triage(*args).run().status(64);
        assert!(r.stderr().contains(want), "{args:?}: {}", r.stderr());
    }
}

#[test]
fn an_unknown_lease_is_not_renewed_nor_released_and_says_so() {
    let s = sandbox();
    for verb in ["renew", "release"] {
        let r = s
            .triage(["permit", verb, "api", "deadbeef00000000"])
            .run()
            .status(0);
        let v = r.stdout_json();
        assert_eq!(
            v[if verb == "renew" {
                "renewed"
            } else {
                "released"
            }],
            false
        );
        assert!(
            r.stderr()
                .contains("triage permit: lease deadbeef00000000 of `api` is not held"),
            "{}",
            r.stderr()
        );
        s.triage(["permit", verb, "api", "deadbeef00000000", "-e"])
            .run()
            .status(1);
    }
}

#[test]
fn a_planted_lease_table_never_grants_more_than_max_nor_holds_a_slot_for_ever() {
    let s = sandbox();
    let t0: i64 = 1_767_323_045;
    let mut leases = Vec::new();
    for i in 0..50 {
        leases.push(serde_json::json!({"id": format!("p{i}"), "expires_ms": i64::MAX}));
    }
    leases.push(serde_json::json!({"id": "../../x", "expires_ms": 1}));
    leases.push(serde_json::json!({"id": 7}));
    s.write(
        ".triage/permits/api.json",
        serde_json::json!({"key": "api", "leases": leases}).to_string(),
    );
    // A table that is not one (a wrong field type) is moved aside and the key starts empty.
    let at = |t: i64| t.to_string();
    let r = s
        .triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", at(t0))
        .run()
        .status(0);
    assert!(
        r.stderr().contains("lease table was unusable"),
        "{}",
        r.stderr()
    );
    s.triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", at(t0))
        .run()
        .status(0);
    s.triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", at(t0))
        .run()
        .status(75);
    // A well-formed table of far-future leases: none granted now, all free one lease later.
    let leases: Vec<_> = (0..50)
        .map(|i| serde_json::json!({"id": format!("p{i}"), "expires_ms": i64::MAX}))
        .collect();
    s.write(
        ".triage/permits/api.json",
        serde_json::json!({"key": "api", "leases": leases}).to_string(),
    );
    let r = s
        .triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", at(t0))
        .run()
        .status(75);
    assert_eq!(r.stdout_json()["held"], 50);
    assert!(r.stderr().contains("clamped"), "{}", r.stderr());
    // Clamped to one lease time (10 s), and gone once past it by the files' margin (2 s).
    s.triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", at(t0 + 11))
        .run()
        .status(75);
    s.triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", at(t0 + 12))
        .run()
        .status(0);
}

#[test]
fn a_planted_budget_buys_no_more_than_a_full_one() {
    let s = sandbox();
    s.write(
        ".triage/budgets/api.json",
        r#"{"key": "api", "milli": 99999999}"#,
    );
    let v = s
        .triage(["budget", "record", "api", "--outcome", "failure"])
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(v["tokens"], 3.0, "{v}");
}

#[test]
fn a_budget_that_cannot_be_read_counts_as_spent_never_full() {
    let s = sandbox();
    // Spent: 3 failures leave 1 of 4 tokens, retries refused.
    for _ in 0..3 {
        s.triage(["budget", "record", "api", "--outcome", "failure"])
            .run()
            .status(0);
    }
    s.triage(["budget", "check", "api", "-e"]).run().status(1);
    // Corrupting it does not refill it: still refused, loudly.
    for garbage in [
        "garbage",
        r#"{"key": "api", "milli": -5}"#,
        r#"{"key": "other", "milli": 4000}"#,
    ] {
        s.write(".triage/budgets/api.json", garbage);
        let r = s.triage(["budget", "check", "api", "-e"]).run().status(1);
        assert_eq!(r.stdout_json()["tokens"], 0.0, "{garbage}");
        assert!(r.stderr().contains("counts as spent"), "{}", r.stderr());
        let st = s
            .triage(["budget", "status", "api"])
            .run()
            .status(0)
            .stdout_json();
        assert_eq!(st["budgets"][0]["retry_allowed"], false, "{st}");
        assert_eq!(
            s.read(".triage/budgets/api.json"),
            garbage,
            "looking changed it"
        );
    }
    // A record moves it aside and goes on from spent: a success gives back its ratio only.
    let r = s
        .triage(["budget", "record", "api", "--outcome", "success"])
        .run()
        .status(0);
    assert_eq!(r.stdout_json()["tokens"], 0.1, "{}", r.stdout());
    assert!(
        r.stderr().contains("kept the unreadable budget as"),
        "{}",
        r.stderr()
    );
}

fn agent_call(event: &str, id: &str) -> String {
    serde_json::json!({
        "hook_event_name": event,
        "session_id": "s1",
        "tool_name": "Agent",
        "tool_use_id": id,
        "tool_input": {"subagent_type": "researcher", "prompt": "look", "description": "d"},
        "tool_response": {"content": [{"type": "text", "text": "done"}]},
    })
    .to_string()
}

#[test]
fn subagent_launches_take_permits_of_agents_and_a_full_house_is_denied_with_the_wait() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.agents]\nmax = 2\nlease = \"30m\"\n",
    );
    // The clock is pinned: the wait the denial names is exact however slow the machine.
    let hook = |event: &str, id: &str| {
        s.triage(["hook"])
            .env("TRIAGE_NOW", "1767323045")
            .stdin(agent_call(event, id))
            .run()
            .status(0)
            .stdout()
    };
    assert_eq!(hook("PreToolUse", "toolu_1"), "");
    assert_eq!(hook("PreToolUse", "toolu_2"), "");
    let denied: serde_json::Value = serde_json::from_str(&hook("PreToolUse", "toolu_3")).unwrap();
    let out = &denied["hookSpecificOutput"];
    assert_eq!(out["permissionDecision"], "deny", "{denied}");
    let reason = out["permissionDecisionReason"].as_str().unwrap();
    assert!(
        reason.contains("2 of 2 subagents") && reason.contains("frees within 1800s"),
        "{reason}"
    );
    // A foreground call that ended gives its permit back: the third launch goes.
    hook("PostToolUse", "toolu_1");
    assert_eq!(hook("PreToolUse", "toolu_3"), "");
    let st = s
        .triage(["permit", "status", "agents"])
        .env("TRIAGE_NOW", "1767323045")
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(st["permits"][0]["held"], 2, "{st}");
}

/// Unix seconds now, shifted by `by` seconds.
fn now_plus(by: i64) -> String {
    (chrono::Utc::now().timestamp() + by).to_string()
}

/// Every file under `dir` of the sandbox with its bytes (sorted by path).
fn files_under(s: &Sandbox, dir: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(s.path().join(dir)) {
        for e in rd.flatten() {
            out.push((
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn looking_at_permits_with_a_clock_far_ahead_leaves_every_lease_file_as_it_was() {
    let s = Sandbox::new();
    s.write(
        ".triage.toml",
        "[permits.api]\nmax = 2\nlease = \"60s\"\n[permits.db]\nmax = 1\nlease = \"60s\"\n[budget.api]\nmax_tokens = 4\n",
    );
    for _ in 0..2 {
        s.triage(["permit", "acquire", "api"]).run().status(0);
    }
    s.triage(["budget", "record", "api", "--outcome", "failure"])
        .run()
        .status(0);
    // A table nobody can read: looking must not move it aside either.
    s.write(".triage/permits/db.json", "{not a table");
    let permits = files_under(&s, ".triage/permits");
    let budgets = files_under(&s, ".triage/budgets");
    assert!(permits.len() >= 2, "{permits:?}");
    let ten_years = now_plus(10 * 365 * 86_400);
    for args in [
        &["permit", "status"][..],
        &["permit", "status", "api", "db"],
        &["permit", "status", "--text"],
        &["budget", "status"],
        &["report"],
        &["report", "--text"],
    ] {
        let r = s
            .triage(args)
            .env("TRIAGE_NOW", &ten_years)
            .env("COLUMNS", "80")
            .run();
        assert_eq!(r.code(), Some(0), "{args:?}: {}", r.stderr());
    }
    assert_eq!(files_under(&s, ".triage/permits"), permits);
    assert_eq!(files_under(&s, ".triage/budgets"), budgets);
    // And what it showed: both leases still live, by the machine's clock.
    let st = s
        .triage(["permit", "status", "api"])
        .env("TRIAGE_NOW", &ten_years)
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(st["permits"][0]["held"], 2, "{st}");
}

#[test]
fn an_acquire_with_a_clock_a_day_off_takes_no_live_lease() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[permits.api]\nmax = 2\nlease = \"60s\"\n");
    let mut held = Vec::new();
    for _ in 0..2 {
        let v = s
            .triage(["permit", "acquire", "api"])
            .run()
            .status(0)
            .stdout_json();
        held.push(v["lease"].as_str().unwrap().to_string());
    }
    let before: serde_json::Value =
        serde_json::from_str(&s.read(".triage/permits/api.json")).unwrap();
    // A day ahead: by its clock both ran out long ago, but not by the machine's.
    let ahead = s
        .triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", now_plus(86_400))
        .run()
        .status(75);
    assert_eq!(ahead.stdout_json()["held"], 2, "{}", ahead.stdout());
    // A day behind: both lie in its future; kept as they are, not clamped to its time.
    s.triage(["permit", "acquire", "api"])
        .env("TRIAGE_NOW", now_plus(-86_400))
        .run()
        .status(75);
    let after: serde_json::Value =
        serde_json::from_str(&s.read(".triage/permits/api.json")).unwrap();
    assert_eq!(after, before, "the live leases were changed");
    // A process on the machine's clock still finds both held, each renewable by its holder.
    s.triage(["permit", "acquire", "api"]).run().status(75);
    for lease in &held {
        let r = s
            .triage(["permit", "renew", "api", lease])
            .run()
            .status(0)
            .stdout_json();
        assert_eq!(r["renewed"], true, "{r}");
    }
}

#[test]
fn an_acquire_under_faketime_a_day_ahead_takes_no_live_lease() {
    let lib = std::path::Path::new("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1");
    if !crate::common::skip_unless(
        lib.is_file(),
        "libfaketime is not installed",
        "TRIAGE_REQUIRE_FAKETIME",
    ) {
        return;
    }
    let s = Sandbox::new();
    s.write(".triage.toml", "[permits.api]\nmax = 1\nlease = \"60s\"\n");
    s.triage(["permit", "acquire", "api"]).run().status(0);
    let before = s.read(".triage/permits/api.json");
    let r = s
        .triage(["permit", "acquire", "api"])
        .env("LD_PRELOAD", lib)
        .env("FAKETIME", "+1d")
        .run();
    assert_eq!(r.code(), Some(75), "{}", r.stderr());
    assert_eq!(s.read(".triage/permits/api.json"), before);
}

/// Holds the lock of state file `rel` (its `.lock` sidecar) with flock(1) until dropped;
/// `None` (after saying why) without flock.
struct Held(std::process::Child);

impl Held {
    fn lock(s: &Sandbox, rel: &str) -> Option<Held> {
        if !crate::common::skip_unless_tool("flock", "TRIAGE_REQUIRE_FLOCK") {
            return None;
        }
        let lock = s.path().join(format!("{rel}.lock"));
        std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
        let mut holder = std::process::Command::new("flock")
            // -F: flock execs the command, so killing it lets the lock go.
            .args([
                "-F",
                lock.to_str().unwrap(),
                "-c",
                "echo held; exec sleep 60",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "held");
        Some(Held(holder))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_acquire_whose_lock_wait_runs_out_is_not_a_grant() {
    let s = sandbox();
    let Some(_held) = Held::lock(&s, ".triage/permits/api.json") else {
        return;
    };
    for strict in [false, true] {
        let mut c = s.triage(["permit", "acquire", "api"]);
        c.env("TRIAGE_LOCK_TIMEOUT", "200ms");
        if strict {
            c.arg("--strict");
        }
        let r = c.run().status(75);
        let v = r.stdout_json();
        assert_eq!(v["acquired"], false, "{v}");
        assert_eq!(v["refused"], "lock", "{v}");
        assert!(v.get("lease").is_none(), "{v}");
        assert!(
            r.stderr()
                .contains("triage permit: no permit of `api` was granted"),
            "{}",
            r.stderr()
        );
    }
    let r = s
        .triage(["permit", "acquire", "api", "--lease-only"])
        .env("TRIAGE_LOCK_TIMEOUT", "200ms")
        .run()
        .status(75);
    assert_eq!(r.stdout(), "");
}

#[test]
fn lease_only_prints_the_lease_alone_and_nothing_when_none_is_free() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[permits.api]\nmax = 1\nlease = \"60s\"\n");
    let r = s
        .triage(["permit", "acquire", "api", "--lease-only"])
        .run()
        .status(0);
    let lease = r.stdout();
    let lease = lease.trim_end_matches('\n');
    assert!(
        !lease.is_empty() && lease.bytes().all(|b| b.is_ascii_hexdigit()),
        "{lease:?}"
    );
    let st = s
        .triage(["permit", "status", "api"])
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(st["permits"][0]["leases"][0]["lease"], lease, "{st}");
    let r = s
        .triage(["permit", "acquire", "api", "--lease-only"])
        .run()
        .status(75);
    assert_eq!(r.stdout(), "");
    assert!(
        r.stderr().contains("no permit of `api` is free"),
        "{}",
        r.stderr()
    );
}

/// The example lines of `triage SUB --help` (after `Examples:`, up to the blank line).
fn help_examples(s: &Sandbox, sub: &str) -> Vec<String> {
    let help = s.triage([sub, "--help"]).run().status(0).stdout();
    let after = help
        .split("Examples:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no examples in `{sub} --help`:\n{help}"));
    after
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .collect()
}

/// The example lines of man page `man/triage-SUB.1`, unescaped from roff.
fn man_examples(sub: &str) -> Vec<String> {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("man/triage-{sub}.1")),
    )
    .unwrap();
    let block = page
        .split(".SH EXAMPLES\n")
        .nth(1)
        .and_then(|b| b.split(".nf\n").nth(1))
        .and_then(|b| b.split("\n.fi").next())
        .unwrap_or_else(|| panic!("no EXAMPLES in triage-{sub}.1"));
    block
        .lines()
        .map(|l| {
            l.replace("\\-", "-")
                .replace("\\*(Aq", "'")
                .replace("\\(dq", "\"")
                .replace("\\\\", "\\")
                .trim()
                .to_string()
        })
        .collect()
}

/// Runs `lines` as one `sh` script in the sandbox, with this build's `triage` first on PATH;
/// `DONE` is printed when every line ran.
fn run_examples(s: &Sandbox, lines: &[String], env: &[(&str, &str)]) -> crate::common::Run {
    let bin_dir = s.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let link = bin_dir.join("triage");
    if !link.exists() {
        std::os::unix::fs::symlink(crate::common::bin(), &link).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!("set -u\n{}\necho DONE\n", lines.join("\n"));
    let mut c = s.command("sh");
    c.args(["-c", &script]).env("PATH", path);
    for (k, v) in env {
        c.env(k, v);
    }
    c.run()
}

#[test]
fn every_permit_example_of_the_help_and_man_page_does_what_they_say() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[permits.api]\nmax = 1\nlease = \"60s\"\n");
    let lines = help_examples(&s, "permit");
    assert_eq!(lines, man_examples("permit"), "the man page is the help's");
    assert!(lines[0].contains("--lease-only) || exit 75"), "{lines:?}");
    // A permit free: every line runs; it is renewed, released, and shown.
    let r = run_examples(&s, &lines, &[]);
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout(), r.stderr());
    let out = r.stdout();
    assert!(out.contains("\"renewed\":true"), "{out}");
    assert!(out.contains("\"released\":true"), "{out}");
    assert!(out.contains("api ") && out.ends_with("DONE\n"), "{out}");
    let st = s
        .triage(["permit", "status", "api"])
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(st["permits"][0]["held"], 0, "{st}");
    // No permit to be had (the lock held past its wait): the script stops at once with 75 and
    // never goes on with an empty lease.
    let Some(_held) = Held::lock(&s, ".triage/permits/api.json") else {
        return;
    };
    let r = run_examples(&s, &lines, &[("TRIAGE_LOCK_TIMEOUT", "200ms")]);
    assert_eq!(r.code(), Some(75), "{}\n{}", r.stdout(), r.stderr());
    assert!(
        !r.stdout().contains("DONE") && !r.stdout().contains("renewed"),
        "{}",
        r.stdout()
    );
    assert!(
        r.stderr().contains("no permit of `api` was granted"),
        "{}",
        r.stderr()
    );
}

#[test]
fn every_budget_example_of_the_help_and_man_page_does_what_they_say() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[budget.api]\nmax_tokens = 4\n");
    let lines = help_examples(&s, "budget");
    assert_eq!(lines, man_examples("budget"), "the man page is the help's");
    // A full budget: the check passes, the failure is recorded, the status shown.
    let r = run_examples(&s, &lines, &[]);
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout(), r.stderr());
    assert!(
        r.stdout()
            .contains("api: 3.0 of 4.0 tokens; retries allowed"),
        "{}",
        r.stdout()
    );
    // Spent (1 of 4 left after two more failures): the check's `-e || exit 1` stops the script.
    for _ in 0..2 {
        s.triage(["budget", "record", "api", "--outcome", "failure"])
            .run()
            .status(0);
    }
    let r = run_examples(&s, &lines, &[]);
    assert_eq!(r.code(), Some(1), "{}\n{}", r.stdout(), r.stderr());
    assert!(!r.stdout().contains("DONE"), "{}", r.stdout());
    let v = s
        .triage(["budget", "check", "api"])
        .run()
        .status(0)
        .stdout_json();
    assert_eq!(
        v["tokens"], 1.0,
        "the record after the check did not run: {v}"
    );
}
