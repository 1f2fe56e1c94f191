//! The integration tests: one binary, one module per subcommand, all through the real
//! `triage` executable in a temp folder with the tool's environment cleared.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod bounded_reads;
mod breaker;
mod breaker_files;

/// Where the shared scenarios keep their state: here, the file store.
mod backend {
    /// Whether leases run by the store's own clock (a Redis's `TIME`), which TRIAGE_NOW does
    /// not move: the files judge by TRIAGE_NOW (within the machine's clock).
    pub const SERVER_CLOCK: bool = false;

    pub struct Backend {
        pub sandbox: crate::common::Sandbox,
    }

    pub fn sandbox() -> Option<Backend> {
        Some(Backend {
            sandbox: crate::common::Sandbox::new(),
        })
    }

    impl std::ops::Deref for Backend {
        type Target = crate::common::Sandbox;

        fn deref(&self) -> &crate::common::Sandbox {
            &self.sandbox
        }
    }
}
mod agent_results;
mod check_output;
mod classify;
mod clients;
mod config;
mod contract;
mod counts;
mod distribution;
mod docs;
mod errors;
mod fuzz;
mod hook;
mod hook_budget;
mod hook_permits_background;
mod hostile;
mod hostile_cache;
mod hostile_children;
mod hostile_report;
mod hostile_resume;
mod hostile_root;
mod hostile_stdin;
mod init;
mod injection;
mod manual;
mod parsers;
mod perf;
mod permit_input;
mod permit_storm;
mod permits;
mod phase;
mod phase_decisions;
mod phase_items;
mod phase_jobs;
mod phase_journal;
mod policy_cache;
mod progress_view;
mod readme;
mod record;
mod redaction;
mod release;
mod report_admission;
mod report_html;
mod report_view;
mod run;
mod run_limits;
mod saga;
mod seam;
mod shell;
mod skill_shell;
mod state;
mod state_root_git;
mod story;
mod subagent_failures;
mod subagents;
mod text_output;
mod trace;
mod umask;
mod voice;
