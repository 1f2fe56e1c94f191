//! The line between work and trouble (issue 29): which family a failure belongs to, and
//! whether that family is the agent's normal loop (work: triage records nothing that counts
//! and stays quiet) or trouble (triage speaks).
//!
//! | family         | kinds                                                        | default |
//! |----------------|--------------------------------------------------------------|---------|
//! | `tests`        | `test_failed`                                                | work    |
//! | `build`        | `build_failed`                                               | work    |
//! | `checks`       | `check_failed` (lint, type, format, coverage thresholds)     | work    |
//! | `search`       | `no_match` (grep, rg … exit 1 with nothing printed)          | work    |
//! | `dependencies` | `dependency_conflict`                                        | work    |
//! | `usage`        | `invalid_input`, `not_found` — of a tool the agent drives itself (Bash, the file tools) or of no named tool | work |
//! | `other`        | everything else, and `invalid_input`/`not_found` of a subagent or an MCP tool | trouble |
//!
//! The tool matters only for the usage kinds: a command or path the agent mistyped is its own
//! to fix, while an agent type that does not exist (`Agent`, `Task`), or a server's resource
//! an MCP tool cannot find, is trouble triage should speak on. With no tool named (raw text)
//! the kind alone decides, except that the model API's own answer (a StopFailure, an
//! `API Error: 400 … invalid_request_error`, a Usage Policy refusal) is never the agent's work:
//! the classifier's answer says `trouble` for those ([`answer_class`]).
//!
//! A built-in rule may say the side itself where its wording says more than the kind's family:
//! a push behind its remote and a merge conflict are the agent's own loop (it integrates and
//! resolves them), though `tool_failure` is trouble; a JSON decoder failing on the first byte of
//! a service's answer is trouble, though `invalid_input` is the agent's.

use crate::core::vocab::{Class, Family, Kind};

/// The family of a failure of `kind`, reported by `tool` (Claude Code's `tool_name`).
pub fn family_of(kind: Kind, tool: Option<&str>) -> Family {
    match kind {
        Kind::TestFailed => Family::Tests,
        Kind::BuildFailed => Family::Build,
        Kind::CheckFailed => Family::Checks,
        Kind::NoMatch => Family::Search,
        Kind::DependencyConflict => Family::Dependencies,
        Kind::InvalidInput | Kind::NotFound if tool.is_none_or(is_agents_own) => Family::Usage,
        _ => Family::Other,
    }
}

/// Whether a failure of `kind` reported by `tool` is work or trouble, by the families'
/// defaults (the policy's `[voice] work` may treat fewer families as work).
pub fn class_of(kind: Kind, tool: Option<&str>) -> Class {
    family_of(kind, tool).default_class()
}

/// The class the classifier's answer carries: [`class_of`], except that with no tool named,
/// a failure that is the model API's own answer is trouble whatever its kind.
/// (`from_model_api` is asked only when it would change the answer.)
pub fn answer_class(
    kind: Kind,
    tool: Option<&str>,
    from_model_api: impl FnOnce() -> bool,
) -> Class {
    let class = class_of(kind, tool);
    if tool.is_none() && class == Class::Work && from_model_api() {
        return Class::Trouble;
    }
    class
}

/// The tools whose input is the agent's own doing: a shell command, a path, an edit.
fn is_agents_own(tool: &str) -> bool {
    matches!(
        tool,
        "Bash"
            | "PowerShell"
            | "Read"
            | "Write"
            | "Edit"
            | "MultiEdit"
            | "NotebookEdit"
            | "NotebookRead"
            | "Glob"
            | "Grep"
            | "LS"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_family_and_only_the_agents_own_are_work() {
        for k in Kind::ALL {
            let f = family_of(*k, Some("Bash"));
            assert_eq!(class_of(*k, Some("Bash")), f.default_class(), "{k}");
        }
        let work: Vec<&str> = Kind::ALL
            .iter()
            .filter(|k| class_of(**k, Some("Bash")) == Class::Work)
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            work,
            [
                "not_found",
                "invalid_input",
                "build_failed",
                "test_failed",
                "dependency_conflict",
                "check_failed",
                "no_match"
            ]
        );
    }

    #[test]
    fn the_tool_decides_only_the_usage_kinds() {
        use Kind::*;
        assert_eq!(family_of(NotFound, Some("Bash")), Family::Usage);
        assert_eq!(family_of(NotFound, Some("Read")), Family::Usage);
        assert_eq!(family_of(NotFound, None), Family::Usage);
        assert_eq!(family_of(InvalidInput, Some("Edit")), Family::Usage);
        // An agent type that does not exist, an MCP server's missing resource: trouble.
        assert_eq!(class_of(NotFound, Some("Agent")), Class::Trouble);
        assert_eq!(class_of(NotFound, Some("Task")), Class::Trouble);
        assert_eq!(
            class_of(InvalidInput, Some("mcp__github__get_issue")),
            Class::Trouble
        );
        // The other families do not depend on the tool.
        assert_eq!(class_of(TestFailed, Some("Agent")), Class::Work);
        assert_eq!(class_of(Timeout, Some("Bash")), Class::Trouble);
        assert_eq!(class_of(Billing, None), Class::Trouble);
        assert_eq!(class_of(LockBusy, Some("Bash")), Class::Trouble);
        // The model API's refusal, with no tool: trouble; from a Bash command: the agent's.
        assert_eq!(answer_class(InvalidInput, None, || true), Class::Trouble);
        assert_eq!(answer_class(InvalidInput, None, || false), Class::Work);
        assert_eq!(
            answer_class(InvalidInput, Some("Bash"), || true),
            Class::Work
        );
    }
}
