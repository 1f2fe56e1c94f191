//! What every command is handed: the common options, the clock, the state root, the policy
//! (loaded lazily, only by commands that need it), bounded stdin, and the diagnostics trace.
//!
//! This is the only place that reads the environment, so the core stays pure. The layers
//! below never see it: a command hands them [`Context::ground`] (the store's
//! [`Ground`]: root, now, lock deadline, and this context behind [`Surroundings`] for the
//! warnings and the backend) and the policy.

use crate::core::policy::{self, Policy};
use crate::env::Env;
use crate::exit::Failure;
use crate::stdin;
use crate::store::files;
use crate::store::fleet;
use crate::store::ground::{deadline_after, Ground, Surroundings};
use crate::store::pattern_cache;
use chrono::{DateTime, Utc};
use clap::Args;
use serde::Serialize;
use serde_json::Value;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long `triage hook` may wait for locks in all, unless `TRIAGE_LOCK_TIMEOUT` says
/// otherwise: a little under Claude Code's shortest hook budget (SessionEnd's 1.5 s).
pub const HOOK_LOCK_BUDGET: Duration = Duration::from_millis(1000);

/// The longest message a trace line keeps (a line of `triage.log` stays well under the
/// store's line limit).
const TRACE_MESSAGE_MAX: usize = 8 * 1024;

/// Options every subcommand takes (SPEC §3). Help lists them after a command's own, under
/// their own heading.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// State root, else $TRIAGE_DIR [default: $CLAUDE_PROJECT_DIR/.triage, else ./.triage]
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Policy file (it must exist), else $TRIAGE_CONFIG [default: .triage.toml in
    /// $CLAUDE_PROJECT_DIR, else in the current folder]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Output for a person instead of JSON
    #[arg(long, global = true)]
    pub text: bool,
    /// Exit 1 when the verdict is negative (like `jq -e`)
    #[arg(short = 'e', long = "exit-status", global = true)]
    pub exit_status: bool,
    /// Exit non-zero (65, 74, 75) when the job could not be done, instead of 0 with a warning
    /// (also TRIAGE_STRICT=1)
    #[arg(long, global = true)]
    pub strict: bool,
    /// Write each decision (classify, retry, breaker), its inputs and the rule that made it
    /// to logs/triage.log (also TRIAGE_LOG=debug)
    #[arg(short = 'v', long, global = true)]
    pub verbose: bool,
}

/// What a command produced: the text for stdout (if any) and whether the verdict was negative.
#[derive(Debug, Default)]
pub struct Answer {
    /// Printed with a newline; `None` prints nothing.
    pub stdout: Option<String>,
    /// A negative verdict: exit 1 under `-e`.
    pub negative: bool,
    /// The hook protocol's exit-2 blocking form, when asked for.
    pub block: bool,
    /// An exit status of the command's own (`triage run` ends with its child's).
    pub exit: Option<u8>,
}

impl Answer {
    /// One JSON line.
    pub fn json(value: &impl Serialize) -> Answer {
        let line = serde_json::to_string(value).unwrap_or_else(|e| {
            format!("{{\"status\":\"error\",\"detail\":\"cannot serialize output: {e}\"}}")
        });
        Answer {
            stdout: Some(line),
            ..Answer::default()
        }
    }

    /// Text for people. Keys, agent names and error texts come from untrusted input, so every
    /// control character but the line breaks and tabs of the layout is shown in caret notation
    /// (`^[` for ESC): no escape sequence reaches the terminal (see
    /// [`printable`](crate::core::text::printable)).
    pub fn text(text: impl Into<String>) -> Answer {
        let mut s = crate::core::text::printable(&text.into());
        while s.ends_with('\n') {
            s.pop();
        }
        Answer {
            stdout: Some(s),
            ..Answer::default()
        }
    }

