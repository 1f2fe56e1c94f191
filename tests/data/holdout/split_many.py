#!/usr/bin/env python3
"""The held-out split of several gathered files at once, fixed before any rule is written from them.

Usage: split_many.py GATHERED... ; for each tests/data/gathered/NAME.toml it writes the
training part to tests/data/NAME.toml and the held-out part to tests/data/holdout/NAME.toml.

Per `# --- section` (family) of each file, the section's source threads are sorted, shuffled
with random.Random(SEED), and the first max(1, round(n / 4)) of a section with at least two
threads are held out (as split.py does for one file). A thread held out anywhere is held out
everywhere: no thread is on both sides, in any file. Every text of a thread goes with it.
"""
import os, random, re, sys

SEED = 20260042
THREAD = re.compile(r'(?m)^thread = "(.*)"$')

def sections_of(path):
    text = open(path, encoding="utf-8").read()
    head, *blocks = re.split(r"(?m)^(?=# --- |\[\[case\]\])", text)
    sections, cur = [], None
    for b in blocks:
        if b.startswith("# --- "):
            cur = [b, []]
            sections.append(cur)
        else:
            cur[1].append(b)
    return head, sections

files = [(p, *sections_of(p)) for p in sys.argv[1:]]
held = set()
for _, _, sections in files:
    for title, cases in sections:
        threads = sorted({THREAD.search(c).group(1) for c in cases})
        random.Random(SEED).shuffle(threads)
        if len(threads) >= 2:
            held.update(threads[: max(1, round(len(threads) / 4))])

def write(path, head, sections, keep, note):
    out = [head.rstrip("\n#") + "\n# " + note + "\n\n"]
    for title, cases in sections:
        mine = [c for c in cases if keep(THREAD.search(c).group(1))]
        if mine:
            out.append(title)
            out.extend(mine)
    open(path, "w", encoding="utf-8").write("".join(out).rstrip("\n") + "\n")

here = os.path.dirname(os.path.abspath(__file__))
data = os.path.dirname(here)
for path, head, sections in files:
    name = os.path.basename(path)
    write(os.path.join(data, name), head, sections, lambda t: t not in held, "This file: the training part.")
    write(os.path.join(here, name), head, sections, lambda t: t in held, "This file: the held-out part.")
