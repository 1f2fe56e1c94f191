//! The `triage` binary: everything is in the library; this only hands it the arguments.

fn main() -> std::process::ExitCode {
    triage::cli::main(std::env::args_os().collect())
}
