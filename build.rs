//! Build steps. The classifier's built-in patterns become automata here, so that no call
//! compiles a regex (see `build/automata.rs`); and the build gets an id the policy cache
//! writes into its files, so a file from another build is never trusted.

#[path = "build/automata.rs"]
mod automata;
// Also the policy cache's; here only the encoder is used, not the reader.
#[allow(dead_code)]
#[path = "src/automaton/encode.rs"]
mod encode;

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/automata.rs");
    println!("cargo:rerun-if-changed=src/automaton/encode.rs");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    automata::generate(&manifest, &out)?;
    build_id(&manifest)
}

/// `TRIAGE_BUILD_ID`: the version, and a hash of what decides what a cached policy means —
/// what a valid policy is (policy.rs), how patterns become automata (the encoder, the
/// matcher) and the crates that parse and build them (Cargo.lock).
fn build_id(manifest: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in [
        "src/policy.rs",
        "src/automaton/mod.rs",
        "src/automaton/encode.rs",
        "src/policy_cache/matcher.rs",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={f}");
        for b in std::fs::read(manifest.join(f)).unwrap_or_default() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let version = std::env::var("CARGO_PKG_VERSION")?;
    println!("cargo:rustc-env=TRIAGE_BUILD_ID={version}-{h:016x}");
    Ok(())
}
