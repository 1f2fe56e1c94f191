//! Exit statuses (SPEC §2) and the one error type every command returns.
//!
//! The best-effort rule lives in [`Failure::status`]: an operational failure exits 0 unless the
//! caller asked for `--strict`; a usage error is always 64 (clap's own 2 is never used).

use std::fmt;
use std::process::ExitCode;

/// The statuses `triage` may exit with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// The job was done, or could not be done and a warning was given (best effort).
    Success = 0,
    /// `-e/--exit-status` and the verdict was negative.
    Negative = 1,
    /// `--hook --block-with-exit-2`: the hook protocol's blocking form.
    Block = 2,
    /// A usage error: unknown flag, bad argument.
    Usage = 64,
    /// `--strict`: the input data was bad.
    DataErr = 65,
    /// `--strict`: an I/O error.
    IoErr = 74,
    /// `--strict`: a lock was not obtained in time.
    TempFail = 75,
}

impl From<ExitStatus> for ExitCode {
    fn from(s: ExitStatus) -> ExitCode {
        ExitCode::from(s as u8)
    }
}

/// What kind of failure stopped a command; decides the exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureClass {
    /// The command line was wrong: always 64.
    Usage,
    /// The input data was wrong: 0, or 65 with `--strict`.
    Data,
    /// Reading or writing failed: 0, or 74 with `--strict`.
    Io,
    /// A lock was not obtained in time: 0, or 75 with `--strict`.
    Lock,
}

/// A command that could not do its job: a class and a message that says what to do.
#[derive(Debug)]
pub struct Failure {
    /// Decides the exit status.
    pub class: FailureClass,
    /// Lowercase, without the subcommand's name (the runner adds it).
    pub message: String,
}

impl Failure {
    /// A usage error.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            class: FailureClass::Usage,
            message: message.into(),
        }
    }

    /// Bad input data.
    pub fn data(message: impl Into<String>) -> Failure {
        Failure {
            class: FailureClass::Data,
            message: message.into(),
        }
    }

    /// An I/O failure.
    pub fn io(message: impl Into<String>) -> Failure {
        Failure {
            class: FailureClass::Io,
            message: message.into(),
        }
    }

    /// A lock that was not obtained in time.
    pub fn lock(message: impl Into<String>) -> Failure {
        Failure {
            class: FailureClass::Lock,
            message: message.into(),
        }
    }

    /// The status to exit with under the best-effort rule.
    pub fn status(&self, strict: bool) -> ExitStatus {
        match (self.class, strict) {
            (FailureClass::Usage, _) => ExitStatus::Usage,
            (_, false) => ExitStatus::Success,
            (FailureClass::Data, true) => ExitStatus::DataErr,
            (FailureClass::Io, true) => ExitStatus::IoErr,
            (FailureClass::Lock, true) => ExitStatus::TempFail,
        }
    }

    /// The word for the class, as written to `logs/triage.log`.
    pub fn class_name(&self) -> &'static str {
        match self.class {
            FailureClass::Usage => "usage",
            FailureClass::Data => "data",
            FailureClass::Io => "io",
            FailureClass::Lock => "lock",
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_effort_unless_strict() {
        assert_eq!(Failure::data("x").status(false), ExitStatus::Success);
        assert_eq!(Failure::io("x").status(false), ExitStatus::Success);
        assert_eq!(Failure::lock("x").status(false), ExitStatus::Success);
        assert_eq!(Failure::data("x").status(true), ExitStatus::DataErr);
        assert_eq!(Failure::io("x").status(true), ExitStatus::IoErr);
        assert_eq!(Failure::lock("x").status(true), ExitStatus::TempFail);
        assert_eq!(Failure::usage("x").status(false), ExitStatus::Usage);
        assert_eq!(Failure::usage("x").status(true), ExitStatus::Usage);
    }

    #[test]
    fn statuses_are_the_spec_numbers() {
        let pairs = [
            (ExitStatus::Success, 0),
            (ExitStatus::Negative, 1),
            (ExitStatus::Block, 2),
            (ExitStatus::Usage, 64),
            (ExitStatus::DataErr, 65),
            (ExitStatus::IoErr, 74),
            (ExitStatus::TempFail, 75),
        ];
        for (s, n) in pairs {
            assert_eq!(s as u8, n);
        }
    }
}
