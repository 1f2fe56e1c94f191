//! The examples of the README and of `docs/*.md` run as written: every command of every `sh`
//! block of a file, in order, in one project folder (a fresh one per file) with the files the
//! examples name. A usage error, a crash or an unexpected warning means the page no longer
//! tells the truth.

use crate::common::{bin, Sandbox};
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One command of a block: its text (continuation lines joined) and where it starts.
struct Example {
    line: usize,
    text: String,
}

/// The `sh` blocks of the README, each a list of commands.
fn blocks(readme: &str) -> Vec<Vec<Example>> {
    let mut out = Vec::new();
    let mut current: Option<Vec<Example>> = None;
    let mut pending: Option<Example> = None;
    for (i, line) in readme.lines().enumerate() {
        let trimmed = line.trim();
        match &mut current {
            None if trimmed == "```sh" => current = Some(Vec::new()),
            None => {}
            Some(_) if trimmed == "```" => {
                out.extend(current.take());
            }
            Some(list) => {
                if trimmed.is_empty() || trimmed.starts_with('#') {
                    continue;
                }
                let mut ex = pending.take().unwrap_or(Example {
                    line: i + 1,
                    text: String::new(),
                });
                ex.text.push_str(line);
                ex.text.push('\n');
                // A line ending in `\` or `|` goes on on the next one.
                let code = line.split(" #").next().unwrap_or(line).trim_end();
                if code.ends_with('\\') || code.ends_with('|') {
                    pending = Some(ex);
                } else {
                    list.push(ex);
                }
            }
        }
    }
    out
}

