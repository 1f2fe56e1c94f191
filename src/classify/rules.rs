//! The rules that decide a kind: each kind's defaults (seed 004 §3.2 tiers, seed 001 categories
//! and severities, seed 003 retryability), and the built-in matchers for what tools print.
//!
//! Order matters: the specific wordings (Claude Code's timeout line, compiler and test-runner
//! output, parse errors) come before the generic ones, so a pytest run that fails on a
//! `ConnectionRefusedError` is a failed test, and a test run cut off by Claude Code's timeout
//! is a timeout.

use crate::vocab::{Action, Category, Kind, Severity, Tier};
use regex::bytes::{Regex, RegexBuilder};
use std::sync::OnceLock;

/// What a kind means when nothing more specific is said.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KindDefaults {
    /// Seed 001's category.
    pub category: Category,
    /// Seed 004's tier.
    pub tier: Tier,
    /// Seed 003: whether a retry can help.
    pub retryable: bool,
    /// Seed 001's severity.
    pub severity: Severity,
    /// The action when it is not retried (seed 003: ask the user, escalate, or degrade).
    pub fallback: Action,
    /// How the detail line says it.
    pub verb: &'static str,
    /// What to do about it.
    pub suggestions: &'static [&'static str],
}

/// The defaults of `kind`.
pub fn defaults(kind: Kind) -> KindDefaults {
    use Action::*;
    use Category::*;
    use Severity::{Critical, Error, Info, Warning};
    use Tier::*;
    let d = |category, tier, retryable, severity, fallback, verb, suggestions| KindDefaults {
        category,
        tier,
        retryable,
        severity,
        fallback,
        verb,
        suggestions,
    };
    match kind {
        Kind::Timeout => d(Transient, SelfRecoverable, true, Warning, Escalate, "timed out", &[
            "Retry with a longer timeout, or narrow the scope of the step",
            "Run long commands in the background and poll for the result",
        ]),
        Kind::RateLimited => d(Transient, SelfRecoverable, true, Warning, Escalate, "was rate limited", &[
            "Wait before retrying (the server's Retry-After, else 5 s)",
            "Send fewer requests in a burst",
        ]),
        Kind::Overloaded => d(Transient, SelfRecoverable, true, Warning, Escalate, "found the service overloaded or failing", &[
            "Retry after the advised wait; the service is busy, not the request wrong",
        ]),
        Kind::NetworkError => d(Transient, SelfRecoverable, true, Error, ProceedDegraded, "could not reach the network service", &[
            "Check that the host name is right and the service is running",
            "Retry once; if it still fails, proceed without that service (seed 004)",
        ]),
        Kind::ToolFailure => d(SkillError, EscalationRequired, true, Error, Escalate, "failed", &[
            "Retry once; if it fails again, report what the tool printed",
        ]),
        Kind::PermissionDenied => d(SkillError, EscalationRequired, false, Error, AskUser, "was denied permission", &[
            "Check the file's owner and mode, or ask the user to grant access",
            "Do not retry the same call: it will be denied again",
        ]),
        Kind::NotFound => d(SkillError, SelfRecoverable, false, Warning, ProceedDegraded, "did not find what it needed", &[
            "Check the path or name (list the folder, or `command -v` the program)",
            "Create it from a template, or skip this step with a warning (seed 004)",
        ]),
        Kind::InvalidInput => d(ValidationFailure, EscalationRequired, false, Error, AskUser, "got input it cannot use", &[
            "Fix the input so it matches what the tool expects (syntax, required fields, types)",
        ]),
        Kind::SpecAmbiguous => d(ValidationFailure, EscalationRequired, false, Warning, AskUser, "needs a clearer request", &[
            "Ask the user for the missing detail before going on",
        ]),
        Kind::ValidationFailed => d(ValidationFailure, EscalationRequired, false, Error, AskUser, "failed validation", &[
            "Report what was missing; retry only if the user accepts lower standards",
        ]),
        Kind::QualityFailed => d(QualityFailure, EscalationRequired, false, Warning, AskUser, "produced output below the quality bar", &[
            "Route the output to the user for review: accept, retry or abort (seed 001)",
        ]),
        Kind::OutputMissing => d(ValidationFailure, EscalationRequired, false, Error, Escalate, "produced no usable output", &[
            "Check that the output file exists and is complete; regenerate, fix or abort (seed 001)",
        ]),
        Kind::BuildFailed => d(SkillError, EscalationRequired, false, Error, Escalate, "failed to build", &[
            "Fix the reported compile errors at the file:line positions, then build again",
        ]),
        Kind::TestFailed => d(SkillError, EscalationRequired, false, Error, Escalate, "has failing tests", &[
            "Read the first failing test's assertion and fix the code, then rerun that test",
        ]),
        Kind::CorpusError => d(SkillError, SelfRecoverable, false, Warning, ProceedDegraded, "hit a corpus problem", &[
            "Continue without the corpus and note the gap (seed 003)",
        ]),
        Kind::Crash => d(SkillError, EscalationRequired, false, Error, Escalate, "crashed", &[
            "Read the panic or signal and the last lines before it; report them if the cause is not yours",
        ]),
        Kind::ContextExhausted => d(SkillError, EscalationRequired, false, Error, Escalate, "ran out of context", &[
            "Save progress, then continue in a fresh context with a smaller input (seed 004)",
            "Read files in parts (offset and limit) instead of whole",
        ]),
        Kind::AuthFailed => d(SkillError, EscalationRequired, false, Critical, AskUser, "could not authenticate", &[
            "Ask the user to check the API key, login or billing; retrying will not help",
        ]),
        Kind::Interrupted => d(Transient, EscalationRequired, false, Info, AskUser, "was interrupted", &[
            "Ask the user whether to resume; do not restart the step on your own",
        ]),
        Kind::Unknown => d(SkillError, EscalationRequired, false, Error, Escalate, "failed", &[
            "Read the full error output; add a [[classify.rules]] entry if this failure recurs",
        ]),
    }
}

