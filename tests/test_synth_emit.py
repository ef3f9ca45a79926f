"""synth/emit.py and the tracer's plan-row hook: a kernel emitted from a broken plan (the
plan check bypassed) is caught by verify, and its counterexample names the plan row of
the rank that merges twice, not the interpreter's line."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import RunCli

from meshproof.kernels import resolve_kernel
from meshproof.model.hardware import DEFAULT_PROFILE
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.synth.costs import SIZE_NAMES, block_costs
from meshproof.synth.emit import emit_kernel, program_rows
from meshproof.synth.emit_text import EmitInfo
from meshproof.synth.graph import rank_graph
from meshproof.synth.order import Rule, schedule_plan
from meshproof.synth.plan import CheckedPlan, Family, Plan, PlanBuilder


def _emit(plan: Plan, path: Path) -> int:
    """Emit `plan` unchecked on a 3-PE line; the line of rank 0's PLAN row."""
    launch = build_launch(resolve_kernel("mesh_mlo_1d"), LaunchOptions(pes=3))
    graph = rank_graph(launch)
    sizes = tuple((k, dict(launch.call_args)[k]) for k in SIZE_NAMES)
    unchecked = CheckedPlan(plan, (), (), 0)    # what the plan check would have refused
    ordered = schedule_plan(unchecked, graph, block_costs(sizes, DEFAULT_PROFILE,
                                                          launch.spec.system),
                            4, Rule.FORWARD)
    rows, merges = program_rows(unchecked, ordered)
    text = emit_kernel(graph, rows, merges, EmitInfo(plan.name, "forward", "default", sizes,
                                                     4, "pe_line", "--pes 3", 1e-6, 1e-6, 1))
    path.write_text(text)
    match = re.search(r"^PLAN_LINE = (\d+)$", text, re.MULTILINE)
    assert match is not None
    first = int(match.group(1))
    assert text.splitlines()[first - 1].startswith("    'S")     # rank 0's row
    return first


def test_a_double_merge_names_the_plan_row_of_its_rank(run_cli: RunCli,
                                                       tmp_path: Path) -> None:
    # rank 1 gathers everything, then sends its total back to rank 0, which merges it into
    # its own partial: rank 0's partial counts twice
    b = PlanBuilder(3)
    total = b.merge(b.merge(1, b.transfer(0, 1)), b.transfer(2, 1))
    b.output(b.merge(0, b.transfer(total, 0)))
    b.output(total)
    b.output(b.transfer(total, 2))
    path = tmp_path / "broken.py"
    row0 = _emit(b.build("sends its total back", Family.LINE_SEGMENT), path)
    res = run_cli(["verify", f"{path}::synthesized", "--pes", "3"])
    assert res.code == 1
    assert f"broken.py:{row0}: rank (cube 0, pe 0): error: line {row0} adds the partial of " \
           "key rows 0..15 to ℓ, which already holds them (a double merge)" in res.out


def test_a_correct_plan_emitted_the_same_way_is_proved(run_cli: RunCli,
                                                       tmp_path: Path) -> None:
    b = PlanBuilder(3)
    total = b.merge(b.merge(1, b.transfer(0, 1)), b.transfer(2, 1))
    b.output(b.transfer(total, 0))
    b.output(total)
    b.output(b.transfer(total, 2))
    path = tmp_path / "ok.py"
    _emit(b.build("gather at 1, broadcast", Family.LINE_SEGMENT), path)
    res = run_cli(["verify", f"{path}::synthesized", "--pes", "3"])
    assert res.code == 0, res.out
