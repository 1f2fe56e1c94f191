//! What persists (the layer above the core): bytes, locks and files ([`files`]) and a fleet's
//! Redis ([`fleet`]), and the domain seams over them, which choose the backend — breakers,
//! the error log, the hooks' sessions, the loop guard's rejections, phase manifests, sagas,
//! state files' recovery — and what reads the disk besides: the project's files an output
//! check names, and the user's cache of compiled patterns.

pub mod breakers;
pub mod budget;
pub mod error_log;
pub mod files;
pub mod fleet;
pub mod ground;
pub mod manifests;
pub mod pattern_cache;
pub mod pending;
pub mod permits;
pub mod phase_seal;
pub mod project_files;
pub mod recovery;
pub mod rejections;
pub mod repeats;
pub mod sagas;
pub mod sessions;
pub mod trace;
