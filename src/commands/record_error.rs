//! `triage record-error`: append one error record (SPEC §5) to `logs/errors.jsonl` under the
//! log's lock, keep the threshold counters beside it under the same lock, and answer with the
//! record plus the thresholds it crossed (seeds 000 and 001). `--resolve ID` appends the
//! resolution of an earlier record (seed 002), never rewriting a line.
//!
//! The command is the glue: what it writes and resolves goes through [`crate::store::error_log`]
//! (which the hooks and `run` use too), and an input becomes a record by
//! [`crate::core::error_record::classified_at`].

use crate::context::{Answer, Context};
use crate::core::error_record::{
    classified_at, error_fields, no_retry_while_open, ErrorRecord, Phase, Resolution,
};
use crate::core::vocab::{Kind, Severity};
use crate::exit::Failure;
use crate::store::error_log::{record, resolve, Recorded, Selection};
use serde_json::Value;

/// Arguments of `triage record-error`.
#[derive(clap::Args, Debug, Default)]
#[command(after_help = "Examples:\n  \
    echo '{\"kind\": \"timeout\", \"detail\": \"Agent exceeded 5 minute timeout\"}' | triage record-error --session s1 --phase 2 --agent statistician-consultant --retry-count 2\n  \
    echo 'connection reset by peer' | triage record-error --session s1 --agent researcher\n  \
    triage record-error --resolve err-20260204T143022123Z-000001 --action-taken retry --successful true\n  \
    triage record-error --resolve --workflow w1 --phase 2 --action-taken user_escalation --user-choice proceed_without\n\n\
    --resolve with an ERROR_ID resolves that record; without one, every unresolved record that\n\
    --session, --workflow, --phase and --agent select, with one decision. A record already\n\
    resolved is left as it is and not counted again. A resolution closes its record for the\n\
    thresholds unless it says --successful false.")]
