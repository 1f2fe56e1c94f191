//! A fresh project set up with `triage init`, the real client run in it, and what it left.

use crate::common::TestCommand;
use crate::server::FakeApi;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `triage` binary under test: `TRIAGE_E2E_BIN` (`.ci/run` points it at the installed
/// release build), else the one cargo built for the test.
pub fn triage_bin() -> PathBuf {
    match std::env::var_os("TRIAGE_E2E_BIN").filter(|b| !b.is_empty()) {
        Some(b) => PathBuf::from(b),
        None => PathBuf::from(env!("CARGO_BIN_EXE_triage")),
    }
}

/// How long one client run may take before it is killed and the scenario fails.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// A scratch project and home folder; removed when dropped (unless `TRIAGE_E2E_KEEP`).
pub struct Project {
    tmp: Option<tempfile::TempDir>,
    pub dir: PathBuf,
    pub home: PathBuf,
    runs: std::cell::Cell<u32>,
}

/// PATH for the client and for triage: the project's own `bin/` (the client under test as
/// `claude`, which `triage init` asks its version, as it would on a user's machine), the
/// triage binary's folder, and the system's.
fn path_env(project_bin: &Path) -> String {
    let bin_dir = triage_bin()
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    format!(
        "{}:{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        project_bin.display()
    )
}

impl Project {
    /// A fresh project with `triage init` run in it, nothing else.
    pub fn new(name: &str) -> Project {
        let p = Project::bare(name);
        p.triage(&["init"], None).status(0);
        p
    }

    /// A fresh, empty project: no `triage init`, no settings, no policy.
    pub fn bare(name: &str) -> Project {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("triage-e2e-{name}-"))
            .tempdir()
            .expect("tempdir");
        let dir = tmp.path().join("project");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&dir).expect("mkdir project");
        std::fs::create_dir_all(&home).expect("mkdir home");
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir bin");
        if let Some(claude) = std::env::var_os("TRIAGE_E2E_CLAUDE") {
            std::os::unix::fs::symlink(claude, bin.join("claude")).expect("link claude");
        }
        let keep = std::env::var_os("TRIAGE_E2E_KEEP").is_some();
        let p = Project {
            tmp: Some(tmp),
            dir,
            home,
            runs: std::cell::Cell::new(0),
        };
        if keep {
            let kept = p.tmp.as_ref().map(|t| t.path().to_path_buf());
            eprintln!("e2e: {name}: kept in {kept:?}");
        }
        p
    }

    /// The PATH its client and triage run with.
    pub fn path_env(&self) -> String {
        path_env(&self.dir.with_file_name("bin"))
    }

    /// Adds to the project's `.triage.toml`.
    pub fn policy(&self, toml: &str) {
        let path = self.dir.join(".triage.toml");
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push('\n');
        text.push_str(toml);
        std::fs::write(&path, text).expect("write .triage.toml");
    }

    /// `triage ARGS` in the project, at `now` (`TRIAGE_NOW`) when given, with nothing of the
    /// caller's environment but PATH.
    pub fn triage(&self, args: &[&str], now: Option<&str>) -> crate::common::Run {
        let mut std = Command::new(triage_bin());
        std.env_clear();
        let mut c = TestCommand::from_std(std);
        c.args(args)
            .current_dir(&self.dir)
            .env("PATH", self.path_env())
            .env("HOME", &self.home)
            .stdin_null();
        if let Some(now) = now {
            c.env("TRIAGE_NOW", now);
        }
        c.run()
    }

    /// The error records in `.triage/logs/errors.jsonl`.
    pub fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join(".triage/logs/errors.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// `triage breaker status KEY` as JSON.
    pub fn breaker(&self, key: &str, now: Option<&str>) -> Value {
        let out = self.triage(&["breaker", "status", key], now);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        v["breakers"][0].clone()
    }

    /// `triage.log`, the tool's own diagnostics (for failure messages).
    pub fn trace(&self) -> String {
        std::fs::read_to_string(self.dir.join(".triage/logs/triage.log")).unwrap_or_default()
    }

    /// Runs `claude -p PROMPT` in the project against `api`, with extra environment.
    pub fn claude(&self, api: &FakeApi, prompt: &str, env: &[(&str, &str)]) -> Run {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let debug = self
            .dir
            .parent()
            .unwrap_or(Path::new("/tmp"))
            .join(format!("debug-{n}.txt"));
        let claude = std::env::var_os("TRIAGE_E2E_CLAUDE").expect("TRIAGE_E2E_CLAUDE");
        let mut c = Command::new(claude);
        c.args(["-p", prompt, "--output-format", "stream-json", "--verbose"])
            .args(["--include-hook-events", "--dangerously-skip-permissions"])
            .arg("--debug-file")
            .arg(&debug)
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", self.path_env())
            .env("HOME", &self.home)
            .env("TMPDIR", self.dir.parent().unwrap_or(Path::new("/tmp")))
            .env("ANTHROPIC_API_KEY", "sk-ant-e2e-dummy")
            .env("ANTHROPIC_BASE_URL", api.url())
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_MAX_RETRIES", "0")
            // Root may only skip permissions in a sandbox; this namespace is one.
            .env("IS_SANDBOX", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            c.env(k, v);
        }
        // Its own process group: whatever the client signals as it exits stays among its own.
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        let began = Instant::now();
        let mut child = c.spawn().expect("spawn claude");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let out_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
            s
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
            s
        });
        let mut timed_out = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s.code(),
                Ok(None) if began.elapsed() > RUN_LIMIT => {
                    timed_out = true;
                    let _ = child.kill();
                    break child.wait().ok().and_then(|s| s.code());
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(_) => break None,
            }
        };
        let stdout = out_reader.join().unwrap_or_default();
        let stderr = err_reader.join().unwrap_or_default();
        let events = stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        Run {
            events,
            stderr,
            status,
            timed_out,
            debug,
        }
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        if std::env::var_os("TRIAGE_E2E_KEEP").is_some() {
            if let Some(t) = self.tmp.take() {
                let _ = t.keep();
            }
        }
    }
}

/// One client run.
pub struct Run {
    /// The stream-json events.
    pub events: Vec<Value>,
    pub stderr: String,
    pub status: Option<i32>,
    pub timed_out: bool,
    pub debug: PathBuf,
}

impl Run {
    /// What `triage hook` printed for each run of `event`'s hooks, in order.
    pub fn hook_outputs(&self, event: &str) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["subtype"] == "hook_response" && e["hook_event"] == event)
            .map(|e| e["stdout"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Every hook's stdout, joined.
    pub fn all_hook_output(&self) -> String {
        self.events
            .iter()
            .filter(|e| e["subtype"] == "hook_response")
            .filter_map(|e| e["stdout"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Hook runs that did not end well (non-zero, killed, invalid output).
    pub fn failed_hooks(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["subtype"] == "hook_response" && e["outcome"] != "success")
            .map(|e| e.to_string())
            .collect()
    }

    /// The tail of the debug log, for failure messages.
    pub fn debug_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.debug).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Lines of the debug log that mention `needle`.
    pub fn debug_lines(&self, needle: &str) -> Vec<String> {
        std::fs::read_to_string(&self.debug)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}
