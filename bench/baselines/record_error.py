#!/usr/bin/env python3
"""Baseline: `record-error` as users write it today, in Python with json and fcntl.

Reads a hook payload or error object on stdin, builds one error record, appends it to
$TRIAGE_DIR/logs/errors.jsonl with one write under an exclusive flock on a sidecar lock,
and prints it. Only the standard library, so it starts as fast as a Python hook can.
"""
import fcntl
import json
import os
import sys
import time


def main():
    payload = json.load(sys.stdin)
    root = os.environ.get("TRIAGE_DIR", ".triage")
    logs = os.path.join(root, "logs")
    os.makedirs(logs, exist_ok=True)
    log = os.path.join(logs, "errors.jsonl")
    tool_input = payload.get("tool_input") or {}
    record = {
        "error_id": "err-%d-%d" % (time.time_ns(), os.getpid()),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "status": "error",
        "session_id": payload.get("session_id"),
        "workflow_id": payload.get("workflow_id"),
        "agent": payload.get("agent_type") or tool_input.get("subagent_type")
        or payload.get("agent") or payload.get("tool_name"),
        "kind": payload.get("kind", "unknown"),
        "detail": payload.get("error") or payload.get("detail") or payload.get("message") or "",
        "context": {"tool": payload.get("tool_name"), "duration_ms": payload.get("duration_ms")},
    }
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    with open(log + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    sys.stdout.write(line.decode())


if __name__ == "__main__":
    main()
