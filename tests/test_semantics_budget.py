"""verify/semantics/budget.py: a semantic analysis past its time or memory budget ends in
unknown, naming where its largest form grew, and never takes the machine down."""

from __future__ import annotations

import subprocess
import sys

from semantic_helpers import KERNELS, ROOT, run

from meshproof.verify.result import Status
from meshproof.verify.semantics.budget import Budget, OutOfBudget


def test_past_the_deadline_the_semantic_properties_are_unknown_and_say_where() -> None:
    from meshproof.model.launch import LaunchOptions, build_launch
    from meshproof.model.loader import resolve_kernel
    from meshproof.model.trace import trace
    from meshproof.verify.api import VerifyConfig, verify

    ref = resolve_kernel("mesh_mlo_2d")
    launch = build_launch(ref, LaunchOptions(mesh="4x4"))
    v = verify(trace(ref, launch), VerifyConfig(queue_depth=3, timeout_s=1e-6))
    for name in ("exactly_once_merge", "attention_equivalence", "numeric_safety"):
        p = v.property(name)
        assert p.status is Status.UNKNOWN
        assert "ran past --timeout" in p.message and "--skip" in p.message
        assert "mesh_mlo.py:" in p.message, p.message
    assert v.property("direction_legality").status is Status.PROVED


def test_past_the_memory_budget_it_stops() -> None:
    from meshproof.model.schedule import DType, Op, OpKind, SourceLoc

    budget = Budget(float("inf"), 1, float("inf"))
    op = Op(0, OpKind.ADD, (), 0, (1,), DType.F32, SourceLoc("k.py", 7))
    try:
        for _ in range(1000):
            budget.tick(op, 10)
    except OutOfBudget as exc:
        assert "memory budget" in str(exc) and "k.py:7" in str(exc)
    else:
        raise AssertionError("the budget never stopped")


def test_a_form_that_grows_with_every_merge_costs_bounded_memory() -> None:
    """The lerp merge with a wrong weight never simplifies: under a 4 GB address space it
    still ends in a verdict, never an out-of-memory kill or an internal error."""
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (4_000_000_000,) * 2);"
            "from meshproof.cli import entry; sys.argv = ['meshproof', 'verify', "
            f"'{KERNELS / 'merge_forms.py'}::lerp_wrong_weight']; entry()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode in (1, 3), proc.stderr[-2000:]
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_the_log_sum_exp_ring_is_proved_within_the_default_budget() -> None:
    v = run(f"{KERNELS / 'merge_forms.py'}::lse_textbook")
    assert v.property("attention_equivalence").status is Status.PROVED
