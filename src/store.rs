//! What persists: bytes, locks and files ([`files`]), a fleet's Redis ([`fleet`]), and the
//! domain seams over them.

pub mod breakers;
pub mod error_log;
pub mod files;
pub mod fleet;
pub mod policy_cache;
pub mod rejections;
pub mod sessions;
