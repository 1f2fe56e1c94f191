//! The environment variables `triage` reads, read forgivingly (SPEC §2): a boolean is any of
//! `1/0/true/false/yes/no/on/off` in any case, an empty value is unset, and a value that does
//! not parse is a warning and the default — never a usage error, so a hook whose environment
//! holds a typo keeps guarding its agent.
//!
//! Pure: [`Env::read`] is handed a lookup function; [`crate::cli`] hands it the process's
//! environment.

use crate::core::duration::{parse_now, Dur};
use chrono::{DateTime, Utc};
use std::path::PathBuf;
use std::time::Duration;

/// What the environment says, every value parsed; `None` where unset, empty or malformed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Env {
    /// `TRIAGE_DIR`: the state root.
    pub dir: Option<PathBuf>,
    /// `TRIAGE_CONFIG`: the policy file.
    pub config: Option<PathBuf>,
    /// `TRIAGE_STRICT`: operational failures exit non-zero.
    pub strict: Option<bool>,
    /// `TRIAGE_NOW`: the current time, for tests and replays.
    pub now: Option<DateTime<Utc>>,
    /// `TRIAGE_LOCK_TIMEOUT`: how long to wait for a lock.
    pub lock_timeout: Option<Duration>,
    /// `TRIAGE_MAX_INPUT`: the largest stdin accepted, in bytes.
    pub max_input: Option<usize>,
    /// `TRIAGE_SEED`: the jitter's seed.
    pub seed: Option<u64>,
    /// `CLAUDE_PROJECT_DIR`: the project folder.
    pub project_dir: Option<PathBuf>,
    /// `TRIAGE_STORE`: the fleet's Redis (`redis://…`), over the policy's `[store] url`; a
    /// bad URL is the fleet's warning when it is used (the files serve meanwhile).
    pub store: Option<String>,
    /// `TRIAGE_REDIS_PASSWORD`: the password when the URL has none (as given, spaces too).
    pub redis_password: Option<String>,
    /// `TRIAGE_LOG`: `debug` writes the decision trace (each decision, its inputs and the
    /// rule that made it) to `logs/triage.log`; `info`, `warning`, `error` and `off` do not.
    pub debug: Option<bool>,
    /// One warning per malformed value, naming the variable, the value and the default used.
    pub warnings: Vec<String>,
}

impl Env {
    /// Reads every variable through `get` (the process's environment, or a test's table).
    pub fn read(get: impl Fn(&str) -> Option<String>) -> Env {
        let mut env = Env::default();
        let value = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let mut parse = |name: &str, default: &str, why: &str, ok: bool| {
            if !ok {
                let v = value(name).unwrap_or_default();
                env.warnings.push(format!(
                    "{name}=`{}` is not {why}; using {default}",
                    crate::core::text::printable(&v)
                ));
            }
        };
        let strict = value("TRIAGE_STRICT").map(|v| parse_bool(&v));
        parse(
            "TRIAGE_STRICT",
            "the default (off)",
            "a yes or no (1/0, true/false, yes/no, on/off)",
            strict != Some(None),
        );
        let now = value("TRIAGE_NOW").map(|v| parse_now(&v));
        parse(
            "TRIAGE_NOW",
            "the clock",
            "a time (RFC 3339 like 2026-01-02T03:04:05Z, or Unix seconds)",
            now != Some(None),
        );
        let lock = value("TRIAGE_LOCK_TIMEOUT").map(|v| v.parse::<Dur>().ok().map(|d| d.0));
        parse(
            "TRIAGE_LOCK_TIMEOUT",
            "the default",
            "a duration (like 500ms, 2s or 1m)",
            lock != Some(None),
        );
        let max = value("TRIAGE_MAX_INPUT").map(|v| v.trim().parse::<usize>().ok());
        parse(
            "TRIAGE_MAX_INPUT",
            "the default (16 MiB)",
            "a whole number of bytes",
            max != Some(None),
        );
        let seed = value("TRIAGE_SEED").map(|v| v.trim().parse::<u64>().ok());
        parse(
            "TRIAGE_SEED",
            "a seed drawn from the clock",
            "a whole number from 0 to 2^64-1",
            seed != Some(None),
        );
        let log = value("TRIAGE_LOG").map(|v| parse_log_level(&v));
        parse(
            "TRIAGE_LOG",
            "the default (no decision trace)",
            "a log level (debug, info, warning, error or off)",
            log != Some(None),
        );
        env.debug = log.flatten();
        env.strict = strict.flatten();
        env.now = now.flatten();
        env.lock_timeout = lock.flatten();
        env.max_input = max.flatten();
        env.seed = seed.flatten();
        env.dir = value("TRIAGE_DIR").map(PathBuf::from);
        env.config = value("TRIAGE_CONFIG").map(PathBuf::from);
        env.project_dir = value("CLAUDE_PROJECT_DIR").map(PathBuf::from);
        env.store = value("TRIAGE_STORE");
        env.redis_password = get("TRIAGE_REDIS_PASSWORD").filter(|p| !p.is_empty());
        env
    }

