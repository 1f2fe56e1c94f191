//! The ways triage reaches Claude Code users: the Claude Code plugin (`plugin/`: its hooks
//! wire what `triage init` wires; its launcher finds a binary or fails open) and the npm
//! packages (`npm/`, made by `dist/npm-packages`: packed, installed offline, run with npx);
//! and the release (`dist/plugin-archive`, `.github/workflows/`).

use crate::common::{bin, skip_unless, skip_unless_tool, Sandbox};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const PLUGIN_BINARY: &str = "\"${CLAUDE_PLUGIN_ROOT}/bin/triage\"";

/// The plugin carries the events `init` writes for the oldest supported client (a plugin
/// cannot carry an event for newer clients only: the older one rejects the whole file), with
/// the same matchers and timeouts, each running the plugin's launcher by its path in a short
/// command that says nothing of its own (the client shows the model the command before every
/// blocking answer).
#[test]
fn plugin_hooks_wire_the_events_init_wires_for_every_supported_client() {
    let s = Sandbox::new();
    let bin = crate::common::fake_claude(s.path(), "2.1.330");
    let out = s
        .cmd(&["init"])
        .env("HOME", s.path())
        .env("PATH", crate::common::path_with(&bin))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let init: Value = serde_json::from_str(&s.read(".claude/settings.json")).unwrap();
    let text = std::fs::read_to_string(repo().join("plugin/hooks/hooks.json")).unwrap();
    let plugin: Value = serde_json::from_str(&text).unwrap();
    assert!(plugin["hooks"].get("PreSkillShellCommand").is_none());

    let mut commands = 0;
    let mut plugin_hooks = plugin["hooks"].clone();
    let mut init_hooks = init["hooks"].clone();
    for (event, groups) in plugin_hooks.as_object_mut().unwrap() {
        for group in groups.as_array_mut().unwrap() {
            for handler in group["hooks"].as_array_mut().unwrap() {
                let cmd = handler["command"].as_str().unwrap();
                let launcher = format!("sh {PLUGIN_BINARY} hook");
                let expected = if event == "StopFailure" {
                    format!("trap '' TERM HUP; {launcher}")
                } else {
                    launcher
                };
                assert_eq!(cmd, expected);
                assert!(!cmd.contains("not found") && !cmd.contains("echo"), "{cmd}");
                handler["command"] = Value::from("the command");
                commands += 1;
            }
        }
    }
    for groups in init_hooks.as_object_mut().unwrap().values_mut() {
        for group in groups.as_array_mut().unwrap() {
            for handler in group["hooks"].as_array_mut().unwrap() {
                let cmd = handler["command"].as_str().unwrap();
                assert!(!cmd.contains("not found") && !cmd.contains("echo"), "{cmd}");
                handler["command"] = Value::from("the command");
            }
        }
    }
    assert_eq!(commands, 8);
    // The same events, in the same order, with the same matchers and timeouts.
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&plugin_hooks), keys(&init_hooks));
    assert_eq!(plugin_hooks, init_hooks);
}

#[test]
fn the_plugin_the_marketplace_and_the_npm_launcher_carry_the_crate_version() {
    let read = |rel: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(repo().join(rel)).unwrap()).unwrap()
    };
    let version = env!("CARGO_PKG_VERSION");
    let plugin = read("plugin/.claude-plugin/plugin.json");
    assert_eq!(plugin["version"], version);
    let marketplace = read(".claude-plugin/marketplace.json");
    let entry = &marketplace["plugins"][0];
    assert_eq!(entry["name"], plugin["name"]);
    assert_eq!(entry["source"], "./plugin");
    assert_eq!(entry["version"], version);
    let npm = read("npm/agent-triage/package.json");
    assert_eq!(npm["version"], version);
    assert_eq!(
        npm["bin"],
        serde_json::json!({"triage": "bin/triage", "agent-triage": "bin/triage"})
    );
    assert_eq!(
        npm["scripts"],
        serde_json::json!({"postinstall": "node install.js"}),
        "one install script, the link: {npm:#}"
    );
}

/// A folder holding links to the few programs the launcher may use, and no `triage`.
fn bare_path(s: &Sandbox) -> PathBuf {
    let dir = s.path().join("usr-bin");
    std::fs::create_dir_all(&dir).unwrap();
    for tool in ["cat", "grep", "sh", "sleep", "uname"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("no {tool} in /usr/bin or /bin"));
        std::os::unix::fs::symlink(found, dir.join(tool)).unwrap();
    }
    dir
}

fn launcher(s: &Sandbox, path: &str, args: &[&str]) -> Command {
    let mut c = Command::new(repo().join("plugin/bin/triage"));
    c.args(args)
        .current_dir(s.path())
        .env_clear()
        .env("PATH", path)
        .env("HOME", s.path().join("home"));
    c
}

