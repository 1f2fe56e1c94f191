#!/bin/sh
# PreToolUse: the breaker gate; denies a subagent call whose breaker is open.
exec "$(dirname "$0")/triage-hook.sh" PreToolUse
