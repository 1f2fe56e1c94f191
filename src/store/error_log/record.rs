//! Writing one record: its time and status settled, appended through the log's seam, and the
//! thresholds it crossed evaluated on the counters the append left (`record-error`, the hooks
//! and `run` all record through here).

use super::Written;
use crate::core::error_record::{self, ErrorRecord, Keys, Phase, Warning};
use crate::core::policy::Policy;
use crate::core::vocab::Kind;
use crate::exit::Failure;
use crate::store::ground::Ground;
use serde::Serialize;
use serde_json::Value;

/// A written record and the thresholds it crossed.
#[derive(Clone, Debug, Serialize)]
pub struct Recorded {
    /// The record as written.
    #[serde(flatten)]
    pub record: ErrorRecord,
    /// `session_failure_threshold`, `cascade`, `phase_failure_ratio`.
    pub warnings: Vec<Warning>,
    /// The breaker the failure was recorded on (`--breaker`, or the policy's `breaker_key`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<Value>,
}

/// Writes one record (see [`super::write_record`]) and evaluates the thresholds on the
/// counters. A record spooled because the log was busy crosses no threshold now; it is
/// counted when the next writer adds it to the log.
///
/// `error_id` is always assigned here (unique under the lock); `timestamp` is kept when the
/// caller set a valid one, else it is now.
pub fn record(
    g: &Ground,
    policy: &Policy,
    mut rec: ErrorRecord,
    phase_size: Option<u32>,
) -> Result<Recorded, Failure> {
    let thresholds = &policy.thresholds;
    let root = g.ensure_root()?;
    rec.timestamp = normalized_time(&rec.timestamp)
        .unwrap_or_else(|| g.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    if !rec.error.contains_key("status") {
        rec.error.insert("status".into(), "error".into());
    }
    let warnings = match super::write_record(g, &root, &mut rec)? {
        Written::Logged(counters) if opens(&rec) => {
            let phase = rec.phase.as_ref().map(Phase::to_string);
            let keys = Keys {
                session: rec.session_id.as_deref(),
                workflow: rec.workflow_id.as_deref(),
                phase: phase.as_deref(),
                agent: rec.breaker_key.as_deref().or(rec.agent.as_deref()),
            };
            error_record::warnings(&counters.open, &keys, thresholds, phase_size)
        }
        Written::Logged(_) | Written::Pending => Vec::new(),
    };
    Ok(Recorded {
        record: rec,
        warnings,
        breaker: None,
    })
}

/// Whether a record counts toward the thresholds (as [`crate::core::error_record::LogLine::opens`]
/// reads it back): not an interrupt, not kept out of them (an unguarded tool's failure), and not
/// written already resolved.
fn opens(rec: &ErrorRecord) -> bool {
    rec.kind() != Some(Kind::Interrupted.as_str())
        && rec.counts_toward_thresholds()
        && rec
            .resolution
            .as_ref()
            .is_none_or(|r| r.successful != Some(true))
}

fn normalized_time(text: &str) -> Option<String> {
    let t = chrono::DateTime::parse_from_rfc3339(text.trim()).ok()?;
    Some(
        t.with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    )
}