    /// Text for a terminal that takes colour: as [`Answer::text`], but the SGR sequences
    /// (`ESC [ … m`: colour, bold, dim, reset) are kept. No other escape passes, so nothing
    /// from input can move the cursor, clear the screen or retitle the terminal; cells built
    /// by [`crate::term::Term`] are made printable before they are styled.
    pub fn styled(text: impl Into<String>) -> Answer {
        let mut s = crate::core::text::printable_styled(&text.into());
        while s.ends_with('\n') {
            s.pop();
        }
        Answer {
            stdout: Some(s),
            ..Answer::default()
        }
    }

    /// `--text` output: [`Answer::styled`] when colouring, else [`Answer::text`].
    pub fn for_terminal(text: impl Into<String>, colour: bool) -> Answer {
        if colour {
            Answer::styled(text)
        } else {
            Answer::text(text)
        }
    }

    /// A hook response: one JSON object, or nothing when there is nothing to say.
    pub fn hook(response: &crate::hook::codec::Response) -> Answer {
        if response.is_empty() {
            Answer::nothing()
        } else {
            Answer::json(response)
        }
    }

    /// Nothing on stdout.
    pub fn nothing() -> Answer {
        Answer::default()
    }

    /// Ends with this exit status whatever the options (`triage run`: the child's status).
    pub fn exit(mut self, status: u8) -> Answer {
        self.exit = Some(status);
        self
    }

    /// Marks the verdict negative (or not).
    pub fn negative(mut self, negative: bool) -> Answer {
        self.negative = negative;
        self
    }
}

/// The environment of one command run.
pub struct Context {
    /// The subcommand's name, which starts every message.
    pub name: &'static str,
    /// The common options.
    pub global: GlobalArgs,
    /// Now: `TRIAGE_NOW`, else the clock.
    pub now: DateTime<Utc>,
    /// Whether `TRIAGE_NOW` fixed the time (a command that lasts then keeps it; it overrides
    /// every clock, the fleet's server's too).
    pub fixed_now: bool,
    /// `TRIAGE_SEED`, if set: the jitter's seed.
    pub seed: Option<u64>,
    /// `TRIAGE_LOCK_TIMEOUT`, default 2 s (1 s for `triage hook`): the time all the lock
    /// waits of one invocation share.
    pub lock_timeout: Duration,
    /// When this invocation's lock waits must be over (a `Mutex`, not a `Cell`: the context
    /// is the [`Surroundings`] of a phase's items, on threads of their own).
    deadline: Mutex<Instant>,
    /// `TRIAGE_MAX_INPUT`, default 16 MiB.
    pub max_input: usize,
    /// `CLAUDE_PROJECT_DIR`, if set.
    pub project_dir: Option<PathBuf>,
    /// Whether `--config` itself (not `TRIAGE_CONFIG`) named the policy file.
    pub config_flag: bool,
    /// Commands that never write (classify, config, state-read) leave no trace unless the root
    /// exists; a command that finds it has nothing to write says so ([`Context::writes_nothing`]).
    writes_state: std::sync::atomic::AtomicBool,
    /// `TRIAGE_STORE`: the fleet's Redis, over the policy's `[store] url`.
    pub store_url: Option<String>,
    /// `TRIAGE_REDIS_PASSWORD`: the password when the URL has none.
    pub redis_password: Option<String>,
    /// The user's own cache folder (`$XDG_CACHE_HOME/triage`, else `~/.cache/triage`), where
    /// a policy's compiled patterns are kept; `None`: no call has a cache.
    pub cache_dir: Option<PathBuf>,
    /// `-v` or `TRIAGE_LOG=debug`: the decision trace is written (see [`crate::store::trace`]).
    pub debug: bool,
    policy: OnceLock<(Policy, Option<PathBuf>)>,
    redactor: OnceLock<crate::core::redact::Redactor>,
}

