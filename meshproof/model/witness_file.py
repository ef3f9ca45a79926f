"""A rounding witness as a file: what `meshproof simulate --witness FILE` replays.

numeric_safety is violated only with a witness (spec/semantics.md §7): an input within the
assumption whose output, computed with the simulator's arithmetic, is farther from
attention than the tolerance. `meshproof verify --json` writes it under the numeric_safety
property's `counterexample.witness`: the family, the store's line, the element (query row,
head, feature) of a group, the machine's value there, attention (40 digits), max|V|, the
error |machine - exact| / max|V| and Q, K, V per group (`inputs`, nested lists of shape
(rows, heads, d_head), rows numbered as model/problem.py numbers a group's rows).

This module reads such a file -- a whole verdict or the bare witness object -- into a
typed `Witness` and checks it against a launch's attention problem; every way a file can
be wrong is one `WitnessFileError` whose message says what to do. Shared by the verifier's
side (which writes the shape) and the simulator (which replays it); neither imports the
other.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import numpy.typing as npt

from meshproof.errors import BadInput
from meshproof.model.problem import Problem
from meshproof.model.topology import Endpoint

F32 = npt.NDArray[np.float32]
TENSORS = ("q", "k", "v")
_RERUN = ("write one with `meshproof verify KERNEL [launch] --json > FILE` (a verdict whose "
          "numeric_safety is violated carries counterexample.witness)")


class WitnessFileError(BadInput):
    """A --witness file that cannot be replayed; the message says why and what to do."""


@dataclass(frozen=True, slots=True, eq=False)
class WitnessInputs:
    """Q, K, V of every group: group -> (rows, heads, d_head) float32 holding f16 values.
    Compared by identity (arrays do not compare as one truth value)."""

    q: Mapping[int, F32]
    k: Mapping[int, F32]
    v: Mapping[int, F32]

    def groups(self) -> tuple[int, ...]:
        return tuple(sorted(self.q))

    def elements(self) -> int:
        return sum(a.size for part in (self.q, self.k, self.v) for a in part.values())


@dataclass(frozen=True, slots=True, eq=False)
class Witness:
    """One rounding witness: where the verifier found the error and the inputs that show
    it. `endpoint` is the rank whose store was judged (None in files that do not name it);
    `group` is the element's attention problem when the inputs hold one group (else the
    endpoint's group tells)."""

    path: str
    family: str
    source: str
    element: tuple[int, int, int]        # (query row, head, feature)
    machine: float                       # the verifier's machine value there
    exact: float                         # attention in 40 digits
    max_v: float
    error: float                         # |machine - exact| / max|V|
    tolerance: float | None
    inputs: WitnessInputs
    endpoint: Endpoint | None = None
    group: int | None = None

    @property
    def where(self) -> str:
        """How messages about it begin."""
        return f"--witness {self.path}"


