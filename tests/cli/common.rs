//! The test sandbox: a temp folder, and `triage` commands that run in it with every
//! `TRIAGE_*` and `CLAUDE_*` variable cleared, so the caller's environment never leaks in.
//!
//! A test builds a command, runs it and looks at what it did:
//! `s.triage(["breaker", "check", "k"]).env("TRIAGE_NOW", "0").stdin("..").run().status(0)`
//! then `.stdout_json()`, `.stdout()`, `.stderr()`, `.lines()`; `.status(n)` fails showing the
//! command, its stderr and its stdout. A test that needs a tool starts with
//! `if !skip_unless_tool("fish", "TRIAGE_REQUIRE_FISH") { return; }`.

#![allow(dead_code)]

use assert_cmd::Command;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

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

    /// The namespace of this sandbox's keys: its folder's name, as it goes between the braces
    /// of a key (`triage:{NS}:...`): letters, digits, `.`, `_` and `-` as they are, every other
    /// byte as `%XX`.
    pub fn namespace(&self) -> String {
        let name = self.path().file_name().expect("name").to_string_lossy();
        let mut out = String::new();
        for b in name.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
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

    /// `triage ARGS` in the sandbox: a [`TestCommand`] to add to (`.env`, `.stdin`) and
    /// `.run()`.
    pub fn triage<I, S>(&self, args: I) -> TestCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = self.command(bin());
        c.args(args);
        c
    }

    /// Any program (`sh`, a link to `triage`) in the sandbox, with the same clean environment
    /// (and `TRIAGE_STORE` in a fleet sandbox) as [`Sandbox::triage`].
    pub fn command(&self, program: impl AsRef<OsStr>) -> TestCommand {
        let mut c = command(program);
        c.current_dir(self.path());
        c.env("XDG_CACHE_HOME", self.cache_home.path());
        // The key that seals phase manifests: the sandbox's own.
        c.env("XDG_STATE_HOME", self.cache_home.path().join("state"));
        if let Some(url) = &self.store {
            c.env("TRIAGE_STORE", url);
        }
        c
    }

    /// `triage ARGS` in the sandbox, with a clean environment and no stdin, as an
    /// `assert_cmd` command (the builder is [`Sandbox::triage`]).
    pub fn cmd(&self, args: &[&str]) -> Command {
        Command::from_std(self.std_cmd(args))
    }

    /// A std command for process-level tests (`.triage(..).spawn()` does the same and keeps
    /// the failure messages).
    pub fn std_cmd(&self, args: &[&str]) -> std::process::Command {
        self.triage(args).into_std()
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

/// The tool's variables in this process's environment (every `TRIAGE_*` and `CLAUDE_*`):
/// what every command of the suites runs without, so the caller's environment never leaks in.
pub fn tool_vars() -> Vec<OsString> {
    std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| {
            let k = k.to_string_lossy();
            k.starts_with("TRIAGE_") || k.starts_with("CLAUDE_")
        })
        .collect()
}

/// `program` with the tool's variables cleared, in the test's folder (a tool the test needs,
/// outside any sandbox).
pub fn command(program: impl AsRef<OsStr>) -> TestCommand {
    let mut cmd = std::process::Command::new(program);
    clean_std_env(&mut cmd);
    TestCommand::from_std(cmd)
}

/// Clears the tool's variables from a command's environment.
pub fn clean_env(c: &mut Command) {
    for k in tool_vars() {
        c.env_remove(k);
    }
}

/// Clears the tool's variables from a std command's environment.
pub fn clean_std_env(c: &mut std::process::Command) {
    for k in tool_vars() {
        c.env_remove(k);
    }
}

/// The one JSON line a command printed.
pub fn json_out(out: &std::process::Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {text:?}"))
}

/// A command to run and look at (after ripgrep's `TestCommand` and just's `Test`): made by
/// [`Sandbox::triage`] or [`Sandbox::command`], added to, then `.run()`:
///
/// ```ignore
/// let v = s.triage(["breaker", "check", "k"]).env("TRIAGE_NOW", "0").run().status(0).stdout_json();
/// ```
pub struct TestCommand {
    cmd: std::process::Command,
    stdin: Input,
}

/// What a [`TestCommand`] reads on stdin.
enum Input {
    /// Bytes written to a pipe, then closed (none: empty).
    Bytes(Vec<u8>),
    /// `/dev/null`.
    Null,
    /// A file (a folder, a FIFO) opened by the test.
    File(std::fs::File),
}

