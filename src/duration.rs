//! Durations as the SPEC writes them everywhere: `500ms`, `30s`, `2m`, `1h30m`, `30d`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A duration read from a flag or the policy file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub Duration);

const UNITS: &[(&str, u64)] = &[
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

impl Dur {
    /// From whole seconds.
    pub fn secs(s: u64) -> Dur {
        Dur(Duration::from_secs(s))
    }

    /// Whole milliseconds.
    pub fn as_millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }

    /// Seconds as a float, for JSON output such as `delay_s`.
    pub fn as_secs_f64(self) -> f64 {
        self.0.as_secs_f64()
    }
}

impl FromStr for Dur {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let s = text.trim();
        let bad = || {
            format!("bad duration `{text}`: write a number and a unit, like 500ms, 30s, 2m, 1h30m or 7d")
        };
        if s.is_empty() {
            return Err(bad());
        }
        let mut total: u64 = 0;
        let mut rest = s;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits == 0 {
                return Err(bad());
            }
            let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
            rest = &rest[digits..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len());
            let unit = &rest[..unit_len];
            let (_, ms) = UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(bad)?;
            total = n
                .checked_mul(*ms)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(|| format!("duration `{text}` is too long"))?;
            rest = &rest[unit_len..];
        }
        Ok(Dur(Duration::from_millis(total)))
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

/// A duration for people, rounded to two units at most: `450ms`, `1.2s`, `45s`, `1m30s`,
/// `1h`, `2h15m`, `3d4h` (`--text` output; flags and the policy use [`Dur`]'s exact form).
pub fn human(ms: u64) -> String {
    let two = |big: u64, big_unit: &str, small: u64, small_unit: &str| match small {
        0 => format!("{big}{big_unit}"),
        _ => format!("{big}{big_unit}{small}{small_unit}"),
    };
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=9_949 => {
            let tenths = (ms + 50) / 100;
            match tenths % 10 {
                0 => format!("{}s", tenths / 10),
                t => format!("{}.{t}s", tenths / 10),
            }
        }
        9_950..=59_499 => format!("{}s", (ms + 500) / 1000),
        59_500..=3_599_499 => {
            let s = (ms + 500) / 1000;
            two(s / 60, "m", s % 60, "s")
        }
        3_599_500..=86_369_999 => {
            let m = (ms + 30_000) / 60_000;
            two(m / 60, "h", m % 60, "m")
        }
        _ => {
            let h = (ms + 1_800_000) / 3_600_000;
            two(h / 24, "d", h % 24, "h")
        }
    }
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
        assert_eq!(ms("30d"), 2_592_000_000);
        assert_eq!(ms(" 1m30s "), 90_000);
    }

    #[test]
    fn rejects_what_is_not_a_duration() {
        for bad in [
            "",
            "60",
            "s",
            "1x",
            "1.5s",
            "-1s",
            "1s2",
            "99999999999999999999d",
        ] {
            assert!(bad.parse::<Dur>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn displays_canonically() {
        assert_eq!(Dur::secs(90).to_string(), "1m30s");
        assert_eq!(Dur(Duration::from_millis(1500)).to_string(), "1s500ms");
        assert_eq!(Dur::secs(0).to_string(), "0s");
    }

    #[test]
    fn human_durations_round_to_two_units() {
        for (ms, want) in [
            (0, "0ms"),
            (450, "450ms"),
            (1_234, "1.2s"),
            (2_000, "2s"),
            (45_000, "45s"),
            (59_999, "1m"),
            (90_500, "1m31s"),
            (3_600_000, "1h"),
            (8_100_000, "2h15m"),
            (86_400_000, "1d"),
            (273_600_000, "3d4h"),
        ] {
            assert_eq!(human(ms), want, "{ms}");
        }
    }
}
