"""gate/outcome.py: an out-of-tolerance run names the static property that explains it, and
a run whose math is proved is cross-checked against the proved rounding bound."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from meshproof.errors import InternalError
from meshproof.gate.outcome import CaseOutcome, NumericOutcome, explain
from meshproof.gate.pipeline import one_launch, run_case
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.sim.config import SimConfig
from meshproof.verify.properties import Property
from meshproof.verify.result import Status

NO_TIMING = SimConfig(timing=False)


def _run(kernel: str, **opts: object) -> CaseOutcome:
    ref = resolve_kernel(kernel)
    launch = build_launch(ref, LaunchOptions.from_mapping(opts, "test"))
    return run_case(one_launch(ref, launch), simulate=True, sim_config=NO_TIMING)


def test_an_out_of_tolerance_run_is_explained_by_the_violated_property() -> None:
    out = _run("mesh_mlo_1d_normalised_merge", pes=4)
    assert out.numeric is not None and not out.numeric.ok
    assert out.numeric.explained_by.startswith("attention_equivalence: ")
    assert "explained by attention_equivalence" in out.numeric.text()


def test_a_run_in_tolerance_needs_no_explanation() -> None:
    out = _run("mesh_mlo_1d", pes=4)
    assert out.numeric is not None and out.numeric.ok and out.numeric.explained_by == ""


def test_a_simulated_error_above_the_proved_rounding_bound_is_an_internal_error() -> None:
    """Mistake caught: a simulator (or proof) bug that lets a proved kernel's numbers drift
    past the first-order rounding bound numeric_safety proved."""
    out = _run("mesh_mlo_1d", pes=4)
    assert out.numeric is not None and out.verdict is not None and out.simulation is not None
    drifted = replace(out.numeric, max_abs_err=1e3)
    with pytest.raises(InternalError, match="the simulator and the proofs disagree"):
        explain(drifted, out.verdict.verdicts[0], out.simulation.together)


def test_the_simulated_error_of_each_built_in_kernel_stays_under_its_bound() -> None:
    for name in ("mesh_mlo_1d", "mesh_mlo_2d", "ring_mlo", "mesh_kv"):
        out = _run(name)
        assert out.numeric is not None and out.verdict is not None
        verdict = out.verdict.verdicts[0]
        ns = verdict.property("numeric_safety")
        bound = getattr(ns, "error_bound", None)
        assert bound is not None
        assert out.numeric.max_abs_err is not None
        assert out.simulation is not None
        sim = out.simulation.together  # one launch: its whole run
        assert sim.numeric is not None
        v_max = sim.numeric.max_abs_v
        assert 0 < v_max <= ns.input_bound
        assert out.numeric.max_abs_err <= bound * v_max + (ns.error_floor or 0.0), name
        # explain() is the check run_case applies: it passes quietly here
        assert explain(out.numeric, verdict, sim) == out.numeric


def test_outcomes_keep_the_explanation_through_json() -> None:
    n = NumericOutcome(False, 0.7, 0.3, 0.01, "", "attention_equivalence: m")
    assert NumericOutcome.from_json(n.to_json()) == n



@pytest.fixture(scope="module")
def verified() -> CaseOutcome:
    """mesh_mlo_1d on 4 PEs, verified only (the culprits are the verdict's)."""
    ref = resolve_kernel("mesh_mlo_1d")
    launch = build_launch(ref, LaunchOptions.from_mapping({"pes": 4}, "test"))
    return run_case(one_launch(ref, launch), simulate=False)


def test_a_proved_numeric_verdict_keeps_its_culprit_lines_through_the_cache(
        verified: CaseOutcome) -> None:
    """Idiom proved: mesh_mlo_1d's numeric_safety is proved, and its bound's shares by
    mechanism, with the kernel lines, ride along (the cache's form keeps them; the gate's
    JSON does not change)."""
    out = verified
    ns = out.property(Property.NUMERIC_SAFETY)
    assert ns is not None and ns.status is Status.PROVED
    assert ns.culprits and all("%" in c for c in ns.culprits)
    assert any("mesh_mlo.py:" in c for c in ns.culprits)
    # each site names the dtype its op rounds to, as verify's message does
    assert all(re.search(r"mesh_mlo\.py:\d+ \((f16|f32|bf16)\)", c) for c in ns.culprits)
    assert "culprits" not in ns.to_json()
    again = CaseOutcome.from_json(out.to_json()).property(Property.NUMERIC_SAFETY)
    assert again is not None and again.culprits == ns.culprits


def test_other_properties_carry_no_culprits(verified: CaseOutcome) -> None:
    """Mistake caught: a culprit list read off a result that has none (a property other
    than numeric_safety) would print empty shares in the report."""
    out = verified
    assert all(p.culprits == () for p in out.properties
               if p.name is not Property.NUMERIC_SAFETY)
