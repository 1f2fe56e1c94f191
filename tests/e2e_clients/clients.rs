//! The two clients (which package, which version, where its program is once installed), a
//! fresh project set up with `triage init --client NAME`, and one headless run of the client
//! in it against the fake API.

use crate::server::FakeApi;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    Codex,
    Gemini,
}

pub const CLIENTS: [Client; 2] = [Client::Codex, Client::Gemini];

impl Client {
    /// The name `triage hook --client` takes, and the scenarios' prefix.
    pub fn name(self) -> &'static str {
        match self {
            Client::Codex => "codex",
            Client::Gemini => "gemini",
        }
    }

    pub fn package(self) -> &'static str {
        match self {
            Client::Codex => "@openai/codex",
            Client::Gemini => "@google/gemini-cli",
        }
    }

    /// The version the scenarios were written against (`docs/clients-measured.md`), the
    /// default; `.ci/run` also runs [`Client::current`].
    pub fn pinned(self) -> &'static str {
        match self {
            Client::Codex => "0.169.0",
            Client::Gemini => "0.59.0",
        }
    }

    /// The newest on the npm registry as of 2026-11-28, pinned so CI stays reproducible.
    pub fn current(self) -> &'static str {
        match self {
            Client::Codex => "0.171.0",
            Client::Gemini => "0.61.0",
        }
    }

    /// The variable that chooses the version (and that `.ci/run` sets for the newest).
    pub fn version_var(self) -> &'static str {
        match self {
            Client::Codex => "TRIAGE_E2E_CODEX",
            Client::Gemini => "TRIAGE_E2E_GEMINI",
        }
    }

    /// The variable that carries the installed program into the namespace.
    pub fn program_var(self) -> &'static str {
        match self {
            Client::Codex => "TRIAGE_E2E_CODEX_BIN",
            Client::Gemini => "TRIAGE_E2E_GEMINI_BIN",
        }
    }

    /// The version under test: the variable, else the pinned one.
    pub fn version(self) -> String {
        std::env::var(self.version_var())
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| self.pinned().to_string())
    }

    /// The program inside an npm prefix: Codex's native binary for this machine (its `codex`
    /// launcher is a Node script that only finds and runs it; npm installs the platform's
    /// package beside it), Gemini's Node entry point.
    pub fn program_in(self, prefix: &Path) -> PathBuf {
        match self {
            Client::Codex => {
                let (package, target) = match std::env::consts::ARCH {
                    "aarch64" => ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
                    _ => ("codex-linux-x64", "x86_64-unknown-linux-musl"),
                };
                prefix.join(format!(
                    "node_modules/@openai/{package}/vendor/{target}/bin/codex"
                ))
            }
            Client::Gemini => prefix.join("node_modules/.bin/gemini"),
        }
    }

    /// What `--version` prints first for `version`.
    pub fn version_line(self, version: &str) -> String {
        match self {
            Client::Codex => format!("codex-cli {version}"),
            Client::Gemini => version.to_string(),
        }
    }
}

/// The `triage` binary under test: `TRIAGE_E2E_BIN` (`.ci/run` points it at the installed
/// release build), else the one cargo built for the test.
pub fn triage_bin() -> PathBuf {
    match std::env::var_os("TRIAGE_E2E_BIN").filter(|b| !b.is_empty()) {
        Some(b) => PathBuf::from(b),
        None => PathBuf::from(env!("CARGO_BIN_EXE_triage")),
    }
}

/// How long one client run may take before it is killed and the scenario fails.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// A scratch project and home folder for one client; removed when dropped (unless
/// `TRIAGE_E2E_KEEP`).
pub struct Project {
    tmp: Option<tempfile::TempDir>,
    pub client: Client,
    pub dir: PathBuf,
    pub home: PathBuf,
}

