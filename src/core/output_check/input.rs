//! What an output check is handed: the output and what the agent claims of it ([`Input`],
//! read from `{agent, output, status, files}`), and the rules it is judged by (the agent's
//! from the policy, globs merged, overlaid by the flags). The files it names are looked up by
//! the caller, which alone reads the project ([`judge_input`] is handed the lookup).

use super::{api_error, judge, overlay, FileFacts, Subject, Verdict};
use crate::core::policy::{OutputRules, Policy};
use crate::core::vocab::Criticality;
use serde_json::Value;

/// What is judged, as read from stdin and the flags (`tool_uses`: the agent's tool calls).
#[derive(Clone, Debug, Default)]
pub struct Input {
    /// The agent's name.
    pub agent: Option<String>,
    /// The output; `None` when there was none.
    pub output: Option<Value>,
    /// The reported status.
    pub status: Option<String>,
    /// Files the agent wrote (paths or globs, relative to the project).
    pub files: Vec<String>,
    /// The original's text, for `original_length`.
    pub original: Option<String>,
    /// The tool calls the agent made, when known (`min_tool_uses`).
    pub tool_uses: Option<u64>,
}

impl Input {
    /// `{agent, output, status, files, original}`; anything but an object is refused with
    /// what it was instead.
    pub fn from_json(v: Value) -> Result<Input, String> {
        let Value::Object(mut m) = v else {
            return Err(format!(
                "stdin is {}, not an object; send {{\"agent\", \"output\", \"status\", \"files\"}}, or the text itself with --raw",
                crate::core::state::type_name(&v)
            ));
        };
        let text = |m: &serde_json::Map<String, Value>, k: &str| {
            m.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let files = match m.get("files") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        };
        Ok(Input {
            agent: text(&m, "agent"),
            status: text(&m, "status"),
            original: text(&m, "original"),
            files,
            tool_uses: m.get("tool_uses").and_then(Value::as_u64),
            output: m.remove("output"),
        })
    }
}

/// The agent's rules and criticality: the policy's (globs merged), overlaid by the flags.
pub fn rules_for(
    policy: &Policy,
    agent: Option<&str>,
    flags: &OutputRules,
) -> (OutputRules, Criticality) {
    let (base, criticality) = match agent {
        Some(name) => {
            let a = policy.agent(name);
            (a.output, a.criticality)
        }
        None => (OutputRules::default(), Criticality::Critical),
    };
    (overlay(&base, flags), criticality)
}

/// Judges one output: the agent's policy rules overlaid by `flags`, then the checks, with
/// each file glob of the rules and of the input looked up by `look_up`. Returns the rules and
/// criticality it used too (the loop guard needs `max_rejections`).
pub fn judge_input(
    policy: &Policy,
    input: &Input,
    flags: &OutputRules,
    mut look_up: impl FnMut(&str) -> FileFacts,
) -> (Verdict, OutputRules, Criticality) {
    let (rules, criticality) = rules_for(policy, input.agent.as_deref(), flags);
    let files: Vec<FileFacts> = rules
        .files_exist
        .iter()
        .flatten()
        .chain(&input.files)
        .map(|p| look_up(p))
        .collect();
    let api = input
        .output
        .as_ref()
        .and_then(|o| api_error::of(&super::text_of(o), policy));
    let verdict = judge(
        &rules,
        criticality,
        &Subject {
            agent: input.agent.as_deref(),
            output: input.output.as_ref(),
            status: input.status.as_deref(),
            files: &files,
            original_chars: input.original.as_deref().map(|t| t.trim().chars().count()),
            api_error: api.as_ref(),
            tool_uses: input.tool_uses,
        },
    );
    (verdict, rules, criticality)
}
