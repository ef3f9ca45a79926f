"""sim/witness.py and the explicit-array inputs: the simulator replays a rounding witness
(its Q, K, V instead of the seeded generator) and reads the witness element, which
reproduces the verifier's machine value (model/machine.py: the same float32-per-op
arithmetic) exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import REPO_ROOT, kernel_spec, machine_witness, trace_kernel

from meshproof.model.schedule import GroupMode, Harness, Schedule
from meshproof.model.witness_file import Witness, WitnessFileError, load_witness
from meshproof.sim.api import simulate
from meshproof.sim.config import SimConfig
from meshproof.sim.inputs import ArraySource, given_input
from meshproof.sim.reference import dense_reference, reference
from meshproof.sim.result import WitnessReplay
from meshproof.verify.api import VerifyConfig, verify

F16_DESIGN = str(REPO_ROOT / "examples/f16_design.py::mesh_f16_design")
F16_LAUNCH: dict[str, Any] = {
    "wiring": "cube_mesh", "cubes": 8,
    "args": (("mesh_rows", 2), ("mesh_cols", 4), ("S_q", 1), ("S_kv_per_rank", 16),
             ("h_q", 1), ("h_kv", 1), ("d_head", 8))}


def _replay(schedule: Schedule, path: Path) -> tuple[WitnessReplay, float | None]:
    result = simulate(schedule, SimConfig(witness=load_witness(path), timing=False))
    assert result.numeric is not None and result.numeric.witness is not None
    return result.numeric.witness, result.numeric.rel_err


def test_an_array_source_hands_out_rows_as_the_generator_does() -> None:
    data = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    src = ArraySource(data)
    assert (src.rows, src.heads, src.d, src.row_elements) == (4, 2, 3, 6)
    (piece,) = list(src.pieces(1, 3))
    assert (piece.row_lo, piece.row_hi) == (1, 3)
    np.testing.assert_array_equal(piece.data, data[1:3])
    assert list(src.pieces(2, 2)) == []
    block = src.block(0, 4)
    block[0] = -1.0                   # a copy: the source stays as given
    assert src.block(0, 1)[0, 0, 0] == 0.0 and src.max_abs() == 23.0
    with pytest.raises(ValueError, match="bad row range"):
        src.block(2, 5)


def test_the_reference_of_given_arrays_is_dense_float64_attention() -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(np.float16).astype(np.float32)
               for s in ((3, 4, 8), (40, 2, 8), (40, 2, 8)))
    got = reference([given_input(0, q, k, v)], 0.3)
    np.testing.assert_allclose(got[0], dense_reference(q, k, v, 0.3), rtol=1e-12, atol=1e-12)


def test_the_f16_designs_witness_replays_to_the_verdicts_machine_value_and_error(
        tmp_path: Path) -> None:
    schedule = trace_kernel(F16_DESIGN, **F16_LAUNCH)
    verdict = verify(schedule, VerifyConfig(input_bound=16.0))
    path = tmp_path / "verdict.json"
    path.write_text(json.dumps(verdict.to_json()), encoding="utf-8")
    stated = next(p for p in verdict.to_json()["properties"]
                  if p["name"] == "numeric_safety")["counterexample"]["witness"]
    assert (stated["cube"], stated["pe"]) == (0, 0)
    w, rel_err = _replay(schedule, path)
    assert w.agrees, w
    assert w.simulated == np.float32(stated["machine"])      # the same float32 number
    assert w.max_v == stated["max_v"]
    assert w.error == pytest.approx(stated["error"], rel=1e-3)     # stated to 4 digits
    assert w.attention == pytest.approx(stated["exact"], rel=1e-12)
    assert w.error > 1e-2 and rel_err is not None and rel_err > 1e-2


@pytest.mark.parametrize(("kernel", "options"), [
    ("mesh_mlo_1d", {}),
    ("mesh_mlo_1d", {"args": (("msg_dtype", "f16"), ("h_q", 4), ("h_kv", 2),
                              ("d_head", 4))}),
    (kernel_spec("renamed_buffers.py::prefill_cache"),
     {"sharded": ("kc_ptr", "vc_ptr"), "pes": 4, "harness": Harness.PREFILL}),
], ids=["decode", "gqa-f16-messages", "prefill-renamed-buffers"])
def test_the_simulator_computes_the_verifiers_machine_value_at_the_worst_element(
        tmp_path: Path, kernel: str, options: dict[str, Any]) -> None:
    schedule = trace_kernel(kernel, **options)
    doc = machine_witness(schedule, tmp_path / "w.json")
    w, _ = _replay(schedule, tmp_path / "w.json")
    assert w.agrees and w.simulated == doc["machine"], (w, doc["machine"])
    assert w.element == tuple(doc["element"])
    assert w.error == pytest.approx(doc["error"], rel=1e-9, abs=1e-15)


def test_each_group_gets_its_own_inputs(tmp_path: Path) -> None:
    """Two cubes, two attention problems: the element of cube 1 is read off cube 1 fed
    group 1's inputs; with the groups' inputs swapped it is another number."""
    schedule = trace_kernel("mesh_mlo_1d", args=(("msg_dtype", "f16"),), cubes=2,
                            groups=GroupMode.CUBE)
    doc = machine_witness(schedule, tmp_path / "w.json", cube=1)
    w, _ = _replay(schedule, tmp_path / "w.json")
    assert (w.endpoint.cube, w.group) == (1, 1)
    assert w.agrees and w.simulated == doc["machine"]
    swapped = dict(doc, inputs={t: {"0": x["1"], "1": x["0"]}
                                for t, x in doc["inputs"].items()})
    (tmp_path / "s.json").write_text(json.dumps(swapped), encoding="utf-8")
    other, _ = _replay(schedule, tmp_path / "s.json")
    assert other.simulated != doc["machine"] and not other.agrees


def _f16_witness(tmp_path: Path) -> tuple[Schedule, Witness]:
    schedule = trace_kernel(F16_DESIGN, **F16_LAUNCH)
    machine_witness(schedule, tmp_path / "w.json")
    return schedule, load_witness(tmp_path / "w.json")


def test_a_witness_of_another_launch_is_refused_before_any_work(tmp_path: Path) -> None:
    _, witness = _f16_witness(tmp_path)
    args = dict(F16_LAUNCH["args"], S_kv_per_rank=8)
    other = trace_kernel(F16_DESIGN, **{**F16_LAUNCH, "args": tuple(args.items())})
    with pytest.raises(WitnessFileError, match=r"witness.inputs.k\[0\] has shape "
                                               r"\(128, 1, 8\), but this launch's group 0 "
                                               r"needs \(64, 1, 8\)"):
        simulate(other, SimConfig(witness=witness, timing=False))
    two = trace_kernel("mesh_mlo_1d", cubes=2, groups=GroupMode.CUBE)
    with pytest.raises(WitnessFileError, match=r"inputs of group\(s\) \[0\], but this launch "
                                               r"has 2 group\(s\)"):
        simulate(two, SimConfig(witness=witness, timing=False))


def test_a_witness_naming_a_rank_outside_the_launch_is_refused(tmp_path: Path) -> None:
    schedule, _ = _f16_witness(tmp_path)
    doc = json.loads((tmp_path / "w.json").read_text(encoding="utf-8"))
    doc["cube"] = 99
    (tmp_path / "w.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(WitnessFileError, match="names rank c99p0, which runs no ops"):
        simulate(schedule, SimConfig(witness=load_witness(tmp_path / "w.json"),
                                     timing=False))