impl TestCommand {
    /// A command as it is (no environment cleared: [`Sandbox::command`] clears it).
    pub fn from_std(cmd: std::process::Command) -> TestCommand {
        TestCommand {
            cmd,
            stdin: Input::Bytes(Vec::new()),
        }
    }

    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.cmd.env(key, value);
        self
    }

    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
        self.cmd.env_remove(key);
        self
    }

    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.cmd.current_dir(dir);
        self
    }

    /// What the command reads on stdin, from a pipe (without it, stdin is an empty pipe).
    pub fn stdin(&mut self, input: impl Into<Vec<u8>>) -> &mut Self {
        self.stdin = Input::Bytes(input.into());
        self
    }

    /// Stdin is `/dev/null`.
    pub fn stdin_null(&mut self) -> &mut Self {
        self.stdin = Input::Null;
        self
    }

    /// Stdin is `file` (a folder, a FIFO: what a hostile caller may hand over).
    pub fn stdin_file(&mut self, file: std::fs::File) -> &mut Self {
        self.stdin = Input::File(file);
        self
    }

    /// The std command, to spawn it (stdin, stdout and stderr as the caller sets them).
    pub fn std(&mut self) -> &mut std::process::Command {
        &mut self.cmd
    }

    pub fn into_std(self) -> std::process::Command {
        self.cmd
    }

    /// Runs it to the end, stdout and stderr captured, stdin written from a thread (so a
    /// large input never deadlocks against a full stdout pipe).
    pub fn run(&mut self) -> Run {
        self.spawn().wait()
    }

    /// Starts it as [`TestCommand::run`] does, for a test that runs several at once or
    /// signals one; `.wait()` gives its [`Run`].
    pub fn spawn(&mut self) -> Running {
        let (stdin, input, note) = match &self.stdin {
            Input::Bytes(b) => (Stdio::piped(), b.clone(), Some(b.as_slice())),
            Input::Null => (Stdio::null(), Vec::new(), None),
            Input::File(f) => (
                Stdio::from(f.try_clone().expect("a copy of the stdin file")),
                Vec::new(),
                None,
            ),
        };
        let what = describe_with(&self.cmd, note.filter(|b| !b.is_empty()));
        let mut child = self
            .cmd
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
        let pipe = child.stdin.take();
        // A command that exits without reading its input closes the pipe: not an error here.
        let writer = std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let _ = pipe.write_all(&input);
            }
        });
        Running {
            child,
            what,
            writer,
        }
    }
}

/// A [`TestCommand`] started by `.spawn()`.
pub struct Running {
    pub child: std::process::Child,
    what: String,
    writer: std::thread::JoinHandle<()>,
}

impl Running {
    /// Waits for it to end; what it did.
    pub fn wait(self) -> Run {
        let output = self
            .child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("cannot wait for {}: {e}", self.what));
        let _ = self.writer.join();
        Run {
            output,
            what: self.what,
        }
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

/// A command as failure messages show it: `triage breaker check k` (TRIAGE_NOW=5), with the
/// variables set on it (not the ones cleared).
pub fn describe(cmd: &std::process::Command) -> String {
    describe_with(cmd, None)
}

/// As [`describe`], with the start of what it read on stdin.
fn describe_with(cmd: &std::process::Command, stdin: Option<&[u8]>) -> String {
    let program = Path::new(cmd.get_program());
    let name = if program == bin() {
        "triage".to_string()
    } else {
        program.to_string_lossy().into_owned()
    };
    let words: Vec<String> = std::iter::once(name)
        .chain(cmd.get_args().map(|a| {
            let a = a.to_string_lossy();
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
                format!("{a:?}")
            } else {
                a.into_owned()
            }
        }))
        .collect();
    let mut notes: Vec<String> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy())))
        .collect();
    if let Some(input) = stdin {
        let text = String::from_utf8_lossy(&input[..input.len().min(800)]);
        let head: String = text.chars().take(200).collect();
        let more = if head.len() < input.len() { "..." } else { "" };
        notes.push(format!("{} bytes on stdin: {head:?}{more}", input.len()));
    }
    if notes.is_empty() {
        format!("`{}`", words.join(" "))
    } else {
        format!("`{}` ({})", words.join(" "), notes.join("; "))
    }
}

