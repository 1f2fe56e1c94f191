//! One attempt of `triage run`: the command in a process group of its own, stdin replayed
//! from memory, stdout captured in an anonymous temp file (only the final attempt's reaches
//! our stdout), stderr passed through live with its tail kept for classification.
//!
//! At the timeout the whole group gets SIGTERM, then SIGKILL after `kill_after` — a member
//! that ignores SIGTERM or outlives the leader included. A SIGINT or SIGTERM received by
//! `triage run` is forwarded to the group; after `grace` the group is killed; a second signal
//! kills it at once. Signals are sent with rustix's safe `kill_process_group` and caught with
//! signal-hook's flags, since this crate denies `unsafe`.
//!
//! When the command exits on its own, what it left running in its group is given
//! `orphan_grace`, then ended ([`reap::end_leftovers`]): nothing an attempt started outlives
//! it, and the attempt's record says what was ended. Orphans reparented to `triage` (the
//! subreaper of what it starts) are reaped as they exit.

use super::reap::{self, Leftovers};
use crate::core::attempt_plan::End;
use rustix::process::{kill_process_group, test_kill_process_group, Pid, Signal};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How often the waiting loop looks at the clock and the signal flags.
const POLL: Duration = Duration::from_millis(10);
/// Bytes of stderr kept for classification.
const TAIL: usize = 8192;

/// SIGINT and SIGTERM received by this process, as flags; or, [`Interrupts::detached`], flags
/// another thread raises (`triage phase` hands each work item its own and raises them all
/// when the process is signalled, so every item sees the signal, not just the first to look).
#[derive(Clone)]
pub struct Interrupts {
    int: Arc<AtomicBool>,
    term: Arc<AtomicBool>,
}

impl Interrupts {
    /// Catches SIGINT and SIGTERM from now on.
    pub fn install() -> io::Result<Interrupts> {
        let int = Arc::new(AtomicBool::new(false));
        let term = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&int))?;
        signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&term))?;
        Ok(Interrupts { int, term })
    }

    /// Flags no signal handler sets: raised with [`Interrupts::raise`].
    pub fn detached() -> Interrupts {
        Interrupts {
            int: Arc::new(AtomicBool::new(false)),
            term: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Raises the flag of `sig` (SIGINT, else SIGTERM), as if the signal had been received.
    pub fn raise(&self, sig: i32) {
        let flag = if sig == signal_hook::consts::SIGINT {
            &self.int
        } else {
            &self.term
        };
        flag.store(true, Ordering::SeqCst);
    }

    /// Whether a signal was received since the last [`Interrupts::take`] (left for it).
    pub fn pending(&self) -> bool {
        self.int.load(Ordering::SeqCst) || self.term.load(Ordering::SeqCst)
    }

    /// The signal received since the last call, if any.
    pub fn take(&self) -> Option<i32> {
        if self.int.swap(false, Ordering::SeqCst) {
            Some(signal_hook::consts::SIGINT)
        } else if self.term.swap(false, Ordering::SeqCst) {
            Some(signal_hook::consts::SIGTERM)
        } else {
            None
        }
    }

    /// Waits `d`, returning early with the signal if one arrives.
    pub fn sleep(&self, d: Duration) -> Option<i32> {
        let until = Instant::now() + d;
        loop {
            if let Some(sig) = self.take() {
                return Some(sig);
            }
            let now = Instant::now();
            if now >= until {
                return None;
            }
            std::thread::sleep(POLL.min(until - now));
        }
    }
}

/// What to run and how.
#[derive(Default)]
pub struct Spec<'a> {
    /// The command and its arguments.
    pub command: &'a [OsString],
    /// Bytes replayed on its stdin; `None` gives it no stdin.
    pub stdin: Option<Arc<Vec<u8>>>,
    /// When to stop it.
    pub timeout: Option<Duration>,
    /// SIGKILL this long after SIGTERM.
    pub kill_after: Duration,
    /// After forwarding an interrupt, SIGKILL this long after.
    pub grace: Duration,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// The folder it runs in [default: ours].
    pub cwd: Option<&'a std::path::Path>,
    /// Where its stderr goes besides the kept tail [default: our stderr].
    pub stderr_to: Option<&'a File>,
    /// Told the process id (its group's id) once it started.
    pub on_spawn: Option<&'a (dyn Fn(u32) + Sync)>,
    /// Capture stdout in memory (a memfd) rather than a temp file on disk: for a caller that
    /// reads the output whole anyway (a phase's item), a file on disk only adds an inode to
    /// allocate and free through the journal.
    pub in_memory: bool,
    /// When the command exits on its own, end what it left running in its group this long
    /// after; `None` leaves it running.
    pub orphan_grace: Option<Duration>,
    /// Stop it as hung (SIGTERM, SIGKILL after `kill_after`) when it writes nothing to
    /// stdout or stderr for this long.
    pub idle_timeout: Option<Duration>,
    /// It must not outlive this process (it holds a permit for it): started under a
    /// [`guard`](super::guard) that ends its group, SIGKILL `kill_after` after SIGTERM, when
    /// this process is gone.
    pub guarded: bool,
}

