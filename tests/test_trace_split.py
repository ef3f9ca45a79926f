"""model/trace_split.py: a large launch traced on two cores gives the programs, errors and
budget of tracing it on one."""

from __future__ import annotations

import threading

import pytest
from helpers import TEST_KERNELS, kernel_spec, line_of, trace_kernel

from meshproof.errors import KernelRaised, TraceCrashed, TraceError
from meshproof.model import budget, trace_split
from meshproof.model.topology import System

SPLIT = kernel_spec("split_cases.py::some_raise")
DIES = kernel_spec("split_cases.py::dies")
LINE = line_of(TEST_KERNELS / "split_cases.py", "SPLIT-RAISE")


def _split(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    monkeypatch.setattr(trace_split, "SPLIT_OPS", 0 if on else 10**12)


def _trace(kernel: str, **args: object) -> object:
    return trace_kernel(kernel, pes=32, system=System(1, 4, 4, 32),
                        args=tuple(sorted(args.items())))


@pytest.mark.skipif(not trace_split.two_cores(), reason="needs two cores and fork")
def test_a_launch_traced_on_two_cores_has_the_programs_of_one_core(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _split(monkeypatch, False)
    one = trace_kernel("mesh_mlo_2d", mesh="4x4")
    _split(monkeypatch, True)
    calls: list[int] = []
    real = trace_split.trace_on_two_cores
    monkeypatch.setattr("meshproof.model.trace.trace_on_two_cores",
                        lambda eps, *a: calls.append(len(eps)) or real(eps, *a))
    two = trace_kernel("mesh_mlo_2d", mesh="4x4")
    assert calls == [128 - 8]   # all but the probe ranks were split
    assert two.programs == one.programs and two.launch == one.launch


@pytest.mark.skipif(not trace_split.two_cores(), reason="needs two cores and fork")
@pytest.mark.parametrize("fail_pes", ["25", "30,5", "20,28"])
def test_the_first_error_in_rank_order_is_the_one_raised(
        monkeypatch: pytest.MonkeyPatch, fail_pes: str) -> None:
    # pe 25 and 28 are traced by the child, pe 5 and 20 by the parent
    errors = []
    for on in (False, True):
        _split(monkeypatch, on)
        with pytest.raises(KernelRaised) as info:
            _trace(SPLIT, fail_pes=fail_pes)
        errors.append(str(info.value))
    first = min(int(p) for p in fail_pes.split(","))
    assert errors[0] == errors[1] == (
        f"tests/kernels/split_cases.py:{LINE}: rank (cube 0, pe {first}): error: the kernel "
        f"raised ValueError: pe {first} gives up")


@pytest.mark.skipif(not trace_split.two_cores(), reason="needs two cores and fork")
def test_the_budget_holds_for_the_whole_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    # 32 ranks of 18 ops; 500 ops fit: rank 27, traced by the child, crosses the line
    monkeypatch.setattr(budget, "available_bytes", lambda: 500 * budget.BYTES_PER_OP)
    errors = []
    for on in (False, True):
        _split(monkeypatch, on)
        with pytest.raises(TraceError) as info:
            _trace(SPLIT)
        errors.append(str(info.value))
    assert "rank (cube 0, pe 27): error: the launch traced more than 500 ops" in errors[0]
    assert errors[1] == errors[0]


@pytest.mark.skipif(not trace_split.two_cores(), reason="needs two cores and fork")
def test_a_second_core_that_dies_is_a_crash_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    _split(monkeypatch, True)
    with pytest.raises(TraceCrashed, match=r"tracing ranks \(cube 0, pe 20\) onwards on the "
                       r"second core ended without a result \(exit code 3\)"):
        _trace(DIES, die_pe=30)


def test_no_second_core_while_another_thread_runs() -> None:
    # a fork copies only the calling thread: a lock another thread holds would stay held
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not trace_split.two_cores()
    finally:
        stop.set()
        other.join()
