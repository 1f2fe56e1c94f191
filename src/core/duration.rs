//! Durations, the one parser and the one formatter of the whole program (flags, the policy,
//! the environment, every message and table).
//!
//! Parsing is `humantime`'s: the SPEC's forms (`500ms`, `30s`, `2m`, `1h30m`, `7d`) and the
//! spelled-out ones (`1h 30m`, `2min`, `1 day`, `1.5s`). Anything longer than [`MAX`] is
//! refused there, so no caller can overflow the clock's arithmetic with `200000000d`.
//! Formatting is compact and always parses back: `1h30m`, `1s500ms`, `7d`.

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A duration read from a flag or the policy file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub Duration);

/// The longest duration any flag, policy key or variable accepts: 100 years. Far beyond any
/// cooldown or report window, and far inside what dates can be moved by.
pub const MAX: Duration = Duration::from_secs(MAX_DAYS * 86_400);

const MAX_DAYS: u64 = 36_500;

const UNITS: &[(&str, u64)] = &[
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// Why a text is not a duration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DurError {
    /// Not a number and a unit.
    Malformed(String),
    /// Longer than [`MAX`].
    TooLong(String),
}

impl fmt::Display for DurError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurError::Malformed(t) => write!(
                f,
                "bad duration `{t}`: write a number and a unit, like 500ms, 30s, 2m, 1h30m or 7d"
            ),
            DurError::TooLong(t) => write!(
                f,
                "duration `{t}` is too long: the maximum is {MAX_DAYS}d (100 years)"
            ),
        }
    }
}

impl std::error::Error for DurError {}

impl Dur {
    /// From whole seconds.
    pub fn secs(s: u64) -> Dur {
        Dur(Duration::from_secs(s))
    }

    /// From milliseconds.
    pub fn millis(ms: u64) -> Dur {
        Dur(Duration::from_millis(ms))
    }

    /// Whole milliseconds.
    pub fn as_millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }

    /// Seconds as a float, for JSON output such as `delay_s`.
    pub fn as_secs_f64(self) -> f64 {
        self.0.as_secs_f64()
    }

    /// Parses `text`, saying whether it was malformed or too long.
    pub fn parse(text: &str) -> Result<Dur, DurError> {
        let s = text.trim();
        // humantime takes a bare number as a unit-less error, but also accepts what we do not
        // want to read as a duration (an empty text); a number must come first.
        if !s.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(DurError::Malformed(text.to_string()));
        }
        match humantime::parse_duration(s) {
            Ok(d) if d > MAX => Err(DurError::TooLong(text.to_string())),
            Ok(d) => Ok(Dur(d)),
            Err(humantime::DurationError::NumberOverflow) => {
                Err(DurError::TooLong(text.to_string()))
            }
            Err(_) => Err(DurError::Malformed(text.to_string())),
        }
    }

    /// The same duration with only its two largest units, for "3h12m ago"-style text where
    /// the seconds are noise: `1h2m`, `25m`, `1s500ms`, `1d`.
    pub fn approx(self) -> Dur {
        let ms = self.as_millis();
        if ms < 1000 {
            return self;
        }
        let mut kept = 0;
        let mut rest = ms;
        let mut out = 0;
        for (_, size) in UNITS.iter().rev() {
            if rest >= *size && kept < 2 {
                out += rest / size * size;
                rest %= size;
                kept += 1;
            } else if kept > 0 {
                // A unit was skipped after the first one kept: stop there (`1d` not `1d5s`).
                kept = 2;
            }
        }
        Dur::millis(out)
    }
}

/// A duration as people say it, for the texts a model or a person reads: `40 s`, `2 min 30 s`,
/// `25 min`, `1 h 56 min`, `2 d 3 h`. Only the two largest units are kept, the smaller one
/// rounded; sub-second waits keep one decimal (`0.5 s`).
pub fn humane(d: Duration) -> String {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms < 60_000 {
        let tenths = (ms + 50) / 100;
        return if tenths % 10 == 0 || ms >= 10_000 {
            format!("{} s", (ms + 500) / 1000)
        } else {
            format!("{}.{} s", tenths / 10, tenths % 10)
        };
    }
    let s = (ms + 500) / 1000;
    let pair = |big: u64, big_unit: &str, small: u64, small_unit: &str| {
        if small == 0 {
            format!("{big} {big_unit}")
        } else {
            format!("{big} {big_unit} {small} {small_unit}")
        }
    };
    if s < 600 {
        return pair(s / 60, "min", s % 60, "s");
    }
    let m = (s + 30) / 60;
    if m < 60 {
        return format!("{m} min");
    }
    if m < 24 * 60 {
        return pair(m / 60, "h", m % 60, "min");
    }
    let h = (m + 30) / 60;
    pair(h / 24, "d", h % 24, "h")
}