impl Context {
    /// The context of subcommand `name` in environment `env`: the variables fill in the
    /// options the command line left out. A malformed one is its default, and a warning the
    /// caller gives (`env.warnings`) once the store knows its folders ([`Context::anchor_folders`]).
    pub fn new(
        name: &'static str,
        mut global: GlobalArgs,
        writes_state: bool,
        env: &Env,
    ) -> Result<Context, Failure> {
        global.dir = global.dir.or_else(|| env.dir.clone());
        let config_flag = global.config.is_some();
        global.config = global.config.or_else(|| env.config.clone());
        // `triage hook` exits 0 whatever its environment holds: only the flag makes it strict.
        global.strict = global.strict || (name != "hook" && env.strict == Some(true));
        let lock_timeout = match env.lock_timeout {
            Some(t) => t,
            None if name == "hook" => HOOK_LOCK_BUDGET,
            None => Duration::from_secs(2),
        };
        // Compiled caches are never kept where a project could ship them (see `pattern_cache`).
        let cache_dir =
            pattern_cache::user_dir(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"));
        let debug = global.verbose || env.debug == Some(true);
        Ok(Context {
            name,
            debug,
            global,
            now: env.now.unwrap_or_else(Utc::now),
            fixed_now: env.now.is_some(),
            lock_timeout,
            deadline: Mutex::new(deadline_after(lock_timeout)),
            max_input: env.max_input.unwrap_or(16 * 1024 * 1024),
            seed: env.seed,
            project_dir: env.project_dir.clone(),
            config_flag,
            writes_state: std::sync::atomic::AtomicBool::new(writes_state),
            store_url: env.store.clone(),
            redis_password: env.redis_password.clone(),
            cache_dir,
            policy: OnceLock::new(),
            redactor: OnceLock::new(),
        })
    }

    /// Tells the file store which folders it walks without following a link, checking each
    /// (see `store::files`): the state root and the user's cache folder. A root the user named
    /// (`--dir`, `TRIAGE_DIR`) may itself be a link they chose; the default one in the project
    /// is what a cloned repository could ship, so there even the root must not be a link.
    ///
    /// Process-wide, not part of the [`Ground`]: every file call of the run, on any thread and
    /// whoever made it, must be resolved against them. So the dispatcher calls this once,
    /// right after making the context and before anything is read or written (the
    /// environment's warnings, traced under the root, included).
    pub fn anchor_folders(&self) {
        files::set_root(&self.state_root(), self.global.dir.is_some());
        let name = self.name;
        files::on_notice(move |m| say!("triage {name}: warning: {m}"));
        if let Some(d) = &self.cache_dir {
            files::set_private_dir(d);
        }
    }

    /// The user's own state folder (`$XDG_STATE_HOME/triage`, else `~/.local/state/triage`),
    /// where the key that seals phase manifests is kept, declared to the store as a private
    /// folder: asked only by the phase commands, so no other call pays for it.
    fn state_dir(&self) -> Option<PathBuf> {
        let dir = crate::store::phase_seal::user_dir(
            std::env::var_os("XDG_STATE_HOME"),
            std::env::var_os("HOME"),
        )?;
        files::set_private_dir(&dir);
        Some(dir)
    }

    /// The user's key that seals phase manifests, when there is one already (a read-only
    /// command makes none).
    pub fn phase_seal_key_if_any(&self) -> Option<Vec<u8>> {
        crate::store::phase_seal::existing_key(&self.state_dir()?)
    }

    /// The user's key that seals phase manifests (made on first use); `Err` says why there
    /// is none.
    pub fn phase_seal_key(&self) -> Result<Vec<u8>, String> {
        let dir = self.state_dir().ok_or_else(|| {
            "there is no state folder of yours (set HOME or XDG_STATE_HOME)".to_string()
        })?;
        crate::store::phase_seal::key(&dir)
    }

    /// What the store and `exec` stand on: the state root, now, the lock deadline of this
    /// invocation, and this context for the warnings and the backend.
    pub fn ground(&self) -> Ground<'_> {
        Ground {
            root: self.state_root(),
            project: self.project(),
            now: self.now,
            fixed_now: self.fixed_now,
            strict: self.global.strict,
            lock_timeout: self.lock_timeout,
            deadline: self.deadline(),
            around: self,
        }
    }

