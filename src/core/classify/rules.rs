//! The rules that decide a kind: each kind's defaults (seed 004 §3.2 tiers, seed 001 categories
//! and severities, seed 003 retryability), and the built-in matchers for what tools print, in
//! the order of precedence that [`super`] describes.
//!
//! Order matters: the specific wordings (Claude Code's timeout line, compiler and test-runner
//! output, parse errors) come before the generic ones, so a pytest run that fails on a
//! `ConnectionRefusedError` is a failed test, and a test run cut off by Claude Code's timeout
//! is a timeout.

use crate::core::vocab::{Action, Category, Class, Kind, Severity, Tier};

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
    /// At most this many attempts (seed 004: "retry 1x, then proceed"); the policy's
    /// `[retry.kinds.KIND]` still wins.
    pub max_attempts: Option<u32>,
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
        max_attempts: None,
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
            "Retry once; if it still fails, proceed without that service",
        ]),
        // Seed 003: "tool_failure: retry once".
        Kind::ToolFailure => KindDefaults {
            max_attempts: Some(2),
            ..d(SkillError, EscalationRequired, true, Error, Escalate, "failed", &[
                "Retry once; if it fails again, report what the tool printed",
            ])
        },
        Kind::PermissionDenied => d(SkillError, EscalationRequired, false, Error, AskUser, "was denied permission", &[
            "Check the file's owner and mode, or ask the user to grant access",
            "Do not retry the same call: it will be denied again",
        ]),
        Kind::NotFound => d(SkillError, SelfRecoverable, false, Warning, ProceedDegraded, "did not find what it needed", &[
            "Check the path or name (list the folder, or `command -v` the program)",
            "Create it from a template, or skip this step with a warning",
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
            "Route the output to the user for review: accept, retry or abort",
        ]),
        Kind::OutputMissing => d(ValidationFailure, EscalationRequired, false, Error, Escalate, "produced no usable output", &[
            "Check that the output file exists and is complete; regenerate, fix or abort",
        ]),
        Kind::BuildFailed => d(SkillError, EscalationRequired, false, Error, Escalate, "failed to build", &[
            "Fix the reported compile errors at the file:line positions, then build again",
        ]),
        Kind::TestFailed => d(SkillError, EscalationRequired, false, Error, Escalate, "has failing tests", &[
            "Read the first failing test's assertion and fix the code, then rerun that test",
        ]),
        Kind::CorpusError => d(SkillError, SelfRecoverable, false, Warning, ProceedDegraded, "hit a corpus problem", &[
            "Continue without the corpus and note the gap",
        ]),
        Kind::Crash => d(SkillError, EscalationRequired, false, Error, Escalate, "crashed", &[
            "Read the panic or signal and the last lines before it; report them if the cause is not yours",
        ]),
        Kind::ContextExhausted => d(SkillError, EscalationRequired, false, Error, Escalate, "ran out of context", &[
            "Save progress, then continue in a fresh context with a smaller input",
            "Read files in parts (offset and limit) instead of whole",
        ]),
        Kind::AuthFailed => d(SkillError, EscalationRequired, false, Critical, AskUser, "could not authenticate", &[
            "Ask the user to check the API key, login or billing; retrying will not help",
        ]),
        Kind::Interrupted => d(Transient, EscalationRequired, false, Info, AskUser, "was interrupted", &[
            "Ask the user whether to resume; do not restart the step on your own",
        ]),
        Kind::ToolUnavailable => KindDefaults {
            max_attempts: Some(2),
            ..d(Transient, SelfRecoverable, true, Warning, ProceedDegraded, "found a tool or MCP server unavailable", &[
                "Retry once; if it is still unavailable, go on without that tool and say what is missing",
                "Check the server (`claude mcp list`, `/mcp`): its command, URL or credentials",
            ])
        },
        Kind::HookFailed => d(SkillError, SelfRecoverable, false, Warning, ProceedDegraded, "hit a failing hook", &[
            "Hooks are best effort: the hook failed, not the call; do not repeat the call because of it",
            "Fix the hook script (run it by hand with the payload on stdin); a jq parse error means its input or its filter is wrong",
        ]),
        Kind::TargetNotFound => d(SkillError, EscalationRequired, false, Error, Escalate, "could not reach its task or message target", &[
            "The task or agent is gone: work from the task content you already have and alert the coordinator or lead",
            "Do not resend to an agent that is not running; ask for it to be re-spawned",
        ]),
        Kind::Unresponsive => d(Transient, EscalationRequired, false, Error, Escalate, "got no answer in time", &[
            "Send one status query; if there is still no answer, escalate to the lead for a re-spawn",
        ]),
        Kind::GateFailed => d(QualityFailure, PipelineAffecting, false, Critical, Escalate, "failed its gate", &[
            "Stop the pipeline here: the lead decides whether to retry, skip or abort",
            "Keep the gate's findings with the error so the decision can be made from them",
        ]),
        Kind::StateCorrupt => d(ValidationFailure, PipelineAffecting, false, Critical, Escalate, "found its state corrupt", &[
            "Stop writing to it; recover the last good copy (`triage state-read` falls back to .bak, then a checkpoint) or re-create it from the conversation",
        ]),
        Kind::PhaseFailed => d(SkillError, PipelineAffecting, false, Critical, Escalate, "cannot go on: the phase failed", &[
            "Stop retrying: the lead decides whether to re-spawn, skip the phase or abort the pipeline",
            "Keep every worker's output and error for that decision",
        ]),
        // Issue 29's kinds. A person must pay before anything passes: not a rate limit.
        Kind::Billing => d(SkillError, EscalationRequired, false, Critical, AskUser, "was refused for billing (no credit or quota left)", &[
            "Ask the user to add credit or raise the plan's quota (the message says where); until then every request is refused",
            "Do not retry or wait it out: this is not a rate limit",
        ]),
        // Another process holds the lock: waiting may clear it, a stale lock needs a person.
        Kind::LockBusy => KindDefaults {
            max_attempts: Some(2),
            ..d(Transient, SelfRecoverable, true, Warning, AskUser, "found a lock held by another process", &[
                "Another process holds the lock: wait for it to finish (find it with `ps` or `lsof`), then retry once",
                "If no process holds it (a stale lock left by a crash), ask the user before removing the lock file or forcing an unlock",
            ])
        },
        // The agent's own loop (work): the manifest asks for what cannot be had together.
        Kind::DependencyConflict => d(SkillError, SelfRecoverable, false, Error, Escalate, "could not resolve its dependencies", &[
            "Fix the version constraints, or update the lockfile so it matches the manifest, then install again",
            "For npm peer conflicts, align the versions; use --legacy-peer-deps or --force only if the user agrees",
        ]),
        // Lint, type, format and coverage checks that did their job (work).
        Kind::CheckFailed => d(QualityFailure, SelfRecoverable, false, Error, Escalate, "reported problems in the code", &[
            "Fix the reported problems at the file:line positions (or run the tool's fixer when it offers one), then run the check again",
            "Coverage under its threshold: test the uncovered code rather than lower the threshold",
        ]),
        // A search that found nothing: an answer, not a fault (work).
        Kind::NoMatch => d(SkillError, SelfRecoverable, false, Info, ProceedDegraded, "found no match", &[
            "No line matched: that is the search's answer, not a fault; widen the pattern or the paths if a match was expected",
        ]),
        Kind::Unknown => d(SkillError, EscalationRequired, false, Error, Escalate, "failed", &[
            "Read the full error output; add a [[classify.rules]] entry if this failure recurs",
        ]),
    }
}

/// One built-in text matcher, with what it says beyond its kind. Everything a rule decides is
/// in its entry here, so the table is the single source of truth for the matching code.
#[derive(Debug)]
pub struct TextRule {
    /// Shown as `builtin:NAME`.
    pub name: &'static str,
    /// The kind it decides.
    pub kind: Kind,
    /// The regex (written for ASCII-lowercased text; `(?i)` is implied).
    pub pattern: &'static str,
    /// A tier other than the kind's.
    pub tier: Option<Tier>,
    /// A severity other than the kind's.
    pub severity: Option<Severity>,
    /// A retryability other than the kind's.
    pub retryable: Option<bool>,
    /// At most this many attempts (the policy's `[retry.kinds.KIND]` still wins).
    pub max_attempts: Option<u32>,
    /// Seconds to wait before the retry, instead of the schedule's.
    pub delay_s: Option<u32>,
    /// Suggestions that replace the kind's.
    pub advice: &'static [&'static str],
    /// The action when it is not retried, or out of attempts (`proceed_degraded`: go on and
    /// say what is missing), instead of the kind's.
    pub fallback: Option<Action>,
    /// The side of the work/trouble line, where the wording says more than the kind's family
    /// (a push behind its remote is the agent's own loop though `tool_failure` is not).
    pub class: Option<Class>,
}

