"""Review of model/, verify/ and the CLI: each test pins a bug found by trying to break them.

The worst bug is a "proved" that should not be: kernels in tests/kernels/review_*.py are
numerically wrong in ways a naive count keeps at 1 and must never be certified.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from conftest import CliResult, kernel_spec, trace_kernel

from meshproof.verify.api import verify
from meshproof.verify.result import Status, Verdict

RunCli = Callable[[Sequence[str]], CliResult]


def _verify(name: str, **options: object) -> Verdict:
    options.setdefault("pes", 2)
    return verify(trace_kernel(kernel_spec(name), **options))


def _merge(name: str, **options: object) -> tuple[Status, str]:
    result = _verify(name, **options).property("exactly_once_merge")
    return result.status, result.message


# --- exactly_once_merge soundness -------------------------------------------------------

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
    assert "partial overwrites are not modelled" in message


@pytest.mark.parametrize(("kernel", "why"), [
    ("negated", "a negated partial or weight cancels instead of merging"),
    ("zeroed", "not a known positive constant"),
    ("shifted_weight", "a shifted weight may be zero or negative"),
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


def test_positive_constant_factors_are_still_rescalings() -> None:
    assert _verify("review_merge.py::positive_factors").ok


def test_softmax_partials_without_any_sharded_buffer_are_not_vacuously_proved() -> None:
    # Was "proved (vacuous)": the kernel names its KV buffers kc_ptr/vc_ptr, the default
    # --sharded k_ptr,v_ptr is narrowed to nothing, and a double merge went unchecked.
    status, message = _merge("review_merge.py::renamed_buffers")
    assert status is Status.UNKNOWN
    assert "name its KV buffers with --sharded" in message
    status, message = _merge("review_merge.py::renamed_buffers", sharded=("kc_ptr", "vc_ptr"))
    assert status is Status.VIOLATED and "max count 2" in message
