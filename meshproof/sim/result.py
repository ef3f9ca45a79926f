"""Simulation results: frozen records and their JSON (`meshproof/simulation-v1`).

The JSON holds no wall-clock values, so the same command prints byte-identical output;
the phase timings the benchmark reads live in `SimResult.phases`, outside the JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from meshproof.exitcodes import ExitCode
from meshproof.model.schedule import LaunchSpec
from meshproof.model.topology import Endpoint
from meshproof.sim.timing import TimingRun

SIM_SCHEMA = "meshproof/simulation-v1"


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


@dataclass(frozen=True, slots=True)
class RankNumeric:
    """One checked rank: its o_ptr against the reference rows it should hold."""

    endpoint: Endpoint
    group: int
    rel_err: float | None        # None: the output holds nan/inf or was never written
    max_abs_err: float | None
    elements: int
    ok: bool
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"cube": self.endpoint.cube, "pe": self.endpoint.pe, "group": self.group,
                "rel_err": _finite(self.rel_err), "max_abs_err": _finite(self.max_abs_err),
                "elements": self.elements, "ok": self.ok, "note": self.note}


# the replay of a witness agrees with the verdict when the simulated value is within this
# much of the verdict's machine value, relative to max|V| (a few float32 ulps of the
# output's scale: every output of attention lies within max|V|)
WITNESS_AGREEMENT = 2.0 ** -20


@dataclass(frozen=True, slots=True)
class WitnessReplay:
    """The witness element of `meshproof simulate --witness FILE`: the simulated value at
    (query row, head, feature) of `group` on `endpoint`, the float64 reference there and
    the verdict's numbers it should reproduce."""

    path: str
    endpoint: Endpoint
    group: int
    element: tuple[int, int, int]
    simulated: float
    attention: float                 # dense float64 attention
    max_v: float                     # max |V| of the group's inputs
    verdict_machine: float
    verdict_exact: float             # attention in 40 digits, as the verdict states it
    verdict_error: float

    @property
    def error(self) -> float:
        """|simulated - attention| / max|V|."""
        return abs(self.simulated - self.attention) / self.max_v if self.max_v else \
            abs(self.simulated - self.attention)

    @property
    def agrees(self) -> bool:
        """Whether the simulator computes the verdict's machine value (float32 precision)."""
        scale = self.max_v if self.max_v else 1.0
        return math.isfinite(self.simulated) and \
            abs(self.simulated - self.verdict_machine) <= WITNESS_AGREEMENT * scale

    def to_json(self) -> dict[str, Any]:
        return {"file": self.path, "cube": self.endpoint.cube, "pe": self.endpoint.pe,
                "group": self.group, "element": list(self.element),
                "simulated": _finite(self.simulated), "attention": self.attention,
                "max_v": self.max_v, "error": _finite(self.error),
                "verdict_machine": self.verdict_machine, "verdict_error": self.verdict_error,
                "agrees": self.agrees}


@dataclass(frozen=True, slots=True)
class NumericResult:
    harness: str
    inputs: str
    seed: int
    softmax_scale: float
    dtypes: tuple[str, ...]          # dtypes the schedule uses
    tolerance: float
    tolerance_rule: str
    groups: int
    classes: int                     # distinct group programs (evaluated batched)
    per_rank: tuple[RankNumeric, ...]
    scale_source: str = ""           # where the reference's softmax scale comes from
    max_abs_v: float = 0.0           # max |V| of the inputs fed (for the rounding bound)
    witness: WitnessReplay | None = None     # --witness: its element, replayed

    @property
    def rel_err(self) -> float | None:
        """The worst rank's error; None if some rank's output is not finite."""
        errs = [r.rel_err for r in self.per_rank]
        if not errs or any(e is None or not math.isfinite(e) for e in errs):
            return None
        return max(e for e in errs if e is not None)

    @property
    def max_abs_err(self) -> float | None:
        errs = [r.max_abs_err for r in self.per_rank]
        if not errs or any(e is None or not math.isfinite(e) for e in errs):
            return None
        return max(e for e in errs if e is not None)

    @property
    def ok(self) -> bool:
        return bool(self.per_rank) and all(r.ok for r in self.per_rank)

    @property
    def message(self) -> str:
        if not self.per_rank:
            return "no rank stores o_ptr or holds a KV shard: nothing to compare"
        bad = [r for r in self.per_rank if not r.ok]
        if not bad:
            return f"within tolerance on all {len(self.per_rank)} checked rank(s)"
        # the worst by the error's first two digits, the first in launch order among
        # equals: ranks whose errors differ only where BLAS and CPUs differ must not
        # trade places from one machine to the next
        worst = min(bad, key=lambda r: -_stable(r.rel_err))
        what = worst.note or (f"rel_err {worst.rel_err:.2g} > tolerance {self.tolerance:g}"
                              if worst.rel_err is not None else "non-finite output")
        return (f"OUT OF TOLERANCE on {len(bad)} of {len(self.per_rank)} checked rank(s); "
                f"worst rank {worst.endpoint.describe()}: {what}")

    def to_json(self) -> dict[str, Any]:
        return {"rel_err": _finite(self.rel_err), "max_abs_err": _finite(self.max_abs_err),
                "tolerance": self.tolerance, "tolerance_rule": self.tolerance_rule,
                "ok": self.ok, "message": self.message, "harness": self.harness,
                "inputs": self.inputs, "seed": self.seed, "softmax_scale": self.softmax_scale,
                "softmax_scale_source": self.scale_source,
                "dtypes": list(self.dtypes), "groups": self.groups, "classes": self.classes,
                "max_abs_v": self.max_abs_v,
                "per_rank": [r.to_json() for r in self.per_rank],
                **({"witness": self.witness.to_json()} if self.witness is not None else {})}


