//! The acceptance table: real error texts and payloads, written as the tools print them, each
//! with the kind and retryability `classify` must give. The comment above each case says
//! where the wording comes from. `ref:hooks` is shared/reference/claude-code-hooks.md §1.

use super::*;
use serde_json::json;

/// A Claude Code PostToolUseFailure payload for a Bash command (ref:hooks: Bash errors start
/// with the line `Exit code N`).
fn bash(code: i64, text: &str) -> Value {
    json!({
        "hook_event_name": "PostToolUseFailure", "session_id": "s1", "tool_name": "Bash",
        "tool_input": {"command": "make"}, "tool_use_id": "toolu_1",
        "error": format!("Exit code {code}\n{text}")
    })
}

/// A PostToolUseFailure payload for any tool.
fn tool(name: &str, error: &str) -> Value {
    json!({"hook_event_name": "PostToolUseFailure", "tool_name": name, "tool_input": {},
        "error": error})
}

/// A StopFailure payload (ref:hooks: `error` is one of the API error words).
fn stop(word: &str) -> Value {
    json!({"hook_event_name": "StopFailure", "session_id": "s1", "error": word})
}

fn text(t: &str) -> Value {
    Value::String(t.into())
}

fn cases() -> Vec<(Value, Kind, bool)> {
    use Kind::*;
    vec![
        // --- timeouts ---
        // ref:hooks: "CC may insert lines such as `Command timed out after 2m 0s`".
        (tool("Bash", "Command timed out after 2m 0s"), Timeout, true),
        // timeout(1): "If the command times out, … exit with status 124".
        (json!({"exit_code": 124, "stderr": ""}), Timeout, true),
        // curl(1) exit 28, as curl 8 prints it.
        (bash(28, "curl: (28) Operation timed out after 30001 milliseconds with 0 out of 0 bytes received"), Timeout, true),
        // Node.js net: a connect that gets no answer.
        (text("Error: connect ETIMEDOUT 93.184.216.34:443"), Timeout, true),
        // Python requests' ReadTimeout.
        (text("requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='api.example.com', port=443): Read timed out. (read timeout=10)"), Timeout, true),
        // Go: context.DeadlineExceeded.Error().
        (text("Post \"https://api.example.com/v1\": context deadline exceeded"), Timeout, true),
        // axios (ECONNABORTED), the client behind many Node tools.
        (text("AxiosError: timeout of 5000ms exceeded"), Timeout, true),
        // nginx's 504 page title.
        (json!({"message": "504 Gateway Time-out"}), Timeout, true),
        // --- rate limits ---
        // Anthropic API errors page: the 429 body.
        (text(r#"API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute."}}"#), RateLimited, true),
        // openai-python's RateLimitError string.
        (text("openai.RateLimitError: Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.', 'type': 'tokens', 'code': 'rate_limit_exceeded'}}"), RateLimited, true),
        // curl -f on a 429.
        (bash(22, "curl: (22) The requested URL returned error: 429"), RateLimited, true),
        // gh CLI: GitHub answers a primary rate limit with 403.
        (bash(1, "HTTP 403: API rate limit exceeded for user ID 1234. (https://api.github.com/graphql)"), RateLimited, true),
        // ref:hooks: StopFailure `rate_limit`.
        (stop("rate_limit"), RateLimited, true),
        // RFC 9110 §10.2.3: Retry-After with delay-seconds.
        (text("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 120\r\n"), RateLimited, true),
        // --- overload and server errors ---
        // Claude Code's API error line for Anthropic's 529.
        (tool("Agent", r#"API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#), Overloaded, true),
        // ref:hooks: StopFailure `overloaded` and `server_error`.
        (stop("overloaded"), Overloaded, true),
        (stop("server_error"), Overloaded, true),
        // RFC 9110 reason phrases, as curl -i shows them.
        (text("HTTP/2 503 Service Unavailable"), Overloaded, true),
        (json!({"message": "upstream failed", "status_code": 502}), Overloaded, true),
        // anthropic-python's InternalServerError string.
        (text("anthropic.InternalServerError: Error code: 500 - {'type': 'error', 'error': {'type': 'api_error', 'message': 'Internal server error'}}"), Overloaded, true),
        // --- network ---
        // Node.js net errors (errno names from libuv).
        (text("Error: connect ECONNREFUSED 127.0.0.1:5432"), NetworkError, true),
        (text("Error: getaddrinfo ENOTFOUND api.example.invalid"), NetworkError, true),
        (text("Error: read ECONNRESET"), NetworkError, true),
        // Node 18+ fetch wraps the cause.
        (text("TypeError: fetch failed\n    at node:internal/deps/undici/undici:12345:11\n  [cause]: Error: getaddrinfo EAI_AGAIN registry.npmjs.org"), NetworkError, true),
        // curl(1) exit 6, 7 and 56, as curl 8 prints them.
        (bash(6, "curl: (6) Could not resolve host: example.invalid"), NetworkError, true),
        (bash(7, "curl: (7) Failed to connect to localhost port 8080 after 0 ms: Couldn't connect to server"), NetworkError, true),
        (bash(56, "curl: (56) Recv failure: Connection reset by peer"), NetworkError, true),
        // Python requests/urllib3 ConnectionError.
        (text("requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1 (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f3a>: Failed to establish a new connection: [Errno 111] Connection refused'))"), NetworkError, true),
        // Python socket.gaierror (glibc's EAI_AGAIN text).
        (text("socket.gaierror: [Errno -3] Temporary failure in name resolution"), NetworkError, true),
        // git over HTTPS without DNS; git exits 128 on fatal errors.
        (json!({"exit_code": 128, "stderr": "fatal: unable to access 'https://github.com/o/r.git/': Could not resolve host: github.com"}), NetworkError, true),
        // docker CLI with the daemon down.
        (bash(1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"), NetworkError, true),
        // An MCP tool reporting an error in PostToolUse (`isError` in the MCP CallToolResult).
        (json!({"hook_event_name": "PostToolUse", "tool_name": "mcp__db__query", "tool_response": {"isError": true, "content": [{"type": "text", "text": "connect ECONNREFUSED 10.0.0.5:5432"}]}}), NetworkError, true),
        // --- permission ---
        // bash: a script without the execute bit (exit 126).
        (bash(126, "bash: ./deploy.sh: Permission denied"), PermissionDenied, false),
        (json!({"exit_code": 126}), PermissionDenied, false),
        // Node.js fs EACCES.
        (text("Error: EACCES: permission denied, open '/etc/hosts'"), PermissionDenied, false),
        // Python PermissionError.
        (text("PermissionError: [Errno 13] Permission denied: '/root/.ssh/id_rsa'"), PermissionDenied, false),
        // GNU coreutils rm and touch.
        (bash(1, "rm: cannot remove '/usr/bin/x': Operation not permitted"), PermissionDenied, false),
        (bash(1, "touch: cannot touch '/mnt/ro/x': Read-only file system"), PermissionDenied, false),
        // --- not found ---
        // bash: unknown command (exit 127).
        (bash(127, "bash: line 1: jqq: command not found"), NotFound, false),
        (json!({"exit_code": 127}), NotFound, false),
        // GNU ls on a missing path (exit 2).
        (bash(2, "ls: cannot access 'missing': No such file or directory"), NotFound, false),
        // Node.js fs ENOENT (seed 003's corpus example).
        (tool("Read", "ENOENT: no such file or directory, open 'docs/historical-corpus/index.json'"), NotFound, false),
        // Python FileNotFoundError and ModuleNotFoundError tracebacks.
        (text("Traceback (most recent call last):\n  File \"load.py\", line 1, in <module>\n    open('data.csv')\nFileNotFoundError: [Errno 2] No such file or directory: 'data.csv'"), NotFound, false),
        (text("Traceback (most recent call last):\n  File \"app.py\", line 1, in <module>\n    import numpy\nModuleNotFoundError: No module named 'numpy'"), NotFound, false),
        // Node.js require of a missing package.
        (text("Error: Cannot find module 'express'\nRequire stack:\n- /app/index.js"), NotFound, false),
        // Claude Code's Read tool on a missing file.
        (tool("Read", "File does not exist."), NotFound, false),
        // npm install of a missing package.
        (bash(1, "npm ERR! code E404\nnpm ERR! 404 Not Found - GET https://registry.npmjs.org/left-padd - Not found"), NotFound, false),
        // git outside a repository.
        (json!({"exit_code": 128, "stderr": "fatal: not a git repository (or any of the parent directories): .git"}), NotFound, false),
        // gh CLI on a missing repository.
        (bash(1, "HTTP 404: Not Found (https://api.github.com/repos/o/nope)"), NotFound, false),
        // ref:hooks: StopFailure `model_not_found`.
        (stop("model_not_found"), NotFound, false),
        // --- authentication ---
        // anthropic-python's AuthenticationError string.
        (text("anthropic.AuthenticationError: Error code: 401 - {'type': 'error', 'error': {'type': 'authentication_error', 'message': 'invalid x-api-key'}}"), AuthFailed, false),
        // openai-python's AuthenticationError (its body says invalid_request_error).
        (text("openai.AuthenticationError: Error code: 401 - {'error': {'message': 'Incorrect API key provided: sk-abc.', 'type': 'invalid_request_error', 'code': 'invalid_api_key'}}"), AuthFailed, false),
        // Claude Code CLI without a valid key.
        (text("Invalid API key · Please run /login"), AuthFailed, false),
        // gh CLI with a revoked token.
        (bash(1, "HTTP 401: Bad credentials (https://api.github.com/graphql)"), AuthFailed, false),
        // git over SSH without a key.
        (json!({"exit_code": 128, "stderr": "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository."}), AuthFailed, false),
        // axios's message, as WebFetch relays it.
        (tool("WebFetch", "Request failed with status code 403"), AuthFailed, false),
        // ref:hooks: StopFailure `authentication_failed`, `oauth_org_not_allowed`; `billing_error` is
        // the account's credit, its own kind.
        (stop("authentication_failed"), AuthFailed, false),
        (stop("billing_error"), Billing, false),
        (stop("oauth_org_not_allowed"), AuthFailed, false),
        // --- invalid input ---
        // Python json.
        (text("json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"), InvalidInput, false),
        // Node.js JSON.parse (V8 before 11).
        (text("SyntaxError: Unexpected token } in JSON at position 42"), InvalidInput, false),
        // jq 1.6/1.7 on bad input.
        (bash(2, "jq: parse error: Invalid numeric literal at line 1, column 6"), InvalidInput, false),
        // PyYAML.
        (text("yaml.scanner.ScannerError: mapping values are not allowed here\n  in \"config.yaml\", line 3, column 8"), InvalidInput, false),
        // python-jsonschema.
        (text("jsonschema.exceptions.ValidationError: 'name' is a required property"), InvalidInput, false),
        // pydantic v2.
        (text("pydantic_core._pydantic_core.ValidationError: 1 validation error for User\nage\n  Input should be a valid integer [type=int_type, input_value='x', input_type=str]"), InvalidInput, false),
        // anthropic-python's BadRequestError string.
        (text("anthropic.BadRequestError: Error code: 400 - {'type': 'error', 'error': {'type': 'invalid_request_error', 'message': 'messages: roles must alternate between \"user\" and \"assistant\"'}}"), InvalidInput, false),
        // ref:hooks: StopFailure `invalid_request`.
        (stop("invalid_request"), InvalidInput, false),
        // Python argparse (exit 2).
        (bash(2, "usage: report.py [-h] [--out OUT]\nreport.py: error: unrecognized arguments: --foo"), InvalidInput, false),
        // serde_json through anyhow.
        (text("Error: missing field `name` at line 1 column 2"), InvalidInput, false),
        // --- build failures ---
        // rustc and cargo.
        (bash(101, "error[E0308]: mismatched types\n --> src/main.rs:4:18\n  |\n4 |     let x: u32 = \"a\";\n  |            ---   ^^^ expected `u32`, found `&str`"), BuildFailed, false),
        (bash(101, "error: could not compile `demo` (bin \"demo\") due to 1 previous error"), BuildFailed, false),
        // tsc (seed 003's TypeScript example).
        (bash(2, "src/button.tsx(42,7): error TS2322: Type 'string' is not assignable to type 'number'.\n\nFound 3 errors in 3 files."), BuildFailed, false),
        // gcc.
        (bash(1, "main.c: In function 'main':\nmain.c:5:5: error: 'x' undeclared (first use in this function)"), BuildFailed, false),
        // GNU ld through gcc.
        (bash(1, "/usr/bin/ld: main.o: in function `main':\nmain.c:(.text+0x5): undefined reference to `foo'\ncollect2: error: ld returned 1 exit status"), BuildFailed, false),
        // go build.
        (bash(1, "# example.com/m\n./main.go:5:2: undefined: fmt.Printl"), BuildFailed, false),
        // CPython 3.
        (text("  File \"x.py\", line 1\n    print 'a'\n    ^^^^^^^^^\nSyntaxError: invalid syntax"), BuildFailed, false),
        // --- test failures ---
        // pytest's summary.
        (bash(1, "FAILED tests/test_math.py::test_add - assert 3 == 4\n========================= 1 failed, 2 passed in 0.12s ========================="), TestFailed, false),
        // pytest failing on a network error inside the test: still a failed test.
        (bash(1, "FAILED tests/test_api.py::test_fetch - ConnectionRefusedError: [Errno 111] Connection refused\n=========== 1 failed in 0.30s ==========="), TestFailed, false),
        // cargo test: a panicking test is a failed test, not a crash.
        (bash(101, "test tests::adds ... FAILED\n\nfailures:\n\n---- tests::adds stdout ----\nthread 'tests::adds' panicked at src/lib.rs:10:9:\nassertion `left == right` failed\n  left: 3\n right: 4\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\nerror: test failed, to rerun pass `--lib`"), TestFailed, false),
        // jest's summary.
        (bash(1, "FAIL src/card.test.tsx\nTests:       1 failed, 4 passed, 5 total"), TestFailed, false),
        // go test.
        (bash(1, "--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3, want 4\nFAIL\nFAIL\texample.com/m\t0.002s"), TestFailed, false),
        // mocha's summary.
        (bash(1, "  2 passing (15ms)\n  1 failing\n"), TestFailed, false),
        // --- context exhaustion ---
        // Anthropic API 400 for a prompt over the window.
        (text("API Error: 400 {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 215000 tokens > 200000 maximum\"}}"), ContextExhausted, false),
        // OpenAI's context_length_exceeded message.
        (text("This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."), ContextExhausted, false),
        // ref:hooks: StopFailure `max_output_tokens`.
        (stop("max_output_tokens"), ContextExhausted, false),
        // --- crashes ---
        // Rust 1.73+ panic message (exit 101).
        (bash(101, "thread 'main' panicked at src/main.rs:2:5:\nexplicit panic\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"), Crash, false),
        // bash reporting SIGSEGV (exit 139).
        (bash(139, "Segmentation fault (core dumped)"), Crash, false),
        // bash reporting SIGKILL, e.g. the OOM killer (exit 137): may pass next time.
        (bash(137, "Killed"), Crash, true),
        (json!({"exit_code": 143}), Crash, true),
        // CPython uncaught exception.
        (text("Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n    d['x']\nKeyError: 'x'"), Crash, false),
        // Go runtime panic.
        (text("panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.main()"), Crash, false),
        // --- interruption ---
        // ref:hooks: PostToolUseFailure `is_interrupt`.
        (json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "error": "Exit code 130", "is_interrupt": true}), Interrupted, false),
        // CPython on Ctrl-C (exit 130).
        (bash(130, "Traceback (most recent call last):\n  File \"loop.py\", line 2, in <module>\nKeyboardInterrupt"), Interrupted, false),
        (json!({"exit_code": 130}), Interrupted, false),
        // Claude Code's transcript marker.
        (text("[Request interrupted by user for tool use]"), Interrupted, false),
        // --- a tool's plain non-zero exit (issue 15): the tool failed, retried once ---
        (bash(1, "something odd happened"), ToolFailure, true),
        // --- unknown ---
        // git's fatal status 128 is not a signal.
        (json!({"exit_code": 128, "stderr": "fatal: ambiguous argument 'HEAD~3': unknown revision or path"}), Unknown, false),
        // ref:hooks: StopFailure `unknown`.
        (stop("unknown"), Unknown, false),
    ]
}

#[test]
fn real_world_errors_get_the_right_kind_and_retryability() {
    let cases = cases();
    assert!(cases.len() >= 60, "only {} cases", cases.len());
    let mut wrong = Vec::new();
    for (input, kind, retryable) in &cases {
        let e = classify(input, &Overrides::default(), &Policy::default(), 1);
        if (e.kind, e.retryable) != (*kind, *retryable) {
            wrong.push(format!(
                "{input}\n  expected {kind} retryable={retryable}, got {} retryable={} by {}",
                e.kind, e.retryable, e.matched_rule
            ));
        }
        assert_eq!(e.status, "error");
        assert!(
            !e.detail.is_empty() && !e.detail.contains('\n'),
            "{}",
            e.detail
        );
        assert!(!e.suggestions.is_empty());
        assert_eq!(e.retry.is_some(), e.action == Action::Retry);
        if !e.retryable {
            assert_ne!(e.action, Action::Retry, "{input}");
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn found_facts_go_in_the_context() {
    let e = classify(
        &text("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 120\r\n"),
        &Overrides::default(),
        &Policy::default(),
        1,
    );
    assert_eq!(e.context["http_status"], 429);
    assert_eq!(e.context["retry_after_s"], 120.0);
    assert_eq!(e.retry.map(|r| r.delay_s), Some(120.0));
    assert_eq!(e.matched_rule, "builtin:rate-limit");
    let e = classify(
        &json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Task",
            "tool_input": {"subagent_type": "researcher", "prompt": "p"},
            "error": "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}),
        &Overrides::default(),
        &Policy::default(),
        1,
    );
    assert_eq!(e.context["agent"], "researcher");
    assert_eq!(e.context["tool"], "Task");
    assert_eq!(e.context["http_status"], 529);
    assert_eq!(e.matched_rule, "builtin:http-529");
    let e = classify(
        &bash(127, "bash: line 1: jqq: command not found"),
        &Overrides::default(),
        &Policy::default(),
        1,
    );
    assert_eq!(e.context["exit_code"], 127);
    assert_eq!(e.context["command"], "make");
    let e = classify(
        &text("Error: connect ECONNREFUSED 127.0.0.1:5432"),
        &Overrides::default(),
        &Policy::default(),
        1,
    );
    assert_eq!(e.context["errno"], "ECONNREFUSED");
}
