#!/bin/sh
# Runs `triage hook` for one Claude Code event: ./triage-hook.sh EVENT < payload
#
# Fails open: when the triage binary cannot be found the payload is drained (so Claude Code
# never gets EPIPE), a note goes to stderr (shown only in Claude Code's debug log) and the
# script exits 0, so a missing tool never blocks an agent. Set TRIAGE_BIN to an absolute path
# when triage is not on the non-interactive PATH that hooks run with.
#
# Only PATH's absolute entries are searched: an empty entry, `.`, `bin` or
# `./node_modules/.bin` names a folder of the working folder (the project), and a cloned
# project's `triage` is never run.
event=${1:?usage: triage-hook.sh EVENT < payload}
bin=${TRIAGE_BIN:-triage}
found=
case $bin in
  */*) found=$bin ;;
  *)
    set -f
    IFS=:
    for dir in $PATH; do
      case $dir in /*) ;; *) continue ;; esac
      if [ -f "$dir/$bin" ] && [ -x "$dir/$bin" ]; then
        found=$dir/$bin
        break
      fi
    done
    unset IFS
    set +f
    ;;
esac
if [ -z "$found" ] || ! [ -x "$found" ]; then
  # Drained, or given up after 5 s of a writer that keeps the pipe open (Claude Code does
  # not time out a hook blocked on its stdin).
  exec 3<&0
  cat <&3 >/dev/null 2>&1 3<&- &
  reader=$!
  exec 3<&-
  (
    trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
    sleep 5 &
    sleeper=$!
    wait "$sleeper" && kill "$reader" 2>/dev/null
  ) </dev/null >/dev/null 2>&1 &
  watcher=$!
  wait "$reader" 2>/dev/null
  kill "$watcher" 2>/dev/null
  echo "triage-hook.sh: '$bin' not found, $event not guarded; set TRIAGE_BIN" >&2
  exit 0
fi
exec "$found" hook --event "$event"
