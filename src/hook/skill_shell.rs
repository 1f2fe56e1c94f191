//! `PreSkillShellCommand` (Claude Code 2.1.332): a shell command a skill runs (a
//! `` !`command` `` line of its `SKILL.md`), gated as `PreToolUse` gates its tool (`tool_name`
//! is `Bash` or `PowerShell`): denied while the tool's breaker (`[breaker.<tool>]` in the
//! policy) refuses calls. Nothing follows it (no `PostToolUse`, and its `tool_use_id` names no
//! tool call), so it takes no half-open probe permit — a probe nobody hands back would hold
//! the breaker until its lease ran out — and no call start is remembered.

use super::codec::Response;
use super::guarded_key;
use crate::context::Context;
use crate::core::hook_payload::Payload;
use crate::exit::Failure;
use crate::store::breakers::calls as breaker;

/// The event's name, as the answer must repeat it.
pub const EVENT: &str = "PreSkillShellCommand";

pub(super) fn pre_skill_shell_command(cx: &Context, p: &Payload) -> Result<Response, Failure> {
    let Some(key) = guarded_key(cx, p)? else {
        return Ok(Response::default());
    };
    let r = breaker::check_in_without_ticket(&cx.ground(), cx.policy()?, key, p.session_id())?;
    if r.allowed {
        return Ok(Response::default());
    }
    let skill = p
        .str("command_name")
        .filter(|s| !s.is_empty())
        .map(|s| format!("skill {}", crate::core::text::name(s)))
        .unwrap_or_else(|| "a skill".to_string());
    let command = p
        .tool_input()
        .get("command")
        .and_then(serde_json::Value::as_str)
        .map(|c| format!(" ({})", crate::core::text::quoted_max(c, 120)))
        .unwrap_or_default();
    Ok(Response::deny_as(
        EVENT,
        format!(
            "the shell command of {skill}{command} needs {}, which is refused for now:\n{}",
            crate::core::text::name(key),
            breaker::template4_reason(&r)
        ),
    ))
}