pub struct Args {
    /// Session id (else the input's `session_id`)
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Workflow id (else the input's `workflow_id`)
    #[arg(long, value_name = "ID")]
    pub workflow: Option<String>,
    /// Phase or stage, a number or a name
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// The agent (or skill, or tool) that failed
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Task id
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// Retries already made
    #[arg(long, value_name = "N")]
    pub retry_count: Option<u32>,
    /// What was done about it (the resolution's action_taken)
    #[arg(long, value_name = "ACTION")]
    pub resolution: Option<String>,
    /// A partial output that was kept (repeatable)
    #[arg(long = "preserved", value_name = "PATH")]
    pub preserved: Vec<String>,
    /// critical, error, warning or info
    #[arg(long, value_name = "SEVERITY")]
    pub severity: Option<Severity>,
    /// The error's kind, overriding the input's
    #[arg(long, value_name = "KIND")]
    pub kind: Option<Kind>,
    /// The error's message, overriding the input's
    #[arg(long, value_name = "TEXT")]
    pub detail: Option<String>,
    /// Also record the failure on this breaker, and resolve it by this key rather than the agent
    /// [default: the agent's breaker_key template; without one, no breaker]
    #[arg(long, value_name = "KEY")]
    pub breaker: Option<String>,
    /// Agents in this phase's fan-out [default: the policy's phases.<phase>.size]
    #[arg(long, value_name = "N")]
    pub phase_size: Option<u32>,
    /// Append the resolution of the record with this error_id instead; without an id, of every
    /// unresolved record --session, --workflow, --phase and --agent select
    #[arg(long, value_name = "ERROR_ID", num_args = 0..=1, default_missing_value = "")]
    pub resolve: Option<String>,
    /// With --resolve: what was done
    #[arg(long, value_name = "ACTION", requires = "resolve")]
    pub action_taken: Option<String>,
    /// With --resolve: whether it worked (false leaves the error open for the thresholds)
    #[arg(long, value_name = "BOOL", requires = "resolve")]
    pub successful: Option<bool>,
    /// What the person chose, when one was asked
    #[arg(long, value_name = "CHOICE")]
    pub user_choice: Option<String>,
}

/// Runs `triage record-error`.
pub fn run(args: &Args, cx: &Context) -> Result<Answer, Failure> {
    if let Some(id) = &args.resolve {
        return resolve_command(args, id, cx);
    }
    let input = read_input(cx)?;
    let mut object = None;
    let mut rec = match &input {
        Some(v) => {
            let (rec, o) = classified_at(v, cx.policy()?, args.retry_count, Some(cx.now));
            o.warnings.iter().for_each(|w| cx.warn(w));
            object = Some(o);
            rec
        }
        None if args.kind.is_some() || args.detail.is_some() => ErrorRecord::default(),
        None => {
            // Nothing to record: no state root is made for the trace of it either.
            cx.writes_nothing();
            return Err(Failure::data(
                "stdin is empty; send an error object, a raw error or a hook payload, or give --kind/--detail",
            ));
        }
    };
    apply_flags(&mut rec, args, cx.redactor());
    let key = breaker_key(cx, args, &rec)?;
    if let Some(k) = &key {
        if rec.agent.as_deref() != Some(k.as_str()) {
            rec.breaker_key = Some(k.clone());
        }
    }
    let size = match (args.phase_size, &rec.phase) {
        (Some(n), _) => Some(n),
        (None, Some(p)) => cx.policy()?.phase(&p.to_string()).and_then(|p| p.size),
        (None, None) => None,
    };
    let g = cx.ground();
    let policy = cx.policy()?;
    let who = rec.agent.clone().unwrap_or_default();
    if let Some(o) = &object {
        crate::store::trace::classified(&g, policy, &who, o);
    }
    // The breaker first, as the hook does: a breaker this failure leaves open denies the next
    // call, so the record and the answer advise no retry that would not happen.
    let breaker = key
        .as_ref()
        .and_then(|k| crate::store::breakers::calls::record_logged(&g, policy, k, &rec));
    let open = breaker
        .as_ref()
        .filter(|b| matches!(b["state"].as_str(), Some("open" | "forced_open")));
    if let Some(b) = open {
        let k = b["key"].as_str().unwrap_or_default();
        if let Some(why) = no_retry_while_open(&mut rec.error, k) {
            if let Some(o) = object.as_mut() {
                o.action = crate::core::vocab::Action::Escalate;
                o.retry = None;
                o.context.insert("action_reason".into(), Value::from(why));
            }
        }
    }
    if let Some(o) = &object {
        let attempt = rec.retry_count.map_or(1, |n| n.saturating_add(1));
        crate::store::trace::advised(&g, policy, &who, attempt, o);
    }
    let mut done = record(&g, policy, rec, size)?;
    // Seed 000's "circuit breaker opens twice": this failure opened it again.
    if let Some(b) = breaker.as_ref().filter(|b| b["opened_now"] == true) {
        let key = b["key"].as_str().unwrap_or_default();
        let opens = b["opens_unrecovered"].as_u64().unwrap_or(0);
        if let Some(w) = crate::core::error_record::breaker_reopened(key, opens, &policy.thresholds)
        {
            done.warnings.push(w);
        }
    }
    done.breaker = breaker;
    let negative = !done.warnings.is_empty();
    if cx.global.text {
        return Ok(Answer::text(text(&done)).negative(negative));
    }
    Ok(Answer::json(&done).negative(negative))
}

/// The breaker a record goes on: `--breaker`, else the agent's `breaker_key` template (a
/// template that cannot be filled in is a warning, and no breaker).
fn breaker_key(cx: &Context, args: &Args, rec: &ErrorRecord) -> Result<Option<String>, Failure> {
    if let Some(k) = &args.breaker {
        return Ok(Some(k.clone()));
    }
    let Some(agent) = rec.agent.as_deref() else {
        return Ok(None);
    };
    let Some(template) = cx.policy()?.agent(agent).breaker_key else {
        return Ok(None);
    };
    let phase = rec.phase.as_ref().map(Phase::to_string);
    let vars = crate::core::policy::KeyVars {
        agent,
        task_id: rec.task_id.as_deref(),
        phase: phase.as_deref(),
        session: rec.session_id.as_deref(),
        workflow: rec.workflow_id.as_deref(),
    };
    match crate::core::policy::expand_key(&template, &vars) {
        Ok(k) => Ok(Some(k)),
        Err(why) => {
            cx.warn(&format!(
                "breaker_key of agent `{agent}`: {why}; the failure was not recorded on a breaker"
            ));
            Ok(None)
        }
    }
}

fn text(done: &Recorded) -> String {
    let r = &done.record;
    let mut out = format!(
        "recorded {} ({}) for {}",
        r.error_id,
        r.kind().unwrap_or("unknown"),
        r.agent.as_deref().unwrap_or("an unnamed agent")
    );
    for w in &done.warnings {
        out.push_str(&format!("\nwarning: {}: {}", w.name, w.message));
    }
    out
}

/// Stdin as JSON, as a record in YAML (seeds 001 and 002 write theirs so), or as the text of
/// a raw error; with every credential in it replaced by its marker.
fn read_input(cx: &Context) -> Result<Option<Value>, Failure> {
    Ok(cx.read_stdin()?.map(|bytes| {
        let mut v = crate::core::error_record::parse::sent(&bytes);
        cx.redactor().value(&mut v);
        v
    }))
}

/// `--resolve [ID]`: one record, or every unresolved one the selectors pick.
fn resolve_command(args: &Args, id: &str, cx: &Context) -> Result<Answer, Failure> {
    if args.action_taken.is_none() && args.user_choice.is_none() {
        return Err(Failure::usage(
            "--resolve needs what was done: --action-taken ACTION (and --successful BOOL) or --user-choice CHOICE",
        ));
    }
    let sel = Selection {
        id: Some(id.trim()).filter(|i| !i.is_empty()).map(String::from),
        session: args.session.clone(),
        workflow: args.workflow.clone(),
        phase: args.phase.as_deref().map(|p| Phase::parse(p).to_string()),
        agent: args.agent.clone(),
    };
    if sel.id.is_none()
        && sel.session.is_none()
        && sel.workflow.is_none()
        && sel.phase.is_none()
        && sel.agent.is_none()
    {
        return Err(Failure::usage(
            "say which errors --resolve closes: an ERROR_ID, or --session, --workflow, --phase and/or --agent",
        ));
    }
    let resolution = Resolution {
        action_taken: args.action_taken.clone(),
        successful: args.successful,
        user_choice: args.user_choice.clone(),
        automatic: false,
    };
    let done = resolve(&cx.ground(), &sel, resolution)?;
    if cx.global.text {
        let mut text = match (&sel.id, done.lines.first()) {
            (Some(id), Some(_)) => format!("resolved {id}"),
            (Some(id), None) => format!("{id} was already resolved; nothing changed"),
            (None, _) => format!(
                "resolved {} ({} already resolved were left as they were)",
                crate::core::text::count(done.lines.len() as u64, "error"),
                done.already_resolved
            ),
        };
        if !done.recovered.is_empty() {
            text.push_str(&format!(
                "\nalso resolved {} earlier failures of the same agent as recovered_by_retry",
                done.recovered.len()
            ));
        }
        return Ok(Answer::text(text));
    }
    let mut out = match (&sel.id, done.lines.first()) {
        (Some(_), Some(line)) => serde_json::to_value(line).unwrap_or_default(),
        (Some(id), None) => serde_json::json!({"resolves": id, "already_resolved": true}),
        (None, _) => serde_json::json!({
            "error_ids": done.lines.iter().map(|l| l.resolves.as_str()).collect::<Vec<_>>(),
            "already_resolved": done.already_resolved,
            "resolution": done.lines.first().map(|l| &l.resolution),
        }),
    };
    if let Some(o) = out.as_object_mut() {
        o.insert("resolved".into(), done.lines.len().into());
        if !done.recovered.is_empty() {
            let ids: Vec<&str> = done.recovered.iter().map(|l| l.resolves.as_str()).collect();
            o.insert("recovered".into(), serde_json::json!(ids));
        }
    }
    Ok(Answer::json(&out))
}

/// Flags override the input's fields.
fn apply_flags(rec: &mut ErrorRecord, a: &Args, redactor: &crate::core::redact::Redactor) {
    let set = |slot: &mut Option<String>, v: &Option<String>| {
        if let Some(v) = v {
            *slot = Some(v.clone());
        }
    };
    set(&mut rec.session_id, &a.session);
    set(&mut rec.workflow_id, &a.workflow);
    set(&mut rec.agent, &a.agent);
    set(&mut rec.task_id, &a.task);
    if let Some(p) = &a.phase {
        rec.phase = Some(Phase::parse(p));
    }
    if let Some(n) = a.retry_count {
        rec.retry_count = Some(n);
    }
    rec.preserved_outputs.extend(a.preserved.iter().cloned());
    if a.resolution.is_some() || a.user_choice.is_some() {
        let r = rec.resolution.get_or_insert_with(Resolution::default);
        set(&mut r.action_taken, &a.resolution);
        set(&mut r.user_choice, &a.user_choice);
    }
    if let Some(s) = a.severity {
        rec.error.insert("severity".into(), s.as_str().into());
    }
    if let Some(k) = a.kind {
        rec.error.insert("kind".into(), k.as_str().into());
    }
    if let Some(d) = &a.detail {
        rec.error
            .insert("detail".into(), redactor.text(d).into_owned().into());
    }
    if rec.error.is_empty() {
        rec.error = error_fields(&Value::Object(std::mem::take(&mut rec.error)));
    }
    if !rec.error.contains_key("kind") {
        rec.error
            .insert("kind".into(), Kind::Unknown.as_str().into());
    }
}
