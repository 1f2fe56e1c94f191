//! Reading untrusted input (stdin): at most a limit of bytes, never more; one JSON value parsed
//! as soon as it is complete (a hook must not wait for a writer that keeps its pipe open); a
//! pipe waited on for a bounded time in all ([`Patient`]), so a writer that sends part of a
//! value, or nothing, and keeps its end open never holds a call past its deadline. The JSON
//! is read leniently ([`crate::core::json`]).

use crate::core::json::parse_first;
use serde_json::Value;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Why input could not be read as one JSON value.
#[derive(Debug)]
pub enum InputError {
    /// More than the limit arrived before the value was complete.
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// Reading failed.
    Io(io::Error),
    /// Not JSON (serde_json's words), and whether the bytes were valid UTF-8.
    Syntax(String),
    /// The writer kept the pipe open and sent no end (nor, for one JSON value, its end)
    /// within the time it was given.
    TimedOut {
        /// How long the reader waited in all.
        waited: Duration,
        /// What had arrived.
        got: Vec<u8>,
    },
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InputError::TooLarge { limit } => write!(f, "more than the limit of {limit} bytes"),
            InputError::Io(e) => write!(f, "{e}"),
            InputError::Syntax(why) => write!(f, "not valid JSON: {why}"),
            InputError::TimedOut { waited, got } => write!(
                f,
                "{} bytes and no end within {}",
                got.len(),
                crate::core::duration::Dur(*waited)
            ),
        }
    }
}

/// The error a [`Patient`] reader returns when its time is up (kind `TimedOut`, and this
/// inside, so a socket's own `ETIMEDOUT` is not taken for it).
#[derive(Debug)]
pub struct OutOfPatience {
    /// How long the reader waited in all.
    pub waited: Duration,
}

impl std::fmt::Display for OutOfPatience {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no input within {}",
            crate::core::duration::Dur(self.waited)
        )
    }
}

impl std::error::Error for OutOfPatience {}

/// How long [`OutOfPatience`] says was waited, when `e` is one.
fn out_of_patience(e: &io::Error) -> Option<Duration> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<OutOfPatience>())
        .map(|p| p.waited)
}

/// A reader of a file descriptor (stdin) that waits for its writer a bounded time in all: the
/// time spent blocked waiting for bytes is added up over every read, and a read that would
/// take it past the limit fails with [`OutOfPatience`] instead. Only the waits count: the
/// reader's own work between reads (parsing a large payload in a debug build) does not, so
/// a writer that sends at pipe speed never runs out.
///
/// Only a pipe or a socket is waited on with `poll(2)`; a regular file, `/dev/null` or any
/// other descriptor is read directly (they never block on a writer), at no extra cost. The
/// limit is asked for (`patience`, which may load the policy) only the first time a read
/// would block, so a writer that has already sent everything costs nothing more.
pub struct Patient<F: AsFd, P: FnOnce() -> Duration> {
    fd: F,
    /// Whether the descriptor is a pipe or a socket, i.e. whether a read can wait on a writer.
    pollable: bool,
    patience: Option<P>,
    /// The limit, once asked for.
    limit: Option<Duration>,
    waited: Duration,
}

impl<F: AsFd, P: FnOnce() -> Duration> Patient<F, P> {
    /// Reads `fd`, waiting at most what `patience` returns for bytes, in all.
    pub fn new(fd: F, patience: P) -> Patient<F, P> {
        let pollable = rustix::fs::fstat(&fd).is_ok_and(|st| {
            matches!(
                rustix::fs::FileType::from_raw_mode(st.st_mode),
                rustix::fs::FileType::Fifo | rustix::fs::FileType::Socket
            )
        });
        Patient {
            fd,
            pollable,
            patience: Some(patience),
            limit: None,
            waited: Duration::ZERO,
        }
    }

    /// Waits until the descriptor is readable (bytes, the end, or an error to report); `Err`
    /// when the time is up. A failing `poll` is an I/O error (a read could block).
    fn wait(&mut self) -> io::Result<()> {
        loop {
            let left = match self.limit {
                Some(limit) => limit.saturating_sub(self.waited),
                // Not asked yet: a look without waiting first, then the limit.
                None => Duration::ZERO,
            };
            // An hour at most per call (a macOS `poll` takes an `int` of milliseconds); a
            // longer limit is waited for in turns.
            let turn = left.min(Duration::from_secs(3600));
            let timeout = rustix::event::Timespec::try_from(turn).unwrap_or_default();
            let mut fds = [rustix::event::PollFd::new(
                &self.fd,
                rustix::event::PollFlags::IN,
            )];
            let started = Instant::now();
            let ready = rustix::event::poll(&mut fds, Some(&timeout));
            self.waited = self.waited.saturating_add(started.elapsed());
            match ready {
                Ok(0) => {}
                Ok(_) => return Ok(()),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            match (self.limit, self.patience.take()) {
                (None, Some(patience)) => self.limit = Some(patience()),
                (None, None) => self.limit = Some(Duration::ZERO),
                (Some(limit), _) if self.waited < limit => {}
                (Some(_), _) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        OutOfPatience {
                            waited: self.waited,
                        },
                    ))
                }
            }
        }
    }
}

