#!/usr/bin/env bash
# Baseline: a PostToolUse hook for the subagent tool in bash + jq + flock — check the
# subagent's output against seed 001's researcher rule, then record the outcome on the
# breaker (the same JSON file as breaker.sh), and block with a reason when the check fails.
set -euo pipefail
here=$(dirname "$0")
payload=$(cat)
read -r agent ok < <(jq -r '
  ([.tool_response.content[]? | select(.type == "text") | .text] | join("\n")) as $out
  | "\(.tool_input.subagent_type // .tool_name) \(($out | length) >= 500 and ($out | test("\\[\\d+\\]|https?://|doi:")))"' <<<"$payload")
if [ "$ok" = true ]; then
  "$here/breaker.sh" record "$agent" success >/dev/null
else
  "$here/breaker.sh" record "$agent" failure >/dev/null
  jq -nc --arg a "$agent" '{decision: "block", reason: "output of \($a) fails its checks"}'
fi
