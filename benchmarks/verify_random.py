"""Random cross-check of the verifier at scale: >= 10,000 seeded send/recv programs.

The same check as tests/test_verify_random.py (generator, oracles and comparison live in
tests/randprog.py): every program is traced through tests/kernels/random_program.py,
verified (which raises InternalError if the simulation and Z3's stuck-state search
disagree), and compared with an explicit-state search over all interleavings and with
independent recomputations of legality, confinement and matching. Prints the examples by
outcome, min_queue_depth and machine, the disagreements (must be 0) and the seconds.
Exit status 1 if any example disagrees.

    .venv/bin/python benchmarks/verify_random.py                  # 10,000 examples, seed 0
    .venv/bin/python benchmarks/verify_random.py --count 500 --seed 3 --jobs 2
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# tests/ holds the generator and the oracles, shared with tests/test_verify_random.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import randprog

from meshproof.model.loader import resolve_kernel

MAX_LISTED = 10
Row = tuple[str, str, str, str, int, float, tuple[str, ...]]


def check_chunk(seed: int, start: int, count: int) -> list[Row]:
    """Examples start..start+count-1 of the seeded stream (each its own sub-seed)."""
    kernel = resolve_kernel(randprog.KERNEL_SPEC)
    rows: list[Row] = []
    for i, ex in enumerate(randprog.seeded_examples(seed, start + count)):
        if i < start:
            continue
        t0 = time.perf_counter()
        result = randprog.cross_check(ex, kernel)
        seconds = time.perf_counter() - t0
        rows.append((result.outcome, str(result.min_queue_depth), ex.machine.wiring,
                     ex.describe(), result.states, seconds, result.problems))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (2 cores here)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    chunk = max(1, -(-args.count // (args.jobs * 8)))
    spans = [(s, min(chunk, args.count - s)) for s in range(0, args.count, chunk)]
    rows: list[Row] = []
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            for part in pool.map(check_chunk, [args.seed] * len(spans),
                                 [s for s, _ in spans], [n for _, n in spans]):
                rows += part
    else:
        for s, n in spans:
            rows += check_chunk(args.seed, s, n)
    seconds = time.perf_counter() - start

    outcomes = Counter(r[0] for r in rows)
    depths = Counter(r[1] for r in rows)
    wirings = Counter(r[2] for r in rows)
    bad = [r for r in rows if r[6]]
    per_example = sorted(r[5] for r in rows)
    print(f"verify_random: {len(rows)} examples, seed {args.seed}, {args.jobs} job(s)")
    print("by outcome (legality, matching, deadlock at the example's D):")
    for name, n in sorted(outcomes.items()):
        print(f"  {name:28s} {n:6d}")
    print("by min_queue_depth (oracle):")
    for name, n in sorted(depths.items(), key=lambda kv: (kv[0] == "None", kv[0])):
        print(f"  {name:28s} {n:6d}")
    print("by wiring:")
    for name, n in sorted(wirings.items()):
        print(f"  {name:28s} {n:6d}")
    print(f"oracle states per example: max {max(r[4] for r in rows)}, "
          f"total {sum(r[4] for r in rows)}")
    print(f"seconds per example: median {per_example[len(per_example) // 2]:.3f}, "
          f"max {per_example[-1]:.3f}")
    print(f"disagreements: {len(bad)}")
    for r in bad[:MAX_LISTED]:
        print(f"  {r[3]}")
        for p in r[6]:
            print(f"    {p}")
    print(f"seconds: {seconds:.1f} ({len(rows) / seconds:.1f} examples/s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
