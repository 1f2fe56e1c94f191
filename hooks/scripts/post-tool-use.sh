#!/bin/sh
# PostToolUse: checks a subagent's output and records the outcome on its breaker.
exec "$(dirname "$0")/triage-hook.sh" PostToolUse
