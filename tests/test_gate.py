"""The gate's logic with a fake verifier: expectations, exit codes, JUnit, JSON, cache.

The fake decides each property from a table keyed by kernel function name and is passed
in as the pipeline's verifier, so these tests pin the gate's own behaviour independently
of the real proofs (which tests/test_gate_project.py runs).
"""

from __future__ import annotations

import json
import shutil
import time
import types
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import gate_cache_dir

from meshproof.cli import main
from meshproof.gate.pipeline import Pipeline
from meshproof.model.schedule import Schedule, SourceLoc
from meshproof.model.topology import Endpoint
from meshproof.verify.api import VerifyConfig
from meshproof.verify.properties import PROPERTY_NAMES, Property
from meshproof.verify.result import (
    Counterexample,
    DeadlockResult,
    Diagnostic,
    PropertyResult,
    Role,
    Status,
    Verdict,
)

DATA = Path(__file__).parent / "data" / "gate"
V, P, U = Status.VIOLATED, Status.PROVED, Status.UNKNOWN
Table = dict[str, dict[str, Status]]
Gate = Callable[[Sequence[str]], int]


def fake_verdict(schedule: Schedule, table: Table) -> Verdict:
    func = schedule.launch.kernel.rpartition("::")[2]
    props: list[PropertyResult] = []
    for prop in Property:
        name = prop.value
        status = table.get(func, {}).get(name, P)
        cex = None
        if status is V:
            cex = Counterexample(f"{name} is broken", (Diagnostic(
                f"{name} broke here", Role.BLOCKED, SourceLoc("kern.py", 12), Endpoint(0, 1)),))
        message = "solver timeout" if status is U else f"{name} {status.value}"
        if prop is Property.DEADLOCK_FREEDOM:
            props.append(DeadlockResult(prop, status, message, cex, 0.01, min_queue_depth=3,
                                        rendezvous=P))
        else:
            props.append(PropertyResult(prop, status, message, cex, 0.01))
    return Verdict(schedule.launch.kernel, schedule.launch, tuple(props))


class Fake:
    """A gate command whose pipeline verifies with a table of outcomes (and, if given, a
    fake simulator); `calls` lists the kernels verified."""

    def __init__(self, table: Table, simulator: Any = None) -> None:
        self.table = table
        self.calls: list[str] = []
        self.pipeline = Pipeline(verifier=self.verify) if simulator is None else \
            Pipeline(verifier=self.verify, simulator=simulator)

    def verify(self, schedule: Schedule, config: VerifyConfig) -> Verdict:
        self.calls.append(schedule.launch.kernel)
        return fake_verdict(schedule, self.table)

    def __call__(self, args: Sequence[str]) -> int:
        return main(["gate", *args], pipeline=self.pipeline)


@pytest.fixture
def fake() -> Callable[[Table], Fake]:
    """`fake(table)`: a gate command verifying with the given outcomes."""
    return Fake


