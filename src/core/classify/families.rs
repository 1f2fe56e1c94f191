//! Table tests for issue 18 and issue 15's classification items: the families of errors agents
//! meet (each with real texts, quoted from the address in the comment above it), the order of
//! precedence, seed 004's tier mapping row by row, priorities, usage limits, StopFailure
//! payloads and a tool's plain non-zero exit. The breadth is in tests/data/real_errors.toml;
//! these pin the rule that decides, so a family cannot drift to another rule unnoticed.

use super::*;
use serde_json::json;

fn text(t: &str) -> Value {
    Value::String(t.into())
}

/// A Claude Code PostToolUseFailure payload.
fn tool(name: &str, error: &str) -> Value {
    json!({"hook_event_name": "PostToolUseFailure", "session_id": "s1", "tool_name": name,
        "tool_input": {}, "error": error})
}

/// A Claude Code StopFailure payload: the client's error word and the failed turn's text.
fn stop(word: &str, message: &str) -> Value {
    json!({"hook_event_name": "StopFailure", "session_id": "s1", "error": word,
        "last_assistant_message": message})
}

fn run(input: &Value) -> ErrorObject {
    classify(input, &Overrides::default(), &Policy::default(), 1)
}

fn run_attempt(input: &Value, attempt: u32) -> ErrorObject {
    let o = Overrides {
        attempt: Some(attempt),
        ..Overrides::default()
    };
    classify(input, &o, &Policy::default(), 1)
}

/// Classified at `now` (UTC), with wall-clock reset times read at `offset_h` hours from UTC.
fn run_at(input: &Value, now: &str, offset_h: i32) -> ErrorObject {
    let o = Overrides {
        now: Some(now.parse().expect("now")),
        utc_offset: chrono::FixedOffset::east_opt(offset_h * 3600),
        ..Overrides::default()
    };
    classify(input, &o, &Policy::default(), 1)
}

