"""verify/semantics/rounding.py: the first-order rounding bound numeric_safety states.

Each rule has a mistake the bound must not cover (numeric_safety unknown, with the op) and
a correct idiom that gets a bound the simulator stays under."""

from __future__ import annotations

import pytest
from semantic_helpers import CASES, KERNELS, TREES, run

from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.trace import trace
from meshproof.sim.api import simulate
from meshproof.sim.config import InputKind, SimConfig
from meshproof.verify.result import NumericResult, Status

REVIEW = KERNELS / "review_semantics.py"
REVIEW2 = KERNELS / "review2_semantics.py"
NS = "numeric_safety"


def _bound(kernel: str, **opts: object) -> NumericResult:
    p = run(kernel, **opts).property(NS)
    assert isinstance(p, NumericResult)
    return p


def _simulated(kernel: str, **opts: object) -> tuple[float, float]:
    ref = resolve_kernel(kernel)
    args = tuple(sorted(opts.pop("args", {}).items()))  # type: ignore[attr-defined]
    schedule = trace(ref, build_launch(ref, LaunchOptions(args=args, **opts)))  # type: ignore[arg-type]
    sim = simulate(schedule, SimConfig(inputs=InputKind.NORMAL, timing=False)).numeric
    assert sim is not None and sim.max_abs_err is not None
    return sim.max_abs_err, sim.max_abs_v


@pytest.mark.parametrize(("kernel", "opts"), [
    (f"{CASES}::exp2_consistent", {"pes": 4}),                  # exp2: ℓ >= 1 with k = ln 2
    (f"{REVIEW}::headroom_plain", {"pes": 4}),                  # ℓ >= exp(-20)
    (TREES, {"pes": 1, "args": {"plan": "((t0 e) (e t1))", "tiles": 2}}),  # max(.., -1e30)
    (f"{REVIEW2}::tiled_ok", {"pes": 4, "wiring": "pe_line"}),  # running state from -inf / 0
    ("mesh_kv", {}),
])
def test_correct_idioms_get_a_bound_the_simulator_stays_under(kernel: str,
                                                              opts: dict[str, object]) -> None:
    p = _bound(kernel, **dict(opts))
    # stated whether within the simulator's 1e-2 (proved) or above it (unknown): these
    # idioms' bounds are 1.4e-2..2.6e-2·max|V|
    assert p.status is not Status.VIOLATED and p.error_bound is not None, p.message
    assert "first-order rounding bound" in p.message
    err, v_max = _simulated(kernel, **dict(opts))
    assert err <= p.error_bound * v_max + (p.error_floor or 0.0)


@pytest.mark.parametrize(("kernel", "opts", "said"), [
    # a constant added to o, rounded at |o + 1e30|
    (f"{REVIEW2}::bias_cancel", {"pes": 4, "wiring": "pe_line"},
     r"review2_semantics\.py:\d+: the constant 1e\+30 added here is rounded with the value"),
    # ℓ + 2048 sent in f16
    (f"{REVIEW2}::bias_cancel_f16", {"pes": 2, "wiring": "pe_line", "args": {"n_ranks": 2}},
     r"the constant 2048 added here"),
    # scores + 1e7 keep no fraction in f32: the bound exceeds max|V|
    (f"{REVIEW2}::shift_1e7", {"pes": 4, "wiring": "pe_line"},
     r"no digit of the output is guaranteed"),
])
def test_roundings_the_first_order_bound_does_not_cover_leave_it_unknown(
        kernel: str, opts: dict[str, object], said: str) -> None:
    p = _bound(kernel, **dict(opts))
    assert p.status is Status.UNKNOWN and p.error_bound is None
    assert p.message.startswith("cannot bound the rounding error of ")
    assert __import__("re").search(said, p.message), p.message


def test_a_kernel_whose_outputs_are_not_attention_states_no_bound_and_is_not_unknown() -> None:
    """attention_equivalence judges such outputs; numeric_safety's other checks stand."""
    p = _bound("mesh_mlo_1d_normalised_merge", pes=4)
    assert p.status is Status.PROVED and p.error_bound is None
