"""tl.where, tl.arange and comparisons: traced into the IR (model/tl_ops.py, tracer.py,
tensor.py), evaluated by the simulator (sim/numerics.py), and guards in the verifier's
algebra (verify/semantics/masks.py, spec/semantics.md §8), numeric_safety included."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import TEST_KERNELS, kernel_spec, trace_kernel, verify_kernel

from meshproof.errors import DataDependentControlFlow, ShapeError, UnsupportedArgument
from meshproof.model import tensor
from meshproof.model.channels import derive_channels
from meshproof.model.evaluate import Evaluation
from meshproof.model.machine import Buffers, Machine
from meshproof.model.schedule import COMPARISONS, MASK_KINDS, Const, DType, OpKind, ValueRef
from meshproof.model.topology import Endpoint
from meshproof.model.tracer import KernelSite, Pointer, RankTracer
from meshproof.verify.api import VerifyConfig
from meshproof.verify.properties import Property
from meshproof.verify.result import Status

HERE = str(Path(__file__).resolve())
MASKED = TEST_KERNELS / "masked.py"
SEMANTIC = (Property.EXACTLY_ONCE_MERGE, Property.ATTENTION_EQUIVALENCE,
            Property.NUMERIC_SAFETY)


@pytest.fixture
def tl() -> Iterator[Any]:
    tracer = RankTracer(Endpoint(0, 0), (1, 1), KernelSite(HERE, "test_tl_where.py", 1))
    tensor._ACTIVE.append(tracer)
    try:
        yield tracer.tl
    finally:
        tensor._ACTIVE.pop()


def _ops(tl: Any) -> list[Any]:
    return tl._t.ops  # type: ignore[no-any-return]


def test_arange_records_its_start_and_length(tl: Any) -> None:
    pos = tl.arange(3, 11)
    op = _ops(tl)[-1]
    assert (op.kind, op.shape, op.dtype, op.fill, op.args) == \
        (OpKind.ARANGE, (8,), DType.F32, 3.0, ())
    assert pos.shape == (8,) and pos.dtype == "f32"


@pytest.mark.parametrize("args", [(4, 4), (-1, 3), (0, 2 ** 24 + 1), (0.0, 4), (True, 3)])
def test_arange_needs_an_increasing_range_of_ints(tl: Any, args: tuple[Any, Any]) -> None:
    with pytest.raises(ShapeError, match=r"tl\.arange"):
        tl.arange(*args)


def test_comparisons_make_f32_masks_that_broadcast(tl: Any) -> None:
    q = tl.reshape(tl.arange(0, 4) + 8, (4, 1))
    k = tl.arange(0, 6)
    x = tl.load(Pointer("x_ptr"), shape=(6,), dtype="f16")
    made = [k <= q, k < q, k > q, k >= q, k == q, k != q, k > 2, x > 0.5]
    kinds = [op.kind for op in _ops(tl)[-len(made):]]
    assert kinds == [OpKind.LE, OpKind.LT, OpKind.GT, OpKind.GE, OpKind.EQ, OpKind.NE,
                     OpKind.GT, OpKind.GT]
    assert set(kinds) <= COMPARISONS <= MASK_KINDS
    assert all(m.dtype == "f32" for m in made)
    assert made[0].shape == (4, 6) and made[-1].shape == (6,)
    assert _ops(tl)[-2].args[1] == Const(2.0)


def test_where_takes_scalars_and_promotes_only_its_values(tl: Any) -> None:
    s = tl.load(Pointer("x_ptr"), shape=(2, 3), dtype="f16")
    m = tl.arange(0, 3) < 2
    out = tl.where(m, s, float("-inf"))
    op = _ops(tl)[-1]
    assert (op.kind, op.shape, op.dtype) == (OpKind.WHERE, (2, 3), DType.F16)
    assert op.args[2] == Const(-math.inf) and out.dtype == "f16"
    assert tl.where(m, 1.0, 0.0).dtype == "f32"
    with pytest.raises(ShapeError, match=r"tl\.where expects a tensor"):
        tl.where(True, s, 0.0)
    with pytest.raises(ShapeError, match="does not broadcast"):
        tl.where(tl.arange(0, 4) < 2, s, 0.0)


def test_branching_on_a_mask_is_still_refused(tl: Any) -> None:
    k = tl.arange(0, 4)
    with pytest.raises(DataDependentControlFlow,
                       match=r"compares tensor data \(<=\) and uses the mask as a condition"):
        if k <= 2:
            pass


def test_masked_loads_and_stores_stay_refused(tl: Any) -> None:
    m = tl.arange(0, 4) < 2
    with pytest.raises(UnsupportedArgument, match=r"tl\.load\(mask=\.\.\.\) is not modelled"):
        tl.load(Pointer("x_ptr"), shape=(4,), mask=m)
    with pytest.raises(UnsupportedArgument, match=r"tl\.store\(mask=\.\.\.\) is not modelled"):
        tl.store(Pointer("x_ptr"), m, mask=m)


# --- the verifier: masks are guards in the algebra (spec/semantics.md §8) ----------------


@pytest.mark.parametrize(("func", "mask", "eo", "ae"), [
    ("decode_padding", None, Status.PROVED, Status.PROVED),       # declares padding:10
    ("decode_window", None, Status.VIOLATED, Status.VIOLATED),    # no mask declared
    ("decode_window", "window:5", Status.PROVED, Status.PROVED),
    ("decode_window", "window:6", Status.VIOLATED, Status.VIOLATED),
    ("decode_mask_times_scores", None, Status.PROVED, Status.VIOLATED),  # unscaled scores
])
def test_masked_decode_kernels_get_verdicts(func: str, mask: str | None, eo: Status,
                                           ae: Status) -> None:
    verdict = verify_kernel(kernel_spec(f"masked.py::{func}"), pes=1, mask=mask)
    by = {r.name: r for r in verdict.properties}
    assert by[Property.EXACTLY_ONCE_MERGE].status is eo, \
        by[Property.EXACTLY_ONCE_MERGE].message
    assert by[Property.ATTENTION_EQUIVALENCE].status is ae, \
        by[Property.ATTENTION_EQUIVALENCE].message
    # numeric_safety judges what each kernel computes, masked or not
    ns = by[Property.NUMERIC_SAFETY]
    assert ns.status is Status.PROVED, ns.message
    for prop in (Property.DIRECTION_LEGALITY, Property.LAUNCH_CONFINEMENT,
                 Property.CHANNEL_MATCHING, Property.DEADLOCK_FREEDOM):
        assert by[prop].status is Status.PROVED, (prop, by[prop].message)


def test_a_penalty_under_a_not_equal_mask_is_outside_the_algebra_and_shown_wrong() -> None:
    # != is a sum of two disjoint guards; -inf outside it is a penalty over a union, which
    # the algebra does not hold (a penalty holds one conjunction): the reason is given, and
    # the kernel hides a key the unmasked reference counts, which a 40-digit witness shows
    verdict = verify_kernel(kernel_spec("masked.py::decode_not_equal"), pes=1)
    r = {p.name: p for p in verdict.properties}[Property.ATTENTION_EQUIVALENCE]
    assert r.status is Status.VIOLATED
    assert 'selects -inf outside an "or" of masks (!= or a sum of comparisons)' in r.message


def test_an_unmasked_kernel_keeps_its_verdicts() -> None:
    # at the tolerance proofs.toml judges the built-ins at (their bound is 3.3e-2·max|V|)
    proved = verify_kernel("mesh_mlo_1d", VerifyConfig(rounding_tolerance=0.1)).properties
    assert all(r.status is Status.PROVED for r in proved)
    bad = {r.name: r.status for r in verify_kernel("mesh_kv_skip_last").properties}
    assert bad[Property.EXACTLY_ONCE_MERGE] is Status.VIOLATED
    assert bad[Property.ATTENTION_EQUIVALENCE] is Status.VIOLATED


def test_the_machine_replay_computes_masks_as_the_simulator() -> None:
    """numeric_safety's machine replay holds masks (spec/simulator.md: float32 positions,
    1.0 / 0.0 comparisons, a select): with Q = K = V = 1 every allowed key weighs alike and
    the padded decode's output is 1, its ℓ the PAD allowed keys."""
    schedule = trace_kernel(kernel_spec("masked.py::decode_padding"), pes=1)
    buffers = Buffers({0: {"q_ptr": np.ones(8, np.float32), "k_ptr": np.ones(128, np.float32),
                           "v_ptr": np.ones(128, np.float32)}})
    ev = Evaluation(schedule, derive_channels(schedule), Machine(buffers))
    ev.run()
    masks = [op for op in schedule.programs[0].ops if op.kind in MASK_KINDS]
    assert {op.kind for op in masks} == {OpKind.ARANGE, OpKind.LT, OpKind.WHERE}
    assert all(op.out is not None and ev.values[0][op.out] is not None for op in masks)
    lt = next(op for op in masks if op.kind is OpKind.LT)
    assert lt.out is not None and float(np.sum(ev.values[0][lt.out])) == 10.0   # PAD
    store = next(op for op in schedule.programs[0].ops if op.kind is OpKind.STORE)
    arg = store.args[0]
    assert isinstance(arg, ValueRef)
    assert np.all(ev.values[0][arg.id] == 1.0)


