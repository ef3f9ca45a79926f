"""The situation memo's machinery: the interned facts, the view the interval and rounding
rules read while one situation is computed, and the computing of one situation (a miss: the
three rule sets on the operands in the situation's frame) with its memo key for one and for
several operands. situations.py holds the op rules on it.
"""

from __future__ import annotations

from collections.abc import Callable

from meshproof.model.evaluate import Dependencies, Evaluation, Key, Lost
from meshproof.model.problem import Problem
from meshproof.model.schedule import DType, Op, OpKind, Schedule
from meshproof.verify.semantics.atom_base import frame, frame_parts
from meshproof.verify.semantics.budget import Budget
from meshproof.verify.semantics.canon import GROUPS, QROWS, ROWS, Canon, frame_mask
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.ranges import UNBOUNDED, Interval, Ranges
from meshproof.verify.semantics.relations import NONE, Related, ValueNumbers
from meshproof.verify.semantics.rounding import Err, ErrorBounds
from meshproof.verify.semantics.rules import Rule, apply
from meshproof.verify.semantics.situation_facts import _FID, _SHIFT, OPAQUE_CID, Facts, Gone, Held
from meshproof.verify.semantics.symbolic import Symbolic
from meshproof.verify.semantics.symbolic_core import Opaque


class _Why:
    """The rounding rules' `why` for the situation being computed: the operands' reasons
    from their facts, the result's captured."""

    def __init__(self, view: _View) -> None:
        self.view = view
        self.result: str | None = None

    def get(self, key: Key, default: None = None, /) -> str | None:
        if key == self.view.key:
            return self.result if self.result is not None else default
        f = self.view.facts_at(key)
        return f.why if f is not None and f.why is not None else default

    def setdefault(self, key: Key, why: str, /) -> str:
        if key == self.view.key:
            if self.result is None:
                self.result = why
            return self.result
        return self.get(key) or why


class _View:
    """What the interval and rounding rules read while one situation is computed: the
    operands' facts (the values the evaluation holds) and the result so far."""

    def __init__(self, domain: SituationMemo) -> None:
        self.domain = domain
        self.key: Key = (-1, -1)
        self.value: Value | Opaque | None = None
        self.cid: int = OPAQUE_CID
        self.result_interval: Interval = UNBOUNDED
        self.relation: Related = NONE

    def related(self) -> Related:
        """The relation of the operands of the op being computed (relations.py)."""
        return self.relation

    def dtype_of(self, rank: int, vid: int) -> DType | None:
        return self.domain.numbers.dtype_of(rank, vid)

    def facts_at(self, key: Key) -> Facts | None:
        x = self.domain.values[key[0]].get(key[1]) if self.domain.values else None
        return None if x is None else self.domain.facts[x & _FID]

    def canonical(self, key: Key) -> Value | Opaque | None:
        if key == self.key:
            return self.value
        f = self.facts_at(key)
        return None if f is None else self.domain.canonical_of(f)

    def cid_of(self, key: Key) -> int | None:
        if key == self.key:
            return self.cid if self.cid != OPAQUE_CID else None
        f = self.facts_at(key)
        return None if f is None or f.cid == OPAQUE_CID else f.cid

    def by_cid(self, cid: int) -> Value:
        return self.domain.canon.values[cid]

    def interval(self, key: Key) -> Interval:
        if key == self.key:
            return self.result_interval
        f = self.facts_at(key)
        return UNBOUNDED if f is None else f.interval

    def recv_source(self, rank: int, op: Op) -> Key | Lost:
        return self.domain.dependencies.recv_source(rank, op)


class _Forgetful(dict[tuple[object, ...], int]):
    """The memo switched off (the unmemoised evaluation the tests compare with)."""

    def __setitem__(self, key: tuple[object, ...], value: int) -> None:
        pass


