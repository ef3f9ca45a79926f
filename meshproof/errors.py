"""Typed errors. Library code raises these; only the CLI prints them and picks exit codes.

Every message is one line and says how to fix the problem, because the CLI shows it
verbatim to a kernel developer.
"""

from __future__ import annotations


class MeshproofError(Exception):
    """Base class. Subclasses of `BadInput` mean exit code 2 at the CLI."""


class BadInput(MeshproofError):
    """The user's input (mesh, wiring, kernel, arguments, file) cannot be used."""


class TopologyError(BadInput):
    """A malformed system shape or an endpoint outside the system."""


class WiringError(BadInput):
    """An unknown wiring name or an invalid wiring file."""


class LaunchError(BadInput):
    """A launch that does not fit the system or misses kernel arguments."""


class KernelLoadError(BadInput):
    """The kernel cannot be found or imported."""


class TraceError(BadInput):
    """The kernel failed while being traced; the message names rank and source line."""


class KernelRaised(TraceError):
    """The kernel's own code raised an exception on some rank."""


class DataDependentControlFlow(TraceError):
    """Tensor data was used where a concrete Python value is needed (e.g. an `if`)."""


class UnsupportedOp(TraceError):
    """The kernel called a tl op or tensor method meshproof does not model."""


class UnsupportedArgument(UnsupportedOp):
    """A tl op got an argument it does not take: an unknown or unmodelled keyword (e.g.
    `mask=`), too many positional arguments, a missing or repeated one."""


class TraceLimitExceeded(TraceError):
    """An isolated trace (model/isolation.py) hit one of its `TraceLimits`."""


class TraceTimeout(TraceLimitExceeded):
    """The isolated trace did not finish within its wall-clock limit."""


class TraceCpuLimit(TraceLimitExceeded):
    """The isolated trace used more CPU time than its limit."""


class TraceMemoryLimit(TraceLimitExceeded):
    """The isolated trace ran out of memory (its address-space limit, or the machine's)."""


class TraceCrashed(TraceError):
    """The trace process died without a result (a signal, `os._exit`, a crash in C code)."""


class ShapeError(TraceError):
    """Operand shapes or dtypes of a tl op do not fit together."""


class ConfigError(BadInput):
    """A malformed TOML file (hardware profile, proof matrix)."""


class OutputError(BadInput):
    """An output path (report directory, diagram file) cannot be written there."""


class InternalError(MeshproofError):
    """A bug in meshproof itself, e.g. the simulation and Z3 disagree. Report it."""


class HarnessError(BadInput):
    """The simulator's input harness cannot run this kernel/launch (shapes, buffers)."""


class SimulationRefused(MeshproofError):
    """The schedule violates a property the simulator relies on (e.g. it deadlocks).

    Not bad input: the CLI reports it as a violation (exit 1)."""


class TimeBudgetExceeded(MeshproofError):
    """A run would take, or took, longer than its --time-budget: no result, so neither
    bad input nor a violation; the CLI reports it as unknown (exit 3)."""


class TraceBudgetExceeded(TimeBudgetExceeded):
    """A built-in kernel's trace, which ends, ran past its wall-clock or CPU limit (a large
    launch, a loaded machine): no schedule, so no verdict; unknown (exit 3), not bad input.
    A user kernel's trace past a limit stays a TraceTimeout / TraceCpuLimit (exit 2):
    its host loops may never end."""


class OptionError(BadInput):
    """An option that cannot be used (an unknown property name, an empty selection)."""


class SynthesisError(BadInput):
    """`meshproof synthesize` cannot build a schedule for this launch (ranks the wiring
    does not connect, a queue depth of 0, a message dtype it does not emit)."""


class PlanError(MeshproofError):
    """A synthesis plan fails its plan-level check (a state merged twice, a shard missing
    from an output, a transfer over a link the wiring lacks). The message names the row."""


class RecheckUnavailable(OptionError):
    """`--recheck SOLVER` (or the gate's `recheck` key) names a solver that is not
    installed: the run stops before verifying (exit 2), never proves on one solver."""
