"""A witness that the rounding error passes the tolerance (numeric_safety violated).

A bound above the tolerance is only a bound: numeric_safety is violated only by an input
within the assumption (f16 values, |x| <= B, scores within S) whose computed output
differs from exact attention by more than T·max|V|. The search evaluates the launch as
the machine computes it (model/machine.py: float32 per op, rounded to each op's dtype --
the simulator's arithmetic) on structured families: seeded uniform inputs in [-B, B], the
extremes ±B, keys straddling score cells with V split in sign by halves, partials of
opposite sign. The worst element is then checked against attention in 40-digit arithmetic
(witness.reference_element), and the witness carries its inputs, so that `meshproof
simulate --witness FILE` replays it (spec/semantics.md §7).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from meshproof.model.channel_table import ChannelTable
from meshproof.model.evaluate import Evaluation
from meshproof.model.machine import Machine
from meshproof.model.problem import Problem
from meshproof.model.schedule import Op, Schedule, ValueRef
from meshproof.verify.semantics.hazards import machine_buffers
from meshproof.verify.semantics.numeric import FLOAT64, Inputs
from meshproof.verify.semantics.rounding_witness_families import aimed
from meshproof.verify.semantics.safety import scores_within
from meshproof.verify.semantics.witness import reference, reference_element

# inputs of the whole launch the search may hold (elements of Q, K and V): past it the
# verdict stays unknown, with the reason
INPUT_BUDGET = 4_000_000
SEEDS = (0, 1, 2, 3)
CLIMB_STEPS = 120          # machine evaluations of the hill climb, when no family passes T
CLIMB_BUDGET = 20_000      # input elements up to which the climb runs


@dataclass(frozen=True, slots=True)
class RoundingWitness:
    """An input whose computed output passes the tolerance, checked in 40 digits."""

    family: str
    rank: int
    store: Op
    element: tuple[int, int, int]        # (query row, head, feature)
    machine: float                       # the simulator's arithmetic
    exact: float                         # attention in 40-digit arithmetic
    max_v: float
    inputs: Inputs

    @property
    def error(self) -> float:
        """|machine - exact| / max|V|."""
        return abs(self.machine - self.exact) / self.max_v


def input_elements(problem: Problem) -> int:
    d = problem.d_head
    return sum(problem.q_rows(g.index) * problem.h_q * d +
               2 * max(problem.kv_rows(g.index), 1) * problem.h_kv * d
               for g in problem.groups)


def _f16(x: np.ndarray, b: float) -> np.ndarray:
    h = np.atleast_1d(np.clip(x, -b, b)).astype(np.float16)
    over = np.abs(h.astype(np.float64)) > b    # rounding may pass b by half an ulp
    h[over] = np.nextafter(h[over], np.float16(0))
    out: np.ndarray = h.astype(np.float64).reshape(np.shape(x))
    return out


def _shaped(problem: Problem, fill: dict[str, np.random.Generator | float],
            b: float) -> Inputs:
    def make(rows: int, heads: int, what: str) -> np.ndarray:
        src = fill[what]
        shape = (max(rows, 1), heads, problem.d_head)
        if isinstance(src, float):
            return np.full(shape, src)
        return _f16(src.uniform(-b, b, shape), b)
    gs = [g.index for g in problem.groups]
    return Inputs({g: make(problem.q_rows(g), problem.h_q, "q") for g in gs},
                  {g: make(problem.kv_rows(g), problem.h_kv, "k") for g in gs},
                  {g: make(problem.kv_rows(g), problem.h_kv, "v") for g in gs})


def families(problem: Problem, b: float, cap: float) -> list[tuple[str, Inputs]]:
    """Structured inputs within |x| <= b whose scores stay within the score cap."""
    out: list[tuple[str, Inputs]] = []
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        out.append((f"seeded uniform inputs in [-{b:g}, {b:g}] (seed {seed})",
                    _shaped(problem, {"q": rng, "k": rng, "v": rng}, b)))
    for seed in SEEDS[:2]:
        rng = np.random.default_rng(100 + seed)
        x = _shaped(problem, {"q": rng, "k": rng, "v": rng}, b)
        signs = Inputs({g: np.where(a >= 0, b, -b) for g, a in x.q.items()},
                       {g: np.where(a >= 0, b, -b) for g, a in x.k.items()},
                       {g: _halves(a, b) for g, a in x.v.items()})
        out.append((f"seeded ±{b:g} inputs with V = +{b:g} on the first half of the keys "
                    f"and -{b:g} on the rest (seed {100 + seed})", signs))
    for seed in SEEDS[:2]:
        rng = np.random.default_rng(200 + seed)
        x = _shaped(problem, {"q": b, "k": rng, "v": rng}, b)
        top = Inputs(x.q, {g: _f16(np.abs(a) * 0.5 + b * 0.5, b) for g, a in x.k.items()},
                     {g: _halves(a, b) for g, a in x.v.items()})
        out.append((f"Q = {b:g} and K in [{b / 2:g}, {b:g}] (every score near the largest, "
                    f"where 16-bit spacing is widest), V = +{b:g} on the first half of the "
                    f"keys and -{b:g} on the rest (seed {200 + seed})", top))
    out.extend(aimed(problem, b))
    return [(name, x) for name, x in out if scores_within(x, cap)]


def _halves(v: np.ndarray, b: float) -> np.ndarray:
    out = np.full(v.shape, b)
    out[v.shape[0] // 2:] = -b
    return out


@dataclass(frozen=True, slots=True)
class _Worst:
    family: str
    inputs: Inputs
    rank: int
    store: Op
    element: tuple[int, int, int]
    machine: float
    approx: float
    max_v: float

    @property
    def error(self) -> float:
        return abs(self.machine - self.approx) / self.max_v


def find_rounding_witness(schedule: Schedule, table: ChannelTable, problem: Problem,
                          stores: list[tuple[int, Op]], b: float, cap: float,
                          tolerance: float) -> RoundingWitness | None:
    """The worst element over the families, confirmed in 40 digits when it passes T."""
    if input_elements(problem) > INPUT_BUDGET:
        return None
    worst = worst_element(schedule, table, problem, stores, families(problem, b, cap))
    if worst is not None and worst.error <= tolerance and \
            input_elements(problem) <= CLIMB_BUDGET:
        worst = signed_v(schedule, table, problem, worst, b)
        if worst.error <= tolerance:
            worst = climb(schedule, table, problem, worst, b, cap, CLIMB_STEPS)
    if worst is None or worst.error <= tolerance:
        return None
    exact = reference_element(problem, worst.inputs, problem.group_of[worst.rank],
                              worst.element)
    witness = RoundingWitness(worst.family, worst.rank, worst.store, worst.element,
                              worst.machine, exact, worst.max_v, worst.inputs)
    return witness if witness.error > tolerance else None


def signed_v(schedule: Schedule, table: ChannelTable, problem: Problem, start: _Worst,
             b: float) -> _Worst:
    """The best V for the Q and K found: the output element is Σ_j w̃_j·v_j, so its error
    Σ_j (w̃_j - w_j)·v_j is largest with v_j = ±b by the sign of w̃_j - w_j. The machine
    weights w̃ are read with one-hot V probes (d_head keys per evaluation), the exact ones
    from float64 softmax; V is set alike at every head and feature."""
    g = problem.group_of[start.rank]
    t, h, _ = start.element
    n = max(problem.kv_rows(g), 1)
    d = problem.d_head
    base = problem.q_base(start.rank) or 0
    x = start.inputs
    machine = np.zeros(n)
    for lo in range(0, n, d):
        probe = np.zeros_like(x.v[g])
        for e in range(d):
            if lo + e < n:
                probe[lo + e, :, e] = 1.0
        v = dict(x.v)
        v[g] = probe
        ev = Evaluation(schedule, table, Machine(machine_buffers(
            problem, Inputs(x.q, x.k, v), len(schedule.programs))))
        arg = start.store.args[0]
        assert isinstance(arg, ValueRef)
        with np.errstate(all="ignore"):
            got = ev.value(start.rank, arg.id)
        if got is None:
            return start
        flat = np.asarray(got, dtype=float).reshape(-1)
        row = (t - base) * problem.h_q * d + h * d - start.store.offset
        for e in range(d):
            if lo + e < n and 0 <= row + e < flat.size:
                machine[lo + e] = flat[row + e]
    kv = h // problem.gqa
    scores = problem.scale * (x.k[g][:n, kv, :] @ x.q[g][t, h, :])
    if problem.mask is not None:
        # the keys the mask hides weigh 0 (their machine weight is 0 too)
        queries, positions = problem.positions(g)
        allowed = problem.mask.allowed(queries[t:t + 1], positions[:n])[0]
        if not allowed.any():
            return start
        scores = np.where(allowed, scores, -np.inf)
    w = np.exp(scores - scores.max())
    w /= w.sum()
    v = dict(x.v)
    v[g] = np.broadcast_to(np.where(machine >= w, b, -b)[:, None, None],
                           x.v[g].shape).copy()
    trial = Inputs(x.q, x.k, v)
    found = worst_element(schedule, table, problem, [(start.rank, start.store)],
                          [(start.family + ", V = ±B by the sign of each key's weight "
                            "error", trial)])
    return found if found is not None and found.error > start.error else start


def climb(schedule: Schedule, table: ChannelTable, problem: Problem, start: _Worst,
          b: float, cap: float, steps: int, seed: int = 0) -> _Worst:
    """A short hill climb from the worst element found: one K, Q or V element at a time
    moved to another f16 value within |x| <= b (scores within the cap), kept when the
    same output element's error grows (design §8: structured families, then ulp steps)."""
    rng = np.random.default_rng(seed)
    best = start
    g = problem.group_of[best.rank]
    for _ in range(steps):
        x = best.inputs
        which = ("k", "q", "v")[int(rng.integers(0, 3))]
        arr = getattr(x, which)[g].copy()
        i = tuple(int(rng.integers(0, n)) for n in arr.shape)
        if rng.random() < 0.5:   # an ulp-scale step, or a jump
            step = float(np.spacing(np.float16(abs(arr[i]) or 1.0))) * int(rng.integers(-4, 5))
            arr[i] = arr[i] + step
        else:
            arr[i] = rng.uniform(-b, b)
        arr[i] = float(_f16(np.array([arr[i]]), b)[0])
        parts = {t: dict(getattr(x, t)) for t in ("q", "k", "v")}
        parts[which][g] = arr
        trial = Inputs(parts["q"], parts["k"], parts["v"])
        if not scores_within(trial, cap):
            continue
        found = worst_element(schedule, table, problem, [(best.rank, best.store)],
                              [(best.family + ", climbed", trial)])
        if found is not None and found.error > best.error:
            best = found
    return best


