"""A deployment: several launches on one system at once, as one frozen record.

Each launch keeps its own schedule (its kernel, arguments, groups and properties); what
they share is the machine: the system, the hardware queue depth and the links. Launches
are listed in the order they were given; `merged()` is the whole system as one schedule,
for the timing model (simulate.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from meshproof.errors import LaunchError
from meshproof.model.launch import Launch
from meshproof.model.loader import KernelRef
from meshproof.model.schedule import GroupMode, Harness, LaunchSpec, RankProgram, Schedule
from meshproof.model.topology import Endpoint, System
from meshproof.model.wiring import Link, Wiring

Resolver = Callable[[str], KernelRef]
Tracer = Callable[[KernelRef, Launch], Schedule]


@dataclass(frozen=True, slots=True)
class Deployment:
    """Launches that run at the same time on one system, in the order given."""

    name: str
    system: System
    schedules: tuple[Schedule, ...]

    @property
    def queue_depth(self) -> int:
        return self.schedules[0].launch.queue_depth

    def label(self, index: int) -> str:
        """`launch 3 (mesh_mlo_2d_batch at cubes 16..23)`: how diagnostics name a launch."""
        spec = self.schedules[index].launch
        return (f"launch {index + 1} ({spec.kernel} at cubes {spec.cube_start}.."
                f"{spec.cube_start + spec.n_cubes - 1})")

    @property
    def endpoints(self) -> int:
        """Launched endpoints over all launches."""
        return sum(s.launch.n_cubes * s.launch.pes for s in self.schedules)

    def header(self) -> str:
        spec = self.schedules[0].launch
        kernels = sorted({s.launch.kernel for s in self.schedules})
        wirings = sorted({s.launch.wiring for s in self.schedules})
        cubes = sum(s.launch.n_cubes for s in self.schedules)
        return (f"{self.name}: {len(self.schedules)} launch(es) of {', '.join(kernels)} on "
                f"{', '.join(wirings)} ({self.system.shape_text}), {cubes} cubes, "
                f"{self.endpoints} endpoints, queue depth {spec.queue_depth}")

    def merged(self) -> Schedule:
        """All launches as one schedule over the cubes they span (a cube no launch uses
        gets empty programs), on the union of each launch's links between its own
        endpoints: what the timing model runs so that every launch's messages move at
        the same time."""
        first = min(s.launch.cube_start for s in self.schedules)
        last = max(s.launch.cube_start + s.launch.n_cubes for s in self.schedules)
        pes = max(s.launch.pes for s in self.schedules)
        programs: dict[Endpoint, RankProgram] = {}
        links: dict[tuple[Endpoint, str], Link] = {}
        for s in self.schedules:
            for prog in s.programs:
                programs[prog.endpoint] = prog
            for link in s.wiring.links:
                if s.launch.is_launched(link.src) and s.launch.is_launched(link.dst):
                    links[(link.src, link.dir.value)] = link
        everyone = tuple(programs.get(Endpoint(c, p), RankProgram(Endpoint(c, p), ()))
                         for c in range(first, last) for p in range(pes))
        names = "+".join(sorted({s.wiring.name for s in self.schedules}))
        wiring = Wiring.build(names, self.system, list(links.values()),
                              f"the links of {len(self.schedules)} launches")
        spec = LaunchSpec(kernel=self.name, kernel_file="", wiring=names, system=self.system,
                          pes=pes, n_cubes=last - first, cube_start=first, args=(),
                          queue_depth=self.queue_depth, sharded=(), harness=Harness.DECODE,
                          groups=GroupMode.LAUNCH)
        return Schedule(spec, wiring, everyone)


def build_deployment(name: str, launches: Sequence[tuple[KernelRef, Launch]],
                     tracer: Tracer) -> Deployment:
    """Trace every launch. They must share the system and the queue depth (the hardware's
    IPCQ depth): launches on one machine run on one install of it."""
    if not launches:
        raise LaunchError(f"deployment {name} has no launch; list at least one [[launch]]")
    first = launches[0][1].spec
    for i, (_, launch) in enumerate(launches[1:], start=2):
        spec = launch.spec
        if spec.system != first.system:
            raise LaunchError(f"deployment {name}: launch {i} runs on system "
                              f"{spec.system.shape_text} ({spec.system.pes} PEs per cube) but "
                              f"launch 1 on {first.system.shape_text} ({first.system.pes}); "
                              "launches at once share one system: give them one --system")
        if spec.queue_depth != first.queue_depth:
            raise LaunchError(f"deployment {name}: launch {i} has queue depth "
                              f"{spec.queue_depth} but launch 1 has {first.queue_depth}; the "
                              "queue depth is the hardware's: give every launch the same")
    schedules = tuple(tracer(kernel, launch) for kernel, launch in launches)
    return Deployment(name, first.system, schedules)
