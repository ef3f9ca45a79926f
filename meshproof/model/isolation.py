"""Trace a kernel in a child process, under limits.

A kernel is Python that tracing runs on this machine, once per rank. In-process, a host
loop that never ends (`while n >= 0: n += 1` between ops) hangs the verifier, and a kernel
that allocates without bound takes the machine with it. `trace_isolated` runs the same
`trace` in a child process with a wall-clock limit, CPU-time and address-space rlimits, no
stdin and a temporary working directory, and returns the Schedule, or raises the typed
error the trace raised, or a one-line error saying which limit ended it and how to raise
it. It is a fence against mistakes, not a sandbox: the child has the caller's files,
network and environment (README, "What running a kernel means").
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import math
import mmap
import multiprocessing
import os
import pickle
import resource
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

from meshproof.errors import (
    InternalError,
    KernelLoadError,
    LaunchError,
    MeshproofError,
    TraceCpuLimit,
    TraceCrashed,
    TraceError,
    TraceMemoryLimit,
    TraceTimeout,
)
from meshproof.model.launch import Launch
from meshproof.model.loader import KernelRef, describe_exception, resolve_kernel
from meshproof.model.op_pack import PackedPrograms, pack_programs, unpack_programs
from meshproof.model.schedule import Schedule
from meshproof.model.trace import TraceStopped, trace

DEFAULT_WALL_SECONDS = 60.0
DEFAULT_CPU_SECONDS = 60.0
DEFAULT_MEMORY_MB = 4096
# After its own timer fires the child has this long to report where it was, before the
# parent kills it: a kernel stuck in C code (or swallowing the stop) cannot delay the answer.
KILL_GRACE_SECONDS = 2.0
_MIB = 1 << 20
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class StartMethod(Enum):
    """How the child starts. FORK is the cheapest and shares the caller's loaded kernel; the
    others start a fresh interpreter and find the kernel again by its name."""

    FORK = "fork"
    FORKSERVER = "forkserver"
    SPAWN = "spawn"

    @staticmethod
    def default(findable: bool = True) -> StartMethod:
        """FORK where the platform has it and the caller runs one thread. A fork copies
        only the calling thread, so a lock another thread holds (a progress display
        writing to the terminal) stays held in the child; then FORKSERVER, whose server
        was forked before those threads, if the kernel can be found by name (`findable`)."""
        available = multiprocessing.get_all_start_methods()
        if "fork" in available and (threading.active_count() == 1 or not findable):
            return StartMethod.FORK
        return StartMethod.FORKSERVER if "forkserver" in available else StartMethod.SPAWN


@dataclass(frozen=True, slots=True)
class LimitKnobs:
    """How a user raises each limit, as the error messages say it (a CLI option, a gate
    key); by default, the TraceLimits field."""

    wall: str = "TraceLimits(wall_seconds=...)"
    cpu: str = "TraceLimits(cpu_seconds=...)"
    memory: str = "TraceLimits(memory_mb=...)"


@dataclass(frozen=True, slots=True)
class TraceLimits:
    """What one isolated trace may use.

    `memory_mb` bounds the address space the child may add to what it starts with (a forked
    child starts as large as its parent); None sets no memory limit.
    """

    wall_seconds: float = DEFAULT_WALL_SECONDS
    cpu_seconds: float = DEFAULT_CPU_SECONDS
    memory_mb: int | None = DEFAULT_MEMORY_MB
    knobs: LimitKnobs = field(default_factory=LimitKnobs)

    def __post_init__(self) -> None:
        for name, value, knob in (("wall-clock", self.wall_seconds, self.knobs.wall),
                                  ("CPU", self.cpu_seconds, self.knobs.cpu)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or value <= 0:
                raise LaunchError(f"the trace's {name} limit must be a positive number of "
                                  f"seconds, got {value!r} ({knob})")
        if self.memory_mb is not None and (isinstance(self.memory_mb, bool) or
                                           not isinstance(self.memory_mb, int) or
                                           self.memory_mb <= 0):
            raise LaunchError(f"the trace's memory limit must be a positive number of MiB, "
                              f"got {self.memory_mb!r} ({self.knobs.memory})")


@dataclass(frozen=True, slots=True)
class _Job:
    kernel: KernelRef | str  # a KernelRef only when forked: its function may not pickle
    launch: Launch
    limits: TraceLimits
    workdir: str             # the kernel's working directory
    reply_path: str          # where the child leaves its _Reply
    parent: int              # the caller's pid; 0 when a fork server is the parent


@dataclass(frozen=True, slots=True)
class _Reply:
    """The child's answer: the traced programs, or the error to raise in the parent."""

    programs: PackedPrograms | None = None
    error: type[MeshproofError] | None = None
    message: str = ""