fn run_with_input(mut c: Command, input: &[u8]) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A launcher that did not read its stdin would make this fail with EPIPE.
    stdin
        .write_all(input)
        .expect("the payload is read to its end");
    drop(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn the_launchers_and_release_scripts_are_shellcheck_clean() {
    let scripts = [
        "plugin/bin/triage",
        "hooks/scripts/triage-hook.sh",
        "dist/build",
        "dist/npm-packages",
        "dist/plugin-archive",
        "bench/hot-text",
    ];
    match Command::new("shellcheck").arg("--version").output() {
        Ok(o) if o.status.success() => {
            let out = Command::new("shellcheck")
                .args(scripts)
                .current_dir(repo())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
            // The command `triage init` writes into settings.json, as `sh -c` runs it.
            let s = Sandbox::new();
            let done = s.cmd(&["init"]).env("HOME", s.path()).output().unwrap();
            assert!(done.status.success(), "{done:?}");
            let settings: Value = serde_json::from_str(&s.read(".claude/settings.json")).unwrap();
            let command = settings["hooks"]["StopFailure"][0]["hooks"][0]["command"]
                .as_str()
                .unwrap();
            let script = s.write("init-command.sh", format!("#!/bin/sh\n{command}\n"));
            let out = Command::new("shellcheck").arg(&script).output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        _ => eprintln!("skipped shellcheck: it is not installed (apt install shellcheck)"),
    }
    for script in ["npm/agent-triage/bin/triage", "npm/agent-triage/install.js"] {
        let out = Command::new("node")
            .args(["--check", script])
            .current_dir(repo())
            .output();
        match out {
            Ok(o) => assert!(o.status.success(), "{o:?}"),
            Err(_) => eprintln!("skipped node --check: node is not installed"),
        }
    }
}

/// dist/build keeps a released x86-64 binary only when dist/hot-text-check finds the listed
/// functions gathered; a binary laid out otherwise (this test's own build) is refused with why.
#[test]
fn the_hot_text_check_refuses_a_binary_whose_hot_functions_are_not_gathered() {
    if !skip_unless_tool("nm", "TRIAGE_REQUIRE_NM")
        || !skip_unless_tool("python3", "TRIAGE_REQUIRE_PYTHON3")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("hot.txt");
    let check = |list: &Path| {
        Command::new("python3")
            .arg("dist/hot-text-check")
            .arg(bin())
            .arg(list)
            .current_dir(repo())
            .output()
            .unwrap()
    };
    // The listed functions are the binary's own, scattered through its text.
    let nm = Command::new("nm")
        .args(["-S", "--defined-only", "--size-sort"])
        .arg(bin())
        .output()
        .unwrap();
    let names: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [_, _, "t" | "T", name] if name.starts_with("_ZN6triage") => Some(name.to_string()),
            _ => None,
        })
        .step_by(7)
        .take(200)
        .collect();
    if names.len() < 50 {
        eprintln!("skipped the hot-text check: the binary under test has no symbol table");
        return;
    }
    let text: String = names.iter().map(|n| format!(".text.{n}\n")).collect();
    std::fs::write(&list, text).unwrap();
    let out = check(&list);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not gathered"), "{err}");
    // A list of names the program does not have is stale.
    std::fs::write(
        &list,
        ".text._ZN6triage9no_such_fn17h*\n.text.nothing_here\n",
    )
    .unwrap();
    let out = check(&list);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("stale: run bench/hot-text"), "{err}");
}

