"""The situation memo: the algebra computed once per situation, not once per rank and op.

A *situation* is an op (its attributes, the same object for every rank that traces it
alike) with its operands' canonical values and their key-row shifts relative to each other.
The algebra's result depends on nothing else -- key rows shifted and digits renamed commute
with every rule (spec/semantics.md §9) -- so it is computed on the first rank that meets the
situation, stored canonically, and every other rank looks it up: one tuple, one dict lookup.
What reads rank context is kept out: harness loads are computed per rank (their group and
key rows), and a scrambled contraction (a fresh symbol per rank) is never shared.

`Situations` is an OpSemantics of model/evaluate.py over `Held` values; it delegates every
miss to the symbolic domain (symbolic.py), which records no departure events here: they are
recomputed, unmemoised, for the cones of the outputs that fail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from meshproof.model.evaluate import (
    Binary,
    Dependencies,
    Evaluation,
    Key,
    Lost,
    Reduction,
    Reload,
    Unary,
)
from meshproof.model.problem import Problem
from meshproof.model.schedule import Op, Schedule
from meshproof.verify.semantics.budget import Budget
from meshproof.verify.semantics.canon import Canon, Held
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.reasons import UndefinedKind
from meshproof.verify.semantics.symbolic import Opaque, Symbolic

V = Held | Opaque


@dataclass(frozen=True, slots=True)
class _Opaque:
    """An opaque result of a situation, to be placed at each rank's op."""

    reason: str
    lost: bool
    undefined: UndefinedKind | None


Entry = Held | _Opaque


