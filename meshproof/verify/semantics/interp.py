"""Symbolic evaluation of the schedule IR into exact element forms.

Every value of every rank gets a `Value` (layout + exact form) or an `Opaque` result that
says, at the op's line, why its form is outside the algebra (transfer.py has the rules).
Values are evaluated by following data dependencies (a recv reads the value of its
matching send, a load reads the harness input or the store it reads back), not program
order, so the dataflow of a schedule that deadlocks is still judged.

Cost. A value is kept as a canonical value and an offset (canon.py): its form up to a
shift of key rows, with canonical digit names. An op's result is a function of the op and
of its operands' canonical values and relative offsets, so the interpreter computes each
such situation once and looks it up afterwards (`_memo`): the ranks of an SPMD launch
repeat the same situations with shifted key rows, and a 64x64 mesh evaluates about one op
in sixty. Values live in per-rank lists (a few words each), events as per-op templates.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterator, Mapping

import numpy as np

from meshproof.model.channels import NO_LINK, OUTSIDE, ChannelTable, OpRef
from meshproof.model.problem import Problem
from meshproof.model.schedule import Const, Op, OpKind, Schedule, ValueRef
from meshproof.verify.memory import RankMemory
from meshproof.verify.semantics.algebra import NotModelled
from meshproof.verify.semantics.canon import CanonTable, CanonValue
from meshproof.verify.semantics.events import Departure, Event, Template
from meshproof.verify.semantics.index import DigitSource, Subst
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.loads import Loads
from meshproof.verify.semantics.store import (
    DefiningView,
    Hit,
    Key,
    ValuesView,
    defining_ops,
    memo_key,
)
from meshproof.verify.semantics.transfer import LN2, Opaque, Result, output_coords

FRESH_DIGITS = 1 << 24  # fresh digits start above every canonical digit id
_CYCLE = "depends on itself through messages"
_ABSOLUTE = (OpKind.DIV,)  # ops whose events name denominators: evaluated unshifted


class Interpreter(Loads):
    def __init__(self, schedule: Schedule, table: ChannelTable, problem: Problem, *,
                 reuse: bool = True) -> None:
        super().__init__(schedule, problem, DigitSource(FRESH_DIGITS))
        self.table = table
        self.reuse = reuse   # False: compute every op (the tests compare both ways)
        self.canon = CanonTable()
        # per rank, indexed by value id (the tracer numbers values densely from 0)
        self._defs: list[list[Op | None]] = [defining_ops(p.ops) for p in schedule.programs]
        self._cv: list[list[CanonValue | Opaque | None]] = [[None] * len(d) for d in self._defs]
        self._dl: list[array[int]] = [array("q", bytes(8 * len(d))) for d in self._defs]
        self._ev: list[list[tuple[Template, ...] | None]] = [[None] * len(d)
                                                             for d in self._defs]
        self._sources: dict[int, dict[int, Key]] = {}
        # the order values were evaluated in (every value after what it depends on)
        self._order_rank: array[int] = array("i")
        self._order_value: array[int] = array("i")
        self.memory: dict[int, RankMemory] = {}
        self._memo: dict[tuple[object, ...], Hit] = {}
        self._sigs: dict[int, tuple[Op, int]] = {}
        self._plans: dict[int, tuple[Op, int, tuple[int, ...],
                                     dict[tuple[bool, ...], int]]] = {}
        self._sig_ids: dict[tuple[object, ...], int] = {}
        self._buffers: dict[tuple[object, ...], Value | None] = {}
        self._values: dict[Key, Result] = {}
        self._complete = False
        self.evaluated = 0   # transfers computed (the rest were looked up)

    # --- public face ---------------------------------------------------------------------
    def result(self, rank: int, vid: int) -> Result:
        """The value with its absolute form (materialised once per value asked for)."""
        key = (rank, vid)
        hit = self._values.get(key)
        if hit is None:
            cv, delta = self.canonical(rank, vid)
            hit = cv if isinstance(cv, Opaque) else cv.at(delta)
            self._values[key] = hit
        return hit

    def canonical(self, rank: int, vid: int) -> tuple[CanonValue | Opaque, int]:
        """The value as a canonical value and its offset (Opaque, 0 if it has no form)."""
        values = self._cv[rank]
        got = values[vid] if 0 <= vid < len(values) else None
        if got is None:
            self.run_all()
            got = values[vid] if 0 <= vid < len(values) else None
            if got is None:
                raise KeyError((rank, vid))
        return got, self._dl[rank][vid]

    def table_of_values(self) -> tuple[list[list[Op | None]],
                                       list[list[CanonValue | Opaque | None]]]:
        """Per rank, by value id: the defining ops and the canonical values (all evaluated;
        read only), for passes over every value (rounding.py)."""
        self.run_all()
        return self._defs, self._cv

    def order(self) -> Iterator[Key]:
        """Every value, each after the values it depends on."""
        self.run_all()
        return zip(self._order_rank, self._order_value, strict=True)

    @property
    def values(self) -> Mapping[Key, Result]:
        return ValuesView(self.result, self.run_all, self._cv)

    @property
    def defining(self) -> Mapping[Key, Op]:
        return DefiningView(self._defs)

    def events(self, key: Key) -> list[Event]:
        """The departure events recorded where `key` is defined."""
        rank, vid = key
        templates = self._ev[rank][vid]
        op = self._defs[rank][vid]
        if not templates or op is None:
            return []
        delta = self._dl[rank][vid]
        return [t.event(rank, op, delta) for t in templates]

    def recv_source(self, rank: int, op: Op) -> Key | str:
        """The key of the value a recv gets, or why none arrives."""
        sources = self._sources.get(rank)
        if sources is None:
            sources = self._sources[rank] = self._rank_sources(rank)
        got = sources.get(op.index)
        return got if got is not None else self._recv_source(rank, op)

    def message_sources(self, rank: int) -> dict[int, Key]:
        """Op index -> (sender rank, value sent) of every recv of `rank` that gets one."""
        sources = self._sources.get(rank)
        if sources is None:
            sources = self._sources[rank] = self._rank_sources(rank)
        return sources

    def _rank_sources(self, rank: int) -> dict[int, Key]:
        """Op index -> (sender rank, value sent) of every recv of `rank` that gets one."""
        cols = self.table.cols
        lo, hi = int(cols.start[rank]), int(cols.start[rank + 1])
        rows = np.arange(lo, hi)
        rows = rows[~cols.send[lo:hi] & (cols.status[lo:hi] == 0) & (cols.partner[lo:hi] >= 0)]
        senders = cols.partner[rows]
        return dict(zip(cols.op[rows].tolist(),
                        zip(cols.rank[senders].tolist(), cols.value[senders].tolist(),
                            strict=True), strict=True))

    def _recv_source(self, rank: int, op: Op) -> Key | str:
        cols = self.table.cols
        g = cols.row(OpRef(rank, op.index))
        status = int(cols.status[g])
        d = op.dir.value if op.dir else "?"
        if status == NO_LINK:
            return f"recv {d} uses a link the wiring does not have, so no message arrives"
        if status == OUTSIDE:
            return f"recv {d} waits on an endpoint outside the launch, which never sends"
        p = int(cols.partner[g])
        if p < 0:
            return f"recv {d} has no matching send (message {int(cols.k[g])} never arrives)"
        s_rank = int(cols.rank[p])
        arg = self.schedule.programs[s_rank].ops[int(cols.op[p])].args[0]
        assert isinstance(arg, ValueRef)
        return (s_rank, arg.id)

    def deps(self, key: Key) -> list[Key]:
        rank = key[0]
        op = self._defs[rank][key[1]]
        assert op is not None
        if op.kind is OpKind.RECV:
            src = self.recv_source(rank, op)
            return [src] if isinstance(src, tuple) else []
        if op.kind is OpKind.LOAD:
            source = self.rank_memory(rank).loads.get(op.index)
            return [(rank, w.value_args[0]) for w in source.writers] if source else []
        return [(rank, a.id) for a in op.args if isinstance(a, ValueRef)]

    def view_source(self, rank: int, arg: ValueRef | Const) -> Op | None:
        """The reshape an operand went through (following trans, cast, recv)."""
        defs = self._defs[rank]
        while isinstance(arg, ValueRef):
            op = defs[arg.id] if 0 <= arg.id < len(defs) else None
            if op is None:
                return None
            if op.kind is OpKind.RESHAPE:
                return op
            if op.kind not in (OpKind.TRANS, OpKind.CAST) or not op.args:
                return None
            arg = op.args[0]
        return None

    # --- the order of evaluation ---------------------------------------------------------
    def run_all(self) -> None:
        """Evaluate every value: each rank in program order, a rank waiting at a recv until
        its sender has evaluated what it sends; values left (a cycle through messages)
        follow their data dependencies one by one."""
        if self._complete:
            return
        self._complete = True
        progs = self.schedule.programs
        cursor = [0] * len(progs)
        waiting: dict[int, list[int]] = {}
        work = deque(range(len(progs)))
        while work:
            r = work.popleft()
            before = cursor[r]
            sender = self._advance(r, cursor)
            if sender >= 0:
                waiting.setdefault(sender, []).append(r)
            if cursor[r] != before:
                work.extend(waiting.pop(r, ()))
        for r, prog in enumerate(progs):
            for op in prog.ops[cursor[r]:]:
                if op.out is not None and self._cv[r][op.out] is None:
                    self._force((r, op.out))

    def _advance(self, r: int, cursor: list[int]) -> int:  # noqa: C901 - the hot loop, inlined
        """Evaluate rank r's values in program order from its cursor; the rank whose value
        a recv waits for, or -1 when the rank is done.

        The common case is inlined: an op whose operands are known and whose situation
        was met before (the memo) costs a few lookups."""
        ops = self.schedule.programs[r].ops
        cvs, memo, plans = self._cv, self._memo, self._plans
        mine, dls, evs, defs = cvs[r], self._dl[r], self._ev[r], self._defs[r]
        order_rank, order_value = self._order_rank, self._order_value
        sources = self._sources.get(r)
        if sources is None:
            sources = self._sources[r] = self._rank_sources(r)
        recv, load, mul = OpKind.RECV, OpKind.LOAD, OpKind.MUL
        i, n = cursor[r], len(ops)
        while i < n:
            op = ops[i]
            vid = op.out
            i += 1
            if vid is None or mine[vid] is not None:
                continue
            kind = op.kind
            if kind is recv:
                src = sources.get(op.index)
                if src is not None:   # a message that arrives: the sender's value
                    s_rank, s_vid = src
                    sent = cvs[s_rank][s_vid]
                    if sent is None:
                        cursor[r] = i - 1
                        return s_rank
                    order_rank.append(r)
                    order_value.append(vid)
                    mine[vid] = sent
                    d = self._dl[s_rank][s_vid]
                    if d:
                        dls[vid] = d
                    continue
            elif kind is not load:
                plan = plans.get(id(op)) or self._plan(op)
                ids = plan[2]
                sig = plan[1]
                if kind is mul:  # the signature says which operands come from a recv
                    received = tuple(d is not None and d.kind is recv
                                     for d in map(defs.__getitem__, ids))
                    sig = plan[3].get(received, -1)
                hit = None
                if sig < 0:
                    pass
                elif len(ids) == 1:
                    c = mine[ids[0]]
                    if c.__class__ is CanonValue:
                        base = dls[ids[0]]
                        hit = memo.get((sig, c.id, 0))
                elif len(ids) == 2:
                    c, c2 = mine[ids[0]], mine[ids[1]]
                    if c.__class__ is CanonValue and c2.__class__ is CanonValue:
                        if c.rowless:  # (see memo_key)
                            base = dls[ids[1]]
                            hit = memo.get((sig, c.id, 0, c2.id, 0))
                        else:
                            base = dls[ids[0]]
                            hit = memo.get((sig, c.id, 0, c2.id,
                                            0 if c2.rowless else dls[ids[1]] - base))
                if hit is not None and hit.cv is not None:
                    order_rank.append(r)
                    order_value.append(vid)
                    mine[vid] = hit.cv
                    if base + hit.eps:
                        dls[vid] = base + hit.eps
                    if hit.templates:
                        evs[vid] = hit.templates
                    continue
            self._set(r, vid, *self._evaluate(r, op))
        cursor[r] = n
        return -1

    def _plan(self, op: Op) -> tuple[Op, int, tuple[int, ...], dict[tuple[bool, ...], int]]:
        """Per op: its signature (for a mul, per operands-from-a-recv pattern, filled by
        `_signature`) and the value ids of its operands."""
        sig = -1 if op.kind is OpKind.MUL else self._signature(0, op)
        plan = self._plans[id(op)] = (op, sig, op.value_args, {})
        return plan

    def _force(self, key: Key) -> None:
        """Evaluate `key` and what it depends on (an explicit stack: the chain through
        messages can be long); a value met again while on the stack is a cycle."""
        on_stack: set[Key] = set()
        stack: list[tuple[Key, bool]] = [(key, False)]
        while stack:
            k, expanded = stack.pop()
            r, vid = k
            if self._cv[r][vid] is not None:
                continue
            op = self._defs[r][vid]
            assert op is not None
            if expanded:
                on_stack.discard(k)
                self._set(r, vid, *self._evaluate(r, op))
                continue
            if k in on_stack:
                self._set(r, vid, Opaque(_CYCLE, r, op), 0, ())
                continue
            on_stack.add(k)
            stack.append((k, True))
            for dep in self.deps(k):
                if self._cv[dep[0]][dep[1]] is None:
                    stack.append((dep, False))

    def _set(self, r: int, vid: int, cv: CanonValue | Opaque, delta: int,
             templates: tuple[Template, ...]) -> None:
        self._order_rank.append(r)
        self._order_value.append(vid)
        self._cv[r][vid] = cv
        if delta:
            self._dl[r][vid] = delta
        if templates:
            self._ev[r][vid] = templates

    # --- one op --------------------------------------------------------------------------
    def _evaluate(self, rank: int, op: Op) -> tuple[CanonValue | Opaque, int,
                                                    tuple[Template, ...]]:
        """Op's value from its operands' (evaluated) values: looked up, else computed."""
        kind = op.kind
        if kind is OpKind.RECV:
            src = self.recv_source(rank, op)
            if isinstance(src, str):
                return Opaque(src, rank, op, lost=True), 0, ()
            sent = self._cv[src[0]][src[1]]
            assert sent is not None
            return sent, self._dl[src[0]][src[1]], ()
        cvs, dls = self._cv[rank], self._dl[rank]
        operands: list[tuple[CanonValue, int]] = []
        for a in op.args:
            if isinstance(a, ValueRef):
                c = cvs[a.id]
                if not isinstance(c, CanonValue):
                    return self._opaque_operand(rank, op)
                operands.append((c, dls[a.id]))
        if kind is OpKind.LOAD:
            return self._load_value(rank, op)
        key, base = memo_key(self._signature(rank, op), operands)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._compute_hit(rank, op, operands, base)
            if hit is None:  # not reusable: computed for this rank alone
                return self._last
            if self.reuse:
                self._memo[key] = hit
        if hit.cv is None:
            return Opaque(hit.reason, rank, op), 0, hit.templates
        return hit.cv, base + hit.eps, hit.templates

    def _opaque_operand(self, rank: int, op: Op
                        ) -> tuple[CanonValue | Opaque, int, tuple[Template, ...]]:
        """An opaque operand makes the value opaque: the first one in order (a nan
        constant still wins: it is refused first, as all operands are read)."""
        cvs = self._cv[rank]
        opaque = next(c for a in op.args if isinstance(a, ValueRef) and
                      isinstance(c := cvs[a.id], Opaque))
        self.rec.key, self._op = (rank, op.out or 0), op
        try:
            for a in op.args:
                if isinstance(a, Const):
                    self.const_value(a)
        except NotModelled as exc:
            self.rec.add(Departure.OPAQUE, op, f"{op.source}: {op.kind.value} {exc}")
            return Opaque(str(exc), rank, op), 0, self.rec.take()
        return opaque, 0, self.rec.take()

    def _signature(self, rank: int, op: Op) -> int:
        """Everything about the op (and its rank's program) that its transfer reads,
        other than the operand values, as a small id."""
        got = self._sigs.get(id(op))
        if got is None:
            consts = tuple((i, a.value) for i, a in enumerate(op.args) if isinstance(a, Const))
            static = (op.kind, op.dtype, op.shape, op.axis, op.keepdims, op.perm, op.fill,
                      op.ptr, op.offset, op.source, len(op.args), consts)
            got = self._sigs[id(op)] = (op, self._sig_ids.setdefault(static, len(self._sig_ids)))
        if op.kind is not OpKind.MUL:
            return got[1]
        defs = self._defs[rank]
        received = tuple(d is not None and d.kind is OpKind.RECV
                         for d in map(defs.__getitem__, op.value_args))
        sig = self._sig_ids.setdefault((got[1], received), len(self._sig_ids))
        plan = self._plans.get(id(op)) or self._plan(op)
        plan[3][received] = sig   # what the inlined path looks up
        return sig

    def _received(self, rank: int, op: Op) -> tuple[bool, ...]:
        defs = self._defs[rank]
        return tuple(isinstance(a, ValueRef) and (d := defs[a.id]) is not None and
                     d.kind is OpKind.RECV for a in op.args)

    def _compute_hit(self, rank: int, op: Op, operands: list[tuple[CanonValue, int]],
                     base: int) -> Hit | None:
        """Compute the transfer in the first operand's frame (others shifted into it); None
        when the result is this rank's alone (then `_last` holds it)."""
        self.evaluated += 1
        absolute = op.kind in _ABSOLUTE
        frame = 0 if absolute else base
        operand_values = iter([c.at(d - frame) for c, d in operands])
        self.rec.key, self._op = (rank, op.out or 0), op
        self.received = self._received(rank, op)
        self.rank_specific = False
        try:
            vals = [self.const_value(a) if isinstance(a, Const) else next(operand_values)
                    for a in op.args]
            out = self.full(op) if op.kind is OpKind.FULL else self._compute(op, vals)
            out = self._fold(out, op)
        except NotModelled as exc:
            self.rec.add(Departure.OPAQUE, op, f"{op.source}: {op.kind.value} {exc}")
            # an opaque value sits at offset 0: place rows of earlier events absolutely
            templates = tuple(t.moved(frame) for t in self.rec.take())
            if self.rank_specific:
                self._last = (Opaque(str(exc), rank, op), 0, templates)
                return None
            return Hit(None, 0, str(exc), templates)
        cv, eps = self.canon.intern(out)
        templates = tuple(t.moved(-eps) for t in self.rec.take())
        if absolute or self.rank_specific:
            self._last = (cv, frame + eps, templates)
            return None
        return Hit(cv, eps, "", templates)

    _last: tuple[CanonValue | Opaque, int, tuple[Template, ...]]

    # --- memory --------------------------------------------------------------------------
__all__ = ["LN2", "Interpreter", "Opaque", "Result", "Subst", "Value", "memo_key",
           "output_coords"]
