"""verify/semantics/relations.py: value numbers, the relations the rounding rules read.

How the numbering is done (its order, its cost) must never move a bound: the stated
bounds of the built-ins and of the rounding zoo (tests/kernels/rounding_cases.py) are
pinned bit for bit (floats in hex) in tests/golden/numeric_bounds.txt, with each verdict
and its message. A change to the numbering that moved one would show here; a change that
means to move one regenerates the file (`--regen-golden`) and says why.
"""

from __future__ import annotations

import inspect

from helpers import Golden
from semantic_helpers import KERNELS, LineKernels

from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.schedule import Schedule
from meshproof.model.trace import trace
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property
from meshproof.verify.result import NumericResult

BUILTINS = ("mesh_mlo_1d", "mesh_mlo_2d", "ring_mlo", "mesh_kv")
ROUND = LineKernels("rounding_cases.py", pes=2, input_bound=16.0)


def _zoo() -> list[str]:
    """The kernels of rounding_cases.py: public functions taking `tl` by keyword."""
    import importlib.util
    path = KERNELS / "rounding_cases.py"
    spec = importlib.util.spec_from_file_location("_zoo_rounding_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = []
    for attr, fn in sorted(vars(module).items()):
        if attr.startswith("_") or not inspect.isfunction(fn):
            continue
        params = inspect.signature(fn).parameters
        if "tl" in params and params["tl"].kind is inspect.Parameter.KEYWORD_ONLY:
            out.append(attr)
    return out


def _hex(x: float | None) -> str:
    return "-" if x is None else x.hex()


def _line(name: str, schedule: Schedule, bound: float) -> str:
    config = VerifyConfig(queue_depth=schedule.launch.queue_depth,
                          only=frozenset({Property.NUMERIC_SAFETY}), input_bound=bound)
    p = verify(schedule, config).property("numeric_safety")
    assert isinstance(p, NumericResult)
    return f"{name} B={bound:g}: {p.status.value} eta={_hex(p.error_bound)} " \
        f"tau={_hex(p.error_floor)} | {p.message}"


def test_the_stated_bounds_of_the_built_ins_and_the_rounding_zoo_are_pinned(
        golden: Golden) -> None:
    lines = []
    for name in BUILTINS:
        ref = resolve_kernel(name)
        schedule = trace(ref, build_launch(ref, LaunchOptions.from_mapping({}, "test")))
        for bound in (1.0, 16.0):
            lines.append(_line(name, schedule, bound))
    for name in _zoo():
        lines.append(_line(f"rounding_cases::{name}", ROUND.schedule(name), 16.0))
    golden("numeric_bounds.txt", "\n".join(lines) + "\n")
