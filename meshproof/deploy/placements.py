"""Every placement of one launch: verify the kernel, every property, at each cube_start
where its cubes fit in the system (`meshproof placements`).

Tracing: one relocatable trace (placement_trace.py) serves every placement when the
kernel reads its placement only as `program_id(1) - cube_start`; otherwise (or with
`retrace`) each placement is traced on its own.

Judging: a placement is legal when the properties a placement can change hold there —
the protocol ones (`PLACEMENT_PROPERTIES`: which links exist, which far ends are launched,
how sends pair with recvs, whether the launch deadlocks). The semantic properties
(exactly_once_merge, attention_equivalence, numeric_safety) read only the ops, the launch
up to the placement and which send each recv reads, so they are judged once, at the
first protocol-legal placement, and hold at every placement with the same dataflow
(relocation.same_dataflow); they are reported once (`PlacementSearch.independent`). A
protocol-legal placement whose dataflow differs (a kernel traced at every placement that
computes differently there) has its semantic properties judged at its own cube_start,
and they count for its legality. A placement whose schedule is an already proved
placement's schedule moved over the same links carries its proofs (relocation.py); every
other placement is verified, so each violation names its own ranks and lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from meshproof.deploy.deployment import Tracer
from meshproof.deploy.placement_trace import trace_relocatable_like
from meshproof.deploy.relocation import carry_proofs, relocate, same_dataflow
from meshproof.deploy.verify import Verifier
from meshproof.model.launch import Launch, LaunchOptions, build_launch
from meshproof.model.loader import KernelRef
from meshproof.model.schedule import Schedule
from meshproof.model.topology import System
from meshproof.verify.properties import Property, VerifyConfig
from meshproof.verify.result import PropertyResult, Status, Verdict

PLACEMENTS_SCHEMA = "meshproof/placements-v1"

Progress = Callable[[int, int], None]   # (placements done, placements in all)

# what a placement can change: the links, the launched far ends, the pairing, deadlock
PLACEMENT_PROPERTIES = frozenset({Property.DIRECTION_LEGALITY, Property.LAUNCH_CONFINEMENT,
                                  Property.CHANNEL_MATCHING, Property.DEADLOCK_FREEDOM})


@dataclass(frozen=True, slots=True)
class PlacementRow:
    """One cube_start: the cubes it covers, its verdict, and how it was obtained."""

    cube_start: int
    cubes: tuple[int, ...]
    verdict: Verdict
    system: System
    carried_from: int | None = None      # proofs carried from this cube_start
    own_dataflow: bool = False           # semantic properties judged here (dataflow differs)

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def violated(self) -> tuple[str, ...]:
        return tuple(p.value for p in self.verdict.violated())

    @property
    def message(self) -> str:
        """The first violation with its line; else why it is not proved; else proved."""
        for p in self.verdict.properties:
            if p.status is Status.VIOLATED:
                cex = p.counterexample
                first = next((d.format() for d in cex.diagnostics if d.source), None) \
                    if cex else None
                return f"{p.name.value}: {first or p.message}"
        for p in self.verdict.properties:
            if p.status is Status.UNKNOWN:
                return f"{p.name.value} unknown, not proved: {p.message}"
        how = "" if self.carried_from is None else \
            f" (the schedule of cube_start {self.carried_from}, moved over the same links)"
        n = len(self.verdict.properties)
        if self.own_dataflow:
            how += " (its dataflow differs from the first legal placement's: the semantic " \
                "properties are judged here)"
            return f"all {n} properties proved{how}"
        return f"all {n} placement properties proved{how}"

    def cubes_text(self) -> str:
        return describe_cubes(self.system, self.cubes)

    def to_json(self) -> dict[str, Any]:
        # the physical cube ids; where each sits (SIP, row, col) follows from the system
        return {"cube_start": self.cube_start, "cubes": list(self.cubes), "ok": self.ok,
                "violated": list(self.violated), "message": self.message}


@dataclass(frozen=True, slots=True)
class PlacementSearch:
    """Every placement of one launch, in cube_start order."""

    kernel: str
    header: str                  # the launch at its first placement, as commands print it
    rows: tuple[PlacementRow, ...]
    relocated: bool              # one trace served every placement
    traced_how: str              # in words: why every placement was (or was not) traced
    # the properties no placement changes, judged once at `independent_at` (the first
    # protocol-legal placement); they hold at every placement in `shared_by`
    independent: tuple[PropertyResult, ...] = ()
    independent_at: int | None = None
    shared_by: tuple[int, ...] = ()

    @property
    def legal(self) -> tuple[int, ...]:
        return tuple(r.cube_start for r in self.rows if r.ok)

    @property
    def undecided(self) -> tuple[int, ...]:
        return tuple(r.cube_start for r in self.rows
                     if not r.ok and not r.violated)

    @property
    def independent_violated(self) -> tuple[Property, ...]:
        return tuple(p.name for p in self.independent if p.status is Status.VIOLATED)

    def independent_text(self) -> str:
        """The placement-independent verdicts in one line, as the header prints them."""
        if self.independent_at is None:
            return "no placement is protocol-legal: exactly_once_merge, " \
                "attention_equivalence and numeric_safety not judged"
        where = "every legal placement" if set(self.shared_by) >= set(self.legal) else \
            f"cube_start {', '.join(map(str, self.shared_by))}"
        parts = [f"{p.name.value} {p.status.value}" +
                 ("" if p.status is Status.PROVED else f": {p.message}")
                 for p in self.independent]
        return (f"judged once, at cube_start {self.independent_at}, for {where} (the same "
                f"dataflow): " + "; ".join(parts))

    def to_json(self) -> dict[str, Any]:
        return {"schema": PLACEMENTS_SCHEMA, "placements": [r.to_json() for r in self.rows],
                "placement_independent": {
                    "cube_start": self.independent_at, "shared_by": list(self.shared_by),
                    "properties": [{"name": p.name.value, "status": p.status.value,
                                    "message": p.message} for p in self.independent]}}


def describe_cubes(system: System, cubes: tuple[int, ...]) -> str:
    """`SIP 0 rows 0-1 cols 0-3`, or row by row where the cubes are not a rectangle:
    `SIP 0 row 0 cols 1-3, row 1 cols 0-3, row 2 col 0`."""
    by_sip: dict[int, dict[int, list[int]]] = {}
    for cube in cubes:
        c = system.coord(cube)
        by_sip.setdefault(c.sip, {}).setdefault(c.row, []).append(c.col)
    parts = []
    for sip, rows in sorted(by_sip.items()):
        spans = {r: _span("col", cols) for r, cols in sorted(rows.items())}
        keys = sorted(rows)
        if len(set(spans.values())) == 1 and keys == list(range(keys[0], keys[-1] + 1)):
            parts.append(f"SIP {sip} {_span('row', keys)} {spans[keys[0]]}")
        else:
            parts.append(f"SIP {sip} " + ", ".join(f"row {r} {s}" for r, s in spans.items()))
    return "; ".join(parts)


def _span(word: str, values: list[int]) -> str:
    values = sorted(values)
    if len(values) == 1:
        return f"{word} {values[0]}"
    if values == list(range(values[0], values[-1] + 1)):
        return f"{word}s {values[0]}-{values[-1]}"
    return f"{word}s {','.join(map(str, values))}"


def placement_starts(kernel: KernelRef, opts: LaunchOptions) -> tuple[Launch, ...]:
    """The launch at every cube_start where its cubes fit in the system."""
    first = build_launch(kernel, replace(opts, cube_start=0))
    last = first.spec.system.n_cubes - first.spec.n_cubes
    return (first, *(build_launch(kernel, replace(opts, cube_start=k))
                     for k in range(1, last + 1)))


@dataclass(frozen=True, slots=True)
class PlacementTraces:
    """The schedule at every placement, and how they were obtained."""

    schedules: tuple[Schedule, ...]
    relocated: bool          # one relocatable trace, moved to every placement
    how: str                 # in words


def trace_placements(kernel: KernelRef, launches: tuple[Launch, ...], tracer: Tracer, *,
                     track_cube_start: bool, retrace: bool = False) -> PlacementTraces:
    """One trace moved to every placement when that is sound, else one trace each."""
    if retrace:
        return PlacementTraces(tuple(tracer(kernel, la) for la in launches), False,
                               "every placement traced (--retrace)")
    base, why = trace_relocatable_like(tracer, kernel, launches[0],
                                       track_cube_start=track_cube_start)
    normal = tracer(kernel, launches[0])
    if base is not None and base.programs != normal.programs:
        base, why = None, ("traces differently when its program ids are not ints (type() "
                           "or `is`)")
    if base is None:
        return PlacementTraces((normal, *(tracer(kernel, la) for la in launches[1:])), False,
                               f"every placement traced: the kernel {why}")
    return PlacementTraces((normal, *(relocate(base, la) for la in launches[1:])), True,
                           "one trace for every placement: the kernel reads its placement "
                           "only as program_id(1) - cube_start")


def search_placements(kernel: KernelRef, opts: LaunchOptions, tracer: Tracer,
                      verifier: Verifier, config: VerifyConfig = VerifyConfig(), *,
                      retrace: bool = False, progress: Progress | None = None
                      ) -> PlacementSearch:
    """Judge `kernel`'s launch at every cube_start it fits: the placement properties at
    each, the others once (module docstring)."""
    launches = placement_starts(kernel, opts)
    track = "cube_start" not in dict(opts.args)
    traces = trace_placements(kernel, launches, tracer, track_cube_start=track,
                              retrace=retrace)
    selected = config.selected()
    protocol = replace(config, only=frozenset(p for p in selected
                                              if p in PLACEMENT_PROPERTIES), skip=frozenset())
    semantic = frozenset(p for p in selected if p not in PLACEMENT_PROPERTIES)
    rows = _protocol_rows(traces.schedules, verifier, protocol, retrace, progress)
    ref = next((i for i, r in enumerate(rows) if r.ok), None)
    if ref is None or not semantic:
        return PlacementSearch(kernel.name, launches[0].spec.header(
            launches[0].spec.queue_depth), tuple(rows), traces.relocated, traces.how)
    sem_config = replace(config, only=semantic, skip=frozenset())
    base = traces.schedules[ref]
    independent = verifier(base, sem_config).properties
    shared = []
    for i, (row, schedule) in enumerate(zip(rows, traces.schedules, strict=True)):
        if i == ref or same_dataflow(base, schedule):
            shared.append(row.cube_start)
        elif row.ok:   # computes differently here: its semantic properties are its own
            own = verifier(schedule, sem_config).properties
            merged = sorted((*row.verdict.properties, *own), key=lambda p: _ORDER[p.name])
            verdict = replace(row.verdict, properties=tuple(merged),
                              skipped=tuple(p for p in row.verdict.skipped
                                            if p not in semantic))
            rows[i] = replace(row, verdict=verdict, own_dataflow=True)
    return PlacementSearch(kernel.name, launches[0].spec.header(launches[0].spec.queue_depth),
                           tuple(rows), traces.relocated, traces.how, tuple(independent),
                           rows[ref].cube_start, tuple(shared))


_ORDER = {p: i for i, p in enumerate(Property)}


def _protocol_rows(schedules: tuple[Schedule, ...], verifier: Verifier,
                   config: VerifyConfig, retrace: bool, progress: Progress | None
                   ) -> list[PlacementRow]:
    """Every placement's placement properties, carrying proofs between moved schedules."""
    proved: list[tuple[Schedule, Verdict]] = []
    rows = []
    for i, schedule in enumerate(schedules):
        verdict, origin = None, None
        for base, base_verdict in ([] if retrace else proved):
            verdict = carry_proofs(base_verdict, base, schedule)
            if verdict is not None:
                origin = base.launch.cube_start
                break
        if verdict is None:
            verdict = verifier(schedule, config)
            if verdict.ok:
                proved.append((schedule, verdict))
        spec = schedule.launch
        rows.append(PlacementRow(spec.cube_start, tuple(spec.cubes), verdict, spec.system,
                                 origin))
        if progress is not None:
            progress(i + 1, len(schedules))
    return rows
