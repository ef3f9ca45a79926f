"""Witnesses: concrete inputs on which a stored output differs from attention.

The schedule is evaluated on seeded inputs with the same semantics as the algebra (exact
arithmetic, casts are identities, values that depend on no input are what the machine
holds), in float64, and a candidate is re-evaluated in 40-digit arithmetic (mpmath) and
compared with the reference evaluated in the same precision. A relative difference above
1e-6 (far above the evaluation's own rounding) in the 40-digit evaluation is a witness;
none found leaves the property unknown, never violated.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from meshproof.model.budget import available_bytes, size_text
from meshproof.model.channel_table import ChannelTable
from meshproof.model.evaluate import Evaluation
from meshproof.model.inputs import normal_block
from meshproof.model.masks import masked_attention
from meshproof.model.problem import Problem
from meshproof.model.schedule import Op, Schedule, ValueRef
from meshproof.verify.semantics.cone import ConeTooLarge, high_precision
from meshproof.verify.semantics.numeric import (
    FLOAT64,
    MP_DIGITS,
    Array,
    Backend,
    Inputs,
    Num,
    Numeric,
    mpmath_backend,
)

WITNESS_RTOL = 1e-6
SEEDS = (0, 1, 2)
CONE_BUDGET = 3_000_000     # scalar operations of one element's cone in 40-digit
# Input families a witness search holds at once (seeded_families builds up to 10, the
# equal-score families of exactly_once up to 7), each a full copy of Q, K and V
FAMILY_COPIES = 12
MEMORY_SHARE = 0.5          # of the memory available, what a witness search may use

__all__ = ["MP_DIGITS", "SEEDS", "WITNESS_RTOL", "Family", "Inputs", "Witness", "WitnessTooLarge",
           "check_witness_size", "equal_scores", "find_witness", "make_inputs",
           "numeric_evaluation", "reference", "seeded_families", "witness_bytes"]


class WitnessTooLarge(Exception):
    """A witness search would not fit in memory: the property it decides is unknown with
    this reason, never violated by a guess and never an out-of-memory crash."""


def witness_bytes(schedule: Schedule, problem: Problem) -> int:
    """What a witness search needs at most, sized before anything is allocated: the input
    families in float64, and every value of the schedule's numeric evaluation (its memo may
    hold them all)."""
    d = problem.d_head
    inputs = 8 * sum((problem.q_rows(g.index) * problem.h_q +
                      2 * max(problem.kv_rows(g.index), 1) * problem.h_kv) * d
                     for g in problem.groups)
    values = 8 * sum(math.prod(op.shape) for prog in schedule.programs for op in prog.ops)
    return FAMILY_COPIES * inputs + values


def check_witness_size(schedule: Schedule, problem: Problem,
                       available: int | None = None) -> None:
    """Raise WitnessTooLarge when a witness search of this launch does not fit in its share
    of the memory available (checked before any input is made)."""
    need = witness_bytes(schedule, problem)
    budget = int(MEMORY_SHARE * (available_bytes() if available is None else available))
    if need > budget:
        raise WitnessTooLarge(
            f"a witness input for this launch needs about {size_text(need)} (its Q, K and V "
            f"in float64, and the values computed from them), past the {size_text(budget)} "
            "a witness search may use here, so no input was tried; verify the same kernel at "
            "smaller shapes (e.g. a smaller S_kv_per_rank or d_head) to find one")


def _mp() -> Any:  # mpmath ships no types
    """mpmath, imported when 40-digit arithmetic is first needed."""
    import mpmath

    return mpmath


# A problem at most this many input elements keeps its seeded inputs (read-only) between
# the families and properties that ask again: drawing a seed's pool costs about 0.25 s,
# and one verify asks for seeds 0-2 a dozen times. A larger one draws afresh each time,
# so the cache never holds more than LRU_INPUTS * 8 MiB.
CACHED_INPUT_ELEMENTS = 1 << 20
LRU_INPUTS = 8


def make_inputs(problem: Problem, seed: int) -> Inputs:
    """N(0,1) inputs rounded to f16: exactly what `meshproof simulate --seed` feeds (the one
    seeded generator, model/inputs.py), so a witness found on them reproduces there. The
    arrays are read-only: a family that changes them works on a copy."""
    elements = sum((problem.q_rows(g.index) * problem.h_q
                    + 2 * max(problem.kv_rows(g.index), 1) * problem.h_kv) * problem.d_head
                   for g in problem.groups)
    if elements > CACHED_INPUT_ELEMENTS:
        return _draw_inputs(problem, seed)
    return _cached_inputs(problem, seed)


@functools.lru_cache(maxsize=LRU_INPUTS)
def _cached_inputs(problem: Problem, seed: int) -> Inputs:
    return _draw_inputs(problem, seed)


def _draw_inputs(problem: Problem, seed: int) -> Inputs:
    q, k, v = {}, {}, {}
    d = problem.d_head
    for g in problem.groups:
        rows_q, rows_kv = problem.q_rows(g.index), max(problem.kv_rows(g.index), 1)
        q[g.index] = _read_only(normal_block(seed, g.index, "q", 0, rows_q, problem.h_q, d))
        k[g.index] = _read_only(normal_block(seed, g.index, "k", 0, rows_kv, problem.h_kv, d))
        v[g.index] = _read_only(normal_block(seed, g.index, "v", 0, rows_kv, problem.h_kv, d))
    return Inputs(q, k, v)


def _read_only(x: npt.NDArray[np.float32]) -> Array:
    out = x.astype(np.float64)
    out.flags.writeable = False
    return out


def reference(problem: Problem, inputs: Inputs, group: int, be: Backend,
              rows: tuple[int, int] | None = None) -> Array:
    """Attention of group `group` at its query rows [lo, hi) (all of them by default):
    (rows, h_q, d); under the launch's mask, over the keys it allows (model/masks.py)."""
    q, k, v = (be.lift(x[group]) for x in (inputs.q, inputs.k, inputs.v))
    lo, hi = rows if rows is not None else (0, q.shape[0])
    n = problem.kv_rows(group)
    q, k, v = q[lo:hi], k[:n], v[:n]
    scale = be.const(problem.scale)
    if problem.mask is not None:
        queries, keys = problem.positions(group)
        allowed = problem.mask.allowed(queries[lo:hi], keys[:n])
        return masked_attention(q, k, v, scale, allowed, be.exp)
    out = np.empty(q.shape, dtype=q.dtype)
    for h in range(problem.h_q):
        g = h // problem.gqa
        s = (q[:, h, :] @ k[:, g, :].T) * scale
        m = s.max(axis=-1, keepdims=True)
        p = be.exp(s - m)
        out[:, h, :] = (p @ v[:, g, :]) / p.sum(axis=-1, keepdims=True)
    return out


