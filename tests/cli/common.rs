//! The test sandbox: a temp folder, and `triage` commands that run in it with every
//! `TRIAGE_*` and `CLAUDE_*` variable cleared, so the caller's environment never leaks in.

#![allow(dead_code)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// The `triage` binary under test: this build's, or `TRIAGE_TEST_BIN` to run the suite
/// against another build (an older commit, to see a new test fail there).
pub fn bin() -> PathBuf {
    std::env::var_os("TRIAGE_TEST_BIN")
        .filter(|b| !b.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_triage")))
}

/// A temp folder to run `triage` in; its state root is `<dir>/.triage`. With `store`, every
/// command gets `TRIAGE_STORE` (the fleet suites run the same scenarios against Redis). Its
/// commands get a user cache folder of their own (`XDG_CACHE_HOME`, outside `dir`), so no test
/// sees another's compiled policies, nor touches the real user's.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub store: Option<String>,
    pub cache_home: tempfile::TempDir,
}

/// Points `XDG_CACHE_HOME` of this test process, and so of every `triage` a test starts
/// another way (a script, a link), at a folder in the build's target, once: a test never
/// writes compiled policies into the real user's `~/.cache/triage`.
fn isolate_user_cache() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("xdg-cache");
        std::env::set_var("XDG_CACHE_HOME", dir);
    });
}

/// The policy a fleet sandbox adds to every `.triage.toml`: timeouts that a loaded machine
/// racing dozens of processes never reaches (a fallback to files would break what the
/// scenarios check; the timeouts have their own tests).
pub const FLEET_POLICY: &str = "\n[store]\nconnect_timeout = \"10s\"\ncommand_timeout = \"10s\"\n";

