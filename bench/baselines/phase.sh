#!/usr/bin/env bash
# Baseline: a phase's fan-out as people write it today, bash background jobs and `wait`.
# Runs N copies of a command at once (default 32 of /bin/true, exec'd as `phase run` execs
# each item's argv), waits for each, and fails when any failed. Nothing is recorded: this is
# the floor that `triage phase run` (manifest, breakers, outputs kept, one decision) is held to.
#   phase.sh [N] [COMMAND...]
set -uo pipefail
n=${1:-32}
shift || true
[ $# -gt 0 ] || set -- /bin/true
pids=()
for ((i = 0; i < n; i++)); do
  "$@" &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do
  wait "$p" || failed=$((failed + 1))
done
echo "{\"items\": $n, \"failed\": $failed}"
[ "$failed" -eq 0 ]
