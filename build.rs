//! Build steps. The classifier's built-in patterns become automata here, so that no call
//! compiles a regex (see `build/automata.rs`).

#[path = "build/automata.rs"]
mod automata;
// Also the policy cache's; here only the encoder is used, not the reader.
#[allow(dead_code)]
#[path = "src/automaton/encode.rs"]
mod encode;

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/automata.rs");
    println!("cargo:rerun-if-changed=src/automaton/encode.rs");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    automata::generate(&manifest, &out)
}
