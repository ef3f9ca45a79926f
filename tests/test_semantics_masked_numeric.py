"""numeric_safety on masked outputs (spec/semantics.md §8): max-domination through guards
(verify/semantics/order.py), masked intervals (bounds.py), exact mask values
(mask_exactness.py), masks on the machine (model/machine.py), and the rounding bound held
against the worst error the witness search finds on random masked launches."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from helpers import TEST_KERNELS, kernel_spec, line_of, trace_kernel, verify_kernel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_semantics_masks import _launch

from meshproof.model.channels import derive_channels
from meshproof.model.evaluate import Compare, Evaluation
from meshproof.model.machine import Buffers, Machine
from meshproof.model.problem import attention_problem
from meshproof.model.schedule import OpKind, Schedule, ValueRef
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property
from meshproof.verify.result import NumericResult, Status
from meshproof.verify.semantics import semantic_analysis
from meshproof.verify.semantics.atoms import Lin
from meshproof.verify.semantics.guards import Guard, Idx, Ind
from meshproof.verify.semantics.hazards import machine_buffers
from meshproof.verify.semantics.index import Aff
from meshproof.verify.semantics.mask_exactness import exact_mask_value
from meshproof.verify.semantics.numeric import FLOAT64
from meshproof.verify.semantics.poly_terms import Poly
from meshproof.verify.semantics.rational import Rat
from meshproof.verify.semantics.rounding_witness import climb, families, signed_v, worst_element
from meshproof.verify.semantics.witness import make_inputs, reference

NS = Property.NUMERIC_SAFETY
AE = Property.ATTENTION_EQUIVALENCE
KERNELS = TEST_KERNELS / "masked_numeric.py"


def _numeric(schedule: Schedule, b: float = 16.0, tol: float | None = None) -> NumericResult:
    r = verify(schedule, VerifyConfig(only=(NS, AE), input_bound=b, rounding_tolerance=tol))
    p = r.property(NS.value)
    assert isinstance(p, NumericResult)
    return p


def _ring(n: int, s: int, mask: str) -> Schedule:
    text, _, lay = mask.partition("@")
    kind = {"causal": 0, "window": 1, "padding": 2}[text.split(":")[0]]
    param = int(text.split(":")[1]) if ":" in text else 0
    return _launch(n, s, mask, kind=kind, param=param, zigzag=int(bool(lay)))


# --- the built-ins and the rules end to end ----------------------------------------------


@pytest.mark.parametrize("name", ["ring_prefill_causal_naive", "ring_prefill_causal_zigzag"])
def test_the_causal_builtins_prove_all_seven_properties(name: str) -> None:
    verdict = verify_kernel(name)
    assert all(p.status is Status.PROVED for p in verdict.properties), \
        [(p.name, p.message) for p in verdict.properties if p.status is not Status.PROVED]
    ns = verdict.property(NS.value)
    assert isinstance(ns, NumericResult) and ns.error_bound is not None
    assert ns.error_bound < 3e-3


def test_a_masked_max_gives_l_at_least_one_so_the_output_is_bounded_by_b() -> None:
    # correct idiom: the max and the exp read the masked scores, so ℓ >= 1 and |o| <= B
    schedule = trace_kernel(kernel_spec("masked_numeric.py::padded"), pes=1)
    a = semantic_analysis(schedule, derive_channels(schedule)).analysis
    assert a is not None
    for op in schedule.programs[0].ops:
        if op.kind is OpKind.DIV:
            den = op.args[1]
            assert isinstance(den, ValueRef)
            assert a.forms.interval((0, den.id))[0] >= 1.0
            assert a.forms.interval((0, op.out or 0)) == (-16.0, 16.0)
    assert _numeric(schedule).status is Status.PROVED


def test_a_row_the_first_block_leaves_without_a_key_is_violated_at_its_exp() -> None:
    # mistake: the zigzag window ring folds first a block that hides every key of a row
    p = _numeric(_ring(2, 4, "window:6@zigzag"), b=1.0, tol=1.0)
    assert p.status is Status.VIOLATED, p.message
    exp_line = line_of(TEST_KERNELS / "masked_variants.py", "p = tl.exp(scores - m)")
    assert f"masked_variants.py:{exp_line}" in p.message
    assert "is nan on the machine" in p.message
    assert "fold a block that leaves every query a key first" in p.message


def test_a_mask_that_hides_every_key_of_a_query_is_violated() -> None:
    # causal:-1: query position 0 sees no key at all
    p = _numeric(_ring(2, 4, "causal:-1"), tol=1.0)
    assert p.status is Status.VIOLATED and "is nan on the machine" in p.message, p.message


def test_exp_of_unmasked_scores_minus_the_masked_max_is_violated_with_a_hidden_key() -> None:
    schedule = trace_kernel(kernel_spec("masked_numeric.py::exp_of_unmasked"), pes=1)
    p = _numeric(schedule)
    assert p.status is Status.VIOLATED, p.message
    assert f"masked_numeric.py:{line_of(KERNELS, 'EXP-LINE')}" in p.message
    assert "a hidden key scores above every allowed one" in p.message
    assert "apply the mask (tl.where) to the scores before both the max and the exp" \
        in p.message


def test_a_cut_max_dominates_the_masked_scores_of_its_rows() -> None:
    # padding:2 cuts the max to keys [0, 2) and drops its guard; exp(s + Pen - M) <= 0
    # still holds where the guard leaves the key digit (a superset of where it is finite)
    p = _numeric(_ring(2, 4, "padding:2"), tol=1.0)
    assert p.status is Status.PROVED, p.message
    # and a member guarded by an implied guard (causal:1: key <= query + 1)
    assert _numeric(_ring(2, 4, "causal:1"), tol=1.0).status is Status.PROVED


def test_positions_past_2_to_the_24_have_no_rounding_rule() -> None:
    schedule = trace_kernel(kernel_spec("masked_numeric.py::huge_positions"), pes=1)
    p = _numeric(schedule)
    assert p.status is Status.UNKNOWN
    assert f"masked_numeric.py:{line_of(KERNELS, 'FAR-LINE')}" in p.message
    assert "positions that f32 may not hold exactly (at or above 2^24)" in p.message


# --- exact mask values -------------------------------------------------------------------


def _positions(lo: int, size: int) -> Rat:
    idx = Idx.make(Aff.digit(7), {7: (0, size - 1)})
    return Rat.of_lin(Lin.make(Fraction(lo), ((idx, Fraction(1)),)))


def _indicator(coef: Fraction) -> Rat:
    guard = Guard.make((Aff(-3, ((7, 1),)),), {7: (0, 15)})
    assert isinstance(guard, Guard)
    return Rat(Poly.var(Ind.make(guard), coef))


def test_positions_and_selects_of_constants_are_exact() -> None:
    assert exact_mask_value(_positions(40, 16)) is True
    assert exact_mask_value(_indicator(Fraction(1))) is True
    assert exact_mask_value(_indicator(Fraction(1, 4))) is True


def test_positions_at_2_to_the_24_and_unrepresentable_selects_are_not() -> None:
    assert exact_mask_value(_positions(1 << 24, 16)) is False
    assert exact_mask_value(_indicator(Fraction(1, 3))) is False
    assert exact_mask_value(Rat.const(Fraction(2))) is None   # not a mask value


# --- masks on the machine ----------------------------------------------------------------


def test_the_machine_computes_masks_as_the_simulator_does() -> None:
    m = Machine(Buffers({}))
    schedule = trace_kernel("ring_prefill_causal_naive")
    ops = {op.kind: op for op in schedule.programs[0].ops}
    pos = m.arange(0, ops[OpKind.ARANGE])
    assert pos is not None and pos.dtype == np.float32 and pos[0] == ops[OpKind.ARANGE].fill
    le = ops[OpKind.LE]
    held = m.compare(0, le, Compare.LE, np.zeros((le.shape[-1],), np.float32),
                     np.zeros(le.shape, np.float32))
    assert held is not None and held.shape == le.shape and set(np.unique(held)) == {1.0}
    where = ops[OpKind.WHERE]
    cond = np.zeros(where.shape, np.float32)
    got = m.where(0, where, cond, np.ones(where.shape, np.float32), np.float32(-np.inf))
    assert got is not None and np.all(got == -np.inf)


def test_the_machine_output_of_the_naive_ring_is_masked_attention() -> None:
    schedule = trace_kernel("ring_prefill_causal_naive")
    spec = schedule.launch
    problem = attention_problem(schedule, spec.groups, spec.outputs, spec.softmax_scale)
    inputs = make_inputs(problem, 3)
    ev = Evaluation(schedule, derive_channels(schedule),
                    Machine(machine_buffers(problem, inputs, len(schedule.programs))))
    want = np.asarray(reference(problem, inputs, 0, FLOAT64), dtype=float)
    for r, prog in enumerate(schedule.programs):
        store = next(op for op in prog.ops if op.kind is OpKind.STORE)
        arg = store.args[0]
        assert isinstance(arg, ValueRef)
        got = np.asarray(ev.value(r, arg.id), dtype=float).reshape(-1)
        base = problem.q_base(r)
        assert base is not None
        rows = want[base:base + problem.S_q].reshape(-1)[store.offset:store.offset + got.size]
        assert np.max(np.abs(got - rows)) < 1e-2 * np.max(np.abs(inputs.v[0]))


# --- the bound against the search, on random masked launches -----------------------------


@st.composite
def masked_rings(draw: Any) -> tuple[int, int, str, float]:
    zig = draw(st.booleans())
    mask = draw(st.sampled_from(["causal", "causal:1", "window:3", "window:6", "padding:5",
                                 "padding:2"]))
    return (draw(st.integers(1, 3)), draw(st.sampled_from([2, 4])),
            mask + ("@zigzag" if zig else ""), draw(st.sampled_from([1.0, 16.0])))


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(masked_rings())
def test_no_input_tried_exceeds_the_masked_rounding_bound(case: tuple[int, int, str, float]
                                                         ) -> None:
    n, s, mask, b = case
    schedule = _ring(n, s, mask)
    p = _numeric(schedule, b, tol=1.0)
    if p.status is Status.VIOLATED:
        assert "is nan on the machine" in p.message, p.message   # a real empty row
        return
    assert p.status is Status.PROVED, (case, p.message)
    if p.error_bound is None:
        return
    table = derive_channels(schedule)
    sem = semantic_analysis(schedule, table, None, b)
    assert sem.analysis is not None and sem.problem is not None
    stores = [(o.rank, o.store) for o in sem.analysis.outputs if o.verdict.equal]
    worst = worst_element(schedule, table, sem.problem, stores,
                          families(sem.problem, b, math.inf))
    if worst is None:
        return
    worst = climb(schedule, table, sem.problem,
                  signed_v(schedule, table, sem.problem, worst, b), b, math.inf, 10)
    limit = p.error_bound + (p.error_floor or 0.0) / worst.max_v
    assert worst.error <= limit, (case, worst.family, worst.error, limit)


def test_a_max_floored_at_minus_1e30_is_proved_while_every_query_sees_a_key() -> None:
    schedule = trace_kernel(kernel_spec("masked_numeric.py::padded_floor"), pes=1)
    assert _numeric(schedule).status is Status.PROVED


def test_o_over_l_of_a_row_the_mask_empties_is_violated_at_the_division() -> None:
    # the -1e30 floor keeps exp finite, but the row sees no key: ℓ = 0 and o / ℓ = 0 / 0
    schedule = trace_kernel(kernel_spec("masked_numeric.py::padded_floor"), pes=1,
                            args=(("pad", 0),), mask="padding:1")
    p = _numeric(schedule)
    assert p.status is Status.VIOLATED, p.message
    assert f"masked_numeric.py:{line_of(KERNELS, 'DIV-LINE')}" in p.message
    assert "divides 0 by 0" in p.message and "is nan on the machine" in p.message
