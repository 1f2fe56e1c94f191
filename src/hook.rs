//! The Claude Code hook protocol.

pub mod codec;