class SituationMemo:
    """The memo of the fused domain: its facts, its view and one situation's computing."""

    def __init__(self, schedule: Schedule, problem: Problem, input_bound: float,
                 budget: Budget | None = None, memo: bool = True,
                 dependencies: Dependencies | None = None) -> None:
        self.dependencies = dependencies if dependencies is not None else \
            Dependencies(schedule, None)  # type: ignore[arg-type]
        self.algebra = Symbolic(schedule, problem, budget, record=False,
                                dependencies=self.dependencies)
        self.canon = Canon()
        self.facts: list[Facts] = []
        self._fids: dict[Facts, int] = {}
        self.memo: dict[tuple[object, ...], int] = {} if memo else _Forgetful()
        self.numbers = ValueNumbers()       # which values are the same machine number
        self._zero: dict[int, bool] = {}
        self.values: list[dict[int, Held]] = []      # the evaluation's, set by attach
        self.view = _View(self)
        self.why = _Why(self.view)
        self.ranges = Ranges(self.view, input_bound, problem.d_head)
        self.rounding = ErrorBounds(self.view, input_bound, problem.d_head, self.why)
        self._has: list[int] = []     # per facts id: the parts of a frame that move it
        self.misses = 0
        # one (rank, op) per situation computed: what holds there holds on every rank
        # that meets the same situation (the checks of safety.py and hazards.py run here)
        self.fresh: list[tuple[int, Op]] = []

    def attach(self, evaluation: Evaluation[Held]) -> None:
        self.values = evaluation.values

    # --- facts ---------------------------------------------------------------------------
    def _fid(self, facts: Facts) -> int:
        fid = self._fids.get(facts)
        if fid is None:
            fid = self._fids[facts] = len(self.facts)
            self.facts.append(facts)
            cid = facts.cid
            self._has.append(frame_mask(self.canon.values[cid]) if cid != OPAQUE_CID
                             else 0)
        return fid

    def canonical_of(self, f: Facts) -> Value | Opaque:
        if f.gone is not None:
            g = f.gone
            return Opaque(g.reason, g.rank, g.op, g.lost, g.undefined)
        return self.canon.values[f.cid]

    def actual(self, x: Held) -> Value | Opaque:
        """A held value in the frame of its rank (what the judge reads)."""
        f = self.facts[x & _FID]
        if f.gone is not None:
            return self.canonical_of(f)
        return self.canon.value_at(f.cid, x >> _SHIFT)

    # --- one situation -------------------------------------------------------------------
    def _one(self, rank: int, op: Op, x: Held, rule: Rule, number: bool = True) -> Held:
        """The situation of a one-operand op: the op and the operand's facts (its shift
        is the frame)."""
        fid = x & _FID
        key = (id(op), fid)
        hit = self.memo.get(key)
        base = (x >> _SHIFT) if self._has[fid] else 0
        if hit is None:
            hit = self._miss(key, rank, op, (x,), base, rule)
        out = Held(hit + (base << _SHIFT))
        if number:
            self._number(rank, op, (x,), out)
        return out

    def _many(self, rank: int, op: Op, args: tuple[Held, ...], rule: Rule) -> Held:
        """The situation of an op of several operands: per frame part, the smallest
        frame of the operands that part moves; each operand's frame relative to it."""
        fids = [x & _FID for x in args]
        parts = [frame_parts(x >> _SHIFT) for x in args]
        hases = [self._has[f] for f in fids]
        base_parts: list[int] = []
        for i, bit in enumerate((ROWS, QROWS, GROUPS)):
            moved = [p[i] for p, h in zip(parts, hases, strict=True) if h & bit]
            base_parts.append(min(moved) if moved else 0)
        base = frame(*base_parts)
        rel = [frame(*((p[i] - base_parts[i]) if h & bit else 0
                       for i, bit in enumerate((ROWS, QROWS, GROUPS))))
               for p, h in zip(parts, hases, strict=True)]
        key = (id(op), *(v for pair in zip(fids, rel, strict=True) for v in pair))
        hit = self.memo.get(key)
        if hit is None:
            hit = self._miss(key, rank, op, args, base, rule)
        return Held(hit + (base << _SHIFT))

    def _number(self, rank: int, op: Op, args: tuple[Held, ...], out: Held) -> None:
        """Value numbers for the rounding bound's relations (relations.py)."""
        mag = 0.0
        if op.kind is OpKind.CAST:
            lo, hi = self.facts[args[0] & _FID].interval
            mag = max(abs(lo), abs(hi))
        fid = out & _FID
        zero = self._zero.get(fid)
        if zero is None:
            cid = self.facts[fid].cid
            zero = self._zero[fid] = cid != OPAQUE_CID and self.canon.values[cid].form.is_zero
        self.numbers.note(rank, op, mag, zero)

    def _miss(self, key: tuple[object, ...], rank: int, op: Op, args: tuple[Held, ...],
              base: int, rule: Rule) -> int:
        """A situation met for the first time: the three rule sets, on the operands in the
        situation's frame; the result relative to it, memoised unless rank-private."""
        self.misses += 1
        hit = self._compute(
            rank, op, args, base,
            lambda v: apply(self.algebra, rule, rank, op, v),
            lambda v: apply(self.ranges, rule, rank, op, v),
            lambda v: apply(self.rounding, rule, rank, op, v))
        if not self.algebra.private:
            self.memo[key] = hit
        return hit

    def _compute(self, rank: int, op: Op, args: tuple[Held, ...], base: int,
                 sym: Callable[[list[Value | Opaque]], Value | Opaque],
                 iv: Callable[[list[Interval]], Interval],
                 err: Callable[[list[Err | None]], Err | None]) -> int:
        """The facts of the result, interned: (facts id + its shift relative to base)."""
        facts = [self.facts[a & _FID] for a in args]
        self.algebra.private = False
        gone = next((f.gone for f in facts if f.gone is not None), None)
        operands: list[Value | Opaque] = [
            self.canon.value_at(f.cid, (a >> _SHIFT) - base)
            for f, a in zip(facts, args, strict=True) if f.gone is None]
        out = sym(operands) if gone is None else Opaque(gone.reason, gone.rank, gone.op,
                                                       gone.lost, gone.undefined)
        fid, shift = self._settle(rank, op, out, lambda: iv([f.interval for f in facts]),
                                  lambda: err([f.err for f in facts]))
        return fid + (shift << _SHIFT)

    def _settle(self, rank: int, op: Op, out: Value | Opaque, iv: Callable[[], Interval],
                err: Callable[[], Err | None]) -> tuple[int, int]:
        """A result's facts: its canonical form, then its interval (which reads the form),
        then its rounding error (which reads both)."""
        self.fresh.append((rank, op))
        view = self.view
        view.key = (rank, op.out if op.out is not None else -1)
        if isinstance(out, Opaque):
            view.value, view.cid, shift = out, OPAQUE_CID, 0
        else:
            view.cid, shift = self.canon.intern(out)
            view.value = self.canon.values[view.cid]
        view.result_interval = UNBOUNDED
        interval = iv()
        view.result_interval = interval
        self.why.result = None
        error = err()
        why = self.why.result
        view.key, view.value = (-1, -1), None
        gone = None if not isinstance(out, Opaque) else \
            Gone(out.reason, out.rank, out.op, out.lost, out.undefined)
        return self._fid(Facts(view.cid, interval, error, why, gone)), shift
