"""Trace the ranks of a large launch on two cores: a forked child traces the second half.

Each rank is traced on its own (its own tracer, its own value ids), so which process
traces it does not change its program; the child sends its programs back through a
pipe (model/op_pack.py) and the parent appends them in rank order. Used only for launches
estimated to trace more than `SPLIT_OPS` ops, and only where a fork is safe (one thread).
`trace_one` puts the kernel module's first state back before each rank (spec/tl.md §1),
on either core, so a module-level counter is seen as on one core.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable

from meshproof.errors import InternalError, TraceCrashed, TraceError
from meshproof.model.budget import OpBudget
from meshproof.model.op_pack import pack_programs, unpack_programs
from meshproof.model.schedule import RankProgram
from meshproof.model.topology import Endpoint

SPLIT_OPS = 400_000       # estimated ops of a launch above which it is traced on two cores
_PR_SET_PDEATHSIG = 1     # linux/prctl.h


def two_cores() -> bool:
    """A second core to trace on, and a process that may fork (one thread: a fork copies
    only the calling thread, so a lock another thread holds would stay held)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores >= 2 and hasattr(os, "fork") and threading.active_count() == 1


def worth_splitting(budget: OpBudget, ranks: int) -> bool:
    estimate = budget.traced / max(budget.ranks_done, 1) * ranks
    return estimate > SPLIT_OPS and two_cores()


def trace_on_two_cores(endpoints: list[Endpoint], trace_one: Callable[[Endpoint], RankProgram],
                       budget: OpBudget) -> list[RankProgram]:
    """The programs of `endpoints`, in order: the first half traced here, the second in a
    forked child. The first error in rank order wins; the budget holds for the whole."""
    half = len(endpoints) // 2
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child, measured by the parent's tests
        os.close(read_fd)
        _child(write_fd, endpoints[half:], trace_one)
    os.close(write_fd)
    done = False
    status: object = None
    try:
        mine = [trace_one(ep) for ep in endpoints[:half]]
        with os.fdopen(read_fd, "rb") as fh:
            try:
                status, payload = pickle.load(fh)
            except (EOFError, pickle.UnpicklingError):
                status, payload = "lost", None
        done = True
    finally:
        if not done:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.close(read_fd)
        _, code = os.waitpid(pid, 0)
    if status == "lost":
        how = f"signal {os.WTERMSIG(code)}" if os.WIFSIGNALED(code) else \
            f"exit code {os.WEXITSTATUS(code)}"
        raise TraceCrashed(f"tracing ranks {endpoints[half].describe()} onwards on the "
                           f"second core ended without a result ({how}); shrink the launch "
                           "or raise its memory limit")
    if status == "error":
        assert isinstance(payload, BaseException)
        raise payload
    theirs = unpack_programs(payload)
    for program in theirs:
        if budget.traced + len(program.ops) > budget.limit:
            index = budget.limit - budget.traced
            op = program.ops[index]
            raise TraceError(f"{op.source}: rank {program.endpoint.describe()}: error: "
                             f"{budget.exceeded(index)}")
        budget.finished_rank(len(program.ops))
    return [*mine, *theirs]


def _child(write_fd: int, endpoints: list[Endpoint],
           trace_one: Callable[[Endpoint], RankProgram]) -> None:  # pragma: no cover
    with contextlib.suppress(Exception):  # die with the parent (Linux)
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        payload: tuple[str, object] = ("ok", pack_programs(tuple(map(trace_one, endpoints))))
    except BaseException as exc:  # the parent re-raises it: the rank's own error
        payload = ("error", exc)
    try:
        data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        data = pickle.dumps(("error", InternalError(
            f"the second tracing core failed with an error that cannot be passed on: "
            f"{payload[1]!r} ({exc})")))
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
        with os.fdopen(write_fd, "wb") as fh:
            fh.write(data)
    os._exit(0)
