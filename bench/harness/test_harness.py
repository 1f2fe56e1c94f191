"""Unit tests of the harness's own logic (no timing): `python3 -m unittest discover bench/harness`."""
import json
import os
import tempfile
import unittest

import cases
import inputs
import measure


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


if __name__ == "__main__":
    unittest.main()