/// One built-in text matcher.
pub struct TextRule {
    /// Shown as `builtin:NAME`.
    pub name: &'static str,
    /// The kind it decides.
    pub kind: Kind,
    /// The regex.
    pub pattern: &'static str,
}

const fn rule(name: &'static str, kind: Kind, pattern: &'static str) -> TextRule {
    TextRule {
        name,
        kind,
        pattern,
    }
}

/// Matchers tried before the HTTP status: specific wordings that decide on their own.
pub const SPECIFIC: &[TextRule] = &[
    rule(
        "interrupted",
        Kind::Interrupted,
        r"KeyboardInterrupt|\[Request interrupted by user|(?i)interrupted by (?:the )?user|^\^C$",
    ),
    rule(
        "cc-timeout",
        Kind::Timeout,
        r"(?i)command timed out after|timed out after \d",
    ),
    rule(
        "context-exhausted",
        Kind::ContextExhausted,
        r"(?i)prompt is too long|context[_ ]length[_ ]exceeded|maximum context length|exceeds? the context window|context window (?:is )?(?:full|exceeded)|input is too long for|too many (?:input )?tokens",
    ),
    rule(
        "too-large",
        Kind::InvalidInput,
        r"(?i)exceeds maximum allowed (?:size|tokens)",
    ),
    rule(
        "json-parse",
        Kind::InvalidInput,
        r"(?i)JSONDecodeError|in JSON at position|end of JSON input|is not valid JSON|invalid JSON|JSON\.parse|expecting value: line \d+ column|expected value at line \d+ column|parse error: .* at line \d+, column \d+",
    ),
    rule(
        "yaml-parse",
        Kind::InvalidInput,
        r"(?i)yaml\.(?:scanner|parser|constructor)\.\w+|YAMLException|mapping values are not allowed|did not find expected (?:key|node|-)|could not find expected ':'|yaml: line \d+:",
    ),
    rule(
        "rustc",
        Kind::BuildFailed,
        r"error\[E\d{4}\]|error: could not compile|error: aborting due to",
    ),
    rule("tsc", Kind::BuildFailed, r"error TS\d{4,5}:"),
    rule(
        "gcc",
        Kind::BuildFailed,
        r"(?m)\.(?:c|cc|cpp|cxx|h|hpp|m):\d+(?::\d+)?: (?:fatal )?error:|undefined reference to|ld returned \d+ exit status",
    ),
    rule(
        "go-build",
        Kind::BuildFailed,
        r"\.go:\d+:\d+: (?:undefined:|cannot use|syntax error|.*(?:imported|declared) and not used|missing return|too many arguments|not enough arguments)",
    ),
    rule(
        "build",
        Kind::BuildFailed,
        r"(?i)compilation failed|\bbuild failed\b|COMPILATION ERROR|failed to compile|SyntaxError: invalid syntax",
    ),
    rule(
        "pytest",
        Kind::TestFailed,
        r"(?m)^FAILED \S+::|=+ (?:.*, )?\d+ failed\b|short test summary info",
    ),
    rule(
        "cargo-test",
        Kind::TestFailed,
        r"(?m)test result: FAILED|error: test failed|^test \S+ \.\.\. FAILED",
    ),
    rule(
        "jest",
        Kind::TestFailed,
        r"(?m)^Tests:\s+\d+ failed|^FAIL\s+\S+\.(?:test|spec)\.[jt]sx?",
    ),
    rule(
        "go-test",
        Kind::TestFailed,
        r"(?m)^--- FAIL: |^FAIL\s+\S+\s+[\d.]+s\s*$",
    ),
    rule("mocha", Kind::TestFailed, r"(?m)^\s*\d+ failing\s*$"),
    // GitHub answers a rate limit with 403: the wording decides before the status.
    rule(
        "rate-limit",
        Kind::RateLimited,
        r"(?i)rate[ _-]?limit|too many requests|quota exceeded|throttl",
    ),
];