const fn rule(name: &'static str, kind: Kind, pattern: &'static str) -> TextRule {
    TextRule {
        name,
        kind,
        pattern,
        tier: None,
        severity: None,
        retryable: None,
        max_attempts: None,
        delay_s: None,
        advice: &[],
        fallback: None,
        class: None,
    }
}

impl TextRule {
    const fn tier(self, tier: Tier) -> TextRule {
        TextRule {
            tier: Some(tier),
            ..self
        }
    }
    const fn severity(self, severity: Severity) -> TextRule {
        TextRule {
            severity: Some(severity),
            ..self
        }
    }
    const fn retryable(self, retryable: bool) -> TextRule {
        TextRule {
            retryable: Some(retryable),
            ..self
        }
    }
    const fn attempts(self, max: u32, delay_s: u32) -> TextRule {
        TextRule {
            max_attempts: Some(max),
            delay_s: Some(delay_s),
            ..self
        }
    }
    const fn max_attempts(self, max: u32) -> TextRule {
        TextRule {
            max_attempts: Some(max),
            ..self
        }
    }
    const fn advice(self, advice: &'static [&'static str]) -> TextRule {
        TextRule { advice, ..self }
    }
    const fn fallback(self, action: Action) -> TextRule {
        TextRule {
            fallback: Some(action),
            ..self
        }
    }
    const fn class(self, class: Class) -> TextRule {
        TextRule {
            class: Some(class),
            ..self
        }
    }
}

