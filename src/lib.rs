//! `triage`: the error-handling layer for LLM-agent workflows. The picture, arrows pointing
//! the one way imports may go:
//!
//! ```text
//! main.rs ─► cli ─► commands/<one per subcommand>, hook/, report/, man, setup ─┐  THE EDGE
//!            (clap, multi-call, exit statuses; context, env, stdin, term)      │  what faces
//!                                   ┌──────────────────────────────────────────┘  the world
//!                                   ▼
//!   exec/   running commands: a child in its group, the attempt loop, the phase runner
//!   store/  what persists: files, locks, Redis; the seams (breakers, error_log, sessions...);
//!           beside it `platform`, the Linux-only calls (pidfd, memfd, subreaper) with their
//!           portable fallbacks
//!   core/   pure: vocab, policy, classify, breaker machine, output checks, templates...
//!   exit    Failure and ExitStatus, below them all
//! ```
//!
//! The layers are the folders: `core`, `store`, `exec`; everything else at the top is
//! the edge (kept at the top rather than under `src/edge/`: `commands/` is what a reader
//! looks for first, and every edge module is one a command or the dispatcher calls). A file
//! may import its own layer and those below it, never one above: `core` never opens a file,
//! reads the clock or the environment (it is handed `now` and the policy); `store` is the only
//! layer that opens shared state, and its seams choose the backend (the files, or a fleet's
//! Redis); `exec` runs processes through both. Neither sees the edge: the edge's `Context`
//! (the environment, the options, the lazily read policy) hands them a
//! `store::ground::Ground` (the state root, now, the lock deadline, and itself behind the
//! store's `Surroundings` trait for warnings and the backend) and the policy beside it. No
//! command imports another, and no two files import each other (`tests/cli/seam.rs` reads the
//! source and checks all three).
//!
//! The library surface is the part of the core a program can call in-process to classify an
//! error text, judge an output or run a breaker without the binary: [`core::classify`],
//! [`core::output_check`], [`core::breaker`] (the machine), [`core::policy`] (what they are
//! judged by), [`core::vocab`] and [`core::duration`] (the words and durations in their
//! answers). Everything else is `pub(crate)`; [`cli::main`] is public for the binary.

#![cfg_attr(not(test), deny(clippy::print_stderr))]

/// `eprintln!` that never panics: a closed or full stderr (`2>/dev/full`, a reader gone) loses
/// the line, never the call (a panic on a phase item's thread once left its runner hanging).
macro_rules! say {
    () => {{
        $crate::live::say(format_args!(""));
    }};
    ($($arg:tt)*) => {{
        $crate::live::say(format_args!($($arg)*));
    }};
}

/// `eprint!` that never panics (see `say!`).
macro_rules! say_more {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut e = std::io::stderr();
        let _ = write!(e, $($arg)*);
        let _ = e.flush();
    }};
}

pub mod cli;
pub(crate) mod commands;
pub(crate) mod context;
pub mod core;
pub(crate) mod env;
pub(crate) mod exec;
pub(crate) mod exit;
pub(crate) mod hook;
#[cfg(test)]
mod hostile_input;
pub(crate) mod live;
pub(crate) mod man;
pub(crate) mod platform;
pub(crate) mod report;
pub(crate) mod settings;
pub(crate) mod setup;
pub(crate) mod stdin;
pub(crate) mod store;
pub(crate) mod term;
pub(crate) mod version;
