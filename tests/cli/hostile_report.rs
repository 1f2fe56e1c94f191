//! The operator's views against hostile input: bidirectional controls in every field of the
//! HTML report, a state root whose path holds a newline in the text views, and a log cut in
//! place and grown again under `errors --follow`. (How a long token lays out in a real
//! browser is in `report_html.rs`, beside the other Chromium checks.)

use crate::common::Sandbox;
use crate::text_output::NOW;
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The bidirectional embeddings, overrides and isolates (the "Trojan Source" set).
fn bidi_controls() -> Vec<char> {
    ('\u{202a}'..='\u{202e}')
        .chain('\u{2066}'..='\u{2069}')
        .collect()
}

#[test]
fn html_report_shows_bidirectional_controls_instead_of_obeying_them() {
    let all: String = bidi_controls().into_iter().collect();
    // "evil" behind a right-to-left override reads "live" where the control is obeyed.
    let name = |what: &str| format!("{what}-\u{202e}evil\u{202c}-{all}-x");
    let s = Sandbox::new();
    // The state root's path too: it is shown as the log's path.
    let root = s.path().join(format!("state{all}"));
    std::fs::create_dir_all(root.join("logs")).unwrap();
    let mut log = String::new();
    for i in 0..6 {
        let line = json!({
            "error_id": name(&format!("err-{i}")),
            "timestamp": format!("2026-02-04T14:{i:02}:00Z"),
            "session_id": name("session"),
            "workflow_id": name("workflow"),
            "phase": name("phase"),
            "agent": name("agent"),
            "kind": name("kind"),
            "severity": name("severity"),
            "detail": name("detail"),
            "duration_ms": 1500,
        });
        log.push_str(&format!("{line}\n"));
    }
    std::fs::write(root.join("logs/errors.jsonl"), log).unwrap();
    let breaker = s
        .cmd(&[
            "breaker",
            "record",
            &name("key"),
            "--outcome",
            "failure",
            "--kind",
            "timeout",
            "--detail",
            &name("breaker-detail"),
        ])
        .env("TRIAGE_DIR", &root)
        .env("TRIAGE_NOW", "2026-02-04T14:30:00Z")
        .output()
        .unwrap();
    assert!(
        breaker.status.success(),
        "{}",
        String::from_utf8_lossy(&breaker.stderr)
    );
    let out = s
        .cmd(&["report", "--html", "-", "--agent", &name("agent")])
        .env("TRIAGE_DIR", &root)
        .env("TRIAGE_NOW", NOW)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8(out.stdout).unwrap();
    // No control is left to obey, in the page, its SVG text or any title ...
    for c in bidi_controls() {
        let before = html.find(c).map(|i| {
            let from = (0..=i.saturating_sub(80))
                .rev()
                .find(|j| html.is_char_boundary(*j))
                .unwrap_or(0);
            &html[from..i]
        });
        assert!(
            before.is_none(),
            "U+{:04X} raw in the page after {before:?}",
            c as u32
        );
    }
    // ... and every field reached the page, shown rather than dropped.
    for what in [
        "err-0", "agent", "kind", "severity", "detail", "key", "session",
    ] {
        assert!(
            html.contains(&format!("{what}-\\u{{202e}}evil\\u{{202c}}-")),
            "{what} is not shown on the page"
        );
    }
    assert!(html.contains("state\\u{202a}\\u{202b}"), "the log's path");
}

