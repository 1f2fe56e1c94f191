//! One module per subcommand: each exposes its clap `Args` and a `run` that reads input,
//! calls the core, persists through the store and returns the answer.

pub mod config;
pub mod init;
pub mod install_links;
pub mod state_read;
pub mod state_write;