    /// When this invocation's lock waits must be over.
    fn deadline(&self) -> Instant {
        match self.deadline.lock() {
            Ok(d) => *d,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }

    /// How long a lock may still be waited for: what is left of the invocation's time.
    pub fn lock_wait(&self) -> Duration {
        self.deadline().saturating_duration_since(Instant::now())
    }

    /// Ends the invocation's lock waits within `limit` from now, if that is sooner (the
    /// `StopFailure` hook runs while the client exits and has a few tens of milliseconds).
    pub fn limit_lock_wait(&self, limit: Duration) {
        let soon = deadline_after(limit);
        let mut deadline = match self.deadline.lock() {
            Ok(d) => d,
            Err(poisoned) => poisoned.into_inner(),
        };
        if soon < *deadline {
            *deadline = soon;
        }
    }

    /// The jitter's seed: `TRIAGE_SEED` (a number), else one drawn from the clock and the
    /// process id.
    pub fn jitter_seed(&self) -> u64 {
        self.seed.unwrap_or_else(|| {
            self.now.timestamp_nanos_opt().unwrap_or_default() as u64
                ^ u64::from(std::process::id()).rotate_left(32)
        })
    }

    /// The project folder: `$CLAUDE_PROJECT_DIR`, else the current folder.
    pub fn project(&self) -> PathBuf {
        self.project_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("."))
    }

    /// The state root (not created).
    pub fn state_root(&self) -> PathBuf {
        state_root(&self.global, &self.project_dir)
    }

    /// The state root, created 0700 if missing.
    pub fn ensure_root(&self) -> Result<PathBuf, Failure> {
        self.ground().ensure_root()
    }

    /// The policy file in force, if any: `--config`, else `.triage.toml` in the project.
    pub fn policy_path(&self) -> Option<PathBuf> {
        if let Some(p) = &self.global.config {
            return Some(p.clone());
        }
        let mut candidates = Vec::new();
        if let Some(d) = &self.project_dir {
            candidates.push(d.join(".triage.toml"));
        }
        candidates.push(PathBuf::from(".triage.toml"));
        candidates.into_iter().find(|p| p.is_file())
    }

    /// A policy file named with `--config` that does not exist: a usage error (the user asked
    /// for that file, so the built-in defaults would be a surprise). `TRIAGE_CONFIG` stays
    /// forgiving (a warning and the defaults, as every environment value), and so does
    /// `triage hook`, which only warns: a hook never blocks its agent over its own setup.
    pub fn explicit_config_missing(&self) -> Option<Failure> {
        let path = self.global.config.as_ref().filter(|_| self.config_flag)?;
        if path.exists() || path.is_symlink() {
            return None;
        }
        Some(Failure::usage(format!(
            "--config {}: no such file; name an existing policy file (`triage init` writes a starter .triage.toml), or leave --config out to use .triage.toml or the built-in defaults",
            crate::core::text::printable(&path.display().to_string())
        )))
    }

    /// The redactor every text from outside passes where it enters: the built-in credential
    /// shapes and the policy's `[redact]` (the built-in shapes alone when the policy cannot be
    /// read).
    pub fn redactor(&self) -> &crate::core::redact::Redactor {
        self.redactor.get_or_init(|| {
            self.policy()
                .map(|p| p.redact.redactor())
                .unwrap_or_default()
        })
    }

