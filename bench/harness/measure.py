"""Starting processes and timing them, with as little of the harness in the numbers as possible.

Every process is started with posix_spawn (vfork-like: no page tables copied from this
Python process) with stdin opened on the input file, and reaped with wait4. The wall time
runs from just before the spawn to just after the reap, so it includes the same spawn cost
for every variant, the floor `/bin/true` included.

Peak memory is measured in separate runs under GNU time (`/usr/bin/time -f %M`), not from
our own wait4: Linux carries the parent's high-water RSS into a child across exec (exec_mmap
records the old mm's hiwater into signal->maxrss), so a child of this Python process would
report Python's ~20 MB. GNU time's own footprint (~2 MB) is the floor of that column.
"""
import os
import statistics
import subprocess
import time

DEVNULL = os.devnull


def spawn(argv, env, stdin=None):
    """Starts argv (argv[0] an absolute path), stdin from a file, stdout and stderr discarded."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, stdin or DEVNULL, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, DEVNULL, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, DEVNULL, os.O_WRONLY, 0),
    ]
    return os.posix_spawn(argv[0], argv, env, file_actions=actions)


def time_once(argv, env, stdin=None):
    """Runs argv once: (wall nanoseconds, exit code, CPU nanoseconds).

    The CPU time (user + system, from wait4's rusage of the child) is what the call itself
    cost; unlike the wall time, it does not grow while the process waits for a core on a busy
    machine."""
    t0 = time.perf_counter_ns()
    pid = spawn(argv, env, stdin)
    _, status, usage = os.wait4(pid, 0)
    t1 = time.perf_counter_ns()
    cpu = round((usage.ru_utime + usage.ru_stime) * 1e9)
    return t1 - t0, os.waitstatus_to_exitcode(status), cpu


def peak_rss(argv, env, stdin=None, runs=3, gnu_time="/usr/bin/time"):
    """The largest peak RSS in KiB over `runs` runs under GNU time, or None without it."""
    if not os.path.exists(gnu_time):
        return None
    peak = 0
    report = "/tmp/bench-rss.%d" % os.getpid()
    for _ in range(runs):
        pid = spawn([gnu_time, "-f", "%M", "-o", report] + list(argv), env, stdin)
        os.waitpid(pid, 0)
        try:
            with open(report) as f:
                peak = max(peak, int(f.read().split()[-1]))
        except (OSError, ValueError, IndexError):
            return None
    os.unlink(report)
    return peak


def capture(argv, env, stdin=None, timeout=600):
    """Runs argv once and keeps what it printed: (exit code, stdout, stderr)."""
    with open(stdin or DEVNULL, "rb") as f:
        p = subprocess.run(argv, env=env, stdin=f, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def concurrent(argv, env, stdin, writers, per_writer):
    """`writers` slots, each running argv `per_writer` times in sequence, all slots at once.

    Returns (wall nanoseconds, failed runs).
    """
    t0 = time.perf_counter_ns()
    running = {}
    started = [0] * writers
    failed = 0
    for w in range(writers):
        running[spawn(argv, env, stdin)] = w
        started[w] = 1
    while running:
        pid, status, _ = os.wait4(-1, 0)
        w = running.pop(pid, None)
        if w is None:
            continue
        if os.waitstatus_to_exitcode(status) != 0:
            failed += 1
        if started[w] < per_writer:
            running[spawn(argv, env, stdin)] = w
            started[w] += 1
    return time.perf_counter_ns() - t0, failed


def summary(samples_ns):
    """Median and spread of a list of nanosecond samples, in milliseconds."""
    ms = sorted(s / 1e6 for s in samples_ns)
    if len(ms) >= 4:
        q = statistics.quantiles(ms, n=4, method="inclusive")
        p25, p75 = q[0], q[2]
    else:
        p25, p75 = ms[0], ms[-1]
    return {
        "runs": len(ms),
        "median_ms": statistics.median(ms),
        "p25_ms": p25,
        "p75_ms": p75,
        "min_ms": ms[0],
        "max_ms": ms[-1],
        "mean_ms": statistics.fmean(ms),
        "stdev_ms": statistics.stdev(ms) if len(ms) > 1 else 0.0,
    }
