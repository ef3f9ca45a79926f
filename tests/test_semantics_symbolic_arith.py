"""The symbolic domain's elementwise ops (verify/semantics/symbolic_arith.py): operands line
up by axis position. Canonical operands number their digits by position (canon.py), so two
of them share ids whether or not they index the same thing: a digit held at the same
aligned axis is one index (kept, no renaming), a digit held at another axis is renamed."""

from __future__ import annotations

from test_semantics_situations import _schedule

from meshproof.model.op_semantics import Binary
from meshproof.model.problem import attention_problem
from meshproof.verify.semantics.canon import CANON
from meshproof.verify.semantics.guards import Idx
from meshproof.verify.semantics.index import Aff, Digit, Layout
from meshproof.verify.semantics.layouts import Value
from meshproof.verify.semantics.rat import Rat
from meshproof.verify.semantics.symbolic import Symbolic

N = 4


def _domain() -> Symbolic:
    schedule = _schedule("mesh_kv")
    spec = schedule.launch
    return Symbolic(schedule, attention_problem(schedule, spec.groups, spec.outputs,
                                                spec.softmax_scale))


def _position(layout: Layout, d: Digit) -> Value:
    """The value whose element is the index that digit d counts."""
    return Value(layout, Rat.atom(Idx.make(Aff.digit(d.id), {d.id: (0, d.size - 1)})))


def test_a_row_statistic_meets_its_tile_row_by_row() -> None:
    """s - m with m of shape (N, 1): the canonical digit of m's rows is the tile's row digit
    at the same axis, kept as one index: row i minus row i is 0 everywhere."""
    row, col = Digit(CANON, N), Digit(CANON + 1, N)
    tile = _position(Layout(((row,), (col,)), (N, N)), row)
    stat = _position(Layout(((row,), ()), (N, 1)), row)
    out = _domain()._binary(0, Binary.SUB, tile, stat, None)
    assert out.layout.shape == (N, N) and out.form.is_zero


def test_a_vector_shares_an_id_with_the_tile_rows_but_broadcasts_along_columns() -> None:
    """A (N,) vector's digit is CANON too, but it lines up with the tile's columns: row i
    minus column j is not 0 (sharing the id would have made it so)."""
    row, col = Digit(CANON, N), Digit(CANON + 1, N)
    tile = _position(Layout(((row,), (col,)), (N, N)), row)
    vec = _position(Layout(((row,),), (N,)), row)
    out = _domain()._binary(0, Binary.SUB, tile, vec, None)
    assert out.layout.shape == (N, N) and not out.form.is_zero
    lin = out.form.as_lin()
    assert lin is not None and len(lin.coeffs) == 2     # i - j: two positions
