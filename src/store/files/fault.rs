//! Fault points for the crash and failure tests, from `TRIAGE_FAULT=step:action`.
//!
//! Compiled only with the `fault-injection` feature, which only the test build turns on: a
//! shipped binary has no such switch, so no environment variable can make it misbehave.
//!
//! `action` is `sleep` (print `READY step` on stderr and wait to be killed), `abort` (end the
//! process at once, as SIGKILL would), `eio` (fail the step with an I/O error), or, for the
//! `append` step only, `torn` (write the first half of the line, then `sleep`).

use std::io;

#[cfg(feature = "fault-injection")]
fn spec() -> Option<&'static (String, String)> {
    use std::sync::OnceLock;
    static SPEC: OnceLock<Option<(String, String)>> = OnceLock::new();
    SPEC.get_or_init(|| {
        let v = std::env::var("TRIAGE_FAULT").ok()?;
        let (s, a) = v.split_once(':')?;
        Some((s.to_string(), a.to_string()))
    })
    .as_ref()
}

#[cfg(feature = "fault-injection")]
fn sleep_forever(step: &str) -> ! {
    #[allow(clippy::print_stderr)]
    {
        eprintln!("READY {step}");
    }
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// The fault injected at `step`, if any.
#[cfg(feature = "fault-injection")]
pub fn at(step: &str) -> io::Result<()> {
    match spec() {
        Some((s, action)) if s == step => match action.as_str() {
            "sleep" => sleep_forever(step),
            "abort" => std::process::abort(),
            _ => Err(io::Error::other(format!("injected fault at {step}"))),
        },
        _ => Ok(()),
    }
}

/// Without the feature, no step ever fails.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn at(_step: &str) -> io::Result<()> {
    Ok(())
}

/// `append:torn`: writes the first half of `buf` and waits to be killed, leaving a torn line.
#[cfg(feature = "fault-injection")]
pub fn torn_append(file: &mut std::fs::File, buf: &[u8]) {
    use std::io::Write;
    if matches!(spec(), Some((s, a)) if s == "append" && a == "torn") {
        let _ = file.write_all(&buf[..buf.len() / 2]);
        sleep_forever("append");
    }
}

/// Without the feature, nothing is torn.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn torn_append(_file: &mut std::fs::File, _buf: &[u8]) {}
