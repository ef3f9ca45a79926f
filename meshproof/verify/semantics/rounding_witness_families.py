"""Input families aimed at the roundings that make up the bound (design §8).

Each family places scores where one mechanism rounds worst, with Q = B on every feature
and each key row built so that `q·k` hits a chosen target: the first d - 1 features carry
it coarsely, the last the small remainder (16-bit spacing is relative, so the remainder
is held almost exactly). Every value is an f16 value within |x| <= B.

- **p boundary** (p cast to 16 bits, and the output store): in every KV slice, its first
  key is the slice's max and every other key sits at `p = e^(s - m)` just above an f16
  midpoint of [1/2, 1), so every cast of p rounds up by almost half an ulp; V is one value
  g a little above a power of two, so the output, scaled up by those roundings, lands past
  a midpoint of its own binade and the store rounds it further up;
- **score cells** (16-bit scores): keys alternate between raw dots just above a midpoint
  of their f16 cell and just below the next one, so the machine holds equal scores where
  the exact ones differ by almost a whole spacing; V = ±B by kind;
- **m boundary** (a max narrowed for a message): whole KV slices alternate between maxima
  just above a midpoint and just below the next one, so each partial is rescaled by almost
  half a spacing, in opposite directions; V = ±B by slice;
- **constant V** (16-bit merge arithmetic): V constant along the keys, one value per
  feature, so the output shows only o's and ℓ's own roundings and the store's;
- **constant V scan** (the same, exhaustively): for one seeded Q and K, V constant along
  the keys at every 16-bit value c of the binade below B, d_head values per input. ℓ's
  roundings are fixed by Q and K; o = c·ℓ rounds differently for each c, so the scan finds
  the c whose roundings of o all go against ℓ's; over many Q and K, the constants near
  the bottom of the binade are enough (an ulp of the output is then the largest share of
  max|V|): the all-f16 design at B = 1 goes from 1.8e-3·max|V| to 2.8e-3.

These are starting points: `signed_v` and the hill climb (rounding_witness.py) move on
from the best of them.
"""

from __future__ import annotations

import math

import numpy as np

from meshproof.model.problem import Problem
from meshproof.verify.semantics.numeric import Array, Inputs

_F16_MANT = 10


def _f16(x: np.ndarray | float, b: float) -> np.ndarray:
    h = np.atleast_1d(np.clip(np.asarray(x, dtype=np.float64), -b, b)).astype(np.float16)
    over = np.abs(h.astype(np.float64)) > b
    h[over] = np.nextafter(h[over], np.float16(0))
    out: np.ndarray = h.astype(np.float64)
    return out


def _spacing(x: float) -> float:
    """The f16 spacing at |x| (normal range)."""
    _, e = math.frexp(abs(x) or 1.0)          # |x| in [2^(e-1), 2^e)
    return math.ldexp(1.0, max(e - 1, -14) - _F16_MANT)


def _key_row(raw: float, b: float, d: int) -> np.ndarray:
    """A key row k with B·Σ k ≈ raw (Q = B on every feature)."""
    total = raw / b
    if d == 1:
        return _f16(total, b)
    coarse = _f16(np.full(d - 1, total / (d - 1)), b)
    rest = total - float(coarse.sum())
    return np.concatenate([coarse, _f16(rest, b)])


def _inputs(problem: Problem, b: float, raw: list[np.ndarray], v: list[np.ndarray]
            ) -> Inputs:
    """Q = B; per group its key rows' raw dots and V values (one per key row)."""
    d = problem.d_head
    q, k, vv = {}, {}, {}
    for g in problem.groups:
        n = max(problem.kv_rows(g.index), 1)
        q[g.index] = np.full((max(problem.q_rows(g.index), 1), problem.h_q, d),
                             float(_f16(b, b)[0]))
        rows = np.stack([_key_row(float(x), b, d) for x in raw[g.index][:n]])
        k[g.index] = np.broadcast_to(rows[:, None, :], (n, problem.h_kv, d)).copy()
        vv[g.index] = np.broadcast_to(v[g.index][:n, None, None],
                                      (n, problem.h_kv, d)).copy()
    return Inputs(q, k, vv)


def _top_raw(problem: Problem, b: float) -> float:
    """A raw dot near the top of what |x| <= B allows (d - 1 coarse features)."""
    return 0.9 * max(problem.d_head - 1, 1) * b * b


