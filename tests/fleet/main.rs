//! The fleet backend against a real `redis-server` (see `server`): one server per test,
//! started on a free port and stopped at the end.
//!
//! - `breaker`: every breaker scenario of the file store's suite (`tests/cli/breaker.rs`,
//!   included as it is), run here with `TRIAGE_STORE` pointing at the test's Redis;
//! - `counts`: the file store's suite of the counters' rules (`tests/cli/counts.rs`: open
//!   failures per session and unit, resolutions by selection, `recovered_by_retry`,
//!   interrupts counted nowhere), likewise run against the test's Redis;
//! - `permits`, `report_admission`: the file store's permit and budget scenarios, and the
//!   report's view of them, against the test's Redis;
//! - `hosts`: hosts with separate state roots racing on one Redis, as processes;
//! - `clock`: a host whose clock is wrong, by libfaketime: the server's clock decides;
//! - `faults`: Redis stopped, restarted or silent mid-run;
//! - `operator`: `triage store migrate` and `triage store status`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../cli/common.rs"]
mod common;

#[path = "../cli/breaker.rs"]
mod breaker;

#[path = "../cli/counts.rs"]
mod counts;

#[path = "../cli/permits.rs"]
mod permits;

#[path = "../cli/report_admission.rs"]
mod report_admission;

mod clock;
mod faults;
mod hosts;
mod operator;
mod server;

use common::skip_unless_tool;

/// Where the shared scenarios keep their state: here, a Redis of the test's own.
mod backend {
    /// Leases run by the server's `TIME`: TRIAGE_NOW does not move them.
    pub const SERVER_CLOCK: bool = true;

    pub struct Backend {
        pub sandbox: crate::common::Sandbox,
        /// Stopped when the scenario ends.
        _server: crate::server::Server,
    }

    pub fn sandbox() -> Option<Backend> {
        let server = crate::server::Server::start()?;
        Some(Backend {
            sandbox: crate::common::Sandbox::with_store(&server.url()),
            _server: server,
        })
    }

    impl std::ops::Deref for Backend {
        type Target = crate::common::Sandbox;

        fn deref(&self) -> &crate::common::Sandbox {
            &self.sandbox
        }
    }
}