impl Project {
    /// A fresh project wired for `client` by `triage init --client NAME` (its hook file runs
    /// `triage hook --client NAME` on the events triage answers).
    pub fn new(client: Client, name: &str) -> Project {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("triage-e2e-{}-{name}-", client.name()))
            .tempdir()
            .expect("tempdir");
        let dir = tmp.path().join("project");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&dir).expect("mkdir project");
        std::fs::create_dir_all(&home).expect("mkdir home");
        // The binary under test as the `triage` the hook command finds on PATH, whatever its
        // file is called.
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir bin");
        std::os::unix::fs::symlink(triage_bin(), bin.join("triage")).expect("link triage");
        let keep = std::env::var_os("TRIAGE_E2E_KEEP").is_some();
        let p = Project {
            tmp: Some(tmp),
            client,
            dir,
            home,
        };
        if keep {
            let kept = p.tmp.as_ref().map(|t| t.path().to_path_buf());
            eprintln!("e2e_clients: {name}: kept in {kept:?}");
        }
        // As a user sets it up: the client's project hook file, written by init.
        let out = p.triage(&["init", "--client", client.name()]);
        assert!(
            out.status.success(),
            "triage init --client {} failed: {}",
            client.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        p
    }

    /// Takes the binary under test off the client's PATH: the hook commands init wrote then
    /// find no `triage`.
    pub fn hide_triage(&self) {
        std::fs::remove_file(self.dir.with_file_name("bin").join("triage")).expect("unlink triage");
    }

    /// PATH for the client and for triage: the project's `bin/` (the binary under test as
    /// `triage`), node's folder (Gemini CLI is a Node program; the red test is `node --test`),
    /// and the system's.
    pub fn path_env(&self) -> String {
        let mut dirs: Vec<String> = vec![self.dir.with_file_name("bin").display().to_string()];
        if let Some(d) = which("node").and_then(|p| p.parent().map(Path::to_path_buf)) {
            dirs.push(d.display().to_string());
        }
        dirs.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(String::from));
        dirs.join(":")
    }

    /// Adds to the project's `.triage.toml`.
    pub fn policy(&self, toml: &str) {
        let path = self.dir.join(".triage.toml");
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push('\n');
        text.push_str(toml);
        std::fs::write(&path, text).expect("write .triage.toml");
    }

    /// `triage ARGS` in the project, with nothing of the caller's environment but PATH.
    pub fn triage(&self, args: &[&str]) -> std::process::Output {
        Command::new(triage_bin())
            .env_clear()
            .args(args)
            .current_dir(&self.dir)
            .env("PATH", self.path_env())
            .env("HOME", &self.home)
            .stdin(Stdio::null())
            .output()
            .expect("run triage")
    }

    /// The error records in `.triage/logs/errors.jsonl`.
    pub fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join(".triage/logs/errors.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// True when a hook has judged something in this project: the hook keeps each session's
    /// repeats under `.triage/sessions/`.
    pub fn hooks_ran(&self) -> bool {
        std::fs::read_dir(self.dir.join(".triage/sessions")).is_ok_and(|mut d| d.next().is_some())
    }

    /// `triage breaker status KEY` as JSON.
    pub fn breaker(&self, key: &str) -> Value {
        let out = self.triage(&["breaker", "status", key]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        v["breakers"][0].clone()
    }

    /// `triage.log`, the tool's own diagnostics (for failure messages).
    pub fn trace(&self) -> String {
        std::fs::read_to_string(self.dir.join(".triage/logs/triage.log")).unwrap_or_default()
    }

    /// Runs the client headless with `prompt` in the project against `api`.
    pub fn run(&self, api: &FakeApi, prompt: &str) -> Run {
        let program = std::env::var_os(self.client.program_var())
            .map(PathBuf::from)
            .expect("the client's program (set by main before entering the namespace)");
        let mut cmd = Command::new(&program);
        cmd.env_clear()
            .current_dir(&self.dir)
            .env("PATH", self.path_env())
            .env("HOME", &self.home)
            .env("TERM", "dumb")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match self.client {
            Client::Codex => {
                let codex_home = self.home.join(".codex");
                std::fs::create_dir_all(&codex_home).expect("mkdir CODEX_HOME");
                // A custom provider on the fake; no retries, so an error ends the run at once.
                let config = format!(
                    "model = \"gpt-e2e\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = \"{}/v1\"\nenv_key = \"TRIAGE_E2E_FAKE_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
                    api.url()
                );
                let path = codex_home.join("config.toml");
                if !path.exists() {
                    std::fs::write(&path, config).expect("write config.toml");
                }
                // `--trust` lets the project's `.codex/hooks.json` load; hook trust (a review
                // the interactive client asks for) is bypassed for this run only.
                cmd.env("CODEX_HOME", &codex_home)
                    .env("TRIAGE_E2E_FAKE_KEY", "e2e")
                    .args([
                        "exec",
                        "--skip-git-repo-check",
                        "--trust",
                        "--dangerously-bypass-approvals-and-sandbox",
                        "--dangerously-bypass-hook-trust",
                    ])
                    .arg(prompt);
            }
            Client::Gemini => {
                let dir = self.home.join(".gemini");
                std::fs::create_dir_all(&dir).expect("mkdir ~/.gemini");
                // The API key's auth type: with only GOOGLE_GEMINI_BASE_URL set, the client
                // picks its `gateway` auth type, which `-p` refuses. Folder trust off, so the
                // project's hooks load and --yolo holds.
                let settings = json!({
                    "security": {"auth": {"selectedType": "gemini-api-key"},
                        "folderTrust": {"enabled": false}},
                    "telemetry": {"enabled": false},
                    "privacy": {"usageStatisticsEnabled": false},
                    "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                });
                std::fs::write(dir.join("settings.json"), format!("{settings:#}\n"))
                    .expect("write settings.json");
                // An explicit model: the default one is routed through a classifier first.
                cmd.env("GEMINI_API_KEY", "e2e")
                    .env("GOOGLE_GEMINI_BASE_URL", api.url())
                    .args(["--yolo", "-m", "gemini-2.5-flash", "-p"])
                    .arg(prompt);
            }
        }
        let began = Instant::now();
        let mut child = cmd.spawn().expect("start the client");
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
        Run {
            status,
            timed_out,
            stdout: out_reader.join().unwrap_or_default(),
            stderr: err_reader.join().unwrap_or_default(),
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
#[derive(Debug)]
pub struct Run {
    pub status: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

/// `tool` on PATH.
pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    })
}