/// The files the examples read, and a home whose `~/.cargo/bin` exists.
fn project(s: &Sandbox) {
    s.write(
        "payload.json",
        r#"{"hook_event_name": "PostToolUseFailure", "session_id": "s1", "tool_name": "Agent",
            "tool_input": {"subagent_type": "researcher"}, "error": "API Error: 529 Overloaded"}"#,
    );
    // Not retryable, so the example's `if` does not sleep for the advised delay.
    s.write("err.txt", "error[E0308]: mismatched types\n");
    s.write(
        "review.md",
        "# Review\n\nVerified: every claim has a source.\n",
    );
    s.write("draft.md", "A short draft.\n");
    s.write("edited.md", "A short draft, edited.\n");
    s.write("docs/review.md", "# Review\n");
    s.write("topic.txt", "error handling\n");
    s.write(
        "hooks/triage.example.toml",
        std::fs::read(repo().join("hooks/triage.example.toml")).unwrap(),
    );
    s.write(".triage.toml", include_str!("../fixtures/spec-policy.toml"));
    for script in ["fetch-papers.sh", "research.sh", "draft.sh", "step.sh"] {
        let p = s.write(
            script,
            "#!/bin/sh\necho \"a draft with enough words to pass as output: [1] https://example.org\"\n",
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // `phase`'s example, with its stub consultant.
    for f in ["plan.toml", "policy.toml", "agents/consultant.sh"] {
        let p = s.write(
            &format!("examples/phase2/{f}"),
            std::fs::read(repo().join("examples/phase2").join(f)).unwrap(),
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::create_dir_all(s.path().join("home/.cargo/bin")).unwrap();
    std::fs::create_dir_all(
        s.path()
            .join("home/.local/share/bash-completion/completions"),
    )
    .unwrap();
    // A copy of the binary, so `triage install-links` (links beside the binary, pages in
    // ../share/man) works on the sandbox, never on the build folder.
    std::fs::create_dir_all(s.path().join("bin")).unwrap();
    // Copied by cp(1), not by this process: see contract::a_copy_under_another_name_answers_as_triage.
    let cp = std::process::Command::new("cp")
        .arg(bin())
        .arg(s.path().join("bin/triage"))
        .status()
        .unwrap();
    assert!(cp.success());
}

/// What an example may do besides exit 0 quietly, and why.
fn allowed(text: &str) -> (&'static [i32], bool) {
    match text {
        // Follows the log until interrupted: run for 2 s (see `as_run`).
        t if t.contains("--follow") => (&[124], false),
        // -e: a rejected output or an advised "no retry" is exit 1, which is the point.
        t if t.contains("check-output --config hooks/triage.example.toml -e") => (&[0, 1], false),
        t if t.contains("classify -e") => (&[0, 1], false),
        // The id is an example of the form; no such record exists here.
        t if t.contains("--resolve err-20260204T143022123Z-000001") => (&[0], true),
        // The second compensation (`git rm`) fails outside a git repository: recorded, and
        // said on stderr.
        t if t.contains("saga compensate") => (&[0], true),
        _ => (&[0], false),
    }
}

fn on_path(program: &str) -> bool {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join(program).is_file())
}

/// Runs every example of one page in a fresh project: how many ran, and what failed.
fn run_examples(page: &str) -> (usize, Vec<String>) {
    let text = std::fs::read_to_string(repo().join(page)).unwrap();
    let s = Sandbox::new();
    project(&s);
    let path = {
        let mut paths = vec![s.path().join("bin")];
        paths.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        std::env::join_paths(paths).unwrap()
    };
    let mut ran = 0;
    let mut failures = Vec::new();
    for block in blocks(&text) {
        let mut script = String::new();
        let mut examples = Vec::new();
        for ex in block {
            let text = ex.text.trim_start();
            // Building and testing the project is not an example of triage.
            let text = text
                .strip_prefix("cargo install --path . && ")
                .unwrap_or(text);
            if text.starts_with("cargo ") {
                continue;
            }
            if text.starts_with("man ") && !on_path("man") {
                eprintln!("skipped `{}`: man is not installed", text.trim());
                continue;
            }
            // A command that runs until interrupted gets 2 s.
            let text = if text.contains("--follow") {
                format!("timeout 2 {text}")
            } else {
                text.to_string()
            };
            // Outputs go to the project's root even after an example's `cd`.
            let n = examples.len();
            script.push_str(&format!(
                "{{ {text}\n}} >\"$root/out.{n}\" 2>\"$root/err.{n}\"\necho \"{n} $?\" >&3\n"
            ));
            examples.push((ex.line, text.trim().to_string()));
        }
        if examples.is_empty() {
            continue;
        }
        let status = std::process::Command::new("sh")
            .args(["-c", &format!("root=$PWD\nexec 3>status.log\n{script}")])
            .current_dir(s.path())
            .env("PATH", &path)
            .env("HOME", s.path().join("home"))
            .env_remove("TRIAGE_DIR")
            .env_remove("TRIAGE_CONFIG")
            .env_remove("TRIAGE_STRICT")
            .env_remove("TRIAGE_NOW")
            .env_remove("CLAUDE_PROJECT_DIR")
            .env_remove("NO_COLOR")
            .output()
            .unwrap();
        let log = s.read("status.log");
        assert_eq!(
            log.lines().count(),
            examples.len(),
            "{page}: the block stopped early: {}",
            String::from_utf8_lossy(&status.stderr)
        );
        for line in log.lines() {
            let (n, code) = line.split_once(' ').unwrap();
            let n: usize = n.parse().unwrap();
            let code: i32 = code.parse().unwrap();
            let (at, text) = &examples[n];
            let err = s.read(&format!("err.{n}"));
            let (codes, warnings) = allowed(text);
            let bad = !codes.contains(&code)
                || err.contains("panicked")
                || err.contains("Usage:")
                || (!warnings && err.contains(": warning: "));
            if bad {
                failures.push(format!(
                    "{page}:{at}: `{text}` exited {code}\n{}{}",
                    s.read(&format!("out.{n}")),
                    err
                ));
            }
            ran += 1;
        }
    }
    (ran, failures)
}

/// The pages of `docs/` whose examples run, in name order.
fn doc_pages() -> Vec<String> {
    let mut pages: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    pages.sort();
    pages
}

#[test]
fn every_readme_example_runs() {
    let (ran, failures) = run_examples("README.md");
    assert!(ran >= 40, "only {ran} examples found in README.md");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_example_of_the_docs_runs() {
    let mut ran = 0;
    let mut failures = Vec::new();
    for page in doc_pages() {
        let (n, f) = run_examples(&page);
        ran += n;
        failures.extend(f);
    }
    assert!(ran >= 40, "only {ran} examples found in docs/");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
