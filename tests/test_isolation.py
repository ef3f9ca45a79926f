"""model/isolation.py: tracing in a child process under a wall-clock limit, CPU and memory
rlimits, no stdin and a temporary working directory.

The child returns the same Schedule as an in-process trace, or the same error with the same
message; a kernel whose host code never ends, sleeps, hogs memory or crashes ends with one
typed line within its limit + 5 s; Ctrl-C in the parent kills the child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import REPO_ROOT, TEST_KERNELS, kernel_spec, line_of

from meshproof.errors import (
    BadInput,
    KernelLoadError,
    LaunchError,
    TimeBudgetExceeded,
    TraceBudgetExceeded,
    TraceCpuLimit,
    TraceCrashed,
    TraceError,
    TraceMemoryLimit,
    TraceTimeout,
    UnsupportedArgument,
)
from meshproof.model import budget
from meshproof.model.isolation import (
    KILL_GRACE_SECONDS,
    IsolatedTracer,
    LimitKnobs,
    StartMethod,
    TraceLimits,
    trace_isolated,
)
from meshproof.model.launch import Launch, LaunchOptions, build_launch
from meshproof.model.loader import KernelRef, resolve_kernel, site_of
from meshproof.model.trace import trace

RUNAWAY = TEST_KERNELS / "runaway.py"
SHORT = TraceLimits(wall_seconds=1.0, cpu_seconds=30.0, memory_mb=1024)


def runaway(name: str, **options: object) -> tuple[KernelRef, Launch]:
    ref = resolve_kernel(kernel_spec(f"runaway.py::{name}"))
    opts = LaunchOptions.from_mapping({"pes": 1, **options}, "test")
    return ref, build_launch(ref, opts)


def timed(call: Callable[[], object]) -> tuple[BaseException, float]:
    start = time.monotonic()
    with pytest.raises(BadInput) as info:
        call()
    return info.value, time.monotonic() - start


def at_line(marker: str, *, lines: int = 1) -> tuple[str, ...]:
    first = line_of(RUNAWAY, marker)
    return tuple(f"tests/kernels/runaway.py:{first + i}: rank (cube 0, pe 0): error: "
                 for i in range(lines))


# --- the same answer as in-process ---------------------------------------------------------

def test_a_forked_trace_returns_the_in_process_schedule() -> None:
    ref = resolve_kernel("mesh_mlo_2d")
    launch = build_launch(ref, LaunchOptions(mesh="2x4"))
    isolated = trace_isolated(ref, launch)
    assert isolated == trace(ref, launch)
    assert sum(len(p.ops) for p in isolated.programs) == 704


def test_the_callers_work_runs_while_the_child_traces() -> None:
    """`while_waiting` (the verify CLI's: Z3's context) runs in the caller once the child
    has started and before its answer is read: the schedule is the same."""
    ref = resolve_kernel("mesh_mlo_2d")
    launch = build_launch(ref, LaunchOptions(mesh="2x4"))
    seen: list[int] = []
    isolated = IsolatedTracer(while_waiting=lambda: seen.append(os.getpid()))(ref, launch)
    assert isolated == trace(ref, launch)
    assert seen == [os.getpid()]


@pytest.mark.parametrize("start", [StartMethod.SPAWN, StartMethod.FORKSERVER])
def test_a_fresh_interpreter_finds_the_kernel_by_its_spec(start: StartMethod) -> None:
    spec = "tests/kernels/kernbench_style.py::line_allreduce_kernel"
    cwd = os.getcwd()
    os.chdir(REPO_ROOT)  # a relative path, resolved where the caller stands
    try:
        ref = resolve_kernel(spec)
        launch = build_launch(ref, LaunchOptions(pes=4, args=(("rows", 2), ("cols", 2))))
        expected = trace(ref, launch)
        assert trace_isolated(ref, launch, start=start) == expected
        assert trace_isolated(spec, launch, start=start) == expected
    finally:
        os.chdir(cwd)


def test_a_fresh_interpreter_cannot_find_a_bare_function() -> None:
    ref, launch = runaway("many_ops")
    bare = replace(ref, spec="")
    with pytest.raises(KernelLoadError, match=r"was not found by name or path::function, so a "
                                              r"fresh trace process cannot find it again"):
        trace_isolated(bare, launch, start=StartMethod.SPAWN)
    assert trace_isolated(bare, launch).programs[0].ops  # forked, it needs no name


def test_fork_is_the_default_only_while_the_caller_runs_one_thread() -> None:
    assert StartMethod.default() is StartMethod.FORK
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert StartMethod.default() is StartMethod.FORKSERVER
        assert StartMethod.default(findable=False) is StartMethod.FORK
        ref = resolve_kernel("mesh_mlo_2d")
        launch = build_launch(ref, LaunchOptions(mesh="2x4"))
        assert trace_isolated(ref, launch) == trace(ref, launch)  # via the fork server
    finally:
        stop.set()
        other.join()


def test_the_traces_typed_error_is_raised_with_its_message() -> None:
    ref = resolve_kernel(kernel_spec("tl_misuse.py::masked_store"))
    launch = build_launch(ref, LaunchOptions(pes=1))
    with pytest.raises(UnsupportedArgument) as in_process:
        trace(ref, launch)
    with pytest.raises(UnsupportedArgument) as isolated:
        trace_isolated(ref, launch)
    assert str(isolated.value) == str(in_process.value)


def test_a_load_error_in_a_fresh_interpreter_is_the_same_error(tmp_path: Path) -> None:
    _, launch = runaway("many_ops")
    with pytest.raises(KernelLoadError, match=r"kernel file .*nowhere\.py does not exist"):
        trace_isolated(f"{tmp_path}/nowhere.py::k", launch, start=StartMethod.SPAWN)


def test_the_op_budget_still_holds_in_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    # the forked child inherits the patch: 100 ops' worth of memory
    monkeypatch.setattr(budget, "available_bytes", lambda: 100 * budget.BYTES_PER_OP)
    ref, launch = runaway("many_ops", args=(("n", 1000),))
    with pytest.raises(TraceError) as info:
        trace_isolated(ref, launch)
    assert str(info.value).startswith(
        f"{at_line('MANY-OPS')[0]}the launch traced more than 100 ops, all that fit in the ")
    assert str(info.value).endswith(
        "shrink the launch (--system, --cubes, --pes) or the kernel's shapes and loop counts, "
        "or free memory")


# --- limits -----------------------------------------------------------------------------

def test_a_never_ending_host_loop_ends_at_its_line_within_the_limit() -> None:
    ref, launch = runaway("endless")
    error, seconds = timed(lambda: trace_isolated(ref, launch, SHORT))
    assert isinstance(error, TraceTimeout)
    assert str(error).startswith(at_line("ENDLESS", lines=2))  # the `while` or its body
    assert str(error).endswith(
        f"error: tracing {RUNAWAY}::endless did not finish within its "
        "wall-clock limit of 1 s; make the kernel's host loops end, or raise the limit with "
        "TraceLimits(wall_seconds=...)")
    assert seconds < SHORT.wall_seconds + 5


def _slow_trace(kernel: KernelRef, launch: Launch) -> object:
    """A trace that outlasts any short limit, as a 64x64 launch does on a loaded machine."""
    time.sleep(60)
    return trace(kernel, launch)


def test_a_built_in_kernel_past_its_trace_limit_is_unknown_not_bad_input() -> None:
    """Mistake caught: a correct built-in launch that traces slowly on a busy machine was
    reported as bad input (exit 2); its trace ends, so past the limit there is just no
    verdict yet: TimeBudgetExceeded (exit 3, unknown)."""
    ref = resolve_kernel("mesh_mlo_1d")
    launch = build_launch(ref, LaunchOptions.from_mapping({"pes": 4}, "test"))
    with pytest.raises(TraceBudgetExceeded) as info:
        trace_isolated(ref, launch, SHORT, start=StartMethod.FORK,
                       tracer=_slow_trace)  # type: ignore[arg-type]
    assert isinstance(info.value, TimeBudgetExceeded) and not isinstance(info.value, BadInput)
    assert str(info.value) == (
        "tracing built-in kernel mesh_mlo_1d (4 ranks) did not finish within its wall-clock "
        "limit of 1 s (a large launch, or a busy machine): no schedule, so no verdict "
        "(unknown); raise the limit with TraceLimits(wall_seconds=...)")


def test_a_user_kernel_past_its_trace_limit_stays_bad_input() -> None:
    """The idiom kept: a user kernel's host loop may never end, so its limit is its fault
    (TraceTimeout, exit 2), whatever the trace was doing."""
    ref, launch = runaway("endless")
    with pytest.raises(TraceTimeout):
        trace_isolated(ref, launch, SHORT, start=StartMethod.FORK,
                       tracer=_slow_trace)  # type: ignore[arg-type]


def test_a_sleeping_kernel_is_ended_by_the_wall_clock() -> None:
    ref, launch = runaway("sleeps")
    error, seconds = timed(lambda: trace_isolated(ref, launch, SHORT))
    assert isinstance(error, TraceTimeout)
    assert str(error).startswith(at_line("SLEEPS"))
    assert seconds < SHORT.wall_seconds + 5


@pytest.mark.parametrize("kernel", ["swallows_the_stop", "stuck_in_c"])
def test_a_kernel_that_cannot_be_stopped_is_killed_after_the_grace(kernel: str) -> None:
    ref, launch = runaway(kernel)
    knobs = LimitKnobs(wall="--trace-timeout SECONDS")
    error, seconds = timed(lambda: trace_isolated(ref, launch, replace(SHORT, knobs=knobs)))
    assert isinstance(error, TraceTimeout)
    assert str(error) == (f"tracing {RUNAWAY}::{kernel} did not finish within "
                          "its wall-clock limit of 1 s; make the kernel's host loops end, or "
                          "raise the limit with --trace-timeout SECONDS")
    assert SHORT.wall_seconds + KILL_GRACE_SECONDS - 0.5 < seconds < SHORT.wall_seconds + 5


def test_the_cpu_limit_ends_a_busy_loop_at_its_line() -> None:
    ref, launch = runaway("endless")
    limits = TraceLimits(wall_seconds=30, cpu_seconds=1)
    error, seconds = timed(lambda: trace_isolated(ref, launch, limits))
    assert isinstance(error, TraceCpuLimit)
    assert str(error).startswith(at_line("ENDLESS", lines=2))
    assert str(error).endswith("used more than its CPU limit of 1 s; make the kernel's host "
                               "loops end, or raise the limit with TraceLimits(cpu_seconds=...)")
    assert seconds < 1 + 5


def test_the_hard_cpu_limit_kills_a_kernel_that_ignores_sigxcpu() -> None:
    ref, launch = runaway("spins_ignoring_sigxcpu")
    limits = TraceLimits(wall_seconds=30, cpu_seconds=1)
    error, seconds = timed(lambda: trace_isolated(ref, launch, limits))
    assert isinstance(error, TraceCpuLimit)
    assert str(error).startswith(f"tracing {RUNAWAY}::spins_ignoring_sigxcpu "
                                 "used more than its CPU limit of 1 s")
    # the CPU limit ended it, not the 30 s wall-clock one; how soon in wall-clock terms
    # depends on the machine's load, so only the order is pinned (benchmarks time it)
    assert seconds < 30


def test_the_memory_limit_ends_a_hog_at_its_line() -> None:
    ref, launch = runaway("hogs_memory")
    error, _ = timed(lambda: trace_isolated(ref, launch, replace(SHORT, wall_seconds=30,
                                                                  memory_mb=256)))
    assert isinstance(error, TraceMemoryLimit)
    assert str(error) == (
        f"{at_line('HOGS')[0]}tracing {RUNAWAY}::hogs_memory ran out of memory "
        "(its limit: 256 MiB more than it started with); shrink the launch or the kernel's "
        "shapes and loop counts, or raise the limit with TraceLimits(memory_mb=...)")


@pytest.mark.parametrize(("kernel", "how"), [("exits", "exited with code 3"),
                                             ("crashes", "died of SIGSEGV"),
                                             ("killed", "was killed (SIGKILL)")])
def test_a_child_that_dies_is_one_line(kernel: str, how: str) -> None:
    ref, launch = runaway(kernel)
    with pytest.raises(TraceCrashed) as info:
        trace_isolated(ref, launch, SHORT)
    assert str(info.value).startswith(f"the trace process of kernel "
                                      f"{RUNAWAY}::{kernel} {how} without a "
                                      "result")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("wall_seconds", 0, r"the trace's wall-clock limit must be a positive number of seconds, "
                        r"got 0 \(TraceLimits\(wall_seconds=\.\.\.\)\)"),
    ("cpu_seconds", float("nan"), r"CPU limit must be a positive number of seconds, got nan"),
    ("wall_seconds", True, r"got True"),
    ("memory_mb", -1, r"memory limit must be a positive number of MiB, got -1"),
])
def test_limits_are_checked(field: str, value: object, message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        TraceLimits(**{field: value})  # type: ignore[arg-type]
    assert TraceLimits(memory_mb=None).memory_mb is None
    assert (TraceLimits().wall_seconds, TraceLimits().cpu_seconds, TraceLimits().memory_mb) == \
        (60.0, 60.0, 4096)


def test_isolation_errors_are_bad_input() -> None:
    for error in (TraceTimeout, TraceCpuLimit, TraceMemoryLimit, TraceCrashed):
        assert issubclass(error, TraceError) and issubclass(error, BadInput)


# --- what the kernel sees: no stdin, a scratch directory -----------------------------------

def test_the_kernel_runs_in_a_temporary_directory_that_is_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    report = tmp_path / "report.txt"
    monkeypatch.setenv("MESHPROOF_TEST_REPORT", str(report))
    ref, launch = runaway("reads_stdin_and_cwd")
    trace_isolated(ref, launch, SHORT)
    length, cwd = report.read_text(encoding="utf-8").split(" ", 1)
    assert length == "0"
    assert Path(cwd).parent.parent == scratch and Path(cwd) != Path.cwd()
    assert list(scratch.iterdir()) == []  # the kernel's file went with its directory
    assert not (Path.cwd() / "kernel_was_here.txt").exists()


SCRIPT = textwrap.dedent("""
    import sys
    from meshproof.model.isolation import TraceLimits, trace_isolated
    from meshproof.model.launch import LaunchOptions, build_launch
    from meshproof.model.loader import resolve_kernel

    if __name__ == "__main__":
        ref = resolve_kernel(sys.argv[1])
        launch = build_launch(ref, LaunchOptions(pes=1))
        trace_isolated(ref, launch, TraceLimits(wall_seconds=float(sys.argv[2])))
        print("traced")
