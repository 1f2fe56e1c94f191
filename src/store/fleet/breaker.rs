//! A breaker in Redis: load one key with the server's clock, apply the machine in Rust, store
//! it by compare-and-set on its version, retry on conflict (see the module above for why).
//!
//! The state is the same JSON the file store keeps in `breakers/<key>.json`, so `store
//! migrate` copies files as they are and a person reading either sees one format.

use super::{int, text, Remote, RemoteError};
use crate::core::breaker::{Breaker, Millis, Transition};
use redis::Value;
use std::time::{Duration, Instant};

/// The set of breaker keys.
pub const INDEX: &str = "breakers";
/// The stream of breaker transitions (as `logs/breaker-events.jsonl`).
pub const EVENTS: &str = "breaker-events";

const LOAD: &str = include_str!("scripts/breaker_load.lua");
const STORE: &str = include_str!("scripts/breaker_store.lua");

fn load_script() -> &'static redis::Script {
    static S: std::sync::OnceLock<redis::Script> = std::sync::OnceLock::new();
    S.get_or_init(|| redis::Script::new(LOAD))
}

fn store_script() -> &'static redis::Script {
    static S: std::sync::OnceLock<redis::Script> = std::sync::OnceLock::new();
    S.get_or_init(|| redis::Script::new(STORE))
}

/// One breaker as loaded: its JSON (none yet), version and the server's time.
struct Loaded {
    state: Option<Vec<u8>>,
    version: String,
    server_ms: Millis,
}

/// What applying the machine decided, for the caller to print or act on.
pub struct Applied<T> {
    /// The caller's answer.
    pub out: T,
    /// The state was unusable and was started afresh (the old bytes are kept beside it).
    pub rebuilt: Option<String>,
}

/// How a breaker call is told what to do.
pub struct Call<'a> {
    /// The key as stored.
    pub key: &'a str,
    /// The breaker a key without state starts as.
    pub fresh: &'a dyn Fn() -> Breaker,
    /// `TRIAGE_NOW`, when set: a time that overrides the server's clock (tests, replays).
    pub now: Option<Millis>,
    /// Give up (and fall back) after this, however many conflicts were lost.
    pub deadline: Instant,
    /// The line logged for one transition.
    pub event: &'a dyn Fn(&Breaker, &Transition) -> String,
}

impl Remote {
    /// Loads `call.key`, applies `apply` (again after every conflict: it must depend only on
    /// the breaker and `now`), and stores the result if it changed, with its transitions.
    /// `Ok(Err(f))` is the machine's own refusal, which stores nothing.
    pub fn breaker<T, F>(
        &mut self,
        call: &Call<'_>,
        mut apply: impl FnMut(&mut Breaker, Millis) -> Result<(T, Vec<Transition>), F>,
    ) -> Result<Result<Applied<T>, F>, RemoteError> {
        let hash = self.key(&format!("breaker:{}", call.key));
        let mut loaded = self.load(&hash, call.key)?;
        let mut conflicts = 0u32;
        loop {
            let (mut b, rebuilt) = decode(&loaded, call);
            let before = b.clone();
            let now = call.now.unwrap_or(loaded.server_ms);
            let (out, transitions) = match apply(&mut b, now) {
                Ok(done) => done,
                Err(f) => return Ok(Err(f)),
            };
            if rebuilt.is_none() && b == before {
                return Ok(Ok(Applied { out, rebuilt }));
            }
            let json = serde_json::to_string(&b).map_err(|e| {
                RemoteError::protocol(&self.config.target, format!("cannot serialize: {e}"))
            })?;
            let unusable = match &rebuilt {
                Some(_) => loaded.state.clone().unwrap_or_default(),
                None => Vec::new(),
            };
            let mut inv = store_script().prepare_invoke();
            inv.key(&hash)
                .key(self.key(INDEX))
                .key(self.key(EVENTS))
                .arg(&loaded.version)
                .arg(json)
                .arg(call.key)
                .arg(super::EVENTS_MAX_LEN)
                .arg(unusable);
            for t in &transitions {
                inv.arg((call.event)(&b, t));
            }
            let reply: Vec<Value> = self.invoke("storing a breaker", &inv)?;
            match reply.first().and_then(int) {
                Some(1) => return Ok(Ok(Applied { out, rebuilt })),
                Some(0) => {
                    conflicts += 1;
                    loaded = parse_loaded(&reply[1..])
                        .ok_or_else(|| RemoteError::protocol(&self.config.target, "store"))?;
                    if Instant::now() >= call.deadline {
                        return Err(RemoteError::new(
                            format!(
                                "redis {}: breaker `{}` kept changing under {conflicts} attempts until the deadline",
                                self.config.target, call.key
                            ),
                        ));
                    }
                    // Losers of a race spread out a little, so a burst settles in a few rounds.
                    std::thread::sleep(Duration::from_micros(
                        u64::from(conflicts.min(8)) * jitter_us(),
                    ));
                }
                _ => return Err(RemoteError::protocol(&self.config.target, "store")),
            }
        }
    }

