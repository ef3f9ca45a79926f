"""Whole-process `meshproof verify` on the causal ring prefills as they grow: seconds, peak
RSS and the verdicts of all seven properties, numeric_safety included (prints figures; not
a timed test).

    .venv/bin/python benchmarks/masked_scale.py            # every row
    .venv/bin/python benchmarks/masked_scale.py --quick    # 8 ranks only

Rows: naive, zigzag, striped and the off-by-one at 8, 16 and 64 ranks (one cube of that many PEs on
pe_ring) with S = 256 keys per rank, and at one million tokens (64 x 16,384). Each row is a
fresh process (peak RSS from /usr/bin/time). numeric_safety is proved at one million
tokens too: the causal kernels keep p in f32 for the P·V dot and accumulate blocks wider
than 4096 keys per key tile (spec/semantics.md §8). The issue's goals: every row
<= 60 s and <= 4 GiB on 2 cores, zigzag <= 4x naive, no kill, no exit 70. The striped
ring keeps its shard sums as row sums over residue classes (spec/semantics.md §8,
strided.py), so it is proved past 14 ranks (16 x 256: 3.3 s CPU, all seven proved; it was
363 s and unknown before them). `--kernel NAME` (repeatable) runs only those kernels.

Measured after the judge's two cuts (2-core machine shared with two others, CPU seconds,
each row run against main interleaved; the load varied by 20% between rounds, so read
each pair): every row proved; striped 64 x 256 65.3 -> 48.3 s (71.0 -> 65.6 with the
first cut alone), one million tokens 72.2 -> 62.4 s and 85.9 -> 71.9 s (87.5 -> 76.7
with the first cut alone), peak RSS 1.5 / 2.0 GiB unchanged; zigzag 64 x 256 37.2 ->
34.9 s, one million tokens 59.7 -> 55.9 s; naive 2.4 -> 2.6 s and 3.0 -> 3.5 s (noise).
Striped at one million tokens is still above 60 s. The cuts: the judge proves an output
whose sums are the reference's up to
one factor k·exp(w) without multiplying N·D_ref out (n² terms a side on the striped
ring), and the masked reference sums its n runs once instead of refining and coarsening
a growing sum per run. What grows with S: the kernels' key tiles (a block wider than
4096 keys is accumulated per tile), 27% more ops at S = 16,384 (reshapes, sums,
transposes), 36% more situations at 64 ranks (40,346 -> 54,970), each reshape
substituting the striped running max's n members again, and lower bounds reading more
strided pieces; not big integers, nor per-element work, nor crossings.

Measured the session before (2-core machine shared with two others, CPU seconds; the code
before once, interleaved with the code after): every row proved or, for the off-by-one,
violated (exit 1 at one million tokens, 5.0 / 5.3 s); striped 64 x 256 132.8 -> 59.4 /
62.4 s, one million tokens 148.9 -> 73.5 s (74.4 / 80.6 s a commit earlier; peak RSS
2.0 GiB); zigzag 64 x 256 38.0 -> 32.1 / 36.1 s (31.7 / 31.7 a commit earlier), one
million tokens 61.9 -> 55.3 s (55.1 / 55.5); naive 64 x 256 1.8-2.0 s, one million
tokens 2.6 / 2.7 s. Every row is now at or under 60 s CPU but striped at one million
tokens (about 74 s) and, by a few seconds on some runs, striped 64 x 256; zigzag is about
17x naive at 64 x 256 (the 4x goal is not met: its situations grow as ~18·n², below).
What paid: a max's members substituted atom by atom with a penalty once per
guard up to a shift of its key rows (the guard-substitution lemma, spec/semantics.md
§9); an elementwise op no longer renames the operand digits canonical numbering already
lines up (broadcast then unified every axis and substituted both forms again, which
also substituted every member of a striped running max); a max's members of one shape
bisected by their first row (Ranges.covers asked 190,839 -> 7,186 times at 32 ranks);
strided expansions kept for the last 64 forms and built without an intermediate
polynomial per power; a max's interval, a member's opened body and a row sum's base
kept; no Fraction addition for a coefficient met once. One member per residue class of
shards is still not built, so the readers that walk a striped running max stay O(n) per
situation.

Measured before (a previous session: 2-core machine shared with four others at a load
average of 2-6, so read the CPU column; two runs each): every row proved or, for the
off-by-one, violated (also at one million tokens); naive 64 x 256 2.2 / 2.4 s CPU,
64 x 16,384 2.7 / 3.2 s; zigzag 40.4 /
42.3 s and 61.2 / 70.2 s (about 18x naive: its merge situations grow as ~18·n²; per-row-sum
frames do not share them, below); striped 142 / 140 s and 148 / 160 s,
peak RSS 2.0 GiB at one million tokens. The same session's runs of the code before
domination.py indexed a running max's members by shape and kept nonpositive's answers:
zigzag 64 x 256 55.1 s, striped 64 x 256 274 s (a colleague's earlier runs: 46 s and
355 s, one million tokens 70 s and 379 s). The striped ring's running max holds a
member per shard, n of them, because their guards differ: every exp argument searched
all n (now an index finds them), and every situation still substitutes all n (one
member per residue class of shards is not built). Neither goal is met at 64 ranks:
striped is 2.4x over 60 s, zigzag 18x naive against the 4x asked.

`--situations` counts instead: each launch traced and analysed in this process (memo on),
printing its ops, situations (memo misses), canonical values and the analysis's CPU
seconds. Zigzag, S = 256: 1,308 / 4,712 / 17,856 situations at 8 / 16 / 32 ranks (naive:
706 at 32). Per-cluster key-row frames (spec/semantics.md §9; a prototype,
not merged) took them to 1,083 / 3,571 / 12,771 with the analysis's CPU time unchanged
(9.2 s / 9.3 s at 32 ranks). The frames share a late chunk's situations up to its rank's wrap;
after it (step s > rank i) the chunk's merged keys are three clusters of lengths
(i + 1)·C, 2(s - i)·C and C, different per (rank, step), so its facts are new whatever
the frame: about n²/2 (rank, step) pairs of two block folds each stay misses, which is
why zigzag cannot come within 4x of naive by sharing alone. Striped: its running max keeps
one member per shard (n members: their guards differ, so no two merge), so each of its
~n² misses costs O(n) (1.8 ms per miss at 32 ranks, against 0.5 ms for zigzag); the
frames shared nothing there (32 ranks: 10,442 situations, 11,372 with them). This
session, the same counts (no situation is shared or split differently), the analysis's
CPU seconds at 32 ranks: zigzag 8.5 -> 7.3-8.2, striped 13.7-14.6 -> 9.0-9.8 (0.9 ms per
miss); naive 0.4.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

MESHPROOF = str(Path(sys.executable).with_name("meshproof"))
KERNELS = ("ring_prefill_causal_naive", "ring_prefill_causal_zigzag",
           "ring_prefill_causal_striped", "ring_prefill_causal_off_by_one")
ROWS = ((8, 256), (16, 256), (64, 256), (64, 16384))
TIMEOUT_S = 900


def run(kernel: str, ranks: int, s: int) -> tuple[float, float, int, str, float]:
    """(wall seconds, peak MiB, exit code, verdicts, CPU seconds: user + system). On a
    shared machine the wall time follows the load; the CPU time much less so."""
    cmd = [MESHPROOF, "verify", kernel, "--pes", str(ranks), "--arg", f"n_ranks={ranks}",
           "--arg", f"S_q={s}", "--arg", f"S_kv_per_rank={s}",
           "--timeout", str(TIMEOUT_S)]
    start = time.perf_counter()
    try:
        done = subprocess.run(["/usr/bin/time", "-f", "MAXRSS_KB %M CPU_S %U %S", *cmd],
                              capture_output=True, text=True, timeout=TIMEOUT_S + 60,
                              env=dict(os.environ), check=False)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, 0.0, -1, "killed (timeout)", 0.0
    seconds = time.perf_counter() - start
    found = re.search(r"MAXRSS_KB (\d+) CPU_S ([\d.]+) ([\d.]+)", done.stderr)
    rss = int(found.group(1)) if found else 0
    cpu = float(found.group(2)) + float(found.group(3)) if found else 0.0
    verdicts = []
    for prop in ("attention_equivalence", "exactly_once_merge", "numeric_safety"):
        m = re.search(rf"^{prop}\s+(\w+)", done.stdout, re.M)
        verdicts.append(f"{prop.split('_')[0]} {m.group(1) if m else '?'}")
    return seconds, rss / 1024.0, done.returncode, ", ".join(verdicts), cpu


SITUATION_ROWS = ((8, 256), (16, 256), (32, 256))


def situations(kernel: str, ranks: int, s: int) -> tuple[int, int, int, float]:
    """(ops, situations, canonical values, analysis CPU seconds) of one launch, analysed
    in this process with the memo on."""
    from meshproof.deploy.launches import expand
    from meshproof.model.channels import derive_channels
    from meshproof.model.launch import LaunchOptions, build_launch
    from meshproof.model.loader import resolve_kernel
    from meshproof.model.problem import attention_problem
    from meshproof.model.trace import trace
    from meshproof.verify.semantics.analysis import analyse
    from meshproof.verify.semantics.budget import unbounded

    args = (("S_kv_per_rank", s), ("S_q", s), ("n_ranks", ranks))
    launch = expand(LaunchOptions.from_mapping({"kernel": kernel, "args": args, "pes": ranks},
                                               "bench"))[0]
    ref = resolve_kernel(kernel)
    schedule = trace(ref, build_launch(ref, launch))
    spec = schedule.launch
    problem = attention_problem(schedule, spec.groups, spec.outputs, spec.softmax_scale)
    table = derive_channels(schedule)
    start = time.process_time()
    analysis = analyse(schedule, table, problem, unbounded(), memo=True)
    cpu = time.process_time() - start
    domain = analysis.forms.domain
    ops = sum(len(p.ops) for p in schedule.programs)
    return ops, domain.misses, len(domain.canon), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 ranks only")
    parser.add_argument("--kernel", action="append", choices=KERNELS,
                        help="only these kernels (repeatable; default: all)")
    parser.add_argument("--situations", action="store_true",
                        help="count situations in this process (8, 16, 32 ranks, S 256)")
    opts = parser.parse_args()
    kernels = tuple(opts.kernel) if opts.kernel else KERNELS
    if opts.situations:
        print(f"{'kernel':34} {'ranks':>5} {'S/rank':>7} {'ops':>8} {'situations':>10} "
              f"{'canon':>7} {'cpu s':>7}")
        for ranks, s in SITUATION_ROWS[:1] if opts.quick else SITUATION_ROWS:
            for kernel in kernels:
                ops, misses, values, cpu = situations(kernel, ranks, s)
                print(f"{kernel:34} {ranks:5} {s:7} {ops:8} {misses:10} {values:7} "
                      f"{cpu:7.2f}", flush=True)
        return
    rows = ROWS[:1] if opts.quick else ROWS
    print(f"{'kernel':34} {'ranks':>5} {'S/rank':>7} {'tokens':>9} {'s':>7} {'cpu s':>7} "
          f"{'MiB':>7} {'exit':>4}  verdicts")
    for ranks, s in rows:
        for kernel in kernels:
            seconds, mib, code, verdicts, cpu = run(kernel, ranks, s)
            print(f"{kernel:34} {ranks:5} {s:7} {ranks * s:9} {seconds:7.1f} {cpu:7.1f} "
                  f"{mib:7.0f} {code:4}  {verdicts}", flush=True)


if __name__ == "__main__":
    main()
