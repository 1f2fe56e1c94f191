//! Release hygiene: the version line names the commit and the build date; the package carries
//! the license files Cargo.toml names.

use crate::common::{skip_unless_tool, Sandbox};
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn version_names_the_commit_and_the_build_date() {
    let out = Sandbox::new().triage(["--version"]).run().status(0);
    let line = String::from_utf8(out.stdout.clone()).unwrap();
    let re = regex::Regex::new(
        r"^triage \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|unknown), built \d{4}-\d{2}-\d{2}\)\n$",
    )
    .unwrap();
    assert!(re.is_match(&line), "{line:?}");
    // Built from a git checkout: the commit is HEAD's (build.rs reruns when HEAD moves).
    if skip_unless_tool("git", "TRIAGE_REQUIRE_GIT") {
        let head = crate::common::command("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(repo())
            .run();
        if head.code() == Some(0) {
            let head = head.stdout().trim().to_string();
            assert!(line.contains(&format!("commit {head}")), "{line} vs {head}");
        } else {
            eprintln!("skipped the commit check: no git checkout here");
        }
    }
    // -V stays short, so the man pages do not change with every commit.
    let short = Sandbox::new().triage(["-V"]).run();
    assert!(!String::from_utf8_lossy(&short.stdout).contains("commit"));
}

#[test]
fn license_files_match_cargo_toml() {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    assert!(manifest.contains("license = \"MIT OR Apache-2.0\""));
    let mit = std::fs::read_to_string(repo().join("LICENSE-MIT")).unwrap();
    assert!(mit.contains("Permission is hereby granted, free of charge"));
    let apache = std::fs::read_to_string(repo().join("LICENSE-APACHE")).unwrap();
    assert!(apache.contains("Apache License") && apache.contains("Version 2.0, January 2004"));
    for key in ["repository = ", "keywords = ", "categories = "] {
        assert!(manifest.contains(key), "Cargo.toml lacks {key}");
    }
    // The binary keeps its name whatever the package is called.
    assert!(manifest.contains("[[bin]]\nname = \"triage\""));
}
