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

This module holds the op rules and `Forms`; a value's facts and how a rank holds it are
situation_facts.py, the memo's machinery (interning, the rules' view, one situation's
computing) situation_memo.py.
"""

from __future__ import annotations

from meshproof.model.evaluate import (
    Binary,
    Compare,
    Evaluation,
    Key,
    Lost,
    Reduction,
    Reload,
    Unary,
)
from meshproof.model.schedule import Op
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.ranges import UNBOUNDED, Interval
from meshproof.verify.semantics.relations import NONE
from meshproof.verify.semantics.rounding import Err
from meshproof.verify.semantics.rules import BinaryRule, CompareRule, Plain, one_operand
from meshproof.verify.semantics.situation_facts import (
    _FID,
    _SHIFT,
    OPAQUE_CID,
    Facts,
    Gone,
    Held,
    _joint,
    held,
)
from meshproof.verify.semantics.situation_memo import SituationMemo
from meshproof.verify.semantics.symbolic_core import Opaque

_RELATED = (Binary.MUL, Binary.ADD, Binary.DIV)


class Situations(SituationMemo):
    """The fused, memoised domain: symbolic forms, intervals and rounding errors."""

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

    def dot(self, rank: int, op: Op, a: Held, b: Held) -> Held:
        return self.binary(rank, op, None, a, b)

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
