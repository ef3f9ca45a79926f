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
import hashlib
import multiprocessing
import os
import pickle
import resource
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from enum import Enum
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from meshproof.errors import (
    InternalError,
    KernelLoadError,
    TraceBudgetExceeded,
    TraceCpuLimit,
    TraceCrashed,
    TraceError,
    TraceLimitExceeded,
    TraceTimeout,
)
from meshproof.model import builtin_source
from meshproof.model.isolation_child import Job, Reply, child_main, limit_text
from meshproof.model.launch import Launch
from meshproof.model.loader import KernelRef, describe_exception, resolve_kernel
from meshproof.model.op_pack import unpack_programs
from meshproof.model.schedule import Schedule
from meshproof.model.trace import trace
from meshproof.model.trace_limits import CPU_MARGIN_SECONDS as CPU_MARGIN_SECONDS
from meshproof.model.trace_limits import DEFAULT_CPU_SECONDS as DEFAULT_CPU_SECONDS
from meshproof.model.trace_limits import DEFAULT_MEMORY_MB as DEFAULT_MEMORY_MB
from meshproof.model.trace_limits import DEFAULT_WALL_SECONDS as DEFAULT_WALL_SECONDS
from meshproof.model.trace_limits import LimitKnobs as LimitKnobs
from meshproof.model.trace_limits import TraceLimits as TraceLimits

# After its own timer fires the child has this long to report where it was, before the
# parent kills it: a kernel stuck in C code (or swallowing the stop) cannot delay the answer.
KILL_GRACE_SECONDS = 2.0


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
class IsolatedTracer:
    """A pipeline tracer (gate/pipeline.py's `Tracer`) that traces in a child process.

    A frozen record rather than a closure, so that the gate's worker processes receive it.
    """

    limits: TraceLimits = field(default_factory=TraceLimits)
    start: StartMethod | None = None
    # work the caller needs next anyway, done in this process while the child traces
    # (it would wait idle): the CLI's verify creates Z3's context (trace_isolated)
    while_waiting: Callable[[], object] | None = None

    def __call__(self, kernel: KernelRef, launch: Launch) -> Schedule:
        return trace_isolated(kernel, launch, self.limits, start=self.start,
                              while_waiting=self.while_waiting)


@dataclass(frozen=True, slots=True)
class IsolatedResolver:
    """A pipeline resolver (`resolve_kernel`'s signature) that imports a kernel file in a
    child process under `limits` before the caller imports it (`load_isolated`)."""

    limits: TraceLimits = field(default_factory=TraceLimits)
    start: StartMethod | None = None

    def __call__(self, spec: str) -> KernelRef:
        return load_isolated(spec, self.limits, start=self.start)


def limit_stage(stage: Any, seconds: float, knob: str) -> Any:
    """`stage` with a timeout of `seconds` (`TraceLimits.of_timeout`) if it
    is an isolated tracer or resolver; any other stage (an in-process trace, a test's
    fake) as it is."""
    if isinstance(stage, IsolatedTracer | IsolatedResolver):
        return replace(stage, limits=TraceLimits.of_timeout(seconds, knob, stage.limits))
    return stage


def trace_isolated(kernel: KernelRef | str, launch: Launch,
                   limits: TraceLimits | None = None, *,
                   start: StartMethod | None = None,
                   tracer: Callable[[KernelRef, Launch], Schedule] = trace,
                   while_waiting: Callable[[], object] | None = None) -> Schedule:
    """`trace(kernel, launch)` in a child process under `limits`; `while_waiting` (if
    any) runs in this process once the child has started, before waiting for it.

    `kernel` is a resolved KernelRef or what `resolve_kernel` takes (a built-in name or
    `path::function`). A fresh interpreter (SPAWN, FORKSERVER) needs the latter, or a
    KernelRef that `resolve_kernel` made. Raises what the trace raised, with its message;
    TraceTimeout, TraceCpuLimit or TraceMemoryLimit when a limit ends it; TraceCrashed when
    the child dies without an answer. Ctrl-C kills the child and raises KeyboardInterrupt.
    """
    limits = limits or TraceLimits()
    findable = isinstance(kernel, str) or bool(kernel.spec)
    name = launch.spec.kernel
    try:
        reply = _run_child(kernel, launch, limits, start, findable, f"tracing {name}",
                           f"the trace process of kernel {name}", tracer, while_waiting)
    except (TraceTimeout, TraceCpuLimit) as exc:
        if not is_builtin(kernel):
            raise  # a user kernel's host loop may never end: its own fault (exit 2)
        raise TraceBudgetExceeded(_budget_text(name, launch, limits, exc)) from None
    if reply.programs is not None:
        return Schedule(launch.spec, launch.wiring, unpack_programs(reply.programs))
    raise InternalError(f"tracing {name} in a child process failed: {reply.message}")


