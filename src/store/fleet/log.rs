//! The error log in Redis: one stream entry per line (`line` holds the JSON, as one line of
//! `logs/errors.jsonl`), the threshold counters as hashes changed by the same script that
//! appends, and a nonce per record so that pushing a record again never adds it twice.
//!
//! Counters: `open:sessions` (session → open failures) and, per scope (the workflow, else the
//! session), `open:units:<scope>` (unit → open failures, `unit \x1f phase` → open failures in
//! that phase) and `open:since:<scope>` (unit → the stream id where its open failures
//! begin). Which fields a line changes is decided in Rust ([`Change`]), by the same rules the
//! file store's counters follow.

use super::{int, text, Remote, RemoteError};
use redis::Value;

/// The error log stream.
pub const STREAM: &str = "errors";

/// How many entries one `XRANGE` page brings: big enough to amortise the round trip, small
/// enough that a page of records at the size limit stays a few megabytes.
pub const PAGE: usize = 256;

const APPEND: &str = include_str!("scripts/log_append.lua");

fn append_script() -> &'static redis::Script {
    static S: std::sync::OnceLock<redis::Script> = std::sync::OnceLock::new();
    S.get_or_init(|| redis::Script::new(APPEND))
}

/// Which counter hash a change is to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hash {
    /// `open:sessions`.
    Sessions,
    /// `open:units:<scope>` of the line's scope.
    Units,
}

/// One counter change that goes with an append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The hash.
    pub hash: Hash,
    /// The field.
    pub field: String,
    /// Up or down (a field never goes below zero; at zero it is removed).
    pub delta: i64,
    /// A unit's count: when it becomes 1, the line's stream id is where its failures begin.
    pub since: bool,
}

/// How the record's id is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Id {
    /// This prefix and the fleet's next sequence number (`err-<time>-` + `000042`).
    Sequence(String),
    /// The id the line already holds (a record written locally during an outage, pushed
    /// later): the line is `before_id` and `after_id` as they are.
    Keep(String),
}

/// One line to append.
#[derive(Clone, Debug)]
pub struct Append<'a> {
    /// The line's JSON before its id, and after it (with [`Id::Sequence`] the id goes between,
    /// as a JSON string's content: ids are made of `[A-Za-z0-9-]`).
    pub before_id: &'a [u8],
    /// The line's JSON after its id.
    pub after_id: &'a [u8],
    /// The id.
    pub id: Id,
    /// A token unique to this record: the same record appended twice is added once.
    pub nonce: &'a str,
    /// Whether the nonce is kept for good (`store migrate`) rather than for a week.
    pub keep_nonce: bool,
    /// The scope of the `Units` changes (the workflow, else the session; `""` for none).
    pub scope: &'a str,
    /// The session whose open count comes back.
    pub session: Option<&'a str>,
    /// The counter changes.
    pub changes: &'a [Change],
}

/// What an append did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Appended {
    /// False when the nonce was seen already: nothing was added (the id is the first one's).
    pub added: bool,
    /// The record's id.
    pub error_id: String,
    /// The stream entry's id.
    pub stream_id: String,
    /// The session's open failures after the append (0 without a session, or when not added).
    pub session_open: u64,
    /// The scope's unit counters after the append (field, count), empty when not added.
    pub units: Vec<(String, u64)>,
}

impl Remote {
    /// Appends one line with its counter changes, at once.
    pub fn append(&mut self, a: &Append<'_>) -> Result<Appended, RemoteError> {
        let (id, mode) = match &a.id {
            Id::Sequence(p) => (p.as_str(), "seq"),
            Id::Keep(id) => (id.as_str(), "keep"),
        };
        let mut inv = append_script().prepare_invoke();
        inv.key(self.key(STREAM))
            .key(self.key(&format!("nonce:{}", a.nonce)))
            .key(self.key("seq"))
            .key(self.key("open:sessions"))
            .key(self.key(&format!("open:units:{}", a.scope)))
            .key(self.key(&format!("open:since:{}", a.scope)))
            .arg(self.config.log_max_len)
            .arg(if a.keep_nonce { 0 } else { super::NONCE_TTL_S })
            .arg(a.before_id)
            .arg(a.after_id)
            .arg(id)
            .arg(mode)
            .arg(a.session.unwrap_or(""))
            .arg(a.changes.len());
        for c in a.changes {
            inv.arg(match c.hash {
                Hash::Sessions => "s",
                Hash::Units => "u",
            })
            .arg(&c.field)
            .arg(c.delta)
            .arg(if c.since { "1" } else { "0" });
        }
        let reply: Vec<Value> = self.invoke("appending to the error log", &inv)?;
        parse_appended(&reply).ok_or_else(|| RemoteError::protocol(&self.config.target, "append"))
    }

