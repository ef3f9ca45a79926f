"""What a case run produced, in the form the gate judges, caches and reports.

`PropertyOutcome.of` is the one conversion of a verdict's results into this form: the
gate's JSON, its cache and JUnit, the report's sweep and the pytest helpers all read it.
The full `Verdict`, `SimResult` and `Schedule` ride along (not serialised) for callers
that draw or print them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from meshproof.errors import InternalError
from meshproof.gate.findings import Finding, Located, locate
from meshproof.model.schedule import Schedule
from meshproof.verify.properties import Property
from meshproof.verify.result import NumericResult, PropertyResult, Status, Verdict

if TYPE_CHECKING:
    from meshproof.deploy.deployment import Deployment
    from meshproof.deploy.simulate import DeploymentSimulation
    from meshproof.deploy.verify import DeploymentVerdict
    from meshproof.sim.result import SimResult

SEPARATION = "launch_separation"   # the deployment's cross-launch property (deploy/)


@dataclass(frozen=True, slots=True)
class PropertyOutcome:
    """What the gate keeps of a PropertyResult: enough for tables, JUnit and the cache."""

    name: Property
    status: Status
    message: str
    summary: str = ""                   # the counterexample's summary ("" if none)
    diagnostics: tuple[str, ...] = ()   # formatted `file:line: rank (...): error: ...`
    seconds: float = 0.0
    located: Located = field(default_factory=Located)  # the diagnostics placed for CI
    recheck: str = ""                   # --recheck's line, without timings ("" if none)
    # numeric_safety's rounding bound by mechanism, largest share first, one line each
    # (`what: share% at file:line, ...`), for the report beside any verdict, proved too
    culprits: tuple[str, ...] = ()

    @staticmethod
    def of(result: PropertyResult, schedule: Schedule | None = None) -> PropertyOutcome:
        cex = result.counterexample
        return PropertyOutcome(result.name, result.status, result.message,
                               cex.summary if cex else "",
                               tuple(d.format() for d in cex.diagnostics) if cex else (),
                               result.seconds, locate(result, schedule),
                               culprits=_culprit_lines(result))

    def rechecked(self, verdict: Verdict | None) -> PropertyOutcome:
        """This outcome with the verdict's re-check line for it, if any."""
        found = next((r for r in (verdict.rechecks if verdict else ())
                      if r.name is self.name), None)
        return replace(self, recheck=found.describe(timings=False)) if found else self

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.located.findings

    @property
    def first_place(self) -> tuple[str, int] | None:
        """The file and line of the counterexample's first located diagnostic."""
        return next(((f.place.file, f.place.line) for f in self.findings if f.place), None)

    @property
    def has_counterexample(self) -> bool:
        return bool(self.summary or self.diagnostics)

    def text(self) -> str:
        """The counterexample as a developer reads it: summary, then file:line lines."""
        lines = [self.summary or self.message] if (self.summary or self.message) else []
        return "\n".join([*lines, *self.diagnostics])

    def to_json(self, timings: bool = False, located: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name.value, "status": self.status.value,
                               "message": self.message, "summary": self.summary,
                               "diagnostics": list(self.diagnostics)}
        if timings:
            out["seconds"] = self.seconds
        if located:
            out["located"] = self.located.to_json()
        if self.recheck:
            out["recheck"] = self.recheck
        if located and self.culprits:   # the cache's form only: the gate's JSON is unchanged
            out["culprits"] = list(self.culprits)
        return out

    @staticmethod
    def from_json(data: dict[str, Any]) -> PropertyOutcome:
        return PropertyOutcome(Property(data["name"]), Status(data["status"]),
                               str(data["message"]), str(data["summary"]),
                               tuple(str(d) for d in data["diagnostics"]),
                               float(data.get("seconds", 0.0)),
                               Located.from_json(data.get("located")),
                               str(data.get("recheck", "")),
                               tuple(str(c) for c in data.get("culprits", ())))


def _culprit_lines(result: PropertyResult) -> tuple[str, ...]:
    if not isinstance(result, NumericResult):
        return ()
    return tuple(f"{c.mechanism.value}: {100 * c.share:.0f}%"
                 + (f" at {c.where()}" if c.sites else "")
                 for c in result.culprits)


@dataclass(frozen=True, slots=True)
class NumericOutcome:
    """What the gate keeps of the simulator's numerics (the message says why when undecided)."""

    ok: bool
    rel_err: float | None
    max_abs_err: float | None
    tolerance: float | None
    message: str = ""
    explained_by: str = ""       # the static property that explains an out-of-tolerance run

    @staticmethod
    def of(simulation: SimResult | None, refused: str) -> NumericOutcome | None:
        """The numerics of a run; a refused run (it deadlocks) is out of tolerance."""
        if refused:
            return NumericOutcome(False, None, None, None, f"simulation refused: {refused}")
        numeric = simulation.numeric if simulation is not None else None
        if numeric is None:
            return None
        return NumericOutcome(numeric.ok, numeric.rel_err, numeric.max_abs_err,
                              numeric.tolerance,
                              "" if numeric.rel_err is not None else numeric.message)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "rel_err": self.rel_err, "max_abs_err": self.max_abs_err,
                "tolerance": self.tolerance, "message": self.message,
                "explained_by": self.explained_by}

    @staticmethod
    def from_json(data: dict[str, Any]) -> NumericOutcome:
        return NumericOutcome(bool(data["ok"]), data["rel_err"], data["max_abs_err"],
                              data["tolerance"], str(data["message"]),
                              str(data.get("explained_by", "")))

    def text(self) -> str:
        why = f"; explained by {self.explained_by}" if self.explained_by else ""
        if self.message:
            return self.message + why
        return (f"numerics {'in' if self.ok else 'out of'} tolerance: rel_err "
                f"{_g(self.rel_err)} (tolerance {_g(self.tolerance)}), max_abs_err "
                f"{_g(self.max_abs_err)}{why}")


