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
FRESH = "MESHPROOF_TEST_FRESH_PROCESS"


def _in_a_fresh_process(test: str) -> bool:
    """Run `test` of this file in a pytest of its own and say so (True: the caller stops).
    A LocalCluster leaves dask's threads running in the process that started it, and the
    trace isolation picks its start method by the caller's thread count
    (model/isolation.py): the tests that follow in the same worker would see them."""
    if os.environ.get(FRESH) == "1":
        return False
    import subprocess

    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", f"{__file__}::{test}"],
                          env={**os.environ, FRESH: "1"}, capture_output=True, text=True,
                          check=False, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return True

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
    if _in_a_fresh_process("test_a_local_cluster_of_two_gives_the_serial_gates_bytes"):
        return
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
    if _in_a_fresh_process("test_a_case_whose_worker_dies_twice_is_unknown_once"):
        return
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


@needs_dask
def test_cluster_and_jobs_together_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "proofs.toml", "--cluster", "local:2", "--jobs", "2"]) == 2
    assert capsys.readouterr().err.strip() == (
        "meshproof: error: --cluster local:2 and --jobs 2 both say where cases run; give "
        "one (local:N for N processes on this machine)")


@needs_dask
def test_ctrl_c_on_a_cluster_exits_130_and_ends_the_trace_it_started(tmp_path: Path) -> None:
    """Ctrl-C while a worker traces a kernel that spins: exit 130, one line, nothing
    written, and the worker's trace child is killed (not left spinning)."""
    import signal
    import subprocess
    import time

    from helpers import REPO_ROOT

    kernel = REPO_ROOT / "tests" / "kernels" / "runaway.py"
    (tmp_path / "proofs.toml").write_text(
        f'[[case]]\nname = "spin"\nkernel = "{kernel}::waits_for_ctrl_c"\npes = 1\n'
        'expect = "proved"\n')
    pidfile = tmp_path / "child.pid"
    junit = tmp_path / "gate.xml"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from meshproof.cli import entry; "
         "sys.argv[0] = 'meshproof'; entry()", "gate", "--cluster", "local:1", "--no-cache",
         "--junit", str(junit)], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MESHPROOF_TEST_PIDFILE": str(pidfile)})
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists() or not pidfile.read_text(encoding="utf-8"):
            assert time.monotonic() < deadline and proc.poll() is None, "no kernel started"
            time.sleep(0.05)
        child = int(pidfile.read_text(encoding="utf-8"))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, (out, err)
    assert err.splitlines()[-1] == "meshproof: interrupted"
    assert "Traceback" not in err and not junit.exists()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and \
            Path(f"/proc/{child}/stat").read_text().split()[2] != "Z":
        assert time.monotonic() < deadline, "the trace child outlived the gate"
        time.sleep(0.05)
