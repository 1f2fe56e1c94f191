#!/usr/bin/env bash
# Baseline: `classify` in bash + jq — the strongest form: one jq program that takes the error
# text from a hook payload or error object, tries a rule table of regexes in order, and prints
# {kind, retryable, matched_rule, detail}. Fewer rules than triage has, so it is a lower bound.
set -euo pipefail
exec jq -c '
  def rules: [
    ["timeout", true, "(?i)timed out|ETIMEDOUT|timeout"],
    ["rate_limited", true, "(?i)\\b429\\b|rate.?limit|too many requests"],
    ["overloaded", true, "(?i)\\b(529|503)\\b|overloaded"],
    ["network_error", true, "ECONNREFUSED|ECONNRESET|ENOTFOUND|getaddrinfo|(?i)connection reset"],
    ["permission_denied", false, "EACCES|(?i)permission denied"],
    ["not_found", false, "ENOENT|(?i)no such file|command not found"],
    ["auth_failed", false, "(?i)\\b(401|403)\\b|invalid api key"],
    ["build_failed", false, "error\\[E\\d+\\]|(?i)error TS\\d+|compilation failed"],
    ["test_failed", false, "(?i)\\bFAILED\\b|test result: FAILED"],
    ["context_exhausted", false, "(?i)prompt is too long|context length"],
    ["crash", true, "SIGSEGV|panicked at|(?i)segmentation fault"]
  ];
  (.error // .detail // .message // .stderr // "" | tostring) as $text
  | (first(rules[] | select(. as $r | $text | test($r[2]))) // ["unknown", false, ""]) as $m
  | {status: "error", kind: $m[0], retryable: $m[1],
     matched_rule: (if $m[2] == "" then null else "bash:\($m[0])" end),
     detail: ($text | split("\n")[0]), context: {tool: .tool_name}}'
