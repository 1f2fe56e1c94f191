//! The end-to-end suite: the real Claude Code client (`@anthropic-ai/claude-code`, pinned),
//! installed with npm into a cache folder, run as `claude -p ... --output-format stream-json`
//! in fresh projects set up with `triage init`, against a fake Messages API of our own on
//! 127.0.0.1, inside a network namespace that has only loopback (`unshare -rn`). Each scenario
//! asserts on what reached the model (the fake server's request log) and on `.triage/`.
//!
//! A separate test target (`cargo test --test e2e`, not part of plain `cargo test`): it takes
//! a minute or two and needs npm once. It skips, saying why, only when the client cannot be
//! installed or no network namespace can be made; `.ci/run` runs it.
//!
//! Environment: `TRIAGE_E2E_CLIENT` (the client version to install and run; default the
//! pinned [`PINNED_CLIENT`]; `.ci/run` runs the suite once with it and once with
//! [`CURRENT_CLIENT`]), `TRIAGE_E2E_CLAUDE` (a claude binary to use instead of installing one),
//! `TRIAGE_E2E_BIN` (the triage binary the hooks run; default: the test build),
//! `TRIAGE_E2E_CACHE` (where the package is installed; default `~/.cache/triage-e2e`),
//! `TRIAGE_E2E_KEEP=1` (keep each scenario's folder and print where it is);
//! `TRIAGE_REQUIRE_NPM`, `TRIAGE_REQUIRE_IP`, `TRIAGE_REQUIRE_UNSHARE` (set by `.ci/run` once
//! the tool is installed: its absence fails the suite instead of skipping it). Arguments
//! filter scenarios by name.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// The command builder of the CLI suite (`Project::triage` runs through it).
#[path = "../cli/common.rs"]
mod common;

mod api_failures;
mod client;
mod interactive;
mod plugin;
mod scenarios;
mod server;
mod session;
mod skill_shell;
mod timeouts;

use std::path::PathBuf;
use std::process::Command;

/// The client version these scenarios were written against (see
/// `shared/reference/claude-code-e2e.md`): the default.
pub const PINNED_CLIENT: &str = "2.1.330";
/// The newest client on the npm registry as of 2026-11-25 (published 2026-11-24; it adds the
/// `PreSkillShellCommand` hook event), pinned so that CI stays reproducible: `.ci/run` runs
/// the suite with `TRIAGE_E2E_CLIENT` set to it. Scenarios that need it check
/// [`client_at_least`].
pub const CURRENT_CLIENT: &str = "2.1.332";

/// The client version under test: `TRIAGE_E2E_CLIENT`, else [`PINNED_CLIENT`].
pub fn client_version() -> String {
    std::env::var("TRIAGE_E2E_CLIENT")
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| PINNED_CLIENT.to_string())
}

