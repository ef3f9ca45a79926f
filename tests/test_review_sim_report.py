"""Review of the simulator, the report and the gate: each test pins one fixed problem.

Kept fast (small launches, a fake verifier where the gate only needs expectations).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT, trace_kernel

from meshproof.report.schedule_diagram import DiagramOptions, schedule_diagram

Run = Callable[[Sequence[str]], Any]

# Modules this review owns; the project keeps modules under ~400 lines.
REVIEWED = [*sorted((REPO_ROOT / "meshproof" / "sim").glob("*.py")),
            *sorted((REPO_ROOT / "meshproof" / "report").glob("*.py")),
            *sorted((REPO_ROOT / "meshproof" / "verify").glob("gate*.py")),
            REPO_ROOT / "meshproof" / "verify" / "junit.py",
            REPO_ROOT / "meshproof" / "testing.py",
            *(REPO_ROOT / "meshproof" / "cli" / f"{n}_cmd.py"
              for n in ("simulate", "report", "gate"))]


# --- the schedule diagram, split into modules with one job each --------------------------

@pytest.mark.parametrize("path", REVIEWED, ids=lambda p: p.name)
def test_reviewed_modules_stay_small(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines < 400, f"{path.name} has {lines} lines; split it by job"


def test_schedule_diagram_still_draws_caps_and_faults() -> None:
    # the 1D kernel over 8 cubes: illegal ports (red stubs), capped to 3 lanes of 5 nodes
    schedule = trace_kernel("mesh_mlo_1d", wiring="cube_mesh", cubes=8,
                            args=(("rank_axis", 1),))
    small = DiagramOptions(max_lanes=3, max_nodes_per_lane=5)
    first = schedule_diagram(schedule, None, small)
    assert first.source == schedule_diagram(schedule, None, small).source
    assert first.lanes_shown == 3 and first.lanes_elided == 5
    assert first.nodes_elided > 0 and first.faults_drawn > 0
    # the root-cause lanes (cube 3 sends E, cube 4 receives W) are the ones kept
    assert '"c3p0_head"' in first.source and '"c4p0_head"' in first.source
    assert "no E link" in first.source and "no W link" in first.source
    assert "op groups not shown (cap 5 nodes per lane)" in first.source