/// Wordings that decide on their own, before any HTTP status: a wrapper that says whose failure
/// it is (a hook's, the edit tool's), compiler and test-runner output, parse errors, limits and
/// seed 004's pipeline conditions. The first rule (in this order) that matches decides.
pub const SPECIFIC: &[TextRule] = &[
    // Claude Code wraps a hook's failure as "<Event>:<Tool> hook error"; a deny or an exit-2
    // block arrives the same way, with the reason after it.
    rule(
        "hook-deny",
        Kind::PermissionDenied,
        r"hook (?:error|stopped continuation)\b.{0,200}\b(?:blocked|deny|denied|forbidden|not allowed|refused|rejected)\b|hook (?:stopped|prevented) continuation|hook \(blocked\)|blocked by (?:a |the )?(?:[\w:-]+ )?hook\b|operation blocked by hook|hook command (?:completed|exited) with status 2\b",
    ),
    // A hook that crashed, timed out or printed what the client cannot use; the tool call went
    // on (seed 004: hooks never block, best effort).
    rule(
        "hook-error",
        Kind::HookFailed,
        r"\bhook error\b|\bhook (?:\[[^\]\n]{0,300}\] )?failed\b|failed with non-blocking status code|hook cancelled|hook blocking error|\bhook timed out|hook command (?:completed|exited) with status [1-9]|hook output (?:does not start|is not valid|looks like)|\bhook \(failed\)|\bhook: \w+ failed\b|\bhook returned invalid",
    ),
    rule(
        "edit-mismatch",
        Kind::InvalidInput,
        r"string to replace (?:was )?not found|old_?string (?:was )?not found|occurrences? found for old_?string|could not find old_?string|unable to find insert_(?:after|before)|file has not been read yet|has not been read in this session|must read (?:the )?file before|read it first before writing|file has been (?:unexpectedly )?modified since (?:it was )?read|found \d+ matches of the string to replace",
    )
    .tier(Tier::SelfRecoverable)
    .advice(&[
        "Read the file again, then copy old_string exactly as Read shows it (whitespace, indentation, line endings)",
        "Make old_string unique (include more surrounding lines) or set replace_all; do not repeat the same edit unchanged",
    ]),
    // The client's own permission denials: its mode ("don't ask"), its rules ("Permission to
    // use Bash with command … has been denied"), the auto mode classifier, a background agent
    // asking for a permission nobody granted. Whatever the quoted command says (a test run, a
    // timeout flag), the call was never run.
    rule(
        "client-deny",
        Kind::PermissionDenied,
        r"\bpermission to use [\w-]+ (?:with command .{1,400} )?has been denied|\bpermission for this action (?:was|has been) denied|\bdenied by (?:the )?(?:claude code )?auto mode classifier|\brequested permissions? to .{1,300}but you haven.t granted it",
    )
    .advice(&[
        "The client denied this call (its permission mode or rules): do not repeat it; do the step another way or ask the user to allow it",
    ]),
    // Billing: no credit left, a quota only paying ends, HTTP 402. A person must pay; waiting
    // does not help, so it outranks the HTTP status (a 400 invalid_request_error, OpenAI's 429
    // insufficient_quota) and the rate-limit wordings.
    rule(
        "billing",
        Kind::Billing,
        r"credit balance (?:is )?too low|\binsufficient[_ ](?:quota|credits?|funds|balance)\b|exceeded your current quota|requires? more credits|can only afford \d+|\bbilling_error\b|\bpayment required\b|\bout of (?:api )?credits\b|(?:add|purchase|buy) (?:more )?(?:funds|credits)\b|check your plan and billing",
    ),
    // Claude's plan limits: "Claude AI usage limit reached|<epoch>", "You've hit your limit ·
    // resets 9am (Europe/London)", "Opus weekly limit reached ∙ resets Oct 31, 9am".
    rule(
        "usage-limit",
        Kind::RateLimited,
        r"usage limit reached|you.{1,3}ve hit your (?:\w+ )?limit|you have hit your (?:\w+ )?limit|\b(?:weekly|opus|sonnet|session|5-hour|daily) limit reached|limit will reset",
    )
    .advice(&[
        "Wait until the limit resets (retry_after_s, retry_at), or ask the user to switch plan or model",
        "Do not retry before the reset: every request until then is refused",
    ]),
    // The API refused the request's content; the same request is refused again.
    rule(
        "usage-policy",
        Kind::InvalidInput,
        r"violate our usage policy|blocked under anthropic.s usage policy",
    )
    .advice(&[
        "The API refused this request's content (Usage Policy): do not resend it unchanged; rephrase, leave out the content that triggered it, or start a new session",
        "If the refusal looks wrong, tell the user: it may be a false positive",
    ]),
    // `go test`'s own deadline: the suite ran past `-timeout` and the runner stopped it with a
    // panic naming the tests still running. The tests are what is slow: the agent's loop.
    rule(
        "go-test-timeout",
        Kind::TestFailed,
        r"\bpanic: test timed out after\b",
    ),
    rule(
        "cc-timeout",
        Kind::Timeout,
        r"command timed out after|timed out after \d|stream idle timeout|\bidle timeout\b",
    ),
    rule(
        "context-exhausted",
        Kind::ContextExhausted,
        r"prompt is too long|context[_ ]length[_ ]exceeded|maximum context length|exceeds? the context window|context window (?:is )?(?:full|exceeded)|input is too long for|too many (?:input )?tokens|conversation too long|error during compaction|output token maximum|exceeded the \d+ output tokens?|\bexceeds? (?:the )?(?:model.s )?context (?:limit|length|window|size)\b|\binput length \(\d+ tokens?\) exceeds\b|\bexceeds? the maximum (?:allowed )?(?:input |context )?length \(\d+ tokens?\)|reduce the length of the messages|\bexceeds? (?:the )?(?:model.s )?(?:maximum )?token limit\b|\btoken limit (?:exceeded|reached)\b",
    ),
    // Seed 004: "Agent context approaching 75%" is tier 2 (save L1/L2/L3, alert the lead).
    rule(
        "context-pressure",
        Kind::ContextExhausted,
        r"\bcontext low\b|context left until auto-?compact|\bcontext (?:window |usage )?(?:is )?(?:at|above|over|approaching|reached) \d{2,3} ?%|\b\d{2,3} ?% of (?:the |its |your )?context\b",
    )
    .severity(Severity::Warning)
    .advice(&[
        "Save progress now (checkpoint the state), then alert the coordinator or lead",
        "Compact or continue in a fresh context before the window fills",
    ]),
    rule(
        "too-large",
        Kind::InvalidInput,
        r"exceeds maximum allowed (?:size|tokens)",
    ),
    // Seed 004 §3.2: a task or message target that is gone (TaskGet, SendMessage to a dead
    // agent) is tier 2.
    rule(
        "target-gone",
        Kind::TargetNotFound,
        r"no task found with id|\btask (?:or subtask )?(?:with id )?\S{1,64} (?:was )?not found|\btask not found|taskget failed|no (?:agent|teammate|recipient) (?:named|found|with)|\b(?:agent|teammate|recipient) \S{1,64} (?:was )?not found|\b(?:agent|teammate) \S{1,64} (?:is not running|is not active|has exited|is dead)",
    ),
    // Seed 004: an unresponsive coordinator is tier 3 (the lead takes over its workers).
    rule(
        "coordinator-unresponsive",
        Kind::Unresponsive,
        r"\bcoordinator\b.{0,60}\b(?:unresponsive|not responding|no response|did not respond|has not responded|timed out waiting)",
    )
    .tier(Tier::PipelineAffecting)
    .severity(Severity::Critical)
    .advice(&[
        "Stop waiting on the coordinator: the lead takes over its workers",
    ]),
    rule(
        "unresponsive",
        Kind::Unresponsive,
        r"\b(?:worker|agent|teammate|subagent|peer)\b.{0,60}\b(?:unresponsive|not responding|did not respond|has not responded)|\b(?:worker|agent|teammate|subagent|peer)\b.{0,60}\bno response (?:in|after|within|for)\b|\bno heartbeat\b|heartbeat (?:missed|lost|timed out)",
    ),
    rule(
        "gate-failed",
        Kind::GateFailed,
        r"\bgate\b[\w :#-]{0,20}\b(?:fail|failed)\b",
    ),
    rule(
        "state-corrupt",
        Kind::StateCorrupt,
        r"\bstate\b.{0,40}\bcorrupt|\bcorrupt\w* (?:state|checkpoint|workflow)\b|\bpt corruption|permanent task .{0,30}corrupt",
    ),
    rule(
        "phase-failed",
        Kind::PhaseFailed,
        r"\ball (?:\d+ )?(?:workers|agents|subagents|tasks)\b.{0,40}\bfailed\b|fix[- ]loop (?:was |is )?exhausted|exhausted (?:the |its )?fix[- ]loop",
    ),
    // Lock contention: another process holds a lock the command needs (terraform's state lock,
    // git's index.lock, dpkg's frontend lock, a locked database). It decides before the lock
    // table's own status and parse errors (terraform quotes a DynamoDB "status code: 400").
    rule(
        "lock-held",
        Kind::LockBusy,
        r"error acquiring the state lock|\berror locking (?:destination )?state\b|(?:could not|couldn't|unable to|failed to|cannot) (?:acquire|obtain|get|take) (?:the |a )?(?:[\w-]+ ){0,2}lock\b|\block acquisition failed|\.lock'?: file exists|\bis locked by another (?:process|user|session)|another git process seems to be running|\block is (?:already )?held by|\bdatabase is locked\b",
    ),
    // Database servers: a deadlock the server broke by aborting one transaction (retrying the
    // transaction is the remedy the server names), and a server at its connection limit.
    rule(
        "db-deadlock",
        Kind::LockBusy,
        r"\bdeadlock detected\b|\bdeadlockdetected\b|\bdeadlock found when trying to get lock\b|\bwas deadlocked on (?:lock|communication buffer|thread)\b|\bchosen as the deadlock victim\b|\bwaits for \w+ ?lock on (?:transaction|relation|tuple)\b.{0,100}\bblocked by process\b|\block wait timeout exceeded\b|\bcanceling statement due to lock timeout\b|\ber_lock_deadlock\b|\b40p01\b|\bdeadlockloser\w*|could not serialize access due to concurrent update|\berror 1213\b|\bwas deadlocked\b",
    ),
    rule(
        "db-connections",
        Kind::Overloaded,
        r"\btoo many clients already\b|\btoo many connections\b|exceeded the 'max_user_connections' resource|\bremaining connection slots are reserved\b|\bqueuepool limit of size \d+ overflow \d+ reached\b|\bconnection pool (?:is )?exhausted\b|\btimeout waiting for (?:a )?(?:idle )?(?:object|connection) from (?:the )?pool\b|\bmax number of clients reached\b|\bmaximum number of (?:sessions|processes|connections) exceeded\b|\bconnection is not available, request timed out\b|\ber_con_count_error\b|\btoo many (?:open |active )?(?:connections|clients)\b|\bconnection limit (?:exceeded|reached)\b|timed out fetching a new connection from the connection pool|pool timed out while waiting for an open connection|unable to acquire (?:a )?(?:jdbc )?connection from (?:the )?pool|cannot get a connection, pool error|\bconnection pool (?:is )?full\b",
    ),
    // Proxies and meshes: the proxy asked for credentials (407), refused the tunnel, or the
    // mesh could not reach the service behind it. Before the HTTP statuses (a 403 from a proxy
    // is not the API's refusal).
    rule(
        "proxy-auth",
        Kind::AuthFailed,
        r"\b407 proxy authentication required\b|proxy authentication required|received http code 407 from proxy|(?:tunnel|statuscode=|response code |response )\b407\b|\bhttp/1\.[01] 407\b",
    ),
    rule(
        "proxy-refused",
        Kind::NetworkError,
        r"connect tunnel failed, response \d{3}|upstream connect error or disconnect/reset before headers|\btunnel connection failed\b|\bproxy tunnel request to proxy\b|\bcannot connect to proxy\b|\bunable to connect to proxy\b|\bproxy connect aborted\b|\breceived http code \d{3} from proxy\b|\bunable to tunnel through proxy\b",
    ),
    // A gateway (nginx, a mesh) whose upstream closed, refused or did not answer: its own log
    // line says so, whatever status it then sent.
    rule(
        "gateway-upstream",
        Kind::NetworkError,
        r"\bupstream prematurely closed (?:the )?connection\b|\bupstream timed out \(110\b|\bno live upstreams\b|\bwhile (?:reading response header from|connecting to|sending request to|reading upstream from) upstream\b|\bfrom upstream, client: |\bno healthy upstream\b|\bdelayed connect error\b|\bupstream_reset_before_response_started\b|\bupstream reset: reset reason\b",
    ),
    // Cloud SDKs' authorization refusals that say no status word the generic rules know.
    rule(
        "cloud-denied",
        Kind::PermissionDenied,
        r"authorizationfailed\b|does not have authorization to perform action|\bpermissiondenied: 403\b|\b403 permission_denied\b|\bpermission_denied\b|\biam_permission_denied\b|\bthe caller does not have permission\b|\bpermission '[\w.]+' denied\b|\bdenied on resource\b|\baccessdenied(?:exception)?\b|\bunauthorizedoperation\b|\bis not authorized to perform\b|\bdoes not have [\w.]+ access to\b|\bnot authorized to perform this operation\b|\ban error occurred \(403\)|\binsufficient authentication scopes\b|\bauthorizationpermissionmismatch\b|\bnot authorized to perform this operation\b|\binsufficientaccountpermissions\b|\brefusing to allow an? (?:personal access token|oauth app|github app) to (?:create or )?update workflow",
    ),
    // Cloud credentials the service refused: a session token that expired, a key it does not
    // know, a signature that does not match, a sign-in the directory refused (Azure's AADSTS).
    // Before the HTTP statuses (AWS sends them with 403 and 400).
    rule(
        "cloud-credentials",
        Kind::AuthFailed,
        r"\bexpiredtoken(?:exception)?\b|\bsecurity token included in the request is (?:expired|invalid)\b|\binvalidclienttokenid\b|\bsignaturedoesnotmatch\b|\bunrecognizedclientexception\b|\baadsts\d{5,}\b|\binvalid_grant\b|\bunable to locate credentials\b|\bnocredentialserror\b|\bno credentials (?:were )?found\b|could not load credentials from any providers|\bcredentialsprovidererror\b|could not automatically determine credentials|\bdefaultcredentialserror\b|\bauthenticationfailed\b|\binvalidauthenticationtoken\b|run .az login|\bdefaultazurecredential failed\b",
    ),
    // The kernel's OOM killer: its "Killed process N (name) total-vm:…" line, or its stack.
    rule(
        "oom-killer",
        Kind::Crash,
        r"\bkilled process \d+\b.{0,40}\btotal-vm:|\bout of memory: kill(?:ed)? process\b",
    ),
    // A git host's rules refused the push (GitHub's push protection, rulesets): a person or
    // the commit must change, not the timing.
    rule(
        "push-rules",
        Kind::PermissionDenied,
        r"\bgh013\b|\bgh006\b|repository rule violations|github push protection|\bprotected branch update failed\b|\b(?:pre-receive|protected branch|update) hook declined|\bcannot force-push to a protected branch\b|\bcommits must have verified signatures\b|\bchanges must be made through a pull request\b|\byou.re not authorized to push to this branch\b|\bnot allowed to (?:force )?push code to (?:a )?protected branch|\bcan only be modified through pull requests\b|\bpush cannot contain secrets\b|\bgh007\b|\bnot allowed to push code to this project\b|\bmust have (?:a )?verified signatures?\b",
    ),
    // A Stop hook that blocked the stop: the agent is told to go on, the hook decided.
    rule(
        "stop-block",
        Kind::HookFailed,
        r"\bprompt hook condition was not met\b|^decision: block\b|\bstop hook feedback:|\bstop hook (?:blocked|prevented)\b",
    ),
    // Credentials the service refused by name: a wrong or missing API key.
    rule(
        "api-key",
        Kind::AuthFailed,
        r"\b(?:invalid|incorrect|wrong|missing or invalid|bad|expired|revoked) api[ _-]?key\b|\bapi[ _-]?key (?:is |was )?(?:not valid|invalid|incorrect|expired|revoked)\b",
    ),
    // A client's own words for a connection that failed, with no code behind them.
    rule(
        "connection-words",
        Kind::NetworkError,
        r"\bcheck your internet connection\b|\bconnection failed\. if the problem persists\b",
    ),
    // A tool that crashed in itself rather than judged the code: pytest's INTERNALERROR, mypy's
    // INTERNAL ERROR, ESLint's "Oops! Something went wrong!". Before the runners and checkers
    // whose output it otherwise looks like.
    rule(
        "tool-crashed",
        Kind::Crash,
        r"^internalerror> |\berror: internal error -- |oops! something went wrong! :\(|\bthere was an error in the forked process\b|\bthe forked vm terminated without\b",
    ),
    // A compiler (or any process) killed from outside, on Linux usually by the OOM killer: gcc's
    // "Killed signal terminated program cc1plus", cargo's "(signal: 9, SIGKILL: kill)". The
    // make and cargo lines after it look like a build failure; the code is not at fault.
    rule(
        "killed",
        Kind::Crash,
        r"(?:killed )?signal terminated program \w+|internal compiler error: killed|\(signal: 9, sigkill: kill\)|killed \(program cc1\w*\)",
    )
    .retryable(true)
    .max_attempts(2)
    .advice(&[
        "The process was killed from outside (on Linux usually the OOM killer: `dmesg | grep -i oom`): free memory or run fewer jobs at once (make -j1, cargo build -j 1), then run it again",
        "The code is not at fault: do not change it because of this failure",
    ]),
    // Seed 004 §3.2: "jq parse failure in hook" is tier 1 (use a fallback, never block). In a
    // hook's own wrapper it is the hook's failure (`hook-error` above).
    rule("jq", Kind::InvalidInput, r"\bjq: (?:error|parse error)\b")
        .tier(Tier::SelfRecoverable)
        .severity(Severity::Warning)
        .advice(&[
            "The JSON given to jq is not what the filter expects: fall back to a default (`jq -e … || echo default`) and go on",
            "Print the input jq was given to see its shape before changing the filter",
        ]),
    // A body that is not JSON from its first byte (an HTML error page, an empty answer) where a
    // service's JSON answer was expected: the service failed, not the input the agent wrote.
    rule(
        "json-not-an-answer",
        Kind::ToolFailure,
        r"\bunexpected token .{1,3} in json at position 0\b|\bunexpected token '?<'?, \W{0,2}<!doctype",
    ),
    // Python's JSON decoder failing on the first byte (`char 0`): the body is not JSON at all, an
    // empty or HTML answer where a service's JSON was expected; the input is bad, but it is the
    // service's answer, not the agent's own.
    rule(
        "json-empty-answer",
        Kind::InvalidInput,
        r"\bexpecting value: line 1 column 1 \(char 0\)",
    )
    .class(Class::Trouble),
    rule(
        "json-parse",
        Kind::InvalidInput,
        r"jsondecodeerror|in json at position|end of json input|is not valid json|invalid json|json\.parse|json parse error|error parsing json|expecting value: line \d+ column|expected value at line \d+ column|parse error: .* at line \d+, column \d+|jq: error \(at ",
    ),
    rule(
        "yaml-parse",
        Kind::InvalidInput,
        r"yaml\.(?:scanner|parser|constructor)\.\w+|yamlexception|mapping values are not allowed|did not find expected (?:key|node|-)|could not find expected ':'|yaml: line \d+:",
    ),
    rule(
        "rustc",
        Kind::BuildFailed,
        r"error\[e\d{4}\]|error: could not compile|error: aborting due to",
    ),
    rule(
        "tsc",
        Kind::BuildFailed,
        r"\bts(?:1|2|3|4|5|6|7|8|9)\d{3,4}: |unable to compile typescript",
    ),
    rule(
        "gcc",
        Kind::BuildFailed,
        r"\.(?:c|cc|cpp|cxx|h|hpp|m|ino):\d+(?::\d+)?: (?:fatal )?error:|undefined reference to|ld returned \d+ exit status|ninja: build stopped|:\d+(?::\d+)?: error: .{1,200}\b(?:was not declared in this scope|does not name a type|undeclared \(first use|has no member named)\b|:\d+(?::\d+)?: error: no matching function for call to\b|\.(?:swift|mm):\d+:\d+: error:|\berror cs\d{4}:|^e: \S+\.kts?[:(]|^\[error\] \S+\.(?:scala|java):\d+|^compilation terminated\.|^cmake error at |^error(?:\[e\d{4}\])?: [^\n]{1,200}\n\s*--> \S+\.rs:\d+:\d+",
    ),
    rule(
        "go-build",
        Kind::BuildFailed,
        r"\.go:\d+(?::\d+)?: (?:undefined:|cannot use|syntax error|.*(?:imported|declared) (?:and|but) not used|missing return|too many arguments|not enough arguments|no required module provides package)|go: cannot find main module|go: errors parsing go\.mod",
    ),
    // Dependency resolution: the manifest or the lockfile asks for what cannot be had together
    // (npm's ERESOLVE, pip's ResolutionImpossible, uv's "No solution found", cargo's version
    // selection, a frozen lockfile out of date). The agent fixes its manifest: work.
    rule(
        "deps",
        Kind::DependencyConflict,
        r"\beresolve\b|unable to resolve dependency tree|could not resolve dependency|failed to select a version for|candidate versions found which didn't match|no solution found when resolving|requirements are unsatisfiable|\bresolutionimpossible\b|have conflicting dependencies|version solving failed|\bsolverproblemerror\b|could not find compatible versions|\berr_pnpm_(?:outdated_lockfile|frozen_lockfile\w*)\b|cannot install with \W?frozen-lockfile|cannot perform a frozen installation|\block ?file\b.{0,60}needs to be updated|are not in sync\. please update your lock ?file|\bconflicting peer dependency\b|\bunmet dependencies\b|\bheld broken packages\b|requirements could not be resolved to an installable set",
    ),
    // A test runner's verdict that a build tool wraps in its own failure line (Gradle's
    // "> Task :test FAILED" before "BUILD FAILED", a build script's "NUnit test failed" before
    // "Running build failed"): before `build`, the tests are what failed.
    rule(
        "runner-verdict",
        Kind::TestFailed,
        r"^> task :\S*test\S* failed\s*$|^[>\s\d:]*[\w.$]+ > \S[^\n]{0,300} failed\s*$|\bthere were failing tests\b|\bnunit test failed\b|\boverall result: failed\b|^\s*test run failed\.?\s*$",
    ),
    rule(
        "build",
        Kind::BuildFailed,
        r"compilation failed|\bbuild failed\b|compilation error|compilation failure\b|failed to compile|^\s*syntaxerror: |did not complete successfully: exit code|\.java:\[\d+,\d+\] |\.(?:java|kt|scala):\d+: error: |^error in \S+\.(?:[cm]?[jt]sx?|vue|svelte|s?css|less)\b|\brollup failed to resolve import\b|^error during build:|\bmodule build failed\b",
    ),
    // A script or target the project does not have: the agent's command names the wrong one.
    rule(
        "missing-script",
        Kind::InvalidInput,
        r"\bmissing script:|\berr_pnpm_no_script\b|^error command \W[^\n]{1,100}\W not found|\bscript not found \W|no rule to make target '[^'\n]{1,200}'\.\s+stop\.",
    )
    .tier(Tier::SelfRecoverable)
    .advice(&[
        "List the scripts the project has (`npm run`, or the Makefile's targets) and run one of them, or add the missing one",
    ]),
    rule(
        "package-missing",
        Kind::NotFound,
        r"could not find a version that satisfies the requirement|no matching distribution found|is not in (?:this|the npm) registry|couldn't find package|\bcode e404\b|npm err! 404|no matching version found for|\betarget\b|couldn't find any versions for|registry returned 404|manifest (?:for \S+ )?(?:not found|unknown)|\bunable to locate package\b|\bhas no installation candidate\b|could not find gem '|\bno matching package named\b|\berr_pnpm_fetch_404\b",
    )
    .advice(&[
        "Check the package name and version: a typo, a private or removed package, or a version this runtime cannot use",
        "List the versions the registry has (npm view NAME versions, pip index versions NAME) and pick one",
    ]),
    // PEP 668: the system Python refuses pip installs; a refusal, not a broken package.
    rule(
        "pep668",
        Kind::PermissionDenied,
        r"externally-managed-environment|this environment is externally managed",
    )
    .advice(&[
        "Install into a virtual environment (python3 -m venv .venv) or with pipx",
        "Do not pass --break-system-packages unless the user asks for it",
    ]),
    rule(
        "pytest",
        Kind::TestFailed,
        r"^failed \S+::|=+ (?:.*, )?\d+ failed\b|short test summary info|^\s*\d+ failed(?:, \d+ \w+)* in [\d.]+ ?s|^e\s+(?:assert|assertionerror)\b",
    ),
    rule(
        "cargo-test",
        Kind::TestFailed,
        r"test result: failed|error: test failed|^test \S+ \.\.\. failed|^---- \S+ stdout ----\s*$|^failures:\s*$|panic did not contain expected string",
    ),
    rule(
        "jest",
        Kind::TestFailed,
        r"^tests:\s+\d+ failed|^\s*fail\s+\S+\.(?:test|spec)\.[jt]sx?|expect\(received\)\.|\bexpected .{1,60} to (?:be|equal|deep\.equal|have|include|contain|match)\b|\d+ tests? failed, \d+ tests? passed|^\s*\d+ fail\s*$",
    ),
    rule(
        "go-test",
        Kind::TestFailed,
        r"^--- fail: |^fail\s+\S+\s+[\d.]+s\s*$|^fail: \S+_test\.go:\d+: ",
    ),
    rule("mocha", Kind::TestFailed, r"^\s*\d+ failing\s*$"),
    rule(
        "go-test-line",
        Kind::TestFailed,
        r"--- fail: \S+ \([\d.]+s\)",
    ),
    // A Rust test's panic inside `cargo test`: the thread is the test (its path names a test
    // module or function), so the panic is a failing test, not a crash.
    rule(
        "rust-test-panic",
        Kind::TestFailed,
        r"^thread '[\w:]*test[\w:]*' (?:\(\d+\) )?panicked at\b",
    ),
    rule(
        "rspec",
        Kind::TestFailed,
        r"^\s*\d+ examples?, [1-9]\d* failures?\b|^rspec \./\S+:\d+|^\s*failure/error: ",
    ),
    rule(
        "junit",
        Kind::TestFailed,
        r"\bthere are test failures\b|\btests run: \d+, failures: [1-9]|\btests run: \d+, failures: \d+, errors: [1-9]\d*, skipped: \d+.{0,40}<<< failure!",
    ),
    rule(
        "dotnet-test",
        Kind::TestFailed,
        r"\bassert\.\w+ failed\. expected:|^\s*failed!\s+-\s+failed:\s+[1-9]",
    ),
    rule(
        "exunit",
        Kind::TestFailed,
        r"^\s*\d+ tests?, [1-9]\d* failures?\b|\(exunit\.\w+error\)",
    ),
    rule(
        "xctest",
        Kind::TestFailed,
        r"\bxctassert\w* failed\b|executed \d+ tests?, with [1-9]\d* failures?",
    ),
    // Test runners' own verdicts and assertion messages: JUnit and Gradle, PHPUnit, .NET
    // (vstest, NUnit, xUnit, MSTest), RSpec, ExUnit, a Rust test's assertion panic, pytest's and
    // node's assertion errors. After the runners above, whose own lines
    // say more.
    rule(
        "test-verdict",
        Kind::TestFailed,
        r"\bjava\.lang\.assertionerror\b|\borg\.opentest4j\.\w+error\b|\bjunit\.framework\.(?:assertionfailederror|comparisonfailure)\b|\bexpected:\s?<[^>\n]{0,200}> but was:\s?<|<<< failure!|^failed tests:\s*$|^> task :\S*test\S* failed\s*$|^[>\s\d:]*[\w.$]+ > \S[^\n]{0,300} failed\s*$|\bfailed asserting that\b|^\s*there (?:was|were) \d+ failures?:|^failures!\s*$|^\s*test run failed\.?\s*$|\boverall result: failed\b|^\s*failed tests - failures: |\bnunit test failed\b|\btest\(s\) failed\.|^\s*but was:\s|\bxunit\.sdk\.\w+exception\b|\bassert\.\w+\(\) failure\b|^test method \S+ threw exception|\(using [=~]{1,3}\)\s*$|\brspec::expectations::expectationnotmeterror\b|^failing scenarios:\s*$|^\s*\d+\) test .{1,300} \([\w.]+\)\s*$|^\s*assertion with \S{1,4} failed\s*$|^assertion failed in \S+:\d+|^\s*thread '(?:[^m'\n]|m[^a'\n]|ma[^i'\n]|mai[^n'\n]|main[^'\n])[^'\n]{0,200}' (?:\(\d+\) )?panicked at '?assertion|^\s*assertion `left [!=]= right` failed|ssertionerror: assert\b|ssertionerror(?: \[err_assertion\])?: \S{1,80} (?:==|!=|===|!==) |={3,} failures ={3,}|\bfail: \S+_test\.go:\d+: |^\s+\S+_test\.go:\d+: |^\s*thread '\w+(?:::\w+)+' (?:\(\d+\) )?panicked at\b|^\s*test files\s+\d+ failed\b|\bassertionerror \[err_assertion\]|^tests: \d+, assertions: \d+, (?:errors|failures): [1-9]|\borg\.junit\.comparisonfailure\b|\bcomparisonfailure: expected:|^\s*failed\s+[\w.]+(?:\([^)\n]*\))? \[\d+(?:\.\d+)? ?m?s\]|\bassert\.\w+ failed\.|^test case '-\[[^\]\n]+\]' failed\b|\(compared using [=~]{1,3}\)|^\s*expected: [^\n]{1,300}\n\s{3,}got: |: error: -\[[^\]\n]+\] : ",
    ),
    // Python refusing the code being written: its indentation.
    rule(
        "python-indent",
        Kind::BuildFailed,
        r"^\s*_?(?:indentationerror|taberror): ",
    ),

    // Checks that did their job: lint, type, format and coverage. After the test runners (a
    // failing test says more than the coverage under it) and the compilers (tsc and clippy
    // are build_failed); before the generic wordings their messages are full of.
    rule(
        "coverage",
        Kind::CheckFailed,
        r"coverage for \w+ \([\d.]+%\) does not meet (?:the )?(?:global )?threshold|coverage threshold for \w+ \([\d.]+%\) not met|required test coverage of [\d.]+% not reached|coverage failure: total of [\d.]+ is less than fail-under",
    ),
    rule(
        "typecheck",
        Kind::CheckFailed,
        r"^\S+\.pyi?:\d+(?::\d+)?: error: |found \d+ errors? in \d+ files? \(checked \d+ source files?\)|^\s+\S+\.pyi?:\d+:\d+ - error: |^\s*\d+ errors?, \d+ warnings?, \d+ (?:informations?|infos?|notes?)\s*$",
    ),
    rule(
        "lint",
        Kind::CheckFailed,
        r"\b\d+ problems? \(\d+ errors?, \d+ warnings?\)|^\s*\d+:\d+\s+(?:error|warning)\s{2}|^\S+\.pyi?:\d+:\d+: [a-z]{1,3}\d{2,4}\b|^found \d+ errors?(?:\(s\))?\.|\d+ files? inspected, \d+ offenses? detected|your code has been rated at|\^-+ sc\d{4} \((?:error|warning|info|style)\)",
    ),
    rule(
        "format-check",
        Kind::CheckFailed,
        r"^would reformat \S|\d+ files? would be reformatted|code style issues (?:were )?found|^diff in \S+ at line \d+:",
    ),
    // Seed 004 §3.2: an MCP server that is unavailable is tier 1, retried once, then the work
    // goes on without it.
    rule(
        "tool-unavailable",
        Kind::ToolUnavailable,
        r"mcp error -32000|mcp server .{0,60}(?:failed|unavailable|not connected|disconnected|closed)|(?:failed|unable) to (?:re)?connect to (?:the )?mcp|error connecting to mcp server|failed to reconnect to |mcp startup incomplete|no such tool available|\btool \S{1,64} not found|tool not available|not available in this environment|_mcp_server\b.{1,12}\bfailed\b|failed to spawn: ",
    ),
    // A tool that printed that it waits for a lock and was cut short there (cargo's "Blocking
    // waiting for file lock"): after the compilers and runners, whose errors would say more.
    rule(
        "lock-wait",
        Kind::LockBusy,
        r"\bblocking waiting for (?:file )?lock\b|\bwaiting for (?:the )?(?:cache |file |exclusive )?lock\b|waiting for the other \w+ (?:instance|process)",
    ),
    rule(
        "git-rejected",
        Kind::ToolFailure,
        r"\(non-fast-forward\)|\(fetch first\)|updates were rejected because",
    )
    .tier(Tier::SelfRecoverable)
    .retryable(false)
    .class(Class::Work)
    .advice(&[
        "Integrate the remote changes first (git pull --rebase), resolve any conflicts, then push again",
        "Do not force-push unless the user asks for it",
    ]),
    // A push refused for a reason no wording above names: the tool's failure.
    rule(
        "git-push-failed",
        Kind::ToolFailure,
        r"failed to push some refs",
    )
    .tier(Tier::SelfRecoverable)
    .retryable(false),
    rule(
        "git-conflict",
        Kind::ToolFailure,
        r"conflict \((?:content|add/add|modify/delete|rename/\w+)\)|merge conflict in |automatic merge failed|fix conflicts and then commit|you have unmerged paths|would be overwritten by (?:merge|checkout)|commit your changes or stash them|refusing to merge unrelated histories|\bcannot pull with rebase: you have unstaged changes\b|\bneed to specify how to reconcile divergent branches\b",
    )
    .tier(Tier::SelfRecoverable)
    .retryable(false)
    .class(Class::Work)
    .advice(&[
        "Resolve the <<<<<<< ======= >>>>>>> markers in the conflicted files, git add them, then continue the merge or rebase",
        "Ask the user when the two sides disagree on intent",
    ]),
    // A port another process holds (docker's "port is already allocated", EADDRINUSE): the
    // other process must go first, like a lock.
    rule(
        "port-in-use",
        Kind::LockBusy,
        r"\bport is already allocated\b|\baddress already in use\b|\beaddrinuse\b",
    ),
    // Kubernetes: an image that cannot be pulled, a pod that keeps crashing.
    rule(
        "k8s-image",
        Kind::ToolFailure,
        r"\b(?:imagepullbackoff|errimagepull|invalidimagename)\b",
    ),
    rule("k8s-crashloop", Kind::Crash, r"\bcrashloopbackoff\b|\bback-off restarting failed container\b"),
    // A service stopped by a signal someone sent (systemd's `status=143`, docker's `Exited
    // (143)`): before the service-down wording its status lines also carry.
    rule(
        "stopped-by-signal",
        Kind::Interrupted,
        r"\(code=exited, status=(?:130|143)\)|\(code=killed, signal=(?:term|int)\)|\bexited \((?:130|143)\)",
    ),
    // A service (systemd's status of a daemon) that is not running.
    rule(
        "daemon-down",
        Kind::ToolUnavailable,
        r"^\s*active: (?:failed|inactive \(dead\)) \(result: [\w-]+\)",
    ),
    // Docker: "Conflict. The container name \"/x\" is already in use by container …".
    rule(
        "name-conflict",
        Kind::ToolFailure,
        r"is already in use by container",
    )
    .tier(Tier::SelfRecoverable)
    .retryable(false)
    .advice(&[
        "Remove or rename the existing container (docker rm -f NAME), or give the new one another name",
    ]),
    rule(
        "disk-full",
        Kind::ToolFailure,
        r"\benospc\b|no space left on device|disk quota exceeded|not enough space on the disk|\binsufficient (?:disk )?space\b|\bout of disk space\b|\bdisk (?:is )?full\b",
    )
    .retryable(false)
    .advice(&[
        "Free disk space (df -h; remove caches, old builds, unused images), then retry",
        "A retry before space is freed fails the same way",
    ]),
    rule(
        "too-many-files",
        Kind::ToolFailure,
        r"\bemfile\b|too many open(?:ed)? files",
    )
    .retryable(false)
    .advice(&[
        "The process ran out of file descriptors: raise the limit (ulimit -n) or watch fewer files, then retry",
    ]),
    // Kubernetes RBAC: "pods is forbidden: User \"x\" cannot list resource \"pods\"".
    rule(
        "k8s-forbidden",
        Kind::PermissionDenied,
        r"\bis forbidden: user |error from server \(forbidden\)",
    ),
    // GitHub answers a rate limit with 403: the wording decides before the status.
    rule(
        "rate-limit",
        Kind::RateLimited,
        r"rate[ _-]?limit|too many requests|quota exceeded|throttl|\brate exceeded\b|\btoomanyrequests\b|\bresource_exhausted\b|\bresource has been exhausted\b|please reduce your request rate|\brequestlimitexceeded\b|\blimitexceededexception\b|\bprovisionedthroughputexceeded",
    ),
    // A 403 that says Forbidden: the caller is known and refused, a permission, not a login.
    // After every wording above: GitHub's rate limit, a proxy's refusal and expired credentials
    // come with a 403 too.
    rule(
        "http-forbidden",
        Kind::PermissionDenied,
        r"\b403[ :-]{1,3}(?:\(?forbidden\b|client error: forbidden\b)|\bforbidden \(403\)|\bforbidden: 403\b",
    ),
    // npm's progress gauge left on screen: the bar, a spinner, then the stage and its log line
    // (`(⠂⠂⠂) ⠙ idealTree:web: sill idealTree buildDeps`). Quoted as the failure, it is a hang;
    // last, so that any error the text also holds decides.
    rule(
        "progress-stalled",
        Kind::Unresponsive,
        r"[)\]|] {1,2}\S{0,4} ?[a-z]\w*:[\w@./-]*:? (?:sill|silly|verb|timing|http fetch)\b",
    )
    .advice(HANG_ADVICE),
];