def trace_isolated(kernel: KernelRef | str, launch: Launch,
                   limits: TraceLimits | None = None, *,
                   start: StartMethod | None = None) -> Schedule:
    """`trace(kernel, launch)` in a child process under `limits`.

    `kernel` is a resolved KernelRef or what `resolve_kernel` takes (a built-in name or
    `path::function`). A fresh interpreter (SPAWN, FORKSERVER) needs the latter, or a
    KernelRef that `resolve_kernel` made. Raises what the trace raised, with its message;
    TraceTimeout, TraceCpuLimit or TraceMemoryLimit when a limit ends it; TraceCrashed when
    the child dies without an answer. Ctrl-C kills the child and raises KeyboardInterrupt.
    """
    limits = limits or TraceLimits()
    method = start or StartMethod.default(isinstance(kernel, str) or bool(kernel.spec))
    context: Any = multiprocessing.get_context(method.value)  # the typeshed lacks .Process
    if method is StartMethod.FORKSERVER:  # its children then start with meshproof imported
        context.set_forkserver_preload([__name__, "meshproof.kernels"])
    name = launch.spec.kernel
    with tempfile.TemporaryDirectory(prefix="meshproof-trace-",
                                     ignore_cleanup_errors=True) as scratch:
        workdir = os.path.join(scratch, "cwd")
        os.mkdir(workdir)
        job = _Job(kernel if method is StartMethod.FORK else _spec_of(kernel), launch, limits,
                   workdir, os.path.join(scratch, "reply.pickle"),
                   0 if method is StartMethod.FORKSERVER else os.getpid())
        child = context.Process(target=_child_main, args=(job,), daemon=True,
                                name=f"meshproof-trace {name}")
        cpu_before = _children_cpu()
        try:
            child.start()
            child.join(limits.wall_seconds + KILL_GRACE_SECONDS)
            timed_out = child.exitcode is None
        finally:  # also on Ctrl-C: the child never outlives the call
            if child.pid is not None:
                if child.exitcode is None:
                    _kill(child)
                child.join()
        reply = _read_reply(job.reply_path)
        if reply is None and timed_out:
            raise TraceTimeout(_limit_text(name, "wall", limits))
        if reply is None:
            raise _died(child.exitcode, name, limits, _children_cpu() - cpu_before)
    if reply.programs is not None:
        return Schedule(launch.spec, launch.wiring, unpack_programs(reply.programs))
    if reply.error is not None:
        raise reply.error(reply.message)
    raise InternalError(f"tracing {name} in a child process failed: {reply.message}")


def _spec_of(kernel: KernelRef | str) -> str:
    if isinstance(kernel, str):
        return kernel
    if not kernel.spec:
        raise KernelLoadError(f"kernel {kernel.name} was not found by name or path::function, "
                              "so a fresh trace process cannot find it again; trace it with "
                              "StartMethod.FORK")
    return kernel.spec


def _read_reply(path: str) -> _Reply | None:
    try:
        with open(path, "rb") as file:
            reply = pickle.load(file)
    except FileNotFoundError:
        return None
    except Exception as exc:  # written by our own child: a meshproof bug
        raise InternalError(f"the trace process left an unreadable result "
                            f"({describe_exception(exc)}); please report") from None
    if not isinstance(reply, _Reply):
        raise InternalError("the trace process left a result of the wrong type; please report")
    return reply


def _kill(child: BaseProcess) -> None:
    with contextlib.suppress(OSError, ValueError):  # already gone, or closed
        child.kill()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _died(code: int | None, name: str, limits: TraceLimits, cpu_used: float) -> TraceError:
    """Why the child ended by itself without a reply."""
    # SIGXCPU at the soft CPU limit, SIGKILL at the hard one (if the kernel ignored SIGXCPU)
    if code == -signal.SIGXCPU or (code == -signal.SIGKILL and cpu_used >= limits.cpu_seconds):
        return TraceCpuLimit(_limit_text(name, "cpu", limits))
    if code == -signal.SIGKILL:
        return TraceCrashed(f"the trace process of kernel {name} was killed (SIGKILL) without "
                            "a result: by the system's out-of-memory killer, or another "
                            f"process; if memory ran out, lower {limits.knobs.memory} below "
                            "the free memory, or shrink the launch")
    if code is not None and code < 0:
        return TraceCrashed(f"the trace process of kernel {name} died of "
                            f"{signal.Signals(-code).name} without a result; the kernel (or C "
                            "code it calls) crashed or was killed")
    return TraceCrashed(f"the trace process of kernel {name} exited with code {code} without "
                        "a result; kernels must not end the process (os._exit)")


def _limit_text(name: str, which: str, limits: TraceLimits) -> str:
    if which == "cpu":
        return (f"tracing {name} used more than its CPU limit of {limits.cpu_seconds:g} s; make "
                f"the kernel's host loops end, or raise the limit with {limits.knobs.cpu}")
    return (f"tracing {name} did not finish within its wall-clock limit of "
            f"{limits.wall_seconds:g} s; make the kernel's host loops end, or raise the limit "
            f"with {limits.knobs.wall}")


