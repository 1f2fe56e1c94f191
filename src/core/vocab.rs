//! The shared vocabulary of SPEC §5: kinds, categories, tiers, severities, actions and
//! criticality. Every subcommand uses these types; none redefines them. The serde names are
//! exactly the words the SPEC writes, so JSON in and out matches the contract.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Declares a unit-only enum with its wire names, `ALL`, `as_str`, `Display` and `FromStr`.
macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in the order the SPEC lists them.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire name.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(format!(
                        "unknown {} `{}`; expected one of: {}",
                        stringify!($name).to_lowercase(),
                        s,
                        [$($text),+].join(", ")
                    )),
                }
            }
        }
    };
}

vocabulary! {
    /// What went wrong (SPEC §5).
    Kind {
        Timeout = "timeout",
        RateLimited = "rate_limited",
        Overloaded = "overloaded",
        NetworkError = "network_error",
        ToolFailure = "tool_failure",
        PermissionDenied = "permission_denied",
        NotFound = "not_found",
        InvalidInput = "invalid_input",
        SpecAmbiguous = "spec_ambiguous",
        ValidationFailed = "validation_failed",
        QualityFailed = "quality_failed",
        OutputMissing = "output_missing",
        BuildFailed = "build_failed",
        TestFailed = "test_failed",
        CorpusError = "corpus_error",
        Crash = "crash",
        ContextExhausted = "context_exhausted",
        AuthFailed = "auth_failed",
        Interrupted = "interrupted",
        ToolUnavailable = "tool_unavailable",
        HookFailed = "hook_failed",
        TargetNotFound = "target_not_found",
        Unresponsive = "unresponsive",
        GateFailed = "gate_failed",
        StateCorrupt = "state_corrupt",
        PhaseFailed = "phase_failed",
        Billing = "billing",
        LockBusy = "lock_busy",
        DependencyConflict = "dependency_conflict",
        CheckFailed = "check_failed",
        NoMatch = "no_match",
        Unknown = "unknown",
    }
}

vocabulary! {
    /// Which side of the line a failure is on (issue 29): `work` is the agent's normal loop
    /// (a red test, a compile error, a lint complaint, a search with no match), where triage
    /// records nothing that counts and stays quiet; `trouble` is what triage speaks on
    /// (infrastructure, the API, the network, timeouts, denials, crashes, subagents).
    Class {
        Work = "work",
        Trouble = "trouble",
    }
}

impl Default for Class {
    /// A failure nothing is known of is trouble: triage speaks rather than stays silent.
    fn default() -> Class {
        Class::Trouble
    }
}

vocabulary! {
    /// The rows of the work/trouble table: the families of failures a coding session meets.
    /// The first six are work by default (`[voice] work` in the policy names the ones treated
    /// as work); `other` is everything else, always trouble. `classify::family_of` says which
    /// family a kind (and the tool that failed) belongs to.
    Family {
        Tests = "tests",
        Build = "build",
        Checks = "checks",
        Search = "search",
        Dependencies = "dependencies",
        Usage = "usage",
        Other = "other",
    }
}

impl Family {
    /// The class of the family when the policy says nothing: the six families of the agent's
    /// own loop are work, the rest trouble.
    pub fn default_class(self) -> Class {
        match self {
            Family::Tests
            | Family::Build
            | Family::Checks
            | Family::Search
            | Family::Dependencies
            | Family::Usage => Class::Work,
            Family::Other => Class::Trouble,
        }
    }
}

vocabulary! {
    /// Seed 001's error categories.
    Category {
        Transient = "transient",
        SkillError = "skill_error",
        ValidationFailure = "validation_failure",
        QualityFailure = "quality_failure",
    }
}

vocabulary! {
    /// Seed 001's severities: critical (P0), error (P1), warning (P2), info.
    Severity {
        Critical = "critical",
        Error = "error",
        Warning = "warning",
        Info = "info",
    }
}

