"""The deadlock certificates as ground facts: Z3 checks a run's answer in linear time.

With the run's timestamps (and, when it is stuck, its frontier) fixed, every constraint
of the certificates in deadlock_encoding.py is a comparison of known integers. Z3 checks
them in independent chunks of comm ops, each one bounded solver call: a 64x64 mesh's six
million constraints in a few dozen seconds, in linear time and memory (spec/properties.md
§4). The named queries of deadlock_encoding.py remain what `--smt2` writes.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from meshproof.model.channel_table import NO_LINK
from meshproof.verify.deadlock_encoding import DeadlockModel, OrderConstraints
from meshproof.verify.z3util import Budget, Outcome, SatResult, check_ground

# comm ops per ground-fact chunk: one Z3 call each, a few megabytes of text
CHUNK_ROWS = 200_000


def check_order(cons: OrderConstraints, stamps: np.ndarray, budget: Budget,
                chunk_rows: int = CHUNK_ROWS, starts: np.ndarray | None = None
                ) -> tuple[Outcome, int]:
    """Z3 checks the timestamps against every constraint, as ground facts in chunks of
    rows (a constraint goes to the chunk of its `after` row). SAT when all hold. Returns
    the outcome and the number of chunks.

    A strict `t[a] > t[b]` is written `(<= t[b]+1 t[a])`, the same constraint over the
    integers, which Z3 takes in a third of the time of `>`; facts are grouped 1,000 to an
    `and`. A rank's program order (given `starts`, its first rows) is one chain per rank
    and chunk: `t[i] < t[i+1]` for all i is `(<= u[0] u[1] ...)` with `u[i] = t[i] - i`.
    About 2 µs a constraint."""
    chunks = 0
    for lines in order_chunks(cons, stamps, chunk_rows, starts):
        chunks += 1
        outcome = check_ground(lines, budget)
        if outcome.result is not SatResult.SAT:
            return outcome, chunks
    return Outcome(SatResult.SAT, ""), chunks


def order_chunks(cons: OrderConstraints, stamps: np.ndarray, chunk_rows: int = CHUNK_ROWS,
                 starts: np.ndarray | None = None) -> Iterator[list[str]]:
    """The assert lines of `check_order`'s chunks, one list per solver call (also what
    `--recheck` hands the second solver: the very facts Z3 was given)."""
    if len(cons.never):
        yield ["(assert false)"]
        return
    eq = cons.depth == 0
    groups = [(cons.message, "=" if eq else "<=", 0 if eq else 1), (cons.capacity, "<=", 1)]
    if starts is None:
        groups.insert(0, (cons.program, "<=", 1))
    n = len(stamps)
    for lo in range(0, max(n, 1), chunk_rows):
        hi = lo + chunk_rows
        facts: list[str] = []
        for (after, before), rel, step in groups:
            sel = (after >= lo) & (after < hi)
            a, b = stamps[after[sel]].tolist(), (stamps[before[sel]] + step).tolist()
            facts.extend(f"({rel} {y} {x})" for x, y in zip(a, b, strict=True))
        lines = [f"(assert (and {' '.join(facts[i:i + 1000])}))"
                 for i in range(0, len(facts), 1000)]
        if starts is not None:
            lines += _program_chains(stamps, starts, lo, min(hi, n))
        yield lines


def _program_chains(stamps: np.ndarray, starts: np.ndarray, lo: int, hi: int,
                    limit: np.ndarray | None = None) -> list[str]:
    """Program order of the rows [lo, hi) (each with its predecessor) as chains; with
    `limit`, of each rank's rows before limit[r] only (the ops done in a stuck state)."""
    out: list[str] = []
    if hi <= lo:
        return out
    ranks = len(starts) - 1
    first = int(np.searchsorted(starts, lo, side="right")) - 1
    last = int(np.searchsorted(starts, hi - 1, side="right")) - 1
    for r in range(max(first, 0), min(last, ranks - 1) + 1):
        end = int(starts[r + 1]) if limit is None else int(limit[r])
        a, b = max(lo - 1, int(starts[r])), min(hi, end)
        if b - a >= 2:
            u = stamps[a:b] - np.arange(b - a)
            out.append(f"(assert (<= {' '.join(map(str, u.tolist()))}))")
    return out


