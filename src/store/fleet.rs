//! The fleet backend: breakers, the error log and its counters kept in Redis (or Valkey), so
//! that every host running agents against the same upstreams sees the same open breaker and
//! the same counts (issue 20). The file store stays the default; this is chosen by
//! `TRIAGE_STORE=redis://...` or `[store] url`.
//!
//! What it guarantees, and how:
//!
//! - **One connection per process, bounded in time.** Connecting and every command have a
//!   timeout of tens of milliseconds ([`Config`]); a server that accepts and never answers
//!   costs one timeout, never a hang. Every failure is a [`RemoteError`] the caller turns into
//!   a fallback to the local files.
//! - **Breakers atomic across hosts, the Rust machine the only source of truth.** A breaker
//!   is loaded with the server's clock by one script, the pure machine in [`crate::core::breaker`]
//!   is applied in Rust with that time as `now`, and a second script stores the result only if
//!   the breaker's version is still the one loaded (compare-and-set), appending its
//!   transitions to the events stream in the same step. A conflict hands back the current
//!   state and the loop applies the machine again. So a transition happens exactly once and a
//!   half-open probe is granted once, as the file lock makes it on one host, without a lock
//!   that a stopped host could leave behind, and without a second copy of the machine in Lua.
//!   Leases expire by the server's clock, since `now` is the server's `TIME`.
//! - **The log as a stream, its counters in the same script.** [`log`] appends with `XADD`
//!   (trimmed by `MAXLEN ~`) and applies the counter changes the caller computed in the same
//!   script; a nonce per record makes a repeated append (a reply lost to a timeout, a record
//!   pushed again by `store sync`) a no-op. Readers page through `XRANGE`, so memory stays
//!   flat whatever the log's length.
//!
//! Keys are `triage:{NAMESPACE}:...`; the braces make every key of a project one Redis Cluster
//! hash slot, so the multi-key scripts are valid there too.

pub mod admission;
pub mod breaker;
pub mod log;
pub mod select;
pub mod target;

use redis::{Connection, RedisError};
use std::fmt;
use std::time::{Duration, Instant};

pub use target::Target;

/// How long a record's nonce is remembered, so a record pushed again (by `store sync`, after
/// a reply lost to a timeout) is not added twice: a week of outage.
pub const NONCE_TTL_S: u64 = 7 * 24 * 3600;

/// The breaker events stream's cap.
pub const EVENTS_MAX_LEN: u64 = 100_000;

/// How to reach the fleet's Redis.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where: `redis://[user:password@]host[:port][/db]` or `rediss://...`.
    pub target: Target,
    /// The project's key prefix (`[store] namespace`, default the project folder's name).
    pub namespace: String,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long one command may take.
    pub command_timeout: Duration,
    /// The error log stream's cap.
    pub log_max_len: u64,
}

/// Why a call to Redis did not happen: the caller falls back to the local files.
#[derive(Debug)]
pub struct RemoteError {
    what: String,
}

impl RemoteError {
    fn new(what: impl Into<String>) -> RemoteError {
        RemoteError { what: what.into() }
    }

    /// A failure of `doing` against `target`.
    pub fn from_redis(doing: &str, target: &Target, e: &RedisError) -> RemoteError {
        let why = if e.is_timeout() {
            "no answer in time".to_string()
        } else if e.is_connection_refusal() {
            "connection refused".to_string()
        } else {
            e.to_string()
        };
        RemoteError::new(format!("redis {target}: {doing}: {why}"))
    }

    /// The server's answer was not what the scripts return (another program's keys under
    /// our prefix, a proxy that mangles replies).
    pub fn protocol(target: &Target, what: impl fmt::Display) -> RemoteError {
        RemoteError::new(format!("redis {target}: unexpected reply: {what}"))
    }
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl std::error::Error for RemoteError {}

/// One connection to the fleet's Redis, with the project's key prefix.
pub struct Remote {
    con: Connection,
    config: Config,
    prefix: String,
}

impl fmt::Debug for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote")
            .field("target", &self.config.target)
            .field("namespace", &self.config.namespace)
            .finish()
    }
}

impl Remote {
    /// Connects (within the connect timeout) and sets the command timeout.
    pub fn connect(config: &Config) -> Result<Remote, RemoteError> {
        let target = &config.target;
        let client = redis::Client::open(target.connection_info())
            .map_err(|e| RemoteError::from_redis("cannot use the address", target, &e))?;
        let con = client
            .get_connection_with_timeout(config.connect_timeout.max(Duration::from_millis(1)))
            .map_err(|e| RemoteError::from_redis("cannot connect", target, &e))?;
        let timeout = Some(config.command_timeout.max(Duration::from_millis(1)));
        con.set_read_timeout(timeout)
            .and_then(|()| con.set_write_timeout(timeout))
            .map_err(|e| RemoteError::from_redis("cannot set timeouts", target, &e))?;
        Ok(Remote {
            con,
            prefix: format!("triage:{{{}}}:", escape_namespace(&config.namespace)),
            config: config.clone(),
        })
    }

