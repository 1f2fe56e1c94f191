#!/usr/bin/env bash
# Baseline: the same circuit breaker in bash with jq and flock(1) over one JSON file.
#   breaker.sh check KEY | breaker.sh record KEY success|failure | breaker.sh hook < payload
# State is $TRIAGE_DIR/breakers.json, read-modify-written under flock, replaced by rename.
# Seed 000's numbers: 2 consecutive failures open it for 60 s.
set -euo pipefail
dir=${TRIAGE_DIR:-.triage}
state=$dir/breakers.json
[ -d "$dir" ] || mkdir -p "$dir"
now=${EPOCHSECONDS}
cmd=$1
if [ "$cmd" = hook ]; then
  key=$(jq -r '.tool_input.subagent_type // .tool_name // "unknown"')
else
  key=$2
fi
exec 9>>"$state.lock"
flock -w 2 9
[ -s "$state" ] || echo '{}' >"$state"
case $cmd in
  check | hook)
    out=$(jq -c --arg k "$key" --argjson now "$now" '
      (.[$k] // {state: "closed", failures: 0, opened_at: 0}) as $b
      | if $b.state == "open" and $now >= $b.opened_at + 60 then "half_open" else $b.state end
      | {key: $k, state: ., allowed: (. != "open")}' "$state")
    if [ "$cmd" = hook ]; then
      if [ "$(jq -r .allowed <<<"$out")" = false ]; then
        jq -nc --arg k "$key" '{hookSpecificOutput: {hookEventName: "PreToolUse",
          permissionDecision: "deny", permissionDecisionReason: "circuit breaker for \($k) is open"}}'
      fi
    else
      printf '%s\n' "$out"
    fi
    ;;
  record)
    jq -c --arg k "$key" --arg o "$3" --argjson now "$now" '
      .[$k] = ((.[$k] // {state: "closed", failures: 0, opened_at: 0})
        | if $o == "success" then .state = "closed" | .failures = 0
          else .failures += 1
          | if .state == "half_open" or .failures >= 2 then .state = "open" | .opened_at = $now
            else . end
          end)' "$state" >"$state.tmp.$$"
    mv "$state.tmp.$$" "$state"
    jq -c --arg k "$key" '{key: $k} + .[$k]' "$state"
    ;;
esac