/// Whether the client under test is `version` or newer (dotted numbers compared as numbers).
pub fn client_at_least(version: &str) -> bool {
    let parts =
        |v: &str| -> Vec<u64> { v.split(['.', '-']).map_while(|p| p.parse().ok()).collect() };
    parts(&client_version()) >= parts(version)
}
const PACKAGE: &str = "@anthropic-ai/claude-code";
const INSIDE: &str = "TRIAGE_E2E_INSIDE";

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if std::env::var_os(INSIDE).is_some() {
        std::process::exit(scenarios::run_all(&args));
    }
    let version = client_version();
    if !version
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
    {
        eprintln!("e2e: TRIAGE_E2E_CLIENT={version:?} is not a version");
        std::process::exit(2);
    }
    println!("e2e: Claude Code client {version}");
    let claude = match find_or_install_client(&version) {
        Ok(p) => p,
        Err((why, require)) => return skip(&why, require),
    };
    if let Err((why, require)) = namespace_works() {
        return skip(&why, require);
    }
    // Run again inside a user and network namespace with only loopback, brought up first.
    let me = std::env::current_exe().expect("the test binary");
    let status = Command::new("unshare")
        .args(["-rn", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(&me)
        .args(&args)
        .env(INSIDE, "1")
        .env("TRIAGE_E2E_CLAUDE", &claude)
        .status();
    match status {
        Ok(s) => std::process::exit(s.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("e2e: cannot run unshare: {e}");
            std::process::exit(1);
        }
    }
}

/// Why a run cannot happen here, and the variable that makes that a failure (`.ci/run` sets
/// it once the tool is installed).
type Missing = (String, Option<&'static str>);

fn skip(why: &str, require: Option<&str>) {
    if let Some(var) = require.filter(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty())) {
        eprintln!("e2e: {why}, and {var} is set");
        std::process::exit(1);
    }
    println!("e2e: skipped: {why}");
    println!("0 passed, 0 failed, 1 skipped");
}

/// `tool` on PATH, or what is missing.
fn installed(tool: &str, require: &'static str) -> Result<(), Missing> {
    if common::on_path(tool) {
        Ok(())
    } else {
        Err((format!("{tool} is not installed"), Some(require)))
    }
}

/// The claude binary: `TRIAGE_E2E_CLAUDE`, else the pinned package in the cache folder,
/// installed with npm when missing.
fn find_or_install_client(version: &str) -> Result<PathBuf, Missing> {
    if let Some(p) = std::env::var_os("TRIAGE_E2E_CLAUDE").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let cache = match std::env::var_os("TRIAGE_E2E_CACHE").filter(|p| !p.is_empty()) {
        Some(c) => PathBuf::from(c),
        None => {
            let home = std::env::var_os("HOME").ok_or(("HOME is not set".to_string(), None))?;
            PathBuf::from(home).join(".cache").join("triage-e2e")
        }
    };
    let dir = cache.join(format!("claude-code-{version}"));
    let bin = dir.join("node_modules/@anthropic-ai/claude-code/bin/claude.exe");
    if !works(&bin, version) {
        installed("npm", "TRIAGE_REQUIRE_NPM")?;
        std::fs::create_dir_all(&dir)
            .map_err(|e| (format!("cannot create {}: {e}", dir.display()), None))?;
        eprintln!("e2e: installing {PACKAGE}@{version} into {}", dir.display());
        let out = Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
            ])
            .arg(&dir)
            .arg(format!("{PACKAGE}@{version}"))
            .output()
            .map_err(|e| {
                (
                    format!("npm is not available ({e}); install node and npm"),
                    Some("TRIAGE_REQUIRE_NPM"),
                )
            })?;
        if !out.status.success() {
            return Err((
                format!(
                    "npm could not install {PACKAGE}@{version}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                None,
            ));
        }
    }
    if !works(&bin, version) {
        return Err((
            format!(
                "{PACKAGE}@{version} installed, but {} does not run",
                bin.display()
            ),
            None,
        ));
    }
    Ok(bin)
}

fn works(bin: &std::path::Path, version: &str) -> bool {
    let home = std::env::temp_dir().join("triage-e2e-version-home");
    let _ = std::fs::create_dir_all(&home);
    Command::new(bin)
        .arg("--version")
        .env("HOME", &home)
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).starts_with(&format!("{version} "))
        })
}

fn namespace_works() -> Result<(), Missing> {
    installed("unshare", "TRIAGE_REQUIRE_UNSHARE")?;
    installed("ip", "TRIAGE_REQUIRE_IP")?;
    let out = Command::new("unshare")
        .args(["-rn", "sh", "-c", "ip link set lo up"])
        .output()
        .map_err(|e| {
            (
                format!("unshare(1) is not available ({e}); install util-linux"),
                Some("TRIAGE_REQUIRE_UNSHARE"),
            )
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err((
            format!(
                "cannot make a loopback-only network namespace with `unshare -rn` and `ip link set lo up` (user namespaces must be allowed): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Some("TRIAGE_REQUIRE_UNSHARE"),
        ))
    }
}
