"""verify/semantics/interp.py: looking situations up gives what computing every op gives —
verdicts, counts, bounds and messages alike — and looks most ops up on a mesh."""

from __future__ import annotations

import functools

import pytest
from helpers import trace_kernel
from semantic_helpers import CASES

from meshproof.model.channels import derive_channels
from meshproof.model.problem import attention_problem
from meshproof.model.topology import Endpoint, System
from meshproof.verify import numeric_safety
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.semantics import analysis
from meshproof.verify.semantics.interp import Interpreter

SEMANTIC = ("attention_equivalence", "exactly_once_merge", "numeric_safety")


def _semantic_json(schedule: object) -> list[dict[str, object]]:
    verdict = verify(schedule, VerifyConfig(only=frozenset(  # type: ignore[arg-type]
        p for p in VerifyConfig().selected() if p.value in SEMANTIC)))
    return [p for p in verdict.to_json(timings=False)["properties"]]  # type: ignore[union-attr]


@pytest.mark.parametrize(("kernel", "options"), [
    ("mesh_mlo_1d", {}),
    ("mesh_mlo_2d", {"mesh": "2x4"}),
    ("mesh_kv", {}),
    ("mesh_mlo_1d_forward_running_state", {}),     # a double merge: counts and lines
    ("mesh_mlo_1d_normalised_merge", {}),          # normalised twice: where it divided
    ("mesh_mlo_1d", {"args": (("msg_dtype", "f16"),)}),   # an overflow witness
    ("mesh_mlo_1d", {"empty_shards": (Endpoint(0, 3),)}),
    (f"{CASES}::plus_self", {"pes": 4}),
    (f"{CASES}::no_rescale", {"pes": 4}),
    (f"{CASES}::sum_of_keys", {"pes": 3}),
    (f"{CASES}::spill", {"pes": 4}),
])
def test_reuse_changes_no_verdict_count_bound_or_message(
        monkeypatch: pytest.MonkeyPatch, kernel: str, options: dict[str, object]) -> None:
    schedule = trace_kernel(kernel, **options)
    reused = _semantic_json(schedule)
    every_op = functools.partial(Interpreter, reuse=False)
    monkeypatch.setattr(analysis, "Interpreter", every_op)
    monkeypatch.setattr(numeric_safety, "Interpreter", every_op)
    assert _semantic_json(schedule) == reused


def test_a_mesh_computes_few_ops_and_looks_the_rest_up() -> None:
    schedule = trace_kernel("mesh_mlo_2d", mesh="8x8", system=System(1, 8, 8, 8))
    problem = attention_problem(schedule, schedule.launch.groups, schedule.launch.outputs)
    interp = Interpreter(schedule, derive_channels(schedule), problem)
    interp.run_all()
    values = sum(1 for p in schedule.programs for op in p.ops if op.out is not None)
    assert interp.evaluated < values / 20
    every = Interpreter(schedule, derive_channels(schedule), problem, reuse=False)
    every.run_all()
    assert every.evaluated > values / 2
    for r, vid in interp.order():   # the same value, whichever way it was found
        a, b = interp.result(r, vid), every.result(r, vid)
        assert type(a) is type(b) and getattr(a, "form", a) == getattr(b, "form", b)
