//! The fleet backend against a real `redis-server` (see `server`): one server per test,
//! started on a free port and stopped at the end. Library-level tests of the scripts here;
//! the command-level suites (both backends, hosts racing as processes, faults) beside them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod remote;
mod server;
