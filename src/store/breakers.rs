//! Where breakers are kept: the one seam between the commands and persistence (issue 20).
//!
//! Three operations, whatever the backend: [`update`] loads one key under exclusion, applies
//! the machine and stores the result with its transitions; [`stored_ids`] lists the keys that
//! have a breaker; [`peek`] reads one without exclusion and without writing (for reports). The
//! backend here is the file store: a `flock` on `breakers/<escaped key>.json.lock`, the state
//! replaced atomically, one line per transition in `logs/breaker-events.jsonl`.
//!
//! `apply` may run more than once for one call (a backend that stores by compare-and-set
//! runs it again after losing a race), so it must depend only on the breaker, the settings and
//! `now`.

pub mod calls;
pub mod manual;

use crate::core::breaker::{Breaker, Millis, Transition};
use crate::core::policy::{BreakerSettings, Policy};
use crate::exit::Failure;
use crate::store::files;
use crate::store::fleet::select;
use crate::store::ground::Ground;
use chrono::{SecondsFormat, TimeZone, Utc};
use std::path::{Path, PathBuf};

/// A breaker's key resolved: the key it is stored under and the one the policy knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Id {
    /// The key as stored (with its session prefix under `scope = "session"`).
    pub key: String,
    /// The key the policy's `[breaker.<key>]` entries match.
    pub policy_key: String,
    /// The session of a `scope = "session"` key.
    pub session: Option<String>,
}

impl Id {
    /// The breaker a key without state starts as.
    pub fn fresh(&self) -> Breaker {
        Breaker {
            session: self.session.clone(),
            ..Breaker::new(&self.key)
        }
    }

    /// The id of a stored breaker (its policy key without the session prefix).
    pub fn of(b: &Breaker) -> Id {
        Id {
            policy_key: match &b.session {
                Some(s) => b
                    .key
                    .strip_prefix(&format!("{s}/"))
                    .unwrap_or(&b.key)
                    .to_string(),
                None => b.key.clone(),
            },
            key: b.key.clone(),
            session: b.session.clone(),
        }
    }
}

/// The function [`update`] applies: the breaker, its settings and `now` in; the caller's answer
/// and the transitions that happened out.
pub trait Apply<T>:
    FnMut(&mut Breaker, &BreakerSettings, Millis) -> Result<(T, Vec<Transition>), Failure>
{
}

impl<T, F> Apply<T> for F where
    F: FnMut(&mut Breaker, &BreakerSettings, Millis) -> Result<(T, Vec<Transition>), Failure>
{
}

/// Lock, load (rebuilding a corrupt state), apply with the key's settings in `policy`, store
/// if changed, log the transitions.
pub fn update<T>(
    g: &Ground,
    policy: &Policy,
    id: &Id,
    mut apply: impl Apply<T>,
) -> Result<T, Failure> {
    if select::configured(g) {
        let settings = policy.breaker_for(&id.policy_key);
        let wait = named_wait(policy, id);
        let done = select::with(g, "breaker", |r| {
            on_fleet::update(g, r, id, &settings, wait, &mut apply)
        });
        if let Some(done) = done {
            return done;
        }
    }
    on_files::update(g, policy, id, apply)
}

/// Where the breakers are kept, for people: the fleet's Redis and namespace, or the folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// `redis://host:6379/0, namespace NS` or the folder's path.
    pub place: String,
    /// The state root, when the breakers are files and it does not exist.
    pub missing_root: Option<PathBuf>,
}

/// Where [`stored_ids`] looks (a fleet that does not answer falls back to the folder).
pub fn location(g: &Ground) -> Location {
    if let Some(Ok(c)) = g.fleet() {
        return Location {
            place: format!("{}, namespace {}", c.target, c.namespace),
            missing_root: None,
        };
    }
    let root = g.root.clone();
    Location {
        place: root.join("breakers").display().to_string(),
        missing_root: (!root.is_dir()).then_some(root),
    }
}

/// Every breaker with a stored state, sorted by key.
pub fn stored_ids(g: &Ground) -> Result<Vec<Id>, Failure> {
    if let Some(ids) = select::with(g, "listing breakers", on_fleet::stored_ids) {
        return Ok(ids);
    }
    on_files::stored_ids(g)
}