# An out-of-tolerance run is explained by the first of these that is violated.
EXPLAINERS = (Property.ATTENTION_EQUIVALENCE, Property.EXACTLY_ONCE_MERGE,
              Property.NUMERIC_SAFETY, Property.DEADLOCK_FREEDOM, Property.CHANNEL_MATCHING,
              Property.LAUNCH_CONFINEMENT, Property.DIRECTION_LEGALITY)


def explain(numeric: NumericOutcome | None, verdict: Verdict | None,
            simulation: SimResult | None) -> NumericOutcome | None:
    """Name the static property behind an out-of-tolerance run, and cross-check a run
    whose math is proved: its error must stay under the proved rounding bound."""
    if numeric is None or verdict is None:
        return numeric
    by = {p.name: p for p in verdict.properties}
    if not numeric.ok:
        for name in EXPLAINERS:
            p = by.get(name)
            if p is not None and p.status is Status.VIOLATED:
                return replace(numeric, explained_by=f"{name.value}: {p.message}")
    _cross_check(numeric, by, simulation)
    return numeric


def _cross_check(numeric: NumericOutcome, by: dict[Property, PropertyResult],
                 simulation: SimResult | None) -> None:
    ae, ns = by.get(Property.ATTENTION_EQUIVALENCE), by.get(Property.NUMERIC_SAFETY)
    # a stated bound is proved (under the assumption) whether or not it is within the
    # tolerance: above it numeric_safety is unknown, and the bound still holds
    if not (ae and ns and ae.status is Status.PROVED and ns.status is not Status.VIOLATED and
            isinstance(ns, NumericResult) and ns.error_bound is not None and
            numeric.max_abs_err is not None and simulation is not None and
            simulation.numeric is not None and simulation.numeric.inputs in ("normal",
                                                                             "uniform")):
        return
    # the bound is eta·max|V| + tau with the run's own max|V| (<= the input bound)
    v_max = simulation.numeric.max_abs_v or ns.input_bound
    limit = ns.error_bound * v_max + (ns.error_floor or 0.0)
    if numeric.max_abs_err > limit:
        raise InternalError(
            f"the simulator's error {numeric.max_abs_err:.3g} exceeds the rounding bound "
            f"{limit:.3g} (= {ns.error_bound:.3g}·max|V| + {ns.error_floor or 0.0:.2g}, "
            f"max|V| = {v_max:.3g}) that numeric_safety stated for this kernel, whose outputs "
            "attention_equivalence proved equal to attention: the simulator and the proofs "
            "disagree")


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


@dataclass(frozen=True, slots=True)
class SeparationOutcome:
    """What the gate keeps of a deployment's launch_separation (deploy/separation.py)."""

    status: Status
    message: str
    diagnostics: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": SEPARATION, "status": self.status.value, "message": self.message,
                "diagnostics": list(self.diagnostics)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> SeparationOutcome:
        return SeparationOutcome(Status(data["status"]), str(data["message"]),
                                 tuple(str(d) for d in data["diagnostics"]))

    def text(self) -> str:
        return "\n".join([self.message, *self.diagnostics])


def summed_properties(verdicts: tuple[Verdict, ...],
                      schedules: tuple[Schedule, ...]) -> tuple[PropertyOutcome, ...]:
    """Each property over every launch: its worst status (`Status.worst`), with the
    message and counterexample of the first launch that has it."""
    out: list[PropertyOutcome] = []
    # in the order the verifier reports them (the first launch's order)
    for prop in dict.fromkeys(p.name for v in verdicts for p in v.properties):
        per = [(i, v.property(prop)) for i, v in enumerate(verdicts)
               if prop in {p.name for p in v.properties}]
        if not per:
            continue
        status = Status.worst(p.status for _, p in per)
        i, first = next((i, p) for i, p in per if p.status is status)
        one = PropertyOutcome.of(first, schedules[i]).rechecked(verdicts[i])
        message = first.message if len(per) == 1 else \
            f"every launch: {first.message}" if status is Status.PROVED else \
            f"launch {i + 1}: {first.message}"
        out.append(replace(one, message=message, seconds=sum(p.seconds for _, p in per)))
    return tuple(out)


