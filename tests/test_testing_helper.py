"""meshproof.testing: assert_verified / assert_violates as a kernel team would use them."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from meshproof.errors import (
    BadInput,
    ConfigError,
    KernelLoadError,
    LaunchError,
)
from meshproof.model.loader import load_module
from meshproof.testing import assert_verified, assert_violates
from meshproof.verify.result import Status

DATA = Path(__file__).parent / "data" / "gate"
USER = DATA / "kernels" / "user_kernels.py"
PAIR = {"S_q": 1, "S_kv_per_rank": 8, "h_q": 1, "h_kv": 1, "d_head": 4}
DIAGNOSTIC = re.compile(r"^  \S+\.py:\d+: rank \(cube \d+, pe \d+\): error: ", re.M)


def test_assert_verified_returns_the_verdict() -> None:
    verdict = assert_verified("mesh_mlo_2d", mesh="2x4", system="2x4x4", cube_start=8,
                              queue_depth=3, tolerance=0.1)
    assert verdict.ok
    assert verdict.launch.cube_start == 8 and verdict.launch.queue_depth == 3
    assert verdict.min_queue_depth == 3


def test_assert_verified_fails_with_the_counterexample() -> None:
    with pytest.raises(AssertionError) as info:
        assert_verified("mesh_mlo_1d_recv_first", pes=4)
    message = str(info.value)
    assert message.startswith("mesh_mlo_1d_recv_first on pe_line (1x4x4), cubes 0..0 x 4 PEs")
    assert "deadlock_freedom violated" in message
    lines = DIAGNOSTIC.findall(message)
    assert lines and all("meshproof/kernels/mesh_mlo.py:" in line for line in lines)


def test_assert_violates_passes_for_a_known_bad_kernel() -> None:
    verdict = assert_violates("mesh_mlo_1d_recv_first", "deadlock_freedom", pes=4)
    assert verdict.property("deadlock_freedom").status is Status.VIOLATED
    # deadlocked at every depth: its outputs are never written either
    assert_violates("mesh_mlo_1d_recv_first", "deadlock_freedom", "exactly_once_merge",
                    "attention_equivalence", exactly=True, pes=4, tolerance=0.1)


def test_assert_violates_fails_when_the_property_holds() -> None:
    with pytest.raises(AssertionError, match="deadlock_freedom: expected violated, got proved"):
        assert_violates("mesh_mlo_1d", "deadlock_freedom", pes=4)


def test_exactly_reports_extra_violations() -> None:
    # ring_mlo on an open line: the missing wrap-around link also deadlocks the ring
    assert_violates("ring_mlo", "direction_legality", wiring="pe_line", pes=4)
    with pytest.raises(AssertionError) as info:
        assert_violates("ring_mlo", "direction_legality", exactly=True, wiring="pe_line",
                        pes=4)
    assert "and everything else proved" in str(info.value)
    assert "deadlock_freedom violated" in str(info.value)


def test_user_file_kernel_by_path_and_by_function(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA)
    assert_verified("kernels/user_kernels.py::pair_decode", pes=2, args=PAIR)
    module = load_module(USER)
    assert_verified(module.pair_decode, pes=2, args=PAIR)
    with pytest.raises(AssertionError) as info:
        assert_verified(module.pair_decode_double_merge, pes=2, args=PAIR)
    message = str(info.value)
    assert "exactly_once_merge violated" in message
    # the counterexample points into the user's file
    assert re.search(r"user_kernels\.py:\d+: rank \(cube 0, pe [01]\): error: ", message)
    assert_violates(module.pair_decode_recv_first, "deadlock_freedom", "exactly_once_merge",
                    "attention_equivalence", exactly=True, pes=2, args=PAIR)


def test_unknown_is_not_verified() -> None:
    with pytest.raises(AssertionError, match="unknown, not proved"):
        assert_verified("mesh_mlo_2d", mesh="4x4", timeout=1e-6)


def test_simulate_checks_numerics() -> None:
    assert_verified("mesh_mlo_1d", pes=4, simulate=True, tolerance=0.1)
    with pytest.raises(AssertionError, match="numerics out of tolerance"):
        assert_verified("mesh_mlo_1d_normalised_merge", pes=4, simulate=True)
    assert_violates("mesh_mlo_1d_normalised_merge", "exactly_once_merge",
                    "attention_equivalence", "numerics", exactly=True, pes=4, simulate=True,
                    tolerance=0.1)


def test_panel_shorthand() -> None:
    verdict = assert_verified(panel="multi_user_decode", tolerance=0.1)
    assert verdict.kernel == "mesh_mlo_2d" and verdict.launch.n_cubes == 4


def test_a_rounding_bound_above_the_tolerance_fails_assert_verified_and_says_why() -> None:
    """mesh_mlo_1d's bound on 4 PEs over 131,072 keys per rank at |inputs| <= 16 is
    1.7e-2·max|V|: above the simulator's 1e-2, numeric_safety is unknown, which
    assert_verified refuses; a stated score range or tolerance is the way to say what the
    kernel is used for."""
    with pytest.raises(AssertionError, match=r"numeric_safety: unknown, not proved: the "
                       r"rounding bound 1\.7e-2·max\|V\| exceeds the tolerance 1e-2"):
        assert_verified("mesh_mlo_1d", pes=4, args={"S_kv_per_rank": 131072})
    with pytest.raises(ConfigError, match="tolerance must be a positive, finite number"):
        assert_verified("mesh_mlo_1d", pes=4, tolerance=0)


def test_usage_errors_are_typed_not_assertions() -> None:
    with pytest.raises(LaunchError, match="needs at least one property"):
        assert_violates("mesh_mlo_1d")
    with pytest.raises(LaunchError, match="unknown property 'deadlock'"):
        assert_violates("mesh_mlo_1d", "deadlock")
    with pytest.raises(LaunchError, match="needs simulate=True"):
        assert_violates("mesh_mlo_1d", "numerics")
    with pytest.raises(LaunchError, match="has no parameter"):
        assert_verified("mesh_mlo_1d", args={"nope": 1})
    with pytest.raises(KernelLoadError, match="takes no `tl` parameter"):
        assert_verified(lambda x: x)
    with pytest.raises(KernelLoadError, match="unknown kernel"):
        assert_verified("no_such_kernel")


@pytest.mark.parametrize(("keywords", "needle"), [
    ({"timeout": -1.0}, "assert_verified: timeout must be a positive number"),
    ({"timeout": math.nan}, "assert_verified: timeout must be a positive number"),
    ({"sharded": []}, "assert_verified: sharded names no buffer"),
    ({"args": {"S_q": [1]}}, "assert_verified: args.S_q must be a number"),
])
def test_testing_helper_misuse_is_bad_input_not_a_failed_assertion(
        keywords: dict[str, Any], needle: str) -> None:
    with pytest.raises(BadInput) as caught:
        assert_verified("mesh_mlo_1d", **keywords)
    assert needle in str(caught.value)
    assert not isinstance(caught.value, AssertionError)