def is_builtin(kernel: KernelRef | str) -> bool:
    """A built-in kernel (found by name, not `path::function`): its trace ends for every
    launch, so a limit that stops it says only that the launch is large or the machine
    busy."""
    spec = kernel if isinstance(kernel, str) else kernel.spec
    return bool(spec) and "::" not in spec


def _budget_text(name: str, launch: Launch, limits: TraceLimits,
                 exc: TraceTimeout | TraceCpuLimit) -> str:
    size = f" ({launch.spec.n_cubes * launch.spec.pes} ranks)"
    if isinstance(exc, TraceCpuLimit):
        limit, knob = f"CPU limit of {limits.cpu_seconds:g} s", limits.knobs.cpu
    else:
        limit, knob = f"wall-clock limit of {limits.wall_seconds:g} s", limits.knobs.wall
    return (f"tracing built-in kernel {name}{size} did not finish within its {limit} "
            "(a large launch, or a busy machine): no schedule, so no verdict (unknown); "
            f"raise the limit with {knob}")


# Kernel files (path, content hash) already imported in a child: without trouble (the
# caller imports them itself from then on), or ended by a limit or a death (the same
# error again, without waiting for the limit a second time).
_IMPORTED_SAFELY: set[tuple[str, str]] = set()
_IMPORT_FAILED: dict[tuple[str, str], TraceError] = {}


def load_isolated(spec: str, limits: TraceLimits | None = None, *,
                  start: StartMethod | None = None) -> KernelRef:
    """`resolve_kernel(spec)`, after a child process has imported the kernel file under
    `limits`: top-level code that never ends, eats memory or kills its process is one
    TraceError (exit 2) instead of a hang of the caller. Built-in kernels, and a file
    already imported this way (same contents), are resolved directly.

    The file's top-level code therefore runs once more, in the child; code that behaves
    differently the second time is not covered.
    """
    key = _file_key(spec)
    if key is None or key in _IMPORTED_SAFELY:
        return resolve_kernel(spec)
    if key in _IMPORT_FAILED:
        failed = _IMPORT_FAILED[key]
        raise type(failed)(str(failed))
    limits = limits or TraceLimits()
    file = spec.rpartition("::")[0]
    try:
        _run_child(spec, None, limits, start, True, f"importing kernel file {file}",
                   f"the process importing kernel file {file}")
    except (TraceLimitExceeded, TraceCrashed) as exc:
        _IMPORT_FAILED[key] = exc
        raise
    _IMPORTED_SAFELY.add(key)
    return resolve_kernel(spec)


def _file_key(spec: str) -> tuple[str, str] | None:
    """(absolute path, content hash) of a `path::function` spec's file; None for anything
    `resolve_kernel` answers without importing a file (a built-in, a malformed spec)."""
    if "::" not in spec:  # a built-in name (or a malformed spec)
        return None
    path = Path(spec.rpartition("::")[0])
    try:
        data = path.read_bytes()
    except OSError:
        return None  # resolve_kernel says what is wrong with the path
    return str(path.resolve()), hashlib.sha256(data).hexdigest()


