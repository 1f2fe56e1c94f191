//! The version `triage` reports: `--version` and the HTML report name the commit and the
//! build date (build.rs stamps them).

/// `triage --version`: the version, the commit it was built from and the build date (build.rs).
/// `-V` and the man pages show the version alone, so they do not change with every commit.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TRIAGE_COMMIT"),
    ", built ",
    env!("TRIAGE_BUILD_DATE"),
    ")"
);
