"""The inputs every case reads: the committed hook payloads, a 20 KB agent output, and error
logs of 10 000 to 1 000 000 records in the shape `record-error` writes."""
import hashlib
import json
import os
import random

# Agents from seed 000's per-agent table and seed 001's skills.
AGENTS = [
    "research-architect", "analysis-brainstormer", "method-brainstormer", "analysis-planner",
    "statistician-consultant", "mathematician-consultant", "programmer-consultant",
    "structure-reviewer", "notebook-reviewer", "notebook-generator", "statistical-fact-checker",
    "researcher", "synthesizer", "devils-advocate", "fact-checker", "calculator",
]
KINDS = ["timeout", "rate_limited", "overloaded", "network_error", "tool_failure",
         "validation_failed", "quality_failed", "output_missing", "crash", "unknown"]


def output_20k(path):
    """Seed 001's researcher: a 20 KB literature review with numbered citations and DOIs."""
    parts = ["# Literature review: oxygen-permeable membranes\n\n## Executive summary\n\n"]
    i = 0
    while sum(len(p) for p in parts) < 20_000:
        i += 1
        parts.append(
            "Study %d reports an oxygen flux of %.1f mL/(min cm2) at %d C for a %s membrane [%d], "
            "consistent with the Wagner equation once surface exchange is accounted for; see "
            "doi:10.1016/j.memsci.20%02d.%06d. " % (i, 1 + i % 9 * 0.7, 800 + i % 5 * 25,
                                                    ["BSCF", "LSCF", "SrCoFeO", "CGO-LSCF"][i % 4],
                                                    i, 10 + i % 14, 117000 + i))
        if i % 6 == 0:
            parts.append("\n\n## Section %d\n\n" % (i // 6))
    text = "".join(parts)[:20_000]
    write_json(path, {"agent": "researcher", "status": "completed", "output": text})


def write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f)
        f.write("\n")
    os.replace(tmp, path)


def template_key(templates):
    return hashlib.sha256(json.dumps(templates, sort_keys=True).encode()).hexdigest()[:12]


def synthetic_templates():
    """SPEC §5's error record, for when `record-error` is not built yet."""
    return [{
        "error_id": "err-0", "timestamp": "2026-02-03T14:15:00Z", "status": "error",
        "kind": "timeout", "category": "transient", "tier": 1, "severity": "error",
        "action": "retry", "retryable": True,
        "detail": "Skill timed out after 15 minutes", "suggestions": ["Narrow the scope"],
        "context": {"tool": "Agent", "last_progress": "Reading paper 5/8"},
        "session_id": "s-0", "workflow_id": "w-0", "phase": 2, "agent": "researcher",
        "task_id": "T1", "retry_count": 0, "preserved_outputs": [], "recovery_options": [],
        "matched_rule": "builtin:timeout",
    }]


def error_log(path, n, templates, seed=8):
    """n records, cycling through the templates, each with its own id, time, agent, session
    and kind. Deterministic for a given seed; rewritten only when missing."""
    if os.path.exists(path):
        return
    rng = random.Random(seed)
    base = 1_770_000_000
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for i in range(n):
            rec = dict(templates[i % len(templates)])
            t = base + i
            rec["error_id"] = "err-%013d-%06x" % (t * 1000, i)
            rec["timestamp"] = "2026-%02d-%02dT%02d:%02d:%02dZ" % (
                1 + (t // 2_419_200) % 12, 1 + (t // 86400) % 28, (t // 3600) % 24,
                (t // 60) % 60, t % 60)
            rec["agent"] = AGENTS[rng.randrange(len(AGENTS))]
            rec["session_id"] = "s-%05d" % (i // 50)
            rec["workflow_id"] = "w-%04d" % (i // 500)
            rec["kind"] = KINDS[rng.randrange(len(KINDS))]
            f.write(json.dumps(rec, separators=(",", ":")))
            f.write("\n")
    os.replace(tmp, path)


def count_by_agent(path):
    """What `jq -s 'group_by(.agent) | map({agent, n})'` computes, for checking answers."""
    counts = {}
    with open(path) as f:
        for line in f:
            agent = json.loads(line).get("agent")
            counts[agent] = counts.get(agent, 0) + 1
    return counts
