//! `report --text` and `breaker status --text` as people see them: snapshots at 80 and 200
//! columns, through a pipe and through a real pseudo-terminal (colour), with and without
//! `NO_COLOR`; every line fits the width; an empty or wrong root says so.

use crate::common::{Sandbox, TestCommand};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};

pub const NOW: &str = "2026-02-04T15:00:00Z";

/// How stdout is connected.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Out {
    Pipe,
    Tty,
    TtyNoColor,
}

/// A log of 60 records over two days by five agents, one resolution, and a policy with two
/// timeouts; then three breakers.
pub fn fixture() -> Sandbox {
    let s = Sandbox::new();
    s.write("errors.jsonl", fixture_log(60));
    std::fs::create_dir_all(s.root().join("logs")).unwrap();
    std::fs::rename(
        s.path().join("errors.jsonl"),
        s.root().join("logs/errors.jsonl"),
    )
    .unwrap();
    s.write(
        ".triage.toml",
        "[agents.statistician-consultant]\ntimeout = \"5m\"\n[agents.researcher]\ntimeout = \"3m\"\n",
    );
    let record = |at: &str, args: &[&str]| {
        s.triage(args).env("TRIAGE_NOW", at).run().status(0);
    };
    for at in ["2026-02-04T14:58:00Z", "2026-02-04T14:59:30Z"] {
        record(
            at,
            &[
                "breaker",
                "record",
                "researcher",
                "--outcome",
                "failure",
                "--kind",
                "timeout",
                "--detail",
                "no answer in 5m; the corpus index is still being built",
            ],
        );
    }
    record(
        "2026-02-04T12:00:00Z",
        &["breaker", "record", "calculator", "--outcome", "success"],
    );
    record(
        "2026-02-04T13:00:00Z",
        &["breaker", "trip", "statistician-consultant", "--for", "3h"],
    );
    s
}

/// `n` records, deterministic: agents, kinds and severities in turn, two per hour back from
/// [`NOW`], durations spread from 1 s to 7 min, the first one resolved.
pub fn fixture_log(n: usize) -> String {
    let agents = [
        "statistician-consultant",
        "researcher",
        "mathematician-consultant",
        "notebook-generator",
        "calculator",
    ];
    let kinds = [
        "timeout",
        "rate_limited",
        "crash",
        "validation_failed",
        "overloaded",
    ];
    let details = [
        "Agent exceeded 5 minute timeout while reading paper 5 of 8 in a corpus index that is very long",
        "HTTP 429 Too Many Requests",
        "panic: index out of range",
        "output has no citation",
        "API Error: 529 Overloaded",
    ];
    let now = chrono::DateTime::parse_from_rfc3339(NOW).unwrap();
    let severities = ["critical", "error", "warning"];
    let mut lines = Vec::new();
    for i in 0..n {
        // Uneven gaps, so the sparkline has a shape.
        let at = now - chrono::Duration::minutes(27 * i as i64 + (i * i % 17) as i64 + 7);
        let rec = serde_json::json!({
            "error_id": format!("err-{}-{i:06}", at.format("%Y%m%dT%H%M%S000Z")),
            "timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "session_id": format!("s{}", i % 4),
            "workflow_id": format!("w{}", i % 2),
            "phase": 2,
            "agent": agents[i % 5],
            "kind": kinds[(i * 3) % 5],
            "severity": severities[i % 3],
            "detail": details[(i * 3) % 5],
            "retry_count": i % 3,
            "duration_ms": 1000 + (i as u64 * 7919) % 420_000,
        });
        lines.push(rec.to_string());
    }
    // Oldest first, as a log is written.
    lines.reverse();
    let mut out = lines.join("\n");
    out.push('\n');
    if n > 0 {
        let first = format!(
            "err-{}-{:06}",
            (now - chrono::Duration::minutes(7)).format("%Y%m%dT%H%M%S000Z"),
            0
        );
        out.push_str(
            &serde_json::json!({"resolves": first, "timestamp": NOW, "agent": agents[0],
                "resolution": {"action_taken": "retry", "successful": true}})
            .to_string(),
        );
        out.push('\n');
    }
    out
}

fn command(s: &Sandbox, args: &[&str], columns: Option<usize>, out: Out) -> Command {
    let mut c = s.std_cmd(args);
    c.env("TRIAGE_NOW", NOW)
        .env("TZ", "UTC")
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS");
    if let Some(w) = columns {
        c.env("COLUMNS", w.to_string());
    }
    if out == Out::TtyNoColor {
        c.env("NO_COLOR", "1");
    }
    c.stdin(Stdio::null()).stderr(Stdio::piped());
    c
}

/// Runs `triage ARGS` with stdout on a pipe or on a new pseudo-terminal `tty_cols` wide.
fn run(s: &Sandbox, args: &[&str], columns: Option<usize>, out: Out, tty_cols: u16) -> String {
    let mut c = command(s, args, columns, out);
    let text = if out == Out::Pipe {
        let o = TestCommand::from_std(c).stdin_null().run().status(0);
        String::from_utf8(o.into_output().stdout).unwrap()
    } else {
        use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name.to_str().unwrap())
            .unwrap();
        let size = rustix::termios::Winsize {
            ws_row: 50,
            ws_col: tty_cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(&slave, size).unwrap();
        c.stdout(Stdio::from(OwnedFd::from(slave)));
        let mut child = c.spawn().unwrap();
        // Our copy of the terminal's slave end went to the child: reading ends when it exits.
        drop(c);
        let mut master = std::fs::File::from(master);
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match master.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(_) => break, // EIO: the child closed the terminal
            }
        }
        let status = child.wait().unwrap();
        assert!(status.success());
        String::from_utf8(bytes).unwrap().replace("\r\n", "\n")
    };
    text
}

