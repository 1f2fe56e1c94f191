"""The cases: each triage call beside the baselines that do the same job.

A case names the subcommand it needs; when the binary does not have it, the case is reported
as "not measured: <sub> not built" and nothing is timed. Every variant is run once with its
output captured and checked before it is timed, so a variant that fails or degrades (a
warning on stderr) is reported as failed instead of measured.
"""
import json
import os
import re


def parse(out):
    try:
        return json.loads(out.strip().splitlines()[-1]) if out.strip() else None
    except (ValueError, IndexError):
        return None


def want(pred, what):
    """A check on the last JSON line a variant printed."""
    def check(out):
        v = parse(out)
        if v is None:
            return "printed no JSON (expected %s): %r" % (what, out[:200])
        try:
            ok = pred(v)
        except (KeyError, TypeError, AttributeError):
            ok = False
        return None if ok else "expected %s, got %s" % (what, json.dumps(v)[:300])
    return check


def quiet_or(pred, what):
    """Nothing printed, or JSON for which pred holds (a hook that has nothing to say)."""
    def check(out):
        return None if not out.strip() else want(pred, what)(out)
    return check


class Variant:
    def __init__(self, name, role, argv, stdin=None, check=None, setup=None, env=None):
        self.name, self.role, self.argv, self.stdin = name, role, argv, stdin
        self.check, self.setup = check, setup
        # Variables added to the variant's environment (a fleet store's URL, made when the
        # case runs: a function of the harness's Env).
        self.env = env


class Case:
    def __init__(self, cid, title, needs, kind="single", **kw):
        self.id, self.title, self.needs, self.kind = cid, title, needs, kind
        self.variants = kw.pop("variants", [])
        self.opts = kw


def state_file(doc):
    """A setup that writes st.json into the variant's state root."""
    def setup(root):
        with open(root + "/st.json", "w") as f:
            json.dump(doc, f)
    return setup


def phase_plan(n):
    """A setup that writes plan.toml: n items of /bin/true (`true` exec'd, as bash execs it)."""
    def setup(root):
        with open(root + "/plan.toml", "w") as f:
            f.write('name = "bench"\n')
            for i in range(n):
                f.write('\n[[items]]\nid = "item-%02d"\ncommand = ["/bin/true"]\n' % i)
    return setup


