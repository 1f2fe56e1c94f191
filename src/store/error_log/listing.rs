//! Reading the log for a person: the records a query admits, read from its end (`triage
//! errors`), and its summary in one pass (`triage report`).

use super::{visit_rev, Position};
use crate::core::error_record::LogLine;
use crate::core::policy::Policy;
use crate::core::summary::{Aggregator, By, Filter, Query, Summary};
use crate::exit::Failure;
use crate::store::ground::Ground;
use std::collections::HashSet;
use std::path::Path;

/// A listed record: its line as stored, and whether a later line resolved it.
pub struct Listed {
    /// The line as stored.
    pub raw: Vec<u8>,
    /// Whether a later line resolved it.
    pub resolved: bool,
}

/// Reads from the end: the records that match, newest first, at most `limit`; how many
/// records the log holds when none matched (to say so); where its newest line is.
pub fn newest(
    g: &Ground,
    root: &Path,
    query: &Query,
    limit: Option<usize>,
    end: Option<u64>,
) -> Result<(Vec<Listed>, u64, Position), Failure> {
    let mut resolved: HashSet<String> = HashSet::new();
    let mut listed = Vec::new();
    let mut in_log = 0u64;
    // A resolution line comes after its record, so reading backwards meets it first.
    let position = visit_rev(g, root, end, |bytes| {
        let Some(l) = LogLine::parse(bytes) else {
            return true;
        };
        if let Some(id) = l.resolves.as_deref() {
            // A later resolution closes its record unless it says it did not work: a person's
            // decision (`--resolve --user-choice B`, `phase decide`) closes it as the
            // counters do, though it is no success.
            if !l.resolution.as_ref().is_some_and(|r| r.failed()) {
                resolved.insert(id.to_string());
            }
            return true;
        }
        in_log += 1;
        if limit.is_some_and(|n| listed.len() >= n) {
            // Enough listed; go on only to count, when nothing was listed.
            return listed.is_empty();
        }
        if query.admits(&l, &resolved) {
            let inline = l.resolution.as_ref().is_some_and(|r| r.successful());
            let later = l
                .error_id
                .as_deref()
                .is_some_and(|id| resolved.contains(id));
            listed.push(Listed {
                raw: bytes.to_vec(),
                resolved: inline || later,
            });
        }
        true
    })?;
    Ok((listed, in_log, position))
}

/// `triage report`'s one pass over the log (the fleet's, with a fleet store): the summary of
/// the lines `filter` admits, grouped `by`; `observe` sees every line too (parsed, as
/// stored, and whether it was admitted).
pub fn summarize(
    g: &Ground,
    filter: Filter,
    by: By,
    policy: &Policy,
    mut observe: impl FnMut(&LogLine, &[u8], bool),
) -> Result<Summary, Failure> {
    let mut agg = Aggregator::new(filter, by, policy);
    let stats = super::read_all_in(g, &g.root, |line| agg.add_with(line, &mut observe))?;
    // The reader skips a torn last line without showing it; the aggregator counted the rest.
    let torn = stats.skipped.saturating_sub(agg.rejected());
    agg.skipped(torn);
    Ok(agg.finish())
}