/// Matchers tried after the HTTP status: generic wordings.
pub const GENERIC: &[TextRule] = &[
    rule(
        "overloaded",
        Kind::Overloaded,
        r"(?i)overloaded|service unavailable|server is busy|internal server error|bad gateway",
    ),
    rule(
        "auth",
        Kind::AuthFailed,
        r"(?i)invalid[ _-](?:x-)?api[ _-]?key|authentication[_ ](?:error|failed)|unauthori[sz]ed|bad credentials|permission denied \(publickey|token (?:has )?expired|not logged in|/login\b|credit balance is too low|billing",
    ),
    rule(
        "timeout",
        Kind::Timeout,
        r"(?i)timed out|ETIMEDOUT|deadline exceeded|TimeoutError|TimeoutException|timeout of \d+ ?ms exceeded|timeout exceeded|gateway time-?out",
    ),
    rule(
        "network",
        Kind::NetworkError,
        r"\b(?:ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH)\b|(?i)getaddrinfo|could not resolve host|name or service not known|temporary failure in name resolution|nodename nor servname|connection refused|connection reset|network is unreachable|no route to host|socket hang up|fetch failed|failed to establish a new connection|\bDNS\b|cannot connect to the docker daemon|connection aborted|failed to connect to|couldn't connect to server",
    ),
    rule(
        "permission",
        Kind::PermissionDenied,
        r"\b(?:EACCES|EPERM)\b|(?i)permission denied|operation not permitted|access denied|read-only file system",
    ),
    rule(
        "not-found",
        Kind::NotFound,
        r"\bENOENT\b|(?i)no such file or directory|command not found|FileNotFoundError|No module named|not a git repository|cannot find (?:module|package|file)|does not exist|\bnot found\b",
    ),
    rule(
        "schema",
        Kind::InvalidInput,
        r"(?i)is a required property|validation errors? for|ValidationError|missing (?:required )?field|invalid_request_error|InputValidationError|does not match (?:the )?schema|schema validation|unrecognized arguments?|unexpected argument|invalid (?:argument|option|parameter)|bad request",
    ),
    rule(
        "crash",
        Kind::Crash,
        r"(?i)panicked at|segmentation fault|SIGSEGV|SIGABRT|SIGBUS|core dumped|fatal runtime error|Traceback \(most recent call last\)|abort trap|stack overflow|out of memory|OOMKilled|^Killed$|signal: killed|fatal error: runtime|^panic: ",
    ),
];

