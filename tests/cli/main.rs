//! The integration tests: one binary, one module per subcommand, all through the real
//! `triage` executable in a temp folder with the tool's environment cleared.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod breaker;
mod check_output;
mod classify;
mod config;
mod contract;
mod counts;
mod docs;
mod errors;
mod fuzz;
mod hook;
mod hostile;
mod hostile_root;
mod init;
mod manual;
mod parsers;
mod perf;
mod phase;
mod policy_cache;
mod readme;
mod record;
mod release;
mod report_html;
mod run;
mod saga;
mod shell;
mod state;
mod story;
mod subagents;
mod text_output;