/// Now, as the breakers' times are measured: the fleet's server clock (`TIME`) with a fleet
/// store, unless `TRIAGE_NOW` fixed the time; else this host's. For readers that do not go
/// through [`update`] (which hands `apply` that time itself).
pub fn now(g: &Ground) -> Millis {
    if !g.fixed_now {
        if let Some(t) = select::with(g, "reading the server's clock", |r| r.time_ms()) {
            return t;
        }
    }
    millis(g)
}

/// Whether the breaker exists: it was checked, recorded (a check of a closed breaker stores
/// no state, yet its ticket must go stale on a reset) or copied. An operator's typo must not
/// make a phantom breaker.
pub fn exists(g: &Ground, id: &Id) -> bool {
    if let Some(found) = select::with(g, "looking up a breaker", |r| r.breaker_exists(&id.key)) {
        return found;
    }
    on_files::exists(g, id)
}

/// One breaker as stored, read without exclusion and never written; `None` when it has no
/// state or the state is unreadable.
pub fn peek(g: &Ground, id: &Id) -> Option<Breaker> {
    if let Some(b) = select::with(g, "reading a breaker", |r| r.breaker_peek(&id.key)) {
        return b.and_then(|bytes| serde_json::from_slice(&bytes).ok());
    }
    on_files::peek(g, id)
}

/// The fleet backend: the same machine, stored in Redis by compare-and-set.
mod on_fleet {
    use super::*;
    use crate::store::fleet::{breaker::Call, Remote, RemoteError};

    pub(super) fn update<T>(
        g: &Ground,
        r: &mut Remote,
        id: &Id,
        settings: &BreakerSettings,
        named_wait_ms: u64,
        apply: &mut impl Apply<T>,
    ) -> Result<Result<T, Failure>, RemoteError> {
        let fresh = || id.fresh();
        let event = |b: &Breaker, t: &Transition| event_line(b, t).to_string();
        let call = Call {
            key: &id.key,
            fresh: &fresh,
            now: g.fixed_now.then(|| millis(g)),
            deadline: std::time::Instant::now() + g.lock_wait(),
            event: &event,
        };
        let place = "the fleet's Redis";
        let mut warned = false;
        let done = r.breaker(&call, |b, now| {
            // Once per call, however often a lost race makes this run again.
            if !warned {
                warned = warn_clamped(g, &id.key, place, b, settings, named_wait_ms, now);
            } else {
                crate::core::breaker::sane::clamp(b, settings, named_wait_ms, now);
            }
            apply(b, settings, now)
        })?;
        Ok(done.map(|a| {
            if let Some(problem) = a.rebuilt {
                g.warn(&format!(
                    "breaker `{}` state in the fleet's Redis was unusable ({problem}); kept it beside the new state (field `unusable`) and started afresh (closed)",
                    id.key
                ));
            }
            a.out
        }))
    }

    pub(super) fn stored_ids(r: &mut Remote) -> Result<Vec<Id>, RemoteError> {
        let mut ids = Vec::new();
        for key in r.breaker_keys()? {
            // A key only checked while closed has no state yet (as it has no file).
            let Some(bytes) = r.breaker_peek(&key)? else {
                continue;
            };
            ids.push(match serde_json::from_slice::<Breaker>(&bytes) {
                Ok(b) if b.key == key => Id::of(&b),
                _ => Id {
                    policy_key: key.clone(),
                    key,
                    session: None,
                },
            });
        }
        Ok(ids)
    }
}

/// The longest wait an API's answer may hold breaker `id` open for: the upstream key hears
/// them (`hook::upstream`), no other.
pub fn named_wait(policy: &Policy, id: &Id) -> u64 {
    if policy.breaker.upstream_key() == Some(id.policy_key.as_str()) {
        crate::core::breaker::sane::MAX_NAMED_WAIT_MS
    } else {
        0
    }
}

/// Brings a loaded breaker within what `settings` could have produced by `now`
/// ([`crate::core::breaker::sane`]), warning (naming `place`, where it was stored) when
/// something was out of bounds; says whether it warned.
pub fn warn_clamped(
    g: &Ground,
    key: &str,
    place: &str,
    b: &mut Breaker,
    settings: &BreakerSettings,
    named_wait_ms: u64,
    now: Millis,
) -> bool {
    let fixed = crate::core::breaker::sane::clamp(b, settings, named_wait_ms, now);
    if fixed.is_empty() {
        return false;
    }
    g.warn(&format!(
        "breaker `{key}` state in {place} held what its policy cannot produce ({}); clamped it to the policy's bounds",
        fixed.join("; ")
    ));
    true
}

