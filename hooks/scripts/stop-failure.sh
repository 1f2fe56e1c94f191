#!/bin/sh
# StopFailure: records an API failure that ended the turn. Claude Code sends the hook SIGTERM
# as it exits, 20 to 80 ms after starting it: ignored here (and so in triage, across exec), so
# the record is always finished; triage bounds it with its own deadline.
trap '' TERM HUP
exec "$(dirname "$0")/triage-hook.sh" StopFailure
