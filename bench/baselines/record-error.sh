#!/usr/bin/env bash
# Baseline: `record-error` as users write it today, in bash with jq and flock(1).
# Reads a hook payload or error object on stdin, builds one error record with jq, appends it
# to $TRIAGE_DIR/logs/errors.jsonl under an exclusive flock on a sidecar lock, prints it.
# Written to be as cheap as bash can be: builtins for the time and the id, one jq, one flock.
set -euo pipefail
dir=${TRIAGE_DIR:-.triage}
log=$dir/logs/errors.jsonl
[ -d "$dir/logs" ] || mkdir -p "$dir/logs"
TZ=UTC printf -v ts '%(%Y-%m-%dT%H:%M:%SZ)T' -1
id="err-${EPOCHREALTIME/./}-$$"
record=$(jq -c --arg id "$id" --arg ts "$ts" '{
  error_id: $id, timestamp: $ts, status: "error",
  session_id: (.session_id // null), workflow_id: (.workflow_id // null),
  agent: (.agent_type // .tool_input.subagent_type // .agent // .tool_name // null),
  kind: (.kind // "unknown"), detail: (.error // .detail // .message // ""),
  context: {tool: (.tool_name // null), duration_ms: (.duration_ms // null)}
}')
(
  flock -w 2 9
  printf '%s\n' "$record" >>"$log"
) 9>>"$log.lock"
printf '%s\n' "$record"