/// Structured evidence after the HTTP status: the error `type` of the Anthropic and OpenAI
/// APIs, which decides over any incidental word (a client's "Retrying in 37 seconds", "esc to
/// interrupt").
pub const API_TYPES: &[TextRule] = &[
    rule("api-overloaded", Kind::Overloaded, r"\boverloaded_error\b"),
    rule("api-rate-limit", Kind::RateLimited, r"\brate_limit_error\b"),
    rule(
        "api-auth",
        Kind::AuthFailed,
        r"\b(?:authentication_error|permission_error)\b",
    ),
    rule("api-not-found", Kind::NotFound, r"\bnot_found_error\b"),
    rule("api-timeout", Kind::Timeout, r"\btimeout_error\b"),
    rule(
        "api-invalid-request",
        Kind::InvalidInput,
        r"\b(?:invalid_request_error|request_too_large)\b",
    ),
    rule("api-server-error", Kind::Overloaded, r"\bapi_error\b"),
];

/// Generic wordings. The one on the earliest line wins (the first line of a multi-line error
/// weighs more than what follows it); on one line, the first in this order.
pub const GENERIC: &[TextRule] = &[
    // A search tool that says in words it found nothing: first, so on its own line it is the
    // search's answer, while an error on an earlier line (a permission denied) says more.
    rule(
        "no-match-words",
        Kind::NoMatch,
        r"\bno (?:matches|files|results) (?:were )?found\b|\bno matches for\b|\bno files were searched\b|\b0 results in 0 files\b|\bfound 0 (?:total occurrences|lines|files|matches|results)\b",
    ),
    rule(
        "interrupted",
        Kind::Interrupted,
        r"keyboardinterrupt|\[request interrupted by user|interrupted by (?:the )?user|^\^c$|interrupted\W{1,4}what (?:should|do you want) claude|request was aborted|operation was aborted|operation aborted|\baborterror\b|tool use was cancell?ed|\bcancell?ed by (?:the )?user|operation (?:was )?cancell?ed|(?:^|[^\w^\\])\^c(?:[a-z]|\s|$)|\bsignal:? sigint\b|\bsignal: interrupt\b|^make: .{0,100}\binterrupt\b|\(code=exited, status=143\)|\bexited \(143\)|^terminated\s*$|\breceived sigterm\b|\bcaught sigterm\b|\bsignal: terminated\b|\baborted by (?:the )?user\b|\buser aborted\b",
    ),
    rule(
        "auth",
        Kind::AuthFailed,
        r"invalid[ _-](?:x-)?api[ _-]?key|authentication[_ ](?:error|failed)|unauthori[sz]ed|bad credentials|permission denied \(publickey|token (?:has )?expired|token is expired|invalid bearer token|invalid authentication credentials|failed to authenticate|password authentication was removed|host key verification failed|not logged in|\brun /login\b|could not read username|terminal prompts disabled|\bauthentication required\b|\brequires authentication\b|\bmust be authenticated\b|\binvalid credentials\b|\binvalid username or password\b|\bincorrect username or password\b|\b(?:invalid|expired|revoked) (?:access|auth|oauth|bearer|session|refresh|id|api) token\b|\btoken (?:is )?(?:invalid|revoked)\b|remote host identification has changed|too many authentication failures|load key .{1,200}: invalid format|\bnot authenticated\b|\blogin failed for user\b",
    ),
    rule(
        "overloaded",
        Kind::Overloaded,
        r"overloaded|service unavailable|serviceunavailable|server is busy|internal server error|bad gateway|\bis temporarily unavailable\b|\bat capacity\b|\bhigh demand\b",
    ),
    // The word alone, not an option or argument that names it (`--timeout 30`, `timeout=None`,
    // `.timeout(`): a command's echo never decides a timeout, its error lines do.
    rule(
        "timeout",
        Kind::Timeout,
        r"timed out|etimedout|esockettimedout|deadline exceeded|timeouterror|timeoutexception|(?:^|[^-\w.])timeout(?:[^=\w(]|$)|gateway time-?out|\btimeoutexpired\b",
    ),
    rule(
        "tool-error",
        Kind::ToolFailure,
        r"error calling tool|exit handler never called",
    ),
    rule(
        "network",
        Kind::NetworkError,
        r"\b(?:econnrefused|econnreset|enotfound|eai_again|ehostunreach|enetunreach|econnaborted)\b|getaddrinfo|could not resolve host|name or service not known|temporary failure in name resolution|nodename nor servname|connection refused|connection reset|connection error|connection closed|connection aborted|forcibly closed|network is unreachable|no route to host|socket hang up|fetch failed|failed to fetch|failed to establish a new connection|\bdns\b|cannot connect to the docker daemon|\bis (?:your |the )?docker daemon (?:up and )?running\b|\bdial unix \S+\.sock: (?:connect: )?(?:no such file|connection refused)|couldn't connect to|failed to connect to|unable to connect|und_err_socket|was refused|no such host|ssl certificate problem|ssl connect error|certificate verif|handshake failed|remote end hung up|\bstream (?:disconnected|closed) before\b|\bstream (?:ended|terminated) (?:unexpectedly|prematurely)|error decoding response body|\bpremature close\b|self[- ]signed certificate|unable to get local issuer certificate|certificate signed by unknown authority|certificate has expired|\bcert_has_expired\b|\bself_signed_cert_in_chain\b|\bunable_to_verify_leaf_signature\b|\bx509: |certificate is not yet valid|certificate_verify_failed|\bsslcertverificationerror\b|\berr_tls_cert_altname_invalid\b|\bnxdomain\b|\bserver can.t find\b|nxdomain\b|\bunknownhostexception\b|\bunknown host\b|\bname (?:resolution failed|does not resolve)\b|wrong_version_number|\bsslv3 alert\b|\btlsv1 alert\b|\bssl routines\b|\bssl_error_syscall\b|unsafe legacy renegotiation|\bhostname mismatch\b|certificate doesn.t match|unable to verify the first certificate|pkix path building failed|\bschannel: |\bkex_exchange_identification\b|no matching (?:host key type|key exchange method) found|\bserver misbehaving\b|\bunknown (?:mysql )?server host\b|\bno address associated with hostname\b|\bunable to resolve host\b|\bnameresolutionerror\b|\bhost not found\b|failed to lookup address information|\berr_cert_\w+|\bsec_e_untrusted_root\b|ssl connection could not be established|remote certificate is invalid|unable to get issuer certificate|\bcert_not_yet_valid\b|\btls: (?:failed to verify|bad certificate|handshake failure|first record does not look like)|\bsslhandshakeexception\b|\bhandshake_failure\b|\bjavax\.net\.ssl\b|\bconnection failed\b|\bnetwork error\b|\bnet::err_\w+|\berr_network\b|network connection was lost|\bno internet connection\b|\bappear to be offline\b|\byou are offline\b",
    ),
    rule(
        "permission",
        Kind::PermissionDenied,
        r"\b(?:eacces|eperm)\b|permission denied|operation not permitted|access denied|read-only file system|permission to use \w+ has been denied|permission check failed|\bwas blocked\b|insufficient permissions|\bforbidden\b|access to the resource is denied|rejected by the user|user denied|denied by (?:the )?user|invalidated by the user|doesn't want to proceed with this tool use|tool use was rejected|permission to \S{1,100} denied|unprotected private key file|are too open\b|: bad permissions\b|\baccess is denied\b|\bare you root\b|\bmust be run as root\b|\brequires root\b|\bsuperuser privileges\b|\brun as administrator\b|\b(?:administrator|elevated) privileges\b|\b(?:do not|don.t) have permission\b|\binsufficient privileges\b",
    ),
    rule(
        "not-found",
        Kind::NotFound,
        r"\benoent\b|no such file or directory|command not found|filenotfounderror|no module named|not a git repository|cannot find (?:module|package|file)|does not exist|\bnot found\b|could not be found|no logs found|no conversation found|doesn't have a resource type|could not find the requested resource|did not match any files?|or any parent directory|no such (?:container|image|object)\b|\bmake sure (?:it|\S+) is (?:in|on) (?:your |the )?(?:\w+ )?path\b|\bno matching resources found\b|is not recognized as an internal or external command|\bcannot import name\b",
    ),
    rule(
        "schema",
        Kind::InvalidInput,
        r"is a required property|validation errors? for|validationerror|missing (?:required )?field|inputvalidationerror|does not match (?:the )?schema|schema validation|unrecognized (?:arguments?|options?|subcommand)|unexpected argument|invalid (?:argument|option|parameter)|bad request|unknown directive|unknown (?:option|flag)\b|found argument .{1,100} which wasn't expected|following (?:required )?arguments (?:are required|were not (?:supplied|provided))|\beisdir\b|illegal operation on a directory|\benotdir\b|\bmust be non-empty\b|\binvalid value for\b|\bmissing (?:required )?(?:argument|option|parameter)s?\b",
    ),
    rule(
        "crash",
        Kind::Crash,
        r"panicked at|segmentation fault|sigsegv|sigabrt|sigbus|core dumped|fatal runtime error|\bmemoryerror\b|traceback \(most recent call last\)|abort trap|stack overflow|out of memory|oomkilled|^killed$|signal: killed|fatal error: runtime|^panic: |cannot read propert(?:y|ies) of (?:undefined|null)|is not a function\b|maximum call stack size exceeded|unhandledpromiserejection|^\s*fatal error: (?:concurrent map|all goroutines are asleep|unexpected signal|out of memory|stack overflow)|^\s*goroutine \d+ \[[^\]\n]{1,60}\]:\s*$|invoked oom-killer|\boom-kill\b|memory cgroup out of memory|killed\s*$|(?:failed:?|with|\() exit code:? -?137\b|\bexited \(137\)|\bstatus=137\b|\bgenserver \S+ terminating\b|\billegal instruction\b|\bbus error\b|double free or corruption|\bfree\(\): invalid|\bmalloc\(\): |terminate called after throwing an instance of|\bexc_bad_access\b|\bunhandled exception\.|\bfatal python error\b|\bexception in thread \S+ [\w.]+(?:exception|error)\b|\buncaught (?:\w+)?(?:error|exception)\b|\bsigkill\b|\b(?:exited with|exit status|errno|return code|returned) (?:code |status )?-?137\b",
    ),
    // make's own line for a recipe that failed, when no line above it said why: the build.
    rule(
        "make-failed",
        Kind::BuildFailed,
        r"^make(?:\[\d+\])?: \*\*\* \[[^\]\n]{1,200}\] error \d+",
    ),
    // An uncaught exception's own line (`KeyError: 'x'`, `TypeError: …`), when no wording
    // above said more about it.
    rule(
        "exception",
        Kind::Crash,
        r"^[a-z][\w.]*(?:error|exception): ",
    ),
];