/// [`humane`] of a number of seconds (a negative or non-finite one reads as `0 s`).
pub fn humane_secs(secs: f64) -> String {
    if !secs.is_finite() || secs <= 0.0 {
        return "0 s".to_string();
    }
    humane(Duration::from_secs_f64(secs.min(MAX.as_secs_f64())))
}

impl FromStr for Dur {
    type Err = DurError;
    fn from_str(text: &str) -> Result<Self, DurError> {
        Dur::parse(text)
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ms = self.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        for (unit, size) in UNITS.iter().rev() {
            if ms >= *size {
                let n = ms / size;
                ms %= size;
                write!(f, "{n}{unit}")?;
            }
        }
        Ok(())
    }
}

impl From<Duration> for Dur {
    fn from(d: Duration) -> Dur {
        Dur(d)
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Parses a time (`TRIAGE_NOW`, `--since`): RFC 3339, or Unix seconds (with a fraction if
/// wanted).
pub fn parse_now(text: &str) -> Option<DateTime<Utc>> {
    let t = text.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Some(d.with_timezone(&Utc));
    }
    let secs: f64 = t.parse().ok()?;
    if !secs.is_finite() {
        return None;
    }
    let ms = (secs * 1000.0).round() as i64;
    Utc.timestamp_millis_opt(ms).single()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> u64 {
        s.parse::<Dur>().expect(s).as_millis()
    }

    #[test]
    fn parses_the_spec_forms() {
        assert_eq!(ms("500ms"), 500);
        assert_eq!(ms("30s"), 30_000);
        assert_eq!(ms("2m"), 120_000);
        assert_eq!(ms("1h30m"), 5_400_000);
        assert_eq!(ms("7d"), 604_800_000);
        assert_eq!(ms("30d"), 2_592_000_000);
        assert_eq!(ms(" 1m30s "), 90_000);
        assert_eq!(ms("1h 30m"), 5_400_000);
        assert_eq!(ms("36500d"), MAX.as_millis() as u64);
    }

    #[test]
    fn rejects_what_is_not_a_duration() {
        for bad in ["", "60", "s", "1x", "-1s", "+1s", "1s2", "soon"] {
            assert!(
                matches!(bad.parse::<Dur>(), Err(DurError::Malformed(_))),
                "{bad:?} parsed"
            );
        }
    }

    #[test]
    fn rejects_durations_past_the_maximum_and_names_it() {
        for long in [
            "36501d",
            "200000000d",
            "100000000d",
            "99999999999999999999d",
        ] {
            let e = long.parse::<Dur>().expect_err(long);
            assert!(matches!(e, DurError::TooLong(_)), "{long}: {e:?}");
            assert!(e.to_string().contains("maximum is 36500d"), "{e}");
        }
    }

    #[test]
    fn displays_canonically_and_parses_back() {
        assert_eq!(Dur::secs(90).to_string(), "1m30s");
        assert_eq!(Dur::millis(1500).to_string(), "1s500ms");
        assert_eq!(Dur::secs(0).to_string(), "0s");
        assert_eq!(Dur::secs(3600).to_string(), "1h");
        for s in [1, 59, 61, 3599, 3601, 86_399, 86_401, 999_999] {
            let d = Dur::secs(s);
            assert_eq!(d.to_string().parse::<Dur>(), Ok(d));
        }
    }

    #[test]
    fn humane_says_durations_as_people_do() {
        let h = |s: u64| humane(Duration::from_secs(s));
        assert_eq!(h(0), "0 s");
        assert_eq!(h(40), "40 s");
        assert_eq!(h(59), "59 s");
        assert_eq!(h(60), "1 min");
        assert_eq!(h(150), "2 min 30 s");
        assert_eq!(h(1500), "25 min");
        assert_eq!(h(3599), "1 h");
        assert_eq!(h(3600), "1 h");
        assert_eq!(h(6975), "1 h 56 min");
        assert_eq!(h(32_400), "9 h");
        assert_eq!(h(86_400), "1 d");
        assert_eq!(h(183_600), "2 d 3 h");
        assert_eq!(humane(Duration::from_millis(500)), "0.5 s");
        assert_eq!(humane(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(humane_secs(-3.0), "0 s");
        assert_eq!(humane_secs(f64::NAN), "0 s");
        assert_eq!(humane_secs(1e300), "36500 d");
    }

    #[test]
    fn approx_keeps_the_two_largest_units() {
        assert_eq!(Dur::secs(3725).approx().to_string(), "1h2m");
        assert_eq!(Dur::secs(1500).approx().to_string(), "25m");
        assert_eq!(Dur::secs(360).approx().to_string(), "6m");
        assert_eq!(Dur::secs(86_405).approx().to_string(), "1d");
        assert_eq!(Dur::millis(61_500).approx().to_string(), "1m1s");
        assert_eq!(Dur::millis(300).approx().to_string(), "300ms");
        assert_eq!(Dur::millis(1500).approx().to_string(), "1s500ms");
    }
}