impl Sandbox {
    pub fn new() -> Sandbox {
        isolate_user_cache();
        Sandbox {
            dir: tempfile::tempdir().expect("tempdir"),
            store: None,
            cache_home: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// A sandbox whose commands keep their state in the Redis at `url`.
    pub fn with_store(url: &str) -> Sandbox {
        isolate_user_cache();
        let s = Sandbox {
            dir: tempfile::tempdir().expect("tempdir"),
            store: Some(url.to_string()),
            cache_home: tempfile::tempdir().expect("tempdir"),
        };
        s.write(".triage.toml", "");
        s
    }

    /// The namespace of this sandbox's keys (its folder's name, as triage escapes it).
    pub fn namespace(&self) -> String {
        let name = self.path().file_name().expect("name").to_string_lossy();
        triage::fleet::escape_namespace(&name)
    }

    /// The lines of a Redis stream of this sandbox (`breaker-events`, `errors`).
    pub fn stream(&self, name: &str) -> Vec<String> {
        let url = self.store.as_ref().expect("a fleet sandbox");
        let mut con = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection())
            .expect("connect");
        let key = format!("triage:{{{}}}:{name}", self.namespace());
        let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg(key)
            .arg("-")
            .arg("+")
            .query(&mut con)
            .expect("xrange");
        entries
            .into_iter()
            .flat_map(|(_, fields)| {
                fields
                    .into_iter()
                    .filter(|(k, _)| k == "line")
                    .map(|(_, v)| v)
            })
            .collect()
    }

    /// The breaker transitions logged, from the file or the fleet's stream. A fleet sandbox
    /// must never have fallen back to files: no breaker file may exist.
    pub fn breaker_events(&self) -> Vec<serde_json::Value> {
        let lines: Vec<String> = if self.store.is_some() {
            assert!(
                !self.exists(".triage/breakers"),
                "a call fell back to the local files: {:?}",
                std::fs::read_to_string(self.root().join("logs/triage.log")).ok()
            );
            self.stream("breaker-events")
        } else if self.exists(".triage/logs/breaker-events.jsonl") {
            self.read(".triage/logs/breaker-events.jsonl")
                .lines()
                .map(String::from)
                .collect()
        } else {
            Vec::new()
        };
        lines
            .iter()
            .map(|l| serde_json::from_str(l).expect("an event line"))
            .collect()
    }

    /// The error log's lines, from the file or the fleet's stream. A fleet sandbox must never
    /// have fallen back to files: no local log may exist.
    pub fn log_lines(&self) -> Vec<serde_json::Value> {
        let lines: Vec<String> = if self.store.is_some() {
            assert!(
                !self.exists(".triage/logs/errors.jsonl"),
                "a call fell back to the local files: {:?}",
                std::fs::read_to_string(self.root().join("logs/triage.log")).ok()
            );
            self.stream("errors")
        } else {
            std::fs::read_to_string(self.root().join("logs/errors.jsonl"))
                .unwrap_or_default()
                .lines()
                .map(String::from)
                .collect()
        };
        lines
            .iter()
            .map(|l| serde_json::from_str(l).expect("a log line"))
            .collect()
    }

    /// The open failures the counters hold for `session` (`None`: none), from the counters
    /// file or the fleet's `open:sessions` hash.
    pub fn session_open(&self, session: &str) -> Option<u64> {
        match &self.store {
            Some(url) => {
                let mut con = redis::Client::open(url.as_str())
                    .and_then(|c| c.get_connection())
                    .expect("connect");
                redis::cmd("HGET")
                    .arg(format!("triage:{{{}}}:open:sessions", self.namespace()))
                    .arg(session)
                    .query(&mut con)
                    .expect("hget")
            }
            None => {
                let c: serde_json::Value =
                    serde_json::from_str(&self.read(".triage/logs/errors.counters.json"))
                        .expect("the counters");
                c["sessions"]
                    .get(session)
                    .map(|n| n.as_u64().expect("a count"))
            }
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `<dir>/.triage`, the default state root.
    pub fn root(&self) -> PathBuf {
        self.path().join(".triage")
    }

    /// The user cache folder the sandbox's commands use (`$XDG_CACHE_HOME/triage`).
    pub fn cache_dir(&self) -> PathBuf {
        self.cache_home.path().join("triage")
    }

    /// `triage ARGS` in the sandbox, with a clean environment and no stdin.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        clean_env(&mut c);
        c.current_dir(self.path()).args(args);
        c.env("XDG_CACHE_HOME", self.cache_home.path());
        if let Some(url) = &self.store {
            c.env("TRIAGE_STORE", url);
        }
        c
    }

    /// A std command for process-level tests (spawned in parallel).
    pub fn std_cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(bin());
        for (k, _) in std::env::vars() {
            if k.starts_with("TRIAGE_") || k.starts_with("CLAUDE_") {
                c.env_remove(k);
            }
        }
        c.current_dir(self.path()).args(args);
        c.env("XDG_CACHE_HOME", self.cache_home.path());
        if let Some(url) = &self.store {
            c.env("TRIAGE_STORE", url);
        }
        c
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        let mut bytes = content.as_ref().to_vec();
        if self.store.is_some()
            && rel == ".triage.toml"
            && !bytes.windows(7).any(|w| w == b"[store]")
        {
            bytes.extend_from_slice(FLEET_POLICY.as_bytes());
        }
        std::fs::write(&p, bytes).expect("write");
        p
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).expect("read")
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path().join(rel).exists()
    }
}

/// Clears the tool's variables from a command's environment.
pub fn clean_env(c: &mut Command) {
    for (k, _) in std::env::vars() {
        if k.starts_with("TRIAGE_") || k.starts_with("CLAUDE_") {
            c.env_remove(k);
        }
    }
}

/// The one JSON line a command printed.
pub fn json_out(out: &std::process::Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {text:?}"))
}

/// Runs this test binary's ignored test `child` inside `unshare -Urm` with a 64 KiB tmpfs
/// mounted on a fresh folder, whose path it gets in the variable `var`; fails when the child
/// fails. Skips (with the reason on stderr) where user namespaces are not allowed.
pub fn in_small_tmpfs(child: &str, var: &str) {
    let probe = std::process::Command::new("unshare")
        .args(["-Urm", "true"])
        .output();
    if !probe.map(|o| o.status.success()).unwrap_or(false) {
        eprintln!("skipped: `unshare -Urm` is not allowed here, so no small tmpfs can be mounted");
        return;
    }
    let s = Sandbox::new();
    let mnt = s.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let out = std::process::Command::new("unshare")
        .args([
            "-Urm",
            "sh",
            "-c",
            "mount -t tmpfs -o size=64k,mode=0700 tmpfs \"$1\" && shift && exec \"$@\"",
            "sh",
        ])
        .arg(&mnt)
        .arg(std::env::current_exe().expect("exe"))
        .args(["--exact", child, "--ignored", "--nocapture"])
        .env(var, &mnt)
        .output()
        .expect("unshare");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("1 passed"),
        "the child test did not run: {text}"
    );
}
