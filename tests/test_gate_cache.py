"""gate/cache.py's key: derived from VerifyConfig's field metadata, not a hand list."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
from helpers import trace_kernel

from meshproof.gate.cache import case_key
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.verify.properties import VERDICT_KEY, Property, RecheckSolver, VerifyConfig

# a value other than the default, for every field a decided verdict depends on
CHANGED: dict[str, object] = {
    "queue_depth": 2, "input_bound": 4.0, "score_bound": 30.0, "rounding_tolerance": 0.2,
    "only": frozenset({Property.DEADLOCK_FREEDOM}), "skip": frozenset({Property.NUMERIC_SAFETY}),
    "recheck": RecheckSolver.CVC5,
}
# budgets (which only ever make a verdict unknown, never stored) and display hooks
NOT_IN_KEY: dict[str, object] = {
    "timeout_s": 5.0, "rlimit": 1000, "stuck_state_max_ops": 10, "keep_smt2": True,
    "progress": None,
}


@pytest.fixture(scope="module")
def key_of() -> object:
    ref = resolve_kernel("mesh_mlo_1d")
    launch = build_launch(ref, LaunchOptions(pes=2))
    schedule = trace_kernel("mesh_mlo_1d", pes=2)

    def key(config: VerifyConfig) -> str:
        return case_key(ref, launch, schedule, simulate=False, config=config)
    return key


def test_every_config_field_says_whether_it_is_in_the_key() -> None:
    for f in fields(VerifyConfig):
        assert isinstance(f.metadata.get(VERDICT_KEY), bool), f.name
    in_key = {f.name for f in fields(VerifyConfig) if f.metadata[VERDICT_KEY]}
    assert in_key == set(CHANGED)
    assert {f.name for f in fields(VerifyConfig)} == set(CHANGED) | set(NOT_IN_KEY)


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_the_key_changes_with_every_verdict_field(name: str, key_of: object) -> None:
    base = VerifyConfig()
    assert key_of(base) != key_of(replace(base, **{name: CHANGED[name]}))  # type: ignore[operator]


@pytest.mark.parametrize("name", sorted(NOT_IN_KEY))
def test_a_budget_leaves_the_key_alone(name: str, key_of: object) -> None:
    base = VerifyConfig()
    assert key_of(base) == key_of(replace(base, **{name: NOT_IN_KEY[name]}))  # type: ignore[operator]
