"""model/tolerance.py: one table for the simulator's check and numeric_safety's default."""

from __future__ import annotations

from helpers import trace_kernel

from meshproof.model.tolerance import TOLERANCE_RULE, tolerance_for, tolerance_source
from meshproof.sim import checking
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.result import NumericResult


def test_the_simulator_and_the_verifier_read_the_same_tolerance() -> None:
    schedule = trace_kernel("mesh_mlo_1d", pes=2)
    assert checking.tolerance_for is tolerance_for and checking.TOLERANCE_RULE is TOLERANCE_RULE
    tol, used = tolerance_for(schedule)
    assert tol == 1e-2 and "f16" in used
    assert tolerance_source(schedule) == "the simulator's for a schedule using f16"
    ns = verify(schedule, VerifyConfig(only=frozenset())).property("numeric_safety")
    assert isinstance(ns, NumericResult) and ns.tolerance == tol