def single_cases(x):
    """x: the environment (paths of the binary, baselines, inputs, interpreters)."""
    t, b, i = x.triage, x.baselines, x.inputs
    bash, py, jq = x.bash, x.python, x.jq
    failure, pre, post = i + "/post-tool-use-failure.json", i + "/pre-tool-use.json", i + "/post-tool-use.json"
    stop_failure = i + "/stop-failure.json"
    no_rule = i + "/no-rule-knows.txt"
    out20k = x.generated + "/output-20k.json"

    def floor_and_jq(stdin):
        return [Variant("/bin/true", "floor", [x.true], stdin),
                Variant("jq -c .", "jq", [jq, "-c", "."], stdin)]

    return [
        Case("classify", "classify a PostToolUseFailure payload (HTTP 429, 0.7 KB)", "classify",
             variants=[Variant("triage classify", "triage", [t, "classify"], failure,
                               want(lambda v: v["kind"] == "rate_limited", "kind rate_limited"))]
             + floor_and_jq(failure)
             + [Variant("bash+jq classify.sh", "bash", [bash, b + "/classify.sh"], failure)]),
        # The learned fallback: a text no rule knows (a Google Cloud SDK denial), classified
        # with the model deciding and with --no-model (rules only, `unknown`): the difference
        # is the time the model adds to a call.
        Case("classify-unknown", "classify a text no rule knows: the learned fallback, and --no-model",
             "classify",
             variants=[Variant("triage classify --raw (model decides)", "triage",
                               [t, "classify", "--raw"], no_rule,
                               want(lambda v: v["decided_by"] == "model"
                                    and v["kind"] == "permission_denied", "decided_by model")),
                       Variant("triage classify --raw --no-model", "triage-rules",
                               [t, "classify", "--raw", "--no-model"], no_rule,
                               want(lambda v: v["decided_by"] == "rule" and v["kind"] == "unknown",
                                    "unknown, decided_by rule")),
                       Variant("/bin/true", "floor", [x.true], no_rule)]),
        Case("breaker-check", "breaker check on a closed breaker", "breaker",
             variants=[Variant("triage breaker check", "triage", [t, "breaker", "check", "researcher"],
                               None, want(lambda v: v["allowed"] is True, "allowed: true"))]
             + floor_and_jq(pre)
             + [Variant("bash+jq+flock breaker.sh check", "bash",
                        [bash, b + "/breaker.sh", "check", "researcher"]),
                Variant("python breaker.py check", "python",
                        [py, b + "/breaker.py", "check", "researcher"])]),
        Case("breaker-record", "breaker record --outcome success", "breaker",
             variants=[Variant("triage breaker record", "triage",
                               [t, "breaker", "record", "researcher", "--outcome", "success"],
                               None, want(lambda v: isinstance(v, dict), "a JSON object"))]
             + floor_and_jq(pre)
             + [Variant("bash+jq+flock breaker.sh record", "bash",
                        [bash, b + "/breaker.sh", "record", "researcher", "success"]),
                Variant("python breaker.py record", "python",
                        [py, b + "/breaker.py", "record", "researcher", "success"])]),
        Case("record-error", "record-error of a PostToolUseFailure payload, one process", "record-error",
             variants=[Variant("triage record-error", "triage", [t, "record-error"], failure,
                               want(lambda v: bool(v["error_id"]), "an error_id"))]
             + floor_and_jq(failure)
             + [Variant("bash+jq+flock record-error.sh", "bash", [bash, b + "/record-error.sh"], failure),
                Variant("python record_error.py", "python", [py, b + "/record_error.py"], failure)]),
        Case("check-output", "check-output, seed 001 researcher rules, 20 KB output", "check-output",
             variants=[Variant("triage check-output", "triage", [t, "check-output"], out20k,
                               want(lambda v: v["ok"] is True, "ok: true"))]
             + floor_and_jq(out20k)
             + [Variant("bash+jq check-output.sh", "bash", [bash, b + "/check-output.sh"], out20k)]),
        Case("hook-pre", "hook: PreToolUse on the Agent tool (breaker gate)", "hook",
             variants=[Variant("triage hook", "triage", [t, "hook"], pre,
                               quiet_or(lambda v: "deny" not in json.dumps(v), "no deny"))]
             + floor_and_jq(pre)
             + [Variant("bash+jq+flock breaker.sh hook", "bash", [bash, b + "/breaker.sh", "hook"], pre),
                Variant("python breaker.py hook", "python", [py, b + "/breaker.py", "hook"], pre)]),
        Case("hook-post", "hook: PostToolUse on the Agent tool (check output, record breaker)", "hook",
             variants=[Variant("triage hook", "triage", [t, "hook"], post,
                               quiet_or(lambda v: v.get("decision") != "block", "no block"))]
             + floor_and_jq(post)
             + [Variant("bash+jq+flock hook-post.sh", "bash", [bash, b + "/hook-post.sh"], post)]),
        # Claude Code kills a StopFailure hook about 60 ms after it starts (it is exiting).
        Case("hook-stop-failure", "hook: StopFailure (classify an API 529, append the record)", "hook",
             variants=[Variant("triage hook", "triage", [t, "hook"], stop_failure,
                               lambda out: None if not out.strip() else "printed %r" % out[:200])]
             + floor_and_jq(stop_failure)),
        # The durable-write floor: a static C program making the same lock, temp file,
        # fsync, link, renames and folder fsync (bench/floor/state-write.c); the harness
        # checks with strace that it does, and counts both programs' system calls.
        Case("state-update", "state-write --update '.n += 1' (atomic, fsync, .bak)", "state-write",
             syscalls=True, target_floor=1.3,
             variants=[Variant("triage state-write --update", "triage",
                               [t, "state-write", "st.json", "--update", ".n += 1"], None,
                               setup=state_file({"n": 0}))]
             + ([Variant("C floor, same durable calls", "syscall-floor", [x.floor, "st.json"], None,
                         want(lambda v: v["written"] is True, "written: true"),
                         setup=state_file({"n": 0}))] if x.floor else [])
             + floor_and_jq(pre)
             + [Variant("bash+jq+flock state-update.sh", "bash",
                        [bash, b + "/state-update.sh", "st.json", ".n += 1"], None,
                        setup=state_file({"n": 0}))]),
        # Issue 19: phase run's overhead over the same fan-out in bash, held to 2× its wall time.
        # Each triage run re-runs the decided phase: same manifest, breakers and output files,
        # as a workflow that runs the phase again.
        Case("phase-x32", "phase run: 32 items of /bin/true, against bash & and wait", "phase",
             runs=60, warmup=5, target_ratio=2.0,
             variants=[Variant("triage phase run", "triage",
                               [t, "phase", "run", "plan.toml", "--workflow", "bench", "--phase", "1"],
                               None, want(lambda v: v["decision"] == "proceed"
                                          and v["counts"]["complete"] == 32, "32 complete, proceed"),
                               setup=phase_plan(32)),
                       Variant("bash & + wait phase.sh", "bash", [bash, b + "/phase.sh", "32"], None,
                               want(lambda v: v["failed"] == 0, "failed: 0"))]),
    ]