impl<F: AsFd, P: FnOnce() -> Duration> Read for Patient<F, P> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.pollable {
            self.wait()?;
        }
        match rustix::io::read(&self.fd, buf) {
            // A closed stdin (`<&-`) reads as empty, as the standard library's own does.
            Err(rustix::io::Errno::BADF) => Ok(0),
            r => r.map_err(io::Error::from),
        }
    }
}

/// Reads one JSON value from `input` and returns as soon as it is complete, without waiting
/// for the end of the input: `None` when the input held only whitespace. At most `limit`
/// bytes are read; a value not complete by then is [`InputError::TooLarge`].
///
/// The bytes are read as they come and parsed from the buffer (serde_json over a slice is
/// several times faster than over a reader, which goes byte by byte): a parse is tried when
/// the top-level value looks complete ([`Shape`]), at the end of the input, and whenever the
/// buffer has grown by an eighth since the last try, so bad JSON is refused as soon as it has
/// arrived and a writer that trickles bytes costs a bounded number of parses.
pub fn read_one_json(mut input: impl Read, limit: usize) -> Result<Option<Value>, InputError> {
    let mut buf: Vec<u8> = Vec::new();
    let mut shape = Shape::default();
    let mut tried = 0usize;
    let mut eof = false;
    loop {
        // Room for what has come so far again, from 8 KiB to 64 KiB: a hook's payload of a
        // kilobyte or two is not read into 64 KiB of zeroed memory (16 pages to fault in).
        let room = (limit + 1)
            .saturating_sub(buf.len())
            .min(buf.len().clamp(1 << 13, 1 << 16));
        let at = buf.len();
        buf.resize(at + room, 0);
        match input.read(&mut buf[at..]) {
            Ok(0) => {
                buf.truncate(at);
                eof = true;
            }
            Ok(n) => buf.truncate(at + n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                buf.truncate(at);
                continue;
            }
            Err(e) => {
                buf.truncate(at);
                return Err(match out_of_patience(&e) {
                    Some(waited) => InputError::TimedOut { waited, got: buf },
                    None => InputError::Io(e),
                });
            }
        }
        shape.scan(&buf);
        let over = buf.len() > limit;
        let due = shape.end.is_some()
            || shape.scalar
            || eof
            || over
            || buf.len() - tried >= (tried / 8).max(1);
        if !due {
            continue;
        }
        tried = buf.len();
        let upto = shape.end.unwrap_or(buf.len()).min(limit);
        match parse_first(&buf[..upto]) {
            // A number at the very end of what arrived may have more digits coming.
            Ok(v) if shape.end.is_none() && !eof && !over && v.is_number() => {}
            Ok(v) => return Ok(Some(v)),
            Err(e) if !e.is_eof() => return Err(InputError::Syntax(e.to_string())),
            Err(_) if over => return Err(InputError::TooLarge { limit }),
            Err(e) if eof => {
                return if buf.iter().all(u8::is_ascii_whitespace) {
                    Ok(None)
                } else {
                    Err(InputError::Syntax(e.to_string()))
                };
            }
            Err(_) => {}
        }
    }
}

/// Where the top-level JSON value in a growing buffer ends, as far as its brackets and
/// quotes tell (a cheap scan that decides when a parse is worth trying; the parse decides
/// what the value is).
#[derive(Default)]
struct Shape {
    /// Bytes scanned so far.
    pos: usize,
    /// The first byte of the value has been seen.
    started: bool,
    /// It is not an object, array or string: its end is a delimiter, so every read is tried.
    scalar: bool,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// One past the value's last byte, once known.
    end: Option<usize>,
}

impl Shape {
    fn scan(&mut self, buf: &[u8]) {
        while self.end.is_none() && !self.scalar {
            let Some(&b) = buf.get(self.pos) else {
                return;
            };
            self.pos += 1;
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    if self.depth == 0 {
                        self.end = Some(self.pos);
                    }
                }
                continue;
            }
            match b {
                b' ' | b'\t' | b'\n' | b'\r' if !self.started => continue,
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' if self.depth > 0 => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.end = Some(self.pos);
                    }
                }
                _ if !self.started => self.scalar = true,
                _ => {}
            }
            self.started = true;
        }
    }
}

