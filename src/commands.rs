//! One module per subcommand: each exposes its clap `Args` and a `run` that reads input,
//! calls the core, persists through the store and returns the answer.

pub mod breaker;
pub mod budget;
pub mod check_output;
pub mod classify;
pub mod completions;
pub mod config;
pub mod errors;
pub mod hook;
pub mod init;
pub mod install_links;
pub mod man;
pub mod permit;
pub mod phase;
pub mod record_error;
pub mod report;
pub mod run;
pub mod saga;
pub mod state_read;
pub mod state_write;
pub mod store;