@dataclass(frozen=True, slots=True)
class RankTiming:
    endpoint: Endpoint
    ops: int
    busy_s: float
    wait_s: float
    finish_s: float

    def to_json(self) -> dict[str, Any]:
        return {"cube": self.endpoint.cube, "pe": self.endpoint.pe, "ops": self.ops,
                "busy_s": self.busy_s, "wait_s": self.wait_s, "finish_s": self.finish_s}


@dataclass(frozen=True, slots=True)
class CriticalStep:
    endpoint: Endpoint
    op: int
    kind: str
    source: str
    start_s: float
    end_s: float
    via: str          # what made this op start: program order, message, queue, rendezvous

    def to_json(self) -> dict[str, Any]:
        return {"cube": self.endpoint.cube, "pe": self.endpoint.pe, "op": self.op,
                "kind": self.kind, "source": self.source, "start_s": self.start_s,
                "end_s": self.end_s, "via": self.via}


@dataclass(frozen=True, slots=True)
class LinkTraffic:
    name: str
    link_class: str | None
    messages: int
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"class": self.link_class, "messages": self.messages, "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class TimingResult:
    profile: str
    queue_depth: int
    latency_s: float
    comm_steps: int
    critical_path: tuple[CriticalStep, ...]
    per_rank: tuple[RankTiming, ...]
    links: tuple[LinkTraffic, ...]
    hardware: dict[str, object] = field(hash=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "queue_depth": self.queue_depth,
                "latency_s": self.latency_s, "comm_steps": self.comm_steps,
                "critical_path": [s.to_json() for s in self.critical_path],
                "per_rank": [r.to_json() for r in self.per_rank],
                "bytes_per_link": {link.name: link.to_json() for link in self.links},
                "hardware": self.hardware}


@dataclass(frozen=True, slots=True)
class OpLog:
    gemm: int
    ipcq_send: int
    ipcq_recv: int
    dma_read: int
    dma_write: int

    def to_json(self) -> dict[str, int]:
        return {"gemm": self.gemm, "ipcq_send": self.ipcq_send, "ipcq_recv": self.ipcq_recv,
                "dma_read": self.dma_read, "dma_write": self.dma_write}


@dataclass(frozen=True, slots=True)
class SimResult:
    kernel: str
    launch: LaunchSpec
    numeric: NumericResult | None
    timing: TimingResult | None
    op_log: OpLog
    # Per-op events for the Perfetto trace; not part of the JSON.
    run: TimingRun | None = field(default=None, repr=False, compare=False)
    # Wall-clock seconds per phase (inputs, reference, evaluate, timing); not in the JSON.
    phases: tuple[tuple[str, float], ...] = field(default=(), compare=False)

    @property
    def ok(self) -> bool:
        return self.numeric.ok if self.numeric is not None else True

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok else ExitCode.VIOLATED

    def to_json(self) -> dict[str, Any]:
        return {"schema": SIM_SCHEMA, "ok": self.ok, "kernel": self.kernel,
                "launch": self.launch.to_json(),
                "numeric": self.numeric.to_json() if self.numeric else None,
                "timing": self.timing.to_json() if self.timing else None,
                "op_log": self.op_log.to_json()}


def _stable(error: float | None) -> float:
    """An error rounded to the digits that do not depend on the machine (non-finite: inf)."""
    if error is None or not math.isfinite(error):
        return math.inf
    return float(f"{error:.2g}")
