"""The property interface: names, what every check is given, and how a verify call is set up.

Every property is a function `check(ctx: CheckContext) -> PropertyResult` registered in
`verify/registry.py` under its `Property`. Adding a property is appending an enum member
to `Property` (verify/property_names.py, apart so results name properties without this
module) and one registry entry there.

`CheckContext.shared(analysis)` runs an expensive analysis once per verify call and
hands every property that asks the same result (e.g. the Kahn-network run at the judged
queue depth): the cache is keyed by the analysis function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import TYPE_CHECKING, TypeVar, cast

from meshproof.errors import OptionError
from meshproof.model.channel_table import ChannelTable
from meshproof.model.problem import DEFAULT_INPUT_BOUND
from meshproof.model.schedule import Schedule
from meshproof.verify.property_names import Property as Property  # re-exported
from meshproof.verify.z3util import Budget

if TYPE_CHECKING:
    from meshproof.verify.result import PropertyResult


PROPERTY_NAMES = tuple(p.value for p in Property)

# decided by Z3 (or by an enumeration exported as SMT-LIB): what `--recheck` re-solves
PROTOCOL_PROPERTIES = (Property.DIRECTION_LEGALITY, Property.LAUNCH_CONFINEMENT,
                       Property.CHANNEL_MATCHING, Property.DEADLOCK_FREEDOM)


class RecheckSolver(Enum):
    """The second solvers `--recheck` can hand the protocol properties' queries to."""

    CVC5 = "cvc5"


def parse_recheck(name: str, where: str = "--recheck") -> RecheckSolver:
    """A re-check solver by name; unknown names raise OptionError listing the names."""
    try:
        return RecheckSolver(name.strip())
    except ValueError:
        raise OptionError(f"{where}: unknown solver {name.strip()!r}; solvers: "
                          f"{', '.join(s.value for s in RecheckSolver)}") from None


def parse_property(name: str) -> Property:
    """A property by its name; unknown names raise OptionError listing the names."""
    try:
        return Property(name.strip())
    except ValueError:
        raise OptionError(f"unknown property {name.strip()!r}; properties: "
                          f"{', '.join(PROPERTY_NAMES)}") from None


def parse_properties(items: Iterable[str]) -> frozenset[Property]:
    """Names given repeatedly and/or comma-separated (`--only a,b --only c`)."""
    return frozenset(parse_property(part) for item in items for part in item.split(",")
                     if part.strip())


def check_numeric_assumptions(score_bound: float | None, tolerance: float | None,
                              where: str = "--") -> None:
    """OptionError unless the score bound and the tolerance (when given) are positive and
    finite; `where` names them as the user wrote them (`--` for flags, `` for gate keys)."""
    for name, value in (("score-bound", score_bound), ("rounding-tolerance", tolerance)):
        if value is not None and not (math.isfinite(value) and value > 0):
            key = f"--{name}" if where == "--" else f"{where}{name.replace('-', '_')}"
            raise OptionError(f"{key} must be a positive, finite number, got {value:g}")


@dataclass(frozen=True, slots=True)
class VerifyProgress:
    """Where a verify call is: the property being checked (`index` of `count`, from 0)
    and, while the semantic analysis runs, the ops it has evaluated of all."""

    prop: Property
    index: int
    count: int
    ops_done: int = 0
    ops_total: int = 0


ProgressSink = Callable[[VerifyProgress], None]


VERDICT_KEY = "in_verdict"
IN_VERDICT = {VERDICT_KEY: True}
NOT_IN_VERDICT = {VERDICT_KEY: False}


