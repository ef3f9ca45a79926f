"""Provenance of partials: how many times each KV shard is counted in every value.

A small type system over the IR (spec/properties.md, "Exactly-once merging"): loads from
sharded buffers are DATA of their rank's shard; `max`/`maximum` give MAXLIKE values that
union shard sets; `exp(a - b)` of MAXLIKE values is a WEIGHT (rescaling adds no count);
`exp` or `softmax` of scores starts an ADDITIVE partial (count 1 per shard), and `+` of
additive values adds counts. `o / ℓ` is a RATIO whose numerator and denominator must each
count every shard of the rank's communication group exactly once. Values flow through
messages by the k-th send <-> k-th recv matching.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from meshproof.model.channels import ChannelTable, OpRef, PortStatus, communication_groups
from meshproof.model.schedule import Const, Op, OpKind, Schedule, ValueRef
from meshproof.verify.memory import rank_memory


class Cls(Enum):
    CONST = "const"          # no shard involved (Q, scalars, fills)
    DATA = "data"            # raw shard data and scores computed from it
    SCORE = "score"          # scores minus a max: exp() of it is a partial
    MAXLIKE = "maxlike"      # running maxima
    LOGRATIO = "logratio"    # difference of maxima: exp() of it is a weight
    WEIGHT = "weight"        # rescaling factors
    ADDITIVE = "additive"    # ℓ, o and anything summed from partials
    RATIO = "ratio"          # additive / additive: the normalised output
    LOST = "lost"            # depends on a message that never arrives
    OPAQUE = "opaque"        # an operation the counting rules do not cover


# Classes that scale a partial: they must stay positive for counts to mean multiplicities.
_SCALINGS = frozenset({Cls.ADDITIVE, Cls.WEIGHT, Cls.RATIO})
_CLAMPS = ({Cls.DATA, Cls.CONST}, {Cls.SCORE, Cls.CONST})


@dataclass(frozen=True, slots=True)
class Prov:
    cls: Cls
    counts: np.ndarray = field(compare=False)         # per shard: count (or membership)
    den: np.ndarray | None = field(default=None, compare=False)
    why: str = ""                                       # for LOST / OPAQUE: where and why
    # dependencies of ADDITIVE/RATIO values, for the Z3 cross-check: (rank, value ids)
    deps: tuple[tuple[int, int], ...] = ()
    rule: str = ""


@dataclass(frozen=True, slots=True)
class StoreFact:
    rank: int
    op: Op
    value: Prov
    expected: np.ndarray     # 1 for every shard of the rank's group


@dataclass(frozen=True, slots=True)
class Mixing:
    rank: int
    op: Op
    message: str


@dataclass(frozen=True, slots=True)
class ProvenanceResult:
    shards: tuple[int, ...]              # rank index owning each shard column
    values: dict[tuple[int, int], Prov]  # (rank, value id) -> provenance
    stores: tuple[StoreFact, ...]
    mixing: tuple[Mixing, ...]
    cyclic_ranks: tuple[int, ...]
    group: tuple[int, ...]               # per rank: its communication group's id


def groups(schedule: Schedule, table: ChannelTable) -> list[int]:
    """A group id per rank: its communication group (ranks without ops stand alone)."""
    ids = list(range(len(schedule.programs)))
    for ranks in communication_groups(schedule, table):
        for r in ranks:
            ids[r] = ranks[0]
    return ids


class _Interp:
    def __init__(self, schedule: Schedule, table: ChannelTable) -> None:
        self.s = schedule
        self.table = table
        sharded = set(schedule.launch.sharded)
        self.shards = tuple(r for r, p in enumerate(schedule.programs)
                            if any(op.kind is OpKind.LOAD and op.ptr in sharded for op in p.ops))
        self.col = {r: i for i, r in enumerate(self.shards)}
        self.n = len(self.shards)
        self.sharded = sharded
        self.zero = np.zeros(self.n, dtype=np.int64)
        self.values: dict[tuple[int, int], Prov] = {}
        self.mixing: list[Mixing] = []

    def p(self, cls: Cls, counts: np.ndarray | None = None, **kw: object) -> Prov:
        return Prov(cls, self.zero if counts is None else counts, **kw)  # type: ignore[arg-type]

    def arg(self, rank: int, a: ValueRef | Const) -> Prov:
        if isinstance(a, Const):
            return self.p(Cls.CONST)
        return self.values[(rank, a.id)]

    def opaque(self, op: Op, why: str) -> Prov:
        return self.p(Cls.OPAQUE, why=f"{op.source}: {op.kind.value} {why}")

    def transfer(self, rank: int, op: Op) -> Prov | None:
        k = op.kind
        args = [self.arg(rank, a) for a in op.args]
        for a in args:
            if a.cls in (Cls.LOST, Cls.OPAQUE):
                return a
        deps = tuple((rank, a.id) for a in op.args if isinstance(a, ValueRef))
        if k is OpKind.LOAD:
            return self.load(rank, op)
        if k is OpKind.FULL:
            return self.p(Cls.CONST)
        if k is OpKind.NEG and args[0].cls in _SCALINGS:
            return self.opaque(op, f"({args[0].cls.value} value): a negated partial or weight "
                               "cancels instead of merging")
        if k in (OpKind.RESHAPE, OpKind.TRANS, OpKind.CAST, OpKind.NEG, OpKind.STORE,
                 OpKind.SEND):
            a = args[0]
            return Prov(a.cls, a.counts, a.den, a.why, deps, "copy")
        if k is OpKind.RECV:
            return None  # handled by the caller (needs the matching send)
        if k in (OpKind.MAXIMUM, OpKind.MINIMUM) and {a.cls for a in args} in _CLAMPS:
            # an elementwise clamp of scores (a mask floor) keeps them scores, not maxima
            a = args[0] if args[0].cls is not Cls.CONST else args[1]
            return Prov(a.cls, a.counts, None, "", (), "")
        if k in (OpKind.MAX, OpKind.MAXIMUM, OpKind.MINIMUM):
            if all(a.cls in (Cls.CONST, Cls.DATA, Cls.SCORE, Cls.MAXLIKE) for a in args):
                if all(a.cls is Cls.CONST for a in args):
                    return self.p(Cls.CONST)
                return self.p(Cls.MAXLIKE, np.maximum.reduce([a.counts > 0 for a in args])
                              .astype(np.int64))
            return self.opaque(op, f"of {'/'.join(a.cls.value for a in args)} values")
        if k is OpKind.SUM:
            a = args[0]
            if a.cls in (Cls.ADDITIVE, Cls.CONST, Cls.WEIGHT):
                return Prov(a.cls, a.counts, None, "", deps, "copy")
            return self.opaque(op, f"over a {a.cls.value} value")
        if k in (OpKind.EXP, OpKind.SOFTMAX):
            a = args[0]
            if a.cls is Cls.CONST:
                return self.p(Cls.CONST)
            if a.cls in (Cls.SCORE, Cls.DATA):
                return Prov(Cls.ADDITIVE, (a.counts > 0).astype(np.int64), None, "", (),
                            "source")
            if a.cls is Cls.LOGRATIO and k is OpKind.EXP:
                return self.p(Cls.WEIGHT)
            return self.opaque(op, f"of a {a.cls.value} value")
        if k is OpKind.LOG:
            return self.p(Cls.CONST) if args[0].cls is Cls.CONST else \
                self.opaque(op, f"of a {args[0].cls.value} value (log-sum-exp merges are not "
                            "modelled)")
        if k is OpKind.DOT:
            return self.dot(rank, op, args[0], args[1], deps)
        return self.arith(rank, op, args[0], args[1], deps)

    def dot(self, rank: int, op: Op, a: Prov, b: Prov, deps: tuple[tuple[int, int], ...]) -> Prov:
        classes = {a.cls, b.cls}
        if classes <= {Cls.CONST}:
            return self.p(Cls.CONST)
        if classes <= {Cls.CONST, Cls.DATA}:
            return self.p(Cls.DATA, np.maximum(a.counts, b.counts))
        if Cls.ADDITIVE in classes and classes <= {Cls.ADDITIVE, Cls.DATA, Cls.CONST} and \
                (a.cls, b.cls) != (Cls.ADDITIVE, Cls.ADDITIVE):  # a product of partials is no merge
            add, other = (a, b) if a.cls is Cls.ADDITIVE else (b, a)
            if other.cls is Cls.DATA and not np.array_equal(other.counts > 0, add.counts > 0):
                self.mixing.append(Mixing(rank, op, f"{op.source}: dot applies weights of "
                                          f"shard(s) {self._names(add.counts)} to values of "
                                          f"shard(s) {self._names(other.counts)}"))
            return Prov(Cls.ADDITIVE, add.counts, None, "", (deps[0 if add is a else 1],),
                        "copy")
        return self.opaque(op, f"of {a.cls.value} and {b.cls.value} values")

    def arith(self, rank: int, op: Op, a: Prov, b: Prov,
              deps: tuple[tuple[int, int], ...]) -> Prov:
        k, ca, cb = op.kind, a.cls, b.cls
        C = Cls
        if ca is C.CONST and cb is C.CONST:
            return self.p(C.CONST)
        # Counts are multiplicities of positively scaled partials: a factor that may be zero
        # or negative could drop or cancel a partial while its count stays 1. A WEIGHT that
        # loses its known sign is just a shard-free constant (e.g. a zero accumulator × α).
        if {ca, cb} & _SCALINGS and C.CONST in {ca, cb}:
            scaled = a if cb is C.CONST else b
            factor = op.args[1] if cb is C.CONST else op.args[0]
            unsigned = k in (OpKind.ADD, OpKind.SUB) or not self.positive(rank, factor)
            if scaled.cls is C.WEIGHT and unsigned:
                return self.p(C.CONST)
            if k in (OpKind.MUL, OpKind.DIV) and unsigned:
                return self.opaque(op, f"({scaled.cls.value} value) by a factor that is not "
                                   "a known positive constant: it could drop or cancel a "
                                   "partial")
        if k is OpKind.SUB and ca is C.CONST and cb is C.MAXLIKE:
            return self.p(C.LOGRATIO)  # e.g. exp(m0 - m_new) with m0 = -inf: a weight
        if k in (OpKind.ADD, OpKind.SUB, OpKind.MUL, OpKind.DIV) and cb is C.CONST and \
                ca is not C.RATIO:
            return Prov(ca, a.counts, a.den, "", deps[:1], "copy")
        if k in (OpKind.ADD, OpKind.MUL) and ca is C.CONST and cb is not C.RATIO:
            return Prov(cb, b.counts, b.den, "", deps[-1:], "copy")
        if k is OpKind.ADD and ca is C.ADDITIVE and cb is C.ADDITIVE:
            return Prov(C.ADDITIVE, a.counts + b.counts, None, "", deps, "add")
        if k in (OpKind.ADD, OpKind.SUB) and ca is C.DATA and cb is C.DATA:
            return self.p(C.DATA, np.maximum(a.counts, b.counts))
        if k is OpKind.SUB and ca in (C.DATA, C.SCORE) and cb is C.MAXLIKE:
            return self.p(C.SCORE, a.counts)
        if k is OpKind.SUB and ca is C.MAXLIKE and cb is C.MAXLIKE:
            return self.p(C.LOGRATIO)
        if k is OpKind.MUL and {ca, cb} == {C.ADDITIVE, C.WEIGHT}:
            add_first = ca is C.ADDITIVE
            return Prov(C.ADDITIVE, (a if add_first else b).counts, None, "",
                        deps[:1] if add_first else deps[-1:], "copy")
        if k is OpKind.MUL and ca is C.WEIGHT and cb is C.WEIGHT:
            return self.p(C.WEIGHT)
        if k is OpKind.DIV and ca is C.ADDITIVE and cb is C.ADDITIVE:
            return Prov(C.RATIO, a.counts, b.counts, "", deps, "ratio")
        if k is OpKind.DIV and ca is C.WEIGHT and cb is C.WEIGHT:
            return self.p(C.WEIGHT)
        return self.opaque(op, f"of {ca.value} and {cb.value} values")

    def positive(self, rank: int, arg: ValueRef | Const) -> bool:
        """A factor known to be a positive finite constant: a scalar, or a `tl.full` of one
        (through reshapes, transposes and casts)."""
        if isinstance(arg, Const):
            return math.isfinite(arg.value) and arg.value > 0
        op = self.defining[(rank, arg.id)]
        while op.kind in (OpKind.RESHAPE, OpKind.TRANS, OpKind.CAST):
            src = op.args[0]
            assert isinstance(src, ValueRef)
            op = self.defining[(rank, src.id)]
        return op.kind is OpKind.FULL and op.fill is not None and math.isfinite(op.fill) and \
            op.fill > 0

    def load(self, rank: int, op: Op) -> Prov:
        """A load reads the buffer's input, or what this rank stored there earlier: a
        partial spilled and reloaded keeps its counts (else a round trip would launder it
        into a constant and a double merge would go unseen)."""
        source = self.memory[rank].loads.get(op.index)
        if source is not None:
            keys = [(rank, w.value_args[0]) for w in source.writers]
            if len(keys) == 1 and not source.uncovered:
                kept = self.values[keys[0]]
                return Prov(kept.cls, kept.counts, kept.den, kept.why, (keys[0],), "copy")
            if (source.uncovered and op.ptr in self.sharded) or \
                    any(self.values[key].cls is not Cls.CONST for key in keys):
                return self.opaque(op, f"from {op.ptr} at offset {op.offset} mixes a stored "
                                   "value with other elements (reload exactly what one store "
                                   "wrote)")
            return self.p(Cls.CONST)
        if op.ptr in self.sharded and rank in self.col:
            v = self.zero.copy()
            v[self.col[rank]] = 1
            return self.p(Cls.DATA, v)
        return self.p(Cls.CONST)

    def _names(self, counts: np.ndarray) -> str:
        eps = [self.s.programs[self.shards[i]].endpoint.label for i in np.nonzero(counts)[0]]
        return ",".join(eps[:4]) + ("..." if len(eps) > 4 else "")

    def _recv_source(self, rank: int, op: Op) -> tuple[int, int] | Prov:
        """The sent value a recv gets, as a value key, or a LOST value if none arrives."""
        ref = OpRef(rank, op.index)
        use = self.table.port_use[ref]
        d = op.dir.value if op.dir else ""
        if use.status is not PortStatus.OK:
            return self.p(Cls.LOST, why=f"{op.source}: recv {d} "
                          f"({use.status.value.replace('_', ' ')})")
        ch_i, k = self.table.position[ref]
        ch = self.table.channels[ch_i]
        if k >= len(ch.sends):
            return self.p(Cls.LOST, why=f"{op.source}: recv {d} has no matching send")
        s_ref = ch.sends[k]
        src = self.s.programs[s_ref.rank].ops[s_ref.op].args[0]
        assert isinstance(src, ValueRef)
        return (s_ref.rank, src.id)

    def _deps(self, key: tuple[int, int]) -> list[tuple[int, int]]:
        rank, _ = key
        op = self.defining[key]
        if op.kind is OpKind.RECV:
            src = self._recv_source(rank, op)
            return [src] if isinstance(src, tuple) else []
        if op.kind is OpKind.LOAD:
            source = self.memory[rank].loads.get(op.index)
            return [(rank, w.value_args[0]) for w in source.writers] if source else []
        return [(rank, a.id) for a in op.args if isinstance(a, ValueRef)]

    def _evaluate(self, key: tuple[int, int]) -> None:
        """Evaluate a value and everything it depends on, following data, not program order
        (a schedule that deadlocks can still have a well-defined dataflow)."""
        stack = [key]
        on_stack: set[tuple[int, int]] = set()
        while stack:
            k = stack[-1]
            if k in self.values:
                stack.pop()
                continue
            missing = [d for d in self._deps(k) if d not in self.values]
            if missing and k not in on_stack:
                on_stack.add(k)
                for d in missing:
                    if d in on_stack:
                        self.values[k] = self.p(Cls.OPAQUE, why=f"{self.defining[k].source}: "
                                                "value depends on itself through messages")
                        self.cyclic.add(k[0])
                        break
                else:
                    stack.extend(missing)
                continue
            stack.pop()
            on_stack.discard(k)
            if k in self.values:
                continue
            if missing:
                self.values[k] = self.p(Cls.OPAQUE, why=f"{self.defining[k].source}: value "
                                        "depends on itself through messages")
                self.cyclic.add(k[0])
                continue
            op = self.defining[k]
            if op.kind is OpKind.RECV:
                src = self._recv_source(k[0], op)
                if isinstance(src, Prov):
                    self.values[k] = src
                else:
                    sent = self.values[src]
                    self.values[k] = Prov(sent.cls, sent.counts, sent.den, sent.why, (src,),
                                          "copy")
            else:
                value = self.transfer(k[0], op)
                assert value is not None
                self.values[k] = value

    def run(self) -> ProvenanceResult:
        progs = self.s.programs
        self.defining = {(r, op.out): op for r, p in enumerate(progs) for op in p.ops
                         if op.out is not None}
        self.cyclic: set[int] = set()
        self.memory = [rank_memory(p) for p in progs]
        group = groups(self.s, self.table)
        expected_by_group: dict[int, np.ndarray] = {}
        for r, g in enumerate(group):
            if r in self.col:
                vec = expected_by_group.setdefault(g, self.zero.copy())
                vec[self.col[r]] = 1
        stores: list[StoreFact] = []
        for r, prog in enumerate(progs):
            for op in prog.ops:
                if op.out is not None:
                    self._evaluate((r, op.out))
                # a store whose elements later stores all rewrite never reaches the output
                if op.kind is OpKind.STORE and op.index in self.memory[r].live_stores:
                    value = self.transfer(r, op)
                    assert value is not None
                    stores.append(StoreFact(r, op, value, expected_by_group.get(
                        group[r], self.zero)))
        return ProvenanceResult(self.shards, self.values, tuple(stores), tuple(self.mixing),
                                tuple(sorted(self.cyclic)), tuple(group))


def analyse(schedule: Schedule, table: ChannelTable) -> ProvenanceResult:
    return _Interp(schedule, table).run()

