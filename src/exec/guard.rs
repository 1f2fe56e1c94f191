//! The guard between a permit's holder and the command it runs: a command started under a
//! permit must not outlive the `triage` that holds the permit, or a `kill -9` of the holder
//! frees the slot at lease expiry while the command runs on (more commands at once than the
//! permit allows). Setting a parent-death signal in the child needs `unsafe` code between
//! fork and exec, so instead the command is started through `triage __guard PARENT GRACE --
//! COMMAND…`: a small process that leads the command's process group, runs the command as its
//! child, and passes on its end (its exit status, or the signal that killed it). When the
//! holder `PARENT` is gone (the guard is reparented) the guard ends the whole group: SIGTERM,
//! then SIGKILL after `GRACE` milliseconds.
//!
//! The signals the holder sends the group (a timeout's SIGTERM, a forwarded SIGINT) reach the
//! command directly; the guard only notes them and lets the command decide how it ends.

use std::ffi::OsString;
use std::process::{Command, ExitCode};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The first argument that makes `triage` a guard (never a subcommand's name).
pub const ARG: &str = "__guard";

/// How often the guard looks whether its holder is still there.
const LOOK: Duration = Duration::from_millis(50);

/// The command line that runs `command` under a guard for this process: the guard program
/// (this executable) and its arguments, or `None` where this executable cannot be named.
pub fn wrap(command: &[OsString], grace: Duration) -> Option<(OsString, Vec<OsString>)> {
    let exe = std::env::current_exe().ok()?;
    let mut args: Vec<OsString> = vec![
        ARG.into(),
        std::process::id().to_string().into(),
        grace.as_millis().to_string().into(),
        "--".into(),
    ];
    args.extend(command.iter().cloned());
    Some((exe.into_os_string(), args))
}

/// Runs as the guard: `args` are what follows [`ARG`].
pub fn main(args: &[OsString]) -> ExitCode {
    let parsed = match args {
        [parent, grace, dash, program, rest @ ..] if dash == "--" => parent
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
            .zip(grace.to_str().and_then(|g| g.parse::<u64>().ok()))
            .map(|(p, g)| (p, Duration::from_millis(g), program, rest)),
        _ => None,
    };
    let Some((parent, grace, program, rest)) = parsed else {
        eprintln_guard("usage: triage __guard PARENT_PID GRACE_MS -- COMMAND [ARG…]");
        return ExitCode::from(64);
    };
    // Only the group it leads is its to end: run any other way (not by `run`, which starts it
    // in a group of its own), it refuses rather than signal its caller's group later.
    if !holder_alive(parent) || rustix::process::getpgrp() != rustix::process::getpid() {
        eprintln_guard(
            "__guard is run by `triage run` only, as the leader of a process group of its own",
        );
        return ExitCode::from(125);
    }
    // The group's signals are for the command; the guard outlives them to report its end.
    let flags: Vec<_> = [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ]
    .into_iter()
    .filter_map(|s| {
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        signal_hook::flag::register(s, flag).ok()
    })
    .collect();
    let mut child = match Command::new(program).args(rest).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln_guard(&format!("{}: {e}", program.to_string_lossy()));
            let status = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return ExitCode::from(status);
        }
    };
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let mut ending: Option<Instant> = None;
    let status = loop {
        match rx.recv_timeout(LOOK) {
            Ok(s) => break s.ok(),
            Err(mpsc::RecvTimeoutError::Disconnected) => break None,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if ending.is_none() && !holder_alive(parent) {
            end_group(rustix::process::Signal::TERM);
            ending = Some(Instant::now());
        }
        if ending.is_some_and(|at| at.elapsed() >= grace) {
            // Ends the guard too: it is in the group.
            end_group(rustix::process::Signal::KILL);
        }
    };
    let _ = waiter.join();
    for id in flags {
        signal_hook::low_level::unregister(id);
    }
    pass_on(status)
}

/// Whether `parent` is still this process's parent (it is not once it died: the guard is
/// then reparented to a reaper).
fn holder_alive(parent: u32) -> bool {
    rustix::process::getppid()
        .is_some_and(|p| u32::try_from(p.as_raw_nonzero().get()) == Ok(parent))
}

/// Signals the guard's own process group: the command and all it started.
fn end_group(sig: rustix::process::Signal) {
    let _ = rustix::process::kill_process_group(rustix::process::getpgrp(), sig);
}

/// Ends as the command ended: its exit status, or by the signal that ended it.
fn pass_on(status: Option<std::process::ExitStatus>) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let Some(status) = status else {
        return ExitCode::from(125);
    };
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if let Some(sig) = status.signal() {
        // The default action of the signal, on the guard itself (the handlers are gone).
        let _ = signal_hook::low_level::emulate_default_handler(sig);
        return ExitCode::from(u8::try_from(128 + sig).unwrap_or(255));
    }
    ExitCode::from(1)
}

#[allow(clippy::print_stderr)]
fn eprintln_guard(message: &str) {
    eprintln!("triage: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_command_names_this_process_its_grace_and_the_command_after_a_dash() {
        let (_, args) = wrap(
            &["sh".into(), "-c".into(), "exit 3".into()],
            Duration::from_secs(2),
        )
        .unwrap();
        assert_eq!(args[0], ARG);
        assert_eq!(args[1], std::process::id().to_string().as_str());
        assert_eq!(args[2], "2000");
        assert_eq!(&args[3..], ["--", "sh", "-c", "exit 3"]);
    }

    #[test]
    fn a_guard_called_wrong_is_a_usage_error() {
        assert_eq!(main(&["x".into()]), ExitCode::from(64));
    }

    #[test]
    fn a_guard_that_leads_no_group_of_its_own_refuses_and_signals_nobody() {
        // The test process is not a group leader (cargo's harness is), nor is its parent
        // given here: the guard refuses before it starts anything.
        let parent = std::os::unix::process::parent_id().to_string();
        let args: Vec<std::ffi::OsString> =
            vec![parent.into(), "0".into(), "--".into(), "true".into()];
        if rustix::process::getpgrp() != rustix::process::getpid() {
            assert_eq!(main(&args), ExitCode::from(125));
        }
    }
}
