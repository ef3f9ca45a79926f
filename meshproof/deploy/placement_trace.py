"""A trace that is valid at every placement, when the kernel allows it.

A launch at cube_start k differs from one at 0 only in what the kernel can see of k:
`tl.program_id(axis=1)` (the *physical* cube id) and the launch-filled `cube_start`
argument. Here both are handed to the kernel as values that can be read in exactly one
way, `program_id(1) - cube_start` (the launch-local cube index, a plain int, the same at
every placement). Any other use — a comparison, `int(...)`, arithmetic with anything
else, hashing, printing, an attribute (so `isinstance` against another class too) — is
*observed*: the trace stops and the caller traces every placement normally. A rank that
observes nothing ran a deterministic function of values that do not depend on k, so its
trace at cube_start k is its trace at cube_start 0 with every endpoint moved by k cubes.

What Python cannot intercept is `type(x)` and `x is y`, which a kernel could use to tell
these values from ints. So the trace is also compared, op by op, with a normal trace at
the same placement, and used only when the two are identical (spec/deployments.md §3
states what remains assumed). Every failure (observation, an exception, a difference)
means "not relocatable", never an error: the normal traces then report what they report.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, NoReturn

from meshproof.errors import MeshproofError
from meshproof.model import tensor
from meshproof.model.budget import OpBudget
from meshproof.model.isolation import IsolatedTracer, trace_isolated
from meshproof.model.launch import Launch
from meshproof.model.loader import KernelRef, kernbench_shim
from meshproof.model.schedule import RankProgram, Schedule
from meshproof.model.tl_ops import Tl
from meshproof.model.topology import Endpoint
from meshproof.model.tracer import OpTable, Pointer, RankTracer


class NotRelocatable(MeshproofError):
    """Why a launch's relocatable trace cannot be used (raised where the trace runs, in a
    child process for the CLI; never shown to the user as an error)."""


class PlacementObserved(BaseException):
    """The kernel looked at its placement: stop this trace (a BaseException, so that the
    kernel's own `except Exception:` does not swallow it; the flag is set anyway)."""


@dataclass(slots=True)
class _Observer:
    what: str = ""      # the first observation, in words ("" while none)


def _observe(obj: object, what: str) -> NoReturn:
    observer: _Observer = object.__getattribute__(obj, "_observer")
    if not observer.what:
        observer.what = what
    raise PlacementObserved(what)


class CubeStart:
    """The launch-filled `cube_start` argument of a relocatable trace."""

    __slots__ = ("_observer", "_value")

    def __init__(self, value: int, observer: _Observer) -> None:
        object.__setattr__(self, "_value", value)
        object.__setattr__(self, "_observer", observer)

    def __getattribute__(self, name: str) -> Any:
        _observe(self, f"reads cube_start.{name}")


class PhysicalCube:
    """`tl.program_id(axis=1)` of a relocatable trace: `- cube_start` is its only reading."""

    __slots__ = ("_observer", "_value")

    def __init__(self, value: int, observer: _Observer) -> None:
        object.__setattr__(self, "_value", value)
        object.__setattr__(self, "_observer", observer)

    def __getattribute__(self, name: str) -> Any:
        _observe(self, f"reads program_id(axis=1).{name}")

    def __sub__(self, other: object) -> int:
        if type(other) is CubeStart and object.__getattribute__(other, "_observer") is \
                object.__getattribute__(self, "_observer"):
            local: int = object.__getattribute__(self, "_value") - \
                object.__getattribute__(other, "_value")
            return local
        _observe(self, "uses program_id(axis=1) other than as program_id(1) - cube_start")


# Every other way Python reads a value: each one observes.
_READS = ("add", "radd", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
          "rfloordiv", "mod", "rmod", "divmod", "rdivmod", "pow", "rpow", "lshift", "rlshift",
          "rshift", "rrshift", "and", "rand", "or", "ror", "xor", "rxor", "neg", "pos", "abs",
          "invert", "int", "index", "float", "complex", "bool", "round", "trunc", "floor",
          "ceil", "eq", "ne", "lt", "le", "gt", "ge", "hash", "str", "repr", "format", "bytes",
          "len", "iter", "getitem", "contains", "call", "reduce", "reduce_ex", "setattr",
          "delattr", "dir", "sizeof")


def _reader(cls_name: str, dunder: str) -> Any:
    def read(self: object, *args: object) -> NoReturn:
        _observe(self, f"uses {cls_name} via {dunder}")
    read.__name__ = dunder
    return read


for _cls, _label in ((CubeStart, "cube_start"), (PhysicalCube, "program_id(axis=1)")):
    for _name in _READS:
        if f"__{_name}__" not in _cls.__dict__:
            setattr(_cls, f"__{_name}__", _reader(_label, f"__{_name}__"))


class _PlacedTl(Tl):
    """The tl namespace of a relocatable trace: program_id(axis=1) is a PhysicalCube."""

    def __init__(self, tracer: RankTracer, observer: _Observer) -> None:
        super().__init__(tracer)
        self._observer = observer

    def program_id(self, *args: Any, **kwargs: Any) -> Any:
        value = Tl.program_id(self, *args, **kwargs)  # checks the arguments
        axis = kwargs.get("axis", args[0] if args else 0)
        return PhysicalCube(value, self._observer) if axis == 1 else value


def trace_relocatable(kernel: KernelRef, launch: Launch, *,
                      track_cube_start: bool) -> tuple[Schedule | None, str]:
    """The launch's schedule, traced so that it holds at every placement; or None and why
    not. `track_cube_start`: the kernel's `cube_start` is launch-filled (not an --arg)."""
    spec = launch.spec
    params = [n for n in inspect.signature(kernel.func).parameters if n != "tl"]
    observer = _Observer()
    programs: list[RankProgram] = []
    budget = OpBudget.for_launch(len(spec.cubes) * spec.pes)
    table = OpTable()
    with kernbench_shim():
        for cube in spec.cubes:
            for pe in range(spec.pes):
                ep = Endpoint(cube, pe)
                tracer = RankTracer(ep, (spec.pes, spec.n_cubes), kernel.site, budget, table)
                tracer.tl = _PlacedTl(tracer, observer)
                kwargs: dict[str, object] = {n: Pointer(n) for n in params if n.endswith("_ptr")}
                kwargs.update(dict(launch.call_args))
                if track_cube_start and "cube_start" in kwargs:
                    kwargs["cube_start"] = CubeStart(spec.cube_start, observer)
                tensor._ACTIVE.append(tracer)  # what TensorHandle(...) views find
                try:
                    kernel.func(**kwargs, tl=tracer.tl)
                    tracer.check_data_reads()
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:  # any failure: trace every placement normally
                    return None, observer.what or f"the kernel raised {type(exc).__name__} " \
                        "in a relocatable trace"
                finally:
                    tensor._ACTIVE.pop()
                if observer.what:  # observed, and the kernel swallowed the signal
                    return None, observer.what
                budget.finished_rank(len(tracer.ops))
                programs.append(RankProgram(ep, tuple(tracer.ops)))
    return Schedule(spec, launch.wiring, tuple(programs)), ""


def relocatable_schedule(kernel: KernelRef, launch: Launch, *,
                         track_cube_start: bool) -> Schedule:
    """`trace_relocatable` as a tracer: the schedule, or NotRelocatable saying why not
    (what a trace process sends back)."""
    schedule, why = trace_relocatable(kernel, launch, track_cube_start=track_cube_start)
    if schedule is None:
        raise NotRelocatable(why)
    return schedule


def trace_relocatable_like(tracer: object, kernel: KernelRef, launch: Launch, *,
                           track_cube_start: bool) -> tuple[Schedule | None, str]:
    """The relocatable trace where `tracer` (the pipeline's) traces: in a child process
    under its limits for an IsolatedTracer (as every command traces), else here."""
    if not isinstance(tracer, IsolatedTracer):
        return trace_relocatable(kernel, launch, track_cube_start=track_cube_start)
    how = functools.partial(relocatable_schedule, track_cube_start=track_cube_start)
    try:
        return trace_isolated(kernel, launch, tracer.limits, start=tracer.start,
                              tracer=how), ""
    except NotRelocatable as exc:
        return None, str(exc)
