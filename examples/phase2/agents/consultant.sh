#!/bin/sh
# A stub consultant for the example: what it does comes from STUB_<NAME> (upper case):
#   ok (default)  print a short guidance note
#   fail          crash on every attempt
#   flaky         fail the first attempt, succeed on the retry
#   slow          run until stopped (for trying Ctrl+C and resume)
name=$1
mode=$(eval "printf %s \"\${STUB_$(printf %s "$name" | tr '[:lower:]' '[:upper:]'):-ok}\"")
case $mode in
  fail)
    echo "$name consultant crashed: model returned no content" >&2
    exit 1 ;;
  flaky)
    if [ "${TRIAGE_RUN_ATTEMPT:-1}" -lt 2 ]; then
      echo "$name: connection reset by peer" >&2
      exit 1
    fi ;;
  slow)
    echo "## $name guidance (in progress)"
    while :; do sleep 1; done ;;
esac
echo "## $name guidance"
echo "Use the methods the $name would recommend for each chapter."
