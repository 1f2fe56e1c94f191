#!/bin/sh
# triage's hook launcher, written by `triage init`: the hook commands in the settings beside
# this folder run it (`sh ".../hooks/triage-hook" || true`), so the command line an agent
# client shows the model before a blocking answer stays short and says nothing false.
#
# It runs `triage hook` with this script's arguments. Only PATH's absolute entries are
# searched: an empty entry, `.`, `bin` or `./node_modules/.bin` names a folder of the working
# folder (the project), and a cloned project's `triage` is never run. Without triage it fails
# open: the payload is drained (so the client never gets EPIPE), given up after 5 s of a writer
# that keeps the pipe open, and the status is 0, so a teammate without triage is never blocked.
# `triage init --uninstall` removes this file; edit it and init leaves it alone.
p=
set -f
IFS=:
for d in $PATH; do
  case $d in /*) p=$p${p:+:}$d ;; esac
done
unset IFS
set +f
PATH=${p:-/nonexistent}
if command -v triage >/dev/null 2>&1; then exec triage hook "$@"; fi
exec 3<&0
cat <&3 >/dev/null 2>&1 3<&- &
c=$!
exec 3<&-
(sleep 5 && kill "$c") </dev/null >/dev/null 2>&1 &
wait "$c" 2>/dev/null
exit 0