    fn load(&mut self, hash: &str, key: &str) -> Result<Loaded, RemoteError> {
        let mut inv = load_script().prepare_invoke();
        inv.key(hash).key(self.key(INDEX)).arg(key);
        let reply: Vec<Value> = self.invoke("loading a breaker", &inv)?;
        parse_loaded(&reply).ok_or_else(|| RemoteError::protocol(&self.config.target, "load"))
    }

    /// Every breaker key of the project, sorted.
    pub fn breaker_keys(&mut self) -> Result<Vec<String>, RemoteError> {
        let mut keys: Vec<String> = self.query(
            "listing breakers",
            redis::cmd("SMEMBERS").arg(self.key(INDEX)),
        )?;
        keys.sort();
        Ok(keys)
    }

    /// Whether `key` has a breaker (it was checked, recorded or copied).
    pub fn breaker_exists(&mut self, key: &str) -> Result<bool, RemoteError> {
        self.query(
            "looking up a breaker",
            redis::cmd("SISMEMBER").arg(self.key(INDEX)).arg(key),
        )
    }

    /// One breaker's stored JSON, read without changing it (for reports); `None` if missing.
    pub fn breaker_peek(&mut self, key: &str) -> Result<Option<Vec<u8>>, RemoteError> {
        self.query(
            "reading a breaker",
            redis::cmd("HGET")
                .arg(self.key(&format!("breaker:{key}")))
                .arg("state"),
        )
    }

    /// Stores a breaker's JSON as it is, if the key has none yet (`store migrate`): `true`
    /// when it was copied.
    pub fn breaker_put_new(&mut self, key: &str, json: &[u8]) -> Result<bool, RemoteError> {
        let hash = self.key(&format!("breaker:{key}"));
        let mut p = redis::pipe();
        p.atomic()
            .cmd("HSETNX")
            .arg(&hash)
            .arg("state")
            .arg(json)
            .cmd("HSETNX")
            .arg(&hash)
            .arg("version")
            .arg(1)
            .ignore()
            .cmd("SADD")
            .arg(self.key(INDEX))
            .arg(key)
            .ignore();
        let r: redis::RedisResult<(i64,)> = p.query(&mut self.con);
        let (set,) =
            r.map_err(|e| RemoteError::from_redis("copying a breaker", &self.config.target, &e))?;
        Ok(set == 1)
    }

    /// Visits the breaker events, oldest first, a page at a time.
    pub fn breaker_events(
        &mut self,
        visit: impl FnMut(&str, &[u8]) -> bool,
    ) -> Result<u64, RemoteError> {
        let stream = self.key(EVENTS);
        self.read_stream(&stream, "-", visit)
    }
}

fn parse_loaded(v: &[Value]) -> Option<Loaded> {
    let state = match v.first()? {
        Value::Nil => None,
        Value::BulkString(b) => Some(b.clone()),
        _ => return None,
    };
    let version = text(v.get(1)?)?;
    let s = int(v.get(2)?)?;
    let us = int(v.get(3)?)?;
    Some(Loaded {
        state,
        version,
        server_ms: s.saturating_mul(1000).saturating_add(us / 1000),
    })
}

/// The breaker in `loaded`: a missing one is fresh; one that does not parse, or holds another
/// key, is started afresh and said why (the old bytes are kept beside the new state).
fn decode(loaded: &Loaded, call: &Call<'_>) -> (Breaker, Option<String>) {
    let Some(bytes) = &loaded.state else {
        return ((call.fresh)(), None);
    };
    match serde_json::from_slice::<Breaker>(bytes) {
        Ok(b) if b.key == call.key => (b, None),
        Ok(b) => ((call.fresh)(), Some(format!("it holds key `{}`", b.key))),
        Err(e) => ((call.fresh)(), Some(e.to_string())),
    }
}

/// A few hundred microseconds, different in each process.
fn jitter_us() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    100 + u64::from((nanos ^ std::process::id().rotate_left(7)) % 400)
}