def load_witness(path: Path) -> Witness:
    """Read FILE (a `verify --json` verdict or a bare witness object) into a `Witness`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WitnessFileError(f"--witness {path}: no such file; {_RERUN}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WitnessFileError(f"--witness {path}: cannot read it ({exc}); pass a readable "
                               "JSON file written by `meshproof verify --json`") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WitnessFileError(f"--witness {path}: not JSON ({exc.msg} at line {exc.lineno}, "
                               f"column {exc.colno}); {_RERUN}") from None
    obj, endpoint = _find(doc, path)
    return _parse(obj, str(path), endpoint)


def _find(doc: Any, path: Path) -> tuple[Mapping[str, Any], Endpoint | None]:
    """The witness object in a verdict, a counterexample or bare, and the rank the
    verdict's diagnostic names (older witnesses do not name it themselves)."""
    if not isinstance(doc, dict):
        raise WitnessFileError(f"--witness {path}: holds a JSON {type(doc).__name__}, not an "
                               f"object; {_RERUN}")
    if "properties" in doc:
        props = doc["properties"] if isinstance(doc["properties"], list) else []
        prop = next((p for p in props if isinstance(p, dict)
                     and p.get("name") == "numeric_safety"), None)
        if prop is None:
            raise WitnessFileError(f"--witness {path}: the verdict has no numeric_safety "
                                   f"property (was it skipped with --only?); {_RERUN}")
        cex = prop.get("counterexample")
        witness = cex.get("witness") if isinstance(cex, dict) else None
        if not isinstance(cex, dict) or not isinstance(witness, dict):
            status = prop.get("status", "?")
            raise WitnessFileError(
                f"--witness {path}: numeric_safety is {status} in this verdict and carries no "
                "rounding witness (only a violation by rounding error does); pass a verdict "
                "whose numeric_safety counterexample has a witness")
        return witness, _diagnostic_endpoint(cex)
    if isinstance(doc.get("witness"), dict):        # a counterexample object
        return doc["witness"], _diagnostic_endpoint(doc)
    if "inputs" in doc and "element" in doc:        # the bare witness object
        return doc, None
    raise WitnessFileError(f"--witness {path}: neither a verdict (no `properties`) nor a "
                           f"witness object (no `element` and `inputs`); {_RERUN}")


def _diagnostic_endpoint(cex: Mapping[str, Any]) -> Endpoint | None:
    diags = cex.get("diagnostics")
    if isinstance(diags, list) and diags and isinstance(diags[0], dict):
        cube, pe = diags[0].get("cube"), diags[0].get("pe")
        if _is_int(cube) and _is_int(pe):
            return Endpoint(cube, pe)
    return None