def test_a_declared_mask_makes_an_unmasked_kernel_violated() -> None:
    # decode queries are the last S_q positions: one query sees every key (proved), four
    # must not see the keys after their own
    one = {r.name: r for r in verify_kernel("mesh_mlo_1d", mask="causal").properties}
    assert one[Property.ATTENTION_EQUIVALENCE].status is Status.PROVED
    by = {r.name: r for r in verify_kernel("mesh_mlo_1d", mask="causal",
                                           args=(("S_q", 4),)).properties}
    ae = by[Property.ATTENTION_EQUIVALENCE]
    assert ae.status is Status.VIOLATED and "which the causal mask hides" in ae.message
    assert by[Property.EXACTLY_ONCE_MERGE].status is Status.VIOLATED
    # numeric_safety judges what the kernel computes, which is safe (if not attention)
    assert by[Property.NUMERIC_SAFETY].status is Status.PROVED
    assert by[Property.DEADLOCK_FREEDOM].status is Status.PROVED


def test_equality_with_what_is_not_a_number_is_identity(tl: Any) -> None:
    x = tl.arange(0, 4)
    n = len(_ops(tl))
    assert (x == None) is False and (x != "x") is True  # noqa: E711
    assert x in [x] and len(_ops(tl)) == n       # identity decides: no op recorded
