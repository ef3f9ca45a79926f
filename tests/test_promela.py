"""verify/promela.py and `meshproof export --promela`: the schedules as a Promela model.

One process per rank with its comm ops in program order, one channel of depth D per used
link (D = 0: rendezvous), `false` for an op on a missing link, no reader towards an
endpoint outside the launch; too large a launch is refused. Where SPIN is installed, its
search agrees with meshproof at a depth that deadlocks and one that does not.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import trace_kernel

from meshproof.errors import OptionError
from meshproof.model.channels import derive_channels
from meshproof.model.progress import run
from meshproof.verify import promela
from meshproof.verify.promela import promela_model


def _model(depth: int, kernel: str = "mesh_mlo_1d", **options: object) -> promela.PromelaModel:
    schedule = trace_kernel(kernel, **options)
    return promela_model(schedule, derive_channels(schedule), depth)


@pytest.mark.parametrize("depth", [0, 3])
def test_one_process_per_rank_and_one_channel_of_depth_d_per_link(depth: int) -> None:
    schedule = trace_kernel("mesh_mlo_1d", pes=4)
    table = derive_channels(schedule)
    model = promela_model(schedule, table, depth)
    text = model.text
    assert model.processes == 4 and text.count("active proctype") == 4
    assert model.channels == 6 == len(re.findall(rf"= \[{depth}\] of {{ bit }};", text))
    sends = sum(1 for p in schedule.programs for op in p.comm_ops if op.kind.value == "send")
    assert text.count("!0;") == sends and text.count("?_;") == table.cols.n - sends
    first = schedule.programs[0].comm_ops[0]
    assert f"/* #{first.index} send E {first.source} */" in text
    # one writer and one reader per channel: declared for SPIN's partial-order reduction
    # (buffered channels only: SPIN refuses xs/xr on rendezvous ones)
    assert text.count("  xs ") == (model.channels if depth else 0)
    assert text.count("  xr ") == (model.channels if depth else 0)


def test_missing_links_never_complete_and_outside_links_have_no_reader() -> None:
    line = _model(4, "ring_mlo", wiring="pe_line")      # the wrap-around link is missing
    assert "  false; /* #" in line.text and ": no such link */" in line.text
    outside = _model(4, "mesh_mlo_2d_physical_rank")    # talks to cubes outside its launch
    assert "no process reads it */" in outside.text


def test_a_launch_too_large_for_explicit_state_search_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(promela, "MAX_RANKS", 3)
    with pytest.raises(OptionError, match=r"^export --promela is for small launches \(4 "
                                          r"ranks and 72 comm ops here; at most 3 ranks"):
        _model(3, pes=4)


def test_export_writes_the_file(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.pml"
    r = run_cli(["export", "mesh_mlo_1d", "--pes", "4", "--queue-depth", "2",
                 "--promela", str(path)])
    assert r.code == 0
    assert r.out == f"wrote {path}: 4 processes, 6 channels of depth 2, 72 comm ops\n"
    assert path.read_text().startswith("/* meshproof: mesh_mlo_1d on pe_line")
    r = run_cli(["export", "mesh_mlo_1d"])
    assert r.code == 2 and "export needs an output: --promela FILE" in r.err


@pytest.mark.skipif(shutil.which("spin") is None or shutil.which("cc") is None,
                    reason="SPIN (Debian package spin) or a C compiler is not installed")
@pytest.mark.parametrize("depth", [2, 3])
def test_spin_agrees_with_the_kahn_run(tmp_path: Path, depth: int) -> None:
    schedule = trace_kernel("mesh_mlo_1d", pes=3)
    table = derive_channels(schedule)
    model = promela_model(schedule, table, depth)
    (tmp_path / "m.pml").write_text(model.text)
    subprocess.run(["spin", "-a", "m.pml"], cwd=tmp_path, check=True, capture_output=True)
    subprocess.run(["cc", "-O2", "-DSAFETY", "-o", "pan", "pan.c"], cwd=tmp_path, check=True,
                   capture_output=True)
    out = subprocess.run(["./pan", "-n", f"-m{2 * model.comm_ops + 1000}"], cwd=tmp_path,
                         capture_output=True, text=True, check=False).stdout
    assert "Search not completed" not in out or "invalid end state (" in out
    spin_deadlock = re.search(r"pan:\d+: invalid end state", out) is not None
    assert spin_deadlock == run(schedule, table, depth).deadlock == (depth == 2)
