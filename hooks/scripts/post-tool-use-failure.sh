#!/bin/sh
# PostToolUseFailure: classifies and records the failure, advises the next step.
exec "$(dirname "$0")/triage-hook.sh" PostToolUseFailure