    /// The policy: the file's, or the built-in defaults. Each bad entry of the file is a
    /// warning naming `FILE:LINE:COL` and is left out, and every good entry still applies (a
    /// hook must keep working); under `--strict` any problem is a failure.
    pub fn policy(&self) -> Result<&Policy, Failure> {
        if let Some((p, _)) = self.policy.get() {
            return Ok(p);
        }
        let path = self.policy_path();
        let policy = match &path {
            None => Policy::default(),
            Some(path) => match load_policy_file(path, self.cache_dir.as_deref(), |w| self.warn(w))
            {
                Ok(loaded) if loaded.problems.is_empty() => loaded.policy,
                Ok(loaded) if self.global.strict => {
                    let list: Vec<String> = loaded
                        .problems
                        .iter()
                        .map(|p| format!("{}:{p}", path.display()))
                        .collect();
                    return Err(Failure::data(format!(
                        "bad policy: {}; run `triage config check {}`",
                        list.join("; "),
                        path.display()
                    )));
                }
                Ok(loaded) => {
                    for p in &loaded.problems {
                        self.warn(&format!(
                            "policy {}:{p}; the rest of the policy applies",
                            path.display()
                        ));
                    }
                    loaded.policy
                }
                Err(msg) if self.global.strict => return Err(Failure::data(msg)),
                Err(msg) => {
                    self.warn(&format!("{msg}; using the built-in defaults"));
                    Policy::default()
                }
            },
        };
        Ok(&self.policy.get_or_init(|| (policy, path)).0)
    }

    /// Writes the policy's cache when this call made or grew it (see [`pattern_cache`]), in
    /// the user's own cache folder, never in the state root: whatever the command, since it
    /// leaves no trace in the project. A cache that cannot be written is only a slower next
    /// call, so nothing is said unless the folder was refused (a link, loose permissions).
    pub fn save_policy_cache(&self) {
        if !pattern_cache::pending() {
            return;
        }
        let Some(dir) = &self.cache_dir else {
            return;
        };
        if let Err(e) = pattern_cache::save(dir) {
            if e.is_refused() {
                self.warn(&format!("policy cache not written: {e}"));
            }
        }
    }

    /// Reads stdin to its end when it is not a terminal: `None` when empty. Only a command
    /// that uses stdin calls this. Input over the limit is refused as soon as the limit is
    /// passed; what follows is never read (nor waited for). Stdin that cannot be read (a
    /// folder, `< /`) is a warning and no input, unless `--strict`. A writer that keeps the
    /// pipe open without ending it is waited for at most the policy's `[stdin]` time, then
    /// the command goes on with what arrived (see [`Context::stdin_cut_short`]).
    pub fn read_stdin(&self) -> Result<Option<Vec<u8>>, Failure> {
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            return Ok(None);
        }
        let bytes = match stdin::read_bounded(self.stdin_input(&stdin), self.max_input) {
            Ok(b) => b,
            Err(stdin::InputError::TimedOut { got, .. }) => {
                self.stdin_cut_short(&got)?;
                got
            }
            Err(e) => return self.stdin_failed(e).map(|()| None),
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        Ok(Some(bytes))
    }