def _is_int(x: Any) -> TypeGuard[int]:
    """An int >= 0 (not a bool)."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _number(obj: Mapping[str, Any], key: str, where: str, optional: bool = False
            ) -> float | None:
    x = obj.get(key)
    if x is None and optional:
        return None
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        raise WitnessFileError(f"{where}: witness.{key} is {x!r}, not a finite number; "
                               f"{_RERUN}")
    return float(x)


def _parse(obj: Mapping[str, Any], path: str, named: Endpoint | None) -> Witness:
    where = f"--witness {path}"
    element = obj.get("element")
    if not (isinstance(element, list) and len(element) == 3 and all(map(_is_int, element))):
        raise WitnessFileError(f"{where}: witness.element is {element!r}, not [query row, "
                               f"head, feature] (three ints >= 0); {_RERUN}")
    raw = obj.get("inputs")
    if raw is None:
        raise WitnessFileError(
            f"{where}: the witness holds no inputs (the verdict leaves them out past 65,536 "
            "elements of Q, K and V); verify a smaller launch (fewer groups, smaller "
            "S_kv_per_rank or d_head) whose witness carries them")
    inputs = _inputs(raw, where)
    endpoint = named
    cube, pe = obj.get("cube"), obj.get("pe")
    if _is_int(cube) and _is_int(pe):
        endpoint = Endpoint(cube, pe)
    group = inputs.groups()[0] if len(inputs.q) == 1 else None
    machine = _number(obj, "machine", where)
    exact = _number(obj, "exact", where)
    max_v = _number(obj, "max_v", where)
    error = _number(obj, "error", where)
    assert machine is not None and exact is not None and max_v is not None
    assert error is not None
    return Witness(path, str(obj.get("family", "")), str(obj.get("source", "")),
                   (element[0], element[1], element[2]), machine, exact, max_v, error,
                   _number(obj, "tolerance", where, optional=True), inputs, endpoint,
                   group)


def _inputs(raw: Any, where: str) -> WitnessInputs:
    if not isinstance(raw, dict) or set(raw) != set(TENSORS):
        keys = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise WitnessFileError(f"{where}: witness.inputs has {keys}, not q, k and v (each "
                               f"group -> (rows, heads, d_head) lists); {_RERUN}")
    parts: dict[str, dict[int, F32]] = {}
    for name in TENSORS:
        by_group = raw[name]
        if not isinstance(by_group, dict) or not by_group:
            raise WitnessFileError(f"{where}: witness.inputs.{name} is not an object of "
                                   f"groups (\"0\": [[[...]]]); {_RERUN}")
        parts[name] = {}
        for key, value in by_group.items():
            if not (isinstance(key, str) and key.isdigit()):
                raise WitnessFileError(f"{where}: witness.inputs.{name} has group {key!r}, "
                                       f"not a group number; {_RERUN}")
            parts[name][int(key)] = _array(value, f"{where}: witness.inputs.{name}[{key}]")
    groups = [sorted(parts[n]) for n in TENSORS]
    if groups[0] != groups[1] or groups[0] != groups[2]:
        raise WitnessFileError(f"{where}: witness.inputs give q groups {groups[0]}, k groups "
                               f"{groups[1]} and v groups {groups[2]}: each group needs all "
                               f"three; {_RERUN}")
    return WitnessInputs(parts["q"], parts["k"], parts["v"])


def _array(value: Any, where: str) -> F32:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise WitnessFileError(f"{where} is not a (rows, heads, d_head) nested list of "
                               f"numbers of one shape; {_RERUN}") from None
    if arr.ndim != 3 or arr.size == 0:
        raise WitnessFileError(f"{where} has shape {arr.shape}, not (rows, heads, d_head) "
                               f"with every size >= 1; {_RERUN}")
    if not np.all(np.isfinite(arr)):
        raise WitnessFileError(f"{where} holds non-finite numbers; the witness's inputs "
                               f"are finite f16 values; {_RERUN}")
    f16 = arr.astype(np.float16).astype(np.float64)
    off = np.flatnonzero(f16.reshape(-1) != arr.reshape(-1))
    if off.size:
        x = float(arr.reshape(-1)[off[0]])
        raise WitnessFileError(f"{where} holds {x!r}, not an f16 value ({off.size} such "
                               "numbers): the simulator feeds f16 inputs (spec/simulator.md "
                               f"§5); round them to f16 or {_RERUN}")
    out: F32 = arr.astype(np.float32)
    return out


def check_against(witness: Witness, problem: Problem) -> None:
    """Refuse a witness whose groups or shapes are not the launch's attention problem's
    (the verifier makes Q (q_rows, h_q, d_head), K and V (kv_rows, h_kv, d_head) per
    group)."""
    where = witness.where
    have = list(witness.inputs.groups())
    want = [g.index for g in problem.groups]
    if have != want:
        raise WitnessFileError(
            f"{where}: the witness holds inputs of group(s) {have}, but this launch has "
            f"{problem.describe_groups()} (groups {want}); replay it with the launch it was "
            "verified with (the same kernel, wiring, --groups and --arg values)")
    d = problem.d_head
    for g in want:
        shapes = {"q": (problem.q_rows(g), problem.h_q, d),
                  "k": (max(problem.kv_rows(g), 1), problem.h_kv, d),
                  "v": (max(problem.kv_rows(g), 1), problem.h_kv, d)}
        for name, shape in shapes.items():
            got = getattr(witness.inputs, name)[g].shape
            if tuple(got) != shape:
                raise WitnessFileError(
                    f"{where}: witness.inputs.{name}[{g}] has shape {tuple(got)}, but this "
                    f"launch's group {g} needs {shape} (rows, heads, d_head); replay it with "
                    "the launch it was verified with (the same kernel, wiring and --arg "
                    "values: S_q, S_kv_per_rank, h_q, h_kv, d_head)")
    t, h, e = witness.element
    rows = max(problem.q_rows(g) for g in want)
    if t >= rows or h >= problem.h_q or e >= d:
        raise WitnessFileError(
            f"{where}: witness.element {list(witness.element)} is outside the output "
            f"({rows} query rows, {problem.h_q} heads, {d} features); {_RERUN}")
