"""What a load reads: the harness's input buffers, or what the same rank stored before.

The interpreter's loads (a mixin of interp.py's Interpreter): K and V buffers are built
with their key rows counted from the rank's first row, that row being the value's offset,
so every shard's load is the same canonical value; a load before any store to its buffer
reads the input without building the rank's memory map (verify/memory.py).
"""

from __future__ import annotations

from array import array

from meshproof.model.schedule import Op, OpKind
from meshproof.verify.memory import RankMemory, rank_memory
from meshproof.verify.semantics.algebra import NotModelled
from meshproof.verify.semantics.canon import CanonTable, CanonValue
from meshproof.verify.semantics.events import Departure, Template
from meshproof.verify.semantics.layouts import Value, buffer, read
from meshproof.verify.semantics.store import Hit
from meshproof.verify.semantics.terms import Input, Poly
from meshproof.verify.semantics.transfer import Opaque, Transfer


class Loads(Transfer):
    """Load evaluation; the state it reads is the interpreter's."""

    _cv: list[list[CanonValue | Opaque | None]]
    _dl: list[array[int]]
    _memo: dict[tuple[object, ...], Hit]
    _buffers: dict[tuple[object, ...], Value | None]
    memory: dict[int, RankMemory]
    canon: CanonTable
    evaluated: int
    reuse: bool

    def _signature(self, rank: int, op: Op) -> int:
        raise NotImplementedError

    def rank_memory(self, rank: int) -> RankMemory:
        if rank not in self.memory:
            self.memory[rank] = rank_memory(self.schedule.programs[rank])
        return self.memory[rank]

    def _load_value(self, rank: int, op: Op) -> tuple[CanonValue | Opaque, int,
                                                      tuple[Template, ...]]:
        assert op.ptr is not None
        self.rec.key, self._op = (rank, op.out or 0), op
        ops = self.schedule.programs[rank].ops
        # a load before any store to its buffer reads the harness input (the common case:
        # loads come first), without building the rank's memory map
        stored_before = rank in self.memory or any(
            o.kind is OpKind.STORE and o.ptr == op.ptr for o in ops[:op.index])
        source = self.rank_memory(rank).loads.get(op.index) if stored_before else None
        sig = self._signature(rank, op)
        if source is not None:
            if len(source.writers) != 1 or source.uncovered:
                return self._refused(rank, op, NotModelled(
                    f"reads {op.ptr} elements written by several stores (or partly by "
                    "none): reload exactly what one store wrote"))
            store = source.writers[0]
            stored = self._cv[rank][store.value_args[0]]
            delta = self._dl[rank][store.value_args[0]]
            assert stored is not None
            if isinstance(stored, Opaque):
                return stored, 0, ()
            key: tuple[object, ...] = (sig, "stored", stored.id, op.offset - store.offset)
            return self._read(key, rank, op, stored.at(0), op.offset - store.offset, delta)
        buf = self._input(rank, op.ptr)
        if buf is None:
            return self._refused(rank, op, NotModelled(
                f"loads {op.ptr}, which the harness does not fill on this rank (and the "
                "rank has not stored there before)"))
        (value, delta), tag = buf, self._input_tag(rank, op.ptr)
        return self._read((sig, "input", tag), rank, op, value, op.offset, delta)

    def _read(self, key: tuple[object, ...], rank: int, op: Op, value: Value, offset: int,
              delta: int) -> tuple[CanonValue | Opaque, int, tuple[Template, ...]]:
        hit = self._memo.get(key)
        if hit is None:
            self.evaluated += 1
            try:
                cv, eps = self.canon.intern(self._fold(read(value, offset, op.shape, self.src),
                                                       op))
                hit = Hit(cv, eps, "", self.rec.take())
            except NotModelled as exc:
                self.rec.add(Departure.OPAQUE, op, f"{op.source}: {op.kind.value} {exc}")
                hit = Hit(None, 0, str(exc), self.rec.take())
            if self.reuse:
                self._memo[key] = hit
        if hit.cv is None:
            return Opaque(hit.reason, rank, op), 0, hit.templates
        return hit.cv, delta + hit.eps, hit.templates

    def _refused(self, rank: int, op: Op, exc: NotModelled
                 ) -> tuple[CanonValue | Opaque, int, tuple[Template, ...]]:
        self.rec.add(Departure.OPAQUE, op, f"{op.source}: {op.kind.value} {exc}")
        return Opaque(str(exc), rank, op), 0, self.rec.take()

    def _input_tag(self, rank: int, ptr: str) -> tuple[object, ...]:
        p = self.problem
        g = p.group_of[rank]
        if ptr == "q_ptr" and p.q_base(rank) is not None:
            return ("Q", g, p.q_base(rank))
        return ("K" if ptr == p.k_ptr else "V", g, rank in p.empty)

    def _input(self, rank: int, ptr: str) -> tuple[Value, int] | None:
        """The harness's content of `ptr` on `rank` with its key rows counted from the
        rank's first KV row, and that row (the offset); None if the harness fills none."""
        p = self.problem
        if ptr == "q_ptr" and p.q_base(rank) is not None:
            pass
        elif ptr not in (p.k_ptr, p.v_ptr) or p.kv_base(rank) is None:
            return None
        tag = self._input_tag(rank, ptr)
        if tag not in self._buffers:
            self._buffers[tag] = self.input_buffer(rank, ptr, relative=True)
        value = self._buffers[tag]
        if value is None:
            return None
        return value, 0 if tag[0] == "Q" else (p.kv_base(rank) or 0)

    def input_buffer(self, rank: int, ptr: str, *, relative: bool = False) -> Value | None:
        """The harness's content of `ptr` on `rank`, or None if it fills none (`relative`:
        K and V rows counted from the rank's first row)."""
        p = self.problem
        g = p.group_of[rank]
        if ptr == "q_ptr" and p.q_base(rank) is not None:
            qb = p.q_base(rank) or 0
            return buffer((p.S_q, p.h_q, p.d_head),
                          lambda c: Poly.atom(Input("Q", g, (c[0].shift(qb), c[1], c[2]))),
                          self.src)
        if ptr in (p.k_ptr, p.v_ptr) and p.kv_base(rank) is not None:
            base = 0 if relative else (p.kv_base(rank) or 0)
            # an empty slice (numeric_safety's --empty-shard) holds no keys: its scores
            # are -inf, which the algebra then follows (max = -inf, exp(-inf - x) = 0)
            name = ("K" if ptr == p.k_ptr else "V") + ("x" if rank in p.empty else "")
            return buffer((p.S_kv_per_rank, p.h_kv, p.d_head),
                          lambda c: Poly.atom(Input(name, g, (c[0].shift(base), c[1], c[2]))),
                          self.src)
        return None
