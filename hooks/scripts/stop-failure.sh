#!/bin/sh
# StopFailure: records an API failure that ended the turn.
exec "$(dirname "$0")/triage-hook.sh" StopFailure
