#!/bin/sh
# Runs `triage hook` for one Claude Code event: ./triage-hook.sh EVENT < payload
#
# Fails open: when the triage binary cannot be found the payload is drained (so Claude Code
# never gets EPIPE), a note goes to stderr (shown only in Claude Code's debug log) and the
# script exits 0, so a missing tool never blocks an agent. Set TRIAGE_BIN to an absolute path
# when triage is not on the non-interactive PATH that hooks run with.
event=${1:?usage: triage-hook.sh EVENT < payload}
bin=${TRIAGE_BIN:-triage}
if ! command -v "$bin" >/dev/null 2>&1; then
    cat >/dev/null
    echo "triage-hook.sh: '$bin' not found, $event not guarded; set TRIAGE_BIN" >&2
    exit 0
fi
exec "$bin" hook --event "$event"
