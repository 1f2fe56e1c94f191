//! `triage`: the error-handling layer for LLM-agent workflows.
//!
//! How the pieces fit (arrows point one way):
//!
//! ```text
//! main.rs ─► cli (clap, multi-call, exit statuses) ─► commands::<one per subcommand>
//!                                                         │
//!            ┌────────────────────────────────────────────┼──────────────────────┐
//!            ▼                                            ▼                      ▼
//!   core: vocab, duration, policy, glob, jq,      store: locks, atomic     context: options,
//!   state, input (pure functions of input,        replace, JSONL append    clock, stdin, policy
//!   policy, now)                                  and read, key escaping   loading, trace log
//! ```
//!
//! The core never opens a file, reads the clock or the environment: it is handed `now` and the
//! policy. [`store`] is the only module that opens shared files. [`context`] is the only one
//! that reads the environment (parsed by [`env`]). A command is the short glue that reads
//! input, calls the core, persists through the domain module that owns the state and writes
//! the answer: breakers through [`breaker::calls`] and [`breaker::store`], the error log and
//! its counters through [`error_log`], the loop guard's counts through
//! [`output_check::rejections`], the hooks' per-session files through [`session`]. Those
//! choose the backend (the files, or a fleet's Redis through [`fleet`]); no command calls
//! another's persistence (`tests/cli/seam.rs` checks).

/// `say!` that never panics: a closed or full stderr (`2>/dev/full`, a reader gone) loses
/// the line, never the call (a panic on a phase item's thread once left its runner hanging).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `say_more!` that never panics (see `say!`).
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
pub(crate) mod man;
pub(crate) mod report;
pub(crate) mod settings;
pub(crate) mod setup;
pub(crate) mod stdin;
pub(crate) mod store;
pub(crate) mod term;
pub(crate) mod version;
