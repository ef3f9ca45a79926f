"""verify/semantics/canon.py: shifting key rows and renaming digits, the renamings the
interpreter's reuse rests on (spec/semantics.md §9): exact round trips, one canonical value
per value up to a shift, anchors that move with the shift, and rows only where rows are."""

from __future__ import annotations

import pytest
from semantic_helpers import CASES

from meshproof.model.channels import derive_channels
from meshproof.model.problem import attention_problem
from meshproof.verify.semantics.canon import (
    CanonTable,
    CanonValue,
    anchor,
    canonical_digits,
    shift,
)
from meshproof.verify.semantics.index import Aff, Digit, Layout
from meshproof.verify.semantics.interp import Interpreter
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.terms import QK, Input


def _values(kernel: str, **options: object) -> list[CanonValue]:
    from helpers import trace_kernel

    schedule = trace_kernel(kernel, **options)
    problem = attention_problem(schedule, schedule.launch.groups, schedule.launch.outputs)
    interp = Interpreter(schedule, derive_channels(schedule), problem)
    interp.run_all()
    return list(interp.canon._by_key.values())


KERNELS = [("mesh_mlo_1d", {}), ("mesh_mlo_2d", {"mesh": "2x4"}), ("mesh_kv", {}),
           (f"{CASES}::lse_merge", {"pes": 3}), (f"{CASES}::tiled_flash", {"pes": 3}),
           (f"{CASES}::plus_self", {"pes": 3}), (f"{CASES}::sum_of_keys", {"pes": 3})]


@pytest.mark.parametrize(("kernel", "options"), KERNELS)
def test_every_canonical_value_is_one_value_up_to_a_shift(
        kernel: str, options: dict[str, object]) -> None:
    values = _values(kernel, **options)
    assert values
    table = CanonTable()
    for cv in values:
        first = anchor(cv.form)
        assert (first is None) == cv.rowless and first in (None, 0)
        for d in (0, 1, 37, 4096):
            moved = shift(cv.form, d)
            assert shift(moved, -d).key == cv.form.key          # an exact round trip
            assert anchor(moved) == (None if first is None else d)
            back, offset = table.intern(Value(cv.layout, moved))
            assert back.form.key == cv.form.key and offset == (0 if cv.rowless else d)
    # interning is idempotent: equal canonical values are one object
    assert len(table) == len(values)


def test_only_key_rows_move() -> None:
    row, other = Aff(5, ((0, 1),)), Aff(2)
    k = Input("K", 0, (row, other, other))
    q = Input("Q", 0, (row, other, other))
    assert shift(_poly(k), 10).key == _poly(Input("K", 0, (row.shift(10), other, other))).key
    assert shift(_poly(q), 10).key == _poly(q).key                # query rows stay
    score = QK(0, row, other, row, other)                            # t stays, j moves
    assert shift(_poly(score), 3).key == _poly(QK(0, row, other, row.shift(3), other)).key


def test_digits_are_renamed_in_layout_order() -> None:
    a, b = Digit(40, 4), Digit(7, 3)
    value = Value(Layout(((a,), (b,)), (4, 3)),
                  _poly(Input("V", 0, (Aff(0, ((40, 1),)), Aff(0), Aff(0, ((7, 1),))))))
    canon = canonical_digits(value)
    assert canon.layout == Layout(((Digit(0, 4),), (Digit(1, 3),)), (4, 3))
    assert canon.form.key == _poly(Input("V", 0, (Aff(0, ((0, 1),)), Aff(0),
                                                  Aff(0, ((1, 1),))))).key


def _poly(atom: object):  # type: ignore[no-untyped-def]
    from meshproof.verify.semantics.terms import Poly

    return Poly.atom(atom)  # type: ignore[arg-type]