@dataclass(frozen=True, slots=True)
class VerifyConfig:
    """How `verify` runs: queue depth, solver budgets, which properties.

    Every field says, in its metadata, whether a decided verdict depends on it
    (`IN_VERDICT`) or not (`NOT_IN_VERDICT`: a budget only ever makes a verdict unknown,
    which is never cached; a display hook). The gate's cache key is the fields in the
    verdict (`verdict_fields`), so a new field is in the key unless it says otherwise."""

    queue_depth: int | None = field(default=None, metadata=IN_VERDICT)  # None: the launch's
    # per solver call (wall clock, a safety net)
    timeout_s: float = field(default=60.0, metadata=NOT_IN_VERDICT)
    # deterministic Z3 resource limit per call
    rlimit: int = field(default=200_000_000, metadata=NOT_IN_VERDICT)
    # full stuck-state search only up to this many comm ops
    stuck_state_max_ops: int = field(default=600, metadata=NOT_IN_VERDICT)
    # keep the certificate query text in the verdict
    keep_smt2: bool = field(default=False, metadata=NOT_IN_VERDICT)
    # numeric_safety's assumption: |every input| <= this
    input_bound: float = field(default=DEFAULT_INPUT_BOUND, metadata=IN_VERDICT)
    # and, when set, |scale·q·kᵀ| <= this (every score)
    score_bound: float | None = field(default=None, metadata=IN_VERDICT)
    # numeric_safety's T (None: model/tolerance.py's)
    rounding_tolerance: float | None = field(default=None, metadata=IN_VERDICT)
    only: frozenset[Property] = field(default=frozenset(), metadata=IN_VERDICT)  # empty: all
    skip: frozenset[Property] = field(default=frozenset(), metadata=IN_VERDICT)
    # re-solve the protocol queries with this solver (a re-checked verdict is another one)
    recheck: RecheckSolver | None = field(default=None, metadata=IN_VERDICT)
    # told where the call is (the CLI's progress bar); never part of what is verified
    progress: ProgressSink | None = field(default=None, compare=False, repr=False,
                                          metadata=NOT_IN_VERDICT)

    def verdict_fields(self) -> dict[str, object]:
        """The fields a decided verdict depends on, JSON-ready (sets sorted): the gate's
        cache key."""
        out: dict[str, object] = {}
        for f in fields(self):
            if f.metadata.get(VERDICT_KEY) is not False:
                value = getattr(self, f.name)
                if isinstance(value, frozenset):
                    value = sorted(p.value for p in value)
                elif isinstance(value, Enum):
                    value = value.value
                out[f.name] = value
        return out

    def selected(self) -> tuple[Property, ...]:
        """The properties this call checks, in verdict order."""
        return tuple(p for p in Property
                     if (not self.only or p in self.only) and p not in self.skip)


T = TypeVar("T")


@dataclass(slots=True)
class _Position:
    """The property a verify call is checking (the progress sink's frame of reference)."""

    at: VerifyProgress | None = None


@dataclass(frozen=True, slots=True)
class CheckContext:
    """What every property's check reads: the IR, its channels, the settings, the solver
    budget, and a memo of analyses shared between properties."""

    schedule: Schedule
    channels: ChannelTable
    config: VerifyConfig
    budget: Budget
    memo: dict[Callable[[CheckContext], object], object] = field(
        default_factory=dict, compare=False, repr=False)
    position: _Position = field(default_factory=_Position, compare=False, repr=False)

    @property
    def depth(self) -> int:
        """The queue depth D the properties are judged at."""
        depth = self.config.queue_depth
        return self.schedule.launch.queue_depth if depth is None else depth

    def report(self, ops_done: int = 0, ops_total: int = 0) -> None:
        """Tell the config's progress sink how far the current property is."""
        sink, at = self.config.progress, self.position.at
        if sink is not None and at is not None:
            sink(VerifyProgress(at.prop, at.index, at.count, ops_done, ops_total))

    def start(self, prop: Property, index: int, count: int) -> None:
        """A property's check begins."""
        self.position.at = at = VerifyProgress(prop, index, count)
        if self.config.progress is not None:
            self.config.progress(at)

    def shared(self, analysis: Callable[[CheckContext], T]) -> T:
        """`analysis(self)`, computed once per verify call whoever asks first."""
        if analysis not in self.memo:
            self.memo[analysis] = analysis(self)
        return cast(T, self.memo[analysis])


Check = Callable[[CheckContext], "PropertyResult"]