    /// Reads one JSON value from stdin and stops as soon as it is complete, so a writer that
    /// keeps the pipe open (`(payload; sleep 30) | triage hook`) is not waited for; `None`
    /// when stdin is empty or a terminal. Lone UTF-16 surrogates are read as U+FFFD. A value
    /// not complete when the writer's time is up (the policy's `[stdin]`) is bad data, or an
    /// I/O failure under `--strict`.
    pub fn read_json(&self) -> Result<Option<Value>, Failure> {
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            return Ok(None);
        }
        match stdin::read_one_json(self.stdin_input(&stdin), self.max_input) {
            Ok(v) => Ok(v),
            Err(stdin::InputError::Syntax(why)) => Err(Failure::data(format!(
                "stdin is not valid JSON: {why}; send one JSON document"
            ))),
            Err(stdin::InputError::TimedOut { got, .. }) => match stdin::value_so_far(&got) {
                Ok(v) => self.stdin_cut_short(&got).map(|()| v),
                Err(_) if self.global.strict => Err(Failure::io(self.late(&got))),
                Err(_) => Err(Failure::data(format!(
                    "{}; what arrived is not a complete JSON value",
                    self.late(&got)
                ))),
            },
            Err(e) => self.stdin_failed(e).map(|()| None),
        }
    }

    /// Stdin as a reader that waits for its writer at most the policy's `[stdin]` time, all
    /// waits together ([`stdin::Patient`]); the policy is read only if a read would wait.
    pub fn stdin_input<'a>(
        &'a self,
        stdin: &'a std::io::Stdin,
    ) -> stdin::Patient<std::os::fd::BorrowedFd<'a>, impl FnOnce() -> Duration + 'a> {
        use std::os::fd::AsFd;
        stdin::Patient::new(stdin.as_fd(), move || self.stdin_timeout().0)
    }

    /// How long stdin may keep this call waiting, and the policy key that says so: `[stdin]
    /// hook_timeout` when the call answers a hook (`triage hook`, or a `--hook` form of
    /// another command, whose stdin is a hook payload), else `[stdin] timeout`.
    fn stdin_timeout(&self) -> (Duration, &'static str) {
        let hook = self.name == "hook"
            || std::env::args_os()
                .skip(1)
                .take_while(|a| a != "--")
                .any(|a| a == "--hook");
        let fallback = policy::StdinPolicy::default();
        let p = self.policy().map_or(&fallback, |p| &p.stdin);
        if hook {
            (p.hook_timeout.0, "hook_timeout")
        } else {
            (p.timeout.map_or(Duration::MAX, |t| t.0), "timeout")
        }
    }

    /// What a writer that kept the pipe open past its time did, in words.
    fn late(&self, got: &[u8]) -> String {
        let (limit, key) = self.stdin_timeout();
        let sent = match got.len() {
            0 => "nothing arrived".to_string(),
            1 => "1 byte arrived".to_string(),
            n => format!("{n} bytes arrived"),
        };
        format!(
            "stdin: {sent} and no end within {} ([stdin] {key}): the writer kept the pipe open",
            crate::core::duration::Dur(limit)
        )
    }

    /// Stdin whose writer kept the pipe open past its time, with `got` read: a warning (on
    /// stderr and in `logs/triage.log`), and the command goes on with what arrived; under
    /// `--strict`, an I/O failure. The call never waits longer on its writer.
    pub fn stdin_cut_short(&self, got: &[u8]) -> Result<(), Failure> {
        let late = self.late(got);
        if self.global.strict {
            return Err(Failure::io(late));
        }
        let going_on = if got.iter().all(u8::is_ascii_whitespace) {
            "going on without input"
        } else {
            "going on with what arrived"
        };
        self.warn(&format!("{late}; {going_on}"));
        Ok(())
    }

    /// Stdin over the limit is bad data; stdin that cannot be read is no input, with a
    /// warning (or an I/O failure under `--strict`).
    fn stdin_failed(&self, e: stdin::InputError) -> Result<(), Failure> {
        match e {
            stdin::InputError::TooLarge { limit } => Err(Failure::data(format!(
                "stdin is more than the limit of {limit} bytes (TRIAGE_MAX_INPUT); send less, or raise TRIAGE_MAX_INPUT"
            ))),
            stdin::InputError::Io(e) if self.global.strict => {
                Err(Failure::io(format!("cannot read stdin: {e}")))
            }
            stdin::InputError::Io(e) => {
                self.warn(&format!("cannot read stdin ({e}); going on without it"));
                Ok(())
            }
            stdin::InputError::Syntax(why) => Err(Failure::data(format!(
                "stdin is not valid JSON: {why}; send one JSON document"
            ))),
            stdin::InputError::TimedOut { got, .. } => self.stdin_cut_short(&got),
        }
    }

    /// A warning that does not stop the command: on stderr, and in `logs/triage.log`.
    pub fn warn(&self, message: &str) {
        self.ground().warn(message);
    }

    /// This call has nothing to write under the state root (`record-error` with nothing to
    /// record): from now on its trace does not create the root either.
    pub fn writes_nothing(&self) {
        self.writes_state
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// One line in `<root>/logs/triage.log`; never fails the command.
    pub fn trace(&self, level: &str, message: &str) {
        self.ground().trace(level, message);
    }

    /// One line in `logs/triage.log` under the ground's root, at its time. A command that
    /// never writes state leaves no trace when the state root does not exist.
    fn trace_on(&self, g: &Ground, level: &str, message: &str) {
        // `install-links` works on a bin folder, never a project: it keeps no trace at all.
        if self.name == "install-links" {
            return;
        }
        let root = &g.root;
        let writes = self.writes_state.load(std::sync::atomic::Ordering::Relaxed);
        // The decision trace was asked for (`-v`, `TRIAGE_LOG=debug`): it is kept whatever
        // the command.
        if !writes && level != "debug" && !root.is_dir() {
            return;
        }
        let logs = root.join("logs");
        // A refused root (a link, a loose folder) makes this fail too: nothing is written,
        // and stderr says why once, since the trace cannot.
        if let Err(e) = files::ensure_dir(&logs) {
            self.untraced(&e);
            return;
        }
        let mut message = message.to_string();
        if message.len() > TRACE_MESSAGE_MAX {
            let mut cut = TRACE_MESSAGE_MAX;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push_str("…[cut]");
        }
        let line = serde_json::json!({
            "at": g.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "subcommand": self.name,
            "level": level,
            "pid": std::process::id(),
            "message": message,
        });
        // Never waits long: a busy log gets the line without the lock (on a fresh line).
        let wait = g.lock_wait().min(Duration::from_millis(20));
        if let Err(e) = files::append_line_best_effort(
            &logs.join("triage.log"),
            line.to_string().as_bytes(),
            wait,
        ) {
            self.untraced(&e);
        }
    }

    /// Says on stderr, once per run, that the trace log refused a line (a link or a FIFO in
    /// its place): the one warning that cannot be traced.
    fn untraced(&self, e: &files::StoreError) {
        use std::sync::atomic::{AtomicBool, Ordering};
        static SAID: AtomicBool = AtomicBool::new(false);
        if e.is_refused() && !SAID.swap(true, Ordering::Relaxed) {
            say!("triage {}: warning: no trace kept: {e}", self.name);
        }
    }

    /// The fleet's Redis, when `TRIAGE_STORE` or `[store] url` names one: `None` for the local
    /// files; `Some(Err)` when the URL is not valid (the caller warns and uses the files).
    pub fn fleet_config(&self) -> Option<Result<fleet::Config, String>> {
        let policy = self.policy().ok()?;
        let store = &policy.store;
        let url = self.store_url.as_deref().or(store.url.as_deref())?;
        // `TRIAGE_STORE=file` (or `files`) keeps a host on its files whatever the policy says.
        if matches!(url.trim(), "file" | "files") {
            return None;
        }
        let password = self.redis_password.as_deref().filter(|p| !p.is_empty());
        let target = match fleet::Target::parse(url, password) {
            Ok(t) => t,
            Err(e) => return Some(Err(e)),
        };
        let namespace = store
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| self.project_name());
        Some(Ok(fleet::Config {
            target,
            namespace,
            connect_timeout: store.connect_timeout.0,
            command_timeout: store.command_timeout.0,
            log_max_len: store.log_max_len,
        }))
    }

    /// The project folder's name (the default namespace of its keys in a fleet's Redis).
    pub fn project_name(&self) -> String {
        let dir = self.project();
        let abs = if dir.is_absolute() {
            dir
        } else {
            std::env::current_dir().map(|c| c.join(&dir)).unwrap_or(dir)
        };
        normal_path(&abs)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "default".into())
    }

    /// A timestamp for file names: `20260102T030405Z`.
    pub fn stamp(&self) -> String {
        self.ground().stamp()
    }
}

