//! The documents that must match the binary: man pages generated from the clap definitions,
//! the `bin/` multi-call entry points, and the README's quick start.

use crate::common::{bin, Sandbox};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn man_pages_are_current() {
    // Every page at every depth and triage.toml(5), as `triage man --install` writes them.
    let dir = repo().join("man");
    let pages: Vec<(String, Vec<u8>)> = crate::common::man_pages()
        .into_iter()
        .map(|p| (p.file, p.body.into_bytes()))
        .collect();
    if std::env::var_os("UPDATE_MAN").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            std::fs::remove_file(entry.path()).unwrap();
        }
        for (name, body) in &pages {
            std::fs::write(dir.join(name), body).unwrap();
        }
    }
    let mut stale = Vec::new();
    for (name, body) in &pages {
        if std::fs::read(dir.join(name)).ok().as_ref() != Some(body) {
            stale.push(name.clone());
        }
    }
    let on_disk: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let extra: Vec<&String> = on_disk
        .iter()
        .filter(|n| !pages.iter().any(|(p, _)| p == *n))
        .collect();
    assert!(
        stale.is_empty() && extra.is_empty(),
        "man/ is stale (changed: {stale:?}, extra: {extra:?}); run `UPDATE_MAN=1 cargo test --test cli docs::man` and commit man/"
    );
    for must in [
        "triage-breaker-check.1",
        "triage-saga-begin.1",
        "triage-errors.1",
        "triage-completions.1",
        "triage.toml.5",
    ] {
        assert!(on_disk.iter().any(|n| n == must), "man/{must}");
    }
}

/// No man page, `triage.toml(5)` included, speaks of the design notes behind triage: the word
/// "seed" (seed 000, seed 002's, the seeds), "Template 4", "SPEC §5" or an issue number mean
/// nothing to a reader of the manual (`TRIAGE_SEED`, a variable's name, is not the word).
#[test]
fn no_man_page_says_seed_or_other_design_words() {
    let words = regex::Regex::new(r"(?i)\bseed(s|'s)?\b|\btemplate \d|§|\bissue \d").unwrap();
    let mut found = Vec::new();
    for page in crate::common::man_pages() {
        for (i, line) in page.body.lines().enumerate() {
            for m in words.find_iter(line) {
                found.push(format!("{}:{}: {}: {line}", page.file, i + 1, m.as_str()));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn bin_has_one_entry_point_per_multicall_name() {
    let dir = repo().join("bin");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, multicall_names());
}

/// The names `install-links` makes links for, in name order.
fn multicall_names() -> Vec<String> {
    let s = Sandbox::new();
    let links = s.path().join("links");
    std::fs::create_dir(&links).unwrap();
    s.cmd(&["install-links", "--bare", links.to_str().unwrap()])
        .assert()
        .code(0);
    let mut names: Vec<String> = std::fs::read_dir(&links)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_symlink())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("triage-"))
        .collect();
    names.sort();
    names
}

fn path_with_triage() -> std::ffi::OsString {
    let dir = bin().parent().unwrap().to_path_buf();
    let mut paths = vec![dir];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}

#[test]
fn bin_entry_points_run_their_subcommand() {
    let s = Sandbox::new();
    s.write("f.json", "{\"a\":1}");
    let out = std::process::Command::new(repo().join("bin/state-read"))
        .arg("f.json")
        .env("PATH", path_with_triage())
        .current_dir(s.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(crate::common::json_out(&out)["data"]["a"], 1);
}

#[test]
fn install_links_creates_working_links() {
    let s = Sandbox::new();
    let links = s.path().join("links");
    std::fs::create_dir(&links).unwrap();
    s.cmd(&["install-links", links.to_str().unwrap()])
        .assert()
        .code(0);
    // Twice is fine.
    s.cmd(&["install-links", links.to_str().unwrap()])
        .assert()
        .code(0);
    // One link per entry point of bin/ (one per multi-call name, as the test above checks),
    // named triage-NAME.
    for e in std::fs::read_dir(repo().join("bin")).unwrap().flatten() {
        let name = format!("triage-{}", e.file_name().to_string_lossy());
        assert!(links.join(&name).is_symlink(), "{name:?}");
    }
    s.write("f.json", "{\"a\":2}");
    let out = std::process::Command::new(links.join("triage-state-read"))
        .arg("f.json")
        .current_dir(s.path())
        .output()
        .unwrap();
    assert_eq!(crate::common::json_out(&out)["data"]["a"], 2);
}

/// The quick start's first command, after `cargo install --path . &&`, run in an empty folder.
#[test]
fn readme_quick_start_works_from_an_empty_folder() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo install --path . && "))
        .expect("the README's quick start begins with `cargo install --path . && `");
    let example = line.trim_start_matches("cargo install --path . && ");
    let s = Sandbox::new();
    let out = std::process::Command::new("sh")
        .args(["-c", example])
        .env("PATH", path_with_triage())
        .env_remove("TRIAGE_DIR")
        .env_remove("CLAUDE_PROJECT_DIR")
        .current_dir(s.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{example}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty());
    let tests = readme.lines().any(|l| l.trim() == "cargo test");
    assert!(
        tests,
        "the README's quick start names the test command `cargo test`"
    );
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == "cargo test"),
        ".ci/run runs the README's test command"
    );
    let _ = Path::new("");
}
