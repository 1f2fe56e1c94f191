#!/bin/sh
# SessionStart: tells the model which breakers are open and which errors are unresolved.
exec "$(dirname "$0")/triage-hook.sh" SessionStart