/// The context is what the store's calls stand in: its name starts their warnings, its
/// trace keeps them, its policy and environment choose their backend.
impl Surroundings for Context {
    fn warn(&self, g: &Ground, message: &str) {
        say!("triage {}: warning: {message}", self.name);
        self.trace_on(g, "warning", message);
    }

    fn trace(&self, g: &Ground, level: &str, message: &str) {
        self.trace_on(g, level, message);
    }

    fn fleet(&self) -> Option<Result<fleet::Config, String>> {
        self.fleet_config()
    }

    fn debug(&self) -> bool {
        self.debug
    }
}

/// `path` with `.` and `..` folded away (without touching the disk).
fn normal_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn state_root(global: &GlobalArgs, project_dir: &Option<PathBuf>) -> PathBuf {
    match &global.dir {
        Some(d) => d.clone(),
        None => project_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("."))
            .join(".triage"),
    }
}

/// The policy file read leniently: every good entry and every problem; `Err` only when the
/// file cannot be read at all. When the user's cache folder `cache_dir` holds the cache of
/// this very text (see [`pattern_cache`]), the text is known to load without a problem and is
/// only deserialized; otherwise it is checked, and when it has no problem a cache is written
/// there at the end of the call. Without a cache folder, every call checks.
fn load_policy_file(
    path: &Path,
    cache_dir: Option<&Path>,
    warn: impl Fn(&str),
) -> Result<policy::Loaded, String> {
    // Read like any file the user named, but never a FIFO or a device: a planted one would
    // hang every hook.
    let bytes = files::read_named(path)
        .map_err(|e| format!("cannot read policy: {e}"))?
        .ok_or_else(|| format!("cannot read policy {}: it does not exist", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        format!(
            "cannot read policy {}: it is not UTF-8 text",
            path.display()
        )
    })?;
    let Some(cache_dir) = cache_dir else {
        return Ok(policy::load_lenient(&text, policy::Depth::Syntax));
    };
    let known = pattern_cache::identify(&text);
    let refused = match pattern_cache::load(cache_dir, &known) {
        Ok(true) => match policy::parse_trusted(&text) {
            Some(policy) => {
                return Ok(policy::Loaded {
                    policy,
                    problems: Vec::new(),
                })
            }
            None => false,
        },
        Ok(false) => false,
        Err(refused) => {
            warn(&format!("policy cache not read: {refused}"));
            true
        }
    };
    let loaded = policy::load_lenient(&text, policy::Depth::Syntax);
    if loaded.problems.is_empty() && !refused {
        pattern_cache::policy_loaded(known);
    }
    Ok(loaded)
}

/// Parses one JSON value (leniently, see [`crate::core::json::Lenient`]), with a message that says
/// what was wrong.
pub fn parse_json(bytes: &[u8]) -> Result<Value, Failure> {
    crate::core::json::parse_json(bytes).map_err(|e| {
        let why = if std::str::from_utf8(bytes).is_err() && e.is_syntax() {
            format!("{e} (the input is not valid UTF-8)")
        } else {
            e.to_string()
        };
        Failure::data(format!(
            "stdin is not valid JSON: {why}; send one JSON document"
        ))
    })
}

/// Writes one line to stdout; a closed pipe is not an error.
pub fn print_line(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let r = out
        .write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_errors_say_what_to_send() {
        let e = parse_json(b"{\"a\":").expect_err("truncated");
        assert!(
            e.message.contains("not valid JSON") && e.message.contains("send one JSON"),
            "{e}"
        );
        let deep = "[".repeat(100_000);
        assert!(parse_json(deep.as_bytes()).is_err());
        assert!(parse_json(b"\"\xff\"").is_err());
    }
}
