"""What one isolated trace may use (`TraceLimits`) and how a user raises each limit
(`LimitKnobs`): a leaf, read by the parent (model/isolation.py, which re-exports it) and by
the child (model/isolation_child.py) without their importing each other."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from meshproof.errors import LaunchError

DEFAULT_WALL_SECONDS = 60.0
DEFAULT_CPU_SECONDS = 60.0
DEFAULT_MEMORY_MB = 4096
# The CPU limit a single timeout sets lies this far beyond its wall-clock limit.
CPU_MARGIN_SECONDS = 1.0


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


    @staticmethod
    def of_timeout(seconds: float, knob: str, base: TraceLimits | None = None) -> TraceLimits:
        """`base` (default: the defaults) with a wall-clock limit of `seconds` and a CPU limit
        one second more (so a busy host loop is ended by the clock, and named so), both
        raised with `knob`: what the CLI's --trace-timeout and the gate's trace_timeout give."""
        base = base or TraceLimits()
        cpu = seconds + CPU_MARGIN_SECONDS if math.isfinite(seconds) and seconds > 0 else seconds
        return replace(base, wall_seconds=seconds, cpu_seconds=cpu,
                       knobs=replace(base.knobs, wall=knob, cpu=knob))