class Situations:
    """The memoised symbolic domain: values held as (canonical id, shift)."""

    def __init__(self, schedule: Schedule, problem: Problem, budget: Budget | None = None,
                 memo: bool = True, dependencies: Dependencies | None = None) -> None:
        self.algebra = Symbolic(schedule, problem, budget, record=False,
                                dependencies=dependencies)
        self.canon = Canon()
        self.memo: dict[tuple[object, ...], Entry] | None = {} if memo else None
        self._rowful: list[bool] = []
        self.misses = 0
        self.lookups = 0

    # --- the frames ----------------------------------------------------------------------
    def actual(self, x: V) -> Value | Opaque:
        """A held value in the frame of its rank (what readers of the analysis see)."""
        return x if isinstance(x, Opaque) else self.canon.value(x)

    def _has_rows(self, cid: int) -> bool:
        while len(self._rowful) < len(self.canon):
            v = self.canon.values[len(self._rowful)]
            self._rowful.append(any(True for a in v.form.atoms() for _ in a.rows()))
        return self._rowful[cid]

    def _hold(self, out: Value | Opaque) -> Entry:
        if isinstance(out, Opaque):
            return _Opaque(out.reason, out.lost, out.undefined)
        return self.canon.intern(out)

    def _place(self, entry: Entry, rank: int, op: Op, base: int) -> V:
        if isinstance(entry, _Opaque):
            return Opaque(entry.reason, rank, op, entry.lost, entry.undefined)
        return Held(entry.cid, entry.shift + base) if base else entry

    def _situation(self, rank: int, op: Op, args: tuple[V, ...],
                   compute: Callable[[list[Value]], Value | Opaque]) -> V:
        for a in args:
            if isinstance(a, Opaque):
                return a
        held = [a for a in args if isinstance(a, Held)]
        rowful = [self._has_rows(a.cid) for a in held]
        base = min((a.shift for a, r in zip(held, rowful, strict=True) if r), default=0)
        frame = tuple(Held(a.cid, a.shift - base if r else 0)
                      for a, r in zip(held, rowful, strict=True))
        key = (id(op), *((a.cid, a.shift) for a in frame))
        self.lookups += 1
        entry = self.memo.get(key) if self.memo is not None else None
        if entry is None:
            self.misses += 1
            self.algebra.private = False
            out = compute([self.canon.value(a) for a in frame])
            entry = self._hold(out)
            if self.memo is not None and not self.algebra.private:
                self.memo[key] = entry
        return self._place(entry, rank, op, base)

    # --- OpSemantics -----------------------------------------------------------------------
    def const(self, rank: int, op: Op, value: float) -> V:
        return self._situation(rank, op, (), lambda _: self._value(
            self.algebra.const(rank, op, value)))

    @staticmethod
    def _value(x: object) -> Value | Opaque:
        assert isinstance(x, (Value, Opaque))
        return x

    def cycle(self, rank: int, op: Op) -> V:
        out = self.algebra.cycle(rank, op)
        assert isinstance(out, Opaque)
        return out

    def recv(self, rank: int, op: Op, sent: V | Lost) -> V:
        if isinstance(sent, (Lost, Opaque)):
            return self._lift(rank, op, self.algebra.recv(rank, op, sent))
        if self.canon.values[sent.cid].layout.shape == op.shape:
            return sent
        return self._situation(rank, op, (sent,),
                               lambda v: self.algebra.recv(rank, op, v[0]))

    def _lift(self, rank: int, op: Op, out: Value | Opaque) -> V:
        entry = self._hold(out)
        return self._place(entry, rank, op, 0)

    def load(self, rank: int, op: Op, reload: Reload[V] | None) -> V:
        if reload is None:   # the harness's buffer: its group and rows are this rank's
            return self._lift(rank, op, self.algebra.load(rank, op, None))
        if len(reload.stores) != 1 or reload.uncovered:
            return self._lift(rank, op, self.algebra.load(rank, op, Reload((), True)))
        store, stored = reload.stores[0]
        return self._situation(rank, op, (stored,), lambda v: self.algebra.load(
            rank, op, Reload(((store, v[0]),), False)))

    def full(self, rank: int, op: Op) -> V:
        return self._situation(rank, op, (), lambda _: self.algebra.full(rank, op))

    def cast(self, rank: int, op: Op, x: V) -> V:
        return self._situation(rank, op, (x,), lambda v: self.algebra.cast(rank, op, v[0]))

    def reshape(self, rank: int, op: Op, x: V) -> V:
        return self._situation(rank, op, (x,), lambda v: self.algebra.reshape(rank, op, v[0]))

    def trans(self, rank: int, op: Op, x: V) -> V:
        return self._situation(rank, op, (x,), lambda v: self.algebra.trans(rank, op, v[0]))

    def unary(self, rank: int, op: Op, fn: Unary, x: V) -> V:
        return self._situation(rank, op, (x,),
                               lambda v: self.algebra.unary(rank, op, fn, v[0]))

    def binary(self, rank: int, op: Op, fn: Binary, a: V, b: V) -> V:
        return self._situation(rank, op, (a, b),
                               lambda v: self.algebra.binary(rank, op, fn, v[0], v[1]))

    def reduce(self, rank: int, op: Op, fn: Reduction, x: V) -> V:
        return self._situation(rank, op, (x,),
                               lambda v: self.algebra.reduce(rank, op, fn, v[0]))

    def softmax(self, rank: int, op: Op, x: V) -> V:
        return self._situation(rank, op, (x,), lambda v: self.algebra.softmax(rank, op, v[0]))

    def dot(self, rank: int, op: Op, a: V, b: V) -> V:
        return self._situation(rank, op, (a, b),
                               lambda v: self.algebra.dot(rank, op, v[0], v[1]))


class Forms:
    """The symbolic evaluation as its readers see it: every value in its rank's frame
    (the judge, the interval and rounding domains, the safety checks)."""

    def __init__(self, evaluation: Evaluation[V], domain: Situations) -> None:
        self.evaluation = evaluation
        self.domain = domain
        self.schedule = evaluation.schedule
        self.table = evaluation.table

    def get(self, key: Key) -> Value | Opaque | None:
        x = self.evaluation.get(key)
        return None if x is None else self.domain.actual(x)

    def value(self, rank: int, vid: int) -> Value | Opaque:
        return self.domain.actual(self.evaluation.value(rank, vid))

    def held(self, key: Key) -> V | None:
        return self.evaluation.get(key)

    def canonical(self, key: Key) -> Value | Opaque | None:
        """The value in its canonical frame: enough for what does not depend on absolute
        key rows (bounds, kinds, max-domination), and shared by every rank."""
        x = self.evaluation.get(key)
        return x if x is None or isinstance(x, Opaque) else self.domain.canon.values[x.cid]

    def canonical_value(self, rank: int, vid: int) -> Value | Opaque:
        x = self.evaluation.value(rank, vid)
        return x if isinstance(x, Opaque) else self.domain.canon.values[x.cid]

    def recv_source(self, rank: int, op: Op) -> Key | Lost:
        return self.evaluation.recv_source(rank, op)