    /// A key of this project: `triage:{NAMESPACE}:rest`.
    pub fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    /// The connection, for one command.
    fn con(&mut self) -> &mut Connection {
        &mut self.con
    }

    /// Runs one command, its failure named by `doing`.
    fn query<T: redis::FromRedisValue>(
        &mut self,
        doing: &str,
        cmd: &redis::Cmd,
    ) -> Result<T, RemoteError> {
        let r = cmd.query(&mut self.con);
        r.map_err(|e| RemoteError::from_redis(doing, &self.config.target, &e))
    }

    /// Runs one script (EVALSHA, loading it on NOSCRIPT).
    fn invoke<T: redis::FromRedisValue>(
        &mut self,
        doing: &str,
        call: &redis::ScriptInvocation<'_>,
    ) -> Result<T, RemoteError> {
        let r = call.invoke(&mut self.con);
        r.map_err(|e| RemoteError::from_redis(doing, &self.config.target, &e))
    }

    /// One round trip: how long a `PING` takes.
    pub fn ping(&mut self) -> Result<Duration, RemoteError> {
        let start = Instant::now();
        let _: String = self.query("PING", &redis::cmd("PING"))?;
        Ok(start.elapsed())
    }

    /// The server's clock, in Unix milliseconds.
    pub fn time_ms(&mut self) -> Result<i64, RemoteError> {
        let (s, us): (i64, i64) = self.query("TIME", &redis::cmd("TIME"))?;
        Ok(s.saturating_mul(1000).saturating_add(us / 1000))
    }

    /// What the project holds: breakers, log entries, breaker events.
    pub fn counts(&mut self) -> Result<Counts, RemoteError> {
        let mut p = redis::pipe();
        p.cmd("SCARD")
            .arg(self.key(breaker::INDEX))
            .cmd("XLEN")
            .arg(self.key(log::STREAM))
            .cmd("XLEN")
            .arg(self.key(breaker::EVENTS));
        let r: redis::RedisResult<(u64, u64, u64)> = p.query(self.con());
        let (breakers, records, events) =
            r.map_err(|e| RemoteError::from_redis("counting", &self.config.target, &e))?;
        Ok(Counts {
            breakers,
            records,
            events,
        })
    }
}

/// What a project holds in Redis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Breaker keys.
    pub breakers: u64,
    /// Entries of the error log stream (records and resolution lines).
    pub records: u64,
    /// Entries of the breaker events stream.
    pub events: u64,
}

/// A namespace as it goes between the braces of a key: letters, digits, `.`, `_` and `-` as
/// they are, every other byte as `%XX`, so no name can close the braces or mimic another.
pub fn escape_namespace(ns: &str) -> String {
    let mut out = String::with_capacity(ns.len());
    for b in ns.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A value of a script's reply as UTF-8 text (or bytes), for the parsers of the replies.
fn text(v: &redis::Value) -> Option<String> {
    match v {
        redis::Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        redis::Value::SimpleString(s) => Some(s.clone()),
        redis::Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

fn int(v: &redis::Value) -> Option<i64> {
    match v {
        redis::Value::Int(n) => Some(*n),
        other => text(other)?.parse().ok(),
    }
}

/// `store status`'s look at a Redis: the median of a few PINGs (ms), the server's clock
/// minus this host's (ms), and what it holds.
pub fn probe(c: &Config) -> Result<(f64, i64, Counts), RemoteError> {
    let mut r = Remote::connect(c)?;
    let mut rtts = Vec::new();
    for _ in 0..5 {
        rtts.push(r.ping()?.as_secs_f64() * 1000.0);
    }
    rtts.sort_by(f64::total_cmp);
    let before = chrono::Utc::now().timestamp_millis();
    let server = r.time_ms()?;
    let after = chrono::Utc::now().timestamp_millis();
    let offset = server - (before + after) / 2;
    Ok((rtts[rtts.len() / 2], offset, r.counts()?))
}

#[cfg(test)]
mod against_redis;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_never_close_the_braces() {
        assert_eq!(escape_namespace("my-project_1.0"), "my-project_1.0");
        assert_eq!(escape_namespace("a}b{c"), "a%7Db%7Bc");
        assert_eq!(escape_namespace("a:b c"), "a%3Ab%20c");
        assert_eq!(escape_namespace("é"), "%C3%A9");
        // `%` itself is escaped, so an escaped name never equals a plain one.
        assert_eq!(escape_namespace("%41"), "%2541");
    }
}
