"""exactly_once_merge (verify/merge.py): never a "proved" for a wrong merge.

The kernels in tests/kernels/review_*.py are numerically wrong in ways a naive count
keeps at 1; they must never be certified, and the correct idioms must be.
"""

from __future__ import annotations

import pytest
from helpers import RunCli, kernel_spec, trace_kernel

from meshproof.verify.api import verify
from meshproof.verify.result import Status, Verdict


def _verify(name: str, **options: object) -> Verdict:
    options.setdefault("pes", 2)
    return verify(trace_kernel(kernel_spec(name), **options))


def _merge(name: str, **options: object) -> tuple[Status, str]:
    result = _verify(name, **options).property("exactly_once_merge")
    return result.status, result.message


def test_the_correct_two_rank_merge_is_proved() -> None:
    assert _verify("review_merge.py::good").ok


def test_a_partial_spilled_and_reloaded_keeps_its_counts() -> None:
    # Was proved: the reload from scratch was a constant, so o + reloaded(o) counted 1.
    status, message = _merge("review_merge.py::spill_reload")
    assert status is Status.VIOLATED
    assert "max count 2" in message
    assert _verify("review_merge.py::spill_reload_once").ok


def test_a_reload_that_mixes_stored_and_other_elements_is_not_certified() -> None:
    status, message = _merge("review_merge.py::spill_partly")
    assert status is Status.UNKNOWN
    assert "mixes a stored value with other elements" in message


@pytest.mark.parametrize(("kernel", "why"), [
    ("negated", "a negated partial or weight cancels instead of merging"),
    ("zeroed", "not a known positive constant"),
    ("shifted_weight", "not a known positive constant"),
    ("loaded_factor", "not a known positive constant"),
    ("product_of_partials", "dot of additive and additive values"),
])
def test_factors_that_may_cancel_or_drop_a_partial_are_not_proved(kernel: str,
                                                                   why: str) -> None:
    # Each was proved (exit 0): the counts stayed 1 while the partial was negated, zeroed,
    # scaled by a weight that can be <= 0 or by a loaded tensor, or multiplied by another.
    status, message = _merge(f"review_merge.py::{kernel}")
    assert status is Status.UNKNOWN
    assert why in message


@pytest.mark.parametrize("kernel", ["positive_factors", "clamped_scores", "from_empty_state"])
def test_correct_merges_in_other_styles_are_proved(kernel: str) -> None:
    # positive constants are rescalings; an elementwise clamp of scores keeps them scores
    # (was unknown: "dot of weight and data"); a (-inf, 0, 0) start state is shard-free
    # (was unknown: "sub of const and maxlike").
    assert _verify(f"review_merge.py::{kernel}").ok


def test_a_launch_where_every_rank_returns_at_once_is_not_all_proved(run_cli: RunCli) -> None:
    # Was exit 0, "all proved": a wrong --arg cube_start made every rank return at once.
    r = run_cli(["verify", "mesh_mlo_2d", "--cube-start", "8", "--arg", "cube_start=0"])
    assert r.code == 3
    assert "no rank ran any op (every rank returned at once)" in r.out


def test_only_the_final_contents_of_a_buffer_are_judged() -> None:
    # A provisional store that a later store fully rewrites never reaches the output: it
    # was judged anyway ("never merged", a false violation). A partial rewrite still is.
    assert _verify("review_merge.py::overwritten_store").ok
    status, message = _merge("review_merge.py::partly_overwritten_store")
    assert status is Status.VIOLATED and "never merged" in message


def test_softmax_partials_without_any_sharded_buffer_are_not_vacuously_proved() -> None:
    # Was "proved (vacuous)": the kernel names its KV buffers kc_ptr/vc_ptr, the default
    # --sharded k_ptr,v_ptr is narrowed to nothing, and a double merge went unchecked.
    status, message = _merge("review_merge.py::renamed_buffers")
    assert status is Status.UNKNOWN
    assert "name its KV buffers with --sharded" in message
    status, message = _merge("review_merge.py::renamed_buffers", sharded=("kc_ptr", "vc_ptr"))
    assert status is Status.VIOLATED and "max count 2" in message
