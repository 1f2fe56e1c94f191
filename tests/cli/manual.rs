//! The manual and completions as a user meets them: `install-links` puts the pages where
//! `man` finds them through PATH, pages render with examples verbatim, `triage man` prints
//! one, and the completion scripts work in bash, zsh and fish.

use crate::common::{command, skip_unless_tool, Sandbox};
use std::path::Path;

fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}

#[test]
fn install_links_puts_the_pages_where_man_finds_them() {
    let s = Sandbox::new();
    let bin = s.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let out = s.triage(["install-links", bin.to_str().unwrap()]).run();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pages = crate::common::man_pages();
    assert_eq!(v["man_pages"], pages.len());
    for p in &pages {
        let installed = s
            .path()
            .join(format!("share/man/man{}/{}", p.section, p.file));
        assert_eq!(std::fs::read_to_string(&installed).unwrap(), p.body);
    }
    // The man(1) lookup.
    if !skip_unless_tool("man", "TRIAGE_REQUIRE_MAN") {
        return;
    }
    for (page, file) in [
        ("triage-classify", "man1/triage-classify.1"),
        ("triage-breaker-check", "man1/triage-breaker-check.1"),
        ("triage.toml", "man5/triage.toml.5"),
    ] {
        let out = command("man")
            .args(["-w", page])
            .env_remove("MANPATH")
            .env("PATH", path_with(&bin))
            .run();
        let found = String::from_utf8_lossy(&out.stdout);
        assert!(
            found.trim().ends_with(&format!("share/man/{file}")),
            "man -w {page}: {found} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Rendered at 80 columns, a long example stays on one line, as typed.
    let out = command("man")
        .args([
            "-l",
            s.path()
                .join("share/man/man1/triage-report.1")
                .to_str()
                .unwrap(),
        ])
        .env("MANWIDTH", "80")
        .env("MAN_KEEP_FORMATTING", "0")
        .env("LC_ALL", "C.UTF-8")
        .run();
    // Bold and underline come as overstrikes (`X\bX`) without a terminal: keep the letters.
    let mut text = String::new();
    let raw = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if chars.peek() == Some(&'\u{8}') {
            chars.next();
            continue;
        }
        text.push(c);
    }
    assert!(
        text.contains("triage report --workflow w1 --template pipeline-status --pipeline researcher,synthesizer,devils-advocate,fact-checker,editor"),
        "{text}"
    );
    for section in [
        "EXAMPLES",
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
        "SEE ALSO",
    ] {
        assert!(
            text.contains(&format!("\n{section}\n")),
            "{section} in\n{text}"
        );
    }
}

#[test]
fn man_prints_one_page_or_names_them_all() {
    let s = Sandbox::new();
    let out = s.triage(["man", "breaker", "check"]).run();
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(text.starts_with(".ie") || text.starts_with(".TH"), "{text}");
    assert!(
        text.contains(".TH \"triage\\-breaker\\-check\" 1"),
        "{text}"
    );
    let out = s.triage(["man", "triage.toml"]).run();
    assert!(String::from_utf8_lossy(&out.stdout).contains(".TH triage.toml 5 \"\" "));
    s.cmd(&["man", "nope"])
        .assert()
        .code(64)
        .stderr(predicates::str::contains(
            "triage man: no page `triage-nope`",
        ));
    let dir = s.path().join("manroot");
    s.cmd(&["man", "--install", dir.to_str().unwrap()])
        .assert()
        .code(0);
    assert!(dir.join("man5/triage.toml.5").is_file());
    assert!(dir.join("man1/triage-saga-begin.1").is_file());
}

fn completion(shell: &str) -> String {
    let out = Sandbox::new()
        .triage(["completions", shell])
        .run()
        .status(0);
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(
        text.contains("errors") && text.contains("unresolved"),
        "{shell}"
    );
    text
}

#[test]
fn bash_completes_subcommands_and_flags() {
    let script = completion("bash");
    if !skip_unless_tool("bash", "TRIAGE_REQUIRE_BASH") {
        return;
    }
    let s = Sandbox::new();
    let file = s.write("triage.bash", &script);
    let ask = |words: &str| {
        let out = command("bash")
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
                 COMP_LINE=\"{words}\"; COMP_POINT=${{#COMP_LINE}}; _triage triage; \
                 printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                file.display()
            ))
            .run();
        out.stdout()
    };
    assert!(
        ask("triage rep").lines().any(|l| l == "report"),
        "{}",
        ask("triage rep")
    );
    assert!(ask("triage errors --unr")
        .lines()
        .any(|l| l == "--unresolved"));
    assert!(ask("triage breaker ''").lines().any(|l| l == "check"));
}

#[test]
fn zsh_and_fish_scripts_load() {
    let s = Sandbox::new();
    let zsh = s.write("_triage", completion("zsh"));
    if skip_unless_tool("zsh", "TRIAGE_REQUIRE_ZSH") {
        command("zsh").arg("-n").arg(&zsh).run().status(0);
    }
    let fish = s.write("triage.fish", completion("fish"));
    if skip_unless_tool("fish", "TRIAGE_REQUIRE_FISH") {
        let out = command("fish")
            .arg("-c")
            .arg(format!(
                "source {}; complete -C 'triage rep'",
                fish.display()
            ))
            .run();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.lines().any(|l| l.starts_with("report")), "{text}");
    }
}

/// The fish script loads without a word on stderr, values whose help has double quotes in it
/// (`report --template parallel-status`) included, and completes those values.
#[test]
fn fish_completions_load_cleanly_and_complete_values() {
    let s = Sandbox::new();
    let fish = s.write("triage.fish", completion("fish"));
    if !skip_unless_tool("fish", "TRIAGE_REQUIRE_FISH") {
        return;
    }
    let out = command("fish")
        .arg("-c")
        .arg(format!(
            "source {}; complete -C 'triage report --template '",
            fish.display()
        ))
        .run();
    assert_eq!(out.stderr(), "", "fish refused the script");
    let text = out.stdout();
    let parallel = text
        .lines()
        .find(|l| l.starts_with("parallel-status"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(parallel.contains("\"PARTIAL SUCCESS\""), "{parallel}");
    assert!(
        text.lines().any(|l| l.starts_with("stage-failed")),
        "{text}"
    );
}

/// `triage.toml(5)`'s section of a breaker key's table reads `[breaker."KEY"]`: a double quote
/// inside a quoted `.SH` argument is written so that it does not end it.
#[test]
fn policy_page_headings_keep_their_quotes() {
    let s = Sandbox::new();
    let page = s.triage(["man", "triage.toml"]).run().status(0).stdout();
    for line in page.lines().filter(|l| l.starts_with(".SH ")) {
        let arg = &line[4..];
        if arg.starts_with('"') {
            assert!(
                arg.ends_with('"') && !arg[1..arg.len() - 1].contains('"'),
                "a quote inside a quoted heading ends it: {line}"
            );
        }
    }
    assert!(page.contains(".SH \"[breaker.\\(dqKEY\\(dq]\""), "{page}");
    if !skip_unless_tool("groff", "TRIAGE_REQUIRE_MAN") {
        return;
    }
    let out = command("groff")
        .args(["-man", "-Tutf8", "-P-c", "-P-b", "-P-u"])
        .stdin(page)
        .run()
        .status(0);
    let text = out.stdout();
    assert!(text.contains("[breaker.\"KEY\"]"), "{text}");
    assert!(!text.contains("KEY\"]\""), "{text}");
}
