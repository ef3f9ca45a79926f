"""Ctrl-C and SIGTERM (meshproof/interrupts.py, cli/__init__.py, gate/runner.py,
verify/z3util.py): exit 130 / 143 with one line, never 0, nothing written or cached, no
traceback — in every command, at the moment real work is under way.

Each command runs as the console script does (`entry()`), in a process of its own. A
small patch, applied before `entry()`, marks when the work has started (a file appears)
and makes that work last: the deadlock check runs a real Z3 query that takes seconds (so
Z3's own Ctrl-C handling is what is tested), the simulator sleeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from meshproof import interrupts
from meshproof.gate.cache import GateCache
from meshproof.gate.pipeline import Pipeline, one_launch, run_case
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.outputs import write_text
from meshproof.verify import z3util
from meshproof.verify.api import VerifyConfig
from meshproof.verify.result import Verdict

# Run before entry(): `ready` appears when the slow part starts.
PATCH = '''
import pathlib, sys, time
import z3
import meshproof.sim.api, meshproof.verify.deadlock as deadlock
from meshproof.verify import z3util
ready = pathlib.Path(sys.argv.pop(1))

def slow_check(solver):
    # built before `ready`: a signal that lands in a z3 object's __del__ while Python
    # builds it is swallowed ("Exception ignored"), and the test means Z3's search
    hard = z3.Solver()  # pigeonhole, 12 pigeons in 11 holes: many seconds of search
    holes = [[z3.Bool(f"p{i}_{j}") for j in range(11)] for i in range(12)]
    for row in holes:
        hard.add(z3.Or(row))
    for j in range(11):
        for a in range(12):
            for b in range(a):
                hard.add(z3.Or(z3.Not(holes[a][j]), z3.Not(holes[b][j])))
    ready.write_text("z3")
    z3util.check(hard)
    return z3util.check(solver)

def slow_simulate(schedule, config):
    ready.write_text("sim")
    time.sleep(120)

deadlock.check = slow_check
meshproof.sim.api.simulate = slow_simulate
from meshproof.cli import entry
sys.argv[0] = "meshproof"
entry()
'''


def run_until_ready(tmp_path: Path, args: list[str], sig: signal.Signals,
                    ready_timeout: float = 60) -> tuple[int, str, str]:
    """Start `meshproof ARGS`, send `sig` once its slow part runs, return code and output."""
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", PATCH, str(ready), *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    try:
        deadline = time.monotonic() + ready_timeout
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command never reached its slow part"
            time.sleep(0.02)
        time.sleep(0.2)  # well inside Z3's search, or the simulator's sleep
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, out, err


def assert_stopped(code: int, out: str, err: str, sig: signal.Signals) -> None:
    expected = 130 if sig is signal.SIGINT else 143
    word = "interrupted" if sig is signal.SIGINT else "terminated"
    assert code == expected, (code, out, err)
    assert err.splitlines()[-1] == f"meshproof: {word}", err
    assert "Traceback" not in out + err and "Exception ignored" not in err, err
    assert "" not in err.splitlines()  # no blank line of click's
    assert "as expected" not in out + err and "gate passed" not in out


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "proofs.toml").write_text(
        '[[case]]\nname = "line"\nkernel = "mesh_mlo_1d"\nexpect = "proved"\n',
        encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["int", "term"])
def test_verify_stopped_inside_z3(tmp_path: Path, sig: signal.Signals) -> None:
    smt2 = tmp_path / "q.smt2"
    code, out, err = run_until_ready(tmp_path, ["verify", "mesh_mlo_1d", "--smt2", str(smt2)],
                                     sig)
    assert_stopped(code, out, err, sig)
    assert out == "" and not smt2.exists()  # no table with an "unknown", no file


def test_simulate_stopped(tmp_path: Path) -> None:
    perfetto = tmp_path / "t.json"
    code, out, err = run_until_ready(
        tmp_path, ["simulate", "mesh_mlo_1d", "--perfetto", str(perfetto)], signal.SIGINT)
    assert_stopped(code, out, err, signal.SIGINT)
    assert out == "" and not perfetto.exists()


@pytest.mark.parametrize(("jobs", "sig"), [("1", signal.SIGINT), ("1", signal.SIGTERM),
                                           ("2", signal.SIGINT)], ids=["1-int", "1-term", "2-int"])
def test_gate_stopped_caches_and_writes_nothing(project: Path, sig: signal.Signals,
                                                jobs: str) -> None:
    junit = project / "gate.xml"
    code, out, err = run_until_ready(project, ["gate", "--jobs", jobs, "--junit", str(junit)],
                                     sig)
    assert_stopped(code, out, err, sig)
    assert not junit.exists()
    assert not list(project.glob(".meshproof-cache/gate/*.json"))


def test_report_stopped_leaves_no_report(tmp_path: Path) -> None:
    code, out, err = run_until_ready(tmp_path, ["report", "--out", "rep"], signal.SIGINT)
    assert_stopped(code, out, err, signal.SIGINT)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready"]  # no rep/, no temp dirs


def test_trace_stopped_while_the_kernel_runs(tmp_path: Path) -> None:
    """Ctrl-C while the trace child runs a kernel that sleeps: the child is killed."""
    kernel = REPO_ROOT / "tests" / "kernels" / "runaway.py"
    pidfile = tmp_path / "child.pid"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from meshproof.cli import entry; "
         "sys.argv[0] = 'meshproof'; entry()", "trace", f"{kernel}::waits_for_ctrl_c",
         "--pes", "1"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "MESHPROOF_TEST_PIDFILE": str(pidfile)})
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists() or not pidfile.read_text(encoding="utf-8"):
            assert time.monotonic() < deadline and proc.poll() is None, "no kernel started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert_stopped(proc.returncode, out, err, signal.SIGINT)
    child = int(pidfile.read_text(encoding="utf-8"))
    assert not Path(f"/proc/{child}").exists() or \
        Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"


# --- in-process: the pieces ----------------------------------------------------------------

@pytest.fixture
def armed() -> Iterator[None]:
    interrupts.arm()
    interrupts.reset()
    yield
    interrupts.reset()
    interrupts._armed.clear()


class _InterruptedSolver:
    """What Z3 returns when Ctrl-C ends a check: unknown, 'interrupted from keyboard'."""

    def check(self) -> object:
        import z3

        return z3.unknown

    def reason_unknown(self) -> str:
        return "interrupted from keyboard"


def test_a_check_that_ctrl_c_ended_is_an_interrupt_not_an_unknown(armed: None) -> None:
    # Z3 catches SIGINT itself: the property came out "unknown (interrupted from keyboard)"
    # and `report` went on to print "all as expected".
    with pytest.raises(KeyboardInterrupt):
        z3util.check(_InterruptedSolver())
    assert interrupts.received() == signal.SIGINT


def test_nothing_is_written_once_a_signal_was_noted(armed: None, tmp_path: Path) -> None:
    write_text(tmp_path / "before.txt", "ok")
    interrupts.note(signal.SIGTERM)
    with pytest.raises(interrupts.Terminated):
        write_text(tmp_path / "after.txt", "half a result")
    assert [p.name for p in tmp_path.iterdir()] == ["before.txt"]


def test_an_interrupt_lost_on_the_way_still_gives_130(armed: None,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt raised inside a finaliser is swallowed by Python; the noted
    signal still decides the exit code."""
    from meshproof import cli

    def swallowed(*_: object, **__: object) -> int:
        interrupts.note(signal.SIGINT)  # what the CLI's handler does before raising
        return 0

    monkeypatch.setattr(cli.cli, "invoke", swallowed)
    assert cli.main(["list"]) == 130
    assert capsys.readouterr().err == "meshproof: interrupted\n"


def test_an_interrupted_case_is_not_cached(tmp_path: Path) -> None:
    ref = resolve_kernel("mesh_mlo_1d")
    launch = build_launch(ref, LaunchOptions())
    cache = GateCache(tmp_path)

    def interrupted(schedule: object, config: VerifyConfig) -> Verdict:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_case(one_launch(ref, launch), simulate=False, cache=cache,
                 pipeline=Pipeline(verifier=interrupted))
    assert not list(tmp_path.iterdir())


def test_only_an_armed_process_remembers() -> None:
    interrupts.reset()
    interrupts.note(signal.SIGINT)  # a library caller's Ctrl-C stops one call, not all
    assert interrupts.received() is None
    interrupts.check()