#[test]
fn plugin_launcher_without_a_triage_fails_open_for_hooks_and_says_what_to_install() {
    let s = Sandbox::new();
    let path = bare_path(&s);
    let payload = format!(
        "{{\"hook_event_name\":\"Stop\",\"pad\":\"{}\"}}",
        "x".repeat(1 << 20)
    );
    let out = run_with_input(
        launcher(&s, path.to_str().unwrap(), &["hook"]),
        payload.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("triage: not found") && err.contains("hook skipped"),
        "{err}"
    );

    let out = launcher(&s, path.to_str().unwrap(), &["report", "--text"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no triage binary") && err.contains("npm install -g agent-triage"),
        "{err}"
    );
}

#[test]
fn plugin_launcher_runs_the_first_triage_on_path_that_is_not_a_plugin_launcher() {
    let s = Sandbox::new();
    let bare = bare_path(&s);
    // Another copy of the plugin (a second version in Claude Code's cache), first on PATH.
    let other = s.path().join("other-plugin");
    std::fs::create_dir_all(other.join(".claude-plugin")).unwrap();
    std::fs::create_dir_all(other.join("bin")).unwrap();
    std::fs::write(other.join(".claude-plugin/plugin.json"), "{}").unwrap();
    std::fs::copy(repo().join("plugin/bin/triage"), other.join("bin/triage")).unwrap();
    let real = s.path().join("real");
    std::fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(bin(), real.join("triage")).unwrap();
    let path = format!(
        "{}:{}:{}:{}",
        repo().join("plugin/bin").display(),
        other.join("bin").display(),
        real.display(),
        bare.display()
    );
    let out = launcher(&s, &path, &["--version"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("triage "),
        "{out:?}"
    );

    // Arguments, stdin and the exit status pass through.
    let out = run_with_input(
        launcher(&s, &path, &["classify", "--raw"]),
        b"API Error: 529 Overloaded",
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "overloaded");
    let out = launcher(&s, &path, &["no-such-subcommand"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");

    // No triage on PATH: the project's npm install is found.
    let project = s.path().join("project");
    std::fs::create_dir_all(project.join("node_modules/.bin")).unwrap();
    std::os::unix::fs::symlink(bin(), project.join("node_modules/.bin/triage")).unwrap();
    let out = launcher(&s, bare.to_str().unwrap(), &["--version"])
        .env("CLAUDE_PROJECT_DIR", &project)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("triage "),
        "{out:?}"
    );
}

#[test]
fn plugin_launcher_stands_aside_where_init_hooks_are_installed() {
    let s = Sandbox::new();
    let project = s.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let real = s.path().join("real");
    std::fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(bin(), real.join("triage")).unwrap();
    let path = format!("{}:{}", real.display(), bare_path(&s).display());
    // Larger than a pipe's buffer (64 KiB), so writing it blocks until the launcher reads it
    // all: one that exits without draining its input fails the write with EPIPE every time,
    // not only when it happens to exit first.
    let payload = format!(
        "{{\"hook_event_name\":\"PostToolUseFailure\",\"session_id\":\"s1\",\"tool_name\":\"Bash\",\"tool_use_id\":\"t1\",\"tool_input\":{{\"command\":\"false\",\"description\":\"{}\"}},\"error\":\"Exit code 1\",\"cwd\":{}}}",
        "x".repeat(100_000),
        serde_json::to_string(&project).unwrap()
    );
    let hook = || {
        let mut c = launcher(&s, &path, &["hook"]);
        c.env("CLAUDE_PROJECT_DIR", &project).current_dir(&project);
        run_with_input(c, payload.as_bytes())
    };
    let log = project.join(".triage/logs/errors.jsonl");
    let records = || {
        std::fs::read_to_string(&log)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };

    // Alone, the plugin's hook judges the failure: advice, and a record.
    let out = hook();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("additionalContext"),
        "{out:?}"
    );
    assert_eq!(records(), 1);

    // With init's hooks in the project's settings, they judge it; the plugin's does nothing.
    let init = Command::new(bin())
        .arg("init")
        .current_dir(&project)
        .env_clear()
        .env("PATH", &path)
        .env("HOME", s.path().join("home"))
        .env("CLAUDE_PROJECT_DIR", &project)
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    let out = hook();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stands aside"),
        "{out:?}"
    );
    assert_eq!(records(), 1, "the failure was recorded a second time");
}

/// Node's name for this machine (`${process.platform}-${process.arch}`), where a platform
/// package exists for it.
fn npm_platform() -> Option<String> {
    let os = match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "darwin",
        _ => return None,
    };
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        _ => return None,
    };
    Some(format!("{os}-{cpu}"))
}

fn npm(dir: &Path, home: &Path, args: &[&str]) -> Output {
    let out = npm_command(dir, home, args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} in {}: {}\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `args` run in `dir` as [`npm`] runs them, not yet started.
fn npm_command(dir: &Path, home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(args[0]);
    c.args(&args[1..]).current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("TRIAGE_") || k.starts_with("CLAUDE_") || k.starts_with("npm_") {
            c.env_remove(k);
        }
    }
    // Its own cache (empty: anything npm wanted from the registry would fail offline), home
    // and user config; no network.
    c.env("HOME", home)
        .env("npm_config_cache", home.join("npm-cache"))
        .env("npm_config_userconfig", home.join("npmrc"))
        .env("npm_config_offline", "true")
        .env("npm_config_update_notifier", "false")
        .env("npm_config_fund", "false")
        .env("npm_config_audit", "false")
        .stdin(Stdio::null());
    c
}

