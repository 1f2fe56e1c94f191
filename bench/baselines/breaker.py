#!/usr/bin/env python3
"""Baseline: a circuit breaker in Python with a JSON file, as hook writers do it today.

  breaker.py check KEY            may a call go ahead? prints {key, state, allowed}
  breaker.py record KEY OUTCOME   OUTCOME is success or failure
  breaker.py hook                 PreToolUse payload on stdin: deny when the breaker is open

State is $TRIAGE_DIR/breakers.json, read-modify-written under an exclusive flock on a sidecar
lock and replaced by rename. Seed 000's numbers: 2 consecutive failures open it for 60 s.
"""
import fcntl
import json
import os
import sys
import time

THRESHOLD = 2
COOLDOWN_S = 60


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return {}


def save(path, states):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(states, f)
    os.replace(tmp, path)


def check(states, key, now):
    b = states.setdefault(key, {"state": "closed", "failures": 0, "opened_at": 0})
    changed = False
    if b["state"] == "open" and now >= b["opened_at"] + COOLDOWN_S:
        b["state"] = "half_open"
        changed = True
    return {"key": key, "state": b["state"], "allowed": b["state"] != "open"}, changed


def record(states, key, outcome, now):
    b = states.setdefault(key, {"state": "closed", "failures": 0, "opened_at": 0})
    if outcome == "success":
        b.update(state="closed", failures=0)
    else:
        b["failures"] += 1
        if b["state"] == "half_open" or b["failures"] >= THRESHOLD:
            b.update(state="open", opened_at=now)
    return {"key": key, "state": b["state"], "failures": b["failures"]}


def main():
    root = os.environ.get("TRIAGE_DIR", ".triage")
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, "breakers.json")
    now = time.time()
    cmd = sys.argv[1]
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        states = load(path)
        if cmd == "hook":
            payload = json.load(sys.stdin)
            tool_input = payload.get("tool_input") or {}
            key = tool_input.get("subagent_type") or payload.get("tool_name") or "unknown"
            out, changed = check(states, key, now)
            if not out["allowed"]:
                out = {"hookSpecificOutput": {
                    "hookEventName": "PreToolUse", "permissionDecision": "deny",
                    "permissionDecisionReason": "circuit breaker for %s is open" % key}}
            else:
                out = None
        elif cmd == "check":
            out, changed = check(states, sys.argv[2], now)
        else:
            out, changed = record(states, sys.argv[2], sys.argv[3], now), True
        if changed:
            save(path, states)
    if out is not None:
        print(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
