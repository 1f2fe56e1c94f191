#!/bin/sh
# SubagentStop: sends a subagent back when its final message fails its checks.
exec "$(dirname "$0")/triage-hook.sh" SubagentStop
