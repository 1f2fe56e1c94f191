//! `triage errors`' query: which records are listed.

use super::Filter;
use crate::core::error_record::LogLine;
use chrono::{DateTime, Utc};
use std::collections::HashSet;

/// Which records are listed.
pub struct Query {
    /// The filters `report` has too.
    pub filter: Filter,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only records written at or before this time.
    pub until: Option<DateTime<Utc>>,
    /// Only open records: none written as resolved, none closed by a later resolution.
    pub unresolved: bool,
}

impl Query {
    /// Whether `l` is listed, given the ids later lines resolved.
    pub fn admits(&self, l: &LogLine, resolved: &HashSet<String>) -> bool {
        if l.is_resolution() || !self.filter.admits(l) {
            return false;
        }
        if self.kind.as_deref().is_some_and(|k| l.kind() != Some(k)) {
            return false;
        }
        if let Some(until) = self.until {
            let at = l
                .timestamp
                .as_deref()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok());
            if at.is_none_or(|t| t.with_timezone(&Utc) > until) {
                return false;
            }
        }
        if self.unresolved {
            let inline = l.resolution.as_ref().is_some_and(|r| r.successful());
            let later = l
                .error_id
                .as_deref()
                .is_some_and(|id| resolved.contains(id));
            if inline || later {
                return false;
            }
        }
        true
    }
}