    /// The process's environment.
    pub fn from_process() -> Env {
        Env::read(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }
}

/// `1/0`, `true/false`, `yes/no`, `on/off`, in any case and with spaces around; else `None`.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// `TRIAGE_LOG`'s levels, in any case: `Some(true)` for `debug` (the decision trace), `Some(false)`
/// for the levels always written (`info`, `warning`/`warn`, `error`) and `off`; else `None`.
pub fn parse_log_level(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "debug" | "trace" => Some(true),
        "info" | "warning" | "warn" | "error" | "off" | "none" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)]) -> Env {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Env::read(|k| map.get(k).cloned())
    }

    #[test]
    fn booleans_in_every_spelling() {
        for t in ["1", "true", "TRUE", "Yes", "on", " ON "] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for t in ["0", "false", "False", "NO", "off"] {
            assert_eq!(parse_bool(t), Some(false), "{t}");
        }
        assert_eq!(parse_bool("maybe"), None);
        assert_eq!(read(&[("TRIAGE_STRICT", "YES")]).strict, Some(true));
        assert_eq!(read(&[("TRIAGE_STRICT", "off")]).strict, Some(false));
    }

    #[test]
    fn empty_is_unset_and_says_nothing() {
        let e = read(&[
            ("TRIAGE_DIR", ""),
            ("TRIAGE_CONFIG", " "),
            ("TRIAGE_STRICT", ""),
            ("TRIAGE_NOW", ""),
            ("TRIAGE_LOCK_TIMEOUT", ""),
            ("TRIAGE_MAX_INPUT", ""),
            ("TRIAGE_SEED", ""),
        ]);
        assert_eq!(e, Env::default(), "an empty value is the same as no value");
    }

    #[test]
    fn a_bad_value_is_one_warning_and_the_default() {
        let e = read(&[
            ("TRIAGE_STRICT", "maybe"),
            ("TRIAGE_NOW", "yesterday"),
            ("TRIAGE_LOCK_TIMEOUT", "soon"),
            ("TRIAGE_MAX_INPUT", "lots"),
            ("TRIAGE_SEED", "-1"),
            ("TRIAGE_DIR", "/x"),
        ]);
        assert_eq!(
            (e.strict, e.now, e.lock_timeout, e.max_input, e.seed),
            (None, None, None, None, None)
        );
        assert_eq!(e.dir, Some(PathBuf::from("/x")));
        assert_eq!(e.warnings.len(), 5, "{:?}", e.warnings);
        assert!(
            e.warnings[0].starts_with("TRIAGE_STRICT=`maybe` is not a yes or no"),
            "{:?}",
            e.warnings
        );
        assert!(e.warnings.iter().all(|w| w.contains("; using ")));
    }

    #[test]
    fn triage_log_debug_turns_the_trace_on_and_a_bad_level_is_a_warning() {
        assert_eq!(read(&[("TRIAGE_LOG", "DEBUG")]).debug, Some(true));
        assert_eq!(read(&[("TRIAGE_LOG", "info")]).debug, Some(false));
        assert_eq!(read(&[("TRIAGE_LOG", "")]).debug, None);
        let e = read(&[("TRIAGE_LOG", "loud")]);
        assert_eq!(e.debug, None);
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert!(e.warnings[0].starts_with("TRIAGE_LOG=`loud` is not a log level"));
    }

    #[test]
    fn good_values_parse() {
        let e = read(&[
            ("TRIAGE_NOW", "1767323045"),
            ("TRIAGE_LOCK_TIMEOUT", "250ms"),
            ("TRIAGE_MAX_INPUT", "1024"),
            ("TRIAGE_SEED", "7"),
        ]);
        assert_eq!(e.now, parse_now("2026-01-02T03:04:05Z"));
        assert_eq!(e.lock_timeout, Some(Duration::from_millis(250)));
        assert_eq!((e.max_input, e.seed), (Some(1024), Some(7)));
        assert!(e.warnings.is_empty());
    }

    #[test]
    fn now_accepts_rfc3339_and_unix_seconds() {
        let a = parse_now("2026-01-02T03:04:05Z").expect("rfc3339");
        let b = parse_now("1767323045").expect("unix");
        assert_eq!(a, b);
        assert_eq!(
            parse_now("1767323045.5").map(|t| t.timestamp_millis()),
            Some(1_767_323_045_500)
        );
        assert!(parse_now("soon").is_none());
        assert!(parse_now("NaN").is_none());
    }
}