""")


def run_script(tmp_path: Path, kernel: str, wall: float,
               env: dict[str, str]) -> subprocess.Popen[str]:
    script = tmp_path / "isolated.py"
    script.write_text(SCRIPT, encoding="utf-8")
    return subprocess.Popen([sys.executable, str(script), kernel_spec(f"runaway.py::{kernel}"),
                             str(wall)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **env},
                            cwd=tmp_path)


def test_the_kernel_gets_no_stdin_even_when_the_caller_has_one(tmp_path: Path) -> None:
    report = tmp_path / "report.txt"
    proc = run_script(tmp_path, "reads_stdin_and_cwd", 30, {"MESHPROOF_TEST_REPORT": str(report)})
    out, err = proc.communicate("a line for the kernel\n", timeout=60)
    assert proc.returncode == 0, err
    assert out == "traced\n"
    assert report.read_text(encoding="utf-8").startswith("0 ")


def test_ctrl_c_in_the_parent_kills_the_child_and_raises_keyboard_interrupt(
        tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    proc = run_script(tmp_path, "waits_for_ctrl_c", 60, {"MESHPROOF_TEST_PIDFILE": str(pidfile)})
    try:
        child = wait_for_pid(pidfile)
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        assert time.monotonic() - start < 5
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGINT  # Python's exit for an uncaught Ctrl-C
    assert err.rstrip().endswith("KeyboardInterrupt")
    assert not is_running(child)


def wait_for_pid(pidfile: Path) -> int:
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline, "the kernel never started"
        time.sleep(0.05)
    return int(pidfile.read_text(encoding="utf-8"))


def is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has ended; only its parent's wait is missing


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_caller_killed_outright_takes_the_child_with_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    proc = run_script(tmp_path, "waits_for_ctrl_c", 60, {"MESHPROOF_TEST_PIDFILE": str(pidfile)})
    try:
        child = wait_for_pid(pidfile)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 5
        while is_running(child):
            assert time.monotonic() < deadline, "the child outlived its caller"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()


def test_site_of_a_runaway_kernel_is_its_file() -> None:
    # the line prefixes above rely on the display path of tests/kernels
    ref, _ = runaway("endless")
    assert site_of(ref.func).display_file == "tests/kernels/runaway.py"
