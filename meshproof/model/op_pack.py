"""Traced programs in a compact form of plain tuples, to cross a process boundary fast.

Pickling the IR's slotted dataclasses goes through `dataclasses`' per-object state
functions: about 17 µs an op each way, slower than tracing the op. Rows of plain tuples
pickle at C speed; rebuilding the ops costs their constructor only. Used by
model/isolation.py to bring a child's trace home; the result equals the traced programs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields

from meshproof.model.schedule import Arg, Const, Op, RankProgram, SourceLoc, ValueRef
from meshproof.model.topology import Endpoint

_FIELDS = tuple(f.name for f in fields(Op))
_ARGS = _FIELDS.index("args")
_SOURCE = _FIELDS.index("source")

# (cube, pe, rows); a row is an Op's fields in declaration order, with `args` as ints
# (ValueRef ids) and 1-tuples (Const values: a bare 1.0 would equal the id 1 as a dict
# key) and `source` as an index into the locations.
PackedProgram = tuple[int, int, tuple[tuple[object, ...], ...]]
PackedPrograms = tuple[tuple[tuple[str, int], ...], tuple[PackedProgram, ...]]


def pack_programs(programs: tuple[RankProgram, ...]) -> PackedPrograms:
    locations: dict[SourceLoc, int] = {}
    packed: list[PackedProgram] = []
    for program in programs:
        rows: list[tuple[object, ...]] = []
        for op in program.ops:
            row = [getattr(op, name) for name in _FIELDS]
            row[_ARGS] = tuple(a.id if isinstance(a, ValueRef) else (a.value,) for a in op.args)
            row[_SOURCE] = locations.setdefault(op.source, len(locations))
            rows.append(tuple(row))
        packed.append((program.endpoint.cube, program.endpoint.pe, tuple(rows)))
    return tuple((loc.file, loc.line) for loc in locations), tuple(packed)


def unpack_programs(packed: PackedPrograms) -> tuple[RankProgram, ...]:
    table, programs = packed
    locations = [SourceLoc(file, line) for file, line in table]
    args: dict[object, Arg] = {}  # operands repeat: build each once (they are immutable)
    out: list[RankProgram] = []
    with _no_gc():  # a million new objects would trigger collections that find nothing
        for cube, pe, rows in programs:
            ops: list[Op] = []
            for row in rows:
                values = list(row)
                values[_ARGS] = tuple(args.get(a) or args.setdefault(a, _arg(a))
                                      for a in row[_ARGS])  # type: ignore[attr-defined]
                values[_SOURCE] = locations[row[_SOURCE]]  # type: ignore[call-overload]
                ops.append(Op(*values))  # type: ignore[arg-type]
            out.append(RankProgram(Endpoint(cube, pe), tuple(ops)))
    return tuple(out)


def _arg(value: object) -> Arg:
    if isinstance(value, int):
        return ValueRef(value)
    assert isinstance(value, tuple)
    return Const(value[0])


@contextmanager
def _no_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