/// Compiles an ASCII-only, case-folded regex to match against ASCII-lowercased text.
/// The wordings are ASCII; Unicode tables and `(?i)` case expansion would cost ~6 ms of
/// compile time on every call of a one-shot process, folding keeps it near 2 ms at worst.
pub fn ascii(pattern: &str) -> Option<Regex> {
    RegexBuilder::new(&fold(pattern))
        .unicode(false)
        .multi_line(true)
        .build()
        .ok()
}

/// Lowercases a pattern's ASCII letters, leaving escapes (`\S`, `\d`, `\b`) alone, and drops
/// `(?i)`: the text it runs on is lowercased instead.
pub fn fold(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut escaped = false;
    for c in pattern.replace("(?i)", "").chars() {
        out.push(if escaped { c } else { c.to_ascii_lowercase() });
        escaped = !escaped && c == '\\';
    }
    out
}

const N_SPECIFIC: usize = SPECIFIC.len();
const N_GENERIC: usize = GENERIC.len();

/// The first rule of `SPECIFIC` (or `GENERIC`) that matches `lower` (the text, ASCII
/// lowercased), with the byte offset of the match. Each regex is compiled the first time it
/// is needed, so a failure that matches early never pays for the rest.
pub fn first_match(specific: bool, lower: &[u8]) -> Option<(&'static TextRule, usize)> {
    static S: [OnceLock<Option<Regex>>; N_SPECIFIC] = [const { OnceLock::new() }; N_SPECIFIC];
    static G: [OnceLock<Option<Regex>>; N_GENERIC] = [const { OnceLock::new() }; N_GENERIC];
    let (rules, cells): (&'static [TextRule], &'static [OnceLock<Option<Regex>>]) = if specific {
        (SPECIFIC, &S)
    } else {
        (GENERIC, &G)
    };
    rules.iter().zip(cells).find_map(|(r, cell)| {
        if cell.get().is_none() && !may_match(r.pattern, lower) {
            return None;
        }
        let re = cell.get_or_init(|| ascii(r.pattern)).as_ref()?;
        re.find(lower).map(|m| (r, m.start()))
    })
}

/// False only when `pattern` cannot match `lower`: every match of a regex begins with one of
/// the prefixes its syntax tree yields (when they are a finite set), so a text that holds none
/// of them is passed over without compiling the regex — parsing costs a fraction of compiling.
fn may_match(pattern: &str, lower: &[u8]) -> bool {
    use regex_syntax::hir::literal::Extractor;
    let parsed = regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .multi_line(true)
        .build()
        .parse(&fold(pattern));
    let Ok(hir) = parsed else {
        return true;
    };
    match Extractor::new().extract(&hir).literals() {
        None => true,
        Some(prefixes) => prefixes.iter().any(|p| {
            p.as_bytes().is_empty() || memchr::memmem::find(lower, p.as_bytes()).is_some()
        }),
    }
}

/// The kind an HTTP status stands for, with whether that status is worth a retry when it
/// differs from the kind's default (500 and 502 are server faults: transient).
pub fn http_kind(status: u16) -> Option<Kind> {
    Some(match status {
        429 => Kind::RateLimited,
        500 | 502 | 503 | 529 => Kind::Overloaded,
        401 | 403 | 407 => Kind::AuthFailed,
        404 | 410 => Kind::NotFound,
        408 | 504 => Kind::Timeout,
        400 | 413 | 422 => Kind::InvalidInput,
        _ => return None,
    })
}

/// Claude Code's StopFailure `error` words (reference: claude-code-hooks.md §1).
pub fn stop_failure_kind(word: &str) -> Option<Kind> {
    Some(match word {
        "rate_limit" => Kind::RateLimited,
        "overloaded" | "server_error" => Kind::Overloaded,
        "authentication_failed" | "oauth_org_not_allowed" | "billing_error" => Kind::AuthFailed,
        "invalid_request" => Kind::InvalidInput,
        "model_not_found" => Kind::NotFound,
        "max_output_tokens" => Kind::ContextExhausted,
        "unknown" => Kind::Unknown,
        _ => return None,
    })
}

