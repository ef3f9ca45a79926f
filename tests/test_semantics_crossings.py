"""The crossing reader (verify/semantics/crossings.py) against the exhaustive one: the
same verdict and the same first wrong pair on the outputs of masked launches, reading a
few points instead of every query."""

from __future__ import annotations

import pytest
from semantic_helpers import KERNELS

from meshproof.model.channels import derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.trace import trace
from meshproof.verify.semantics import semantic_analysis
from meshproof.verify.semantics.analysis import _coords_for
from meshproof.verify.semantics.crossings import count_masked, crossing_points

RING = str(KERNELS / "masked_variants.py") + "::ring_masked"
CASES = [
    ("causal", {}), ("causal", {"lead": 1}), ("causal", {"lead": -1}),
    ("causal:2", {"param": 2}), ("window:5", {"kind": 1, "param": 5}),
    ("window:6", {"kind": 1, "param": 5}), ("window:5", {"kind": 1, "param": 6}),
    ("padding:13", {"kind": 2, "param": 13}), ("padding:13", {"kind": 2, "param": 12}),
    ("causal@zigzag", {"zigzag": 1}), ("causal@zigzag", {"zigzag": 1, "swap": 1}),
    ("window:5@zigzag", {"kind": 1, "param": 5, "zigzag": 1}),
    ("causal", {"nomask": 1}),
    ("causal@striped", {"striped": 1}), ("causal@striped", {"striped": 1, "lead": 1}),
    ("window:6@striped", {"kind": 1, "param": 6, "striped": 1}),
    ("window:5@striped", {"kind": 1, "param": 6, "striped": 1}),
    ("padding:13@striped", {"kind": 2, "param": 13, "striped": 1}),
    ("causal@striped", {"striped": 1, "strict": 1}), ("causal@striped", {}),
]


def test_crossing_points_include_every_crossing_and_the_ends() -> None:
    pts = crossing_points([(1, 0), (0, 5), (-1, 9)], 12)
    assert {0, 11, 5, 4} <= set(pts) and len(pts) < 12


@pytest.mark.parametrize(("mask", "kernel"), CASES, ids=lambda x: str(x))
def test_the_crossing_reader_agrees_with_the_exhaustive_one(mask: str,
                                                            kernel: dict[str, int]) -> None:
    ref = resolve_kernel(RING)
    args = {"n_ranks": 4, "S_q": 8, "S_kv_per_rank": 8, "h_q": 1, "h_kv": 1, "d_head": 4,
            "on_cubes": 1, **kernel}
    schedule = trace(ref, build_launch(ref, LaunchOptions(
        wiring="cube_ring", pes=1, cubes=4, harness="prefill", mask=mask,
        args=tuple(sorted(args.items())))))
    sem = semantic_analysis(schedule, derive_channels(schedule))
    assert sem.analysis is not None
    a = sem.analysis
    domain = a.forms.domain.algebra
    for out in a.outputs:
        if out.form is None or out.counts is None:
            continue
        value = a.value(out.rank, out.store.args[0].id)  # type: ignore[union-attr]
        placed = _coords_for(domain, out.rank, out.store.offset, value)  # type: ignore[arg-type]
        assert not isinstance(placed, str)
        judged, coords = placed
        sizes = {d.id: d.size for d in judged.layout.digits}
        group = a.problem.group_of[out.rank]
        fast = count_masked(judged.form, a.problem, group, coords[0], sizes)
        slow = count_masked(judged.form, a.problem, group, coords[0], sizes, exhaustive=True)
        assert (fast.wrong, fast.unknown) == (slow.wrong, slow.unknown), out.rank
        assert fast.points <= slow.points
