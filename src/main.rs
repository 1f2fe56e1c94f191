//! The `triage` binary: everything is in the library; this only hands it the arguments.

/// On musl (the released Linux binaries) dlmalloc instead of musl's allocator, which returns
/// freed memory to the kernel at once: a short call paid for the same pages many times over
/// (Cargo.toml says more).
#[cfg(all(target_os = "linux", target_env = "musl"))]
#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

fn main() -> std::process::ExitCode {
    triage::cli::main(std::env::args_os().collect())
}