/// The kind an exit status stands for when the text says nothing better, with its rule name
/// and whether it is retryable. 124 is `timeout(1)`; 126/127 are the shell's "cannot execute"
/// and "not found"; 128+N is death by signal N.
pub fn exit_kind(code: i64) -> Option<(Kind, &'static str, bool)> {
    Some(match code {
        124 => (Kind::Timeout, "exit-124", true),
        126 => (Kind::PermissionDenied, "exit-126", false),
        127 => (Kind::NotFound, "exit-127", false),
        130 => (Kind::Interrupted, "exit-130-sigint", false),
        // SIGHUP, SIGKILL (often the OOM killer), SIGPIPE, SIGTERM: killed from outside, so a
        // new attempt may well succeed.
        129 | 137 | 141 | 143 => (Kind::Crash, "exit-signal-killed", true),
        // SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGSEGV and the rest: the program itself failed.
        131..=192 => (Kind::Crash, "exit-signal", false),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_pattern_compiles() {
        for r in SPECIFIC.iter().chain(GENERIC) {
            assert!(ascii(r.pattern).is_some(), "{}", r.name);
        }
        assert_eq!(fold(r"(?i)Foo\S+\d"), r"foo\S+\d");
    }

    #[test]
    fn the_prefilter_never_passes_over_a_rule_that_matches() {
        let texts = [
            "exit code 1\nerror[e0308]: mismatched types",
            "api error: 529 {\"type\":\"overloaded_error\"}",
            "command timed out after 2m 0s",
            "killed",
            "error: enoent: no such file or directory, open 'x'",
            "curl: (6) could not resolve host: example.com",
            "traceback (most recent call last):\n  file \"x.py\"",
            "failed tests/test_x.py::test_a - assertionerror",
            "permission denied (publickey)",
            "http 429 too many requests; retry-after: 30",
        ];
        for r in SPECIFIC.iter().chain(GENERIC) {
            let re = ascii(r.pattern).unwrap();
            for t in texts {
                if re.is_match(t.as_bytes()) {
                    assert!(may_match(r.pattern, t.as_bytes()), "{} on {t:?}", r.name);
                }
            }
        }
        // And it does pass over what cannot match.
        let crash = SPECIFIC
            .iter()
            .chain(GENERIC)
            .find(|r| r.name == "crash")
            .unwrap();
        assert!(!may_match(crash.pattern, b"all good here"));
    }

    #[test]
    fn every_kind_has_defaults_that_are_consistent() {
        for k in Kind::ALL {
            let d = defaults(*k);
            assert!(!d.suggestions.is_empty(), "{k}");
            assert_ne!(
                d.fallback,
                Action::Retry,
                "{k}: the fallback is what to do instead"
            );
        }
        // Seed 003's retryability.
        for k in [Kind::RateLimited, Kind::NetworkError, Kind::ToolFailure] {
            assert!(defaults(k).retryable, "{k}");
        }
        for k in [
            Kind::SpecAmbiguous,
            Kind::InvalidInput,
            Kind::BuildFailed,
            Kind::TestFailed,
        ] {
            assert!(!defaults(k).retryable, "{k}");
        }
        // Seed 004 §3.2: file not found is tier 1, context exhaustion tier 2.
        assert_eq!(defaults(Kind::NotFound).tier, Tier::SelfRecoverable);
        assert_eq!(
            defaults(Kind::ContextExhausted).tier,
            Tier::EscalationRequired
        );
    }

    #[test]
    fn exit_statuses() {
        assert_eq!(exit_kind(124).map(|k| k.0), Some(Kind::Timeout));
        assert_eq!(
            exit_kind(137),
            Some((Kind::Crash, "exit-signal-killed", true))
        );
        assert_eq!(exit_kind(139), Some((Kind::Crash, "exit-signal", false)));
        assert_eq!(exit_kind(1), None);
        assert_eq!(exit_kind(128), None, "git's fatal status is not a signal");
    }
}
