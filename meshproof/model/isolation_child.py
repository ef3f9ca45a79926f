"""The child side of an isolated trace (model/isolation.py): the fence it puts up around
the kernel, and the one reply it leaves for its parent.

A child either traces a launch (`Job.launch` set) or only imports a kernel file (the
parent's check before it imports the file itself). Everything here runs after the fork
or the fresh start, never in the caller's process.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import math
import mmap
import os
import pickle
import resource
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

from meshproof.errors import (
    MeshproofError,
    TraceCpuLimit,
    TraceError,
    TraceMemoryLimit,
    TraceTimeout,
)
from meshproof.model.launch import Launch
from meshproof.model.loader import KernelRef, TraceStopped, describe_exception, resolve_kernel
from meshproof.model.op_pack import PackedPrograms, pack_programs
from meshproof.model.schedule import Schedule
from meshproof.model.trace import trace

if TYPE_CHECKING:
    from meshproof.model.trace_limits import TraceLimits

_MIB = 1 << 20
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


@dataclass(frozen=True, slots=True)
class Job:
    kernel: KernelRef | str  # a KernelRef only when forked: its function may not pickle
    launch: Launch | None    # None: only import the kernel file
    limits: TraceLimits
    what: str                # the job in the limit messages' words: "tracing KERNEL"
    workdir: str             # the kernel's working directory
    caller_cwd: str          # where a relative kernel path is resolved
    reply_path: str          # where the child leaves its Reply
    parent: int              # the caller's pid; 0 when a fork server is the parent
    # how the child traces: `trace`, or another tracing of the same launch (a module-level
    # function or a partial of one, so that a fresh interpreter can receive it), e.g. the
    # placement search's relocatable trace (deploy/placement_trace.py)
    tracer: Callable[[KernelRef, Launch], Schedule] = trace


@dataclass(frozen=True, slots=True)
class Reply:
    """The child's answer: the traced programs (None after an import-only job), or the
    error to raise in the parent."""

    programs: PackedPrograms | None = None
    error: type[MeshproofError] | None = None
    message: str = ""
    done: bool = False


def limit_text(what: str, which: str, limits: TraceLimits) -> str:
    fix = "make its top-level code end" if what.startswith("importing") else \
        "make the kernel's host loops end"
    if which == "cpu":
        return (f"{what} used more than its CPU limit of {limits.cpu_seconds:g} s; {fix}, or "
                f"raise the limit with {limits.knobs.cpu}")
    return (f"{what} did not finish within its wall-clock limit of {limits.wall_seconds:g} s; "
            f"{fix}, or raise the limit with {limits.knobs.wall}")


def child_main(job: Job) -> None:
    """Runs in the child: leaves one Reply in job.reply_path and ends the process."""
    # The inherited heap stays out of the child's collections: a full collection would
    # touch, and so copy, every page the fork shares with the parent.
    gc.freeze()
    # address space set aside (not touched) and given back on MemoryError, so that the
    # reply can still be built
    reserve = mmap.mmap(-1, 8 * _MIB)
    try:
        _fence(job)
        reply = _run(job)
    except TraceMemoryLimit as exc:
        reserve.close()
        reply = Reply(error=TraceMemoryLimit, message=_memory_text(str(exc), job.limits))
    except MemoryError:
        reserve.close()
        reply = Reply(error=TraceMemoryLimit, message=_memory_text(
            f"{job.what} ran out of memory", job.limits))
    except TraceStopped as stop:  # a limit expired outside the kernel's own frames
        reply = Reply(error=stop.error, message=stop.reason)
    except MeshproofError as exc:
        reply = Reply(error=type(exc), message=str(exc))
    except BaseException as exc:  # a meshproof bug: the trace wraps the kernel's exceptions
        reply = Reply(message=describe_exception(exc))
    signal.setitimer(signal.ITIMER_REAL, 0)
    _write_reply(job.reply_path, reply)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    # Now, without waiting for threads the kernel may have started, nor running the
    # parent's exit handlers a forked child inherited.
    os._exit(0)


def _run(job: Job) -> Reply:
    os.chdir(job.caller_cwd)
    kernel = job.kernel if isinstance(job.kernel, KernelRef) else resolve_kernel(job.kernel)
    if job.launch is None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        return Reply(done=True)
    # after resolving, so that a relative kernel path means what it meant to the caller
    os.chdir(job.workdir)
    schedule = job.tracer(kernel, job.launch)
    signal.setitimer(signal.ITIMER_REAL, 0)
    return Reply(programs=pack_programs(schedule.programs), done=True)


def _write_reply(path: str, reply: Reply) -> None:
    try:
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # e.g. an error type the kernel file defined
        data = pickle.dumps(Reply(message="cannot send the result: "
                                          f"{describe_exception(exc)}"))
    partial = path + ".partial"
    with open(partial, "wb") as file:
        file.write(data)
    os.replace(partial, path)  # whole or absent, even if the child is killed half-way


def _fence(job: Job) -> None:
    limits = job.limits
    # Ctrl-C and a terminal's SIGTERM go to the whole process group: the parent handles
    # them and kills the child, which must not print a traceback of its own meanwhile.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    _die_with_parent(job.parent)
    faulthandler.disable()  # a crash is reported as one line, by the parent
    _set_limit(resource.RLIMIT_CORE, 0)
    cpu = math.ceil(limits.cpu_seconds)
    _set_limit(resource.RLIMIT_CPU, cpu, cpu + 2)  # SIGXCPU first, SIGKILL two seconds on
    if limits.memory_mb is not None:
        _set_limit(resource.RLIMIT_AS, _address_space() + limits.memory_mb * _MIB)
    signal.signal(signal.SIGXCPU, _stop_on(TraceCpuLimit, limit_text(job.what, "cpu", limits)))
    signal.signal(signal.SIGALRM, _stop_on(TraceTimeout, limit_text(job.what, "wall", limits)))
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
