"""Trace a launch: run the kernel once per launched endpoint, symbolically."""

from __future__ import annotations

from meshproof.errors import KernelRaised, MeshproofError, TraceMemoryLimit
from meshproof.model import tensor
from meshproof.model.budget import OpBudget
from meshproof.model.launch import Launch
from meshproof.model.loader import (
    KernelRef,
    TraceStopped,
    describe_exception,
    innermost_line,
    kernbench_shim,
)
from meshproof.model.module_state import ModuleState
from meshproof.model.paused_gc import paused_gc
from meshproof.model.schedule import RankProgram, Schedule
from meshproof.model.topology import Endpoint
from meshproof.model.trace_split import trace_on_two_cores, worth_splitting
from meshproof.model.tracer import OpTable, Pointer, RankTracer

__all__ = ["TraceStopped", "trace"]


PROBE_RANKS = 8    # ranks traced before deciding whether a second core helps


def trace(kernel: KernelRef, launch: Launch) -> Schedule:
    spec = launch.spec
    pointer_names = [n for n in _param_names(kernel) if n.endswith("_ptr")]
    endpoints = [Endpoint(cube, pe) for cube in spec.cubes for pe in range(spec.pes)]
    budget = OpBudget.for_launch(len(endpoints))
    table = OpTable()

    module = ModuleState(kernel.func.__globals__)

    def trace_one(ep: Endpoint) -> RankProgram:
        module.restore()  # each PE runs its own copy of the module
        program = _trace_rank(kernel, launch, ep, pointer_names, budget, table)
        budget.finished_rank(len(program.ops))
        return program

    # Kernel files may also import kernbench lazily, inside the kernel function.
    with kernbench_shim(), paused_gc():
        probe = max(PROBE_RANKS, len(endpoints) // 100)
        programs = [trace_one(ep) for ep in endpoints[:probe]]
        rest = endpoints[probe:]
        if len(rest) >= 2 and worth_splitting(budget, len(endpoints)):
            programs += trace_on_two_cores(rest, trace_one, budget)
        else:
            programs += [trace_one(ep) for ep in rest]
    return Schedule(spec, launch.wiring, tuple(programs))


def _trace_rank(kernel: KernelRef, launch: Launch, ep: Endpoint, pointer_names: list[str],
                budget: OpBudget, table: OpTable) -> RankProgram:
    spec = launch.spec
    tracer = RankTracer(ep, (spec.pes, spec.n_cubes), kernel.site, budget, table)
    kwargs: dict[str, object] = {n: Pointer(n) for n in pointer_names}
    kwargs.update(dict(launch.call_args))
    tensor._ACTIVE.append(tracer)
    try:
        kernel.func(**kwargs, tl=tracer.tl)
        tracer.check_data_reads()
        tracer.check_refusals()
    except (MeshproofError, KeyboardInterrupt):
        raise
    except TraceStopped as stop:
        line = innermost_line(stop, kernel.site.real_file) or kernel.site.def_line
        raise stop.error(f"{kernel.site.display_file}:{line}: rank {ep.describe()}: error: "
                         f"{stop.reason}") from None
    except MemoryError as exc:
        line = innermost_line(exc, kernel.site.real_file) or kernel.site.def_line
        raise TraceMemoryLimit(f"{kernel.site.display_file}:{line}: rank {ep.describe()}: "
                               f"error: tracing {kernel.name} ran out of memory; shrink the "
                               "launch or the kernel's shapes and loop counts") from None
    except RecursionError:
        raise KernelRaised(f"{kernel.site.display_file}: rank {ep.describe()}: error: "
                           "the kernel recursed too deeply while being traced") from None
    except BaseException as exc:  # also SystemExit: kernel code never sets our exit code
        line = innermost_line(exc, kernel.site.real_file) or kernel.site.def_line
        raise KernelRaised(
            f"{kernel.site.display_file}:{line}: rank {ep.describe()}: error: the kernel "
            f"raised {describe_exception(exc)}") from None
    finally:
        tensor._ACTIVE.pop()
    return RankProgram(ep, tuple(tracer.ops))


def _param_names(kernel: KernelRef) -> list[str]:
    import inspect

    return [n for n in inspect.signature(kernel.func).parameters if n != "tl"]
