//! Any umask: the commands a project sees most (a hook, `record-error`, a phase, a breaker, a
//! permit, `state-write`, `report`) run in a fresh project under umask 000, 002 and 077, and
//! succeed, record what they should, and leave every folder 0700 and every file 0600. A state
//! root an older triage left writable by its group is repaired, with a warning.

use crate::common::{bin, Run, Sandbox};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const T0: &str = "2026-11-23T10:00:00Z";

const POLICY: &str =
    "[retry]\nschedule = [\"0s\"]\nmax_attempts = 1\n\n[permits.api]\nmax = 2\nlease = \"1m\"\n";

const PLAN: &str = "[[items]]\nid = \"a\"\ncommand = \"echo planned\"\n\n[[items]]\nid = \"b\"\ncommand = \"echo done\"\n";

const FAILURE: &str = r#"{"hook_event_name":"PostToolUseFailure","session_id":"s1","tool_name":"Bash","tool_use_id":"t1","error":"boom"}"#;

/// `triage ARGS` in `s` under `umask`, with `input` on stdin and a clean environment.
fn under(s: &Sandbox, umask: &str, args: &[&str], input: &str) -> Run {
    s.command("sh")
        .args(["-c", &format!("umask {umask}; exec \"$@\""), "sh"])
        .arg(bin())
        .args(args)
        .env("TRIAGE_NOW", T0)
        .stdin(input)
        .run()
}

/// Every entry under `dir` (links not followed): path → (is a folder, permission bits).
fn modes(dir: &Path) -> BTreeMap<PathBuf, (bool, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let m = std::fs::symlink_metadata(&d).unwrap();
        out.insert(d.clone(), (m.is_dir(), m.permissions().mode() & 0o7777));
        if m.is_dir() {
            for e in std::fs::read_dir(&d).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out
}

fn error_lines(s: &Sandbox) -> usize {
    std::fs::read_to_string(s.root().join("logs/errors.jsonl"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn every_command_works_and_makes_folders_0700_and_files_0600_under_umask_000_002_077() {
    for umask in ["000", "002", "077"] {
        let s = Sandbox::new();
        s.write(".triage.toml", POLICY);
        s.write("plan.toml", PLAN);
        let ctx = |what: &str| format!("umask {umask}: {what}");
        // The phase first: it used to make the root itself with the umask's mode.
        let phase = under(
            &s,
            umask,
            &[
                "phase",
                "run",
                "plan.toml",
                "--workflow",
                "w",
                "--phase",
                "1",
            ],
            "",
        )
        .context(ctx("phase run"))
        .status(0);
        assert_eq!(phase.stdout_json()["decision"], "proceed", "{}", ctx(""));
        under(&s, umask, &["hook"], FAILURE)
            .context(ctx("hook"))
            .status(0);
        under(
            &s,
            umask,
            &["record-error", "--session", "s1"],
            r#"{"kind":"timeout"}"#,
        )
        .context(ctx("record-error"))
        .status(0);
        under(
            &s,
            umask,
            &["breaker", "record", "k", "--outcome", "failure"],
            "",
        )
        .context(ctx("breaker record"))
        .status(0);
        let lease = under(&s, umask, &["permit", "acquire", "api"], "")
            .context(ctx("permit acquire"))
            .status(0)
            .stdout_json()["lease"]
            .as_str()
            .unwrap()
            .to_string();
        under(&s, umask, &["permit", "release", "api", &lease], "")
            .context(ctx("permit release"))
            .status(0);
        under(
            &s,
            umask,
            &["state-write", ".triage/run/s.json"],
            "{\"a\":1}",
        )
        .context(ctx("state-write"))
        .status(0);
        let report = under(&s, umask, &["report"], "")
            .context(ctx("report"))
            .status(0);
        for run in [&phase, &report] {
            assert!(
                !run.stderr().contains("refusing"),
                "{}: {}",
                ctx("a refusal"),
                run.stderr()
            );
        }
        // Recorded: the hook's failure and record-error's, the breaker, the manifest, the
        // permit table, the state file.
        assert!(error_lines(&s) >= 2, "{}", ctx("the error log"));
        for rel in [
            "breakers/k.json",
            "workflows/w/phase-1.json",
            "permits/api.json",
            "run/s.json",
            ".gitignore",
        ] {
            assert!(s.root().join(rel).is_file(), "{}", ctx(rel));
        }
        let all = modes(&s.root());
        assert!(all.len() > 12, "{all:?}");
        for (path, (dir, mode)) in all {
            let want = if dir { 0o700 } else { 0o600 };
            assert_eq!(
                mode,
                want,
                "{}",
                ctx(&format!("{} is {mode:04o}", path.display()))
            );
        }
    }
}

#[test]
fn a_root_an_older_version_left_writable_by_its_group_is_repaired_with_a_warning() {
    for old in [0o775, 0o770] {
        let s = Sandbox::new();
        s.write("plan.toml", PLAN);
        // As an older triage left it under umask 002: the root and a phase's folders 0775.
        std::fs::create_dir_all(s.root().join("workflows/w")).unwrap();
        for rel in ["", "workflows", "workflows/w"] {
            std::fs::set_permissions(s.root().join(rel), std::fs::Permissions::from_mode(old))
                .unwrap();
        }
        let out = under(&s, "002", &["hook"], FAILURE).status(0);
        let err = out.stderr();
        assert!(
            err.contains("triage hook: warning: .triage was writable by its group")
                && err.contains("made it 0700"),
            "{err}"
        );
        assert!(!err.contains("refusing"), "{err}");
        assert_eq!(error_lines(&s), 1, "the call still records: {err}");
        let mode = |rel: &str| {
            std::fs::metadata(s.root().join(rel))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode(""), 0o700);
        // Its folders too, when a call reaches them.
        let run = under(
            &s,
            "002",
            &[
                "phase",
                "run",
                "plan.toml",
                "--workflow",
                "w",
                "--phase",
                "1",
            ],
            "",
        )
        .status(0);
        assert!(run.stderr().contains("workflows was writable by its group"));
        assert_eq!((mode("workflows"), mode("workflows/w")), (0o700, 0o700));
        // Repaired once: the next call says nothing.
        let again = under(&s, "002", &["hook"], FAILURE).status(0);
        assert!(!again.stderr().contains("writable"), "{}", again.stderr());
        assert_eq!(error_lines(&s), 2);
    }
}

#[test]
fn a_root_writable_by_others_is_still_refused_not_repaired() {
    let s = Sandbox::new();
    std::fs::create_dir(s.root()).unwrap();
    std::fs::set_permissions(s.root(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = under(&s, "002", &["hook"], FAILURE).status(0);
    assert!(
        out.stderr().contains("writable by others (mode 0777)"),
        "{}",
        out.stderr()
    );
    let mode = std::fs::metadata(s.root()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o777);
    assert_eq!(error_lines(&s), 0);
}

#[test]
fn installed_man_pages_are_readable_by_all_whatever_the_umask() {
    let s = Sandbox::new();
    under(&s, "077", &["man", "--install", "share/man"], "").status(0);
    let all = modes(&s.path().join("share/man"));
    assert!(all.len() > 4, "{all:?}");
    for (path, (dir, mode)) in all {
        let want = if dir { 0o755 } else { 0o644 };
        assert_eq!(mode, want, "{} is {mode:04o}", path.display());
    }
}
