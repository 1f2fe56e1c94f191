//! The pure core (the lowest layer): functions of (input, policy, now). Nothing here opens a
//! file, reads the clock or the environment, and nothing here imports the layers above. The
//! library surface is here: `classify`, `output_check`, `breaker`, `policy`, `vocab` and
//! `duration` are public (see the crate's documentation); the rest is the crate's own.

pub(crate) mod admission;
pub(crate) mod attempt_plan;
pub mod breaker;
pub mod classify;
pub(crate) mod dfa;
pub mod duration;
pub(crate) mod error_record;
pub(crate) mod glob;
pub(crate) mod hook_payload;
pub(crate) mod jq;
pub(crate) mod json;
pub mod output_check;
pub(crate) mod pattern;
pub(crate) mod phase;
pub mod policy;
pub(crate) mod redact;
pub(crate) mod repeat;
pub(crate) mod saga;
pub(crate) mod state;
pub(crate) mod summary;
pub(crate) mod templates;
pub(crate) mod text;
pub(crate) mod transcript;
pub mod vocab;
