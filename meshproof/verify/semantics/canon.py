"""Canonical values: one stored value per structure, found by its full key.

SPMD ranks compute the same values again and again, in different frames: the digits of a
layout have other ids on every rank, a shard's partial holds other key rows, a prefill
rank other query rows, a cube of a panel another attention problem (group). A value in its
canonical frame has its layout's digits renamed by position (the k-th digit is
`CANON + k`) and its key rows, query rows and groups translated so that its own smallest
of each is 0; it is stored once (hash-consing on the full key string, never on a hash
alone) and every rank holds it as a pair (canonical id, frame). Everything else stays as
it is: renaming digits and translating each of the three commute with every rule of the
algebra, which compares rows and groups only with each other (spec/semantics.md §9).
"""

from __future__ import annotations

from meshproof.verify.semantics.atom_base import frame
from meshproof.verify.semantics.index import Aff, Digit, Layout, Subst
from meshproof.verify.semantics.layouts import Value

CANON = 1 << 40          # canonical digit ids: CANON + position in the layout
CACHE = 1 << 16          # actual-frame values kept (cid, shift) -> Value


ROWS, QROWS, GROUPS = 1, 2, 4     # the parts of a frame a value has (frame_mask)


def _marks(value: Value) -> tuple[list[int], list[int], list[int]]:
    atoms = tuple(value.form.atoms())
    return ([r for a in atoms for r in a.rows()], [r for a in atoms for r in a.qrows()],
            [g for a in atoms for g in a.groups()])


def frame_of(value: Value) -> int:
    """The frame of a value: its own smallest key row, query row and group (0 for a part
    it does not have: translating that part changes nothing)."""
    rows, qrows, groups = _marks(value)
    return frame(min(rows, default=0), min(qrows, default=0), min(groups, default=0))


def frame_mask(value: Value) -> int:
    """Which parts of a frame move the value (ROWS | QROWS | GROUPS)."""
    rows, qrows, groups = _marks(value)
    return (ROWS if rows else 0) | (QROWS if qrows else 0) | (GROUPS if groups else 0)


def canonical(value: Value) -> tuple[Value, int]:
    """The value in its canonical frame, and the shift that takes it back."""
    subst: Subst = {}
    axes = []
    k = 0
    for axis in value.layout.axes:
        new = []
        for d in axis:
            nd = Digit(CANON + k, d.size)
            k += 1
            if d.id != nd.id:
                subst[d.id] = Aff.digit(nd.id)
            new.append(nd)
        axes.append(tuple(new))
    form = value.form.subst(subst) if subst else value.form
    layout = Layout(tuple(axes), value.layout.shape)
    shift = frame_of(Value(layout, form))
    if shift:
        form = form.shift(-shift)
    return Value(layout, form), shift


def _layout_key(layout: Layout) -> str:
    return ";".join(",".join(str(d.size) for d in axis) or "1" for axis in layout.axes) + \
        "|" + ",".join(map(str, layout.shape))


class Canon:
    """The canonical store of one analysis."""

    def __init__(self) -> None:
        self.values: list[Value] = []
        self._index: dict[str, int] = {}
        self._actual: dict[tuple[int, int], Value] = {}

    def intern(self, value: Value) -> tuple[int, int]:
        """The canonical id of the value and the shift of its key rows."""
        canon, shift = canonical(value)
        key = _layout_key(canon.layout) + "#" + canon.form.key
        cid = self._index.get(key)
        if cid is None:
            cid = self._index[key] = len(self.values)
            self.values.append(canon)
        return cid, shift

    def value_at(self, cid: int, shift: int) -> Value:
        """The value in the frame of a rank holding it (its key rows shifted back)."""
        if not shift:
            return self.values[cid]
        key = (cid, shift)
        hit = self._actual.get(key)
        if hit is None:
            if len(self._actual) > CACHE:
                self._actual.clear()
            base = self.values[cid]
            hit = self._actual[key] = Value(base.layout, base.form.shift(shift))
        return hit

    def __len__(self) -> int:
        return len(self.values)