BAD = {"mesh_mlo_1d_recv_first": {"deadlock_freedom": V}}


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    """fake.toml and the user kernels it names, copied so the cache lands in tmp_path."""
    shutil.copytree(DATA / "kernels", tmp_path / "kernels")
    shutil.copy(DATA / "fake.toml", tmp_path / "proofs.toml")
    return tmp_path / "proofs.toml"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_expectations_that_hold_exit_0(fake: Callable[[Table], Fake], matrix: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    gate = fake(BAD)
    assert gate([str(matrix), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "gate passed: 3 cases (3 met)" in out
    assert len(gate.calls) == 3


def test_flipped_expectation_exits_1_and_junit_names_the_case(
        fake: Callable[[Table], Fake], matrix: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    gate = fake(BAD)
    edit(matrix, 'expect = ["deadlock_freedom"]', 'expect = "proved"')
    junit = tmp_path / "reports" / "gate.xml"
    assert gate([str(matrix), "--no-cache", "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert "bad-deadlock: FAILED" in out
    assert "kern.py:12: rank (cube 0, pe 1): error: deadlock_freedom broke here" in out
    root = ET.parse(junit).getroot()
    cases = root.findall(".//testcase")
    assert len(cases) == 3 * len(PROPERTY_NAMES)
    failing = [c for c in cases if c.find("failure") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failing] == \
        [("bad-deadlock", "deadlock_freedom")]
    failure = failing[0].find("failure")
    assert failure is not None
    assert "bad-deadlock" in (failure.get("message") or "")
    assert "kern.py:12: rank (cube 0, pe 1): error" in (failure.text or "")
    assert root.get("failures") == "1" and root.get("errors") == "0"


def test_expected_violation_that_is_proved_fails(fake: Callable[[Table], Fake],
                                                 matrix: Path, tmp_path: Path) -> None:
    gate = fake({})  # the known-bad kernel now proves: the matrix must be updated, so fail
    junit = tmp_path / "gate.xml"
    assert gate([str(matrix), "--no-cache", "--junit", str(junit)]) == 1
    failure = ET.parse(junit).getroot().find(".//testcase[@classname='bad-deadlock']/failure")
    assert failure is not None
    assert "expected violated" in (failure.get("message") or "")


def test_an_expected_violation_that_occurs_keeps_its_counterexample(
        fake: Callable[[Table], Fake], matrix: Path, tmp_path: Path) -> None:
    gate = fake(BAD)
    junit = tmp_path / "gate.xml"
    assert gate([str(matrix), "--no-cache", "--junit", str(junit)]) == 0
    case = ET.parse(junit).getroot().find(
        ".//testcase[@classname='bad-deadlock'][@name='deadlock_freedom']")
    assert case is not None and case.find("failure") is None
    out = case.find("system-out")
    assert out is not None and "kern.py:12" in (out.text or "")


def test_unknown_exits_3_never_0(fake: Callable[[Table], Fake], matrix: Path,
                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gate = fake({**BAD, "mesh_mlo_1d": {"exactly_once_merge": U}})
    junit = tmp_path / "gate.xml"
    assert gate([str(matrix), "--no-cache", "--junit", str(junit)]) == 3
    assert "gate UNKNOWN" in capsys.readouterr().out
    error = ET.parse(junit).getroot().find(
        ".//testcase[@classname='good-line'][@name='exactly_once_merge']/error")
    assert error is not None and "unknown" in (error.get("message") or "")


def test_a_failure_outranks_an_unknown(fake: Callable[[Table], Fake],
                                       matrix: Path) -> None:
    gate = fake({"mesh_mlo_1d": {"exactly_once_merge": U}})  # and the known-bad kernel proves
    assert gate([str(matrix), "--no-cache"]) == 1


def test_json_is_deterministic_and_complete(fake: Callable[[Table], Fake], matrix: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    gate = fake(BAD)
    assert gate([str(matrix), "--json"]) == 0
    first = capsys.readouterr().out
    assert gate([str(matrix), "--json"]) == 0  # now from the cache
    second = capsys.readouterr().out
    assert first == second
    data = json.loads(first)
    assert data["schema"] == "meshproof/gate-v2" and data["ok"] is True
    assert data["counts"] == {"met": 3, "failed": 0, "unknown": 0, "error": 0}
    bad = data["cases"][1]
    assert (bad["name"], bad["expected"], bad["got"]) == \
        ("bad-deadlock", "deadlock_freedom", "deadlock_freedom")
    dead = next(p for p in bad["properties"] if p["name"] == "deadlock_freedom")
    assert dead["expected"] == "violated"
    assert dead["diagnostics"] == [
        "kern.py:12: rank (cube 0, pe 1): error: deadlock_freedom broke here"]
    assert bad["launch"]["pes"] == 4


def test_cache_skips_unchanged_cases(fake: Callable[[Table], Fake], matrix: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    gate = fake(BAD)
    assert gate([str(matrix)]) == 0
    assert len(gate.calls) == 3
    entries = list(gate_cache_dir().glob("*.json"))
    assert len(entries) == 3
    capsys.readouterr()
    assert gate([str(matrix)]) == 0
    assert len(gate.calls) == 3
    assert capsys.readouterr().out.count("cached") == 3
    # a flipped expectation is re-judged from the cache, not re-proved
    edit(matrix, 'expect = ["deadlock_freedom"]', 'expect = "proved"')
    assert gate([str(matrix)]) == 1
    assert len(gate.calls) == 3
    # a changed launch is re-proved
    edit(matrix, "pes = 4", "pes = 3")
    assert gate([str(matrix)]) == 1
    assert len(gate.calls) == 4
    # --no-cache re-proves everything
    assert gate([str(matrix), "--no-cache"]) == 1
    assert len(gate.calls) == 7


def test_cache_follows_the_kernel_source(fake: Callable[[Table], Fake],
                                         matrix: Path) -> None:
    gate = fake(BAD)
    assert gate([str(matrix)]) == 0
    kernel = matrix.parent / "kernels" / "user_kernels.py"
    kernel.write_text(kernel.read_text() + "\n# an edit\n")
    assert gate([str(matrix)]) == 0
    assert gate.calls[3:] == [gate.calls[2]]  # only the user kernel's case is proved again


def test_no_cache_writes_nothing_and_unknowns_are_not_cached(
        fake: Callable[[Table], Fake], matrix: Path) -> None:
    gate = fake({**BAD, "mesh_mlo_1d": {"deadlock_freedom": U}})
    assert gate([str(matrix), "--no-cache"]) == 3
    assert not gate_cache_dir().exists()
    assert not (matrix.parent / ".meshproof-cache").exists()
    assert gate([str(matrix)]) == 3
    assert gate([str(matrix)]) == 3
    assert gate.calls.count("mesh_mlo_1d") == 3  # the unknown case is re-run every time
    assert len(gate.calls) == 3 + 3 + 1


def test_corrupt_cache_entry_is_a_miss(fake: Callable[[Table], Fake],
                                       matrix: Path) -> None:
    gate = fake(BAD)
    assert gate([str(matrix)]) == 0
    for entry in gate_cache_dir().glob("*.json"):
        entry.write_text("{not json")
    assert gate([str(matrix)]) == 0
    assert len(gate.calls) == 6


def test_a_kernel_that_raises_is_an_error(fake: Callable[[Table], Fake], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    gate = fake({})
    (tmp_path / "k.py").write_text(
        "def boom(x_ptr, *, tl):\n    raise RuntimeError('oops')\n")
    (tmp_path / "m.toml").write_text(
        '[[case]]\nname = "boom"\nkernel = "k.py::boom"\nexpect = "proved"\n')
    junit = tmp_path / "j.xml"
    assert gate([str(tmp_path / "m.toml"), "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert "boom: ERROR" in out and "RuntimeError: oops" in out
    root = ET.parse(junit).getroot()
    assert root.get("errors") == str(len(PROPERTY_NAMES))
    assert not gate_cache_dir().exists()


RUNAWAY = Path(__file__).parent / "kernels" / "runaway.py"


def test_a_never_ending_host_loop_is_an_error_row_within_its_limit_and_not_cached(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real pipeline (kernels traced in child processes): the case's trace_timeout key,
    else --trace-timeout, ends the trace; the gate goes on, and caches nothing of it."""
    shutil.copy(RUNAWAY, tmp_path / "runaway.py")
    matrix = tmp_path / "proofs.toml"
    matrix.write_text(
        '[[case]]\nname = "endless"\nkernel = "runaway.py::endless"\npes = 1\n'
        'trace_timeout = 1\nexpect = "proved"\n\n'
        '[[case]]\nname = "endless-cli"\nkernel = "runaway.py::endless"\npes = 1\n'
        'expect = "proved"\n', encoding="utf-8")
    start = time.monotonic()
    assert main(["gate", str(matrix), "--trace-timeout", "1"]) == 1
    assert time.monotonic() - start < 2 * (1 + 5)
    out = capsys.readouterr().out
    assert "endless: ERROR" in out and "endless-cli: ERROR" in out
    flat = " ".join(out.split())
    assert "did not finish within its wall-clock limit of 1 s; make the kernel's host loops " \
        "end, or raise the limit with the trace_timeout key of case 'endless'" in flat
    assert "raise the limit with --trace-timeout SECONDS (or the case's trace_timeout key)" \
        in flat
    assert not list(tmp_path.glob(".meshproof-cache/gate/*.json"))


def test_trace_timeout_must_be_a_positive_number(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    matrix = tmp_path / "proofs.toml"
    matrix.write_text('[[case]]\nname = "x"\nkernel = "mesh_mlo_1d"\ntrace_timeout = 0\n'
                      'expect = "proved"\n', encoding="utf-8")
    assert main(["gate", str(matrix)]) == 2
    assert "case #1 (x): trace_timeout must be a positive number of seconds, got 0" in \
        capsys.readouterr().err


class FakeSimulator:
    """Stands in for sim.api.simulate: a result with only `.numeric`."""

    def __init__(self, ok: bool) -> None:
        self.ok = ok
        self.seen: list[Schedule] = []

    def __call__(self, schedule: Schedule, config: Any) -> Any:
        self.seen.append(schedule)
        numeric = types.SimpleNamespace(ok=self.ok, rel_err=0.5 if not self.ok else 1e-4,
                                        max_abs_err=0.1, tolerance=1e-2)
        return types.SimpleNamespace(numeric=numeric)


@pytest.mark.parametrize(("expect", "ok", "code"), [
    ('"proved"', True, 0), ('"proved"', False, 1),
    ('["numerics"]', False, 0), ('["numerics"]', True, 1)])
def test_simulate_checks_numerics(tmp_path: Path, expect: str, ok: bool, code: int) -> None:
    simulator = FakeSimulator(ok)
    gate = Fake({}, simulator)
    (tmp_path / "m.toml").write_text(
        f'[[case]]\nname = "n"\nkernel = "mesh_mlo_1d"\nsimulate = true\nexpect = {expect}\n')
    junit = tmp_path / "j.xml"
    assert gate([str(tmp_path / "m.toml"), "--no-cache", "--junit",
                 str(junit)]) == code
    assert len(simulator.seen) == 1
    numerics = ET.parse(junit).getroot().find(".//testcase[@name='numerics']")
    assert numerics is not None
    assert (numerics.find("failure") is None) == (code == 0)


def test_unwritable_junit_path_is_one_line(fake: Callable[[Table], Fake], matrix: Path,
                                           tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    gate = fake(BAD)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert gate([str(matrix), "--no-cache", "--junit", str(blocker / "j.xml")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err  # the cases ran (progress lines), then one error line
    assert err.splitlines()[-1].startswith("meshproof: error: cannot write the JUnit report")


def test_the_progress_bar_starts_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """With one thread the trace children are forked (~20 ms), not started by a fork
    server (~130 ms): rich's live bar must not run its refresh thread."""
    import threading

    from rich.console import Console

    from meshproof.cli import gate_cmd
    from meshproof.model.isolation import StartMethod

    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    before = threading.active_count()
    with gate_cmd._progress(2) as advance:
        assert threading.active_count() == before
        assert StartMethod.default() is StartMethod.FORK
        del advance


def test_cache_dir_option_and_environment(fake: Callable[[Table], Fake], matrix: Path,
                                          tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    gate = fake(BAD)
    chosen = tmp_path / "chosen"
    assert gate([str(matrix), "--cache-dir", str(chosen)]) == 0
    assert len(list((chosen / "gate").glob("*.json"))) == 3
    assert not gate_cache_dir().exists()  # --cache-dir wins over MESHPROOF_CACHE_DIR
    assert gate([str(matrix), "--cache-dir", str(chosen)]) == 0
    assert len(gate.calls) == 3  # served from there
    monkeypatch.setenv("MESHPROOF_CACHE_DIR", str(tmp_path / "env"))
    assert gate([str(matrix)]) == 0
    assert len(list((tmp_path / "env" / "gate").glob("*.json"))) == 3


def test_the_default_cache_is_not_in_the_checkout(fake: Callable[[Table], Fake], matrix: Path,
                                                  tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Running a project's gate leaves its working tree clean: the cache is the user's."""
    monkeypatch.delenv("MESHPROOF_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(matrix.parent)
    assert fake(BAD)([str(matrix)]) == 0
    assert len(list((tmp_path / "xdg" / "meshproof" / "gate").glob("*.json"))) == 3
    assert not (matrix.parent / ".meshproof-cache").exists()


def test_a_cache_dir_that_is_a_file_is_bad_input(fake: Callable[[Table], Fake], matrix: Path,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_text("x")
    assert fake(BAD)([str(matrix), "--cache-dir", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--cache-dir" in err and "is a file" in err


def test_an_unwritable_cache_dir_is_refused_or_named(fake: Callable[[Table], Fake],
                                                     matrix: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        gate = fake(BAD)
        # asked for by name: bad input, before any case runs
        assert gate([str(matrix), "--cache-dir", str(locked)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{locked} is not writable" in err, err
        assert gate.calls == []
        # the default place (here: the environment's): the gate runs, uncached, and says so
        monkeypatch.setenv("MESHPROOF_CACHE_DIR", str(locked))
        assert gate([str(matrix)]) == 0
        err = capsys.readouterr().err
        assert f"note: cannot write the gate cache {locked / 'gate'}" in err
        assert "this run caches nothing" in err and len(gate.calls) == 3
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)