/// What a terminal shows: escape sequences removed.
fn visible(text: &str) -> String {
    regex::Regex::new("\x1b\\[[0-9;]*m")
        .unwrap()
        .replace_all(text, "")
        .into_owned()
}

/// Escapes made readable in the snapshots.
fn shown(text: &str) -> String {
    text.replace('\x1b', "⟨ESC⟩")
}

fn check_forms(name: &str, args: &[&str]) {
    let s = fixture();
    for width in [80usize, 200] {
        let plain = run(&s, args, Some(width), Out::Pipe, 100);
        let no_color = run(&s, args, Some(width), Out::TtyNoColor, 100);
        let colour = run(&s, args, Some(width), Out::Tty, 100);
        assert!(!plain.contains('\x1b'), "a pipe gets no colour:\n{plain}");
        assert_eq!(no_color, plain, "NO_COLOR on a terminal is the plain text");
        assert!(
            colour.contains("\x1b["),
            "a terminal gets colour:\n{colour}"
        );
        assert_eq!(visible(&colour), plain, "colour changes no character");
        for line in plain.lines() {
            assert!(
                line.chars().count() <= width,
                "{width} columns: {} > {width}: {line:?}",
                line.chars().count()
            );
        }
        insta::assert_snapshot!(format!("{name}_{width}_plain"), plain);
        insta::assert_snapshot!(format!("{name}_{width}_colour"), shown(&colour));
    }
}

#[test]
fn report_text_fits_and_colours_only_terminals() {
    check_forms("report", &["report", "--text"]);
}

#[test]
fn breaker_status_text_fits_and_colours_only_terminals() {
    check_forms("breaker_status", &["breaker", "status", "--text"]);
}

#[test]
fn without_columns_the_terminals_width_is_used() {
    let s = fixture();
    let text = run(&s, &["report", "--text"], None, Out::TtyNoColor, 60);
    assert!(text.lines().all(|l| l.chars().count() <= 60), "{text}");
    assert!(text.lines().any(|l| l.chars().count() > 50), "{text}");
}

#[test]
fn a_missing_root_or_log_is_named_not_reported_as_zero() {
    let s = Sandbox::new();
    let text = run(
        &s,
        &["report", "--text", "--dir", "nowhere"],
        Some(80),
        Out::Pipe,
        80,
    );
    assert!(text.contains("no state root at nowhere"), "{text}");
    assert!(
        text.contains("--dir") && text.contains("TRIAGE_DIR"),
        "{text}"
    );
    assert!(!text.contains("0 error records"), "{text}");
    std::fs::create_dir_all(s.root()).unwrap();
    let text = run(&s, &["report", "--text"], Some(80), Out::Pipe, 80);
    assert!(
        text.contains("no error log at ./.triage/logs/errors.jsonl"),
        "{text}"
    );
    let text = run(
        &s,
        &["breaker", "status", "--text"],
        Some(80),
        Out::Pipe,
        80,
    );
    assert!(
        text.contains("no breakers under ./.triage/breakers"),
        "{text}"
    );
    let f = fixture();
    let text = run(
        &f,
        &["report", "--text", "--session", "s9"],
        Some(200),
        Out::Pipe,
        80,
    );
    assert!(
        text.contains("no error record matches session s9 (60 records in the log)"),
        "{text}"
    );
}

#[test]
fn counts_agree_with_their_numbers_and_say_what_was_read() {
    let s = fixture();
    let text = run(
        &s,
        &["report", "--text", "--session", "s1", "--since", "2h"],
        Some(200),
        Out::Pipe,
        80,
    );
    assert!(
        text.starts_with(
            "error log ./.triage/logs/errors.jsonl (session s1, since 2026-02-04 13:00)"
        ),
        "{text}"
    );
    assert!(
        text.contains("1 error record in 1 session and 1 workflow"),
        "{text}"
    );
}

#[test]
fn on_a_terminal_only_our_colours_pass_not_escapes_from_input() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.root().join("logs")).unwrap();
    let evil = "agent\u{1b}]0;owned\u{7}\u{1b}[2J";
    let line = serde_json::json!({"error_id": "e1", "timestamp": NOW, "agent": evil,
        "kind": "timeout", "severity": "critical", "detail": evil, "session_id": evil});
    std::fs::write(s.root().join("logs/errors.jsonl"), format!("{line}\n")).unwrap();
    s.triage([
        "breaker",
        "record",
        evil,
        "--outcome",
        "failure",
        "--detail",
        evil,
    ])
    .env("TRIAGE_NOW", NOW)
    .run()
    .status(0);
    let sgr = regex::Regex::new("\u{1b}\\[[0-9;]+m").unwrap();
    for args in [
        &["report", "--text"][..],
        &["breaker", "status", "--text"],
        &["errors", "--text"],
    ] {
        for width in [80, 200] {
            let text = run(&s, args, Some(width), Out::Tty, 100);
            assert!(sgr.is_match(&text), "{args:?}: our colours stay:\n{text}");
            assert!(
                !text.contains("\u{1b}]") && !text.contains("\u{1b}[2J") && !text.contains('\u{7}'),
                "{args:?}: an escape from input reached the terminal:\n{}",
                shown(&text)
            );
            assert!(text.contains("^[]0;owned^G"), "{args:?}:\n{}", shown(&text));
        }
    }
}
