"""gate/cluster.py: `meshproof gate --cluster local:N|ADDRESS` gives the serial gate's bytes;
a case whose worker dies is resubmitted once, then unknown; bad --cluster values and a
missing dask are one line, exit 2."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest

from meshproof.cli import main
from meshproof.errors import OptionError
from meshproof.gate import cluster
from meshproof.gate.cluster import ClusterSpec, parse_cluster, run_cases
from meshproof.gate.judge import CaseStatus
from meshproof.gate.matrix import load_matrix
from meshproof.gate.pipeline import Pipeline

needs_dask = pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                reason="dask.distributed is not installed "
                                       "(pip install 'meshproof[cluster]')")

MATRIX = """\
[[case]]
name = "line"
kernel = "mesh_mlo_1d"
expect = "proved"

[[case]]
name = "line-D2"
kernel = "mesh_mlo_1d"
queue_depth = 2
expect = ["deadlock_freedom"]

[[case]]
name = "2d"
kernel = "mesh_mlo_2d"
mesh = "2x4"
wiring = "cube_mesh"
simulate = true
expect = "proved"

[[case]]
name = "flipped"
kernel = "mesh_mlo_1d_recv_first"
expect = "proved"
"""


def _gate(tmp_path: Path, tag: str, *extra: str) -> tuple[int, dict[str, bytes]]:
    outs = {k: tmp_path / f"{tag}.{k}" for k in ("xml", "sarif")}
    json_out = tmp_path / f"{tag}.json"
    argv = ["gate", str(tmp_path / "m.toml"), "--no-cache", "--junit", str(outs["xml"]),
            "--sarif", str(outs["sarif"]), "--json", *extra]
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(argv)
    json_out.write_text(buffer.getvalue())
    files = {k: p.read_bytes() for k, p in outs.items()}
    files["json"] = json_out.read_bytes()
    # JUnit's time attributes are seconds measured per run: two serial runs differ there
    files["xml"] = re.sub(rb'time="[0-9.]+"', b'time=""', files["xml"])
    return code, files


@needs_dask
def test_a_local_cluster_of_two_gives_the_serial_gates_bytes(tmp_path: Path) -> None:
    (tmp_path / "m.toml").write_text(MATRIX)
    serial_code, serial = _gate(tmp_path, "serial")
    code, clustered = _gate(tmp_path, "cluster", "--cluster", "local:2")
    assert serial_code == code == 1     # the flipped expectation fails, in both
    assert clustered == serial
    doc = json.loads(serial["json"])
    assert [c["status"] for c in doc["cases"]] == ["met", "met", "met", "failed"]


def _die(case: object, cache_dir: object, pipeline: object) -> object:
    os._exit(3)   # the worker process dies under the case


@needs_dask
def test_a_case_whose_worker_dies_twice_is_unknown_once(tmp_path: Path) -> None:
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    (tmp_path / "m.toml").write_text(MATRIX.split("\n\n")[0] + "\n")
    matrix = load_matrix(tmp_path / "m.toml")
    seen: list[tuple[int, object]] = []
    run_cases(ClusterSpec(local_workers=1), matrix.cases, None, Pipeline(), _die,
              lambda i, r: seen.append((i, r)))
    assert len(seen) == 1            # reported once, never lost nor counted twice
    index, result = seen[0]
    assert index == 0 and result.status is CaseStatus.UNKNOWN  # type: ignore[attr-defined]
    assert result.error.startswith(  # type: ignore[attr-defined]
        "the cluster local:1 lost the case twice (a worker died: KilledWorker")


@pytest.mark.parametrize(("value", "message"), [
    ("local:0", "--cluster local:0: local:N needs a worker count N >= 1, e.g. local:2"),
    ("local:x", "--cluster local:x: local:N needs a worker count N >= 1, e.g. local:2"),
    ("", "--cluster '': give a scheduler address (tcp://HOST:PORT) or local:N"),
])
def test_a_bad_cluster_is_one_line(value: str, message: str) -> None:
    with pytest.raises(OptionError) as caught:
        parse_cluster(value)
    assert str(caught.value) == message


def test_without_dask_the_cluster_is_one_line_and_exit_2(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "distributed" else real(name, *a))
    assert parse_cluster.__module__ == "meshproof.gate.cluster"
    code = main(["gate", "proofs.toml", "--cluster", "local:2"])
    assert code == 2
    assert capsys.readouterr().err.strip() == f"meshproof: error: {cluster.MISSING}"
    assert ClusterSpec(address="tcp://10.0.0.5:8786").name == "tcp://10.0.0.5:8786"