/// What to do about a hang: a spinner or progress line with nothing behind it.
const HANG_ADVICE: &[&str] = &[
    "Nothing has moved for a long time: interrupt it, then rerun it with a timeout or in the background and poll, or find what it waits on (a prompt, a lock, the network)",
    "Do not start the same command again while the first may still be running",
];

/// A spinner or status line whose elapsed time is past the longest a tool call may run
/// (`hang`): not a pattern, the elapsed time read and compared decides it.
pub const HANG: TextRule = rule("hang", Kind::Unresponsive, "").advice(HANG_ADVICE);

/// A search (grep, rg, …) whose only answer is its exit status 1: it found nothing. Decided
/// from the command and the exit status, not a pattern.
pub const NO_MATCH: TextRule = rule("no-match", Kind::NoMatch, "");

/// A Claude Code tool call that failed with its `Exit code N` line and nothing any rule above
/// recognises (what `grep` returns on no match, `diff` on a difference): a plain tool failure,
/// retried once (seed 003), with calm advice instead of "stop and report".
pub const TOOL_EXIT: TextRule = rule(
    "tool-exit",
    Kind::ToolFailure,
    r"^(?:error: )?exit code -?\d+\s*$",
)
.tier(Tier::SelfRecoverable)
.severity(Severity::Warning)
.attempts(2, 0)
.fallback(Action::ProceedDegraded)
.advice(&[
    "A non-zero exit without an error message is often an answer, not a fault (grep found no match, diff found differences, test was false): read the output first",
    "Retry once only if the command should have succeeded; if it fails again, say what it printed",
]);