@dataclass(frozen=True, slots=True)
class Family:
    """Inputs a witness is searched on, and how to say (and rebuild) them."""

    text: str                  # "seeded N(0,1) inputs (seed 0" style, without the precision
    inputs: Inputs
    seed: int | None = None


def seeded_families(problem: Problem) -> list[Family]:
    """Seeded N(0,1) inputs, then the same with one block of key rows dominating (its K
    scaled by 4): a merge that is wrong only when a given side holds the max (exp2 for
    exp on the side that rarely wins) shows there."""
    out = [Family(f"seeded N(0,1) inputs (seed {seed}: `meshproof simulate --seed {seed}` "
                  "feeds them", make_inputs(problem, seed), seed) for seed in SEEDS]
    n = max((problem.kv_rows(g.index) for g in problem.groups), default=0)
    s = problem.S_kv_per_rank
    # a quarter of the first shard each (the tiles a rank merges in its own loop), the
    # first, last and middle shards
    quarter = max(1, s // 4)
    blocks = [(j * quarter, (j + 1) * quarter) for j in range(4)] + \
        [(0, s), (max(0, n - s), n), (s * (n // s // 2), s * (n // s // 2) + s)]
    for lo, hi in dict.fromkeys(b for b in blocks if b[1] > b[0] and b[1] <= n):
        base = make_inputs(problem, 0)
        k = {g: x.copy() for g, x in base.k.items()}
        for x in k.values():
            x[lo:hi] *= 4.0
        out.append(Family(f"seeded N(0,1) inputs with key rows {lo}..{hi - 1} scaled by 4 "
                          "(they dominate; seed 0", Inputs(base.q, k, base.v), 0))
    return out


def equal_scores(problem: Problem, rows: tuple[int, int] | None, seed: int = 0) -> Family:
    """Q = 0, so every score is 0 and softmax weighs every key row alike: the output is the
    share of V over the group's rows. V is the same at every head and feature (so that no
    head or feature mapping matters, only how the rows are counted): 1 on `rows` and 0
    elsewhere -- a row merged twice shows twice its share -- or, with `rows` None, a seeded
    random 0/1 per row (any uneven weighting shows)."""
    base = make_inputs(problem, seed)
    q = {g: np.zeros_like(x) for g, x in base.q.items()}
    v = {}
    for g, x in base.v.items():
        if rows is None:
            rng = np.random.default_rng([seed, g, 11])
            pick = rng.integers(0, 2, x.shape[0]).astype(np.float64)
        else:
            pick = np.zeros(x.shape[0])
            pick[rows[0]:rows[1]] = 1.0
        v[g] = np.broadcast_to(pick[:, None, None], x.shape).copy()
    if rows is None:
        return Family(f"Q = 0 (every score equal) and V a seeded random 0/1 per key row (seed "
                      f"{seed}", Inputs(q, base.k, v), seed)
    lo, hi = rows
    return Family(f"Q = 0 (every score equal) and V = 1 on key rows {lo}..{hi - 1}, 0 "
                  f"elsewhere (seed {seed} for K", Inputs(q, base.k, v), seed)


def numeric_evaluation(schedule: Schedule, table: ChannelTable, problem: Problem,
                       inputs: Inputs, be: Backend = FLOAT64) -> Evaluation[Num | None]:
    return Evaluation(schedule, table, Numeric(problem, inputs, be))


@dataclass(frozen=True, slots=True)
class Witness:
    inputs: str                       # the family, in words (Family.text)
    seed: int | None
    precision: str
    rel_err: float
    rank: int
    store: Op
    element: tuple[int, int, int]     # (query row, q head, feature)
    got: float
    want: float

    def describe(self, endpoint_text: str) -> str:
        t, h, e = self.element
        return (f"on {self.inputs}, evaluated in {self.precision}) the output at "
                f"{self.store.source} on rank {endpoint_text} differs from "
                f"attention by {self.rel_err:.3g} (relative): O[{t}, {h}, {e}] is "
                f"{self.got:.6g}, attention gives {self.want:.6g}")


@dataclass(frozen=True, slots=True)
class _Candidate:
    rank: int
    store: Op
    flat: int                         # the element's index in the stored value
    element: tuple[int, int, int]
    got: float
    want: float
    scale: float                      # max |reference| over the elements judged


def _compare(problem: Problem, ev: Evaluation[Num | None], rank: int, store: Op,
             live: tuple[int, int] | None = None) -> _Candidate | None:
    arg = store.args[0]
    assert isinstance(arg, ValueRef)
    got = ev.value(rank, arg.id)
    g = problem.group_of[rank]
    base = problem.q_base(rank)
    if base is None:
        return None
    domain = ev.domain
    assert isinstance(domain, Numeric)
    ref = reference(problem, domain.inputs, g, FLOAT64, (base, base + problem.S_q)
                    ).reshape(-1)
    n = math.prod(store.shape)
    if got is None or store.offset + n > ref.size:
        return None
    want = np.asarray(ref[store.offset:store.offset + n], dtype=float)
    values = np.asarray(got.data, dtype=float).reshape(-1)
    lo, hi = (0, n) if live is None else (live[0] - store.offset, live[1] - store.offset)
    values, want = values[lo:hi], want[lo:hi]   # only what a later store did not rewrite
    diff = np.abs(values - want)
    scale = float(np.max(np.abs(want))) if want.size else 1.0
    scale = scale or 1.0
    if not np.all(np.isfinite(diff)):
        worst = int(np.argmin(np.isfinite(diff)))
        rel = math.inf
    else:
        worst = int(np.argmax(diff))
        rel = float(diff[worst]) / scale
    if rel <= WITNESS_RTOL:
        return None
    flat = store.offset + lo + worst
    t, rest = divmod(flat, problem.h_q * problem.d_head)
    h, e = divmod(rest, problem.d_head)
    return _Candidate(rank, store, lo + worst, (base + t, h, e), float(values[worst]),
                      float(want[worst]), scale)


def reference_element(problem: Problem, inputs: Inputs, group: int,
                      element: tuple[int, int, int]) -> float:
    """One element of attention in 40-digit arithmetic (under the launch's mask, over the
    keys it allows at the row's position; 0 if it allows none)."""
    t, h, e = element
    g = h // problem.gqa
    n = problem.kv_rows(group)
    keys: list[int] | range = range(n)
    if problem.mask is not None:
        queries, positions = problem.positions(group)
        allowed = problem.mask.allowed(queries[t:t + 1], positions[:n])[0]
        keys = [int(j) for j in np.flatnonzero(allowed)]
        if not keys:
            return 0.0
    q = [_mp().mpf(float(x)) for x in inputs.q[group][t, h]]
    c = _mp().mpf(problem.scale)
    s = [c * _mp().fdot(q, [_mp().mpf(float(x)) for x in inputs.k[group][j, g]])
         for j in keys]
    top = max(s)
    w = [_mp().exp(x - top) for x in s]
    v = [_mp().mpf(float(inputs.v[group][j, g, e])) for j in keys]
    return float(_mp().fdot(w, v) / _mp().fsum(w))


def _confirm(problem: Problem, ev: Evaluation[Num | None], cand: _Candidate,
             family: Family) -> Witness | None:
    """The candidate re-evaluated in 40-digit arithmetic over the element's cone only;
    a witness when the difference is still far above the evaluation's rounding."""
    arg = cand.store.args[0]
    assert isinstance(arg, ValueRef)
    with _mp().workdps(MP_DIGITS):
        try:
            got = high_precision(ev, cand.rank, arg.id, cand.flat, CONE_BUDGET)
        except ConeTooLarge:
            return None
        want = reference_element(problem, family.inputs, problem.group_of[cand.rank],
                                 cand.element)
    if got is None:
        return None
    rel = math.inf if not math.isfinite(got) else abs(got - want) / cand.scale
    if rel <= WITNESS_RTOL:
        return None
    return Witness(family.text, family.seed, mpmath_backend().name, rel, cand.rank,
                   cand.store, cand.element, got, want)


def find_witness(schedule: Schedule, table: ChannelTable, problem: Problem,
                 stores: list[tuple[int, Op, tuple[int, int] | None]],
                 families: list[Family] | None = None) -> Witness | None:
    """The first store (in the given order) that differs from attention on some input
    family (seeded N(0,1) by default), judged on the elements it still holds at the end
    (`live`, None: all of them), and confirmed in 40-digit arithmetic. Raises
    WitnessTooLarge, before anything is allocated, when the search does not fit."""
    check_witness_size(schedule, problem)
    for family in families if families is not None else seeded_families(problem):
        ev = numeric_evaluation(schedule, table, problem, family.inputs)
        with np.errstate(all="ignore"):
            for rank, store, live in stores:
                cand = _compare(problem, ev, rank, store, live)
                if cand is None:
                    continue
                confirmed = _confirm(problem, ev, cand, family)
                if confirmed is not None:
                    return confirmed
    return None
