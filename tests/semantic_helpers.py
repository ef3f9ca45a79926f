"""Shared helpers of the semantic-property tests: run verify on a kernel."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from helpers import kernel_spec, trace_kernel

from meshproof.model.channels import derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.schedule import Schedule
from meshproof.model.topology import Endpoint
from meshproof.model.trace import trace
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.groups import find_groups
from meshproof.sim.harness import attention_shape, group_layout, make_inputs
from meshproof.sim.inputs import InputKind
from meshproof.sim.result import NumericResult as SimNumeric
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property
from meshproof.verify.result import PropertyResult, Verdict

KERNELS = Path(__file__).parent / "kernels"
CASES = f"{KERNELS / 'semantic_cases.py'}"
TREES = f"{KERNELS / 'merge_trees.py'}::merge_tree"
ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT.parent / "shared" / "seeds" / "attention_mesh_mlo.py"


def run(kernel: str, **opts: object) -> Verdict:
    ref = resolve_kernel(kernel)
    args = tuple(sorted(opts.pop("args", {}).items()))  # type: ignore[attr-defined]
    numeric = {k: opts.pop(k) for k in ("input_bound", "score_bound", "tolerance") if k in opts}
    if "tolerance" in numeric:   # numeric_safety's, VerifyConfig's rounding_tolerance
        numeric["rounding_tolerance"] = numeric.pop("tolerance")
    launch = build_launch(ref, LaunchOptions.from_mapping({"args": args, **opts}, "test"))
    return verify(trace(ref, launch), VerifyConfig(queue_depth=launch.spec.queue_depth,
                                                   **numeric))  # type: ignore[arg-type]


def text_of(p: PropertyResult) -> str:
    cex = p.counterexample
    return p.message + "\n" + "\n".join(d.format() for d in (cex.diagnostics if cex else ()))


SEMANTIC = frozenset({Property.ATTENTION_EQUIVALENCE, Property.EXACTLY_ONCE_MERGE,
                      Property.NUMERIC_SAFETY})
AE, EO, NS = "attention_equivalence", "exactly_once_merge", "numeric_safety"
EMPTY_FIRST = (Endpoint(0, 0),)       # --empty-shard 0,0


@dataclass(frozen=True)
class LineKernels:
    """The kernels of one tests/kernels file on a line of PEs (`pe_line`, `pes` of them
    unless a call says otherwise): traced, verified for the three semantic properties only
    (with `input_bound`, when given, as numeric_safety's assumption) and simulated."""

    file: str
    pes: int = 4
    input_bound: float | None = None

    def schedule(self, name: str, **opts: object) -> Schedule:
        return trace_kernel(kernel_spec(f"{self.file}::{name}"),
                            **{"pes": self.pes, "wiring": "pe_line", **opts})

    def verify(self, name: str, bound: float | None = None, *,
               tolerance: float | None = None, **opts: object) -> Verdict:
        """`tolerance`: numeric_safety's (None: the simulator's)."""
        s = self.schedule(name, **opts)
        bound = self.input_bound if bound is None else bound
        config = VerifyConfig(queue_depth=s.launch.queue_depth, only=SEMANTIC,
                              rounding_tolerance=tolerance) if bound is None else \
            VerifyConfig(queue_depth=s.launch.queue_depth, only=SEMANTIC, input_bound=bound,
                         rounding_tolerance=tolerance)
        return verify(s, config)

    def prop(self, name: str, prop: str, bound: float | None = None, *,
             tolerance: float | None = None, **opts: object) -> PropertyResult:
        return self.verify(name, bound, tolerance=tolerance, **opts).property(prop)

    def sim(self, name: str, kind: InputKind = InputKind.NORMAL, seed: int = 0,
            **opts: object) -> SimNumeric:
        result = simulate(self.schedule(name, **opts), SimConfig(inputs=kind, seed=seed,
                                                                 timing=False))
        assert result.numeric is not None
        return result.numeric


def max_abs(schedule: Schedule, kind: InputKind = InputKind.NORMAL,
            seed: int = 0) -> tuple[float, float]:
    """(max|V|, max|Q, K, V|) of the first group's inputs, as the simulator draws them."""
    groups = find_groups(schedule, derive_channels(schedule))
    layout = group_layout(schedule, groups[0], attention_shape(schedule))
    x = make_inputs(layout, (0,), kind, seed)
    return float(np.abs(x.v).max()), max(float(np.abs(t).max()) for t in (x.q, x.k, x.v))
