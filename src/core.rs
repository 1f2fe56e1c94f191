//! The pure core: functions of (input, policy, now). Nothing here opens a file, reads the
//! clock or the environment.

pub mod attempt_plan;
pub mod breaker;
pub mod classify;
pub mod dfa;
pub mod duration;
pub mod error_record;
pub mod glob;
pub mod hook_payload;
pub mod jq;
pub mod json;
pub mod output_check;
pub mod pattern;
pub mod phase;
pub mod policy;
pub mod saga;
pub mod state;
pub mod summary;
pub mod templates;
pub mod text;
pub mod transcript;
pub mod vocab;