    /// Visits the log's lines from stream id `from` (`"-"`: the start) to the end, a page at a
    /// time, with each entry's stream id; `visit` says whether a line was valid. Returns the
    /// lines visited.
    pub fn read_log(
        &mut self,
        from: &str,
        visit: impl FnMut(&str, &[u8]) -> bool,
    ) -> Result<u64, RemoteError> {
        let stream = self.key(STREAM);
        self.read_stream(&stream, from, visit)
    }

    /// Pages through a stream with `XRANGE ... COUNT`, the next page starting just after the
    /// last id seen (`(id`), so memory holds one page whatever the length.
    pub(super) fn read_stream(
        &mut self,
        stream: &str,
        from: &str,
        mut visit: impl FnMut(&str, &[u8]) -> bool,
    ) -> Result<u64, RemoteError> {
        let mut start = from.to_string();
        let mut seen = 0u64;
        loop {
            let page: Vec<Value> = self.query(
                "reading a stream",
                redis::cmd("XRANGE")
                    .arg(stream)
                    .arg(&start)
                    .arg("+")
                    .arg("COUNT")
                    .arg(PAGE),
            )?;
            let n = page.len();
            let mut last = None;
            for entry in page {
                let Some((id, line)) = entry_line(entry) else {
                    continue;
                };
                visit(&id, &line);
                seen += 1;
                last = Some(id);
            }
            match last {
                Some(id) if n == PAGE => start = format!("({id}"),
                _ => return Ok(seen),
            }
        }
    }

    /// Visits the log newest first, a page at a time, until `visit` says stop (false), with
    /// each entry's stream id. Returns the id of the newest entry, if any.
    pub fn read_log_rev(
        &mut self,
        mut visit: impl FnMut(&str, &[u8]) -> bool,
    ) -> Result<Option<String>, RemoteError> {
        let stream = self.key(STREAM);
        let mut newest = None;
        let mut end = "+".to_string();
        loop {
            let page: Vec<Value> = self.query(
                "reading the log backwards",
                redis::cmd("XREVRANGE")
                    .arg(&stream)
                    .arg(&end)
                    .arg("-")
                    .arg("COUNT")
                    .arg(PAGE),
            )?;
            let n = page.len();
            let mut last = None;
            for entry in page {
                let Some((id, line)) = entry_line(entry) else {
                    continue;
                };
                newest.get_or_insert_with(|| id.clone());
                if !visit(&id, &line) {
                    return Ok(newest);
                }
                last = Some(id);
            }
            match last {
                Some(id) if n == PAGE => end = format!("({id}"),
                _ => return Ok(newest),
            }
        }
    }

    /// The last lines of the log, oldest first, as many as fit in `max_bytes` (the newest
    /// always), paging backwards ([`Self::read_log_rev`]).
    pub fn read_log_tail(&mut self, max_bytes: u64) -> Result<Vec<Vec<u8>>, RemoteError> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut total = 0u64;
        self.read_log_rev(|_, line| {
            total += line.len() as u64 + 1;
            if total > max_bytes && !out.is_empty() {
                return false;
            }
            out.push(line.to_vec());
            true
        })?;
        out.reverse();
        Ok(out)
    }

    /// Where `unit`'s open failures in `scope` begin (a stream id), if it has any.
    pub fn unit_since(&mut self, scope: &str, unit: &str) -> Result<Option<String>, RemoteError> {
        self.query(
            "reading the counters",
            redis::cmd("HGET")
                .arg(self.key(&format!("open:since:{scope}")))
                .arg(unit),
        )
    }
}

fn entry_line(entry: Value) -> Option<(String, Vec<u8>)> {
    let Value::Array(mut parts) = entry else {
        return None;
    };
    if parts.len() != 2 {
        return None;
    }
    let fields = parts.pop()?;
    let id = text(&parts.pop()?)?;
    let Value::Array(fields) = fields else {
        return None;
    };
    let mut it = fields.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        if text(&k).as_deref() == Some("line") {
            if let Value::BulkString(b) = v {
                return Some((id, b));
            }
        }
    }
    None
}

fn parse_appended(v: &[Value]) -> Option<Appended> {
    let added = int(v.first()?)? == 1;
    let error_id = text(v.get(1)?)?;
    let stream_id = text(v.get(2)?)?;
    let session_open = u64::try_from(int(v.get(3)?)?).unwrap_or(0);
    let mut units = Vec::new();
    if let Value::Array(kv) = v.get(4)? {
        let mut it = kv.iter();
        while let (Some(k), Some(n)) = (it.next(), it.next()) {
            units.push((text(k)?, u64::try_from(int(n)?).unwrap_or(0)));
        }
    }
    Some(Appended {
        added,
        error_id,
        stream_id,
        session_open,
        units,
    })
}
