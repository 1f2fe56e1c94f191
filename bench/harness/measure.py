"""Starting processes and timing them, with as little of the harness in the numbers as possible.

Every process is started with posix_spawn (vfork-like: no page tables copied from this
Python process) with stdin opened on the input file, and reaped with wait4. The wall time
runs from just before the spawn to just after the reap, so it includes the same spawn cost
for every variant, the floor `/bin/true` included.

Peak memory is measured in separate runs under GNU time (`/usr/bin/time -f %M`), not from
our own wait4: Linux carries the parent's high-water RSS into a child across exec (exec_mmap
records the old mm's hiwater into signal->maxrss), so a child of this Python process would
report Python's ~20 MB. GNU time's own footprint (~2 MB) is the floor of that column.

A process tree (a phase runner and the items it starts) has two peaks: GNU time's %M is the
largest single process's high-water mark, kept exactly by the kernel (here the runner's own:
its children, exec'd from it, start from at most its high-water mark and `true` adds none);
the tree's total is sampled from /proc (`tree_peak`: every 10 ms, the proportional set sizes
of the runner and its descendants, each address space once), since no cgroup is made for it.
"""
import os
import resource
import signal
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


def parse_stat(text):
    """(pid, ppid, resident pages) from a /proc/PID/stat line. The command name, in
    parentheses, may hold spaces and parentheses itself: the fields after it are split from
    the last ')'."""
    head, _, tail = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    fields = tail.split()
    # tail starts at field 3 (state): ppid is field 4, rss field 24 (pages).
    return pid, int(fields[1]), int(fields[21])


def descendants(procs, root):
    """The pids of root's descendants (root itself excluded), from procs = {pid: (ppid, ...)}."""
    children = {}
    for pid, (ppid, *_) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out = []
    todo = list(children.get(root, []))
    seen = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def parse_pss(text):
    """The Pss line of /proc/PID/smaps_rollup, in KiB (None without one)."""
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return None


HAS_ROLLUP = os.path.exists("/proc/self/smaps_rollup")

# kcmp(2), to tell a child that still shares its parent's memory (posix_spawn's vfork-like
# clone, before its exec) from one with memory of its own: /proc shows the shared memory
# under both pids.
KCMP = {"x86_64": 312, "aarch64": 272}.get(os.uname().machine)
KCMP_VM = 1
_libc = None


def shares_mm(a, b):
    """Whether processes a and b share one address space (False when kcmp cannot tell)."""
    global _libc
    if KCMP is None:
        return False
    try:
        if _libc is None:
            import ctypes
            _libc = ctypes.CDLL(None, use_errno=True)
        return _libc.syscall(KCMP, a, b, KCMP_VM, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def pss_kb(pid, rss_pages, page_kb):
    """A process's proportional set size: its pages, shared ones divided among the processes
    that map them, so a child forked and not yet exec'd does not count its parent's pages
    twice. A process whose smaps_rollup cannot be read now is ending or exec'ing: 0, never
    its RSS, which would count the pages it shares with its parent again. Without
    smaps_rollup at all (Linux before 4.14), its RSS."""
    if not HAS_ROLLUP:
        return rss_pages * page_kb
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            return parse_pss(f.read()) or 0
    except OSError:
        return 0


def snapshot():
    """{pid: (ppid, rss_pages)} of every process /proc shows now (those that end while it is
    read are left out)."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                pid, ppid, rss = parse_stat(f.read())
        except (OSError, ValueError, IndexError):
            continue
        procs[pid] = (ppid, rss)
    return procs


def tree_peak(argv, env, stdin=None, interval=0.01, gnu_time="/usr/bin/time"):
    """One run of argv under GNU time, with its process tree sampled from /proc.

    Returns {"runner_kb": the largest single process's peak RSS, exact (GNU time's %M; None
    without GNU time), "tree_kb": the largest sum of the tree's RSS over the samples,
    "tree_procs": the most processes seen at once, "samples": how many, "exit": the status}.
    The tree's sum is of proportional set sizes (a shared page counted once over the tree;
    a child still in its parent's address space, before its exec, not at all), sampled, so a
    lower bound of its true peak; never below the runner's own exact peak."""
    report = "/tmp/bench-tree-rss.%d" % os.getpid()
    wrapped = os.path.exists(gnu_time)
    pid = spawn([gnu_time, "-f", "%M", "-o", report] + list(argv) if wrapped else list(argv), env, stdin)
    page_kb = resource.getpagesize() // 1024
    peak = procs_peak = samples = 0
    status = None
    while status is None:
        got, st = os.waitpid(pid, os.WNOHANG)
        if got:
            status = st
            break
        procs = snapshot()
        tree = descendants(procs, pid) + ([] if wrapped else [pid])
        kb = sum(pss_kb(p, procs[p][1], page_kb) for p in tree
                 if p in procs and not shares_mm(p, procs[p][0]))
        samples += 1
        peak, procs_peak = max(peak, kb), max(procs_peak, len(tree))
        time.sleep(interval)
    runner = None
    if wrapped:
        try:
            with open(report) as f:
                runner = int(f.read().split()[-1])
            os.unlink(report)
        except (OSError, ValueError, IndexError):
            runner = None
    return {"runner_kb": runner, "tree_kb": max(peak, runner or 0), "tree_procs": procs_peak,
            "samples": samples, "exit": os.waitstatus_to_exitcode(status)}


def mem_available_kb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return None


def unbounded_projection(measured, n, available_kb):
    """Whether an unbounded phase run of n items may run: (ok, note). measured is
    [(items, tree peak KiB)] of smaller sizes; the peak is projected in proportion to the
    items (every item at once holds a thread and its buffers) and must stay under half the
    memory available, or a shared machine's other work is what gets killed."""
    if not measured or not available_kb:
        return True, ""
    items, kb = max(measured)
    projected = kb * n / items
    if projected <= available_kb / 2:
        return True, ""
    return False, "not run: unbounded, %.1f GB projected from %s items (%.1f GB there), over half of %.1f GB available" % (
        projected / 1024 / 1024, "{:,}".format(items), kb / 1024 / 1024, available_kb / 1024 / 1024)


def capture_peak(argv, env, stdin=None, timeout=600, gnu_time="/usr/bin/time"):
    """capture() under GNU time: (exit code, stdout, stderr, peak RSS KiB of the largest
    process, or None without GNU time). On timeout, the process is killed and
    subprocess.TimeoutExpired raised."""
    if not os.path.exists(gnu_time):
        return capture(argv, env, stdin, timeout) + (None,)
    report = "/tmp/bench-capture-rss.%d" % os.getpid()
    code, out, err = capture([gnu_time, "-f", "%M", "-o", report] + list(argv), env, stdin, timeout)
    try:
        with open(report) as f:
            peak = int(f.read().split()[-1])
        os.unlink(report)
    except (OSError, ValueError, IndexError):
        peak = None
    return code, out, err, peak


def capture(argv, env, stdin=None, timeout=600):
    """Runs argv once and keeps what it printed: (exit code, stdout, stderr). Past the
    timeout its whole process group is killed (a wrapper's child too, not only the wrapper)
    and subprocess.TimeoutExpired raised."""
    with open(stdin or DEVNULL, "rb") as f:
        p = subprocess.Popen(argv, env=env, stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise
    return p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


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