/// The facts read from an error text besides its kind (see `input`), matched like the rules
/// (ASCII-lowercased text, multi-line) by automata built from these patterns. Their captures
/// are read by hand from the span of the leftmost-first match (`input::captures`), so a change
/// to a pattern's groups needs the same change there; a test compares both with `regex`.
pub mod facts {
    /// `usage limit reached|<epoch seconds>`.
    pub const USAGE_EPOCH: &str = r"limit reached\|(\d{9,11})\b";
    /// A usage limit's reset as a wall-clock time: `resets Jan 18, 11:30am (Asia/Calcutta)`.
    pub const USAGE_CLOCK: &str = r"\breset(?:s|ting)?\s+(?:at\s+)?(?:(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? (\d{1,2}),? (?:at )?)?(\d{1,2})(?::(\d{2}))?\s*([ap]m)\b(?:\s*\(([^)\n]{1,40})\))?";
    /// Claude Code's Bash errors start with `Exit code N` (`Error: Exit code N` on screen);
    /// Python says `non-zero exit status N`, CI runners `exited with code N`.
    pub const EXIT_STATUS: &str = r"(?:^(?:error: )?exit code:?|\bwith exit code|exit status|exited with code|non-zero exit status)\s+(-?\d+)";
    /// An HTTP status after what names it: `HTTP/1.1 429`, `status code 401`, `API Error: 529`.
    pub const HTTP_STATUS: &str = r"(?:\bhttp(?:/\d(?:\.\d)?)?[ :]+|\bstatus(?:[ _]?code)?[ :=]+|\berror code[ :=]+|\bapi error:?\s*\(?|\breturned (?:error:?\s*)?|\berror:\s+|\brejected \()([45]\d\d)\b";
    /// An HTTP status before its reason phrase: `429 Too Many Requests`.
    pub const HTTP_PHRASE: &str = r"\b([45]\d\d) (?:too many requests|service unavailable|bad gateway|gateway time-?out|not found|unauthorized|forbidden|bad request|internal server error|unprocessable entity|request timeout)";
    /// `Retry-After: 30`, `retry after 2.5`, `try again in 20s`.
    pub const RETRY_AFTER: &str = r#"retry[-_ ]after["']?\s*[:=]?\s*"?(\d+(?:\.\d+)?)|(?:retry|try again) in (\d+(?:\.\d+)?)\s*s"#;
    /// An errno name.
    pub const ERRNO: &str = r"\b(e(?:noent|acces|perm|connrefused|connreset|notfound|timedout|hostunreach|netunreach|ai_again|pipe|rofs|nospc|mfile))\b";
}

