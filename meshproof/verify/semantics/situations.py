"""The situation memo: every domain of the analysis computed once per situation.

A *situation* is an op (its attributes: the one op object every rank that traces it alike
shares) with its operands' *facts* and their key-row shifts relative to each other. The
facts of a value are its canonical form (canon.py: digits renamed by position, key rows
translated to start at 0), its interval under |inputs| <= B (ranges.py) and its rounding
error (rounding.py); all three depend on nothing else -- shifting key rows and renaming
digits commute with every rule (spec/semantics.md §9) -- so they are computed on the first
rank that meets the situation, interned, and every other rank looks them up: one tuple,
one dict lookup, one add. What reads rank context stays out of the memo: harness loads are
computed per rank (their group and key rows), a scrambled contraction (a fresh symbol per
rank) is never shared, and an opaque value keeps the rank where it became opaque.

`Situations` is one OpSemantics of model/evaluate.py over `Held` values. Departure events
are not recorded here: they are recomputed, unmemoised, for the cones of failing outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NewType

from meshproof.model.evaluate import (
    Binary,
    Compare,
    Dependencies,
    Evaluation,
    Key,
    Lost,
    Reduction,
    Reload,
    Unary,
)
from meshproof.model.problem import Problem
from meshproof.model.schedule import DType, Op, OpKind, Schedule
from meshproof.verify.semantics.atoms import frame, frame_parts
from meshproof.verify.semantics.budget import Budget
from meshproof.verify.semantics.canon import GROUPS, QROWS, ROWS, Canon, frame_mask
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.ranges import UNBOUNDED, Interval, Ranges
from meshproof.verify.semantics.reasons import UndefinedKind
from meshproof.verify.semantics.relations import NONE, Related, ValueNumbers
from meshproof.verify.semantics.rounding import Err, ErrorBounds
from meshproof.verify.semantics.rules import (
    BinaryRule,
    CompareRule,
    Plain,
    Rule,
    apply,
    one_operand,
)
from meshproof.verify.semantics.symbolic import Symbolic
from meshproof.verify.semantics.symbolic_core import Opaque

OPAQUE_CID = -1


@dataclass(frozen=True, slots=True)
class Gone:
    """An opaque value, as its facts record it (the rank and op where it became opaque)."""

    reason: str
    rank: int
    op: Op
    lost: bool
    undefined: UndefinedKind | None


@dataclass(frozen=True, slots=True)
class Facts:
    """What the analysis knows of one value, in its canonical frame."""

    cid: int                        # canonical form (OPAQUE_CID: none)
    interval: Interval
    err: Err | None
    why: str | None                 # why there is no error bound
    gone: Gone | None = None


Held = NewType("Held", int)
"""A value as a rank holds it, packed in one int (the per-op cost is a few int operations
and one dict lookup): its facts id in the low 32 bits, the shift of its key rows above."""

_FID = (1 << 32) - 1
_SHIFT = 32


def held(fid: int, shift: int) -> Held:
    return Held(fid + (shift << _SHIFT))


def fid_of(x: Held) -> int:
    return x & _FID


def shift_of(x: Held) -> int:
    return x >> _SHIFT


def _joint(sa: int, ha: int, sb: int, hb: int) -> tuple[int, int, int]:
    """The situation frame of two operands moved by different parts (a query against a
    key tile): per part, the smaller frame of the operands it moves; each operand's
    frame relative to it, with the parts that do not move it zeroed (they carry no
    information, and keying on them would split one situation by absolute rows)."""
    pa, pb = frame_parts(sa), frame_parts(sb)
    base: list[int] = []
    rel_a: list[int] = []
    rel_b: list[int] = []
    for bit, x, y in zip((ROWS, QROWS, GROUPS), pa, pb, strict=True):
        in_a, in_b = bool(ha & bit), bool(hb & bit)
        b0 = (x if x < y else y) if in_a and in_b else x if in_a else y if in_b else 0
        base.append(b0)
        rel_a.append(x - b0 if in_a else 0)
        rel_b.append(y - b0 if in_b else 0)
    return frame(*base), frame(*rel_a), frame(*rel_b)


_RELATED = (Binary.MUL, Binary.ADD, Binary.DIV)


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

    def __init__(self, domain: Situations) -> None:
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


class Situations:
    """The fused, memoised domain: symbolic forms, intervals and rounding errors."""

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

    def unary(self, rank: int, op: Op, fn: Unary | Reduction, x: Held) -> Held:
        """_one for the most frequent ops, without the extra call (reduce is this too:
        the type of `fn` tells the rules apart)."""
        fid = x & _FID
        rel = self.numbers.related(rank, op) if fn is Unary.EXP or fn is Unary.EXP2 else NONE
        key: tuple[object, ...] = (id(op), fid) if rel is NONE else (id(op), fid, rel)
        hit = self.memo.get(key)
        base = (x >> _SHIFT) if self._has[fid] else 0
        if hit is None:
            self.view.relation = rel
            hit = self._miss(key, rank, op, (x,), base, one_operand(fn))
            self.view.relation = NONE
        out = Held(hit + (base << _SHIFT))
        self._number(rank, op, (x,), out)
        return out

    reduce = unary

    def binary(self, rank: int, op: Op, fn: Binary | None, a: Held, b: Held) -> Held:
        """The situation of a two-operand op: the op, the operands' facts and their
        frames relative to the situation's (the smaller of the two, part by part, over
        the parts that move each). `fn` None: a dot."""
        fa, fb = a & _FID, b & _FID
        has = self._has
        ha, hb = has[fa], has[fb]
        if ha == hb:
            # the common case: both moved by the same parts (or neither), so the smaller
            # frame is the situation's (translation-equivariant: both move alike)
            if ha:
                sa, sb = a >> _SHIFT, b >> _SHIFT
                base = sa if sa < sb else sb
                key: tuple[int, ...] = (id(op), fa, sa - base, fb, sb - base)
            else:
                base, key = 0, (id(op), fa, 0, fb, 0)
        elif not hb:
            base, key = a >> _SHIFT, (id(op), fa, 0, fb, 0)
        elif not ha:
            base, key = b >> _SHIFT, (id(op), fa, 0, fb, 0)
        else:
            base, ra, rb = _joint(a >> _SHIFT, ha, b >> _SHIFT, hb)
            key = (id(op), fa, ra, fb, rb)
        rel = self.numbers.related(rank, op) if fn in _RELATED else NONE
        memo_key: tuple[object, ...] = key if rel is NONE else (*key, rel)
        hit = self.memo.get(memo_key)
        if hit is None:
            self.view.relation = rel
            hit = self._miss(memo_key, rank, op, (a, b), base,
                             BinaryRule(fn) if fn else Plain.DOT)
            self.view.relation = NONE
        out = Held(hit + (base << _SHIFT))
        self._number(rank, op, (a, b), out)
        return out

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

    def dot(self, rank: int, op: Op, a: Held, b: Held) -> Held:
        return self.binary(rank, op, None, a, b)

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

    # --- OpSemantics -----------------------------------------------------------------------
    def const(self, rank: int, op: Op, value: float) -> Held:
        key = (id(op), "const", value)
        hit = self.memo.get(key)
        if hit is None:
            out = self.algebra.const(rank, op, value)
            assert isinstance(out, (Value, Opaque))
            fid, shift = self._settle(rank, op, out, lambda: self.ranges.const(rank, op, value),
                                      lambda: self.rounding.const(rank, op, value))
            hit = fid + (shift << _SHIFT)
            self.memo[key] = hit
        return Held(hit)

    def cycle(self, rank: int, op: Op) -> Held:
        out = self.algebra.cycle(rank, op)
        assert isinstance(out, Opaque)
        self.fresh.append((rank, op))
        return held(self._fid(Facts(OPAQUE_CID, UNBOUNDED, None, f"{op.source}: "
                                    f"{op.kind.value} {out.reason}",
                                    Gone(out.reason, rank, op, False, None))), 0)

    def recv(self, rank: int, op: Op, sent: Held | Lost) -> Held:
        out = self._recv(rank, op, sent)
        self.numbers.note(rank, op, recv_source=self.dependencies.recv_source(rank, op))
        return out

    def _recv(self, rank: int, op: Op, sent: Held | Lost) -> Held:
        if isinstance(sent, Lost):
            out = self.algebra.recv(rank, op, sent)
            assert isinstance(out, Opaque)
            self.fresh.append((rank, op))
            return held(self._fid(Facts(OPAQUE_CID, UNBOUNDED, None, f"{op.source}: "
                                        f"{op.kind.value} of a value without a bound",
                                        Gone(out.reason, rank, op, True, None))), 0)
        f = self.facts[sent & _FID]
        if f.gone is not None or (f.err is not None and f.err.dtype is op.dtype and
                                  self.canon.values[f.cid].layout.shape == op.shape):
            # the same value in the same dtype: the same facts (and the same checks: the
            # op that computed it has this dtype, the dtype of its rounding error)
            return sent
        return self._one(rank, op, sent, Plain.RECV, number=False)

    def load(self, rank: int, op: Op, reload: Reload[Held] | None) -> Held:
        out = self._load(rank, op, reload)
        self._number(rank, op, (), out)
        return out

    def _load(self, rank: int, op: Op, reload: Reload[Held] | None) -> Held:
        if reload is None:   # the harness's buffer: its group and rows are this rank's
            out = self.algebra.load(rank, op, None)
            fid, shift = self._settle(rank, op, out, lambda: self.ranges.load(rank, op, None),
                                      lambda: self.rounding.load(rank, op, None))
            return held(fid, shift)
        if len(reload.stores) != 1 or reload.uncovered:
            out = self.algebra.load(rank, op, Reload((), True))
            fid, shift = self._settle(rank, op, out, lambda: UNBOUNDED, lambda: None)
            return held(fid, shift)
        store, stored = reload.stores[0]
        fid = stored & _FID
        key = (id(op), fid)
        hit = self.memo.get(key)
        base = (stored >> _SHIFT) if self._has[fid] else 0
        if hit is None:
            self.misses += 1
            hit = self._compute(
                rank, op, (stored,), base,
                lambda v: self.algebra.load(rank, op, Reload(((store, v[0]),), False)),
                lambda v: self.ranges.load(rank, op, Reload(((store, v[0]),), False)),
                lambda v: self.rounding.load(rank, op, Reload(((store, v[0]),), False)))
            if not self.algebra.private:
                self.memo[key] = hit
        return Held(hit + (base << _SHIFT))

    def full(self, rank: int, op: Op) -> Held:
        key = (id(op),)
        hit = self.memo.get(key)
        if hit is None:
            hit = self._miss(key, rank, op, (), 0, Plain.FULL)
        self._number(rank, op, (), Held(hit))
        return Held(hit)

    def cast(self, rank: int, op: Op, x: Held) -> Held:
        return self._one(rank, op, x, Plain.CAST)

    def reshape(self, rank: int, op: Op, x: Held) -> Held:
        return self._one(rank, op, x, Plain.RESHAPE)

    def trans(self, rank: int, op: Op, x: Held) -> Held:
        return self._one(rank, op, x, Plain.TRANS)

    # masks (spec/semantics.md §8): a position depends on no frame; a comparison of
    # positions neither (its guard is on digits); a tl.where moves with its operands
    def arange(self, rank: int, op: Op) -> Held:
        key = (id(op),)
        hit = self.memo.get(key)
        if hit is None:
            hit = self._miss(key, rank, op, (), 0, Plain.ARANGE)
        self._number(rank, op, (), Held(hit))
        return Held(hit)

    def compare(self, rank: int, op: Op, fn: Compare, a: Held, b: Held) -> Held:
        return self._many(rank, op, (a, b), CompareRule(fn))

    def where(self, rank: int, op: Op, cond: Held, a: Held, b: Held) -> Held:
        return self._many(rank, op, (cond, a, b), Plain.WHERE)

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


class Forms:
    """The analysis as its readers see it (the judge, the safety checks, the rounding
    bound): per value its form, in its rank's frame or canonical, its interval and its
    rounding error."""

    def __init__(self, evaluation: Evaluation[Held], domain: Situations) -> None:
        self.evaluation = evaluation
        self.domain = domain
        self.schedule = evaluation.schedule
        self.table = evaluation.table

    def _facts(self, key: Key) -> Facts | None:
        x = self.evaluation.get(key)
        return None if x is None else self.domain.facts[x & _FID]

    def get(self, key: Key) -> Value | Opaque | None:
        x = self.evaluation.get(key)
        return None if x is None else self.domain.actual(x)

    def value(self, rank: int, vid: int) -> Value | Opaque:
        return self.domain.actual(self.evaluation.value(rank, vid))

    def canonical(self, key: Key) -> Value | Opaque | None:
        """The value in its canonical frame: enough for what does not depend on absolute
        key rows (bounds, kinds, max-domination), and shared by every rank."""
        f = self._facts(key)
        return None if f is None else self.domain.canonical_of(f)

    def canonical_value(self, rank: int, vid: int) -> Value | Opaque:
        self.evaluation.value(rank, vid)
        f = self._facts((rank, vid))
        assert f is not None
        return self.domain.canonical_of(f)

    def fid(self, key: Key) -> int | None:
        """The id of a value's facts: equal ids, equal facts (None: not computed)."""
        x = self.evaluation.get(key)
        return None if x is None else x & _FID

    @property
    def fresh(self) -> list[tuple[int, Op]]:
        """One (rank, op) per situation the analysis computed."""
        return self.domain.fresh

    def cid_of(self, key: Key) -> int | None:
        f = self._facts(key)
        return None if f is None or f.cid == OPAQUE_CID else f.cid

    def by_cid(self, cid: int) -> Value:
        return self.domain.canon.values[cid]

    def interval(self, key: Key) -> Interval:
        f = self._facts(key)
        return UNBOUNDED if f is None else f.interval

    def err(self, key: Key) -> Err | None:
        f = self._facts(key)
        return None if f is None else f.err

    def why(self, key: Key) -> str | None:
        f = self._facts(key)
        return None if f is None else f.why

    def recv_source(self, rank: int, op: Op) -> Key | Lost:
        return self.evaluation.recv_source(rank, op)
