#!/usr/bin/env bash
# Baseline: `state-write FILE --update JQ` in bash + jq + flock, following seed 002's atomic
# write: under a lock, transform into a temp file, fsync it, keep the old version as .bak,
# rename over the file.   Usage: state-update.sh FILE JQ
set -euo pipefail
file=$1
filter=$2
exec 9>>"$file.lock"
flock -w 2 9
jq -c "$filter" "$file" >"$file.tmp.$$"
sync "$file.tmp.$$"
cp -p "$file" "$file.bak"
mv "$file.tmp.$$" "$file"