def p_boundary(problem: Problem, b: float) -> list[tuple[str, Inputs]]:
    scale = abs(problem.scale) or 1.0
    # scores of a few units: f32 holds them to 1e-6, finer than the window of p
    top = min(_top_raw(problem, b), 4.0 / scale)
    out = []
    for above in (1.0 / 8.0, 1.0 / 32.0):
        p = 0.5 + 2.0 ** -12 * (1.0 + above)          # just above an f16 midpoint
        drop = -math.log(p) / scale                   # in raw-dot units
        for lift in (1.14, 1.2, 1.3):
            e = math.floor(math.log2(b)) - 1
            g = float(_f16(lift * 2.0 ** e, b)[0])
            raw, v = [], []
            for grp in problem.groups:
                n = max(problem.kv_rows(grp.index), 1)
                r = np.full(n, top - drop)
                r[::max(problem.S_kv_per_rank, 1)] = top   # each slice's first key: its max
                raw.append(r)
                v.append(np.full(n, g))
            out.append((f"Q = {b:g}, in every KV slice one max key and the others at p just "
                        f"above an f16 midpoint of [1/2, 1) ({above:g} ulp), V = {g:g}",
                        _inputs(problem, b, raw, v)))
    return out


def _cells(centre: float, tilt: float) -> tuple[float, float]:
    """Two values that round to the same f16 number from opposite ends of its cell."""
    h = _spacing(centre)
    c = math.floor(centre / h) * h
    return c + h / 2 + tilt * h, c + 3 * h / 2 - tilt * h


def _widest_cell(cap: float, scale: float) -> tuple[float, float]:
    """The two ends of the widest run of raw dots in [cap/2, cap] that the machine holds as
    one f16 score `RN16(RN16(raw)·scale)` (the raw dot's rounding and the scaled score's
    in one cell), on a grid of 1/64 of the raw spacing at cap."""
    h = _spacing(cap)
    raw = np.arange(cap / 2, cap, h / 64.0)
    held = (raw.astype(np.float32).astype(np.float16).astype(np.float32) *
            np.float32(scale)).astype(np.float16)
    starts = np.concatenate([[0], np.nonzero(held[1:] != held[:-1])[0] + 1])
    ends = np.concatenate([starts[1:] - 1, [raw.size - 1]])
    i = int(np.argmax(raw[ends] - raw[starts]))
    return float(raw[starts[i]]), float(raw[ends[i]])


def score_cells(problem: Problem, b: float) -> list[tuple[str, Inputs]]:
    scale = abs(problem.scale) or 1.0
    top = _top_raw(problem, b)
    ends = [("the raw dots (1/16 of a spacing inside)", _cells(top, 1.0 / 16.0)),
            ("the scaled scores (1/16 of a spacing inside)", tuple(
                x / scale for x in _cells(top * scale, 1.0 / 16.0))),
            ("the raw dot and the scaled score at once", _widest_cell(top / 0.9, scale))]
    out = []
    for what, (up, down) in ends:
        for sign in (1.0, -1.0):
            raw, v = [], []
            for grp in problem.groups:
                n = max(problem.kv_rows(grp.index), 1)
                kind = np.arange(n) % 2
                raw.append(np.where(kind == 0, up, down))
                v.append(np.where(kind == 0, -sign * b, sign * b).astype(float))
            out.append((f"Q = {b:g}, keys alternating between the two ends of one f16 cell "
                        f"of {what}, V = ±{b:g} by end", _inputs(problem, b, raw, v)))
    return out


def m_boundary(problem: Problem, b: float) -> list[tuple[str, Inputs]]:
    scale = abs(problem.scale) or 1.0
    top = _top_raw(problem, b)
    out = []
    for tilt in (1.0 / 16.0, 1.0 / 64.0):
        up, down = (x / scale for x in _cells(top * scale, tilt))
        for sign in (1.0, -1.0):
            raw, v = [], []
            for grp in problem.groups:
                n = max(problem.kv_rows(grp.index), 1)
                slice_of = np.arange(n) // max(problem.S_kv_per_rank, 1)
                odd = slice_of % 2 == 1
                raw.append(np.where(odd, down, up))
                v.append(np.where(odd, sign * b, -sign * b).astype(float))
            out.append((f"Q = {b:g}, KV slices alternating between maxima at the two ends of "
                        f"one f16 cell ({tilt:g} of a spacing inside), V = ±{b:g} by slice",
                        _inputs(problem, b, raw, v)))
    return out