#[test]
fn npm_packages_install_offline_and_run_triage_init_through_npx() {
    let have_npm = Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_npm {
        if std::env::var_os("TRIAGE_REQUIRE_NPM").is_some() {
            panic!("TRIAGE_REQUIRE_NPM is set but npm is not installed");
        }
        eprintln!("skipped: npm is not installed (.ci/run installs Debian's nodejs and npm)");
        return;
    }
    let Some(platform) = npm_platform() else {
        eprintln!("skipped: no npm platform package is made for this machine");
        return;
    };
    let s = Sandbox::new();
    let home = s.path().join("home");
    let packages = s.path().join("packages");
    let tarballs = s.path().join("tarballs");
    let project = s.path().join("project");
    for d in [&home, &tarballs, &project] {
        std::fs::create_dir_all(d).unwrap();
    }
    let version = env!("CARGO_PKG_VERSION");
    let made = Command::new(repo().join("dist/npm-packages"))
        .arg(&packages)
        .arg(version)
        .arg(format!("{platform}={}", bin().display()))
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(packages.join("agent-triage/package.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["version"], version);
    assert_eq!(
        manifest["optionalDependencies"],
        serde_json::json!({ format!("@agent-triage/{platform}"): version })
    );
    assert_eq!(
        manifest["scripts"],
        serde_json::json!({"postinstall": "node install.js"}),
        "one install script, the link: {manifest:#}"
    );

    for name in ["agent-triage", platform.as_str()] {
        let dir = packages.join(name);
        npm(
            &tarballs,
            &home,
            &["npm", "pack", "--silent", dir.to_str().unwrap()],
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(&tarballs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            format!("agent-triage-{version}.tgz"),
            format!("agent-triage-{platform}-{version}.tgz"),
        ]
    );
    let mut install = vec!["npm", "install", "--offline", "--no-audit", "--no-fund"];
    let paths: Vec<String> = names
        .iter()
        .map(|n| tarballs.join(n).display().to_string())
        .collect();
    install.extend(paths.iter().map(String::as_str));
    npm(&project, &home, &install);

    let out = npm(
        &project,
        &home,
        &["npx", "--offline", "triage", "--version"],
    );
    let version_line = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        version_line.starts_with(&format!("triage {version} ")),
        "{version_line}"
    );
    let out = npm(
        &project,
        &home,
        &["npx", "--offline", "agent-triage", "--version"],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), version_line);

    let out = npm(&project, &home, &["npx", "--offline", "triage", "init"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Every event, written or left out for the client found (or not) on PATH.
    let count = |k: &str| report[k].as_array().map_or(0, Vec::len);
    assert_eq!(
        count("events_added") + count("events_left_out"),
        9,
        "{report:#}"
    );
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(project.join(".claude/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        settings["hooks"].as_object().map(|h| h.len()),
        Some(count("events_added"))
    );

    // A global install (`npm install -g`): the plugin's launcher runs the platform package's
    // binary itself, without Node (not on this PATH).
    let prefix = s.path().join("global");
    let mut global = vec!["npm", "install", "-g", "--prefix", prefix.to_str().unwrap()];
    global.extend(["--offline", "--no-audit", "--no-fund"]);
    global.extend(paths.iter().map(String::as_str));
    npm(&tarballs, &home, &global);
    let path = format!(
        "{}:{}",
        prefix.join("bin").display(),
        bare_path(&s).display()
    );
    let out = launcher(&s, &path, &["--version"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        version_line,
        "{out:?}"
    );

    // The launcher passes the exit status through.
    let status = Command::new(project.join("node_modules/.bin/triage"))
        .arg("no-such-subcommand")
        .current_dir(&project)
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .status;
    assert_eq!(status.code(), Some(64));
}

/// npm, and a platform package made for this machine (its name), or `None` after saying why
/// the test skips.
fn npm_here() -> Option<String> {
    let have_npm = Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !skip_unless(
        have_npm,
        "npm is not installed (.ci/run installs Debian's nodejs and npm)",
        "TRIAGE_REQUIRE_NPM",
    ) {
        return None;
    }
    let platform = npm_platform();
    if platform.is_none() {
        eprintln!("skipped: no npm platform package is made for this machine");
    }
    platform
}

/// The packages dist/npm-packages makes of `binary` as `version`, packed by `npm pack` in
/// the sandbox: the launcher's tarball, then the platform package's.
fn packed(s: &Sandbox, home: &Path, version: &str, platform: &str, binary: &Path) -> [PathBuf; 2] {
    let packages = s.path().join("packages");
    let tarballs = s.path().join("tarballs");
    std::fs::create_dir_all(&tarballs).unwrap();
    std::fs::create_dir_all(home).unwrap();
    let made = Command::new(repo().join("dist/npm-packages"))
        .arg(&packages)
        .arg(version)
        .arg(format!("{platform}={}", binary.display()))
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    for name in ["agent-triage", platform] {
        let dir = packages.join(name);
        npm(
            &tarballs,
            home,
            &["npm", "pack", "--silent", dir.to_str().unwrap()],
        );
    }
    [
        tarballs.join(format!("agent-triage-{version}.tgz")),
        tarballs.join(format!("agent-triage-{platform}-{version}.tgz")),
    ]
}

/// `npm install -g` of the tarballs into `prefix`, offline, with `extra` options.
fn install_global(s: &Sandbox, home: &Path, prefix: &Path, tarballs: &[PathBuf], extra: &[&str]) {
    let mut args = vec!["npm", "install", "-g", "--prefix", prefix.to_str().unwrap()];
    args.extend(["--offline", "--no-audit", "--no-fund"]);
    args.extend(extra);
    args.extend(tarballs.iter().map(|t| t.to_str().unwrap()));
    npm(s.path(), home, &args);
}

/// A stand-in for the platform binary: a script that prints `said` for `--version`.
fn version_script(s: &Sandbox, said: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = s.path().join("fake-triage");
    std::fs::write(&path, format!("#!/bin/sh\necho '{said}'\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The file a `bin` link in `prefix/bin` leads to, and whether it is the Node launcher.
fn node_launcher_at(prefix: &Path, name: &str) -> bool {
    let file = std::fs::canonicalize(prefix.join("bin").join(name)).unwrap();
    std::fs::read(&file)
        .unwrap()
        .starts_with(b"#!/usr/bin/env node")
}

#[test]
fn every_npm_tarball_carries_the_licence_files() {
    let Some(platform) = npm_here() else { return };
    let s = Sandbox::new();
    let home = s.path().join("home");
    let binary = version_script(&s, "triage 7.7.7 (stand-in)");
    for tarball in packed(&s, &home, "7.7.7", &platform, &binary) {
        let out = Command::new("tar")
            .arg("-tzf")
            .arg(&tarball)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let listed = String::from_utf8_lossy(&out.stdout);
        for licence in ["LICENSE-MIT", "LICENSE-APACHE"] {
            assert!(
                listed.lines().any(|l| l == format!("package/{licence}")),
                "{} has no {licence}: {listed}",
                tarball.display()
            );
        }
    }
}

#[test]
fn npm_install_g_puts_the_native_binary_where_the_shell_finds_triage() {
    let Some(platform) = npm_here() else { return };
    let s = Sandbox::new();
    let home = s.path().join("home");
    let version = env!("CARGO_PKG_VERSION");
    let tarballs = packed(&s, &home, version, &platform, &bin());
    let prefix = s.path().join("global");
    install_global(&s, &home, &prefix, &tarballs, &[]);
    let native = std::fs::read(bin()).unwrap();
    for name in ["triage", "agent-triage"] {
        let file = std::fs::canonicalize(prefix.join("bin").join(name)).unwrap();
        let found = std::fs::read(&file).unwrap();
        assert!(
            found == native,
            "the `{name}` npm links is not the binary: {} starts {:?}",
            file.display(),
            String::from_utf8_lossy(&found[..found.len().min(40)])
        );
    }

    // init's hook command, with no Node on PATH: the hook answers, the npm install's binary.
    let project = s.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let payload = format!(
        "{{\"hook_event_name\":\"PostToolUseFailure\",\"session_id\":\"s1\",\"tool_name\":\"Bash\",\"tool_use_id\":\"t1\",\"tool_input\":{{\"command\":\"false\"}},\"error\":\"Exit code 1\",\"cwd\":{}}}",
        serde_json::to_string(&project).unwrap()
    );
    let init = Command::new(prefix.join("bin/triage"))
        .arg("init")
        .current_dir(&project)
        .env("HOME", &home)
        .env("CLAUDE_PROJECT_DIR", &project)
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(project.join(".claude/settings.json")).unwrap(),
    )
    .unwrap();
    let command = settings["hooks"]["PostToolUseFailure"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    let mut c = Command::new("sh");
    c.args(["-c", command])
        .current_dir(&project)
        .env_clear()
        .env(
            "PATH",
            format!(
                "{}:{}",
                prefix.join("bin").display(),
                bare_path(&s).display()
            ),
        )
        .env("HOME", &home)
        .env("CLAUDE_PROJECT_DIR", &project);
    let out = run_with_input(c, payload.as_bytes());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("additionalContext"),
        "{out:?}"
    );
}

#[test]
fn with_install_scripts_off_the_node_launcher_stays_and_npm_rebuild_puts_the_binary_in_its_place() {
    let Some(platform) = npm_here() else { return };
    let s = Sandbox::new();
    let home = s.path().join("home");
    let binary = version_script(&s, "triage 7.7.7 (stand-in)");
    let tarballs = packed(&s, &home, "7.7.7", &platform, &binary);
    let prefix = s.path().join("global");
    install_global(&s, &home, &prefix, &tarballs, &["--ignore-scripts"]);
    assert!(node_launcher_at(&prefix, "triage"));
    // The launcher runs the platform package's binary.
    let path = format!(
        "{}:{}",
        prefix.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let out = Command::new(prefix.join("bin/triage"))
        .arg("--version")
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "triage 7.7.7 (stand-in)\n",
        "{out:?}"
    );

    let mut rebuild = vec!["npm", "rebuild", "-g", "--prefix", prefix.to_str().unwrap()];
    rebuild.extend(["--offline", "agent-triage"]);
    npm(s.path(), &home, &rebuild);
    for name in ["triage", "agent-triage"] {
        assert!(
            !node_launcher_at(&prefix, name),
            "{name} is still the launcher"
        );
        let file = std::fs::canonicalize(prefix.join("bin").join(name)).unwrap();
        assert_eq!(
            std::fs::read(file).unwrap(),
            std::fs::read(&binary).unwrap()
        );
    }
}

#[test]
fn the_install_script_keeps_the_launcher_when_the_binary_does_not_name_the_package_version() {
    let Some(platform) = npm_here() else { return };
    let s = Sandbox::new();
    let home = s.path().join("home");
    let binary = version_script(&s, "triage 0.0.1 (another release)");
    let tarballs = packed(&s, &home, "7.7.7", &platform, &binary);
    let prefix = s.path().join("global");
    install_global(&s, &home, &prefix, &tarballs, &[]);
    assert!(node_launcher_at(&prefix, "triage"));
    // Nothing left behind beside it.
    let bin_dir = std::fs::canonicalize(prefix.join("bin/triage"))
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let names: Vec<String> = std::fs::read_dir(bin_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["triage"]);
}

#[test]
fn npx_agent_triage_runs_a_global_install_offline_with_an_empty_cache() {
    let Some(platform) = npm_here() else { return };
    let s = Sandbox::new();
    let home = s.path().join("home");
    let binary = version_script(&s, "triage 7.7.7 (stand-in)");
    let tarballs = packed(&s, &home, "7.7.7", &platform, &binary);
    let prefix = s.path().join("global");
    install_global(&s, &home, &prefix, &tarballs, &[]);

    // Another home: npm's cache empty, so anything npx asked of the registry would fail.
    let fresh = s.path().join("fresh-home");
    let elsewhere = s.path().join("elsewhere");
    std::fs::create_dir_all(&fresh).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    // No network either, where a network namespace of its own can be made.
    let isolated = Command::new("unshare")
        .args(["-rn", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !isolated {
        eprintln!("note: unshare -rn is not available; npx runs offline by npm's setting only");
    }
    let mut args = if isolated {
        vec!["unshare", "-rn", "npx"]
    } else {
        vec!["npx"]
    };
    args.extend(["agent-triage", "--version"]);
    let out = npm_command(&elsewhere, &fresh, &args)
        .env("npm_config_prefix", &prefix)
        .env(
            "PATH",
            format!(
                "{}:{}",
                prefix.join("bin").display(),
                std::env::var("PATH").unwrap()
            ),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "triage 7.7.7 (stand-in)\n"
    );
}

/// An executable `triage` at `path` that leaves `marker` behind when it is run.
fn plant_triage(path: &Path, marker: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!("#!/bin/sh\necho planted >> '{}'\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn plugin_launcher_never_runs_a_triage_from_a_relative_path_entry() {
    let s = Sandbox::new();
    let bare = bare_path(&s);
    let marker = s.path().join("planted-ran");
    // A cloned project's own `triage`, where relative PATH entries would find it.
    for rel in ["bin/triage", "node_modules/.bin/triage", "triage"] {
        plant_triage(&s.path().join(rel), &marker);
    }
    let path = format!("bin:./node_modules/.bin::.:{}:", bare.display());
    let out = launcher(&s, &path, &["--version"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    let out = run_with_input(launcher(&s, &path, &["hook"]), b"{}");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not found"),
        "{out:?}"
    );
    assert!(!marker.exists(), "the project's triage was run");

    // An absolute entry after them is found.
    let real = s.path().join("real");
    std::fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(bin(), real.join("triage")).unwrap();
    let path = format!("bin::{}:{}:", real.display(), bare.display());
    let out = launcher(&s, &path, &["--version"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!marker.exists(), "the project's triage was run");
}

#[test]
fn the_hook_script_never_runs_a_triage_from_a_relative_path_entry() {
    let s = Sandbox::new();
    let bare = bare_path(&s);
    let marker = s.path().join("planted-ran");
    for rel in ["bin/triage", "triage"] {
        plant_triage(&s.path().join(rel), &marker);
    }
    let script = repo().join("hooks/scripts/triage-hook.sh");
    let mut c = Command::new(&script);
    c.arg("Stop")
        .current_dir(s.path())
        .env_clear()
        .env("PATH", format!("bin:{}:", bare.display()));
    let out = run_with_input(c, b"{}");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not found"),
        "{out:?}"
    );
    assert!(!marker.exists(), "the project's triage was run");
}

#[test]
fn plugin_launcher_does_not_stand_aside_for_a_permission_that_names_triage_hook() {
    let s = Sandbox::new();
    let project = s.path().join("project");
    let real = s.path().join("real");
    std::fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(bin(), real.join("triage")).unwrap();
    let path = format!("{}:{}", real.display(), bare_path(&s).display());
    std::fs::create_dir_all(project.join(".claude")).unwrap();
    std::fs::write(
        project.join(".claude/settings.json"),
        "{\n  \"permissions\": {\n    \"allow\": [\"Bash(triage hook --help)\", \"Bash(triage hook:*)\"]\n  },\n  \"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send done\"}]}]}\n}\n",
    )
    .unwrap();
    let payload = format!(
        "{{\"hook_event_name\":\"PostToolUseFailure\",\"session_id\":\"s1\",\"tool_name\":\"Bash\",\"tool_use_id\":\"t1\",\"tool_input\":{{\"command\":\"false\"}},\"error\":\"Exit code 1\",\"cwd\":{}}}",
        serde_json::to_string(&project).unwrap()
    );
    let mut c = launcher(&s, &path, &["hook"]);
    c.env("CLAUDE_PROJECT_DIR", &project).current_dir(&project);
    let out = run_with_input(c, payload.as_bytes());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("additionalContext"),
        "it stood aside: {out:?}"
    );

    // A hook handler that runs `triage hook`, in a one-line file, is init's: it stands aside.
    std::fs::write(
        project.join(".claude/settings.json"),
        "{\"permissions\":{\"allow\":[\"Bash(triage hook --help)\"]},\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"'/opt/x/bin/triage' hook\"}]}]}}",
    )
    .unwrap();
    let mut c = launcher(&s, &path, &["hook"]);
    c.env("CLAUDE_PROJECT_DIR", &project).current_dir(&project);
    let out = run_with_input(c, payload.as_bytes());
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stands aside"),
        "{out:?}"
    );
}

/// Starts `c` with a pipe on stdin that this test holds open (a writer that never ends its
/// payload), and waits up to `bound` for it to exit on its own; its status, or `None` when it
/// was still running (then it is killed).
fn exits_while_stdin_is_held(mut c: Command, bound: std::time::Duration) -> Option<Output> {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"hook_event_name\":\"Stop\"").unwrap();
    let start = std::time::Instant::now();
    let exited = loop {
        if child.try_wait().unwrap().is_some() {
            break true;
        }
        if start.elapsed() > bound {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    if !exited {
        let _ = child.kill();
    }
    // Closed before collecting the output: a process the launcher left reading it (with its
    // stderr) would otherwise keep the collection waiting.
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    exited.then_some(out)
}

#[test]
fn a_writer_that_holds_stdin_open_does_not_keep_a_launcher_past_its_deadline() {
    let s = Sandbox::new();
    let bare = bare_path(&s);
    let bound = std::time::Duration::from_secs(20);

    // Not found: the plugin's launcher, the hook script and init's command.
    let out = exits_while_stdin_is_held(launcher(&s, bare.to_str().unwrap(), &["hook"]), bound)
        .expect("the plugin's launcher kept waiting for its input");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut c = Command::new(repo().join("hooks/scripts/triage-hook.sh"));
    c.arg("Stop")
        .current_dir(s.path())
        .env_clear()
        .env("PATH", &bare);
    let out = exits_while_stdin_is_held(c, bound).expect("the hook script kept waiting");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let init = Sandbox::new();
    let done = init
        .cmd(&["init"])
        .env("HOME", init.path())
        .output()
        .unwrap();
    assert!(done.status.success(), "{done:?}");
    let settings: Value = serde_json::from_str(&init.read(".claude/settings.json")).unwrap();
    let command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let mut c = Command::new("sh");
    c.args(["-c", &command])
        .current_dir(s.path())
        .env_clear()
        .env("PATH", &bare);
    let out = exits_while_stdin_is_held(c, bound).expect("init's command kept waiting");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");

    // Standing aside.
    let project = s.path().join("project");
    std::fs::create_dir_all(project.join(".claude")).unwrap();
    std::fs::write(
        project.join(".claude/settings.json"),
        "{\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"triage hook\"}]}]}}",
    )
    .unwrap();
    let mut c = launcher(&s, bare.to_str().unwrap(), &["hook"]);
    c.env("CLAUDE_PROJECT_DIR", &project);
    let out = exits_while_stdin_is_held(c, bound).expect("standing aside kept waiting");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stands aside"),
        "{out:?}"
    );
}

#[test]
fn a_large_settings_file_costs_the_stand_aside_check_a_bounded_number_of_reads() {
    if !skip_unless_tool("strace", "TRIAGE_REQUIRE_STRACE") {
        return;
    }
    let s = Sandbox::new();
    let bare = bare_path(&s);
    let project = s.path().join("project");
    std::fs::create_dir_all(project.join(".claude")).unwrap();
    // 5 MB of permissions, pretty-printed (one line each), and no triage hook.
    let allow: Vec<String> = (0..250_000).map(|i| format!("Bash(tool-{i:07})")).collect();
    let settings = serde_json::to_string_pretty(&serde_json::json!({
        "permissions": {"allow": allow}
    }))
    .unwrap();
    assert!(settings.len() > 5_000_000);
    std::fs::write(project.join(".claude/settings.json"), &settings).unwrap();
    let trace = s.path().join("reads");
    let strace = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("strace"))
        .find(|p| p.is_file())
        .unwrap();
    let mut c = Command::new(strace);
    c.args(["-f", "-e", "trace=read", "-o"])
        .arg(&trace)
        .arg(repo().join("plugin/bin/triage"))
        .arg("hook")
        .current_dir(&project)
        .env_clear()
        .env("PATH", &bare)
        .env("HOME", s.path().join("home"))
        .env("CLAUDE_PROJECT_DIR", &project);
    let out = run_with_input(c, b"{}");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let reads = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter(|l| l.contains("read("))
        .count();
    // A shell reading the file itself makes one read per byte (5 million); grep's blocks are
    // a few hundred at most.
    assert!(reads < 5_000, "{reads} reads for a 5 MB settings file");
}

/// The GitHub workflows (the release) pass actionlint, which also runs shellcheck on their
/// scripts where shellcheck is installed.
#[test]
fn the_github_workflows_pass_actionlint() {
    if !skip_unless_tool("actionlint", "TRIAGE_REQUIRE_ACTIONLINT") {
        return;
    }
    let mut workflows: Vec<PathBuf> = std::fs::read_dir(repo().join(".github/workflows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    workflows.sort();
    assert!(!workflows.is_empty());
    let out = Command::new("actionlint")
        .arg("-no-color")
        .args(&workflows)
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The names and modes in a zip archive, by Python's zipfile.
fn zip_listing(zip: &Path) -> Vec<(String, u32)> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile\nfor i in zipfile.ZipFile(sys.argv[1]).infolist(): print(i.filename, oct(i.external_attr >> 16 & 0o777))",
        ])
        .arg(zip)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (name, mode) = l.rsplit_once(' ').unwrap();
            (
                name.to_string(),
                u32::from_str_radix(mode.trim_start_matches("0o"), 8).unwrap(),
            )
        })
        .collect()
}

/// The release's marketplace.json names the plugin archive the release makes, by its URL
/// and its digest; the archive holds plugin/ with the plugin's root at its top, and the same
/// tree always makes the same bytes.
#[test]
fn the_release_marketplace_entry_is_the_plugin_archive_it_makes_with_its_digest() {
    use sha2::{Digest, Sha256};
    if !skip_unless_tool("python3", "TRIAGE_REQUIRE_PYTHON3") {
        return;
    }
    let s = Sandbox::new();
    let version = env!("CARGO_PKG_VERSION");
    let make = |out: &Path| {
        let made = Command::new(repo().join("dist/plugin-archive"))
            .arg(out)
            .arg(version)
            .arg("https://downloads.example/v1/")
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
    };
    let (first, second) = (s.path().join("a"), s.path().join("b"));
    make(&first);
    make(&second);
    let name = format!("agent-triage-plugin-{version}.zip");
    let zip = std::fs::read(first.join(&name)).unwrap();
    assert_eq!(
        zip,
        std::fs::read(second.join(&name)).unwrap(),
        "not reproducible"
    );

    let market: Value =
        serde_json::from_str(&std::fs::read_to_string(first.join("marketplace.json")).unwrap())
            .unwrap();
    let digest: String = Sha256::digest(&zip)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        market["plugins"][0]["source"],
        serde_json::json!({
            "source": "archive",
            "url": format!("https://downloads.example/v1/{name}"),
            "sha256": digest,
        })
    );
    // Everything else is the repository's marketplace.json.
    let mut theirs: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join(".claude-plugin/marketplace.json")).unwrap(),
    )
    .unwrap();
    theirs["plugins"][0]["source"] = market["plugins"][0]["source"].clone();
    assert_eq!(market, theirs);

    let listing = zip_listing(&first.join(&name));
    let names: Vec<&str> = listing.iter().map(|(n, _)| n.as_str()).collect();
    for wanted in [
        ".claude-plugin/plugin.json",
        "hooks/hooks.json",
        "bin/triage",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing: {names:?}");
    }
    for (n, mode) in &listing {
        let want = if n == "bin/triage" { 0o755 } else { 0o644 };
        assert_eq!(*mode, want, "{n}");
    }

    // A plugin whose version is not the release's is refused, saying which.
    let out = Command::new(repo().join("dist/plugin-archive"))
        .arg(s.path().join("c"))
        .arg("9.9.9")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not 9.9.9"),
        "{out:?}"
    );
}
