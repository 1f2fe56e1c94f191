"""bench/harness: runs every case against its baselines and reports medians, spreads, ratios,
peak memory and the issue's targets. Started by bench/run, which builds the binary first.

Why a harness of our own rather than hyperfine: the hyperfine on this machine (1.15) has no
--input, so feeding a payload on stdin needs a shell wrapper, and a shell start (~1 ms)
costs as much as the triage call being measured; we also need per-run peak memory (wait4)
and many-writer throughput with a count check, which hyperfine does not do. bench/run still
installs hyperfine and this harness cross-checks its floor against hyperfine -N.
"""
import argparse
import datetime
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time

import cases as C
import inputs
import measure
import report
import syscalls

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)


class Env:
    """Paths of everything a case runs."""

    def __init__(self, args):
        self.triage = os.path.abspath(args.triage)
        self.baselines = os.path.join(BENCH, "baselines")
        self.inputs = os.path.join(BENCH, "inputs")
        self.out = os.path.abspath(args.out)
        self.generated = os.path.join(self.out, "inputs")
        self.work = os.path.join(self.out, "work")
        self.true = shutil.which("true", path="/bin:/usr/bin") or "/bin/true"
        self.bash = shutil.which("bash", path="/bin:/usr/bin")
        self.jq = shutil.which("jq")
        self.xargs = shutil.which("xargs", path="/usr/bin:/bin")
        # The durable-write floor bench/run compiles (bench/floor/state-write.c), if it could.
        self.floor = os.path.abspath(args.floor) if args.floor and os.access(args.floor, os.X_OK) else None
        # The interpreter itself, never a version manager's shim script in front of it.
        self.python = os.path.realpath(sys.executable)
        example = os.path.join(REPO, "hooks", "triage.example.toml")
        self.policy = example if os.path.exists(example) else os.path.join(self.inputs, "policy.toml")
        self.base_env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": self.work,
            "LANG": "C.UTF-8",
            "TRIAGE_CONFIG": self.policy,
        }

        self.redis = None
        # The npm route's prefixes (bench/run's `npm install -g` of this binary's packages):
        # as npm installs them, and with install scripts off.
        self.npm = os.path.abspath(args.npm) if args.npm else None
        self.npm_node = os.path.abspath(args.npm_node) if args.npm_node else None

    def env_for(self, root):
        e = dict(self.base_env)
        e["TRIAGE_DIR"] = root
        e["CLAUDE_PROJECT_DIR"] = root
        return e

    def redis_url(self):
        """A redis-server of the benchmark's own on a free port (started once, stopped at
        exit), without persistence, as a fleet's cache would run."""
        if self.redis is None:
            import atexit
            import socket
            exe = shutil.which("redis-server")
            if not exe:
                raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            proc = subprocess.Popen([exe, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                                     "--appendonly", "no", "--loglevel", "warning"],
                                    stdout=subprocess.DEVNULL)
            atexit.register(proc.kill)
            for _ in range(500):
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.1) as c:
                        c.sendall(b"PING\r\n")
                        if c.recv(7) == b"+PONG\r\n":
                            break
                except OSError:
                    time.sleep(0.01)
            self.redis = "redis://127.0.0.1:%d/0" % port
        return self.redis


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def has_sub(x, sub):
    code = subprocess.run([x.triage, sub, "--help"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode
    return code == 0


def validate(x, v, root, env):
    """Runs a variant once and checks it did the job: (ok, note)."""
    os.chdir(root)
    code, out, err = measure.capture(v.argv, env, v.stdin)
    if code != 0:
        return False, "exit %d: %s" % (code, (err or out).strip()[:300])
    if (v.role.startswith("triage") or v.role == "compare") and err.strip():
        return False, "degraded (warning on stderr): %s" % err.strip()[:300]
    if v.check:
        problem = v.check(out)
        if problem:
            return False, problem
    return True, ""


def prepare_variant(x, case, v):
    root = fresh_dir(os.path.join(x.work, case.id, getattr(v, "dirname", v.role)))
    if v.setup:
        v.setup(root)
    env = x.env_for(root)
    if v.env:
        env.update(v.env(x))
    return root, env


def run_single(x, case, cfg):
    res = {"id": case.id, "title": case.title, "kind": "single", "variants": []}
    live = []
    for v in case.variants:
        root, env = prepare_variant(x, case, v)
        ok, note = validate(x, v, root, env)
        if not ok and v.role == "triage":
            res["status"] = "failed: " + note
            return res
        entry = {"name": v.name, "role": v.role, "argv": [os.path.basename(a) if i == 0 else a
                                                          for i, a in enumerate(v.argv)],
                 "stdin": os.path.basename(v.stdin) if v.stdin else None}
        if not ok:
            entry["note"] = ("failed: " if v.role == "compare" else "baseline failed: ") + note
        else:
            live.append((v, root, env, entry))
        res["variants"].append(entry)
    samples = {id(v): [] for v, _, _, _ in live}
    cpu = {id(v): [] for v, _, _, _ in live}
    bad = {id(v): 0 for v, _, _, _ in live}
    # A case of long calls (a whole phase) asks for fewer runs; --runs and --smoke still rule.
    runs = cfg.runs if cfg.smoke or cfg.runs_given else case.opts.get("runs", cfg.runs)
    warmup = cfg.warmup if cfg.smoke else case.opts.get("warmup", cfg.warmup)
    for _ in range(warmup):
        for v, root, env, _ in live:
            os.chdir(root)
            measure.time_once(v.argv, env, v.stdin)
    order = list(live)
    for _ in range(runs):
        random.shuffle(order)  # interleaved, so drift in machine load hits every variant alike
        for v, root, env, _ in order:
            os.chdir(root)
            ns, code, cpu_ns = measure.time_once(v.argv, env, v.stdin)
            samples[id(v)].append(ns)
            cpu[id(v)].append(cpu_ns)
            bad[id(v)] += code != 0
    for v, root, env, entry in live:
        entry.update(measure.summary(samples[id(v)]))
        entry["cpu_median_ms"] = measure.summary(cpu[id(v)])["median_ms"]
        os.chdir(root)
        entry["peak_rss_kb"] = measure.peak_rss(v.argv, env, v.stdin)
        if bad[id(v)]:
            entry["note"] = "%d runs exited non-zero" % bad[id(v)]
    if case.opts.get("syscalls"):
        count_syscalls(case, res, live)
    tri = next(e for e in res["variants"] if e["role"] == "triage")
    for e in res["variants"]:
        if e.get("median_ms") is not None:
            e["ratio"] = e["median_ms"] / tri["median_ms"]
    res["status"] = "measured"
    if "target_floor" in case.opts:
        res["target_floor"] = case.opts["target_floor"]
    if "target_within_ms" in case.opts:
        res["target_within_ms"] = case.opts["target_within_ms"]
    res["runs"] = "%d runs after %d warm-up, interleaved" % (runs, warmup)
    if "target_ratio" in case.opts:
        res["target_ratio"] = case.opts["target_ratio"]
    return res


def count_syscalls(case, res, live):
    """Each triage and floor variant's system calls, from one run under strace -f in its own
    state root (after the timed runs: its files exist, as on a second call), and whether the
    C floor makes the same durable-write calls as triage."""
    traced = {}
    for v, root, env, entry in live:
        if not (v.role.startswith("triage") or v.role in ("compare", "syscall-floor")):
            continue
        calls = syscalls.trace(v.argv, env, v.stdin, cwd=root)
        if calls is None:
            res["syscall_check"] = "not checked: strace is not installed"
            return
        entry["syscalls"] = len(calls)
        entry["durable_calls"] = syscalls.durable_counts(calls)
        traced[v.role] = calls
    if "triage" in traced and "syscall-floor" in traced:
        diff = syscalls.compare(traced["triage"], traced["syscall-floor"])
        res["syscall_check"] = ("the floor makes triage's durable-write calls (%s)" % ", ".join(
            "%s %d" % kv for kv in syscalls.durable_counts(traced["triage"]).items())
            if not diff else "DIFFERENT durable-write calls, triage vs floor: " + diff)
    for e in res["variants"]:
        if e.get("syscalls") is not None:
            e["note"] = ("%s; " % e["note"] if e.get("note") else "") + "%d system calls" % e["syscalls"]


def run_concurrent(x, case, cfg):
    writers = case.opts["writers"] if not cfg.smoke else 4
    per = cfg.per_writer
    total = writers * per
    res = {"id": case.id, "title": case.title, "kind": "concurrent", "variants": [],
           "runs": "%d writers × %d calls, best of %d" % (writers, per, cfg.reps)}
    for v in case.variants:
        entry = {"name": v.name, "role": v.role}
        walls, notes, ok_all = [], [], True
        for _ in range(cfg.reps):
            root, env = prepare_variant(x, case, v)
            os.chdir(root)
            ns, failed = measure.concurrent(v.argv, env, v.stdin, writers, per)
            if "log" in case.opts:
                ok, note = C.check_log(os.path.join(root, case.opts["log"]), total, case.opts["id_field"])
            else:
                with open(os.path.join(root, case.opts["counter"])) as f:
                    n = json.load(f).get("n")
                ok, note = n == total, "n = %s, %d expected" % (n, total)
            if failed:
                ok, note = False, note + "; %d calls exited non-zero" % failed
            ok_all &= ok
            notes.append(note)
            walls.append(ns / 1e6)
        entry.update(wall_ms=min(walls), per_s=total / (min(walls) / 1000),
                     count_check="ok" if ok_all else "LOST OR TORN", note=("count ok: " if ok_all else "COUNT FAILED: ") + notes[-1])
        if not ok_all and v.role == "triage":
            res["status"] = "failed: " + notes[-1]
        res["variants"].append(entry)
    tri = res["variants"][0]
    for e in res["variants"]:
        e["ratio"] = e["wall_ms"] / tri["wall_ms"]
    res.setdefault("status", "measured")
    return res


def record_templates(x):
    """Real records from this binary's record-error, so the logs have its exact shape."""
    if not has_sub(x, "record-error"):
        return inputs.synthetic_templates(), "synthetic (SPEC §5 shape; record-error not built)"
    root = fresh_dir(os.path.join(x.work, "templates"))
    env = x.env_for(root)
    for name in ("post-tool-use-failure.json", "pre-tool-use.json"):
        measure.capture([x.triage, "record-error"], env, os.path.join(x.inputs, name))
    got = []
    path = os.path.join(root, "logs", "errors.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            got = [json.loads(line) for line in f if line.strip()]
    if not got:
        return inputs.synthetic_templates(), "synthetic (record-error wrote nothing)"
    return got, "records written by triage record-error"


def run_scaling(x, cfg):
    case = C.report_case(x)
    res = {"id": case.id, "title": case.title, "kind": "scaling", "variants": [], "sizes": []}
    if not has_sub(x, "report"):
        res["status"] = "not measured: report not built"
        return res
    templates, source = record_templates(x)
    res["log_records"] = source
    key = inputs.template_key(templates)
    for n, runs in cfg.sizes:
        log = os.path.join(x.generated, "errors-%d-%s.jsonl" % (n, key))
        inputs.error_log(log, n, templates)
        truth = inputs.count_by_agent(log)
        root = fresh_dir(os.path.join(x.work, "report-%d" % n))
        os.makedirs(os.path.join(root, "logs"))
        os.link(log, os.path.join(root, "logs", "errors.jsonl"))
        env = x.env_for(root)
        tri, jqv = case.variants
        jq_argv = jqv.argv + [log]
        os.chdir(root)
        code, out, err = measure.capture(tri.argv, env)
        parsed = C.parse(out)
        counts = C.agent_counts(parsed, set(truth)) if parsed is not None else {}
        if code != 0 or err.strip():
            res["status"] = "failed at %d records: exit %d %s" % (n, code, err.strip()[:300])
            return res
        verified = counts == truth
        # The HTML dashboard from the same log: it should take about the time the report takes.
        page = os.path.join(root, "report.html")
        html_argv = tri.argv + ["--html", page]
        samples = {"triage": [], "jq": [], "html": []}
        for _ in range(runs):
            for role, argv in (("triage", tri.argv), ("jq", jq_argv), ("html", html_argv)):
                samples[role].append(measure.time_once(argv, env)[0])
        rss = {"triage": measure.peak_rss(tri.argv, env, runs=1),
               "jq": measure.peak_rss(jq_argv, env, runs=1),
               "html": measure.peak_rss(html_argv, env, runs=1)}
        size = {"records": n, "bytes": os.path.getsize(log), "runs": runs,
                "counts_verified": verified,
                "html_bytes": os.path.getsize(page) if os.path.exists(page) else None}
        html_variant = C.Variant("triage report --html", "triage", html_argv)
        for role, v in (("triage", tri), ("jq", jqv), ("html", html_variant)):
            e = {"name": "%s, %s records" % (v.name, "{:,}".format(n)), "role": role, "records": n}
            e.update(measure.summary(samples[role]))
            e["peak_rss_kb"] = rss[role]
            size[role] = e
        size["jq"]["ratio"] = size["jq"]["median_ms"] / size["triage"]["median_ms"]
        size["html"]["ratio"] = size["html"]["median_ms"] / size["triage"]["median_ms"]
        if size["html_bytes"] is not None:
            size["html"]["note"] = "page of %s bytes" % "{:,}".format(size["html_bytes"])
        size["triage"]["ratio"] = 1.0
        size["triage"]["note"] = "per-agent counts match the log" if verified else \
            "per-agent counts NOT matched: found %d of %d agents" % (len(counts), len(truth))
        res["variants"] += [size["triage"], size["jq"], size["html"]]
        res["sizes"].append(size)
    res["status"] = "measured"
    res["runs"] = ", ".join("%s records: %d runs" % ("{:,}".format(n), r) for n, r in cfg.sizes)
    return res


# An unbounded phase run of more items than this is only started once its memory has been
# projected from a smaller one's.
PROBE_ABOVE = 1000


def probe_unbounded(x, v, n):
    """(n, the tree's peak KiB) of one unbounded run of n items of the same command."""
    plan = os.path.join(x.generated, "phase-%d.toml" % n)
    C.write_phase_plan(plan, n, [x.true])
    argv = list(v.argv)
    argv[3] = plan
    root = fresh_dir(os.path.join(x.work, "fanout", "probe"))
    os.chdir(root)
    return n, measure.tree_peak(argv, x.env_for(root))["tree_kb"]


def validate_fanout(v, root, env, timeout_s):
    """validate() for a fan-out variant, under GNU time: (ok, note, wall ns, runner's peak
    RSS KiB). A run past timeout_s is killed: (False, "timed out ...", ...)."""
    os.chdir(root)
    t0 = time.perf_counter_ns()
    try:
        code, out, err, peak = measure.capture_peak(v.argv, env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False, "timed out: not measured, one run took over %d s" % timeout_s, None, None
    took = time.perf_counter_ns() - t0
    if code != 0:
        return False, "exit %d: %s" % (code, (err or out).strip()[:300]), took, peak
    if v.role.startswith("triage") and err.strip():
        return False, "degraded (warning on stderr): %s" % err.strip()[:300], took, peak
    problem = v.check(out) if v.check else None
    return problem is None, problem or "", took, peak


def run_fanout(x, cfg):
    """phase run of 1,000 and 10,000 items of `true` beside xargs -P N with the same N: wall
    and CPU time interleaved, each run in a fresh state root, then one run of each under GNU
    time with its process tree sampled (the runner's exact peak RSS and the tree's)."""
    jobs = cfg.phase_jobs
    res = {"id": "phase-fanout", "kind": "fanout", "variants": [], "sizes": [], "jobs": jobs,
           "title": "phase run of many items of true, against xargs -P %d" % jobs}
    if not has_sub(x, "phase"):
        res["status"] = "not measured: phase not built"
        return res
    if not x.xargs:
        res["status"] = "not measured: xargs is not installed"
        return res
    helptext = subprocess.run([x.triage, "phase", "run", "--help"], capture_output=True,
                              text=True).stdout
    has_jobs = C.lists_option(helptext, "--jobs")
    res["jobs_option"] = has_jobs
    measured_unbounded = []
    for n, runs in cfg.phase_sizes:
        plans = {"plain": os.path.join(x.generated, "phase-%d.toml" % n),
                 "limited": os.path.join(x.generated, "phase-%d-c%d.toml" % (n, jobs)),
                 "list": os.path.join(x.generated, "items-%d.txt" % n)}
        C.write_phase_plan(plans["plain"], n, [x.true])
        C.write_phase_plan(plans["limited"], n, [x.true], concurrency=jobs)
        with open(plans["list"], "w") as f:
            f.write("".join("item-%05d\n" % i for i in range(n)))
        size = {"items": n, "runs": runs, "variants": []}
        live = []
        for v in C.fanout_variants(x, n, jobs, plans, has_jobs):
            e = {"name": "%s, %s items" % (v.name, "{:,}".format(n)), "role": v.role, "items": n}
            size["variants"].append(e)
            if v.role == "triage-unbounded":
                if not measured_unbounded and n > PROBE_ABOVE:
                    # Nothing smaller measured in this run: a run of a tenth of the items
                    # first, so the projection never rests on a guess.
                    measured_unbounded.append(probe_unbounded(x, v, n // 10))
                ok, note = measure.unbounded_projection(measured_unbounded, n, measure.mem_available_kb())
                if not ok:
                    e["note"] = note
                    continue
            root = fresh_dir(os.path.join(x.work, "fanout", v.role))
            ok, note, took, peak = validate_fanout(v, root, x.env_for(root), cfg.fanout_timeout_s)
            if note.startswith("timed out"):
                e["note"] = note
                continue
            if ok and took > cfg.long_run_s * 1e9:
                # A run of many minutes is not repeated: the checked run (under GNU time, its
                # output read through a pipe) is its one timed run and gives the runner's
                # peak RSS; the tree is not sampled.
                e["long"] = (took, peak)
            if not ok:
                if v.role != "xargs":
                    res["status"] = "failed at %d items: %s: %s" % (n, v.name, note)
                    res["variants"] += size["variants"]
                    return res
                e["note"] = "failed: " + note
                continue
            live.append((v, e))
        walls = {id(v): [e["long"][0]] if "long" in e else [] for v, e in live}
        cpu = {id(v): [] for v, _ in live}
        bad = {id(v): 0 for v, _ in live}
        order = [(v, e) for v, e in live if "long" not in e]
        for _ in range(runs):
            random.shuffle(order)
            for v, _ in order:
                root = fresh_dir(os.path.join(x.work, "fanout", v.role))
                os.chdir(root)
                ns, code, cpu_ns = measure.time_once(v.argv, x.env_for(root))
                walls[id(v)].append(ns)
                cpu[id(v)].append(cpu_ns)
                bad[id(v)] += code != 0
        for v, e in live:
            root = fresh_dir(os.path.join(x.work, "fanout", v.role))
            os.chdir(root)
            if "long" in e:
                tree = {"runner_kb": e["long"][1], "tree_kb": None, "tree_procs": 0, "exit": 0}
            else:
                tree = measure.tree_peak(v.argv, x.env_for(root))
            e.update(measure.summary(walls[id(v)]))
            if cpu[id(v)]:
                e["cpu_median_ms"] = measure.summary(cpu[id(v)])["median_ms"]
            e["peak_rss_kb"], e["tree_rss_kb"] = tree["runner_kb"], tree["tree_kb"]
            e["tree_procs"] = tree["tree_procs"]
            notes = ["at most %d processes seen at once" % tree["tree_procs"]] if tree["tree_procs"] else []
            if e.pop("long", None):
                notes.insert(0, "1 timed run: one takes over %d s; the tree not sampled" % cfg.long_run_s)
            if bad[id(v)] or tree["exit"]:
                notes.append("%d runs exited non-zero" % (bad[id(v)] + (tree["exit"] != 0)))
            e["note"] = "; ".join(notes)
            if v.role == "triage-unbounded":
                measured_unbounded.append((n, tree["tree_kb"] or tree["runner_kb"] or 0))
        xa = next((e for e in size["variants"] if e["role"] == "xargs" and e.get("median_ms")), None)
        for e in size["variants"]:
            if xa and e.get("median_ms") is not None:
                e["ratio"] = e["median_ms"] / xa["median_ms"]
        res["variants"] += size["variants"]
        res["sizes"].append(size)
    res["status"] = "measured"
    res["runs"] = "%s; each run in a fresh state root" % ", ".join(
        "%s items: %d runs" % ("{:,}".format(n), r) for n, r in cfg.phase_sizes)
    return res


def hyperfine_cross_check(x, cfg):
    """The floor measured by hyperfine -N and by this harness, to show the harness adds little."""
    hf = shutil.which("hyperfine")
    if not hf or cfg.smoke:
        return []
    root = fresh_dir(os.path.join(x.work, "cross-check"))
    cmds = [[x.true], [x.triage, "--version"]]
    export = os.path.join(root, "hf.json")
    subprocess.run([hf, "-N", "--warmup", "20", "--runs", "200", "--export-json", export]
                   + [" ".join(c) for c in cmds], cwd=root, env=x.env_for(root),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    try:
        with open(export) as f:
            hres = json.load(f)["results"]
    except (OSError, ValueError, KeyError):
        return []
    out = []
    for c, h in zip(cmds, hres):
        os.chdir(root)
        ns = [measure.time_once(c, x.env_for(root))[0] for _ in range(200)]
        out.append({"command": " ".join(os.path.basename(p) if i == 0 else p for i, p in enumerate(c)),
                    "harness_median_ms": measure.summary(ns)["median_ms"],
                    "hyperfine_median_ms": h["median"] * 1000})
    return out


def targets(results):
    out = []
    smoke = results["mode"] == "smoke"

    def add(target, verdict, found):
        # A smoke run is a debug build with a handful of runs: its times judge nothing.
        timing = not any(w in target for w in ("lost", "match", "memory", "same durable", "1 MB"))
        if smoke and timing and verdict in ("PASS", "MISS"):
            verdict = "smoke"
        out.append({"target": target, "verdict": verdict, "found": found})
    for c in results["cases"]:
        if c["kind"] == "single":
            if c["status"] != "measured":
                add("%s within 2× of /bin/true and ≥5× faster than bash+jq" % c["id"], "—", c["status"])
                continue
            by = {e["role"]: e for e in c["variants"] if e.get("median_ms") is not None}
            tri, floor, bash = by["triage"], by.get("floor"), by.get("bash")
            sfloor = by.get("syscall-floor")
            if c.get("target_floor") and sfloor:
                r = tri["median_ms"] / sfloor["median_ms"]
                add("%s within %g× of the C durable-write floor" % (c["id"], c["target_floor"]),
                    "PASS" if r <= c["target_floor"] else "MISS",
                    "%.2f× (%s vs %s)%s" % (r, report.fmt_ms(tri["median_ms"]), report.fmt_ms(sfloor["median_ms"]),
                                           "; CPU time %.2f×" % (tri["cpu_median_ms"] / sfloor["cpu_median_ms"])
                                           if tri.get("cpu_median_ms") and sfloor.get("cpu_median_ms") else ""))
            if c.get("syscall_check"):
                add("%s: the C floor makes the same durable-write calls" % c["id"],
                    "PASS" if c["syscall_check"].startswith("the floor") else
                    ("—" if c["syscall_check"].startswith("not") else "MISS"), c["syscall_check"])
            if c.get("target_within_ms"):
                # The npm route: the same call through npm's `triage`, within this many
                # milliseconds of the binary's own.
                for e in c["variants"]:
                    if not e["role"].startswith("triage-npm") or e.get("median_ms") is None:
                        continue
                    d = e["median_ms"] - tri["median_ms"]
                    found = "%+.2f ms (%s vs %s)" % (d, report.fmt_ms(e["median_ms"]),
                                                     report.fmt_ms(tri["median_ms"]))
                    if e["role"] == "triage-npm":
                        add("%s: npm's triage within %g ms of the binary's" % (c["id"], c["target_within_ms"]),
                            "PASS" if d <= c["target_within_ms"] else "MISS", found)
                    else:
                        add("%s: the Node launcher (install scripts off), for reference" % c["id"],
                            "—", found)
                continue
            if c.get("target_ratio") and bash:
                # An overhead target: triage within this many times the bash script's wall time.
                r = tri["median_ms"] / bash["median_ms"]
                add("%s within %g× of %s" % (c["id"], c["target_ratio"], bash["name"]),
                    "PASS" if r <= c["target_ratio"] else "MISS",
                    "%.2f× (%s vs %s)" % (r, report.fmt_ms(tri["median_ms"]), report.fmt_ms(bash["median_ms"])))
                continue
            if floor:
                for e in c["variants"]:
                    if e["role"] not in ("triage", "compare") or e.get("median_ms") is None:
                        continue
                    r = e["median_ms"] / floor["median_ms"]
                    found = "%.2f× (%s vs %s)" % (r, report.fmt_ms(e["median_ms"]),
                                                   report.fmt_ms(floor["median_ms"]))
                    if e.get("cpu_median_ms") and floor.get("cpu_median_ms"):
                        found += "; CPU time %.2f×" % (e["cpu_median_ms"] / floor["cpu_median_ms"])
                    target = "%s within 2× of /bin/true" % c["id"]
                    if e["role"] == "compare":
                        target = "%s, %s, within 2× of /bin/true" % (c["id"], e["name"])
                    add(target, "PASS" if r <= 2 else "MISS", found)
            if bash:
                r = bash["median_ms"] / tri["median_ms"]
                add("%s ≥5× faster than bash+jq" % c["id"], "PASS" if r >= 5 else "MISS",
                    "%.2f× (%s vs %s)" % (r, report.fmt_ms(bash["median_ms"]), report.fmt_ms(tri["median_ms"])))
        elif c["kind"] == "concurrent":
            if c["status"] != "measured":
                add("%s: nothing lost" % c["id"], "—" if c["status"].startswith("not") else "MISS", c["status"])
                continue
            tri = c["variants"][0]
            add("%s: nothing lost, no torn line" % c["id"],
                "PASS" if tri["count_check"] == "ok" else "MISS", tri["note"])
            for e in c["variants"][1:]:
                add("%s: triage faster than %s" % (c["id"], e["name"]), "PASS" if e["ratio"] > 1 else "MISS",
                    "%.0f vs %.0f rec/s (%.2f×)" % (tri["per_s"], e["per_s"], e["ratio"]))
        elif c["kind"] == "fanout":
            fanout_targets(c, add)
        elif c["kind"] == "scaling":
            if c["status"] != "measured":
                add("report ≥20× faster than jq -s at the largest log; memory flat", "—", c["status"])
                continue
            big, small = c["sizes"][-1], c["sizes"][0]
            r = big["jq"]["ratio"]
            add("report ≥20× faster than jq -s at %s records" % "{:,}".format(big["records"]),
                "PASS" if r >= 20 else "MISS", "%.1f× (%s vs %s)" % (
                    r, report.fmt_ms(big["triage"]["median_ms"]), report.fmt_ms(big["jq"]["median_ms"])))
            g = (big["triage"]["peak_rss_kb"] or 0) / max(small["triage"]["peak_rss_kb"] or 1, 1)
            add("report memory does not grow with the log", "PASS" if g <= 1.5 else "MISS",
                "peak RSS %s at %s records, %s at %s (×%.2f)" % (
                    report.fmt_kb(small["triage"]["peak_rss_kb"]), "{:,}".format(small["records"]),
                    report.fmt_kb(big["triage"]["peak_rss_kb"]), "{:,}".format(big["records"]), g))
            h = big.get("html")
            if h and h.get("median_ms"):
                at = "{:,}".format(big["records"])
                add("report --html within 1.3× of report's time at %s records" % at,
                    "PASS" if h["ratio"] <= 1.3 else "MISS",
                    "%.2f× (%s vs %s)" % (h["ratio"], report.fmt_ms(h["median_ms"]),
                                          report.fmt_ms(big["triage"]["median_ms"])))
                tri_kb, html_kb = big["triage"].get("peak_rss_kb"), h.get("peak_rss_kb")
                if tri_kb and html_kb:
                    m = html_kb / tri_kb
                    # Peak RSS is the kernel's count: it holds on a busy machine, so even a
                    # smoke run judges it.
                    add("report --html within 2× of report's peak RSS at %s records (memory)" % at,
                        "PASS" if m <= 2 else "MISS",
                        "%.2f× (%s vs %s)" % (m, report.fmt_kb(html_kb), report.fmt_kb(tri_kb)))
                add("report --html page under 1 MB at %s records" % at,
                    "PASS" if (big.get("html_bytes") or 0) < 1_000_000 else "MISS",
                    "%s bytes" % "{:,}".format(big.get("html_bytes") or 0))
            add("report answers match jq's per-agent counts",
                "PASS" if all(s["counts_verified"] for s in c["sizes"]) else "MISS",
                ", ".join("%s: %s" % ("{:,}".format(s["records"]), "ok" if s["counts_verified"] else "differ")
                          for s in c["sizes"]))
    return out


def fanout_targets(c, add):
    """phase run at the largest size: within 1.5× of xargs -P in wall time, the runner's peak
    RSS under 64 MB; one line per triage variant measured there."""
    if c["status"] != "measured":
        add("phase run within 1.5× of xargs -P, runner under 64 MB", "—", c["status"])
        return
    big = c["sizes"][-1]
    at = "{:,}".format(big["items"])
    xa = next((e for e in big["variants"] if e["role"] == "xargs" and e.get("median_ms")), None)
    for e in big["variants"]:
        if not e["role"].startswith("triage"):
            continue
        name = re.sub(r", [\d,]+ items$", "", e["name"])
        if e.get("median_ms") is None:
            add("%s within 1.5× of xargs -P %d at %s items" % (name, c["jobs"], at), "—",
                e.get("note", "not measured"))
            continue
        if xa:
            add("%s within 1.5× of xargs -P %d at %s items" % (name, c["jobs"], at),
                "PASS" if e["ratio"] <= 1.5 else "MISS",
                "%.2f× (%s vs %s)" % (e["ratio"], report.fmt_ms(e["median_ms"]), report.fmt_ms(xa["median_ms"])))
        if e.get("peak_rss_kb"):
            add("%s: runner's peak RSS under 64 MB at %s items (memory)" % (name, at),
                "PASS" if e["peak_rss_kb"] < 64 * 1024 else "MISS",
                "%s (process tree, sampled: %s)" % (report.fmt_kb(e["peak_rss_kb"]), report.fmt_kb(e.get("tree_rss_kb"))))


def machine(x):
    def first(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            return "?"
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": "%.0f GB" % (mem_kb / 1024 / 1024),
            "kernel": platform.release(), "load_start": "%.2f" % os.getloadavg()[0],
            "jq": first([x.jq, "--version"]), "bash": "bash " + first([x.bash, "-c", "echo $BASH_VERSION"]),
            "python": "Python " + platform.python_version()}


class Config:
    def __init__(self, args):
        self.smoke = args.smoke
        self.runs = args.runs or (5 if args.smoke else 150)
        self.runs_given = args.runs is not None
        self.warmup = 2 if args.smoke else 15
        self.per_writer = 5 if args.smoke else 25
        self.reps = 1 if args.smoke else 3
        self.sizes = [(1000, 2)] if args.smoke else [(100_000, 5), (1_000_000, 3)]
        # phase run's fan-out: items and runs per size, and N of xargs -P N (and --jobs N).
        self.phase_sizes = [(40, 1), (200, 1)] if args.smoke else [(1000, 3), (10_000, 2)]
        self.phase_jobs = args.phase_jobs
        self.phase_sizes = [s for s in self.phase_sizes if not args.phase_items or s[0] in args.phase_items] \
            or [(n, 1 if args.smoke else 3) for n in args.phase_items]
        # A variant whose one run takes longer is timed once (its checked run), not per round.
        self.long_run_s = 300
        # A fan-out run still going after this long is killed and reported as not measured.
        self.fanout_timeout_s = 3600


def update_doc(path, md, label):
    marker = "results" if label == "default" else "results-" + label
    with open(path) as f:
        doc = f.read()
    new = re.sub(r"(<!-- %s:begin -->\n).*?(<!-- %s:end -->)" % (marker, marker),
                 lambda m: m.group(1) + md + m.group(2), doc, flags=re.S)
    with open(path, "w") as f:
        f.write(new)


def main():
    ap = argparse.ArgumentParser(prog="bench/run")
    ap.add_argument("--triage", required=True, help="the binary to measure")
    ap.add_argument("--out", default=os.path.join(BENCH, "out"))
    ap.add_argument("--smoke", action="store_true", help="a few runs of everything, no timing claims")
    ap.add_argument("--only", action="append", default=[], help="case id (repeatable)")
    ap.add_argument("--runs", type=int, help="timed runs per variant of single-call cases")
    ap.add_argument("--label", default="default", help="how the binary was built")
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=BIN",
                    help="also time another triage binary (another build, another commit) in "
                         "every single-call case, interleaved with the rest (repeatable)")
    ap.add_argument("--update-doc", help="replace the results section of this Markdown file")
    ap.add_argument("--floor", help="the durable-write floor (bench/floor/state-write.c, compiled)")
    ap.add_argument("--phase-items", type=int, action="append", default=[], metavar="N",
                    help="the phase fan-out case at N items only (repeatable; default 1,000 and 10,000)")
    ap.add_argument("--phase-jobs", type=int, default=8, metavar="N",
                    help="items at once in the phase fan-out case: xargs -P N, phase run --jobs N")
    ap.add_argument("--npm", metavar="PREFIX",
                    help="an `npm install -g` prefix of this binary's npm packages (case hook-npm)")
    ap.add_argument("--npm-node", metavar="PREFIX",
                    help="the same, installed with --ignore-scripts (the Node launcher)")
    args = ap.parse_args()
    x, cfg = Env(args), Config(args)
    for d in (x.out, x.generated):
        os.makedirs(d, exist_ok=True)
    fresh_dir(x.work)
    inputs.output_20k(os.path.join(x.generated, "output-20k.json"))
    version = subprocess.run([x.triage, "--version"], capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    results = {"started_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "mode": "smoke" if cfg.smoke else "full", "machine": machine(x),
               "triage": {"bin": x.triage, "version": version, "commit": commit, "build": args.label},
               "policy": os.path.relpath(x.policy, REPO), "cases": []}
    want = set(args.only)
    failed = False
    compare = []
    for spec in args.compare:
        name, sep, path = spec.partition("=")
        if not sep or not name or not os.access(path, os.X_OK):
            ap.error("--compare wants NAME=BIN, an executable triage binary: %r" % spec)
        compare.append((name, os.path.abspath(path)))
    results["triage"]["compared"] = [{"name": n, "bin": b} for n, b in compare]
    singles = C.single_cases(x)
    for c in singles:
        C.add_compared(c, compare)
    todo = ([(c.id, c) for c in singles] + [(c.id, c) for c in C.npm_cases(x)]
            + [(c.id, c) for c in C.fleet_cases(x)]
            + [(c.id, c) for c in C.concurrent_cases(x)] + [("phase-fanout", None), ("report", None)])
    for cid, case in todo:
        if want and cid not in want:
            continue
        t0 = time.time()
        if cid == "phase-fanout":
            res = run_fanout(x, cfg)
        elif case is None:
            res = run_scaling(x, cfg)
        elif cid == "hook-npm" and not x.npm:
            res = {"id": case.id, "title": case.title, "kind": case.kind, "variants": [],
                   "status": "not measured: no npm install of this binary (bench/run makes one "
                             "where npm and node are installed)"}
        elif not has_sub(x, case.needs):
            res = {"id": case.id, "title": case.title, "kind": case.kind, "variants": [],
                   "status": "not measured: %s not built" % case.needs}
        elif case.kind == "concurrent":
            res = run_concurrent(x, case, cfg)
        else:
            res = run_single(x, case, cfg)
        res["seconds"] = round(time.time() - t0, 1)
        failed |= res["status"].startswith("failed")
        results["cases"].append(res)
        print(report.text_table(res), flush=True)
        print(flush=True)
    os.chdir(BENCH)
    results["cross_check"] = hyperfine_cross_check(x, cfg)
    results["machine"]["load_end"] = "%.2f" % os.getloadavg()[0]
    results["targets"] = targets(results)
    print("Targets")
    for line in report.targets_lines(results["targets"]):
        print("  " + line)
    for c in results["cross_check"]:
        print("cross-check %-20s harness %s, hyperfine -N %s" % (
            c["command"], report.fmt_ms(c["harness_median_ms"]), report.fmt_ms(c["hyperfine_median_ms"])))
    name = "results.json" if args.label == "default" else "results-%s.json" % args.label
    with open(os.path.join(x.out, name), "w") as f:
        json.dump(results, f, indent=1)
    md = report.markdown(results)
    with open(os.path.join(x.out, name.replace(".json", ".md")), "w") as f:
        f.write(md)
    if args.update_doc:
        update_doc(args.update_doc, md, args.label)
    print("\nwrote %s and the .md beside it" % os.path.join(x.out, name))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
