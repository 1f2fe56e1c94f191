"""The results as a table for people (terminal and Markdown) and as JSON for machines."""


def fmt_ms(ms):
    if ms is None:
        return "-"
    if ms >= 1000:
        return "%.2f s" % (ms / 1000)
    return "%.2f ms" % ms if ms >= 1 else "%.3f ms" % ms


def fmt_kb(kb):
    return "-" if not kb else "%.1f MB" % (kb / 1024)


def fmt_ratio(r):
    return "-" if r is None else "%.2f×" % r


def rows(case):
    """The table rows of one case: [variant, median, spread, (CPU time,) peak RSS, ratio, note]."""
    out = []
    for v in case.get("variants", []):
        if case["kind"] == "concurrent":
            out.append([v["name"], "%.0f rec/s" % v["per_s"] if v.get("per_s") else "-",
                        fmt_ms(v.get("wall_ms")), fmt_ratio(v.get("ratio")), v.get("note", "")])
        elif case["kind"] == "fanout":
            out.append([v["name"], fmt_ms(v.get("median_ms")),
                        "-" if v.get("median_ms") is None else "%s – %s" % (fmt_ms(v["min_ms"]), fmt_ms(v["max_ms"])),
                        fmt_ms(v.get("cpu_median_ms")), fmt_kb(v.get("peak_rss_kb")), fmt_kb(v.get("tree_rss_kb")),
                        fmt_ratio(v.get("ratio")), v.get("note", "")])
        elif case["kind"] == "scaling":
            out.append([v["name"], fmt_ms(v.get("median_ms")),
                        "%s – %s" % (fmt_ms(v.get("min_ms")), fmt_ms(v.get("max_ms"))),
                        fmt_kb(v.get("peak_rss_kb")), fmt_ratio(v.get("ratio")), v.get("note", "")])
        else:
            spread = "-" if v.get("median_ms") is None else "%s – %s" % (
                fmt_ms(v["p25_ms"]), fmt_ms(v["p75_ms"]))
            out.append([v["name"], fmt_ms(v.get("median_ms")), spread, fmt_ms(v.get("cpu_median_ms")),
                        fmt_kb(v.get("peak_rss_kb")), fmt_ratio(v.get("ratio")), v.get("note", "")])
    return out


def header(case):
    if case["kind"] == "concurrent":
        return ["variant", "throughput", "wall (best)", "this ÷ triage", "note"]
    if case["kind"] == "fanout":
        return ["variant", "median", "min – max", "CPU time", "peak RSS (runner)", "peak RSS (tree, sampled)",
                "this ÷ xargs", "note"]
    if case["kind"] == "scaling":
        return ["variant", "median", "min – max", "peak RSS", "this ÷ triage", "note"]
    return ["variant", "median", "p25 – p75", "CPU time", "peak RSS", "this ÷ triage", "note"]


def title(case):
    t = "%s — %s" % (case["id"], case["title"])
    if case["status"] != "measured":
        t += ": " + case["status"]
    elif case.get("runs"):
        t += " (%s)" % case["runs"]
    return t


def text_table(case):
    lines = [title(case)]
    if case.get("syscall_check"):
        lines.append("  " + case["syscall_check"])
    body = rows(case)
    if body:
        table = [header(case)] + body
        widths = [max(len(r[c]) for r in table) for c in range(len(table[0]))]
        for r in table:
            lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def md_table(case):
    lines = ["**%s**" % title(case), ""]
    if case.get("syscall_check"):
        lines += [case["syscall_check"], ""]
    body = rows(case)
    if body:
        lines.append("| " + " | ".join(header(case)) + " |")
        lines.append("|" + "---|" * len(header(case)))
        for r in body:
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
        lines.append("")
    return "\n".join(lines)


def targets_lines(targets):
    out = []
    for t in targets:
        out.append("%-5s %s — %s" % (t["verdict"], t["target"], t["found"]))
    return out


def markdown(results):
    m = results["machine"]
    parts = ["Run of %s, %s mode, %s (commit %s, %s build)." % (
        results["started_at"], results["mode"], results["triage"]["version"], results["triage"]["commit"],
        results["triage"].get("build", "default")),
        "",
        "Machine: %s, %s cores, %s RAM, Linux %s; load average %s at start, %s at end; %s; %s; %s." % (
            m["cpu"], m["cores"], m["memory"], m["kernel"], m["load_start"], m["load_end"],
            m["jq"], m["bash"], m["python"]),
        ""]
    for case in results["cases"]:
        parts.append(md_table(case))
    parts.append("**Targets**")
    parts.append("")
    for line in targets_lines(results["targets"]):
        parts.append("- " + line)
    if results.get("cross_check"):
        parts.append("")
        parts.append("**Harness cross-check against hyperfine** (same commands, no stdin)")
        parts.append("")
        parts.append("| command | this harness, median | hyperfine -N, median |")
        parts.append("|---|---|---|")
        for c in results["cross_check"]:
            parts.append("| `%s` | %s | %s |" % (c["command"], fmt_ms(c["harness_median_ms"]),
                                               fmt_ms(c["hyperfine_median_ms"])))
    return "\n".join(parts) + "\n"