/// One attempt's result.
pub struct Attempt {
    /// How it ended.
    pub end: End,
    /// Its stdout, rewound to the start.
    pub stdout: File,
    /// The last bytes of its stderr.
    pub stderr_tail: Vec<u8>,
    /// How long it ran.
    pub elapsed: Duration,
    /// What it left running in its group and was ended after it exited.
    pub leftovers: Option<Leftovers>,
}

/// Runs one attempt. `Err` only when the stdout temp file cannot be made.
pub fn run(spec: &Spec<'_>, interrupts: &Interrupts) -> io::Result<Attempt> {
    let started = Instant::now();
    let stdout = if spec.in_memory {
        scratch()?
    } else {
        tempfile::tempfile()?
    };
    let Some((program, args)) = spec.command.split_first() else {
        return Ok(cannot_run(127, "no command given".into(), stdout, started));
    };
    // A stderr that goes to a file anyway (a phase's item) is given the file itself: no pipe,
    // no thread to copy it; its tail is read back from where this attempt began writing.
    let direct = spec.in_memory.then_some(spec.stderr_to).flatten();
    let stderr_from = direct.and_then(|f| stream_position(f).ok());
    let stderr = match direct {
        Some(f) => Stdio::from(f.try_clone()?),
        None => Stdio::piped(),
    };
    let wrapped = spec
        .guarded
        .then(|| super::guard::wrap(spec.command, spec.kill_after))
        .flatten();
    let mut cmd = match &wrapped {
        Some((guard, guard_args)) => {
            let mut c = Command::new(guard);
            c.args(guard_args);
            c
        }
        None => {
            let mut c = Command::new(program);
            c.args(args);
            c
        }
    };
    cmd.process_group(0)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::from(stdout.try_clone()?))
        .stderr(stderr)
        .envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = spec.cwd {
        cmd.current_dir(dir);
    }
    let (mut child, registered) = match reap::spawn(&mut cmd) {
        Ok(c) => c,
        Err(e) => {
            let status = if e.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            let detail = format!("{}: {e}", program.to_string_lossy());
            return Ok(cannot_run(status, detail, stdout, started));
        }
    };
    let group = Pid::from_child(&child);
    if let Some(told) = spec.on_spawn {
        told(child.id());
    }
    if let (Some(bytes), Some(mut pipe)) = (spec.stdin.clone(), child.stdin.take()) {
        // A command that does not read its stdin closes the pipe: EPIPE is expected.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }
    let (tail_tx, tail_rx) = mpsc::channel();
    // Bytes of stderr seen so far, for the idle timeout.
    let stderr_seen = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&stderr_seen);
    let mut copy: Box<dyn Write + Send> = match spec.stderr_to.map(File::try_clone) {
        Some(Ok(f)) => Box::new(f),
        _ => Box::new(io::stderr()),
    };
    if let Some(mut err) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut tail = Vec::new();
            let mut buf = [0u8; 8192];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let _ = copy.write_all(&buf[..n]);
                seen.fetch_add(n as u64, Ordering::Relaxed);
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > TAIL {
                    tail.drain(..tail.len() - TAIL);
                }
            }
            let _ = tail_tx.send(tail);
        });
    }

    let deadline = spec.timeout.map(|t| started + t);
    let mut watch = Watch {
        idle: spec.idle_timeout.map(|after| Idle {
            after,
            stdout: stdout.try_clone().ok(),
            stderr: direct.and_then(|f| f.try_clone().ok()),
            stderr_seen,
            written: 0,
            since: started,
            hit: false,
        }),
        ..Watch::default()
    };
    // The child's pidfd becomes readable when it exits: wait on it, waking every POLL for the
    // timeout and the signals, with no thread of its own. Kernels without pidfds get one.
    let status = match crate::platform::pidfd(group) {
        Some(pidfd) => {
            let every = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: i64::try_from(POLL.as_nanos()).unwrap_or(10_000_000),
            };
            loop {
                let mut fds = [rustix::event::PollFd::new(
                    &pidfd,
                    rustix::event::PollFlags::IN,
                )];
                if rustix::event::poll(&mut fds, Some(&every)).unwrap_or(0) > 0 {
                    break child.wait().ok();
                }
                watch.tick(group, deadline, spec, interrupts);
            }
        }
        None => {
            let (done_tx, done_rx) = mpsc::channel();
            std::thread::spawn(move || {
                let _ = done_tx.send(child.wait());
            });
            loop {
                match done_rx.recv_timeout(POLL) {
                    Ok(s) => break s.ok(),
                    Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
                watch.tick(group, deadline, spec, interrupts);
            }
        }
    };
    // The leader's status is taken: its group may now be waited on (orphans of it that were
    // reparented to us, zombies no PID 1 may ever reap).
    drop(registered);
    let stopped = watch.timed_out || watch.interrupted.is_some();
    // The leader is gone; members it left behind after a timeout or interrupt are not.
    while stopped && !watch.killed && reap::group_alive(group) {
        std::thread::sleep(POLL);
        watch.tick(group, deadline, spec, interrupts);
    }
    let leftovers = match spec.orphan_grace {
        Some(grace) if !stopped && status.is_some() => {
            reap::end_leftovers(group, grace, &|| interrupts.pending())
        }
        _ => {
            reap::reap_group(group);
            None
        }
    };
    reap::sweep();
    // A background process may keep stderr open: take the tail without waiting for it.
    let stderr_tail = match (direct, stderr_from) {
        (Some(f), Some(from)) => read_tail(f, from).unwrap_or_default(),
        _ => tail_rx
            .recv_timeout(Duration::from_millis(200))
            .unwrap_or_default(),
    };
    let end = match (watch.interrupted, watch.timed_out, status) {
        // The interrupt was forwarded, yet the command ended of itself with success: it
        // ignored or outlived the signal and finished its work, so its result stands (filed
        // partial, a phase's resume would run it a second time).
        (Some(_), false, Some(s)) if !watch.killed && s.code() == Some(0) => End::Exited(0),
        (Some(sig), _, _) => End::Interrupted(sig),
        (None, true, _) => match &watch.idle {
            Some(idle) if idle.hit => End::Idle {
                after: idle.after,
                killed: watch.killed,
            },
            _ => End::TimedOut {
                killed: watch.killed,
            },
        },
        (None, false, Some(s)) => match (s.code(), s.signal()) {
            (Some(c), _) => End::Exited(c),
            (None, Some(sig)) => End::Signaled(sig),
            _ => End::Exited(1),
        },
        (None, false, None) => End::Exited(1),
    };
    let mut stdout = stdout;
    rewind(&mut stdout)?;
    Ok(Attempt {
        end,
        stdout,
        stderr_tail,
        elapsed: started.elapsed(),
        leftovers,
    })
}

