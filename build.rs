//! Build steps:
//!
//! - the classifier's built-in patterns become automata, so that no call compiles a regex
//!   (see `build/automata.rs`). Determinizing and minimizing them takes about 48 s of CPU,
//!   so they are committed (`src/core/classify/builtin_automata.rs`) with a stamp of what they
//!   were made from (`build/stamp.rs`): a build whose inputs have that stamp copies them, one
//!   whose rule table, generator or regex crates changed makes them again (and warns). After
//!   changing the rule table, `TRIAGE_REFRESH_AUTOMATA=1 cargo build` also rewrites the
//!   committed copy; the lib test `core::dfa::tests::committed_automata_are_not_stale` fails
//!   until then;
//! - the build gets an id the policy cache writes into its files, so a file from another
//!   build is never trusted;
//! - the binary is stamped with the commit it was built from and the build date, for
//!   `triage --version`. A source tree without `.git` (a published crate, a tarball) or
//!   without `git` builds too: the commit is then `unknown`. `SOURCE_DATE_EPOCH` fixes the
//!   date for reproducible builds.

#[path = "build/automata.rs"]
mod automata;
// Also the policy cache's; here only the encoder is used, not the reader.
#[allow(dead_code)]
#[path = "src/core/dfa/encode.rs"]
mod encode;

include!("build/stamp.rs");

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/automata.rs");
    println!("cargo:rerun-if-changed=build/stamp.rs");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    automata(&manifest, &out)?;
    build_id(&manifest)?;
    stamp();
    Ok(())
}

/// `$OUT_DIR/builtin_automata.rs`: the committed automata when their stamp is that of the
/// inputs, else generated again (see the module's comment).
fn automata(manifest: &Path, out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    const COMMITTED: &str = "src/core/classify/builtin_automata.rs";
    for f in AUTOMATA_INPUTS.iter().chain(&["Cargo.lock", COMMITTED]) {
        watch(manifest.join(f));
    }
    println!("cargo:rerun-if-env-changed=TRIAGE_REFRESH_AUTOMATA");
    let refresh =
        std::env::var_os("TRIAGE_REFRESH_AUTOMATA").is_some_and(|v| !v.is_empty() && v != "0");
    let stamp = automata_stamp(manifest)?;
    let committed = std::fs::read_to_string(manifest.join(COMMITTED)).ok();
    if let (false, Some(text)) = (refresh, &committed) {
        if automata_stamp_of(text) == Some(stamp.as_str()) {
            std::fs::write(out.join("builtin_automata.rs"), text)?;
            return Ok(());
        }
        println!(
            "cargo:warning={COMMITTED} is stale (its stamp is not that of the rule table, the generator and the regex crates): generating the automata (about 48 s of CPU); `TRIAGE_REFRESH_AUTOMATA=1 cargo build` rewrites the committed copy"
        );
    }
    let text = automata::generate(manifest, &format!("{AUTOMATA_STAMP_PREFIX}{stamp}"))?;
    std::fs::write(out.join("builtin_automata.rs"), &text)?;
    if refresh {
        std::fs::write(manifest.join(COMMITTED), &text)?;
    }
    Ok(())
}

/// `TRIAGE_BUILD_ID`: the version, and a hash of what decides what a cached policy means —
/// what a valid policy is (policy.rs), how patterns become automata (the encoder, the
/// matcher) and the crates that parse and build them (Cargo.lock).
fn build_id(manifest: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in [
        "src/core/policy.rs",
        "src/core/dfa.rs",
        "src/core/dfa/encode.rs",
        "src/core/pattern.rs",
        "Cargo.lock",
    ] {
        watch(manifest.join(f));
        for b in std::fs::read(manifest.join(f)).unwrap_or_default() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let version = std::env::var("CARGO_PKG_VERSION")?;
    println!("cargo:rustc-env=TRIAGE_BUILD_ID={version}-{h:016x}");
    Ok(())
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// Days since 1970-01-01 as a calendar date (Howard Hinnant's civil_from_days).
fn date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Tells cargo to rerun the build script when `path` changes, if it exists.
fn watch(path: PathBuf) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// `TRIAGE_COMMIT` and `TRIAGE_BUILD_DATE`.
fn stamp() {
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // Rebuild when HEAD moves: HEAD itself, the branch it points at, and packed refs. Only
    // paths that exist are named: cargo reruns a build script on every build while a path it
    // names is missing (a repository before its first `git pack-refs` has no packed-refs, an
    // unborn branch no ref file), and each rerun relinks the binary. A branch not yet born is
    // watched through its folder, which changes when the first commit creates it.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watch(Path::new(&dir).join("HEAD"));
        if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
            let common = PathBuf::from(common);
            watch(common.join("packed-refs"));
            if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
                let file = common.join(&head_ref);
                if file.exists() {
                    watch(file);
                } else if let Some(folder) = file.parent().filter(|f| f.is_dir()) {
                    watch(folder.to_path_buf());
                }
            }
        }
    }
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0)
        });
    println!("cargo:rustc-env=TRIAGE_COMMIT={commit}");
    println!(
        "cargo:rustc-env=TRIAGE_BUILD_DATE={}",
        date(secs.div_euclid(86_400))
    );
}