/// What a [`TestCommand`] did: its exit status, stdout and stderr (`Deref` gives the
/// `std::process::Output`, so `out.stdout` and `json_out(&out)` work as before).
#[derive(Debug)]
pub struct Run {
    pub output: std::process::Output,
    /// The command, for failure messages.
    pub what: String,
}

impl std::ops::Deref for Run {
    type Target = std::process::Output;

    fn deref(&self) -> &std::process::Output {
        &self.output
    }
}

impl Run {
    /// The output of `cmd` run some other way (spawned beside others, a special stdin).
    pub fn of(cmd: &std::process::Command, output: std::process::Output) -> Run {
        Run {
            output,
            what: describe(cmd),
        }
    }

    /// Asserts the exit status is `code`; on a mismatch the message shows the command, its
    /// stderr and its stdout.
    #[track_caller]
    pub fn status(self, code: i32) -> Run {
        if self.output.status.code() != Some(code) {
            panic!(
                "{} exited with {}, expected {code}\n--- stderr\n{}\n--- stdout\n{}",
                self.what,
                self.output.status,
                self.stderr(),
                self.stdout()
            );
        }
        self
    }

    /// Adds `note` (a loop's case) to what failure messages say the command was.
    pub fn context(mut self, note: impl std::fmt::Display) -> Run {
        self.what = format!("{}, {note}", self.what);
        self
    }

    /// The exit code (`None`: killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The lines of stdout.
    pub fn lines(&self) -> Vec<String> {
        self.stdout().lines().map(String::from).collect()
    }

    /// Stdout as one JSON value (surrounding whitespace aside).
    #[track_caller]
    pub fn stdout_json(&self) -> serde_json::Value {
        let text = self.stdout();
        serde_json::from_str(text.trim()).unwrap_or_else(|e| {
            panic!(
                "{}: stdout is not one JSON value ({e}): {text:?}\n--- stderr\n{}",
                self.what,
                self.stderr()
            )
        })
    }

    /// Stdout as JSON lines, one value each.
    #[track_caller]
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout()
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("{}: not a JSON line ({e}): {l:?}", self.what))
            })
            .collect()
    }

    pub fn into_output(self) -> std::process::Output {
        self.output
    }
}

/// Whether a test that needs `tool` can run: true when it is on PATH. Otherwise it says so on
/// stderr (`skipped: <test>: <tool> is not installed`) and returns false for the test to
/// return, or, when the variable `require` is set (`.ci/run` sets it where it installed the
/// tool), fails the test.
#[track_caller]
pub fn skip_unless_tool(tool: &str, require: &str) -> bool {
    skip_unless(on_path(tool), &format!("{tool} is not installed"), require)
}

/// As [`skip_unless_tool`], for any condition a test needs (`why`: what is missing).
#[track_caller]
pub fn skip_unless(ok: bool, why: &str, require: &str) -> bool {
    if !ok {
        skip(why, require);
    }
    ok
}

/// Says on stderr that the running test skips (`skipped: <test>: <why>`), or fails it when
/// the variable `require` is set.
#[track_caller]
pub fn skip(why: &str, require: &str) {
    let test = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("a test")
        .to_string();
    if std::env::var_os(require).is_some_and(|v| !v.is_empty()) {
        panic!("{test}: {why}, and {require} is set");
    }
    eprintln!("skipped: {test}: {why}");
}

/// Whether util-linux `script(1)` can give a command a terminal here; skips as
/// [`skip_unless_tool`] does (`TRIAGE_REQUIRE_SCRIPT`).
#[track_caller]
pub fn skip_unless_script() -> bool {
    skip_unless_tool("script", "TRIAGE_REQUIRE_SCRIPT")
        && skip_unless(
            command("script")
                .args(["-qec", "true", "/dev/null"])
                .stdin_null()
                .run()
                .code()
                == Some(0),
            "`script -qec` does not run here (util-linux's script is needed)",
            "TRIAGE_REQUIRE_SCRIPT",
        )
}