def _numeric_of_launches(verdicts: tuple[Verdict, ...],
                         simulation: DeploymentSimulation | None,
                         refused: str) -> NumericOutcome | None:
    """The launches' numerics as one: ok when every launch's is, the worst errors. One
    launch's is its own, with the static property that explains it when out of
    tolerance."""
    if refused:
        refusal = NumericOutcome(False, None, None, None, f"simulation refused: {refused}")
        return explain(refusal, verdicts[0], None) if len(verdicts) == 1 else refusal
    runs = simulation.launches if simulation is not None else ()
    if len(runs) == 1:
        return explain(NumericOutcome.of(runs[0], ""), verdicts[0] if verdicts else None,
                       runs[0])
    numerics = [n for n in (NumericOutcome.of(r, "") for r in runs) if n is not None]
    if not numerics:
        return None
    errors = [n.rel_err for n in numerics if n.rel_err is not None]
    abs_errors = [n.max_abs_err for n in numerics if n.max_abs_err is not None]
    tolerances = [n.tolerance for n in numerics if n.tolerance is not None]
    messages = [f"launch {i + 1}: {n.message}" for i, n in enumerate(numerics) if n.message]
    return NumericOutcome(all(n.ok for n in numerics), max(errors) if errors else None,
                          max(abs_errors) if abs_errors else None,
                          min(tolerances) if tolerances else None, "; ".join(messages))


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    """What verify (and simulate) said about one traced launch.

    The first five fields are the cacheable part (`to_json`/`from_json`); the rest are
    the full results for drawing and printing, None when they were not computed here
    (a cache hit, a result that came back from a worker process).
    """

    properties: tuple[PropertyOutcome, ...]
    numeric: NumericOutcome | None             # None: numerics not simulated
    min_queue_depth: int | None
    rendezvous: Status | None = None
    skipped: tuple[Property, ...] = ()
    cached: bool = field(default=False, compare=False)
    refused: str = ""                          # why the simulator refused to run
    launches: int = 1                          # the deployment's launches
    separation: SeparationOutcome | None = None   # several launches: launch_separation
    schedule: Schedule | None = field(default=None, compare=False, repr=False)  # the first
    # every launch's verdict and the cross-launch check; every launch's simulation
    verdict: DeploymentVerdict | None = field(default=None, compare=False, repr=False)
    simulation: DeploymentSimulation | None = field(default=None, compare=False, repr=False)

    @staticmethod
    def of(deployment: Deployment, verdict: DeploymentVerdict | None,
           simulation: DeploymentSimulation | None, refused: str, *,
           numerics: bool) -> CaseOutcome:
        """N >= 1 launches: each property's worst status over them, launch_separation
        (kept for several launches: one launch is separated from nothing), the launches'
        numerics as one."""
        schedules = deployment.schedules
        verdicts = verdict.verdicts if verdict else ()
        props = summed_properties(verdicts, schedules)
        depths = [v.min_queue_depth for v in verdicts]
        known = [d for d in depths if d is not None]
        sep = verdict.separation if verdict and len(schedules) > 1 else None
        separation = SeparationOutcome(sep.status, sep.message, sep.diagnostics) \
            if sep else None
        meetings = [v.rendezvous for v in verdicts if v.rendezvous is not None]
        return CaseOutcome(props, _numeric_of_launches(verdicts, simulation, refused)
                           if numerics else None,
                           max(known) if known and len(known) == len(depths) else None,
                           Status.worst(meetings) if meetings else None,
                           verdicts[0].skipped if verdicts else (), refused=refused,
                           launches=len(schedules), separation=separation,
                           schedule=schedules[0], verdict=verdict, simulation=simulation)

    @property
    def statuses(self) -> tuple[Status, ...]:
        """Every property's status, and launch_separation's."""
        return (*(p.status for p in self.properties),
                *((self.separation.status,) if self.separation else ()))

    @property
    def ok(self) -> bool:
        """Every property checked is proved (and the launches are separated)."""
        return Status.worst(self.statuses) is Status.PROVED

    @property
    def decided(self) -> bool:
        return Status.UNKNOWN not in self.statuses

    def property(self, name: Property) -> PropertyOutcome | None:
        return next((p for p in self.properties if p.name is name), None)

    def to_json(self) -> dict[str, Any]:
        return {"properties": [p.to_json(timings=True, located=True) for p in self.properties],
                "numeric": self.numeric.to_json() if self.numeric else None,
                "min_queue_depth": self.min_queue_depth,
                "rendezvous": self.rendezvous.value if self.rendezvous else None,
                "skipped": [p.value for p in self.skipped], "launches": self.launches,
                "separation": self.separation.to_json() if self.separation else None}

    @staticmethod
    def from_json(data: dict[str, Any]) -> CaseOutcome:
        numeric = data.get("numeric")
        rendezvous = data.get("rendezvous")
        return CaseOutcome(tuple(PropertyOutcome.from_json(p) for p in data["properties"]),
                           NumericOutcome.from_json(numeric) if numeric else None,
                           data.get("min_queue_depth"),
                           Status(rendezvous) if rendezvous else None,
                           tuple(Property(p) for p in data.get("skipped", ())),
                           launches=int(data.get("launches", 1)),
                           separation=SeparationOutcome.from_json(data["separation"])
                           if data.get("separation") else None)