impl Severity {
    /// Seed 001's priority label: P0 critical, P1 error, P2 warning; `info` is below the
    /// seed's scale and gets P3.
    pub fn priority(self) -> &'static str {
        match self {
            Severity::Critical => "P0",
            Severity::Error => "P1",
            Severity::Warning => "P2",
            Severity::Info => "P3",
        }
    }
}

vocabulary! {
    /// What the caller should do next.
    Action {
        Retry = "retry",
        AskUser = "ask_user",
        Escalate = "escalate",
        Skip = "skip",
        ProceedDegraded = "proceed_degraded",
        Abort = "abort",
    }
}

vocabulary! {
    /// Seed 000: a critical agent stops the phase when it fails; an optional one degrades it.
    Criticality {
        Critical = "critical",
        Optional = "optional",
    }
}

/// Seed 004's three tiers, written as the numbers 1, 2 and 3 on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub enum Tier {
    /// 1: the agent can recover by itself (retry, fix and go on).
    SelfRecoverable,
    /// 2: a person must decide.
    EscalationRequired,
    /// 3: the pipeline itself is affected.
    PipelineAffecting,
}

impl Tier {
    /// Every tier, lowest first.
    pub const ALL: &'static [Tier] = &[
        Tier::SelfRecoverable,
        Tier::EscalationRequired,
        Tier::PipelineAffecting,
    ];

    /// The tier's number.
    pub fn number(self) -> u8 {
        match self {
            Tier::SelfRecoverable => 1,
            Tier::EscalationRequired => 2,
            Tier::PipelineAffecting => 3,
        }
    }

    /// Seed 004's name for the tier.
    pub fn name(self) -> &'static str {
        match self {
            Tier::SelfRecoverable => "self-recoverable",
            Tier::EscalationRequired => "escalation-required",
            Tier::PipelineAffecting => "pipeline-affecting",
        }
    }
}

impl TryFrom<u8> for Tier {
    type Error = String;
    fn try_from(n: u8) -> Result<Self, String> {
        match n {
            1 => Ok(Tier::SelfRecoverable),
            2 => Ok(Tier::EscalationRequired),
            3 => Ok(Tier::PipelineAffecting),
            _ => Err(format!("unknown tier {n}; expected 1, 2 or 3")),
        }
    }
}

impl From<Tier> for u8 {
    fn from(t: Tier) -> u8 {
        t.number()
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number())
    }
}

impl FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let n: u8 = s
            .parse()
            .map_err(|_| format!("unknown tier `{s}`; expected 1, 2 or 3"))?;
        Tier::try_from(n)
    }
}