/// Visits the logged transitions, oldest first (the fleet's stream, or
/// `logs/breaker-events.jsonl`); `visit` says whether a line was valid.
pub fn events(
    g: &Ground,
    root: &Path,
    mut visit: impl FnMut(&[u8]) -> bool,
) -> Result<(), Failure> {
    let mut seen = 0u64;
    let read = select::with(g, "reading breaker events", |r| {
        r.breaker_events(|_, line| {
            seen += 1;
            visit(line)
        })
    });
    match read {
        Some(_) => Ok(()),
        None if seen > 0 => Err(Failure::io(
            "the fleet's breaker events could not be read to their end",
        )),
        None => {
            files::read_jsonl(&root.join("logs").join("breaker-events.jsonl"), visit)?;
            Ok(())
        }
    }
}

/// What [`migrate`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Migrated {
    /// Breakers copied.
    pub copied: u64,
    /// Breakers the fleet had already (its state is newer: hosts have been using it).
    pub kept: u64,
    /// Files that were not a breaker's state (not copied).
    pub unreadable: u64,
}

/// Copies the breakers kept in the files under `root` into the fleet's Redis, each as it is
/// unless the fleet has that key already: run again, it copies nothing twice.
pub fn migrate(
    g: &Ground,
    root: &Path,
    r: &mut crate::store::fleet::Remote,
) -> Result<Result<Migrated, crate::store::fleet::RemoteError>, Failure> {
    let mut done = Migrated::default();
    let dir = root.join("breakers");
    for entry in files::list_dir(&dir)? {
        let name = entry.name.to_string_lossy().into_owned();
        if entry.kind != files::Kind::File || !name.ends_with(".json") || name.starts_with('.') {
            continue;
        }
        let Ok(Some(bytes)) = files::read_optional(&dir.join(&entry.name)) else {
            continue;
        };
        let Ok(b) = serde_json::from_slice::<Breaker>(&bytes) else {
            g.warn(&format!(
                "{} is not a breaker's state; not copied",
                dir.join(&entry.name).display()
            ));
            done.unreadable += 1;
            continue;
        };
        let json = serde_json::to_vec(&b)
            .map_err(|e| Failure::data(format!("cannot serialize breaker `{}`: {e}", b.key)))?;
        match r.breaker_put_new(&b.key, &json) {
            Ok(true) => done.copied += 1,
            Ok(false) => done.kept += 1,
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(done))
}

/// How many transitions the files under `root` logged.
pub fn file_events(root: &Path) -> u64 {
    let mut n = 0;
    let _ = files::read_jsonl(&root.join("logs").join("breaker-events.jsonl"), |_| {
        n += 1;
        true
    });
    n
}

/// The line logged for one transition.
pub fn event_line(b: &Breaker, t: &Transition) -> serde_json::Value {
    serde_json::json!({
        "key": b.key,
        "from": t.from,
        "to": t.to,
        "at": rfc3339(t.at),
        "reason": t.reason,
        "generation": t.generation,
        "pid": std::process::id(),
    })
}

fn rfc3339(ms: Millis) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

fn millis(g: &Ground) -> Millis {
    g.now.timestamp_millis()
}

/// The file backend: what `commands::breaker` did before the seam, moved.
mod on_files {
    use super::*;

    fn path_of(dir: &Path, id: &Id) -> PathBuf {
        dir.join(format!("{}.json", files::escape_key(&id.key)))
    }

    /// Its first check or record made its lock sidecar, if not its state file.
    pub(super) fn exists(g: &Ground, id: &Id) -> bool {
        let path = path_of(&g.root.join("breakers"), id);
        path.symlink_metadata().is_ok()
            || files::with_suffix(&path, ".lock")
                .symlink_metadata()
                .is_ok()
    }

    pub(super) fn update<T>(
        g: &Ground,
        policy: &Policy,
        id: &Id,
        mut apply: impl Apply<T>,
    ) -> Result<T, Failure> {
        let dir = g.ensure_root()?.join("breakers");
        files::ensure_dir(&dir)?;
        let path = path_of(&dir, id);
        let _lock = files::lock(&path, g.lock_wait())?;
        let (mut b, rebuilt) = load(g, &path, id)?;
        let before = b.clone();
        let settings = policy.breaker_for(&id.policy_key);
        let now = millis(g);
        let place = path.display().to_string();
        warn_clamped(
            g,
            &id.key,
            &place,
            &mut b,
            &settings,
            named_wait(policy, id),
            now,
        );
        let (out, transitions) = apply(&mut b, &settings, now)?;
        if rebuilt || b != before {
            let mut bytes = serde_json::to_vec(&b).map_err(|e| {
                Failure::data(format!("cannot serialize breaker `{}`: {e}", id.key))
            })?;
            bytes.push(b'\n');
            // Atomic, not durable (SPEC §6): no fsync on every hook call's path.
            files::replace_unsynced(&path, &bytes, files::Backup::Skip)?;
        }
        log_transitions(g, &b, &transitions);
        Ok(out)
    }

    /// The state in `path`; a missing file is a new breaker, a corrupt or unreadable one is
    /// moved aside (never deleted) and rebuilt, with a warning.
    fn load(g: &Ground, path: &Path, id: &Id) -> Result<(Breaker, bool), Failure> {
        let problem = match files::read_optional(path) {
            Ok(None) => return Ok((id.fresh(), false)),
            Ok(Some(bytes)) => match serde_json::from_slice::<Breaker>(&bytes) {
                Ok(b) if b.key == id.key => return Ok((b, false)),
                Ok(b) => format!("it holds key `{}`", b.key),
                Err(e) => e.to_string(),
            },
            // A link, a FIFO or a folder in its place is moved aside like a corrupt file (the
            // entry itself, never what a link points to).
            Err(e) => e.to_string(),
        };
        let moved = files::quarantine(path, &g.stamp())?;
        g.warn(&format!(
            "breaker `{}` state was unusable ({problem}); kept it as {} and started afresh (closed)",
            id.key,
            moved.display()
        ));
        Ok((id.fresh(), true))
    }

    /// One line per transition in `logs/breaker-events.jsonl`. The state file is the truth; a
    /// log line that cannot be written is a warning, never a failure of the call.
    fn log_transitions(g: &Ground, b: &Breaker, transitions: &[Transition]) {
        if transitions.is_empty() {
            return;
        }
        let logs = g.root.join("logs");
        if let Err(e) = files::ensure_dir(&logs) {
            g.warn(&format!("cannot log breaker transitions: {e}"));
            return;
        }
        let path = logs.join("breaker-events.jsonl");
        for t in transitions {
            let line = event_line(b, t);
            if let Err(e) = files::append_line(&path, line.to_string().as_bytes(), g.lock_wait()) {
                g.warn(&format!("cannot log breaker transition: {e}"));
            }
        }
    }

    /// Every breaker with a state file, read from the files themselves (a shortened file name
    /// cannot be unescaped; a file that cannot be read is named from its file name).
    pub(super) fn stored_ids(g: &Ground) -> Result<Vec<Id>, Failure> {
        let dir: PathBuf = g.root.join("breakers");
        let mut ids = Vec::new();
        for entry in files::list_dir(&dir)? {
            let name = entry.name.to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".json").filter(|s| !s.starts_with('.')) else {
                continue;
            };
            let stored = files::read_optional(&dir.join(&entry.name))
                .ok()
                .flatten()
                .and_then(|b| serde_json::from_slice::<Breaker>(&b).ok());
            let id = match stored {
                Some(b) => Id::of(&b),
                None => match files::unescape_key(stem) {
                    Some(k) => Id {
                        policy_key: k.clone(),
                        key: k,
                        session: None,
                    },
                    None => continue,
                },
            };
            ids.push(id);
        }
        ids.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(ids)
    }

    pub(super) fn peek(g: &Ground, id: &Id) -> Option<Breaker> {
        let path = path_of(&g.root.join("breakers"), id);
        let bytes = files::read_optional(&path).ok()??;
        serde_json::from_slice::<Breaker>(&bytes).ok()
    }
}