def npm_cases(x):
    """The npm route: the hook call through the `triage` that `npm install -g agent-triage`
    puts on PATH (bench/run installs this binary's packages into a prefix of its own,
    offline), beside the binary's own call, and through the Node launcher that the same
    install leaves with install scripts off. x.npm / x.npm_node: those prefixes, or None."""
    pre = x.inputs + "/pre-tool-use.json"
    check = quiet_or(lambda v: "deny" not in json.dumps(v), "no deny")
    variants = [Variant("triage hook (the binary)", "triage", [x.triage, "hook"], pre, check)]
    if x.npm:
        variants.append(Variant("triage hook (npm install -g: the triage on PATH)", "triage-npm",
                                [x.npm + "/bin/triage", "hook"], pre, check))
    if x.npm_node:
        variants.append(Variant("triage hook (npm, install scripts off: Node launcher)",
                                "triage-npm-node", [x.npm_node + "/bin/triage", "hook"], pre, check))
    variants.append(Variant("/bin/true", "floor", [x.true], pre))
    return [Case("hook-npm", "hook: PreToolUse through npm's triage, beside the binary", "hook",
                 target_within_ms=2.0, variants=variants)]


def write_phase_plan(path, n, command, concurrency=None):
    """A plan of n items of `command` (an argv list), ids item-00000…; with `concurrency`,
    the plan's own limit on items running at once."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write('name = "bench"\n')
        if concurrency is not None:
            f.write("concurrency = %d\n" % concurrency)
        argv = "[" + ", ".join(json.dumps(a) for a in command) + "]"
        for i in range(n):
            f.write('\n[[items]]\nid = "item-%05d"\ncommand = %s\n' % (i, argv))
    os.replace(tmp, path)


def lists_option(help_text, option):
    """Whether a clap --help text lists `option` (as an option, not only in prose)."""
    return re.search(r"^\s*(?:-\w, )?%s(?:[ =<]|$)" % re.escape(option), help_text, re.M) is not None


def fanout_variants(x, n, jobs, plans, has_jobs):
    """phase run of n items of `true` beside xargs -P jobs: the variants of one size.

    plans: {"plain": path, "limited": path} (the same items, the second with the plan's own
    `concurrency = jobs`). With --jobs in the binary, phase run gets --jobs; without, it runs
    the plain plan (every item at once, as marked) and, beside it, the limited plan."""
    t = x.triage
    base = [t, "phase", "run", None, "--workflow", "bench", "--phase", "1"]

    def phase(name, role, plan, extra=()):
        argv = list(base)
        argv[3] = plan
        return Variant(name, role, argv + list(extra), None,
                       want(lambda v: v["decision"] == "proceed" and v["counts"]["complete"] == n,
                            "%d complete, proceed" % n))
    if has_jobs:
        out = [phase("triage phase run --jobs %d" % jobs, "triage", plans["plain"],
                     ["--jobs", str(jobs)])]
    else:
        out = [phase("triage phase run (no --jobs: unbounded)", "triage-unbounded", plans["plain"]),
               phase("triage phase run (plan concurrency = %d)" % jobs, "triage-plan",
                     plans["limited"])]
    out.append(Variant("xargs -P %d" % jobs, "xargs",
                       [x.xargs, "-P", str(jobs), "-n", "1", "-a", plans["list"], x.true]))
    return out


def add_compared(case, compare):
    """Adds, after the case's triage variant, the same call made by each (name, binary) of
    `compare` (another build or commit), so both are timed under the same load."""
    tri = next((v for v in case.variants if v.role == "triage"), None)
    if tri is None:
        return
    at = case.variants.index(tri) + 1
    for n, (name, binary) in enumerate(compare):
        v = Variant("%s (%s)" % (tri.name, name), "compare", [binary] + tri.argv[1:], tri.stdin,
                    tri.check, tri.setup, tri.env)
        v.dirname = "compare-%d" % n
        case.variants.insert(at + n, v)


def fleet_cases(x):
    """The fleet store (issue 20): the same call on the file store and on a local Redis."""
    t, i = x.triage, x.inputs
    failure = i + "/post-tool-use-failure.json"
    redis = lambda x: {"TRIAGE_STORE": x.redis_url()}
    return [
        Case("fleet-breaker-check", "breaker check, file store vs a local Redis", "store",
             variants=[Variant("triage breaker check (files)", "triage",
                               [t, "breaker", "check", "researcher"], None,
                               want(lambda v: v["allowed"] is True, "allowed: true")),
                       Variant("triage breaker check (redis)", "triage-redis",
                               [t, "breaker", "check", "researcher"], None,
                               want(lambda v: v["allowed"] is True, "allowed: true"), env=redis)]),
        Case("fleet-record-error", "record-error of a PostToolUseFailure, file store vs a local Redis",
             "store",
             variants=[Variant("triage record-error (files)", "triage", [t, "record-error"], failure,
                               want(lambda v: bool(v["error_id"]), "an error_id")),
                       Variant("triage record-error (redis)", "triage-redis", [t, "record-error"],
                               failure, want(lambda v: bool(v["error_id"]), "an error_id"),
                               env=redis)]),
    ]


def concurrent_cases(x):
    t, b, i = x.triage, x.baselines, x.inputs
    failure = i + "/post-tool-use-failure.json"
    return [
        Case("record-error-x32", "record-error, 32 concurrent writers", "record-error",
             kind="concurrent", writers=32, log="logs/errors.jsonl", id_field="error_id",
             variants=[Variant("triage record-error", "triage", [t, "record-error"], failure),
                       Variant("bash+jq+flock record-error.sh", "bash", [x.bash, b + "/record-error.sh"], failure),
                       Variant("python record_error.py", "python", [x.python, b + "/record_error.py"], failure)]),
        Case("state-update-x8", "state-write --update, 8 concurrent writers", "state-write",
             kind="concurrent", writers=8, counter="st.json",
             variants=[Variant("triage state-write --update", "triage",
                               [t, "state-write", "st.json", "--update", ".n += 1"],
                               setup=state_file({"n": 0})),
                       Variant("bash+jq+flock state-update.sh", "bash",
                               [x.bash, b + "/state-update.sh", "st.json", ".n += 1"],
                               setup=state_file({"n": 0}))]),
    ]


REPORT_JQ = "group_by(.agent) | map({agent: .[0].agent, n: length})"


def report_case(x):
    return Case("report", "report --by agent over a log, against jq -s group_by", "report",
                kind="scaling",
                variants=[Variant("triage report --by agent", "triage", [x.triage, "report", "--by", "agent"]),
                          Variant("jq -s group_by(.agent)", "jq", [x.jq, "-c", "-s", REPORT_JQ])])


def check_log(path, total, id_field):
    """Lines, valid JSON lines and distinct ids in a JSONL log."""
    lines = valid = 0
    ids = set()
    with open(path, "rb") as f:
        for line in f:
            lines += 1
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            valid += 1
            ids.add(rec.get(id_field))
    ok = lines == valid == len(ids) == total
    return ok, "%d lines, %d valid, %d distinct ids, %d expected" % (lines, valid, len(ids), total)


def agent_counts(v, agents):
    """Finds per-agent counts in a report, whatever its exact nesting: {agent: n}."""
    found = {}

    def count_of(obj):
        for k in ("count", "n", "errors", "total"):
            if isinstance(obj.get(k), int):
                return obj[k]
        return None

    def walk(node):
        if isinstance(node, dict):
            for k, val in node.items():
                if k in agents and isinstance(val, dict) and count_of(val) is not None:
                    found[k] = count_of(val)
            name = next((node.get(k) for k in ("agent", "key", "group", "name") if node.get(k) in agents), None)
            if name is not None and count_of(node) is not None:
                found[name] = count_of(node)
            for val in node.values():
                walk(val)
        elif isinstance(node, list):
            for val in node:
                walk(val)
    walk(v)
    return found