/// True when an executable file named `tool` is in one of PATH's folders.
pub fn on_path(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            std::fs::metadata(dir.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Runs this test binary's ignored test `child` inside `unshare -Urm` with a 64 KiB tmpfs
/// mounted on a fresh folder, whose path it gets in the variable `var`; fails when the child
/// fails. Skips (with the reason on stderr) where unshare is missing or user namespaces are
/// not allowed, unless `TRIAGE_REQUIRE_UNSHARE` is set.
pub fn in_small_tmpfs(child: &str, var: &str) {
    if !skip_unless_tool("unshare", "TRIAGE_REQUIRE_UNSHARE") {
        return;
    }
    let allowed = command("unshare").args(["-Urm", "true"]).run().code() == Some(0);
    if !skip_unless(
        allowed,
        "`unshare -Urm` is not allowed here, so no small tmpfs can be mounted",
        "TRIAGE_REQUIRE_UNSHARE",
    ) {
        return;
    }
    let s = Sandbox::new();
    let mnt = s.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    // The environment as it is: the child runs the same binary (TRIAGE_TEST_BIN included).
    let mut c = std::process::Command::new("unshare");
    c.args([
        "-Urm",
        "sh",
        "-c",
        "mount -t tmpfs -o size=64k,mode=0700 tmpfs \"$1\" && shift && exec \"$@\"",
        "sh",
    ])
    .arg(&mnt)
    .arg(std::env::current_exe().expect("exe"))
    .args(["--exact", child, "--ignored", "--nocapture"])
    .env(var, &mnt);
    let out = TestCommand::from_std(c).run().status(0);
    let text = format!("{}{}", out.stdout(), out.stderr());
    assert!(
        text.contains("1 passed"),
        "the child test did not run: {text}"
    );
}

/// The cache's checksum (and a policy text's name), as anyone can read it in the source: it
/// has no key.
pub fn checksum(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: u64 = bytes.len() as u64 ^ K;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().unwrap());
        h = (h ^ w).wrapping_mul(K).rotate_left(29);
    }
    for &b in chunks.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(K).rotate_left(29);
    }
    h ^ (h >> 32)
}

/// Where triage keeps the compiled cache of the policy text `policy` in the cache folder
/// `dir`: named by the text's checksum.
pub fn cache_file(dir: &Path, policy: &str) -> PathBuf {
    dir.join(format!("policy-{:016x}.bin", checksum(policy.as_bytes())))
}

/// The subcommands `triage PATH... --help` lists (its `Commands:` section), in its order.
pub fn subcommands(path: &[&str]) -> Vec<String> {
    let out = command(bin()).args(path).arg("--help").run().status(0);
    out.stdout()
        .lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// One manual page as `triage man --install` writes it.
pub struct ManPage {
    /// Its section (1 or 5).
    pub section: u8,
    /// Its file name (`triage-classify.1`).
    pub file: String,
    /// Its roff.
    pub body: String,
}

/// Every man page, as `triage man --install DIR` writes them, in file name order.
pub fn man_pages() -> Vec<ManPage> {
    let dir = tempfile::tempdir().expect("tempdir");
    command(bin())
        .args(["man", "--install"])
        .arg(dir.path())
        .run()
        .status(0);
    let mut pages = Vec::new();
    for section in [1u8, 5] {
        let Ok(entries) = std::fs::read_dir(dir.path().join(format!("man{section}"))) else {
            continue;
        };
        for e in entries.flatten() {
            pages.push(ManPage {
                section,
                file: e.file_name().to_string_lossy().into_owned(),
                body: std::fs::read_to_string(e.path()).expect("a page"),
            });
        }
    }
    pages.sort_by(|a, b| a.file.cmp(&b.file));
    pages
}

/// A folder with a `claude` that says it is `version`, for `init` to ask.
pub fn fake_claude(dir: &std::path::Path, version: &str) -> std::path::PathBuf {
    let bin = dir.join("fake-claude-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        format!("#!/bin/sh\necho '{version} (Claude Code)'\n"),
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    bin
}

/// PATH with `dir` first.
pub fn path_with(dir: &std::path::Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}

/// Whether `unshare -Urfp --mount-proc` (a user and PID namespace of the test's own) is
/// allowed here; skips saying why, or fails under `TRIAGE_REQUIRE_UNSHARE=1`.
pub fn pid_namespace_allowed() -> bool {
    let probe = std::process::Command::new("unshare")
        .args(["-Urfp", "--mount-proc", "true"])
        .stdin(std::process::Stdio::null())
        .output();
    let allowed = probe.as_ref().is_ok_and(|o| o.status.success());
    let why = match &probe {
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => e.to_string(),
    };
    skip_unless(
        allowed,
        &format!("`unshare -Urfp --mount-proc` is not allowed here ({why})"),
        "TRIAGE_REQUIRE_UNSHARE",
    )
}