/// A kind written in the seeds' own words: seed 001's error types (`SKILL_TIMEOUT`,
/// `SKILL_ERROR`, `VALIDATION_FAILURE`, `QUALITY_FAILURE`), seed 002's failure definitions
/// (`timeout_exceeded`, `agent_crash`), the words of seed 001's messages (`Timeout`,
/// `Validation error`), or SPEC §5's own; with the seed's category when the word names one.
pub fn seed_kind(word: &str) -> Option<(Kind, Option<Category>)> {
    let w: String = word
        .trim()
        .chars()
        .map(|c| match c {
            ' ' | '-' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect();
    use Category::*;
    let seed = match w.as_str() {
        "TIMEOUT" | "SKILL_TIMEOUT" | "TIMEOUT_EXCEEDED" | "AGENT_TIMEOUT" | "STAGE_TIMEOUT" => {
            Some((Kind::Timeout, Transient))
        }
        "RATE_LIMIT" | "RATE_LIMITED" => Some((Kind::RateLimited, Transient)),
        "NETWORK_ERROR" | "NETWORK_FAILURE" => Some((Kind::NetworkError, Transient)),
        // "Invalid output, crash, assertion failure": halt and report.
        "SKILL_ERROR" | "AGENT_CRASH" | "CRASH" => Some((Kind::Crash, SkillError)),
        "VALIDATION_FAILURE" | "VALIDATION_ERROR" | "VALIDATION_FAILED" | "HANDOFF_INVALID"
        | "INVALID_OUTPUT" => Some((Kind::ValidationFailed, ValidationFailure)),
        "OUTPUT_MISSING" | "EMPTY_OUTPUT" | "MISSING_OUTPUT" => {
            Some((Kind::OutputMissing, ValidationFailure))
        }
        "QUALITY_FAILURE" | "QUALITY_FAILED" | "LOW_QUALITY" => {
            Some((Kind::QualityFailed, QualityFailure))
        }
        _ => None,
    };
    if let Some((k, c)) = seed {
        return Some((k, Some(c)));
    }
    let lower = w.to_ascii_lowercase();
    let lower = lower.strip_prefix("skill_").unwrap_or(&lower);
    lower.parse().ok().map(|k| (k, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_words_name_kinds_and_categories() {
        assert_eq!(
            seed_kind("SKILL_TIMEOUT"),
            Some((Kind::Timeout, Some(Category::Transient)))
        );
        assert_eq!(
            seed_kind("Validation error"),
            Some((Kind::ValidationFailed, Some(Category::ValidationFailure)))
        );
        assert_eq!(
            seed_kind("QUALITY_FAILURE"),
            Some((Kind::QualityFailed, Some(Category::QualityFailure)))
        );
        assert_eq!(
            seed_kind("SKILL_ERROR"),
            Some((Kind::Crash, Some(Category::SkillError)))
        );
        assert_eq!(seed_kind("build_failed"), Some((Kind::BuildFailed, None)));
        assert_eq!(
            seed_kind("timeout"),
            Some((Kind::Timeout, Some(Category::Transient)))
        );
        assert_eq!(seed_kind("enum"), None);
    }

    #[test]
    fn wire_names_round_trip() {
        for k in Kind::ALL {
            let json = serde_json::to_string(k).expect("serialize");
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(k.as_str().parse::<Kind>().as_ref(), Ok(k));
        }
        assert_eq!(Kind::ALL.len(), 32);
        assert_eq!(
            serde_json::to_string(&Tier::EscalationRequired).ok(),
            Some("2".into())
        );
        assert!(serde_json::from_str::<Tier>("4").is_err());
        assert_eq!(Action::ProceedDegraded.to_string(), "proceed_degraded");
        // SPEC §5 grew with seed 004's rows; `unknown` stays last.
        assert_eq!(Kind::ALL.last(), Some(&Kind::Unknown));
        assert_eq!("target_not_found".parse::<Kind>(), Ok(Kind::TargetNotFound));
        assert_eq!(
            serde_json::to_string(&Class::Work).ok(),
            Some("\"work\"".into())
        );
        assert_eq!("trouble".parse::<Class>(), Ok(Class::Trouble));
        assert_eq!("dependencies".parse::<Family>(), Ok(Family::Dependencies));
    }

    #[test]
    fn the_agents_own_families_are_work_and_the_rest_trouble() {
        let work: Vec<&str> = Family::ALL
            .iter()
            .filter(|f| f.default_class() == Class::Work)
            .map(|f| f.as_str())
            .collect();
        assert_eq!(
            work,
            [
                "tests",
                "build",
                "checks",
                "search",
                "dependencies",
                "usage"
            ]
        );
        assert_eq!(Family::Other.default_class(), Class::Trouble);
        assert_eq!(Class::default(), Class::Trouble);
    }

    /// Seed 001's "Severity Indicators".
    #[test]
    fn severities_carry_priorities_p0_to_p3() {
        let p: Vec<&str> = Severity::ALL.iter().map(|s| s.priority()).collect();
        assert_eq!(p, ["P0", "P1", "P2", "P3"]);
    }

    #[test]
    fn unknown_word_names_the_choices() {
        let err = "slow".parse::<Severity>().expect_err("not a severity");
        assert!(err.contains("critical, error, warning, info"), "{err}");
    }
}
