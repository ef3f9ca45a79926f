"""The causal ring prefill kernels (meshproof/kernels/mesh_causal.py): their natural
launch, the protocol proved, attention_equivalence and exactly_once_merge proved (the
off-by-one violated at its tl.where), numeric_safety proved on masked outputs, and the
simulator against masked float64 attention (in tolerance, the off-by-one out of it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import TEST_KERNELS, RunCli, kernel_spec, line_of, trace_kernel, verify_kernel

from meshproof.kernels import BUILTIN_KERNELS, mesh_causal
from meshproof.model.schedule import OpKind
from meshproof.sim.api import simulate
from meshproof.verify.api import VerifyConfig
from meshproof.verify.properties import Property
from meshproof.verify.result import Status

CAUSAL = ("ring_prefill_causal_naive", "ring_prefill_causal_zigzag",
          "ring_prefill_causal_off_by_one", "ring_prefill_causal_striped")
PROTOCOL = (Property.DIRECTION_LEGALITY, Property.LAUNCH_CONFINEMENT,
            Property.CHANNEL_MATCHING, Property.DEADLOCK_FREEDOM)
SEMANTIC = (Property.EXACTLY_ONCE_MERGE, Property.ATTENTION_EQUIVALENCE,
            Property.NUMERIC_SAFETY)


def _where_line() -> int:
    return line_of(Path(mesh_causal.__file__), "tl.where(")


@pytest.mark.parametrize("name", CAUSAL)
def test_the_natural_launch_is_the_8_pe_ring_with_its_mask(name: str) -> None:
    info = BUILTIN_KERNELS[name]
    assert (info.wiring, info.harness) == ("pe_ring", "prefill")
    spec = trace_kernel(name).launch
    assert spec.wiring == "pe_ring" and spec.pes == 8
    assert spec.mask is not None and spec.mask.text == info.mask
    assert info.known_bad == name.endswith("off_by_one")


@pytest.mark.parametrize("name", CAUSAL)
def test_the_protocol_is_proved_and_the_semantics_judged(name: str) -> None:
    by = {r.name: r for r in verify_kernel(name).properties}
    for prop in PROTOCOL:
        assert by[prop].status is Status.PROVED, (prop, by[prop].message)
    bad = name.endswith("off_by_one")
    want = Status.VIOLATED if bad else Status.PROVED
    for prop in (Property.EXACTLY_ONCE_MERGE, Property.ATTENTION_EQUIVALENCE):
        assert by[prop].status is want, (prop, by[prop].message)
    if bad:
        ae = by[Property.ATTENTION_EQUIVALENCE]
        assert ae.counterexample is not None
        lines = {d.source.line for d in ae.counterexample.diagnostics if d.source}
        assert _where_line() in lines
    # numeric_safety judges what the kernel computes: the off-by-one ring is as safe
    ns = by[Property.NUMERIC_SAFETY]
    assert ns.status is Status.PROVED, ns.message
    assert "rounding bound of the outputs" in ns.message


@pytest.mark.parametrize(("name", "ok"), [(CAUSAL[0], True), (CAUSAL[1], True),
                                          (CAUSAL[2], False), (CAUSAL[3], True)])
def test_the_simulator_checks_them_against_masked_attention(name: str, ok: bool) -> None:
    result = simulate(trace_kernel(name))
    assert result.numeric is not None and result.ok is ok
    worst = max(r.rel_err or 0.0 for r in result.numeric.per_rank)
    assert (worst < 1e-2) if ok else (worst > 1e-2)


def test_without_the_mask_the_causal_kernels_are_out_of_tolerance() -> None:
    assert not simulate(trace_kernel(CAUSAL[1], mask="none")).ok
    # the kernels' rows launched at contiguous positions: the wrong masks
    assert not simulate(trace_kernel(CAUSAL[1], mask="causal@contiguous")).ok
    assert not simulate(trace_kernel(CAUSAL[3], mask="causal@contiguous")).ok


def test_a_mask_without_a_layout_keeps_the_kernels_own() -> None:
    """`--mask causal` names what is hidden; where a zigzag or striped kernel holds its
    rows stays the kernel's, so the launch is the kernel's own mask and proves."""
    for name, layout in ((CAUSAL[1], "zigzag"), (CAUSAL[3], "striped")):
        for given, launched in (("causal", f"causal@{layout}"),
                                ("window:8", f"window:8@{layout}")):
            mask = trace_kernel(name, mask=given).launch.mask
            assert mask is not None and mask.text == launched
    mask = trace_kernel(CAUSAL[0], mask="causal").launch.mask
    assert mask is not None and mask.text == "causal"


def test_the_naive_ring_skips_the_blocks_after_the_query_and_zigzag_balances_them() -> None:
    def dots(name: str) -> list[int]:
        return [sum(op.kind is OpKind.DOT for op in p.ops) // 2
                for p in trace_kernel(name).programs]
    assert dots(CAUSAL[0]) == [1, 2, 3, 4, 5, 6, 7, 8]          # blocks of 8 x 8
    assert dots(CAUSAL[1]) == [17] * 8                          # blocks of 4 x 4
    assert dots(CAUSAL[3]) == [8] * 8                           # every block partial


def test_simulate_and_verify_on_the_cli(run_cli: RunCli) -> None:
    sim = run_cli(["simulate", CAUSAL[1], "--json"])
    doc = json.loads(sim.out)
    assert sim.code == 0 and doc["ok"] and doc["launch"]["mask"] == "causal@zigzag"
    bad = run_cli(["simulate", CAUSAL[2]])
    assert bad.code == 1 and "OUT OF TOLERANCE" in bad.out
    assert "reference: dense masked (causal) float64 attention" in bad.out
    ver = run_cli(["verify", CAUSAL[0]])
    assert "attention_equivalence  proved" in ver.out and "exactly_once_merge     proved" \
        in ver.out


# --- the 2x4 mesh, and mutations named at the line they touch ----------------------------


def test_the_2x4_mesh_causal_prefill_is_proved_and_in_tolerance() -> None:
    info = BUILTIN_KERNELS["mesh_prefill_causal_2d"]
    assert (info.wiring, info.mesh, info.mask) == ("cube_mesh", "2x4", "causal")
    verdict = verify_kernel("mesh_prefill_causal_2d")
    assert all(r.status is Status.PROVED for r in verdict.properties), verdict.properties
    assert simulate(trace_kernel("mesh_prefill_causal_2d")).ok
    bad = {r.name: r.status for r in verify_kernel(
        "mesh_prefill_causal_2d", VerifyConfig(only=SEMANTIC[:2]), mask="none").properties}
    assert bad[Property.ATTENTION_EQUIVALENCE] is Status.VIOLATED


MUTANTS = TEST_KERNELS / "causal_mutants.py"


@pytest.mark.parametrize(("func", "mask", "marker", "words"), [
    ("ring_causal_swapped_comparison", "causal", "WHERE-LINE",
     "the tl.where here keeps key position 1 for query position 0"),
    ("ring_causal_dropped_mask", "causal", "DOT-LINE",
     "the scores here hold key position 1 for query position 0 unmasked"),
    ("ring_causal_swapped_zigzag", "causal@zigzag", "DOT-LINE",
     "the scores here hold key position 4 for query position 0 unmasked"),
])
def test_each_mutant_is_violated_at_the_line_it_touched(func: str, mask: str, marker: str,
                                                        words: str) -> None:
    args = (("S_q", 8), ("S_kv_per_rank", 8), ("h_q", 1), ("h_kv", 1), ("d_head", 8))
    verdict = verify_kernel(kernel_spec(f"causal_mutants.py::{func}"),
                            VerifyConfig(only=SEMANTIC[:2]), harness="prefill",
                            wiring="pe_ring", pes=8, args=args, mask=mask)
    ae = {r.name: r for r in verdict.properties}[Property.ATTENTION_EQUIVALENCE]
    assert ae.status is Status.VIOLATED and ae.counterexample is not None
    hits = [d for d in ae.counterexample.diagnostics if words in d.message]
    assert hits and hits[0].source is not None, ae.counterexample.diagnostics
    assert hits[0].source.line == line_of(MUTANTS, marker)
    if func.endswith("comparison"):     # and the condition's comparison, the mutated line
        assert f"causal_mutants.py:{line_of(MUTANTS, 'COMPARE-LINE')}" in hits[0].message
    w = ae.counterexample.details.witness      # type: ignore[union-attr]
    assert w is not None and w.precision == "40-digit"


def test_the_unmutated_ring_is_proved() -> None:
    args = (("S_q", 8), ("S_kv_per_rank", 8), ("h_q", 1), ("h_kv", 1), ("d_head", 8))
    verdict = verify_kernel(kernel_spec("causal_mutants.py::ring_causal_correct"),
                            VerifyConfig(only=SEMANTIC[:2]), harness="prefill",
                            wiring="pe_ring", pes=8, args=args, mask="causal")
    assert all(r.status is Status.PROVED for r in verdict.properties)
