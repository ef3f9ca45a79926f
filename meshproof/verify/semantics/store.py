"""Where the interpreter keeps values: memo entries, per-rank arrays, read-only views.

Values are held per rank by value id (the tracer numbers them densely from 0): a canonical
value and an offset each (canon.py), a few words a value. The views give the records the
other modules read — `(rank, vid) -> Value` materialised on demand, `(rank, vid) -> Op`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from meshproof.model.schedule import Op
from meshproof.verify.semantics.canon import CanonValue
from meshproof.verify.semantics.events import Template
from meshproof.verify.semantics.transfer import Opaque, Result

Key = tuple[int, int]   # (rank index, value id)


class Hit:
    """A memoised transfer: the result's canonical value (or an opaque reason), its offset
    relative to the first operand, and the templates of the events it records."""

    __slots__ = ("cv", "eps", "reason", "templates")

    def __init__(self, cv: CanonValue | None, eps: int, reason: str,
                 templates: tuple[Template, ...]) -> None:
        self.cv = cv
        self.eps = eps
        self.reason = reason
        self.templates = templates


def defining_ops(ops: tuple[Op, ...]) -> list[Op | None]:
    """The op defining each value id of one rank."""
    defining = [op for op in ops if op.out is not None]
    if all(op.out == i for i, op in enumerate(defining)):
        return list(defining)   # the tracer's dense numbering
    defs: list[Op | None] = [None] * (1 + max((op.out or 0) for op in defining))
    for op in defining:
        defs[op.out or 0] = op
    return defs


def memo_key(sig: int, operands: list[tuple[CanonValue, int]]) -> tuple[tuple[object, ...],
                                                                        int]:
    """The memo's key for an op with signature `sig` on these (canonical value, offset)
    operands, and the frame its result is computed in: the offset of the first operand
    that mentions key rows (0 if none does). Each operand is named by its canonical value
    and its offset relative to that frame; a rowless one is the same at every offset."""
    base = next((d for c, d in operands if not c.rowless), 0)
    parts: list[object] = [sig]
    for c, d in operands:
        parts.append(c.id)
        parts.append(0 if c.rowless else d - base)
    return tuple(parts), base


class ValuesView(Mapping[Key, Result]):
    """key -> the value with its absolute form (evaluating on demand)."""

    __slots__ = ("_canonical", "_result", "_run_all")

    def __init__(self, result: Callable[[int, int], Result], run_all: Callable[[], None],
                 canonical: list[list[CanonValue | Opaque | None]]) -> None:
        self._result = result
        self._run_all = run_all
        self._canonical = canonical

    def __getitem__(self, key: Key) -> Result:
        return self._result(*key)

    def __iter__(self) -> Iterator[Key]:
        self._run_all()
        for r, values in enumerate(self._canonical):
            for vid, v in enumerate(values):
                if v is not None:
                    yield (r, vid)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class DefiningView(Mapping[Key, Op]):
    __slots__ = ("_defs",)

    def __init__(self, defs: list[list[Op | None]]) -> None:
        self._defs = defs

    def __getitem__(self, key: Key) -> Op:
        r, vid = key
        defs = self._defs[r] if 0 <= r < len(self._defs) else []
        op = defs[vid] if 0 <= vid < len(defs) else None
        if op is None:
            raise KeyError(key)
        return op

    def __iter__(self) -> Iterator[Key]:
        for r, defs in enumerate(self._defs):
            for vid, op in enumerate(defs):
                if op is not None:
                    yield (r, vid)

    def __len__(self) -> int:
        return sum(1 for _ in self)
