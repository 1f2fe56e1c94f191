"""Unit tests of the harness's own logic (no timing): `python3 -m unittest discover bench/harness`."""
import json
import os
import subprocess
import tempfile
import time
import unittest

import cases
import inputs
import measure
import syscalls

HERE = os.path.dirname(os.path.abspath(__file__))


def read(path):
    with open(path) as f:
        return f.read()


def harness_main():
    """bench/harness/__main__.py as a module (its targets), without running it."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("harness_main", os.path.join(HERE, "__main__.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Summary(unittest.TestCase):
    def test_median_and_quartiles(self):
        s = measure.summary([1e6, 2e6, 3e6, 4e6, 100e6])
        self.assertEqual(s["median_ms"], 3.0)
        self.assertEqual((s["p25_ms"], s["p75_ms"]), (2.0, 4.0))
        self.assertEqual((s["min_ms"], s["max_ms"]), (1.0, 100.0))


class Checks(unittest.TestCase):
    def test_want_reads_the_last_json_line(self):
        check = cases.want(lambda v: v["ok"] is True, "ok")
        self.assertIsNone(check('noise\n{"ok": true}\n'))
        self.assertIn("expected ok", check('{"ok": false}'))
        self.assertIn("printed no JSON", check(""))

    def test_quiet_hook_passes(self):
        check = cases.quiet_or(lambda v: "deny" not in json.dumps(v), "no deny")
        self.assertIsNone(check(""))
        self.assertIsNotNone(check('{"permissionDecision": "deny"}'))


class Compared(unittest.TestCase):
    def test_each_binary_makes_the_triage_call_beside_it(self):
        setup = cases.state_file({"n": 0})
        case = cases.Case("c", "t", "state-write", variants=[
            cases.Variant("triage x", "triage", ["/a/triage", "x", "--y"], "in.json", None, setup),
            cases.Variant("/bin/true", "floor", ["/bin/true"], "in.json")])
        cases.add_compared(case, [("main", "/m/triage"), ("static", "/s/triage")])
        self.assertEqual([v.name for v in case.variants],
                         ["triage x", "triage x (main)", "triage x (static)", "/bin/true"])
        main, static = case.variants[1], case.variants[2]
        self.assertEqual((main.role, main.argv, main.stdin, main.setup),
                         ("compare", ["/m/triage", "x", "--y"], "in.json", setup))
        self.assertEqual(static.argv[0], "/s/triage")
        self.assertNotEqual(main.dirname, static.dirname, "each its own state root")


class Logs(unittest.TestCase):
    def test_generated_log_counts_and_check(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "log.jsonl")
            inputs.error_log(path, 500, inputs.synthetic_templates())
            counts = inputs.count_by_agent(path)
            self.assertEqual(sum(counts.values()), 500)
            self.assertEqual(cases.check_log(path, 500, "error_id")[0], True)
            self.assertEqual(cases.check_log(path, 501, "error_id")[0], False)
            with open(path, "a") as f:
                f.write('{"error_id": "torn')
            self.assertEqual(cases.check_log(path, 501, "error_id")[0], False)

    def test_agent_counts_in_any_nesting(self):
        agents = {"a", "b"}
        self.assertEqual(cases.agent_counts({"groups": [{"agent": "a", "count": 2}, {"agent": "b", "count": 1}]}, agents),
                         {"a": 2, "b": 1})
        self.assertEqual(cases.agent_counts({"by": {"a": {"n": 3}, "b": {"errors": 4}}}, agents), {"a": 3, "b": 4})
        self.assertEqual(cases.agent_counts({"total": 7}, agents), {})


class ProcessTree(unittest.TestCase):
    def test_stat_line_with_spaces_and_parentheses_in_the_name(self):
        line = "4242 (we (ird) name) S 17 4242 4242 0 -1 4194560 99 0 0 0 1 2 0 0 20 0 1 0 5 1234567 321 18446744073709551615\n"
        self.assertEqual(measure.parse_stat(line), (4242, 17, 321))

    def test_descendants_of_a_root_only(self):
        procs = {1: (0, 9), 10: (1, 5), 11: (10, 7), 12: (11, 3), 13: (10, 2), 20: (1, 100)}
        self.assertEqual(sorted(measure.descendants(procs, 10)), [11, 12, 13])
        self.assertEqual(measure.descendants(procs, 12), [])
        # A loop (pid reuse between two reads of /proc) ends.
        self.assertEqual(sorted(measure.descendants({5: (6, 1), 6: (5, 1)}, 5)), [5, 6])

    def test_pss_from_smaps_rollup(self):
        text = "55d0-7ffe ---p 00000000 00:00 0 [rollup]\nRss: 15596 kB\nPss: 13886 kB\nPss_Dirty: 7688 kB\n"
        self.assertEqual(measure.parse_pss(text), 13886)
        self.assertIsNone(measure.parse_pss("Rss: 1 kB\n"))

    def test_an_address_space_is_shared_with_itself_not_with_the_parent(self):
        if measure.KCMP is None:
            self.skipTest("kcmp's number is not known on this machine")
        self.assertTrue(measure.shares_mm(os.getpid(), os.getpid()))
        self.assertFalse(measure.shares_mm(os.getpid(), os.getppid()))

    def test_tree_peak_counts_the_runner_and_its_children(self):
        # sh holds a child (sleep) for a moment: the tree has at least two processes and
        # its peak is at least the largest one's exact peak.
        t = measure.tree_peak(["/bin/sh", "-c", "sleep 0.3; true"], {"PATH": "/usr/bin:/bin"})
        self.assertEqual(t["exit"], 0)
        self.assertGreaterEqual(t["tree_procs"], 2)
        self.assertGreater(t["samples"], 0)
        if t["runner_kb"] is not None:
            self.assertGreaterEqual(t["tree_kb"], t["runner_kb"])

    def test_capture_past_its_timeout_kills_the_wrapped_child_too(self):
        with tempfile.TemporaryDirectory() as d:
            pidfile = os.path.join(d, "pid")
            # sh (the wrapper) starts a grandchild that writes its pid and sleeps for long.
            argv = ["/bin/sh", "-c", "sh -c 'echo $$ > %s; exec sleep 30' & wait" % pidfile]
            with self.assertRaises(subprocess.TimeoutExpired):
                measure.capture(argv, {"PATH": "/usr/bin:/bin"}, timeout=0.5)
            pid = int(read(pidfile))

            def alive():
                try:
                    with open("/proc/%d/stat" % pid) as f:
                        return f.read().rpartition(")")[2].split()[0] != "Z"
                except OSError:
                    return False
            deadline = time.monotonic() + 5
            while alive() and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertFalse(alive(), "the grandchild outlived the timeout")

    def test_unbounded_run_is_skipped_when_its_projection_is_over_half_the_memory(self):
        ok, note = measure.unbounded_projection([(1000, 2_000_000)], 10_000, 22_000_000)
        self.assertFalse(ok)
        self.assertIn("19.1 GB projected from 1,000 items", note)
        self.assertEqual(measure.unbounded_projection([(1000, 200_000)], 10_000, 22_000_000), (True, ""))
        self.assertEqual(measure.unbounded_projection([], 10_000, 22_000_000), (True, ""))


STRACE_TRIAGE = """\
21830 execve("/x/triage", ["triage", "state-write"], 0x7ffc /* 37 vars */) = 0
21830 openat(3, "st.json.lock", O_RDONLY|O_NOCTTY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC) = 4
21830 flock(4, LOCK_EX|LOCK_NB)         = 0
21830 futex(0x5633aa1c8b38, FUTEX_WAIT_BITSET_PRIVATE, 4294967295, NULL <unfinished ...>
21833 openat(AT_FDCWD, ".", O_RDONLY|O_DIRECTORY|O_CREAT) = 6
21830 <... futex resumed>)              = 0
21830 openat(3, ".st.json.tmp-419eb9c0", O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0600) = 5
21830 fchmod(5, 0644)                   = 0
21830 write(5, "{\n  \"n\": 2\n}\n", 13) = 13
21830 fsync(5)                          = 0
21830 linkat(3, "st.json", 3, "st.json.bak.tmp", 0) = 0
21830 renameat(3, "st.json.bak.tmp", 3, "st.json.bak") = 0
21830 renameat(3, ".st.json.tmp-419eb9c0", 3, "st.json") = 0
21830 fsync(3)                          = 0
21833 +++ exited with 0 +++
21830 exit_group(0)                     = ?
"""


class Syscalls(unittest.TestCase):
    def test_parse_counts_a_cut_call_once_and_skips_exits(self):
        calls = syscalls.parse(STRACE_TRIAGE)
        self.assertEqual([c[1] for c in calls][:4], ["execve", "openat", "flock", "futex"])
        self.assertEqual(len(calls), 14)
        self.assertEqual({c[0] for c in calls}, {21830, 21833})
        # Without -f's pid column (one process) and with [pid N] prefixes.
        self.assertEqual(syscalls.parse('fsync(3) = 0\n[pid  7] renameat(3, "a", 3, "b") = 0\n'),
                         [(0, "fsync", "3) = 0"), (7, "renameat", '3, "a", 3, "b") = 0')])

    def test_durable_calls_count_creates_not_folders(self):
        self.assertEqual(syscalls.durable_counts(syscalls.parse(STRACE_TRIAGE)),
                         {"flock": 1, "fchmod": 1, "fsync": 2, "linkat": 1, "renameat": 2, "create": 1})

    def test_compare_names_what_differs(self):
        triage = syscalls.parse(STRACE_TRIAGE)
        self.assertEqual(syscalls.compare(triage, triage), "")
        no_dir_fsync = syscalls.parse(STRACE_TRIAGE.replace("fsync(3)", "close(3)"))
        self.assertEqual(syscalls.compare(triage, no_dir_fsync), "fsync 2 vs 1")


class PhasePlan(unittest.TestCase):
    def test_plan_of_n_items_with_and_without_a_limit(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "plan.toml")
            cases.write_phase_plan(path, 3, ["/bin/true"], concurrency=8)
            text = read(path)
            try:
                import tomllib
            except ImportError:
                tomllib = None
            if tomllib:
                plan = tomllib.loads(text)
                self.assertEqual(plan["concurrency"], 8)
                self.assertEqual([i["id"] for i in plan["items"]], ["item-00000", "item-00001", "item-00002"])
                self.assertEqual(plan["items"][2]["command"], ["/bin/true"])
            cases.write_phase_plan(path, 2, ["/bin/true"])
            self.assertNotIn("concurrency", read(path))
            self.assertEqual(read(path).count("[[items]]"), 2)

    def test_jobs_is_found_as_an_option_not_in_prose(self):
        help_with = "Options:\n  -j, --jobs <N>  Items at once\n      --text  Output\n"
        help_other = "Options:\n      --jobserver <X>  no\n      --text  Output for --jobs users\n"
        self.assertTrue(cases.lists_option(help_with, "--jobs"))
        self.assertTrue(cases.lists_option("      --jobs <N>\n", "--jobs"))
        self.assertFalse(cases.lists_option(help_other, "--jobs"))

    def test_fanout_variants_with_and_without_jobs(self):
        class X:
            triage, true, xargs = "/t/triage", "/bin/true", "/usr/bin/xargs"
        plans = {"plain": "p.toml", "limited": "p-c8.toml", "list": "items.txt"}
        with_jobs = cases.fanout_variants(X, 10, 8, plans, True)
        self.assertEqual([v.role for v in with_jobs], ["triage", "xargs"])
        self.assertEqual(with_jobs[0].argv[-2:], ["--jobs", "8"])
        self.assertEqual(with_jobs[1].argv, ["/usr/bin/xargs", "-P", "8", "-n", "1", "-a", "items.txt", "/bin/true"])
        without = cases.fanout_variants(X, 10, 8, plans, False)
        self.assertEqual([v.role for v in without], ["triage-unbounded", "triage-plan", "xargs"])
        self.assertIn("no --jobs: unbounded", without[0].name)
        self.assertEqual((without[0].argv[3], without[1].argv[3]), ("p.toml", "p-c8.toml"))
        self.assertNotIn("--jobs", without[0].argv)
        done = '{"decision": "proceed", "counts": {"complete": 10}}'
        self.assertIsNone(without[0].check(done))
        self.assertIsNotNone(without[0].check('{"decision": "proceed", "counts": {"complete": 9}}'))


def verdicts(results):
    return {t["target"]: (t["verdict"], t["found"]) for t in harness_main().targets(results)}


class Targets(unittest.TestCase):
    def fanout(self, triage_ms, runner_kb, role="triage", name="triage phase run --jobs 8"):
        return {"id": "phase-fanout", "kind": "fanout", "status": "measured", "jobs": 8, "sizes": [
            {"items": 10_000, "variants": [
                {"name": name + ", 10,000 items", "role": role, "median_ms": triage_ms,
                 "ratio": triage_ms / 1000, "peak_rss_kb": runner_kb, "tree_rss_kb": runner_kb + 10},
                {"name": "xargs -P 8, 10,000 items", "role": "xargs", "median_ms": 1000.0, "ratio": 1.0}]}]}

    def test_phase_fanout_within_1_5x_of_xargs_and_under_64_mb(self):
        v = verdicts({"mode": "full", "cases": [self.fanout(1400.0, 30_000)]})
        self.assertEqual(v["triage phase run --jobs 8 within 1.5× of xargs -P 8 at 10,000 items"][0], "PASS")
        self.assertEqual(v["triage phase run --jobs 8: runner's peak RSS under 64 MB at 10,000 items (memory)"][0], "PASS")
        v = verdicts({"mode": "full", "cases": [self.fanout(1600.0, 70_000)]})
        self.assertEqual(v["triage phase run --jobs 8 within 1.5× of xargs -P 8 at 10,000 items"][0], "MISS")
        self.assertEqual(v["triage phase run --jobs 8: runner's peak RSS under 64 MB at 10,000 items (memory)"][0], "MISS")

    def test_smoke_judges_memory_but_not_time(self):
        v = verdicts({"mode": "smoke", "cases": [self.fanout(1600.0, 70_000)]})
        self.assertEqual(v["triage phase run --jobs 8 within 1.5× of xargs -P 8 at 10,000 items"][0], "smoke")
        self.assertEqual(v["triage phase run --jobs 8: runner's peak RSS under 64 MB at 10,000 items (memory)"][0], "MISS")

    def test_an_unbounded_run_left_out_is_named_not_judged(self):
        c = self.fanout(1000.0, 1)
        c["sizes"][0]["variants"][0] = {"name": "triage phase run (no --jobs: unbounded), 10,000 items",
                                        "role": "triage-unbounded", "note": "not run: unbounded, 19.1 GB projected"}
        v = verdicts({"mode": "full", "cases": [c]})
        self.assertEqual(v["triage phase run (no --jobs: unbounded) within 1.5× of xargs -P 8 at 10,000 items"],
                         ("—", "not run: unbounded, 19.1 GB projected"))

    def test_report_html_time_and_memory(self):
        def size(n, tri_ms, html_ms, tri_kb, html_kb):
            return {"records": n, "counts_verified": True, "html_bytes": 105_000,
                    "triage": {"median_ms": tri_ms, "peak_rss_kb": tri_kb},
                    "jq": {"median_ms": tri_ms * 25, "ratio": 25.0},
                    "html": {"median_ms": html_ms, "ratio": html_ms / tri_ms, "peak_rss_kb": html_kb}}
        c = {"id": "report", "kind": "scaling", "status": "measured",
             "sizes": [size(100_000, 200.0, 240.0, 6000, 9000), size(1_000_000, 2000.0, 2700.0, 12000, 25000)]}
        v = verdicts({"mode": "full", "cases": [c]})
        self.assertEqual(v["report ≥20× faster than jq -s at 1,000,000 records"][0], "PASS")
        self.assertEqual(v["report --html within 1.3× of report's time at 1,000,000 records"][0], "MISS")
        self.assertEqual(v["report --html within 2× of report's peak RSS at 1,000,000 records (memory)"],
                         ("MISS", "2.08× (24.4 MB vs 11.7 MB)"))

    def test_state_update_against_its_c_floor(self):
        c = {"id": "state-update", "kind": "single", "status": "measured", "target_floor": 1.3,
             "syscall_check": "DIFFERENT durable-write calls, triage vs floor: fsync 2 vs 1",
             "variants": [{"name": "t", "role": "triage", "median_ms": 2.5, "cpu_median_ms": 1.0},
                          {"name": "c", "role": "syscall-floor", "median_ms": 2.0, "cpu_median_ms": 0.4}]}
        v = verdicts({"mode": "full", "cases": [c]})
        self.assertEqual(v["state-update within 1.3× of the C durable-write floor"],
                         ("PASS", "1.25× (2.50 ms vs 2.00 ms); CPU time 2.50×"))
        self.assertEqual(v["state-update: the C floor makes the same durable-write calls"][0], "MISS")

    def test_the_npm_route_within_2_ms_of_the_binary(self):
        def case(npm_ms):
            return {"id": "hook-npm", "kind": "single", "status": "measured", "target_within_ms": 2.0,
                    "variants": [{"name": "b", "role": "triage", "median_ms": 0.9},
                                 {"name": "n", "role": "triage-npm", "median_ms": npm_ms},
                                 {"name": "l", "role": "triage-npm-node", "median_ms": 55.0},
                                 {"name": "/bin/true", "role": "floor", "median_ms": 0.5}]}
        v = verdicts({"mode": "full", "cases": [case(1.0)]})
        self.assertEqual(v["hook-npm: npm's triage within 2 ms of the binary's"],
                         ("PASS", "+0.10 ms (1.00 ms vs 0.900 ms)"))
        self.assertEqual(v["hook-npm: the Node launcher (install scripts off), for reference"][0], "—")
        v = verdicts({"mode": "full", "cases": [case(55.0)]})
        self.assertEqual(v["hook-npm: npm's triage within 2 ms of the binary's"][0], "MISS")


class NpmRoute(unittest.TestCase):
    def test_each_npm_prefix_given_is_a_variant_running_its_triage(self):
        class X:
            triage, inputs, true = "/t/triage", "/in", "/bin/true"
            npm, npm_node = "/p/npm", None
        case = cases.npm_cases(X)[0]
        self.assertEqual([(v.role, v.argv) for v in case.variants],
                         [("triage", ["/t/triage", "hook"]), ("triage-npm", ["/p/npm/bin/triage", "hook"]),
                          ("floor", ["/bin/true"])])


if __name__ == "__main__":
    unittest.main()