# --- the child ---------------------------------------------------------------------------

def _child_main(job: _Job) -> None:
    """Runs in the child: leaves one _Reply in job.reply_path and ends the process."""
    # The inherited heap stays out of the child's collections: a full collection would
    # touch, and so copy, every page the fork shares with the parent.
    gc.freeze()
    # address space set aside (not touched) and given back on MemoryError, so that the
    # reply can still be built
    reserve = mmap.mmap(-1, 8 * _MIB)
    name = job.launch.spec.kernel
    try:
        _fence(job)
        kernel = job.kernel if isinstance(job.kernel, KernelRef) else \
            resolve_kernel(job.kernel)
        # after resolving, so that a relative kernel path means what it meant to the caller
        os.chdir(job.workdir)
        schedule = trace(kernel, job.launch)
        signal.setitimer(signal.ITIMER_REAL, 0)
        reply = _Reply(programs=pack_programs(schedule.programs))
    except TraceMemoryLimit as exc:
        reserve.close()
        reply = _Reply(error=TraceMemoryLimit, message=_memory_text(str(exc), job.limits))
    except MemoryError:
        reserve.close()
        reply = _Reply(error=TraceMemoryLimit, message=_memory_text(
            f"tracing {name} ran out of memory", job.limits))
    except TraceStopped as stop:  # a limit expired outside the kernel's own frames
        reply = _Reply(error=stop.error, message=stop.reason)
    except MeshproofError as exc:
        reply = _Reply(error=type(exc), message=str(exc))
    except BaseException as exc:  # a meshproof bug: the trace wraps the kernel's exceptions
        reply = _Reply(message=describe_exception(exc))
    signal.setitimer(signal.ITIMER_REAL, 0)
    _write_reply(job.reply_path, reply)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    # Now, without waiting for threads the kernel may have started, nor running the
    # parent's exit handlers a forked child inherited.
    os._exit(0)


def _write_reply(path: str, reply: _Reply) -> None:
    try:
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # e.g. an error type the kernel file defined
        data = pickle.dumps(_Reply(message="cannot send the result: "
                                           f"{describe_exception(exc)}"))
    partial = path + ".partial"
    with open(partial, "wb") as file:
        file.write(data)
    os.replace(partial, path)  # whole or absent, even if the child is killed half-way


def _fence(job: _Job) -> None:
    limits = job.limits
    name = job.launch.spec.kernel
    # Ctrl-C goes to the whole foreground process group: the parent handles it and kills
    # the child, which must not print a traceback of its own meanwhile.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(job.parent)
    faulthandler.disable()  # a crash is reported as one line, by the parent
    _set_limit(resource.RLIMIT_CORE, 0)
    cpu = math.ceil(limits.cpu_seconds)
    _set_limit(resource.RLIMIT_CPU, cpu, cpu + 2)  # SIGXCPU first, SIGKILL two seconds on
    if limits.memory_mb is not None:
        _set_limit(resource.RLIMIT_AS, _address_space() + limits.memory_mb * _MIB)
    signal.signal(signal.SIGXCPU, _stop_on(TraceCpuLimit, _limit_text(name, "cpu", limits)))
    signal.signal(signal.SIGALRM, _stop_on(TraceTimeout, _limit_text(name, "wall", limits)))
    signal.setitimer(signal.ITIMER_REAL, limits.wall_seconds)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    # Fresh stream objects: a lock another thread of the parent held at fork time would
    # otherwise stay held in the child, and the kernel's first print would hang.
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                      closefd=False, buffering=1)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                      closefd=False, buffering=1)


def _die_with_parent(parent: int) -> None:
    """If the caller is killed outright (SIGKILL, SIGTERM), take the child with it (Linux);
    elsewhere the child's own timers end it."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent and os.getppid() != parent:  # the caller died before prctl took effect
        os._exit(1)


def _stop_on(error: type[TraceError], reason: str) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        raise TraceStopped(error, reason)

    return handler


def _set_limit(which: int, soft: int, hard: int | None = None) -> None:
    _, current_hard = resource.getrlimit(which)
    want_hard = soft if hard is None else hard
    if current_hard != resource.RLIM_INFINITY:
        want_hard = min(want_hard, current_hard)
        soft = min(soft, want_hard)
    resource.setrlimit(which, (soft, want_hard))


def _address_space() -> int:
    """The process's address-space size in bytes (what RLIMIT_AS counts); 0 if unknown."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _memory_text(message: str, limits: TraceLimits) -> str:
    fix = message.rfind("; ")
    head = message[:fix] if fix >= 0 else message
    return (f"{head} (its limit: {limits.memory_mb} MiB more than it started with); shrink "
            f"the launch or the kernel's shapes and loop counts, or raise the limit with "
            f"{limits.knobs.memory}")