def _uniform_qk(problem: Problem, b: float, rng: np.random.Generator
                ) -> tuple[dict[int, Array], dict[int, Array]]:
    """Q, then K, uniform in [-b, b] and rounded to f16, drawn from `rng` in that order."""
    def draw(rows: int, heads: int) -> Array:
        return _f16(rng.uniform(-b, b, (rows, heads, problem.d_head)), b).reshape(
            rows, heads, problem.d_head)
    q = {g.index: draw(max(problem.q_rows(g.index), 1), problem.h_q) for g in problem.groups}
    k = {g.index: draw(max(problem.kv_rows(g.index), 1), problem.h_kv)
         for g in problem.groups}
    return q, k


def _v_constant_along_keys(problem: Problem, row: Array) -> dict[int, Array]:
    """V equal to `row` (d_head values) at every key row and kv head of every group."""
    return {g.index: np.broadcast_to(row[None, None, :], (max(problem.kv_rows(g.index), 1),
                                                          problem.h_kv, problem.d_head)).copy()
            for g in problem.groups}


def constant_v(problem: Problem, b: float, seed: int, draws: int
               ) -> list[tuple[str, Inputs]]:
    """Seeded uniform Q and K, and V constant along the keys, one constant per feature
    just above a power of two (each output feature is its own trial): the output is then
    the constant times the quotient of o's and ℓ's merge arithmetic, so only their own
    roundings and the store's show (16-bit merges)."""
    e = math.floor(math.log2(b))
    if 1.2 * 2.0 ** e > b:
        e -= 1
    lo = 2.0 ** e
    rng = np.random.default_rng(300 + seed)
    d = problem.d_head
    q, k = _uniform_qk(problem, b, rng)
    out = []
    for i in range(draws):
        row = _f16(rng.uniform(lo, 1.2 * lo, d), b)
        v = _v_constant_along_keys(problem, row)
        out.append((f"seeded uniform Q and K in [-{b:g}, {b:g}] (seed {300 + seed}), V "
                    f"constant along the keys, per feature in [{lo:g}, {1.2 * lo:g}] "
                    f"(draw {i})", Inputs(q, k, v)))
    return out


def _binade_below(b: float) -> tuple[float, float]:
    """[lo, hi): the values of the 16-bit binade of the largest values within |x| <= b
    (the binade below b when b is a power of two)."""
    lo = 2.0 ** (math.ceil(math.log2(b)) - 1)
    return lo, min(2.0 * lo, b + _spacing(lo) / 2)


def constant_v_scan(problem: Problem, b: float, seed: int, inputs: int | None = None
                    ) -> list[tuple[str, Inputs]]:
    """Seeded uniform Q and K (as `constant_v`), and V constant along the keys at the
    16-bit values of the binade below b (`_binade_below`) from its bottom up, d_head of
    them per input (one per feature), so that each output feature tries one constant;
    the first `inputs` inputs (all when None): near the bottom of the binade an ulp of the
    output is the largest share of max|V|."""
    lo, hi = _binade_below(b)
    values = _f16(np.arange(lo, hi, _spacing(lo)), b)
    values = values[values < hi]
    rng = np.random.default_rng(300 + seed)
    d = problem.d_head
    q, k = _uniform_qk(problem, b, rng)
    out = []
    for start in range(0, values.size, d)[:inputs]:
        row = np.resize(values[start:start + d], d)   # the last input wraps round
        v = _v_constant_along_keys(problem, row)
        out.append((f"seeded uniform Q and K in [-{b:g}, {b:g}] (seed {300 + seed}), V "
                    f"constant along the keys at the 16-bit values {row[0]:g} to "
                    f"{row[-1]:g}, one per feature", Inputs(q, k, v)))
    return out


def aimed(problem: Problem, b: float) -> list[tuple[str, Inputs]]:
    """Every aimed family, for |x| <= b."""
    return [*p_boundary(problem, b), *score_cells(problem, b), *m_boundary(problem, b),
            *constant_v(problem, b, 0, 4)]


__all__ = ["aimed", "constant_v", "constant_v_scan", "m_boundary", "p_boundary", "score_cells"]