/// Checks `(input, kind, rule)` rows; every family must have at least `min` rows.
fn check(rows: &[(&str, Value, Kind, &str)], min: usize) {
    let mut wrong = Vec::new();
    let mut per_family = std::collections::BTreeMap::<&str, usize>::new();
    for (family, input, kind, rule) in rows {
        *per_family.entry(family).or_default() += 1;
        let e = run(input);
        let want = format!("builtin:{rule}");
        if (e.kind, e.matched_rule.as_str()) != (*kind, want.as_str()) {
            wrong.push(format!(
                "[{family}] {input}\n  expected {kind} by {want}, got {} by {}",
                e.kind, e.matched_rule
            ));
        }
    }
    for (family, n) in per_family {
        assert!(n >= min, "family {family} has {n} rows, wants {min}");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_families_of_issue_18() {
    use Kind::*;
    let rows = [
        // --- Claude Code's API errors, with their JSON bodies ---
        // https://github.com/anthropics/claude-code/issues/39745
        ("api", text("API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded.\nhttps://docs.claude.com/en/api/errors\"},\"request_id\":\"req_011CZTEFvft13DajMTp9pp64\"}"), Overloaded, "http-529"),
        // https://github.com/Wei-Shaw/claude-relay-service/issues/56
        ("api", text("API Error (429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"This request would exceed your account's rate limit. Please try again later.\"}}) · Retrying in 2892 seconds… (attempt 1/10)"), RateLimited, "rate-limit"),
        // https://github.com/anthropics/claude-code/issues/28606
        ("api", text("API Error: 500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"},\"request_id\":\"req_011CYV9GbvFVLGsuomWdfSnQ\"}"), Overloaded, "http-500"),
        // https://github.com/anthropics/claude-code/issues/20700
        ("api", text("API Error: 400 {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"messages.5.content.1: tool_use ids must be unique\"},\"request_id\":\"req_011CXTCxRaPDNqHNnZnGMEUb\"}"), InvalidInput, "http-400"),
        // https://github.com/anthropics/claude-code/issues/4699
        ("api", text("API Error (Request timed out.) · Retrying in 1 seconds… (attempt 2/10)"), Timeout, "timeout"),
        // https://github.com/link-assistant/hive-mind/issues/1937
        ("api", text("API Error: Stream idle timeout - partial response received"), Timeout, "cc-timeout"),
        // https://github.com/anthropics/claude-code/issues/80825
        ("api", text("API Error: Connection closed mid-response. The response above may be incomplete."), NetworkError, "network"),
        // https://github.com/anthropics/claude-code/issues/1612
        ("api", text("Error: Request was aborted.\n    at Ho._createMessage (file:///Users/mlee27/.npm-global/lib/node_modules/@anthropic-ai/claude-code/cli.js:1373:6810)\n    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)"), Interrupted, "interrupted"),
        // --- usage limits ---
        // https://github.com/anthropics/claude-code/issues/4048
        ("usage", text("Claude AI usage limit reached|1753077600"), RateLimited, "usage-limit"),
        // https://github.com/anthropics/claude-code/issues/15064
        ("usage", text(" ⎿  Claude usage limit reached. Your limit will reset at 9am (America/Chicago)."), RateLimited, "usage-limit"),
        // https://github.com/anthropics/claude-code/issues/59637
        ("usage", text("You've hit your limit · resets 2:10pm (Europe/Moscow)"), RateLimited, "usage-limit"),
        // https://github.com/anthropics/claude-code/issues/10333
        ("usage", text("Opus weekly limit reached ∙ resets Oct 31, 9am"), RateLimited, "usage-limit"),
        // --- context and output limits ---
        // https://github.com/anthropics/claude-code/issues/9527
        ("context", text("Error: Error during compaction: Error: Conversation too long. Press esc twice to go up a few messages and try again."), ContextExhausted, "context-exhausted"),
        // https://github.com/7836246/cursor2api/issues/104
        ("context", text("claude code API Error: Claude's response exceeded the 32000 output token maximum. To configure this behavior, set the CLAUDE_CODE_MAX_OUTPUT_TOKENS environment variable."), ContextExhausted, "context-exhausted"),
        // https://github.com/anthropics/claude-code/issues/12312
        ("context", text("{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"Prompt is too long\"}],\"error\":\"invalid_request\"}}"), ContextExhausted, "context-exhausted"),
        // --- permission denials, by mode or by a hook ---
        // https://github.com/Ivy-Interactive/Ivy-Tendril/issues/604
        ("denied", tool("Bash", "Permission to use Bash has been denied because Claude Code is running in don't ask mode."), PermissionDenied, "client-deny"),
        // https://github.com/nyldn/claude-octopus/issues/629
        ("denied", text("PreToolUse:Bash hook stopped continuation: [Before running tangle phase,\ncheck if there are existing validation results that need review.]: The hook\ncondition references 'existing validation results that need review' before"), PermissionDenied, "hook-deny"),
        // https://github.com/openai/codex/pull/15211
        ("denied", text("PreToolUse hook (blocked)\n  warning: wizard-tower PreToolUse demo blocked a Bash command on purpose."), PermissionDenied, "hook-deny"),
        // https://github.com/cline/cline/pull/12673
        ("denied", text("This tool call was rejected by the user and not executed. NOT a tool or system failure. Clarify with user before proceeding."), PermissionDenied, "permission"),
        // --- the edit tool ---
        // https://github.com/anthropics/claude-code/issues/10117
        ("edit", tool("Edit", "Error: String to replace not found in file."), InvalidInput, "edit-mismatch"),
        // https://github.com/earendil-works/pi/issues/5146
        ("edit", tool("Write", "Error: File has not been read yet. Read it first before writing to it."), InvalidInput, "edit-mismatch"),
        // https://github.com/coder/xum/issues/2732
        ("edit", text("old_string not found in file. The text to replace must exist in the file."), InvalidInput, "edit-mismatch"),
        // --- MCP ---
        // https://github.com/JexinSam/mssql_mcp_server/issues/11
        ("mcp", text("Error connecting to MCP server 'mssql': Connection failed for 'mssql': MCP error -32000: Connection closed"), ToolUnavailable, "tool-unavailable"),
        // https://github.com/allenhutchison/gemini-cli-deep-research/issues/37
        ("mcp", text("Error during discovery for MCP server 'gemini-deep-research': MCP error -32000: Connection closed"), ToolUnavailable, "tool-unavailable"),
        // https://github.com/openai/codex/pull/15531
        ("mcp", text("⚠ MCP startup incomplete (failed: notion, linear)"), ToolUnavailable, "tool-unavailable"),
        // --- hooks ---
        // https://github.com/pcvelz/superpowers/issues/8
        ("hook", text("PreToolUse:Bash hook error"), HookFailed, "hook-error"),
        // https://github.com/IntelligentElectron/universal-netlist/pull/198
        ("hook", text("PreToolUse:Bash hook error: .claude/hooks/enforce-dedicated-tools.sh: line 17:\ndeclare: -A: invalid option"), HookFailed, "hook-error"),
        // https://github.com/anthropics/claude-code/issues/4809
        ("hook", text("PostToolUse:Read [./test-hook.sh] failed with non-blocking status code 1: Warning: This is a non-blocking error"), HookFailed, "hook-error"),
        // Issue 18's own wording of a blocking hook.
        ("hook", text("Error: operation blocked by hook"), PermissionDenied, "hook-deny"),
        // --- interrupts ---
        // https://github.com/anthropics/claude-code/issues/36421
        ("interrupt", text("⎿  Interrupted · What should Claude do instead?"), Interrupted, "interrupted"),
        // https://github.com/anthropics/claude-code/issues/21505
        ("interrupt", text("[Request interrupted by user]"), Interrupted, "interrupted"),
        // https://github.com/anthropics/claude-code/issues/57637
        ("interrupt", text("Error: Request was aborted.\n    at makeRequest (/$bunfs/root/src/entrypoints/cli.js:50:3449)\n    at processTicksAndRejections (native:7:39)"), Interrupted, "interrupted"),
        // --- package managers ---
        // https://github.com/npm/cli/issues/5780
        ("packages", tool("Bash", "Exit code 1\nnpm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree"), DependencyConflict, "deps"),
        // https://github.com/Unitech/pm2/issues/4803
        ("packages", text("npm ERR! code E404\nnpm ERR! 404 Not Found - GET https://registry.npmjs.org/@pm2%2fagent - Not found\nnpm ERR! 404  '@pm2/agent@~1.0.2' is not in the npm registry."), NotFound, "package-missing"),
        // https://github.com/haxtheweb/issues/issues/2369
        ("packages", text("npm error code EACCES\nnpm error syscall mkdir\nnpm error Error: EACCES: permission denied, mkdir '/usr/local/lib/node_modules/@haxtheweb/create/node_modules/@clack/core'"), PermissionDenied, "permission"),
        // https://github.com/svjan5/medtype/issues/12
        ("packages", text("ERROR: Could not find a version that satisfies the requirement torch==1.4.0 (from versions: 0.1.2, 0.1.2.post1, 0.1.2.post2, 1.7.1, 1.8.0, 1.8.1)\nERROR: No matching distribution found for torch==1.4.0"), NotFound, "package-missing"),
        // https://github.com/sixfab/Sixfab_PPP_Installer/issues/41
        ("packages", text("error: externally-managed-environment\n\n× This environment is externally managed"), PermissionDenied, "pep668"),
        // https://github.com/killercup/cargo-edit/issues/861
        ("packages", text("error: failed to select a version for the requirement `clap = \"^4.3.10\"`\ncandidate versions found which didn't match: 3.2.25, 3.2.24, 3.2.23, ..."), DependencyConflict, "deps"),
        // --- git ---
        // https://github.com/jscutlery/semver/issues/570
        ("git", text(" ! [rejected]            main -> main (non-fast-forward)\nerror: failed to push some refs to 'https://github.com/***/***'"), ToolFailure, "git-rejected"),
        // https://github.com/darbaidzeavto/ci_final_exam_test/issues/33
        ("git", text("Auto-merging lib.py\nCONFLICT (content): Merge conflict in lib.py\nAutomatic merge failed; fix conflicts and then commit the result."), ToolFailure, "git-conflict"),
        // https://github.com/theshteves/commit-bot/issues/16
        ("git", text("remote: Support for password authentication was removed on August 13, 2021.\nfatal: Authentication failed for 'https://github.com/KeroAutishima/commit-bot.git/'"), AuthFailed, "auth"),
        // --- the OS, by errno name and text ---
        // https://github.com/Sage-Bionetworks/sage-monorepo/pull/1622
        ("os", text("Internal Error: ENOSPC: no space left on device, write"), ToolFailure, "disk-full"),
        // https://github.com/floatdrop/gulp-watch/issues/158
        ("os", text("[10:57:08] Error: EMFILE: Too many opened files.\n    at Gaze._handleError (/Users/edwinelia/source/cdap/cdap-ui/node_modules/gaze/lib/gaze.js:436:31)"), ToolFailure, "too-many-files"),
        // https://github.com/npm/npm/issues/10135
        ("os", text("Error: EACCES: permission denied, mkdir '/Users/your_user'\n    at Error (native)"), PermissionDenied, "permission"),
        // https://github.com/anthropics/claude-code/issues/15064
        ("os", text("Error: ENOENT: no such file or directory, uv_spawn '/c/Users/BJKow/.local/bin/claude.exe'\n    at spawn (unknown)"), NotFound, "not-found"),
        // https://github.com/mysqljs/mysql/issues/1993
        ("os", text("{\"code\":\"ECONNREFUSED\",\"errno\":\"ECONNREFUSED\",\"syscall\":\"connect\",\"address\":\"10.179.105.32\",\"port\":3306,\"fatal\":true}"), NetworkError, "network"),
        // https://github.com/nospaceships/node-net-ping/issues/40
        ("os", text("Error: connect ETIMEDOUT\n    at Connection._handleConnectTimeout (/home/evan/node_modules/mysql/lib/Connection.js:419:13)\n    at Socket._onTimeout (net.js:352:8)"), Timeout, "timeout"),
        // --- test runners' failure summaries ---
        // https://github.com/postlight/ci-failed-test-reporter/pull/3
        ("tests", text("Error: expect(received).toBe(expected) // Object.is equality\n\nExpected: 1000\nReceived: 100"), TestFailed, "jest"),
        // https://github.com/pytest-dev/pytest/issues/40
        ("tests", text("  failure_demo.py:281: AssertionError\n  ========================= short test summary info ==========================\n  FAILED failure_demo.py::test_generative[3-6] - assert (3 * 2) < 6"), TestFailed, "pytest"),
        // https://github.com/enarx/enarx/issues/952
        ("tests", text("test result: FAILED. 1 passed; 20 failed; 1 ignored; 0 measured; 0 filtered out; finished in 2.21s\n\nerror: test failed, to rerun pass '--test integration_tests'"), TestFailed, "cargo-test"),
        // https://github.com/gojekfarm/probed/issues/11
        ("tests", text("--- FAIL: TestTCPPortCheckMarksNodesHealthyOrUnhealthy (0.10s)\n        Error Trace:    work_test.go:193"), TestFailed, "go-test"),
        // --- plain timeouts, in every common spelling (issue 18 quotes the short ones) ---
        ("timeouts", text("Timeout"), Timeout, "timeout"),
        ("timeouts", text("Read timeout"), Timeout, "timeout"),
        ("timeouts", text("request timeout"), Timeout, "timeout"),
        ("timeouts", text("timeout after 5m"), Timeout, "timeout"),
        // https://github.com/stevezau/media_preview_generator/issues/22
        ("timeouts", text("requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='127.0.0.1', port=32400): Read timed out. (read timeout=30)"), Timeout, "timeout"),
        // https://github.com/lemonade-sdk/lemonade/pull/1565
        ("timeouts", text("2026-04-06 11:03:13.757 [Error] (HttpClient) CURL error: Timeout was reached"), Timeout, "timeout"),
        // https://github.com/anthropics/claude-code/issues/6266
        ("timeouts", text("AxiosError: timeout of 5000ms exceeded"), Timeout, "timeout"),
        // https://github.com/autohandai/code-cli/issues/74
        ("timeouts", text("The operation timed out."), Timeout, "timeout"),
    ];
    check(&rows, 3);
}

#[test]
fn structured_evidence_beats_incidental_words() {
    use Kind::*;
    let rows = [
        // An overload with the client's hints after it: the retry countdown, the spinner's
        // "esc to interrupt", the user's interrupt.
        ("hints", text("API Error (529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}) · Retrying in 37 seconds… (attempt 4/10)\n✻ Thinking… (esc to interrupt)"), Overloaded, "http-529"),
        // https://github.com/anthropics/claude-code/issues/7218
        ("hints", text(" ⎿  API Error (529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"},\"request_id\":null}) · Retrying in 4 seconds… (attempt 4/10)\n  ⎿  API Error: Operation aborted\n  ⎿  Interrupted by user"), Overloaded, "http-529"),
        // The API error type decides without a status.
        ("hints", text("{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}} · Retrying in 37 seconds… (esc to interrupt)"), Overloaded, "api-overloaded"),
        // "Retrying in N seconds" is not a rate limit; a timeout stays a timeout.
        ("hints", text("API Error (Request timed out.) · Retrying in 37 seconds… (attempt 7/10)"), Timeout, "timeout"),
        // The first line decides over the stack trace's tail (Node's `Timeout._onTimeout`).
        ("first-line", text("Error: connect ECONNREFUSED 127.0.0.1:8080\n    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1595:16)\n    at Timeout._onTimeout (/app/node_modules/foo/index.js:10:5)"), NetworkError, "network"),
        // The first line decides over a later, weaker line.
        ("first-line", text("Error: EACCES: permission denied, open '/etc/app.conf'\nretrying after timeout"), PermissionDenied, "permission"),
        ("first-line", text("fetch failed: connect ECONNREFUSED 10.0.0.1:443\ncause: Error: timeout"), NetworkError, "network"),
        // A Python traceback's frames and source lines are not evidence: the call's
        // `timeout=5` argument does not make a connection error a timeout.
        ("first-line", text("Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n    requests.get(url, timeout=5)\nrequests.exceptions.ConnectionError: Failed to establish a new connection: [Errno 111] Connection refused"), NetworkError, "network"),
        // Specific wordings decide before the HTTP status: a 400 that says the prompt is too
        // long is an exhausted context, not bad input.
        ("specific", text("API Error: 400 {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 215000 tokens > 200000 maximum\"}}"), ContextExhausted, "context-exhausted"),
        // A message the terminal wrapped is read with its lines joined when nothing matched
        // line by line. https://github.com/anthropics/claude-code/issues/3028
        ("wrapped", text("API Error: Claude Code is unable to respond to this request, which appears to violate\n     our Usage Policy (https://www.anthropic.com/legal/aup). Please double press esc to \n    edit your last message or start a new session for Claude Code to assist with a \n    different task."), InvalidInput, "usage-policy"),
        ("wrapped", text("API Error: Claude's response exceeded the 32000\n     output token maximum. To configure this behavior, set the\n     CLAUDE_CODE_MAX_OUTPUT_TOKENS environment variable."), ContextExhausted, "context-exhausted"),
    ];
    check(&rows, 1);
}

#[test]
fn stop_failure_is_classified_from_the_word_and_the_message() {
    // Issue 15 item 5: the client sends `server_error` for a 529 and `unknown` for a 400; the
    // status and message are in last_assistant_message.
    let overload = "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
    let e = run(&stop("server_error", overload));
    assert_eq!(
        (e.kind, e.matched_rule.as_str()),
        (Kind::Overloaded, "builtin:http-529")
    );
    assert_eq!(e.context["http_status"], 529);
    assert!(e.retryable && e.action == Action::Retry);
    let bad = "API Error: 400 {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"messages.5.content.1: tool_use ids must be unique\"}}";
    let e = run(&stop("unknown", bad));
    assert_eq!(
        (e.kind, e.matched_rule.as_str()),
        (Kind::InvalidInput, "builtin:http-400")
    );
    assert!(!e.retryable);
    assert!(
        e.detail.contains("tool_use ids must be unique"),
        "{}",
        e.detail
    );
    let long = "API Error: 400 {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 215000 tokens > 200000 maximum\"}}";
    assert_eq!(run(&stop("unknown", long)).kind, Kind::ContextExhausted);
    // A 500 the client calls server_error.
    let e = run(&stop(
        "server_error",
        "API Error: 500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}",
    ));
    assert_eq!(e.kind, Kind::Overloaded);
    // Without structured evidence in the text, the word decides.
    let e = run(&stop("server_error", "I'll continue with the refactor."));
    assert_eq!(
        (e.kind, e.matched_rule.as_str()),
        (Kind::Overloaded, "builtin:stop-failure-server_error")
    );
    let e = run(&stop("rate_limit", ""));
    assert_eq!(e.kind, Kind::RateLimited);
    let e = run(&stop("unknown", "I'll continue with the refactor."));
    assert_eq!(
        (e.kind, e.matched_rule.as_str()),
        (Kind::Unknown, "builtin:stop-failure-unknown")
    );
    // The word alone (no message), as before.
    let e = run(&json!({"hook_event_name": "StopFailure", "error": "server_error"}));
    assert_eq!(e.kind, Kind::Overloaded);
}

#[test]
fn a_tools_plain_non_zero_exit_is_a_tool_failure_retried_once() {
    // Issue 15 item 3: a command that says nothing but exit 1 (`test` was false); seed 003's
    // "tool_failure: retry once". (A search's exit 1 is its own kind, `no_match`, below.)
    let grep = json!({"hook_event_name": "PostToolUseFailure", "session_id": "s1",
        "tool_name": "Bash", "tool_input": {"command": "test -f build/out.bin"},
        "error": "Exit code 1"});
    let e = run(&grep);
    assert_eq!(
        (e.kind, e.matched_rule.as_str()),
        (Kind::ToolFailure, "builtin:tool-exit")
    );
    assert_eq!(
        (e.tier, e.severity),
        (Tier::SelfRecoverable, Severity::Warning)
    );
    assert_eq!(e.action, Action::Retry);
    let r = e.retry.clone().expect("retry");
    assert_eq!((r.attempt, r.max_attempts, r.delay_s), (2, 2, 0.0));
    let c = hook_context(&e);
    assert!(!c.contains("stop retrying"), "{c}");
    assert!(
        c.contains("retry the same call once more now (attempt 2 of 2)"),
        "{c}"
    );
    // One directive: the suggestions stay in the error object, not in the model's context.
    assert!(!c.contains("Suggestions:"), "{c}");
    // After the one retry: report it and go on, still tier 1, still calm.
    let e = run_attempt(&grep, 2);
    assert_eq!(e.kind, Kind::ToolFailure);
    assert_eq!(e.action, Action::ProceedDegraded);
    assert_eq!(
        (e.tier, e.severity),
        (Tier::SelfRecoverable, Severity::Warning)
    );
    let c = hook_context(&e);
    assert!(!c.contains("stop retrying"), "{c}");
    assert!(c.contains("say what is missing"), "{c}");
    // Other spellings of the same exit line.
    for t in ["Error: Exit code 1", "Exit code 2\n", "error: exit code 1"] {
        let e = run(&tool("Bash", t));
        assert_eq!(e.kind, Kind::ToolFailure, "{t}");
        assert_eq!(e.tier, Tier::SelfRecoverable, "{t}");
    }
    // An exit line with a known error after it is that error.
    let e = run(&tool(
        "Bash",
        "Exit code 1\nError: connect ECONNREFUSED 127.0.0.1:5432",
    ));
    assert_eq!(e.kind, Kind::NetworkError);
    // The policy still decides the attempts per kind.
    let policy: Policy = toml::from_str("[retry.kinds.tool_failure]\nmax_attempts = 3\n").unwrap();
    let e = classify(&grep, &Overrides::default(), &policy, 1);
    assert_eq!(e.retry.map(|r| r.max_attempts), Some(3));
}

/// Seed 004 §3.2's rows, as the failures' own texts.
#[test]
fn the_error_to_tier_table_s_failures_classify_to_their_kind_tier_and_action() {
    use Action::*;
    use Kind::*;
    use Tier::*;
    let rows: Vec<(&str, Value, Kind, Tier, Action)> = vec![
        ("File not found during Read", tool("Read", "File does not exist."), NotFound, SelfRecoverable, ProceedDegraded),
        ("jq parse failure in hook", text("PreToolUse:Bash hook error: jq: parse error: Invalid numeric literal at line 1, column 6"), HookFailed, SelfRecoverable, ProceedDegraded),
        ("jq parse failure", text("jq: parse error: Unfinished string at EOF at line 2, column 0"), InvalidInput, SelfRecoverable, AskUser),
        ("MCP server unavailable", text("MCP server \"github\" unavailable: connect ECONNREFUSED 127.0.0.1:3000"), ToolUnavailable, SelfRecoverable, Retry),
        ("Agent context approaching 75%", text("Context left until auto-compact: 25%"), ContextExhausted, EscalationRequired, Escalate),
        ("Agent context approaching 75%", text("context window at 75%: save L1/L2/L3 and alert the lead"), ContextExhausted, EscalationRequired, Escalate),
        ("Agent context exhaustion (compact)", text("Error: Error during compaction: Error: Conversation too long."), ContextExhausted, EscalationRequired, Escalate),
        ("Tool API error (TaskGet fails)", text("TaskGet failed: Task not found: 7"), TargetNotFound, EscalationRequired, Escalate),
        ("Worker unresponsive", text("worker implementer-1 unresponsive: no heartbeat for 300 s"), Unresponsive, EscalationRequired, Escalate),
        ("SendMessage to dead agent", text("SendMessage failed: agent implementer-2 is not running"), TargetNotFound, EscalationRequired, Escalate),
        ("SendMessage to dead agent", text("Error: Recipient \"team_lead\" not found."), TargetNotFound, EscalationRequired, Escalate),
        ("Coordinator unresponsive", text("coordinator execution-coordinator unresponsive after 600 s"), Unresponsive, PipelineAffecting, Escalate),
        ("Gate FAIL", text("Gate 2 FAIL: spec-review found 3 blocking issues"), GateFailed, PipelineAffecting, Escalate),
        ("PT corruption (malformed content)", text("PT corruption: malformed content in the permanent task"), StateCorrupt, PipelineAffecting, Escalate),
        ("PT corruption (malformed content)", text("state corrupt: .triage/state.json: expected value at line 1 column 1"), StateCorrupt, PipelineAffecting, Escalate),
        ("All workers in a category failed", text("All 3 workers in category research failed"), PhaseFailed, PipelineAffecting, Escalate),
        ("Fix loop exhausted (3x)", text("Fix loop exhausted (3x): escalating to Lead"), PhaseFailed, PipelineAffecting, Escalate),
    ];
    let mut wrong = Vec::new();
    for (row, input, kind, tier, action) in &rows {
        let e = run(input);
        if (e.kind, e.tier, e.action) != (*kind, *tier, *action) {
            wrong.push(format!(
                "{row}: {input}\n  expected {kind} tier {} {action}, got {} tier {} {} by {}",
                tier.number(),
                e.kind,
                e.tier.number(),
                e.action,
                e.matched_rule
            ));
        }
        if *tier == PipelineAffecting {
            assert_eq!(e.severity, Severity::Critical, "{row}");
            assert!(hook_context(&e).contains("tier 3"), "{row}");
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // "Retry 1x, then proceed without (graceful degradation)".
    let mcp = text("MCP error -32000: Connection closed");
    let e = run(&mcp);
    let r = e.retry.expect("retry");
    assert_eq!((r.attempt, r.max_attempts), (2, 2));
    let e = run_attempt(&mcp, 2);
    assert_eq!(
        (e.kind, e.tier, e.action),
        (ToolUnavailable, SelfRecoverable, ProceedDegraded)
    );
    assert!(e.retry.is_none());
    assert!(hook_context(&e).contains("say what is missing"));
}

#[test]
fn priority_labels_follow_the_severity() {
    let cases = [
        (
            text("Gate 2 FAIL: spec-review found 3 blocking issues"),
            "critical",
            "P0",
        ),
        (text("error[E0308]: mismatched types"), "error", "P1"),
        (
            text("API Error (Request timed out.) · Retrying in 1 seconds… (attempt 2/10)"),
            "warning",
            "P2",
        ),
        (text("[Request interrupted by user]"), "info", "P3"),
    ];
    for (input, severity, priority) in cases {
        let e = run(&input);
        assert_eq!(e.severity.as_str(), severity, "{input}");
        assert_eq!(e.priority, priority, "{input}");
        assert_eq!(e.priority, e.severity.priority());
        let j = serde_json::to_value(&e).unwrap();
        assert_eq!(j["priority"], priority);
    }
    // An input's own severity carries its own label.
    let e = run(&json!({"status": "error", "kind": "timeout", "severity": "critical"}));
    assert_eq!(e.priority, "P0");
}

#[test]
fn usage_limits_wait_until_the_reset() {
    // The `|<epoch>` form: 1753077600 is 2025-07-21T06:00:00Z.
    let e = run_at(
        &text("Claude AI usage limit reached|1753077600"),
        "2025-07-21T04:00:00Z",
        0,
    );
    assert_eq!(
        (e.kind, e.matched_rule.as_str()),
        (Kind::RateLimited, "builtin:usage-limit")
    );
    assert_eq!(e.context["retry_at"], "2025-07-21T06:00:00Z");
    assert_eq!(e.context["retry_after_s"], 7200.0);
    assert_eq!(e.retry.as_ref().map(|r| r.delay_s), Some(7200.0));
    assert!(
        e.detail.contains("resets at 2025-07-21 06:00 UTC (in 2 h)"),
        "{}",
        e.detail
    );
    // "will reset at 9am", read in the machine's zone (here UTC-5): 07:00 there, 2 h to go.
    let nine = text("Claude usage limit reached. Your limit will reset at 9am");
    let e = run_at(&nine, "2025-06-01T12:00:00Z", -5);
    assert_eq!(e.context["retry_at"], "2025-06-01T14:00:00Z");
    assert_eq!(e.retry.as_ref().map(|r| r.delay_s), Some(7200.0));
    // Past 9am already: the next day's 9am.
    let e = run_at(&nine, "2025-06-01T15:00:00Z", -5);
    assert_eq!(e.context["retry_at"], "2025-06-02T14:00:00Z");
    assert_eq!(e.retry.as_ref().map(|r| r.delay_s), Some(82800.0));
    // A zone Claude Code prints as UTC or a GMT offset is read as printed.
    let e = run_at(
        &text("Claude usage limit reached. Your limit will reset at 1pm (Etc/GMT+5)."),
        "2025-06-01T12:00:00Z",
        0,
    );
    assert_eq!(e.context["retry_at"], "2025-06-01T18:00:00Z");
    // Minutes, and a date.
    let e = run_at(
        &text("You've hit your session limit · resets 8:30pm"),
        "2025-06-01T20:00:00Z",
        0,
    );
    assert_eq!(e.retry.as_ref().map(|r| r.delay_s), Some(1800.0));
    let e = run_at(
        &text("Opus weekly limit reached ∙ resets Oct 31, 9am"),
        "2025-10-30T09:00:00Z",
        0,
    );
    assert_eq!(e.context["retry_at"], "2025-10-31T09:00:00Z");
    assert_eq!(e.retry.as_ref().map(|r| r.delay_s), Some(86400.0));
    // The hook's advice says when.
    assert!(
        hook_context(&e).contains("limit resets"),
        "{}",
        hook_context(&e)
    );
    // Without a clock the kind is the same; the wait is the schedule's.
    let e = run(&nine);
    assert_eq!(e.kind, Kind::RateLimited);
    assert!(e.context.get("retry_after_s").is_none());
}

/// A Bash failure with the command it ran (the hook payload's `tool_input.command`).
fn bash_cmd(command: &str, error: &str) -> Value {
    json!({"hook_event_name": "PostToolUseFailure", "session_id": "s1", "tool_name": "Bash",
        "tool_input": {"command": command}, "error": error})
}

/// Issue 29's families, each with real texts from tests/data/real_errors_2026.toml (the
/// address above each row): what the family looks like, and the rule that says so.
#[test]
fn the_families_of_issue_29() {
    use Kind::*;
    let rows = [
        // --- billing: a person must pay; before the HTTP status and the rate-limit words ---
        // https://github.com/anthropics/claude-code/issues/46277
        ("billing", text("  ⎿  Credit balance too low · Add funds: https://platform.claude.com/settings/billing"), Billing, "billing"),
        // https://github.com/anthropics/claude-code/issues/66314 (a 400 invalid_request_error)
        ("billing", text("Error: 400 {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.\"},\"request_id\":\"req_011CbrFTcXhtiMzr3s6EocF7\"}"), Billing, "billing"),
        // https://github.com/Chanzhaoyu/chatgpt-web/issues/1965 (a 429 that waiting never ends)
        ("billing", text("ChatGPT error 429: {\n\"error\": {\n\"message\": \"You exceeded your current quota, please check your plan and billing details.\",\n\"type\": \"insufficient_quota\",\n\"param\": null,\n\"code\": \"insufficient_quota\"\n}\n}"), Billing, "billing"),
        // https://github.com/QwenLM/qwen-code/issues/73
        ("billing", text("✖ OpenAI API Streaming Error: 402 This request requires more credits, or fewer max_tokens. You requested up to 225702 tokens, but can only afford 92985."), Billing, "billing"),
        // --- the client's own permission denials ---
        // https://github.com/ikuwow/dotfiles/pull/444
        ("denied", tool("Bash", "Permission to use Bash with command ssh -V has been denied."), PermissionDenied, "client-deny"),
        // https://github.com/anthropics/claude-code/issues/86341
        ("denied", tool("Bash", "Permission for this action was denied by the Claude Code auto mode classifier. Reason: Blocked by classifier."), PermissionDenied, "client-deny"),
        // https://github.com/anthropics/claude-code-action/issues/20
        ("denied", text("Claude requested permissions to use Bash, but you haven't granted it yet."), PermissionDenied, "client-deny"),
        // https://github.com/anthropics/claude-code/issues/35895: "run tests" is boilerplate.
        ("denied", text("  ⎿  Error: Permission to use Edit has been denied because Claude Code is running in don't ask mode. IMPORTANT: You *may* attempt to\n     accomplish this action using other tools that might naturally be used to accomplish this goal, e.g. using head instead of cat. But\n     you *should not* attempt to work around this denial in malicious ways, e.g. do not use your ability to run tests to execute non-test\n     actions."), PermissionDenied, "client-deny"),
        // --- hooks ---
        // https://github.com/addyosmani/agent-skills/issues/465
        ("hook", text("SessionStart hook (failed)\n  error: hook returned invalid session start JSON output"), HookFailed, "hook-error"),
        // https://github.com/openai/codex/issues/46455
        ("hook", text("hook: PostToolUse Failed"), HookFailed, "hook-error"),
        // https://github.com/melodic-software/claude-code-plugins/issues/2593
        ("hook", text("Ran 5 stop hooks\nStop hook error: Failed with non-blocking status code: No stderr output"), HookFailed, "hook-error"),
        // --- dependency resolution (work) ---
        // https://github.com/ourongxing/chatgpt-vercel/issues/19
        ("dependencies", text(" ERR_PNPM_OUTDATED_LOCKFILE  Cannot install with \"frozen-lockfile\" because pnpm-lock.yaml is not up-to-date with package.json"), DependencyConflict, "deps"),
        // https://github.com/astral-sh/uv/issues/3716
        ("dependencies", text("× No solution found when resolving dependencies:\n╰─▶ Because flask==3.0.2 depends on click>=8.1.3 and you require click==7.0.0, we can conclude that your requirements and flask==3.0.2 are incompatible."), DependencyConflict, "deps"),
        // https://github.com/fpour/DGB/issues/2
        ("dependencies", text("ERROR: Cannot install dgb==0.1 and dgb==0.2 because these package versions have conflicting dependencies.\n\nERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/user_guide/#fixing-conflicting-dependencies"), DependencyConflict, "deps"),
        // https://github.com/newfold-labs/wp-module-onboarding/issues/832 (npm 10's spelling)
        ("dependencies", text("error code ERESOLVE\nnpm error ERESOLVE could not resolve"), DependencyConflict, "deps"),
        // --- a missing script (usage) ---
        // https://github.com/netlify-templates/victor-hugo/issues/523
        ("usage", tool("Bash", "Exit code 1\nnpm ERR! Missing script: \"test\"\nnpm ERR! \nnpm ERR! To see a list of scripts, run:\nnpm ERR!   npm run"), InvalidInput, "missing-script"),
        // https://github.com/angular/material-start/issues/133
        ("usage", text("npm ERR! node v5.7.1\nnpm ERR! npm  v3.8.9\n\nnpm ERR! missing script: tests"), InvalidInput, "missing-script"),
        // --- checks: coverage, type, lint (work) ---
        // https://github.com/AFixt/accessibility-highlighter/pull/126
        ("checks", text("Jest: \"global\" coverage threshold for statements (20%) not met: 12.9%"), CheckFailed, "coverage"),
        // https://github.com/climate-analytics-lab/jax-gcm/issues/786: every test passed.
        ("checks", text("FAIL Required test coverage of 80% not reached. Total coverage: 79.68%\n== 92 passed, 29 skipped, 2409 deselected ... =="), CheckFailed, "coverage"),
        // https://github.com/ciemss/pyciemss/issues/626
        ("checks", text("+ mypy --ignore-missing-imports pyciemss/\npyciemss/visuals/plots.py:123: error: Incompatible types in assignment (expression has type \"str\", variable has type \"bytes\")  [assignment]\nFound 1 error in 1 file (checked 30 source files)"), CheckFailed, "typecheck"),
        // https://github.com/eslint/eslint/issues/8024
        ("checks", text("  328:9  error  'promise' is assigned a value but never used  no-unused-vars\n\n✖ 1 problem (1 error, 0 warnings)"), CheckFailed, "lint"),
        // https://github.com/astral-sh/ruff/issues/475
        ("checks", text("$ ruff autoflake.py\nFound 1 error(s).\nautoflake.py:41:1: F401 `pyflakes.checker.Annotation` imported but unused\n1 potentially fixable with the --fix option."), CheckFailed, "lint"),
        // https://github.com/JamesMcMurran/GDaxMarketMakerTrader/issues/7: ts-node's frames.
        ("checks", text("/lib/node_modules/ts-node/src/index.ts:329\n        throw new TSError(formatDiagnostics(diagnosticList, cwd, ts, lineOffset))\n              ^\nTSError: ⨯ Unable to compile TypeScript\nTrader.ts (30,5): Type 'string' is not assignable to type 'number'. (2322)"), BuildFailed, "tsc"),
        // --- the OOM killer ends the compiler (trouble, retried once) ---
        // https://github.com/hoytech/strfry/issues/41
        ("killed", text("g++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\nmake: *** [golpe/rules.mk:28: build/config.o] Error 1"), Crash, "killed"),
        // https://github.com/emscripten-core/emscripten/issues/4480
        ("killed", text("c++: internal compiler error: Killed (program cc1plus)\nPlease submit a full bug report,"), Crash, "killed"),
        // https://github.com/NLnetLabs/routinator/issues/724
        ("killed", text("error: could not compile `routinator-ui`\n\nCaused by:\n  process didn't exit successfully: `rustc --crate-name routinator_ui` (signal: 9, SIGKILL: kill)\nwarning: build failed, waiting for other jobs to finish..."), Crash, "killed"),
        // --- lock contention (trouble) ---
        // https://github.com/hashicorp/terraform/issues/22410: the lock table's 400 and JSON.
        ("locks", text("Error: Error locking state: Error acquiring the state lock: 2 error(s) occurred:\n\n* ConditionalCheckFailedException: The conditional request failed\n\tstatus code: 400, request id: 1GC9H7U16EQSUEAN9VOF0QNMPRVV4KQNSO5AEMVJF66Q9ASUAAJG\n* unexpected end of JSON input"), LockBusy, "lock-held"),
        // https://github.com/finite-element/finite-element-course/issues/3: "crashed" is a guess.
        ("locks", text("fatal: Unable to create '/Users/Ibrahim/finite-element-course/.git/index.lock': File exists.\n\nAnother git process seems to be running in this repository, e.g.\nan editor opened by 'git commit'. Please make sure all processes\nare terminated then try again. If it still fails, a git process\nmay have crashed in this repository earlier:\nremove the file manually to continue."), LockBusy, "lock-held"),
        // https://github.com/MichaIng/DietPi/issues/3032: EAGAIN's words, not an overload.
        ("locks", text("E: Could not get lock /var/lib/dpkg/lock-frontend - open (11: Resource temporarily unavailable)\nE: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?"), LockBusy, "lock-held"),
        // https://github.com/rust-lang/rust-analyzer/issues/21589
        ("locks", text("» cargo run\nBlocking waiting for file lock on package cache"), LockBusy, "lock-wait"),
        // --- hangs (trouble) ---
        // https://github.com/anthropics/claude-code/issues/63100: the command's `timeout 180`
        // is not what failed; the spinner ran for two hours.
        ("hang", text("● Bash(PATH=\"/home/gee/.npm-global/bin:$PATH\" timeout 180 .venv/bin/pytest -m \"not slow and not external and not smoke\" -q --tb=short 2>&1 | tail -40)\n  ⎿  Waiting…\n\n✽ Infusing… (1h 57m 55s · ↓ 153.5k tokens)\n  ⎿  Tip: Use /clear to start fresh when switching topics and free up context"), Unresponsive, "hang"),
        // https://github.com/google-gemini/gemini-cli/issues/3164
        ("hang", text("Re-Initiating the Process (esc to cancel, 2366s)"), Unresponsive, "hang"),
        // https://github.com/auth0/node-jsonwebtoken/issues/834
        ("hang", text("(⠂⠂⠂⠂⠂⠂⠂⠂⠂⠂⠂⠂⠂⠂⠂⠂⠂⠂) ⠙ IdealTree:web: sill idealTree buildDeps"), Unresponsive, "progress-stalled"),
        // https://github.com/npm/cli/issues/7282: "Completed in 862ms" is the last step done.
        ("hang", text("Stuck |######. . . . . . . | idealTree: timing idealTree Completed in 862ms"), Unresponsive, "progress-stalled"),
        // --- stream disconnections (trouble) ---
        // https://github.com/Wei-Shaw/claude-relay-service/issues/483
        ("stream", text("■ stream disconnected before completion: stream closed before response.completed"), NetworkError, "network"),
        // https://github.com/Wei-Shaw/claude-relay-service/issues/465
        ("stream", text("stream error: stream disconnected before completion: Transport error: error decoding response body"), NetworkError, "network"),
        // --- test runs: a panic inside a test is a failed test; the tool's own is a crash ---
        // https://github.com/apache/casbin-rs/issues/406
        ("tests", text("test rbac_api::tests::test_pattern_matching_fn ... ok\n\nfailures:\n\n---- enforcer::tests::test_enforce_ex stdout ----\n\nthread 'enforcer::tests::test_enforce_ex' (7643) panicked at src/enforcer.rs:1739:9:\nassertion `left == right` failed"), TestFailed, "cargo-test"),
        // https://github.com/oli-obk/cargo_metadata/issues/74
        ("tests", text("---- all_the_fields stdout ----\nthread 'all_the_fields' panicked at 'cargo -V output is unexpected: cargo 1.33.0\n', tests/test_samples.rs:130:5"), TestFailed, "cargo-test"),
        // https://github.com/flynn/flynn/issues/457: "Error: timed out" is the test's message.
        ("tests", text("FAIL: logbuf_test.go:83: S.TestStreaming\n\nlogbuf_test.go:99:\n    c.Error(\"timed out\")\n... Error: timed out"), TestFailed, "go-test"),
        // https://github.com/tanakh/cargo-atcoder/issues/17: the tool's own assertion.
        ("tests", text("thread 'main' panicked at 'assertion failed: `(left == right)`\n  left: `3`,\n right: `5`', /Users/xxx/.cargo/git/checkouts/cargo-atcoder-22f22504501ff75c/3c72a19/src/atcoder.rs:469:9"), Crash, "crash"),
        // https://github.com/pytest-dev/pytest/issues/5505
        ("tests", text("INTERNALERROR> Traceback (most recent call last):\nINTERNALERROR>   File \"/tmp/x/venv/lib/python3.6/site-packages/_pytest/config/__init__.py\", line 1002, in getoption\nINTERNALERROR> AttributeError: 'Namespace' object has no attribute 'tbstyle'"), Crash, "tool-crashed"),
        // https://github.com/python/mypy/issues/17102: mypy's own error format, crashed.
        ("tests", text("copi/types/model.py:124: error: INTERNAL ERROR -- Please try using mypy master on GitHub:\nversion: 1.9.0"), Crash, "tool-crashed"),
        // --- a search with no match (work) ---
        // https://github.com/earendil-works/pi/issues/3509
        ("search", bash_cmd("grep -r \"xyznonexistent\" .", "Exit code 1"), NoMatch, "no-match"),
        ("search", bash_cmd("cd src && rg -n 'fn main' | sort", "Exit code 1"), ToolFailure, "tool-exit"),
        ("search", bash_cmd("cd src && rg -n 'a|b'", "Error: Exit code 1"), NoMatch, "no-match"),
        // grep's exit 2 is an error, not an answer.
        ("search", bash_cmd("grep -r foo missing/", "Exit code 2\ngrep: missing/: No such file or directory"), NotFound, "not-found"),
    ];
    check(&rows, 2);
}

/// Each work family both ways: the work text (the command did its job and found a problem
/// in the code) and a trouble text from the same kind of command (it could not do its job).
#[test]
fn each_work_family_is_work_or_trouble_by_what_failed() {
    use crate::core::vocab::{Class, Family};
    let pairs: [(Family, Value, Value); 6] = [
        (
            Family::Tests,
            // https://github.com/weaveworks/scope/issues/427
            bash_cmd("go test ./...", "Exit code 1\n--- FAIL: TestResolver-4 (0.00s)\n\tresolver_test.go:89: didn't Stop in time\nFAIL"),
            // https://github.com/pytest-dev/pytest/issues/5505
            bash_cmd("pytest -p no:terminal --collect-only t.py", "Exit code 3\nINTERNALERROR> Traceback (most recent call last):\nINTERNALERROR> AttributeError: 'Namespace' object has no attribute 'tbstyle'"),
        ),
        (
            Family::Build,
            // https://github.com/GuillaumeGomez/rust-GSL/pull/32
            bash_cmd("cargo build", "Exit code 101\nerror[E0308]: mismatched types\n   --> src\\types\\rng.rs:111:43\n\nerror: aborting due to 2 previous errors"),
            // https://github.com/tdlib/telegram-bot-api/issues/145
            bash_cmd("make -j8", "Exit code 2\nc++: fatal error: Killed signal terminated program cc1plus compilation terminated.\nmake[2]: *** [td/CMakeFiles/tdcore.dir/build.make:479: td/CMakeFiles/tdcore.dir/td/telegram/ContactsManager.cpp.o] Error 1"),
        ),
        (
            Family::Checks,
            // https://github.com/eslint/eslint/issues/11541
            bash_cmd("npx eslint src", "Exit code 1\n2:5  error  'offset' is assigned a value but never used  no-unused-vars\n✖ 1 problem (1 error, 0 warnings)"),
            // https://github.com/python/mypy/issues/9384
            bash_cmd("mypy --config-file=setup.cfg app", "Exit code 2\npagination.py:187: error: INTERNAL ERROR -- Please try using mypy master on Github:\nversion: 0.782"),
        ),
        (
            Family::Search,
            // https://github.com/earendil-works/pi/issues/3509
            bash_cmd("grep -r \"xyznonexistent\" .", "Exit code 1"),
            // https://github.com/BurntSushi/ripgrep/issues/863
            bash_cmd("rg shit", "Exit code 2\n./: Permission denied (os error 13)\nNo files were searched, which means ripgrep probably applied a filter you didn't expect."),
        ),
        (
            Family::Dependencies,
            // https://github.com/astral-sh/uv/issues/12511
            bash_cmd("uv sync", "Exit code 1\n  × No solution found when resolving dependencies:\n  ╰─▶ Because only the following versions of python-nvd3 are available:"),
            // https://github.com/npm/npm/issues/15889
            bash_cmd("npm install", "Exit code 1\nnpm ERR! code ETIMEDOUT\nnpm ERR! errno ETIMEDOUT\nnpm ERR! network connect ETIMEDOUT 151.101.64.162:80"),
        ),
        (
            Family::Usage,
            // https://github.com/npm/statusboard/issues/311
            bash_cmd("npm run asdf", "Exit code 1\nnpm ERR! Missing script: asdf"),
            // https://github.com/ruvnet/ruflo/issues/607
            tool("Task", "Error: Agent type 'analyst' not found. Available agents: general-purpose, api-docs, cicd-engineer"),
        ),
    ];
    for (family, work, trouble) in &pairs {
        let w = run(work);
        assert_eq!(
            (w.class, family_of(w.kind, Some("Bash"))),
            (Class::Work, *family),
            "{family}: {} by {}",
            w.kind,
            w.matched_rule
        );
        assert_eq!(serde_json::to_value(&w).unwrap()["class"], "work");
        let t = run(trouble);
        assert_eq!(
            t.class,
            Class::Trouble,
            "{family}: {} by {}",
            t.kind,
            t.matched_rule
        );
        assert_eq!(serde_json::to_value(&t).unwrap()["class"], "trouble");
    }
}

#[test]
fn billing_is_not_a_rate_limit_and_asks_a_person() {
    // https://github.com/anthropics/claude-code/issues/4208: a 400 by status.
    let e = run(&text("Error: 400 {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.\"}}"));
    assert_eq!(
        (e.kind, e.action, e.retryable),
        (Kind::Billing, Action::AskUser, false)
    );
    assert_eq!(e.severity, Severity::Critical);
    assert_eq!(e.class, crate::core::vocab::Class::Trouble);
    // OpenAI's insufficient_quota arrives as a 429: still not worth a wait.
    let e = run(&text("Error: insufficient_quota: You exceeded your current quota, please check your plan and billing details."));
    assert_eq!((e.kind, e.retryable), (Kind::Billing, false));
    assert!(e.retry.is_none());
    // A bare 402, the client's StopFailure word, and an API error type.
    assert_eq!(
        run(&json!({"message": "failed", "status": 402})).kind,
        Kind::Billing
    );
    assert_eq!(run(&stop("billing_error", "")).kind, Kind::Billing);
    assert_eq!(
        run(&text("API Error: 400 {\"type\":\"error\",\"error\":{\"type\":\"billing_error\",\"message\":\"x\"}}")).kind,
        Kind::Billing
    );
    // A plain rate limit stays one.
    assert_eq!(
        run(&text("API Error: 429 rate_limit_error")).kind,
        Kind::RateLimited
    );
}

#[test]
fn a_hang_needs_a_status_line_past_the_longest_tool_call() {
    let spin = |elapsed: &str| {
        text(&format!(
            "● Bash(npm start)\n  ⎿  Running…\n✶ Seasoning… ({elapsed} · ↑ 198 tokens)"
        ))
    };
    // https://github.com/anthropics/claude-code/issues/43769: 10 min 9 s.
    let e = run(&spin("10m 9s"));
    assert_eq!(
        (e.kind, e.matched_rule.as_str()),
        (Kind::Unresponsive, "builtin:hang")
    );
    assert_eq!(e.context["elapsed_s"], 609.0);
    assert!(e.detail.contains("10m 9s"), "{}", e.detail);
    assert!(
        e.suggestions[0].contains("interrupt it"),
        "{:?}",
        e.suggestions
    );
    // Under ten minutes the spinner is a turn at work, not a hang.
    assert_ne!(run(&spin("9m 59s")).kind, Kind::Unresponsive);
    // A compile error in the same text decides before the spinner.
    let e = run(&text(
        "error[E0308]: mismatched types\n✶ Seasoning… (12m 0s · ↑ 198 tokens)",
    ));
    assert_eq!(e.kind, Kind::BuildFailed);
}

#[test]
fn the_same_exit_1_is_no_match_only_for_a_search_that_printed_nothing() {
    let e = run(&bash_cmd("grep -rn TODO src", "Exit code 1"));
    assert_eq!(
        (e.kind, e.tier, e.action),
        (
            Kind::NoMatch,
            Tier::SelfRecoverable,
            Action::ProceedDegraded
        )
    );
    assert_eq!(e.detail, "Bash (exit 1) found no match: grep -rn TODO src");
    assert!(
        !hook_context(&e).contains("retry the same call"),
        "{}",
        hook_context(&e)
    );
    // Something printed: not an empty answer.
    assert_eq!(
        run(&bash_cmd(
            "grep -rn TODO src",
            "Exit code 1\ngrep: warning: recursive search of stdin"
        ))
        .kind,
        Kind::ToolFailure
    );
    // Not a search, or not its status.
    assert_eq!(
        run(&bash_cmd("make lint", "Exit code 1")).kind,
        Kind::ToolFailure
    );
    assert_eq!(
        run(&bash_cmd("grep x f | head -1", "Exit code 1")).kind,
        Kind::ToolFailure
    );
    // No command known: the plain tool failure as before.
    assert_eq!(run(&tool("Bash", "Exit code 1")).kind, Kind::ToolFailure);
}

#[test]
fn a_missing_script_is_named_not_called_a_silent_exit() {
    // Issue 29: `npm ERR! Missing script: "lint"` got "retry the same call once more now" and
    // "a non-zero exit without an error message".
    let e = run(&bash_cmd("npm run lint", "Exit code 1\nnpm ERR! Missing script: \"lint\"\nnpm ERR! \nnpm ERR! To see a list of scripts, run:\nnpm ERR!   npm run"));
    assert_eq!((e.kind, e.retryable), (Kind::InvalidInput, false));
    let c = hook_context(&e);
    assert!(!c.contains("retry the same call"), "{c}");
    assert!(!c.contains("without an error message"), "{c}");
    assert!(c.contains("npm run"), "{c}");
}

#[test]
fn a_compiler_killed_from_outside_is_retried_once_with_fewer_jobs() {
    // https://github.com/fuzziqersoftware/newserv/issues/60
    let e = run(&bash_cmd("make", "Exit code 2\n[  1%] Building CXX object CMakeFiles/newserv.dir/src/ChatCommands.cc.o\nc++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\nmake[2]: *** [CMakeFiles/newserv.dir/build.make:108: CMakeFiles/newserv.dir/src/ChatCommands.cc.o] Error 1"));
    assert_eq!(
        (e.kind, e.retryable, e.action),
        (Kind::Crash, true, Action::Retry)
    );
    assert_eq!(e.retry.as_ref().map(|r| r.max_attempts), Some(2));
    assert!(
        e.suggestions.iter().any(|s| s.contains("fewer jobs")),
        "{:?}",
        e.suggestions
    );
}

#[test]
fn a_held_lock_is_waited_for_once_then_a_person_decides() {
    // https://github.com/Genaker/TerraformMagentoCloud/issues/22
    let e = run(&text("Error: Error acquiring the state lock\n│ \n│ Error message: ConditionalCheckFailedException: The conditional request\n│ failed\n│ Lock Info:\n│   ID:        f9763602-b03f-e35c-da30-4083cdbb99ae"));
    assert_eq!(
        (e.kind, e.tier, e.action),
        (Kind::LockBusy, Tier::SelfRecoverable, Action::Retry)
    );
    assert_eq!(e.retry.as_ref().map(|r| r.max_attempts), Some(2));
    // Out of attempts: a person decides (a stale lock is theirs to remove).
    let e = run_attempt(&text("Error: Error acquiring the state lock"), 2);
    assert_eq!(
        (e.action, e.tier),
        (Action::Escalate, Tier::EscalationRequired)
    );
    assert!(
        e.suggestions.iter().any(|s| s.contains("stale lock")),
        "{:?}",
        e.suggestions
    );
}

/// A word in a command's echo or arguments never decides a kind by itself: the error lines do.
#[test]
fn a_timeout_option_in_the_command_echo_does_not_decide_a_timeout() {
    let e = run(&text(
        "$ python fetch.py --timeout 30\nTraceback (most recent call last):\n  File \"fetch.py\", line 3, in <module>\nKeyError: 'url'",
    ));
    assert_eq!(
        (e.kind, e.matched_rule.as_str()),
        (Kind::Crash, "builtin:exception")
    );
}

#[test]
fn timeout_none_in_the_command_echo_does_not_decide_a_timeout() {
    let e = run(&text(
        "$ python -c \"run(cmd, timeout=None)\"\nValueError: invalid literal for int() with base 10: 'x'",
    ));
    assert_eq!(
        (e.kind, e.matched_rule.as_str()),
        (Kind::Crash, "builtin:exception")
    );
    // The word itself still decides where it is the error's.
    let e = run(&text("Error: timeout of 30000ms exceeded"));
    assert_eq!(e.kind, Kind::Timeout);
}

#[test]
fn a_file_named_error_log_does_not_decide_a_kind() {
    let e = run(&tool("Bash", "$ tail -n 20 error.log\nExit code 1"));
    assert_eq!(e.kind, Kind::ToolFailure);
    let e = run(&text(
        "$ cat error.log\ncat: error.log: No such file or directory",
    ));
    assert_eq!(e.kind, Kind::NotFound);
}

#[test]
fn an_indentation_error_in_code_being_written_is_a_build_failure_not_a_crash() {
    let e = run(&text(
        "Traceback (most recent call last):\n  File \"RegisterDevice.py\", line 4, in <module>\n    from Reader import get_devices\n  File \"/home/pi/RPi-Jukebox-RFID/scripts/Reader.py\", line 32\n    def __init__(self):\n    ^\nIndentationError: unexpected indent",
    ));
    assert_eq!(
        (e.kind, e.class),
        (Kind::BuildFailed, crate::core::vocab::Class::Work)
    );
}

#[test]
fn a_wrong_api_key_is_an_auth_failure_not_invalid_input() {
    for t in [
        "Invalid API key · Please run /login",
        "[ERR] missing or invalid api key (get free api key & configure it from https://cloud.projectdiscovery.io/?ref=api_key)",
        // A 400 by status, but what the service refused is the key.
        "400 INVALID_ARGUMENT: API key not valid. Please pass a valid API key.",
        "Error: Your API key is invalid",
    ] {
        let e = run(&text(t));
        assert_eq!(e.kind, Kind::AuthFailed, "{t}");
    }
}

#[test]
fn the_timeout_command_in_an_echo_does_not_decide_a_timeout() {
    // `timeout 30 curl …` is what was typed; curl's own line says what went wrong.
    let e = run(&text(
        "$ timeout 30 curl -sS https://api.example.invalid/v1\ncurl: (6) Could not resolve host: api.example.invalid",
    ));
    assert_eq!(e.kind, Kind::NetworkError);
}

#[test]
fn an_error_word_searched_for_on_a_prompts_echo_line_does_not_decide_a_kind() {
    // Searching the logs for "Permission denied" is not being denied: grep's answer decides.
    for t in [
        "$ grep -rn 'Permission denied' /var/log/app\ngrep: /var/log/app: No such file or directory",
        "deploy@web-1:~/app$ grep -rn 'Permission denied' /var/log/app\ngrep: /var/log/app: No such file or directory",
        "[deploy@web-1 app]$ grep -rn 'Permission denied' /var/log/app\ngrep: /var/log/app: No such file or directory",
    ] {
        let e = run(&text(t));
        assert_eq!(e.kind, Kind::NotFound, "{t}");
    }
}

#[test]
fn a_push_behind_its_remote_and_a_merge_conflict_are_the_agents_own_loop() {
    use crate::core::vocab::Class;
    for t in [
        " ! [rejected]        main -> main (non-fast-forward)\nerror: failed to push some refs to 'https://github.com/o/r.git'\nhint: Updates were rejected because the tip of your current branch is behind",
        "Auto-merging src/lib.rs\nCONFLICT (content): Merge conflict in src/lib.rs\nAutomatic merge failed; fix conflicts and then commit the result.",
        "error: Your local changes to the following files would be overwritten by merge:\n\tpackage.json\nPlease commit your changes or stash them before you merge.\nAborting",
    ] {
        let e = run(&text(t));
        assert_eq!((e.kind, e.class), (Kind::ToolFailure, Class::Work), "{t}");
    }
    // A push refused for another reason is the tool's failure: trouble.
    let e = run(&text(
        " ! [remote rejected] main -> main (failure)\nerror: failed to push some refs to 'ssh://git@example.com/o/r.git'",
    ));
    assert_eq!(
        (e.kind, e.class, e.matched_rule.as_str()),
        (Kind::ToolFailure, Class::Trouble, "builtin:git-push-failed")
    );
}

#[test]
fn json_that_fails_at_its_first_byte_is_a_services_answer_not_the_agents_input() {
    use crate::core::vocab::Class;
    let e = run(&text(
        "    return complexjson.loads(self.text, **kwargs)\njson.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
    ));
    assert_eq!((e.kind, e.class), (Kind::InvalidInput, Class::Trouble));
    let e = run(&text(
        "SyntaxError: Unexpected token < in JSON at position 0\n    at JSON.parse (<anonymous>)",
    ));
    assert_eq!((e.kind, e.class), (Kind::ToolFailure, Class::Trouble));
    // Further in, the text itself is malformed: the agent's input.
    let e = run(&text(
        "json.decoder.JSONDecodeError: Expecting ',' delimiter: line 3 column 5 (char 20)",
    ));
    assert_eq!((e.kind, e.class), (Kind::InvalidInput, Class::Work));
}

#[test]
fn a_403_that_says_forbidden_is_a_permission_refusal_not_a_login() {
    for t in [
        "RESPONSE 403: 403 Forbidden\nERROR CODE: AuthorizationFailed",
        "cli.azure.cli.core.sdk.policies: Response status: 403 (Forbidden)",
        "HTTPError: 403 Client Error: Forbidden for url: https://storage.example.com/bucket/key",
    ] {
        let e = run(&text(t));
        assert_eq!(e.kind, Kind::PermissionDenied, "{t}");
    }
    // GitHub's rate limit comes as a 403 too: its wording decides.
    let e = run(&text(
        "HTTP 403: 403 Forbidden - API rate limit exceeded for user ID 1234.",
    ));
    assert_eq!(e.kind, Kind::RateLimited);
}
