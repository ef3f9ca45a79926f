"""Masked launches end to end (verify/semantics/masks.py, guards.py, masked_ref.py,
crossings.py, mask_departure.py, sparse_cone.py): random masked ring prefills against the
exact float64 evaluation of the masked reference, and each mutation named at its line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import TEST_KERNELS, kernel_spec, line_of, trace_kernel, verify_kernel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshproof.model.channels import derive_channels
from meshproof.model.problem import attention_problem
from meshproof.model.schedule import OpKind, Schedule, ValueRef
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property
from meshproof.verify.result import Status
from meshproof.verify.semantics.numeric import FLOAT64, Inputs
from meshproof.verify.semantics.witness import make_inputs, numeric_evaluation, reference

VARIANTS = TEST_KERNELS / "masked_variants.py"
KERNEL = kernel_spec("masked_variants.py::ring_masked")
AE, EO = Property.ATTENTION_EQUIVALENCE, Property.EXACTLY_ONCE_MERGE
SEMANTIC_ONLY = VerifyConfig(only=(AE, EO))


def _launch(n: int, s: int, mask: str, h_q: int = 1, h_kv: int = 1, **kernel: int
            ) -> Schedule:
    args = {"n_ranks": n, "S_q": s, "S_kv_per_rank": s, "h_q": h_q, "h_kv": h_kv,
            "d_head": 4, "on_cubes": 1, **kernel}
    return trace_kernel(KERNEL, wiring="cube_ring", pes=1, cubes=n, harness="prefill",
                        args=tuple(args.items()), mask=mask)


def _oracle(schedule: Schedule, inputs: Inputs | None = None) -> bool:
    """Whether every stored output equals the masked reference on seeded inputs (the
    exact-semantics float64 evaluation of the schedule, nan included)."""
    spec = schedule.launch
    problem = attention_problem(schedule, spec.groups, spec.outputs, spec.softmax_scale)
    inputs = inputs if inputs is not None else make_inputs(problem, 7)
    ev = numeric_evaluation(schedule, derive_channels(schedule), problem, inputs)
    for r, prog in enumerate(schedule.programs):
        base = problem.q_base(r)
        if base is None:
            continue
        want = np.asarray(reference(problem, inputs, problem.group_of[r], FLOAT64,
                                    (base, base + problem.S_q)), dtype=float).reshape(-1)
        for op in prog.ops:
            if op.kind is not OpKind.STORE or op.ptr != "o_ptr":
                continue
            arg = op.args[0]
            assert isinstance(arg, ValueRef)
            val = ev.value(r, arg.id)
            if val is None:
                return False
            got = np.asarray(val.data, dtype=float).reshape(-1)
            with np.errstate(all="ignore"):
                if not np.allclose(got, want[op.offset:op.offset + got.size], rtol=1e-9,
                                   atol=1e-9):
                    return False
    return True


MASKS = st.sampled_from(["causal", "causal:1", "causal:-1", "window:3", "window:6",
                         "padding:5", "padding:9"])


@st.composite
def launches(draw: Any) -> tuple[int, int, str, dict[str, int], int, int]:
    n = draw(st.integers(1, 4))
    lay = draw(st.sampled_from(["", "@zigzag", "@striped"]))
    zig = lay == "@zigzag"
    s = draw(st.sampled_from([2, 4] if zig else [1, 2, 3, 4]))
    text = draw(MASKS)
    kind = {"causal": 0, "window": 1, "padding": 2}[text.split(":")[0]]
    param = int(text.split(":")[1]) if ":" in text else 0
    kernel = {"kind": kind, "param": param, "zigzag": int(zig),
              "striped": int(lay == "@striped")}
    mutation = draw(st.sampled_from(["", "", "lead+", "lead-", "strict", "nomask", "swap",
                                     "layout"]))
    if mutation.startswith("lead"):
        kernel["lead"] = 1 if mutation == "lead+" else -1
    elif mutation == "layout":      # the kernel's layout is not the declared one
        kernel["striped"], kernel["zigzag"] = (0, 0) if lay else (1, 0)
    elif mutation:
        kernel[mutation] = 1
    gqa = draw(st.sampled_from([(1, 1), (2, 1)]))
    return n, s, text + lay, kernel, gqa[0], gqa[1]


COUNTS = {"proved": 0, "violated": 0, "unknown": 0}     # for a look with -s


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(launches())
def test_random_masked_launches_agree_with_the_exact_masked_reference(
        launch: tuple[int, int, str, dict[str, int], int, int]) -> None:
    _agrees_with_the_exact_masked_reference(launch)


@pytest.mark.scale     # the same, eight times as many launches: make bench
@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(launches())
def test_many_random_masked_launches_agree_with_the_exact_masked_reference(
        launch: tuple[int, int, str, dict[str, int], int, int]) -> None:
    _agrees_with_the_exact_masked_reference(launch)


def _agrees_with_the_exact_masked_reference(
        launch: tuple[int, int, str, dict[str, int], int, int]) -> None:
    n, s, mask, kernel, h_q, h_kv = launch
    schedule = _launch(n, s, mask, h_q, h_kv, **kernel)
    verdict = verify(schedule, SEMANTIC_ONLY)
    by = {r.name: r for r in verdict.properties}
    ae = by[AE]
    equal = _oracle(schedule)
    COUNTS[ae.status.value] += 1
    if ae.status is Status.PROVED:
        assert equal, (launch, ae.message)
        assert by[EO].status is not Status.VIOLATED, (launch, by[EO].message)
    if ae.status is Status.VIOLATED:
        assert ae.counterexample is not None
        w = ae.counterexample.details.witness      # type: ignore[union-attr]
        if w is not None:
            assert w.precision == "40-digit" and w.rel_err > 1e-6, (launch, w)
    # unknowns are counted and bounded: only a chunk of one row (S_q = 1, or zigzag with
    # S_q = 2) has no digit to sum over, so its sums are no row sums (as without masks),
    # and a kernel whose mask hides every block stores nothing
    rows = s // 2 if "@zigzag" in mask else s
    for r in (ae, by[EO]):
        if r.status is Status.UNKNOWN:
            assert rows == 1 or r.message.startswith("no rank stores an output"), \
                (launch, r.message)


# --- each mutation named at the line it touched ------------------------------------------


def _where_line() -> int:
    return line_of(VARIANTS, "WHERE-LINE")


@pytest.mark.parametrize(("kernel", "line_of_marker", "words"), [
    ({"lead": 1}, "WHERE-LINE", "keeps key position 1 for query position 0"),
    ({"nomask": 1}, "FOLD-LINE", None),
])
def test_each_mutation_reports_the_line_it_touched(kernel: dict[str, int],
                                                   line_of_marker: str,
                                                   words: str | None) -> None:
    schedule = _launch(2, 4, "causal", **kernel)
    ae = {r.name: r for r in verify(schedule, SEMANTIC_ONLY).properties}[AE]
    assert ae.status is Status.VIOLATED, ae.message
    assert "query position 0 counts key position 1" in ae.message
    assert ae.counterexample is not None
    texts = [(d.message, d.source) for d in ae.counterexample.diagnostics]
    if words is not None:
        hit = [src for msg, src in texts if words in msg]
        assert hit and hit[0] is not None and hit[0].line == _where_line(), texts
    else:
        hit = [msg for msg, src in texts if "unmasked" in msg]
        assert hit, texts


def test_the_off_by_one_builtin_names_the_where_the_comparison_and_a_40_digit_witness(
) -> None:
    from meshproof.kernels import mesh_causal

    src = Path(mesh_causal.__file__)
    where, cmp = line_of(src, "tl.where("), line_of(src, "allowed = k_pos")
    r = {p.name: p for p in verify_kernel("ring_prefill_causal_off_by_one").properties}
    ae = r[AE]
    assert ae.status is Status.VIOLATED
    assert "query position 0 counts key position 1 1 time(s) in the numerator and 1 in " \
        "the denominator, which the causal mask hides (expected 0)" in ae.message
    assert ae.counterexample is not None
    msgs = {d.message: d for d in ae.counterexample.diagnostics}
    depart = [d for m, d in msgs.items() if m.startswith("the tl.where here keeps key "
                                                          "position 1 for query position 0")]
    assert depart and depart[0].source is not None and depart[0].source.line == where
    assert f"mesh_causal.py:{cmp}" in depart[0].message
    w = ae.counterexample.details.witness      # type: ignore[union-attr]
    assert w is not None and w.precision == "40-digit" and (w.got, w.want) == (0.5, 0.0)
    assert w.endpoint.describe() == "(cube 0, pe 0)"
    assert r[EO].status is Status.VIOLATED


@pytest.mark.parametrize("name", ["ring_prefill_causal_naive", "ring_prefill_causal_zigzag"])
def test_the_causal_builtins_are_proved(name: str) -> None:
    r = {p.name: p for p in verify_kernel(name).properties}
    assert r[AE].status is Status.PROVED and r[EO].status is Status.PROVED
    assert "mask allows" in r[AE].message and "hides zero times" in r[EO].message
    assert r[Property.NUMERIC_SAFETY].status is Status.PROVED, \
        r[Property.NUMERIC_SAFETY].message


@pytest.mark.parametrize(("name", "mask"), [("mesh_kv", "causal"),
                                            ("ring_prefill_causal_zigzag", "causal@contiguous"),
                                            ("ring_prefill_causal_naive", "causal@zigzag")])
def test_a_kernel_that_masks_otherwise_than_declared_is_violated(name: str, mask: str
                                                                  ) -> None:
    r = {p.name: p for p in verify_kernel(name, mask=mask).properties}
    assert r[AE].status is Status.VIOLATED, r[AE].message
    assert r[EO].status is Status.VIOLATED, r[EO].message


def test_the_swapped_zigzag_chunks_are_violated() -> None:
    schedule = _launch(2, 4, "causal@zigzag", zigzag=1, swap=1)
    r = {p.name: p for p in verify(schedule, SEMANTIC_ONLY).properties}
    assert r[AE].status is Status.VIOLATED and r[EO].status is Status.VIOLATED
    assert not _oracle(schedule)


def test_a_strict_comparison_is_never_proved_and_the_exact_reference_differs() -> None:
    schedule = _launch(2, 4, "causal", strict=1)
    r = {p.name: p for p in verify(schedule, SEMANTIC_ONLY).properties}
    assert r[AE].status is not Status.PROVED and r[EO].status is not Status.PROVED
    assert not _oracle(schedule)


@pytest.mark.parametrize("mask", ["window:3", "window:6", "padding:5", "causal:1",
                                  "window:3@zigzag", "causal@striped", "window:5@striped",
                                  "padding:7@striped", "causal:1@striped"])
def test_correct_window_padding_and_offset_kernels_are_proved(mask: str) -> None:
    text, _, lay = mask.partition("@")
    kind = {"causal": 0, "window": 1, "padding": 2}[text.split(":")[0]]
    param = int(text.split(":")[1]) if ":" in text else 0
    schedule = _launch(3, 4, mask, kind=kind, param=param, zigzag=int(lay == "zigzag"),
                       striped=int(lay == "striped"))
    r = {p.name: p for p in verify(schedule, SEMANTIC_ONLY).properties}
    assert r[AE].status is Status.PROVED, r[AE].message
    assert r[EO].status is Status.PROVED, r[EO].message
    assert _oracle(schedule)


@pytest.mark.parametrize(("mask", "kernel"), [
    ("causal@striped", {"lead": 1}), ("causal@striped", {"strict": 1}),
    ("causal@striped", {"nomask": 1}), ("causal", {}), ("window:4@striped", {"param": 3}),
])
def test_striped_mutations_are_violated_with_a_40_digit_witness(mask: str,
                                                                kernel: dict[str, int]
                                                                ) -> None:
    kind = {"causal": 0, "window": 1, "padding": 2}[mask.split(":")[0].split("@")[0]]
    schedule = _launch(3, 4, mask, kind=kind, striped=1, **kernel)
    r = {p.name: p for p in verify(schedule, SEMANTIC_ONLY).properties}
    assert r[AE].status is Status.VIOLATED, r[AE].message
    assert r[EO].status is Status.VIOLATED, r[EO].message
    assert not _oracle(schedule)
    w = r[AE].counterexample.details.witness  # type: ignore[union-attr]
    assert w is not None and w.precision == "40-digit"


def test_a_window_one_wider_than_the_kernel_is_violated() -> None:
    schedule = _launch(3, 4, "window:4", kind=1, param=3)
    r = {p.name: p for p in verify(schedule, SEMANTIC_ONLY).properties}
    assert r[AE].status is Status.VIOLATED and r[EO].status is Status.VIOLATED
    assert "which the window:4 mask allows (expected 1)" in r[AE].message


def _window_chain(window: int, mask: str, s_q: int = 1) -> Schedule:
    args = {"n_ranks": 8, "S_q": s_q, "S_kv_per_rank": 8, "h_q": 4, "h_kv": 2, "d_head": 8,
            "window": window}
    return trace_kernel(kernel_spec("masked_variants.py::decode_window_chain"),
                        wiring="pe_line", pes=8, harness="decode",
                        args=tuple(args.items()), mask=mask)


@pytest.mark.parametrize("s_q", [1, 4])
def test_the_sliding_window_decode_chain_is_proved_and_a_wider_window_violated(s_q: int
                                                                                ) -> None:
    ok = {p.name: p for p in verify(_window_chain(13, "window:13", s_q),
                                    SEMANTIC_ONLY).properties}
    assert ok[AE].status is Status.PROVED and ok[EO].status is Status.PROVED
    for wrong in ("window:14", "window:12"):
        bad = {p.name: p for p in verify(_window_chain(13, wrong, s_q),
                                         SEMANTIC_ONLY).properties}
        assert bad[AE].status is Status.VIOLATED and bad[EO].status is Status.VIOLATED
        assert f"the {wrong} mask" in bad[AE].message


# --- != and "or" masks: a sum of disjoint guards, or unknown with the reason -------------

MUTANTS = TEST_KERNELS / "causal_mutants.py"


def _or_launch(style: int) -> Schedule:
    # d_head 4: a scale of 1/2 is exact in f32, so the float64 oracle can ask for equality
    args = {"n_ranks": 8, "S_q": 8, "S_kv_per_rank": 8, "h_q": 1, "h_kv": 1, "d_head": 4,
            "style": style}
    return trace_kernel(kernel_spec("causal_mutants.py::ring_causal_or_masks"),
                        wiring="pe_ring", pes=8, harness="prefill", args=tuple(args.items()),
                        mask="causal")


@pytest.mark.parametrize("style", [1, 2, 3])
def test_ne_and_disjoint_or_masks_are_proved(style: int) -> None:
    """(k < q) + (k == q), (k <= q + 1) * (k != q + 1), where((k > q) + (k < q - 100),
    -inf, s): each is the causal mask."""
    schedule = _or_launch(style)
    r = {p.name: p for p in verify(schedule, SEMANTIC_ONLY).properties}
    assert r[AE].status is Status.PROVED, r[AE].message
    assert r[EO].status is Status.PROVED, r[EO].message
    assert _oracle(schedule)


def test_an_or_whose_masks_overlap_is_unknown_with_the_reason() -> None:
    """(k <= q) + (k == q) is 2 on the diagonal: not a mask of the algebra (the kernel's
    where treats 2 as true, so its output is right: never a violation here)."""
    schedule = _or_launch(4)
    r = {p.name: p for p in verify(schedule, SEMANTIC_ONLY).properties}
    assert r[AE].status is Status.UNKNOWN
    assert "of masks that are not shown disjoint" in r[AE].message
    assert _oracle(schedule)


def test_a_penalty_outside_an_or_is_not_proved_and_a_wrong_or_is_named_at_its_line(
) -> None:
    for style in (5, 6):
        schedule = _or_launch(style)
        r = {p.name: p for p in verify(schedule, SEMANTIC_ONLY).properties}
        assert r[AE].status is not Status.PROVED
        assert 'selects -inf outside an "or" of masks' in r[AE].message
        assert not _oracle(schedule)
    assert r[AE].status is Status.VIOLATED and r[AE].counterexample is not None
    lines = {d.source.line for d in r[AE].counterexample.diagnostics if d.source}
    assert line_of(MUTANTS, "OR-LINE") in lines