def _run_child(kernel: KernelRef | str, launch: Launch | None, limits: TraceLimits,
               start: StartMethod | None, findable: bool, what: str, process: str,
               tracer: Callable[[KernelRef, Launch], Schedule] = trace,
               while_waiting: Callable[[], object] | None = None) -> Reply:
    """Run one Job in a child; return its reply, or raise the error it carries, or the
    error of a limit or a death. `start`: how (None: `StartMethod.default(findable)`,
    chosen while the caller's registered threads are paused)."""
    with tempfile.TemporaryDirectory(prefix="meshproof-trace-",
                                     ignore_cleanup_errors=True) as scratch:
        workdir = os.path.join(scratch, "cwd")
        os.mkdir(workdir)
        reply_path = os.path.join(scratch, "reply.pickle")
        child: BaseProcess | None = None
        cpu_before = _children_cpu()
        try:
            with _threads_paused():
                method = start or StartMethod.default(findable)
                # the typeshed lacks the context's .Process
                context: Any = multiprocessing.get_context(method.value)
                if method is StartMethod.FORKSERVER:  # its children start with these imported
                    context.set_forkserver_preload([__name__, "meshproof",
                                                    *builtin_source.declared()])
                job = Job(kernel if method is StartMethod.FORK else _spec_of(kernel), launch,
                          limits, what, workdir, os.getcwd(), reply_path,
                          0 if method is StartMethod.FORKSERVER else os.getpid(), tracer)
                child = context.Process(target=child_main, args=(job,), daemon=True,
                                        name=f"meshproof {what}")
                with _signals_held():
                    child.start()
            if while_waiting is not None:  # on the other core, while the child traces
                while_waiting()
            child.join(limits.wall_seconds + KILL_GRACE_SECONDS)
            timed_out = child.exitcode is None
        finally:  # also on Ctrl-C or SIGTERM: the child never outlives the call
            if child is not None and child.pid is not None:
                if child.exitcode is None:
                    _kill(child)
                child.join()
        reply = _read_reply(reply_path)
        if reply is None and timed_out:
            raise TraceTimeout(limit_text(what, "wall", limits))
        if reply is None:
            raise _died(child.exitcode, what, process, limits, _children_cpu() - cpu_before)
    if reply.error is not None:
        raise reply.error(reply.message)
    if not reply.done:
        raise InternalError(f"{what} in a child process failed: {reply.message}")
    return reply


# How callers stop their own threads (a progress display) for the moment a child is
# forked: each returns the callable that restarts them. A fork copies only the calling
# thread, so StartMethod.default forks only a process that runs one thread, and would
# otherwise start the fork server: a second interpreter importing meshproof and numpy,
# a second start-up (README, "What running a kernel means").
ThreadPauser = Callable[[], Callable[[], None]]
_PAUSERS: list[ThreadPauser] = []


@contextlib.contextmanager
def threads_paused_for_fork(pause: ThreadPauser) -> Iterator[None]:
    """While the block runs, isolated traces and imports call `pause` just before they
    choose how to start their child, and what it returns just after the child started."""
    _PAUSERS.append(pause)
    try:
        yield
    finally:
        _PAUSERS.remove(pause)


@contextlib.contextmanager
def _threads_paused() -> Iterator[None]:
    resumes: list[Callable[[], None]] = []
    try:
        for pause in tuple(_PAUSERS):
            resumes.append(pause())
        yield
    finally:
        for resume in reversed(resumes):
            resume()


# Ctrl-C and SIGTERM wait while the child is forked: raised inside os.fork's at-fork
# callbacks (logging registers one), their exception would be swallowed as "unraisable".
# The child unblocks them (isolation_child._fence) once it has its own dispositions.
HELD_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _spec_of(kernel: KernelRef | str) -> str:
    if isinstance(kernel, str):
        return kernel
    if not kernel.spec:
        raise KernelLoadError(f"kernel {kernel.name} was not found by name or path::function, "
                              "so a fresh trace process cannot find it again; trace it with "
                              "StartMethod.FORK")
    return kernel.spec


def _read_reply(path: str) -> Reply | None:
    try:
        with open(path, "rb") as file:
            reply = pickle.load(file)
    except FileNotFoundError:
        return None
    except Exception as exc:  # written by our own child: a meshproof bug
        raise InternalError(f"the trace process left an unreadable result "
                            f"({describe_exception(exc)}); please report") from None
    if not isinstance(reply, Reply):
        raise InternalError("the trace process left a result of the wrong type; please report")
    return reply


def _kill(child: BaseProcess) -> None:
    with contextlib.suppress(OSError, ValueError):  # already gone, or closed
        child.kill()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _died(code: int | None, what: str, process: str, limits: TraceLimits,
          cpu_used: float) -> TraceError:
    """Why the child ended by itself without a reply."""
    # SIGXCPU at the soft CPU limit, SIGKILL at the hard one (if the kernel ignored SIGXCPU)
    if code == -signal.SIGXCPU or (code == -signal.SIGKILL and cpu_used >= limits.cpu_seconds):
        return TraceCpuLimit(limit_text(what, "cpu", limits))
    if code == -signal.SIGKILL:
        return TraceCrashed(f"{process} was killed (SIGKILL) without a result: by the "
                            "system's out-of-memory killer, or another process; if memory ran "
                            f"out, lower {limits.knobs.memory} below the free memory, or "
                            "shrink the launch")
    if code is not None and code < 0:
        return TraceCrashed(f"{process} died of {signal.Signals(-code).name} without a "
                            "result; the kernel (or C code it calls) crashed or was killed")
    return TraceCrashed(f"{process} exited with code {code} without a result; kernels must "
                        "not end the process (os._exit)")