/// The kind an HTTP status stands for, with whether that status is worth a retry when it
/// differs from the kind's default (500 and 502 are server faults: transient).
pub fn http_kind(status: u16) -> Option<Kind> {
    Some(match status {
        429 => Kind::RateLimited,
        500 | 502 | 503 | 529 => Kind::Overloaded,
        401 | 403 | 407 => Kind::AuthFailed,
        402 => Kind::Billing,
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
        "authentication_failed" | "oauth_org_not_allowed" => Kind::AuthFailed,
        "billing_error" => Kind::Billing,
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

    fn all() -> impl Iterator<Item = &'static TextRule> {
        SPECIFIC
            .iter()
            .chain(API_TYPES)
            .chain(GENERIC)
            .chain(std::iter::once(&TOOL_EXIT))
    }

    #[test]
    fn rule_names_are_unique() {
        // That every pattern compiles, is written folded and matches as its automaton does is
        // `automata::tests`'s part.
        let mut names = std::collections::BTreeSet::new();
        for r in all() {
            assert!(names.insert(r.name), "two rules are named {}", r.name);
        }
    }

    #[test]
    fn the_automata_find_what_the_rules_say() {
        use super::super::matching::{api_type, generic, specific, tool_exit};
        let name = |hit: Option<(&TextRule, usize)>| hit.map(|(r, at)| (r.name, at));
        assert_eq!(
            name(specific(b"exit code 1\nerror[e0308]: mismatched types")),
            Some(("rustc", 12))
        );
        assert_eq!(
            name(api_type(b"api error: 529 {\"type\":\"overloaded_error\"}")),
            Some(("api-overloaded", 24))
        );
        assert_eq!(
            name(generic(b"fine\nkilled\nkeyerror: 'x'")),
            Some(("crash", 5))
        );
        assert_eq!(name(tool_exit(b"exit code 1")), Some(("tool-exit", 0)));
        assert_eq!(name(generic(b"all good here")), None);
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

    /// Seed 004 §3.2, row by row: the kind each row stands for, and its tier.
    #[test]
    fn each_kind_of_the_error_to_tier_table_has_its_tier() {
        use Tier::*;
        let rows = [
            (Kind::NotFound, SelfRecoverable),   // file not found during Read
            (Kind::HookFailed, SelfRecoverable), // jq parse failure in hook
            (Kind::ToolUnavailable, SelfRecoverable), // MCP server unavailable
            (Kind::ContextExhausted, EscalationRequired), // context at 75 %, exhaustion
            (Kind::TargetNotFound, EscalationRequired), // TaskGet fails, SendMessage to a dead agent
            (Kind::Unresponsive, EscalationRequired),   // worker unresponsive
            (Kind::GateFailed, PipelineAffecting),      // gate FAIL
            (Kind::StateCorrupt, PipelineAffecting),    // PT corruption
            (Kind::PhaseFailed, PipelineAffecting),     // all workers failed, fix loop exhausted
        ];
        for (k, t) in rows {
            assert_eq!(defaults(k).tier, t, "{k}");
        }
        // MCP unavailable: retry 1x, then proceed without it.
        let d = defaults(Kind::ToolUnavailable);
        assert_eq!(
            (d.max_attempts, d.fallback),
            (Some(2), Action::ProceedDegraded)
        );
        // An unresponsive coordinator is pipeline-affecting.
        let r = SPECIFIC
            .iter()
            .find(|r| r.name == "coordinator-unresponsive")
            .unwrap();
        assert_eq!(
            (r.kind, r.tier),
            (Kind::Unresponsive, Some(PipelineAffecting))
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
