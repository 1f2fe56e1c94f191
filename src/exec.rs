//! Running commands (the layer above the store): [`child`] runs one attempt in its own process
//! group with a timeout, signal forwarding, stdin replay and captured stdout; [`reap`] ends
//! what an attempt left running in its group and reaps the orphans reparented to `triage`;
//! [`attempts`] is `triage run`'s attempt loop (the pure part, what an attempt's end means and
//! how long to wait, is [`crate::core::attempt_plan`]); [`wiring`] attaches it to a process
//! (`triage run`) or to one work item of a phase ([`phase_runner`]); [`compensation`] runs a
//! saga's compensations.

pub mod attempts;
pub mod child;
pub mod compensation;
pub mod group_proof;
pub mod guard;
pub mod phase_runner;
pub mod reap;
pub mod wiring;