/// A state root whose folder name holds a newline, with one record.
fn root_with_a_newline(s: &Sandbox) -> std::path::PathBuf {
    let root = s.path().join("state\nroot");
    let out = s
        .cmd(&["record-error", "--agent", "researcher"])
        .env("TRIAGE_DIR", &root)
        .env("TRIAGE_NOW", NOW)
        .write_stdin(r#"{"kind": "timeout", "detail": "no answer"}"#)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    root
}

fn text(s: &Sandbox, root: &Path, args: &[&str]) -> String {
    let out = s
        .cmd(args)
        .env("TRIAGE_DIR", root)
        .env("TRIAGE_NOW", NOW)
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn text_views_show_a_newline_in_the_state_roots_path_in_caret_notation() {
    let s = Sandbox::new();
    let root = root_with_a_newline(&s);
    let missing = s.path().join("gone\nroot");
    for (args, root, want) in [
        (&["--text", "report"][..], &root, "error log "),
        (&["--text", "report"][..], &missing, "no state root at "),
        (&["--text", "errors"][..], &root, "1 error record in "),
        (&["--text", "errors"][..], &missing, "no state root at "),
    ] {
        let out = text(&s, root, args);
        let name = root
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .replace('\n', "^J");
        let line = out
            .lines()
            .find(|l| l.starts_with(want))
            .unwrap_or_else(|| panic!("{args:?}: no line starting {want:?} in\n{out}"));
        assert!(
            line.contains(&format!("{}/{name}", s.path().display())),
            "{args:?}: the path on one line, the newline as ^J: {line:?}\n{out}"
        );
    }
}

/// Reads `errors --follow`'s lines on a thread, so the test waits on a channel.
struct Follow {
    child: std::process::Child,
    rx: mpsc::Receiver<String>,
}

impl Follow {
    fn start(s: &Sandbox) -> Follow {
        let mut child = s
            .std_cmd(&["errors", "--follow", "-n", "1"])
            .env("TRIAGE_NOW", NOW)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Follow { child, rx }
    }

    /// The ids of the lines printed until `last` (or 20 s pass).
    fn ids_until(&self, last: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut ids = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok(line) = self.rx.recv_timeout(left) else {
                break;
            };
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            let id = v["error_id"]
                .as_str()
                .unwrap_or("(not a record)")
                .to_string();
            ids.push(id.clone());
            if id == last {
                break;
            }
        }
        ids
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Log lines of the same length, one per id.
fn records(ids: &[&str]) -> String {
    ids.iter()
        .map(|id| {
            format!(
                "{}\n",
                json!({"error_id": id, "timestamp": NOW, "agent": "researcher",
                    "kind": "timeout", "detail": "the search API did not answer"})
            )
        })
        .collect()
}

#[test]
fn errors_follow_reads_a_log_cut_and_grown_past_its_offset_from_the_start() {
    let s = Sandbox::new();
    let log = s.root().join("logs/errors.jsonl");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::write(&log, records(&["err-old-1", "err-old-2"])).unwrap();
    let f = Follow::start(&s);
    assert_eq!(f.ids_until("err-old-2"), ["err-old-2"]);
    // An append is seen: the follower is polling, at the end of the file.
    append(&log, &records(&["err-old-3"]));
    assert_eq!(f.ids_until("err-old-3"), ["err-old-3"]);
    let before = std::fs::metadata(&log).unwrap().len();
    // Cut and written again in one write, longer than before: the same file (inode), and
    // past the follower's offset before it polls again.
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&log).unwrap());
    let fresh = [
        "err-new-1",
        "err-new-2",
        "err-new-3",
        "err-new-4",
        "err-new-5",
    ];
    std::fs::write(&log, records(&fresh)).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&log).unwrap()),
        ino
    );
    assert!(std::fs::metadata(&log).unwrap().len() > before);
    assert_eq!(
        f.ids_until("err-new-5"),
        fresh,
        "every record of the new log, from its start"
    );
    // And it goes on following the new log.
    append(&log, &records(&["err-new-6"]));
    assert_eq!(f.ids_until("err-new-6"), ["err-new-6"]);
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap();
}

/// The text views show bidi controls as `\u{…}` too, so no cell on a terminal reads reversed.
/// Failed on 9aa153f (`printable` kept them).
#[test]
fn text_views_show_bidirectional_controls_instead_of_obeying_them() {
    let s = Sandbox::new();
    let agent = "agent-\u{202e}evil\u{202c}";
    let out = s
        .cmd(&["record-error", "--agent", agent, "--session", "s1"])
        .write_stdin("connection reset by peer")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for args in [&["report", "--text"][..], &["errors", "--text"][..]] {
        let out = s.cmd(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {text}");
        assert!(
            !bidi_controls().iter().any(|c| text.contains(*c)),
            "{args:?} printed a bidi control raw:\n{text}"
        );
        assert!(text.contains("\\u{202e}"), "{args:?}:\n{text}");
    }
}
