//! JSON read leniently where senders are known to be sloppy.
//!
//! Lone UTF-16 surrogates (`"\ud83d"`) are what Node's `JSON.stringify` emits when a string
//! is cut inside an emoji; strict JSON parsers (serde_json among them) reject the whole
//! document for one. [`Lenient`] rewrites each lone surrogate escape to `\ufffd` on the fly,
//! so a Claude Code payload with a truncated emoji is still read (issue 14).

use serde::Deserialize;
use serde_json::Value;
use std::io::{self, Read};

/// A reader that replaces lone UTF-16 surrogate escapes inside JSON strings with `\ufffd`.
/// Everything else passes through byte for byte, so its errors are serde_json's own.
pub struct Lenient<R> {
    inner: R,
    raw: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
    in_string: bool,
    eof: bool,
}

impl<R: Read> Lenient<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Lenient<R> {
        Lenient {
            inner,
            raw: Vec::new(),
            out: Vec::new(),
            out_pos: 0,
            in_string: false,
            eof: false,
        }
    }

    /// Moves what can be decided from `raw` to `out`; returns how many raw bytes were used.
    /// Stops early when an escape needs bytes that have not arrived yet.
    fn process(&mut self) -> usize {
        let raw = &self.raw;
        let mut i = 0;
        while i < raw.len() {
            let b = raw[i];
            if !self.in_string {
                self.in_string = b == b'"';
                self.out.push(b);
                i += 1;
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = false;
                    self.out.push(b);
                    i += 1;
                }
                b'\\' => match escape_at(&raw[i..], self.eof) {
                    Escape::NeedMore => break,
                    Escape::Keep(n) => {
                        self.out.extend_from_slice(&raw[i..i + n]);
                        i += n;
                    }
                    Escape::LoneSurrogate => {
                        self.out.extend_from_slice(b"\\ufffd");
                        i += 6;
                    }
                },
                _ => {
                    self.out.push(b);
                    i += 1;
                }
            }
        }
        i
    }
}

enum Escape {
    /// Not enough bytes yet to decide.
    NeedMore,
    /// Pass this many bytes through unchanged.
    Keep(usize),
    /// A `\uXXXX` (6 bytes) that is half a surrogate pair without its other half.
    LoneSurrogate,
}

fn hex4(b: &[u8]) -> Option<u16> {
    let s = std::str::from_utf8(b.get(..4)?).ok()?;
    u16::from_str_radix(s, 16).ok()
}

/// Classifies the escape at the start of `s` (which starts with `\`).
fn escape_at(s: &[u8], eof: bool) -> Escape {
    let short = |need: usize| s.len() < need && !eof;
    if short(2) {
        return Escape::NeedMore;
    }
    if s.get(1) != Some(&b'u') {
        return Escape::Keep(s.len().min(2));
    }
    if short(6) {
        return Escape::NeedMore;
    }
    let Some(unit) = hex4(&s[2..]) else {
        // Malformed: let serde_json say so.
        return Escape::Keep(s.len().min(2));
    };
    match unit {
        0xD800..=0xDBFF => {
            // A high surrogate must be followed by `\u` and a low one.
            if short(12) {
                return Escape::NeedMore;
            }
            let paired = s.get(6..8) == Some(b"\\u")
                && s.get(8..)
                    .and_then(hex4)
                    .is_some_and(|u| (0xDC00..=0xDFFF).contains(&u));
            if paired {
                Escape::Keep(12)
            } else {
                Escape::LoneSurrogate
            }
        }
        0xDC00..=0xDFFF => Escape::LoneSurrogate,
        _ => Escape::Keep(6),
    }
}

impl<R: Read> Read for Lenient<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.out_pos < self.out.len() {
                let n = buf.len().min(self.out.len() - self.out_pos);
                buf[..n].copy_from_slice(&self.out[self.out_pos..self.out_pos + n]);
                self.out_pos += n;
                return Ok(n);
            }
            self.out.clear();
            self.out_pos = 0;
            if !self.raw.is_empty() {
                let used = self.process();
                self.raw.drain(..used);
                if !self.out.is_empty() {
                    continue;
                }
            }
            if self.eof {
                // Whatever is left could not be decided: pass it on as it is.
                if self.raw.is_empty() {
                    return Ok(0);
                }
                self.out.append(&mut self.raw);
                continue;
            }
            let mut chunk = [0u8; 8192];
            match self.inner.read(&mut chunk) {
                Ok(0) => self.eof = true,
                Ok(n) => self.raw.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The first JSON value in `bytes` (what follows it is not looked at), leniently.
pub fn parse_first(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let strict = Value::deserialize(&mut serde_json::Deserializer::from_slice(bytes));
    if strict.is_ok() || !has_surrogate_escape(bytes) {
        return strict;
    }
    Value::deserialize(&mut serde_json::Deserializer::from_reader(Lenient::new(
        bytes,
    )))
}

/// Parses a whole buffer as one JSON value, leniently (see [`Lenient`]); trailing
/// characters other than whitespace are an error.
pub fn parse_json(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    // The strict parser over a slice is several times faster; the lenient reader is only
    // needed when there is a surrogate escape to mend.
    let strict = serde_json::from_slice(bytes);
    if strict.is_ok() || !has_surrogate_escape(bytes) {
        return strict;
    }
    let mut de = serde_json::Deserializer::from_reader(Lenient::new(bytes));
    let v = Value::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// True when `bytes` hold a `\uD...` escape (upper or lower case), the only kind a lone
/// surrogate can be written as.
fn has_surrogate_escape(bytes: &[u8]) -> bool {
    memchr::memmem::find_iter(bytes, b"\\u").any(|i| matches!(bytes.get(i + 2), Some(b'd' | b'D')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lone_surrogates_become_the_replacement_character() {
        let v = parse_json(br#"{"a": "x\ud83d", "b": "\udc00y", "c": "\ud83d\ude00"}"#)
            .expect("lenient");
        assert_eq!(v, json!({"a": "x\u{FFFD}", "b": "\u{FFFD}y", "c": "😀"}));
        let v = parse_json(br#"["\ud83d\u0041", "\\ud83d", "\uD83D"]"#).expect("lenient");
        assert_eq!(v, json!(["\u{FFFD}A", "\\ud83d", "\u{FFFD}"]));
        // Outside strings nothing is touched, and errors stay serde_json's.
        assert!(parse_json(br#"{"a": "\uZZZZ"}"#).is_err());
        assert!(parse_json(b"{\"a\": 1} x").is_err());
    }

    /// One byte per read, then the end.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.0.split_first() {
                Some((b, rest)) if !buf.is_empty() => {
                    buf[0] = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn lenient_reading_is_the_same_whatever_the_chunking() {
        let text = br#"{"k": "a\ud83d\ude00b\ud83d", "n": [1, 2.5, "\u00e9"], "e": "\udc00"}"#;
        let mut out = Vec::new();
        let mut r = Lenient::new(Trickle(text));
        let mut buf = [0u8; 3];
        loop {
            let n = r.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        let mut whole = Vec::new();
        Lenient::new(&text[..])
            .read_to_end(&mut whole)
            .expect("read");
        assert_eq!(out, whole);
        assert_eq!(
            parse_json(&out).expect("parse"),
            json!({"k": "a😀b\u{FFFD}", "n": [1, 2.5, "é"], "e": "\u{FFFD}"})
        );
    }
}