/// The state of the waiting loop: what was sent to the group and when SIGKILL is due.
/// Where `f` ends (its length: the file is only appended to).
fn stream_position(f: &File) -> io::Result<u64> {
    Ok(f.metadata()?.len())
}

/// The last TAIL bytes written to `f` since `from`, read without moving its offset (a member
/// of the group left behind may still be writing through it).
fn read_tail(f: &File, from: u64) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let end = stream_position(f)?;
    let start = from.max(end.saturating_sub(TAIL as u64));
    let mut tail = vec![0; usize::try_from(end - start).unwrap_or(0)];
    let mut got = 0;
    while got < tail.len() {
        match f.read_at(&mut tail[got..], start + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    tail.truncate(got);
    Ok(tail)
}

/// An anonymous file in memory (memfd), else a temp file where memfds are not available.
pub fn scratch() -> io::Result<File> {
    crate::platform::memfd("triage-scratch")
}

#[derive(Default)]
struct Watch {
    timed_out: bool,
    interrupted: Option<i32>,
    kill_at: Option<Instant>,
    killed: bool,
    idle: Option<Idle>,
}

/// The idle timeout's watch: how much the command has written, and since when no more.
struct Idle {
    after: Duration,
    /// Its stdout (the capture file: its length is what was written).
    stdout: Option<File>,
    /// Its stderr when it goes to a file directly, else counted by the copying thread.
    stderr: Option<File>,
    stderr_seen: Arc<AtomicU64>,
    written: u64,
    since: Instant,
    /// It went quiet for `after`.
    hit: bool,
}

impl Idle {
    /// Whether the command has written nothing for `after` by `now`.
    fn quiet(&mut self, now: Instant) -> bool {
        let len = |f: &Option<File>| f.as_ref().and_then(|f| stream_position(f).ok());
        let written = len(&self.stdout).unwrap_or(0)
            + len(&self.stderr).unwrap_or(0)
            + self.stderr_seen.load(Ordering::Relaxed);
        if written != self.written {
            self.written = written;
            self.since = now;
        }
        now.duration_since(self.since) >= self.after
    }
}

impl Watch {
    fn tick(
        &mut self,
        group: Pid,
        deadline: Option<Instant>,
        spec: &Spec<'_>,
        interrupts: &Interrupts,
    ) {
        reap::sweep();
        let now = Instant::now();
        if let Some(sig) = interrupts.take() {
            if self.interrupted.is_none() {
                self.interrupted = Some(sig);
                let forwarded = if sig == signal_hook::consts::SIGINT {
                    Signal::INT
                } else {
                    Signal::TERM
                };
                let _ = kill_process_group(group, forwarded);
                self.kill_at = Some(now + spec.grace);
            } else {
                self.kill_at = Some(now);
            }
        }
        let idle = self.interrupted.is_none()
            && !self.timed_out
            && self.idle.as_mut().is_some_and(|i| {
                i.hit = i.quiet(now);
                i.hit
            });
        if self.interrupted.is_none()
            && !self.timed_out
            && (idle || deadline.is_some_and(|d| now >= d))
        {
            self.timed_out = true;
            let _ = kill_process_group(group, Signal::TERM);
            self.kill_at = Some(now + spec.kill_after);
        }
        if !self.killed && self.kill_at.is_some_and(|k| Instant::now() >= k) {
            // Only when someone is left: a group that already ended was not killed.
            if test_kill_process_group(group).is_ok() {
                let _ = kill_process_group(group, Signal::KILL);
                self.killed = true;
            }
        }
    }
}

fn cannot_run(status: u8, detail: String, stdout: File, started: Instant) -> Attempt {
    Attempt {
        end: End::CannotRun { status, detail },
        stdout,
        stderr_tail: Vec::new(),
        elapsed: started.elapsed(),
        leftovers: None,
    }
}

fn rewind(f: &mut File) -> io::Result<()> {
    use std::io::Seek;
    f.seek(io::SeekFrom::Start(0)).map(|_| ())
}
