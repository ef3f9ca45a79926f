"""The masked built-ins of meshproof/kernels/mesh_masked.py: the sliding-window decode
proved under its window:W and violated under window:W±1, the padded prefill proved under
its padding:LEN and violated under LEN±1, both within tolerance in the simulator."""

from __future__ import annotations

import pytest
from helpers import trace_kernel, verify_kernel

from meshproof.kernels import BUILTIN_KERNELS
from meshproof.sim.api import simulate
from meshproof.verify.api import VerifyConfig
from meshproof.verify.properties import Property
from meshproof.verify.result import Status

AE, EO = Property.ATTENTION_EQUIVALENCE, Property.EXACTLY_ONCE_MERGE
SEMANTIC = VerifyConfig(only=(AE, EO, Property.NUMERIC_SAFETY))


def _by(name: str, **options: object) -> dict[Property, Status]:
    return {r.name: r.status for r in verify_kernel(name, SEMANTIC, **options).properties}


@pytest.mark.parametrize(("name", "mask"), [("line_decode_window", "window:20"),
                                            ("ring_prefill_padded", "padding:45")])
def test_the_masked_builtins_are_proved_under_their_own_mask(name: str, mask: str) -> None:
    assert BUILTIN_KERNELS[name].mask == mask
    by = _by(name)
    assert all(s is Status.PROVED for s in by.values()), by
    assert len(by) == 3
    assert simulate(trace_kernel(name)).ok


@pytest.mark.parametrize(("name", "mask", "words"), [
    ("line_decode_window", "window:21", "key position 43 0 time(s)"),
    ("line_decode_window", "window:19", "key position 44 1 time(s)"),
    ("ring_prefill_padded", "padding:46", "key position 45 0 time(s)"),
    ("ring_prefill_padded", "padding:44", "key position 44 1 time(s)"),
])
def test_one_key_more_or_less_than_the_kernel_masks_is_violated(name: str, mask: str,
                                                                words: str) -> None:
    r = {p.name: p for p in verify_kernel(name, VerifyConfig(only=(AE, EO)),
                                          mask=mask).properties}
    assert r[AE].status is Status.VIOLATED and words in r[AE].message, r[AE].message
    assert r[EO].status is Status.VIOLATED
    assert not simulate(trace_kernel(name, mask=mask)).ok


def test_another_window_is_proved_under_its_own_mask() -> None:
    by = _by("line_decode_window", args=(("window", 13),), mask="window:13")
    assert all(s is Status.PROVED for s in by.values()), by
