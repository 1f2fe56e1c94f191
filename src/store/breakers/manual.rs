//! An operator's hand on a breaker (`triage breaker reset|trip|disable|half-open`): the action
//! applied under the key's exclusion, and the key checked to exist first, so that a typo
//! (`reseacher`) never makes a phantom breaker.

use super::calls::{resolve, stored_ids, TransitionView};
use super::{exists, update, Id};
use crate::core::breaker::{self, Breaker, Millis, Transition};
use crate::core::policy::Policy;
use crate::exit::Failure;
use crate::store::ground::Ground;
use serde::Serialize;

/// What reset, trip, disable and half-open print.
#[derive(Serialize)]
pub struct Manual {
    /// The breaker's key.
    pub key: String,
    /// Its state afterwards.
    pub state: breaker::State,
    /// Its generation afterwards.
    pub generation: u64,
    /// Whether the action changed it.
    pub changed: bool,
    /// The transition the action made, if any.
    pub transition: Option<TransitionView>,
}

/// Applies an operator's action `f` to breaker `id` under its exclusion, after the lazy
/// transitions (so the event log shows open → half_open before a reset).
pub fn manual(
    g: &Ground,
    policy: &Policy,
    id: &Id,
    f: impl Fn(&mut Breaker, Millis) -> Result<Vec<Transition>, Failure>,
) -> Result<Manual, Failure> {
    update(g, policy, id, |b, s, now| {
        // Lazy transitions first, so the event log shows open → half_open before a reset.
        let (_, mut tr) = breaker::status(b, s, now);
        let mine = f(b, now)?;
        let out = Manual {
            key: b.key.clone(),
            state: b.state,
            generation: b.generation,
            changed: !mine.is_empty(),
            transition: mine.first().map(|t| TransitionView {
                from: t.from,
                to: t.to,
                reason: t.reason,
            }),
        };
        tr.extend(mine);
        Ok((out, tr))
    })
}

/// The breaker `key` names, which must exist: an operator's typo (`reseacher`) must not make
/// a phantom breaker, nor report a reset that changed nothing.
pub fn existing(
    g: &Ground,
    policy: &Policy,
    key: &str,
    session: Option<&str>,
) -> Result<Id, Failure> {
    let id = resolve(g, policy, key, session, false)?;
    if exists(g, &id) {
        return Ok(id);
    }
    Err(Failure::data(no_breaker(g, &id, "nothing changed")))
}

/// "no breaker `KEY` (WHAT); did you mean `K`?", or the existing keys when none is close.
pub fn no_breaker(g: &Ground, id: &Id, what: &str) -> String {
    let keys: Vec<String> = stored_ids(g)
        .unwrap_or_default()
        .into_iter()
        .map(|i| i.key)
        .collect();
    let hint = match crate::core::policy::closest(&id.key, &keys) {
        Some(k) => format!("; did you mean `{k}`?"),
        None if keys.is_empty() => "; there are no breakers yet".into(),
        None => {
            let shown: Vec<String> = keys.iter().take(8).map(|k| format!("`{k}`")).collect();
            let more = if keys.len() > 8 { ", …" } else { "" };
            format!("; the breakers are {}{more}", shown.join(", "))
        }
    };
    format!("no breaker `{}` ({what}){hint}", id.key)
}
