//! The end-to-end suite for the other agent clients: the real Codex CLI (`@openai/codex`) and
//! Gemini CLI (`@google/gemini-cli`), each pinned, installed with npm into a cache folder, run
//! headless (`codex exec`, `gemini -p`) in fresh projects whose hook files run `triage hook
//! --client NAME`, against a fake model API of our own on 127.0.0.1 (the Responses API for
//! Codex, the Gemini API for Gemini), inside a network namespace that has only loopback
//! (`unshare -rn`). Each scenario asserts on what reached the model (the fake API's request
//! log) and on `.triage/`. How the clients were measured: `docs/clients-measured.md`.
//!
//! A separate test target (`cargo test --test e2e_clients`, not part of plain `cargo test`):
//! it takes a minute or two and needs npm once. A client that cannot be installed is skipped,
//! saying why; `.ci/run` runs it with the pinned clients and with the newest.
//!
//! Environment: `TRIAGE_E2E_CODEX`, `TRIAGE_E2E_GEMINI` (the client versions to install and
//! run; default the pinned ones, see [`clients::Client::pinned`]), `TRIAGE_E2E_BIN` (the triage
//! binary the hooks run; default: the test build), `TRIAGE_E2E_CACHE` (where the packages are
//! installed; default `~/.cache/triage-e2e`), `TRIAGE_E2E_KEEP=1` (keep each scenario's folder
//! and print where it is); `TRIAGE_REQUIRE_NPM`, `TRIAGE_REQUIRE_IP`, `TRIAGE_REQUIRE_UNSHARE`
//! (set by `.ci/run` once the tool is installed: then its absence, or a client npm cannot
//! install, fails the suite instead of skipping it). Arguments filter scenarios by name.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod clients;
mod scenarios;
mod server;

use clients::{Client, CLIENTS};
use std::path::PathBuf;
use std::process::Command;

const INSIDE: &str = "TRIAGE_E2E_INSIDE";

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if std::env::var_os(INSIDE).is_some() {
        std::process::exit(scenarios::run_all(&args));
    }
    let mut programs: Vec<(Client, PathBuf)> = Vec::new();
    let mut skipped = 0;
    for client in CLIENTS {
        let version = client.version();
        if !version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
        {
            eprintln!(
                "e2e_clients: {}={version:?} is not a version",
                client.version_var()
            );
            std::process::exit(2);
        }
        println!(
            "e2e_clients: {} {version} (pinned {}, newest measured {})",
            client.package(),
            client.pinned(),
            client.current()
        );
        match find_or_install(client, &version) {
            Ok(p) => programs.push((client, p)),
            Err((why, require)) => {
                skip(&why, require);
                skipped += 1;
            }
        }
    }
    if programs.is_empty() {
        println!("0 passed, 0 failed, {skipped} skipped");
        return;
    }
    if let Err((why, require)) = namespace_works() {
        skip(&why, require);
        println!("0 passed, 0 failed, {} skipped", CLIENTS.len());
        return;
    }
    // Run again inside a user and network namespace with only loopback, brought up first.
    let me = std::env::current_exe().expect("the test binary");
    let mut cmd = Command::new("unshare");
    cmd.args(["-rn", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(&me)
        .args(&args)
        .env(INSIDE, "1");
    for client in CLIENTS {
        cmd.env_remove(client.program_var());
    }
    for (client, program) in &programs {
        cmd.env(client.program_var(), program);
    }
    match cmd.status() {
        Ok(s) => std::process::exit(s.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("e2e_clients: cannot run unshare: {e}");
            std::process::exit(1);
        }
    }
}

/// Why a run cannot happen here, and the variable that makes that a failure (`.ci/run` sets
/// it once the tool is installed).
type Missing = (String, Option<&'static str>);

fn skip(why: &str, require: Option<&str>) {
    if let Some(var) = require.filter(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty())) {
        eprintln!("e2e_clients: {why}, and {var} is set");
        std::process::exit(1);
    }
    println!("e2e_clients: skipped: {why}");
}

fn on_path(tool: &str) -> bool {
    clients::which(tool).is_some()
}

/// `tool` on PATH, or what is missing.
fn installed(tool: &str, require: &'static str) -> Result<(), Missing> {
    if on_path(tool) {
        Ok(())
    } else {
        Err((format!("{tool} is not installed"), Some(require)))
    }
}

/// The client's program from its package in the cache folder, installed with npm when
/// missing. Once npm is here (`TRIAGE_REQUIRE_NPM`), a client it cannot install fails the
/// suite: CI must not pass having run nothing.
fn find_or_install(client: Client, version: &str) -> Result<PathBuf, Missing> {
    let cache = match std::env::var_os("TRIAGE_E2E_CACHE").filter(|p| !p.is_empty()) {
        Some(c) => PathBuf::from(c),
        None => {
            let home = std::env::var_os("HOME").ok_or(("HOME is not set".to_string(), None))?;
            PathBuf::from(home).join(".cache").join("triage-e2e")
        }
    };
    let dir = cache.join(format!("{}-{version}", client.name()));
    let program = client.program_in(&dir);
    let package = client.package();
    if !works(client, &program, version) {
        installed("npm", "TRIAGE_REQUIRE_NPM")?;
        std::fs::create_dir_all(&dir)
            .map_err(|e| (format!("cannot create {}: {e}", dir.display()), None))?;
        eprintln!(
            "e2e_clients: installing {package}@{version} into {}",
            dir.display()
        );
        let out = Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
            ])
            .arg(&dir)
            .arg(format!("{package}@{version}"))
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
                    "npm could not install {package}@{version}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                Some("TRIAGE_REQUIRE_NPM"),
            ));
        }
    }
    if !works(client, &program, version) {
        return Err((
            format!(
                "{package}@{version} installed, but {} does not run",
                program.display()
            ),
            Some("TRIAGE_REQUIRE_NPM"),
        ));
    }
    Ok(program)
}

fn works(client: Client, program: &std::path::Path, version: &str) -> bool {
    let home = std::env::temp_dir().join("triage-e2e-clients-version-home");
    let _ = std::fs::create_dir_all(&home);
    Command::new(program)
        .arg("--version")
        .env("HOME", &home)
        .env("CODEX_HOME", &home)
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .any(|l| l.trim() == client.version_line(version))
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
