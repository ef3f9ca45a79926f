"""Traced programs in a compact form of plain tuples, to cross a process boundary fast.

Pickling the IR's slotted dataclasses goes through `dataclasses`' per-object state
functions: about 17 µs an op each way, slower than tracing the op. Rows of plain tuples
pickle at C speed; rebuilding the ops costs their constructor only. Equal ops are one
object across ranks (model/tracer.py's OpTable): each is packed once, as one row, and a
program is an array of row numbers, so a 64x64 mesh's 8.9M ops cross as ~0.3M rows and
35 MB of row numbers. Used by model/isolation.py to bring a child's trace home and by
model/trace.py's second tracing core; the result equals the traced programs.
"""

from __future__ import annotations

from array import array
from dataclasses import fields

from meshproof.model.paused_gc import paused_gc
from meshproof.model.schedule import Arg, Const, Op, RankProgram, SourceLoc, ValueRef
from meshproof.model.topology import Endpoint

_FIELDS = tuple(f.name for f in fields(Op))
_ARGS = _FIELDS.index("args")
_SOURCE = _FIELDS.index("source")

# A row is an Op's fields in declaration order, with `args` as ints (ValueRef ids) and
# 1-tuples (Const values: a bare 1.0 would equal the id 1 as a dict key) and `source` as
# an index into the locations. A program is (cube, pe, its ops' row numbers as the bytes
# of an array of C ints).
PackedProgram = tuple[int, int, bytes]
PackedPrograms = tuple[tuple[tuple[str, int], ...], tuple[tuple[object, ...], ...],
                       tuple[PackedProgram, ...]]


def pack_programs(programs: tuple[RankProgram, ...]) -> PackedPrograms:
    locations: dict[SourceLoc, int] = {}
    rows: list[tuple[object, ...]] = []
    row_of: dict[int, int] = {}   # by identity: the programs keep their ops alive
    packed: list[PackedProgram] = []
    for program in programs:
        ids = list(map(id, program.ops))
        numbers = [row_of.get(i, -1) for i in ids]
        if -1 in numbers:
            for k, (i, op) in enumerate(zip(ids, program.ops, strict=True)):
                if numbers[k] < 0:
                    if i not in row_of:
                        row_of[i] = len(rows)
                        rows.append(_row(op, locations))
                    numbers[k] = row_of[i]
        packed.append((program.endpoint.cube, program.endpoint.pe,
                       array("i", numbers).tobytes()))
    return (tuple((loc.file, loc.line) for loc in locations), tuple(rows), tuple(packed))


def _row(op: Op, locations: dict[SourceLoc, int]) -> tuple[object, ...]:
    row = [getattr(op, name) for name in _FIELDS]
    row[_ARGS] = tuple(a.id if isinstance(a, ValueRef) else (a.value,) for a in op.args)
    row[_SOURCE] = locations.setdefault(op.source, len(locations))
    return tuple(row)


def unpack_programs(packed: PackedPrograms) -> tuple[RankProgram, ...]:
    table, rows, programs = packed
    locations = [SourceLoc(file, line) for file, line in table]
    args: dict[object, Arg] = {}  # operands repeat: build each once (they are immutable)
    out: list[RankProgram] = []
    with paused_gc():  # a million new objects would trigger collections that find nothing
        ops: list[Op] = []
        for row in rows:
            values = list(row)
            values[_ARGS] = tuple(args.get(a) or args.setdefault(a, _arg(a))
                                  for a in row[_ARGS])  # type: ignore[attr-defined]
            values[_SOURCE] = locations[row[_SOURCE]]  # type: ignore[call-overload]
            ops.append(Op(*values))  # type: ignore[arg-type]
        for cube, pe, numbers in programs:
            index = array("i")
            index.frombytes(numbers)
            out.append(RankProgram(Endpoint(cube, pe), tuple(map(ops.__getitem__, index))))
    return tuple(out)


def _arg(value: object) -> Arg:
    if isinstance(value, int):
        return ValueRef(value)
    assert isinstance(value, tuple)
    return Const(value[0])


