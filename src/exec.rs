//! Running commands: `triage run`'s machinery. The pure part (what an attempt's end means, how
//! long to wait before the next one) is [`crate::core::attempt_plan`]; [`child`] runs one attempt in its own process group with a
//! timeout, signal forwarding, stdin replay and captured stdout; [`reap`] ends what an attempt
//! left running in its group and reaps the orphans reparented to `triage`; [`wiring`]
//! attaches the attempt loop to a process (`triage run`) or to one work item of a phase
//! (`triage phase`).

pub mod attempts;
pub mod child;
pub mod compensation;
pub mod phase_runner;
pub mod reap;
pub mod wiring;
