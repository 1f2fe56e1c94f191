"""System calls of one run, from `strace -f`: how many, and whether two programs make the same
durable-write calls (the state-update case's C floor must make triage's, or its time is not a
floor of the same job). Counts of calls repeat from run to run, so unlike times they hold on a
busy machine."""
import collections
import os
import re
import shutil
import subprocess
import tempfile

# `PID name(args) = result`, `PID name(args <unfinished ...>`; `PID <... name resumed>...`
# lines continue a call already counted, `+++`/`---` lines are exits and signals.
CALL = re.compile(r"^(?:\[pid\s+(\d+)\]\s+|(\d+)\s+)?([a-z_0-9]+)\((.*)$")

# The calls that make a write durable and exclusive: the lock, the temp file's creation,
# mode and data, its fsync, the backup's link, the renames and the folder's fsync. Their
# counts must be the same for the floor and for triage.
DURABLE = ("flock", "fchmod", "fsync", "fdatasync", "linkat", "renameat", "renameat2", "create")


def parse(text):
    """[(pid, name, args)] of every call in strace -f output, in order (a call cut by another
    thread's is counted once, where it began)."""
    calls = []
    for line in text.splitlines():
        m = CALL.match(line)
        if m:
            pid = m.group(1) or m.group(2)
            calls.append((int(pid) if pid else 0, m.group(3), m.group(4)))
    return calls


def name_of(call):
    """The call's name, with an open that creates a file named `create` (its flags say so)."""
    _, name, args = call
    if name in ("openat", "open") and "O_CREAT" in args and "O_DIRECTORY" not in args:
        return "create"
    return name


def durable_counts(calls):
    """{name: count} of the durable-write calls."""
    c = collections.Counter(name_of(call) for call in calls)
    return {k: c[k] for k in DURABLE if c[k]}


def compare(a, b):
    """"" when a and b make the same durable-write calls, else what differs ("fsync 2 vs 1")."""
    da, db = durable_counts(a), durable_counts(b)
    diff = ["%s %d vs %d" % (k, da.get(k, 0), db.get(k, 0)) for k in DURABLE
            if da.get(k, 0) != db.get(k, 0)]
    return ", ".join(diff)


def trace(argv, env, stdin=None, cwd=None):
    """The calls of one run of argv under `strace -f` (None without strace)."""
    strace = shutil.which("strace")
    if not strace:
        return None
    fd, out = tempfile.mkstemp(prefix="bench-strace.")
    os.close(fd)
    try:
        with open(stdin or os.devnull, "rb") as f:
            subprocess.run([strace, "-f", "-qq", "-o", out] + list(argv), env=env, stdin=f, cwd=cwd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        with open(out) as f:
            return parse(f.read())
    finally:
        os.unlink(out)