def worst_element(schedule: Schedule, table: ChannelTable, problem: Problem,
                  stores: list[tuple[int, Op]], tried: list[tuple[str, Inputs]]
                  ) -> _Worst | None:
    """The element farthest from attention (float64) over the given inputs."""
    worst: _Worst | None = None
    best = 0.0
    for name, inputs in tried:
        ev = Evaluation(schedule, table,
                        Machine(machine_buffers(problem, inputs, len(schedule.programs))))
        with np.errstate(all="ignore"):
            for rank, store in stores:
                found = _worst_element(problem, ev, inputs, rank, store)
                if found is None:
                    continue
                err, element, machine, approx, max_v = found
                if err > best:
                    best = err
                    worst = _Worst(name, inputs, rank, store, element, machine, approx,
                                   max_v)
    return worst


def _worst_element(problem: Problem, ev: Evaluation[np.ndarray | None], inputs: Inputs,
                   rank: int, store: Op
                   ) -> tuple[float, tuple[int, int, int], float, float, float] | None:
    arg = store.args[0]
    assert isinstance(arg, ValueRef)
    got = ev.value(rank, arg.id)
    base = problem.q_base(rank)
    if got is None or base is None:
        return None
    g = problem.group_of[rank]
    ref = reference(problem, inputs, g, FLOAT64)[base:base + problem.S_q].reshape(-1)
    n = int(np.prod(store.shape))
    if store.offset + n > ref.size:
        return None
    want = np.asarray(ref[store.offset:store.offset + n], dtype=float)
    values = np.asarray(got, dtype=float).reshape(-1)
    max_v = float(np.max(np.abs(inputs.v[g][:max(problem.kv_rows(g), 1)]))) or 1.0
    diff = np.abs(values - want)
    if not np.all(np.isfinite(diff)):
        return None      # undefined outputs are the hazards' to report
    i = int(np.argmax(diff))
    t, rest = divmod(store.offset + i, problem.h_q * problem.d_head)
    h, e = divmod(rest, problem.d_head)
    return float(diff[i]) / max_v, (base + t, h, e), float(values[i]), float(want[i]), max_v


__all__ = ["INPUT_BUDGET", "RoundingWitness", "families", "find_rounding_witness",
           "input_elements", "worst_element"]
