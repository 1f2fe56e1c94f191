//! What persists: bytes, locks and files ([`files`]), a fleet's Redis ([`fleet`]), and the
//! domain seams over them.

pub mod breakers;
pub mod error_log;
pub mod files;
pub mod fleet;
pub mod manifests;
pub mod pattern_cache;
pub mod project_files;
pub mod recovery;
pub mod rejections;
pub mod sagas;
pub mod sessions;