def check_stuck(model: DeadlockModel, depth: int, stamps: np.ndarray, budget: Budget,
                chunk_rows: int = CHUNK_ROWS) -> tuple[Outcome, int]:
    """The stuck-state witness at the run's frontier as ground facts: Z3 confirms that the
    state where rank r has done its first p_r comm ops (those with a stamp) is reachable
    (each done op's dependencies done and earlier) and stuck (some rank unfinished, every
    unfinished rank's next op blocked). SAT: the deadlock is real.

    Each constraint of `deadlock_encoding.stuck_state` pinned to this state, with numbers
    for p and t: `done(op)` is `(< pos p)`; an implication is written for the ops where its
    premise holds (done ops, each rank's next op), being true elsewhere."""
    cols = model.cols
    n = cols.n
    starts = cols.start
    rank = cols.rank.astype(np.int64)
    pos = np.arange(n, dtype=np.int64) - starts[rank]
    done = stamps >= 0
    p = np.bincount(rank[done], minlength=len(starts) - 1) if n else \
        np.zeros(len(starts) - 1, dtype=np.int64)
    length = np.diff(starts)
    prow = cols.partner
    # the row a send's credit is (k >= D), -1 none needed, -2 it can never come
    credit = np.full(n, -1, dtype=np.int64)
    if depth >= 1:
        side = cols.side_start[2 * cols.channel.astype(np.int64)]
        n_recvs = cols.side_start[2 * cols.channel.astype(np.int64) + 1] - side
        j = cols.k.astype(np.int64) - depth
        need = cols.send & (j >= 0)
        has = need & (j < n_recvs)
        credit[need] = -2
        credit[has] = cols.by_side[(side + j)[has]]
    linked = cols.status != NO_LINK
    counts = list(zip(p.tolist(), length.tolist(), strict=True))
    bounds = " ".join(f"(<= 0 {x} {m})" for x, m in counts)
    unfinished = " ".join(f"(< {x} {m})" for x, m in counts if m)
    lines = [f"(assert (and {bounds}))", f"(assert (or {unfinished} false))"]
    chunks = 0
    for lo in range(0, max(n, 1), chunk_rows):
        hi = min(lo + chunk_rows, n)
        facts = _stuck_facts(cols, depth, stamps, done, pos, p, prow, credit, linked, lo, hi)
        lines += [f"(assert (and {' '.join(facts[i:i + 1000])}))"
                  for i in range(0, len(facts), 1000)]
        lines += _program_chains(np.where(done, stamps, 0), starts, lo, hi,
                                 limit=np.minimum(starts[:-1] + p, starts[1:]))
        chunks += 1
        outcome = check_ground(lines, budget)
        lines = []
        if outcome.result is not SatResult.SAT:
            return outcome, chunks
    return Outcome(SatResult.SAT, ""), chunks


def _stuck_facts(cols: object, depth: int, t: np.ndarray, done: np.ndarray, pos: np.ndarray,
                 p: np.ndarray, prow: np.ndarray, credit: np.ndarray, linked: np.ndarray,
                 lo: int, hi: int) -> list[str]:
    """The FIFO and stuck facts of rows [lo, hi)."""
    c = cols  # CommColumns
    facts: list[str] = []
    rank = c.rank  # type: ignore[attr-defined]
    send = c.send  # type: ignore[attr-defined]
    for g in range(lo, hi):
        r = int(rank[g])
        mine = f"(< {int(pos[g])} {int(p[r])})"     # done(op)
        frontier = int(pos[g]) == int(p[r])
        partner = int(prow[g])
        never = not linked[g] or (depth == 0 and partner < 0) or \
            (depth >= 1 and not send[g] and partner < 0) or (depth >= 1 and credit[g] == -2)
        if never:
            facts.append(f"(not {mine})")    # it can never complete; blocked at it: true
            continue
        if depth == 0:
            other = f"(< {int(pos[partner])} {int(p[int(rank[partner])])})"
            facts.append(f"(= {mine} {other})")
            if done[g]:
                facts.append(f"(= {int(t[g])} {int(t[partner])})")
            if frontier:
                facts.append(f"(not (= {int(p[int(rank[partner])])} {int(pos[partner])}))")
            continue
        need = partner if not send[g] else int(credit[g])
        if need == -1:       # a send with room: never blocked
            if frontier:
                facts.append("false")
            continue
        dep = f"(< {int(pos[need])} {int(p[int(rank[need])])})"
        if done[g]:
            facts.append(f"(and {dep} (<= {int(t[need]) + 1} {int(t[g])}))")
        if frontier:
            facts.append(f"(not {dep})")
    return facts