/// Reads at most `limit` bytes of `input`: `Ok(bytes)`, or `TooLarge` as soon as one more
/// arrives. Never reads (or waits for) anything past the limit.
/// A reader that runs out of patience ([`Patient`]) is [`InputError::TimedOut`] with what had
/// arrived.
pub fn read_bounded(input: impl Read, limit: usize) -> Result<Vec<u8>, InputError> {
    let mut bytes = Vec::new();
    // `read_to_end` keeps what it read before an error.
    if let Err(e) = input.take(limit as u64 + 1).read_to_end(&mut bytes) {
        return Err(match out_of_patience(&e) {
            Some(waited) if bytes.len() <= limit => InputError::TimedOut { waited, got: bytes },
            Some(_) => InputError::TooLarge { limit },
            None => InputError::Io(e),
        });
    }
    if bytes.len() > limit {
        return Err(InputError::TooLarge { limit });
    }
    Ok(bytes)
}

/// The one JSON value in what arrived before a writer's time ran out, read as if that were
/// the end (a number at the end is taken as it is): `Ok(None)` for whitespace only.
pub fn value_so_far(bytes: &[u8]) -> Result<Option<Value>, InputError> {
    read_one_json(bytes, bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::json::{parse_json, Lenient};
    use crate::hostile_input::hostile_text;
    use serde::Deserialize;
    use serde_json::json;

    /// A reader that hands out one byte per call and then fails, as a pipe would block: a
    /// test that a parse stops where the value ends.
    struct ThenFail<'a>(&'a [u8]);

    impl Read for ThenFail<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.0.split_first() {
                Some((b, rest)) if !buf.is_empty() => {
                    buf[0] = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Err(io::Error::other("read past the value")),
            }
        }
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
    fn one_value_is_taken_without_reading_further() {
        // The reader fails on any read past the object: a complete value must not need one.
        let v = read_one_json(ThenFail(br#"  {"hook_event_name": "Stop"}"#), 1000).expect("one");
        assert_eq!(v, Some(json!({"hook_event_name": "Stop"})));
    }

    #[test]
    fn empty_input_is_none_and_garbage_is_an_error_at_once() {
        assert!(matches!(read_one_json(&b" \n\t"[..], 100), Ok(None)));
        assert!(matches!(read_one_json(&b""[..], 100), Ok(None)));
        // `yes` sends "y\n" forever: the first byte decides.
        assert!(matches!(
            read_one_json(ThenFail(b"y\ny\n"), 100),
            Err(InputError::Syntax(_))
        ));
        assert!(matches!(
            read_one_json(&b"{\"a\":"[..], 100),
            Err(InputError::Syntax(_))
        ));
    }

    #[test]
    fn input_past_the_limit_is_refused_without_reading_it_all() {
        let endless = io::repeat(b' ');
        assert!(matches!(
            read_one_json(endless, 1 << 16),
            Err(InputError::TooLarge { limit: 65536 })
        ));
        let long = format!("[\"{}\"]", "x".repeat(1000));
        assert!(matches!(
            read_one_json(long.as_bytes(), 100),
            Err(InputError::TooLarge { .. })
        ));
        assert!(matches!(
            read_bounded(io::repeat(b'y'), 1000),
            Err(InputError::TooLarge { limit: 1000 })
        ));
        assert_eq!(read_bounded(&b"abc"[..], 3).expect("fits"), b"abc");
    }

    /// Hands out the input in the given chunk sizes (cycling), then the end.
    struct Chunks<'a>(&'a [u8], Vec<usize>, usize);

    impl Read for Chunks<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let want = self.1[self.2 % self.1.len()].max(1);
            self.2 += 1;
            let n = want.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// What serde_json's reader gives (the way stdin was read before): the first value.
    fn by_reader(bytes: &[u8]) -> Result<Option<Value>, String> {
        let mut de = serde_json::Deserializer::from_reader(Lenient::new(bytes));
        match Value::deserialize(&mut de) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_eof() && bytes.iter().all(u8::is_ascii_whitespace) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn garbage_after_whitespace_and_partial_numbers_are_read_as_before() {
        assert!(matches!(
            read_one_json(ThenFail(b"  \n y\ny\n"), 100),
            Err(InputError::Syntax(_))
        ));
        // A number cut by the reads is not taken before its last digit.
        let v = read_one_json(Trickle(b"12345 "), 100).expect("number");
        assert_eq!(v, Some(json!(12345)));
        let v = read_one_json(&b"{\"a\": 1} trailing junk"[..], 100).expect("first value");
        assert_eq!(v, Some(json!({"a": 1})));
    }

    proptest::proptest! {
        #[test]
        fn stdin_reads_as_serde_jsons_reader_did(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "{", "}", "[", "]", "\"", "\\", "\\\"", ":", ",", " ", "\n", "1", "-2.5e3",
                "true", "null", "\"key\"", "\\ud83d", "\\u00e9", "é", "x", "{}", "[]",
            ]), 0..20),
            chunks in proptest::collection::vec(1usize..9, 1..4),
        ) {
            let text = parts.concat();
            let ours = read_one_json(Chunks(text.as_bytes(), chunks, 0), 1 << 20)
                .map_err(|e| e.to_string());
            let theirs = by_reader(text.as_bytes())
                .map_err(|e| format!("not valid JSON: {e}"));
            proptest::prop_assert_eq!(ours, theirs, "{:?}", text);
        }
    }

    /// A socket pair: the writer's end (held open by the caller) and a reader of the other end
    /// that may wait `patience` in all, counting how often the patience was asked for.
    fn open_pipe<'a>(
        first: &[u8],
        patience: Duration,
        asked: &'a std::cell::Cell<u32>,
    ) -> (
        std::os::unix::net::UnixStream,
        Patient<std::os::unix::net::UnixStream, impl FnOnce() -> Duration + 'a>,
    ) {
        use std::io::Write;
        let (mut writer, reader) = std::os::unix::net::UnixStream::pair().expect("pair");
        writer.write_all(first).expect("write");
        let reader = Patient::new(reader, move || {
            asked.set(asked.get() + 1);
            patience
        });
        (writer, reader)
    }

    #[test]
    fn a_silent_writer_is_waited_for_only_as_long_as_the_patience() {
        let asked = std::cell::Cell::new(0);
        let (_writer, reader) = open_pipe(
            br#"{"hook_event_name": "Pre"#,
            Duration::from_millis(50),
            &asked,
        );
        let started = Instant::now();
        let read = read_one_json(reader, 1 << 20);
        assert!(
            matches!(&read, Err(InputError::TimedOut { waited, got })
                if got == br#"{"hook_event_name": "Pre"# && *waited >= Duration::from_millis(50)),
            "{read:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(asked.get(), 1, "the patience is asked for once");

        let asked = std::cell::Cell::new(0);
        let (_writer, reader) = open_pipe(b"", Duration::from_millis(20), &asked);
        assert!(matches!(
            read_bounded(reader, 100),
            Err(InputError::TimedOut { got, .. }) if got.is_empty()
        ));
        let (_writer, reader) = open_pipe(b"connection reset", Duration::ZERO, &asked);
        assert!(matches!(
            read_bounded(reader, 100),
            Err(InputError::TimedOut { got, .. }) if got == b"connection reset"
        ));
    }

    #[test]
    fn a_complete_value_or_a_closed_pipe_never_asks_for_patience() {
        let asked = std::cell::Cell::new(0);
        let (_writer, reader) = open_pipe(br#"{"a": [1, 2]} "#, Duration::from_secs(3600), &asked);
        let v = read_one_json(reader, 1000).expect("complete");
        assert_eq!(v, Some(json!({"a": [1, 2]})));
        let (writer, reader) = open_pipe(b"some text", Duration::from_secs(3600), &asked);
        drop(writer);
        assert_eq!(read_bounded(reader, 100).expect("to the end"), b"some text");
        assert_eq!(asked.get(), 0);
        // A regular file is read directly, never polled.
        let mut f = tempfile::tempfile().expect("file");
        std::io::Write::write_all(&mut f, b"[1]").expect("write");
        std::io::Seek::rewind(&mut f).expect("rewind");
        let r = Patient::new(f, || {
            asked.set(asked.get() + 1);
            Duration::ZERO
        });
        assert!(!r.pollable);
        assert_eq!(read_bounded(r, 100).expect("file"), b"[1]");
        assert_eq!(asked.get(), 0, "a file is never waited on");
    }

    #[test]
    fn what_arrived_before_the_time_ran_out_is_read_as_if_it_ended() {
        assert_eq!(value_so_far(b"12345").expect("number"), Some(json!(12345)));
        assert_eq!(value_so_far(b" \n").expect("blank"), None);
        assert_eq!(value_so_far(b"").expect("nothing"), None);
        assert!(matches!(
            value_so_far(br#"{"a": "#),
            Err(InputError::Syntax(_))
        ));
    }

    #[test]
    fn nesting_stays_within_serde_jsons_limit() {
        let deep = "[".repeat(100_000);
        assert!(matches!(
            read_one_json(deep.as_bytes(), 1 << 20),
            Err(InputError::Syntax(_))
        ));
        assert!(parse_json(deep.as_bytes()).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn stdin_json_never_panics_and_one_value_is_read(text in hostile_text()) {
            let _ = parse_json(text.as_bytes());
            let _ = read_one_json(text.as_bytes(), 1 << 12);
        }
    }
}
