"""Second adversarial review of tracing (issue 10), kernels of tests/kernels/review2_tracing.py.

One test per finding. Tests of real bugs are `xfail(strict=True)`: they state what meshproof
should do, fail today, and flip when the bug is fixed. Plain tests pin what already works.
"""

from __future__ import annotations

import pytest
from helpers import kernel_spec, trace_kernel

from meshproof.errors import (
    DataDependentControlFlow,
    KernelRaised,
    MeshproofError,
    ShapeError,
    UnsupportedArgument,
    UnsupportedOp,
)
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property
from meshproof.verify.result import Status

FILE = "review2_tracing.py"
ONE = {"pes": 1, "wiring": "pe_line"}
AE = Property.ATTENTION_EQUIVALENCE


def _trace(name: str, **opts: object) -> object:
    return trace_kernel(kernel_spec(f"{FILE}::{name}"), **{**ONE, **opts})


def _all_proved(name: str, **opts: object) -> bool:
    s = _trace(name, **opts)
    v = verify(s, VerifyConfig(queue_depth=s.launch.queue_depth))  # type: ignore[attr-defined]
    return all(p.status is Status.PROVED for p in v.properties)


def _refused_or_not_proved(name: str, error: type[MeshproofError], **opts: object) -> None:
    """What a kernel that meshproof cannot model must get: its error, never all proved."""
    try:
        proved = _all_proved(name, **opts)
    except error:
        return
    assert not proved, f"{name} is proved"


# --- false "proved": an error meshproof raised was swallowed by the kernel -------------


def test_a_refused_mask_caught_by_the_kernel_is_still_refused() -> None:
    _refused_or_not_proved("masked_store_fallback", UnsupportedArgument)
    with pytest.raises(UnsupportedArgument, match=r"review2_tracing\.py:\d+: rank \(cube 0, "
                       r"pe 0\): error: tl\.store\(mask=\.\.\.\) is not modelled.*\(the "
                       r"kernel caught this error and went on; meshproof refuses the trace all "
                       r"the same"):
        _trace("masked_store_fallback")


def test_a_data_dependent_branch_caught_by_the_kernel_is_still_refused() -> None:
    _refused_or_not_proved("data_branch_swallowed", DataDependentControlFlow)


# --- false "proved": state shared between ranks ----------------------------------------


def test_a_module_global_set_by_an_earlier_rank_does_not_steer_a_later_one() -> None:
    _refused_or_not_proved("cached_program_id", MeshproofError, pes=2)


# --- an op that returns something plausible but wrong ----------------------------------


def test_len_of_a_0d_tensor_is_refused() -> None:
    with pytest.raises(MeshproofError):
        _trace("len_of_scalar_handle")


# --- what works (regression guards) ----------------------------------------------------


@pytest.mark.parametrize(("name", "error"), [
    ("numpy_sum_of_handle", UnsupportedOp),          # np.asarray iterates the handle
    ("python_max_of_handles", DataDependentControlFlow),
    ("while_on_data", DataDependentControlFlow),
    ("range_over_tensor", DataDependentControlFlow),
    ("float_of_tensor", DataDependentControlFlow),
    ("negative_step_shape", UnsupportedOp),
    ("numpy_ufunc_on_handle", KernelRaised),         # __array_ufunc__ = None: a TypeError
    ("program_id_2", ShapeError),
])
def test_data_and_numpy_uses_of_handles_are_refused(name: str,
                                                    error: type[MeshproofError]) -> None:
    with pytest.raises(error):
        _trace(name)


@pytest.mark.parametrize("name", ["keyword_hint_load", "handle_in_list"])
def test_hints_and_hashing_are_traced_and_proved(name: str) -> None:
    assert _all_proved(name)
