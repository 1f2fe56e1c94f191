#!/usr/bin/env python3
"""The held-out split of real_errors_2026b.toml, fixed before any rule was written from it.

Reads the gathered file (argument 1) and writes the training file (argument 2) and the
held-out file (argument 3). Per `# --- section` (family), the section's source threads are
sorted, shuffled with random.Random(SEED), and the first max(1, round(n / 4)) of a section
with at least two threads are held out, so a family with two or more threads has texts on
both sides; a family of one thread stays in training. Every text of a thread goes with it.
"""
import random, re, sys

SEED = 20260042
src, train_path, hold_path = sys.argv[1:4]
text = open(src, encoding="utf-8").read()
head, *blocks = re.split(r"(?m)^(?=# --- |\[\[case\]\])", text)
sections, cur = [], None
for b in blocks:
    if b.startswith("# --- "):
        cur = [b, []]
        sections.append(cur)
    else:
        cur[1].append(b)
held_threads = set()
for title, cases in sections:
    threads = sorted({re.search(r'(?m)^thread = "(.*)"$', c).group(1) for c in cases})
    random.Random(SEED).shuffle(threads)
    if len(threads) >= 2:
        held_threads.update(threads[: max(1, round(len(threads) / 4))])
def write(path, keep, note):
    out = [head.rstrip("\n#") + "\n# " + note + "\n\n"]
    for title, cases in sections:
        mine = [c for c in cases if keep(re.search(r'(?m)^thread = "(.*)"$', c).group(1))]
        if mine:
            out.append(title)
            out.extend(mine)
    open(path, "w", encoding="utf-8").write("".join(out).rstrip("\n") + "\n")
write(train_path, lambda t: t not in held_threads, "This file: the training part.")
write(hold_path, lambda t: t in held_threads, "This file: the held-out part.")
