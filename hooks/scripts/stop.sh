#!/bin/sh
# Stop: checks the final message, with a loop guard.
exec "$(dirname "$0")/triage-hook.sh" Stop
