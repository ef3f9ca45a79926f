"""model/witness_file.py: a --witness FILE read into a typed Witness, or one typed error
whose message says what to do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from meshproof.model.topology import Endpoint
from meshproof.model.witness_file import WitnessFileError, load_witness


def _witness(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "family": "seeded uniform inputs in [-16, 16] (seed 3)", "source": "k.py:63",
        "element": [0, 0, 1], "machine": -0.5, "exact": -1.25, "max_v": 2.0, "error": 0.375,
        "tolerance": 0.01, "bound": None,
        "inputs": {"q": {"0": [[[1.0, -2.0]]]},
                   "k": {"0": [[[0.5, 0.25]], [[-1.0, 2.0]]]},
                   "v": {"0": [[[2.0, -1.5]], [[0.125, 1.0]]]}}}
    doc.update(over)
    return doc


def _verdict(witness: dict[str, Any] | None, status: str = "violated") -> dict[str, Any]:
    cex = None if witness is None else {
        "summary": "s", "diagnostics": [{"cube": 3, "pe": 5, "message": "m"}],
        "witness": witness}
    return {"schema": "meshproof/verdict-v1", "properties": [
        {"name": "deadlock_freedom", "status": "proved", "counterexample": None},
        {"name": "numeric_safety", "status": status, "counterexample": cex}]}


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_bare_witness_is_read_with_its_inputs_as_float32_arrays(tmp_path: Path) -> None:
    w = load_witness(_write(tmp_path, _witness(cube=1, pe=2)))
    assert w.element == (0, 0, 1) and w.machine == -0.5 and w.error == 0.375
    assert w.endpoint == Endpoint(1, 2) and w.group == 0
    assert w.inputs.k[0].dtype == np.float32 and w.inputs.k[0].shape == (2, 1, 2)
    assert w.inputs.elements() == 2 + 4 + 4


def test_a_verdict_gives_its_numeric_safety_witness_and_the_diagnostics_rank(
        tmp_path: Path) -> None:
    w = load_witness(_write(tmp_path, _verdict(_witness())))
    assert w.endpoint == Endpoint(3, 5)      # the witness names no rank: the diagnostic does
    assert w.source == "k.py:63"
    named = load_witness(_write(tmp_path, _verdict(_witness(cube=0, pe=1))))
    assert named.endpoint == Endpoint(0, 1)


def test_a_counterexample_object_is_read_too(tmp_path: Path) -> None:
    cex = _verdict(_witness())["properties"][1]["counterexample"]
    assert load_witness(_write(tmp_path, cex)).endpoint == Endpoint(3, 5)


@pytest.mark.parametrize(("doc", "fragment"), [
    (_verdict(None, "proved"), "numeric_safety is proved in this verdict and carries no "
                               "rounding witness"),
    ({"properties": []}, "has no numeric_safety property"),
    ([1, 2], "holds a JSON list, not an object"),
    ({"kernel": "k"}, "neither a verdict"),
    (_witness(inputs=None), "holds no inputs"),
    (_witness(element=[0, 1]), "not [query row, head, feature]"),
    (_witness(machine="x"), "witness.machine is 'x', not a finite number"),
    (_witness(inputs={"q": {}, "k": {}}), "not q, k and v"),
    (_witness(inputs={"q": {"0": [[[1.0]]]}, "k": {"1": [[[1.0]]]}, "v": {"0": [[[1.0]]]}}),
     "each group needs all three"),
    (_witness(inputs={"q": {"a": [[[1.0]]]}, "k": {"a": [[[1.0]]]}, "v": {"a": [[[1.0]]]}}),
     "not a group number"),
    (_witness(inputs={"q": {"0": [[1.0, 2.0]]}, "k": {"0": [[[1.0]]]}, "v": {"0": [[[1.0]]]}}),
     "has shape (1, 2), not (rows, heads, d_head)"),
    (_witness(inputs={"q": {"0": [[[1.0], [2.0, 3.0]]]}, "k": {"0": [[[1.0]]]},
                      "v": {"0": [[[1.0]]]}}), "nested list of numbers of one shape"),
    (_witness(inputs={"q": {"0": [[[0.1]]]}, "k": {"0": [[[1.0]]]}, "v": {"0": [[[1.0]]]}}),
     "holds 0.1, not an f16 value"),
])
def test_every_bad_file_is_one_typed_error_saying_what_to_do(tmp_path: Path, doc: object,
                                                              fragment: str) -> None:
    with pytest.raises(WitnessFileError) as err:
        load_witness(_write(tmp_path, doc))
    message = str(err.value)
    assert fragment in message, message
    assert "\n" not in message


def test_a_missing_or_non_json_file_says_how_to_write_one(tmp_path: Path) -> None:
    with pytest.raises(WitnessFileError, match="no such file; write one with `meshproof "
                                               "verify"):
        load_witness(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(WitnessFileError, match=r"not JSON .* at line 1"):
        load_witness(bad)
