"""verify/semantics/relations.py: value numbers, the relations the rounding rules read.

How the numbering is done (its order, its cost) must never move a bound: the stated
bounds of the built-ins and of the rounding zoo (tests/kernels/rounding_cases.py) are
pinned bit for bit (floats in hex) in tests/golden/numeric_bounds.txt, with each verdict
and its message. A change to the numbering that moved one would show here; a change that
means to move one regenerates the file (`--regen-golden`) and says why.

Translation validation: the same analyses record every numbering call and replay it on
the numbering as it was before its fields moved into the numbers (relations_reference.py):
the relation at every op, each value's dtype and which values share a number must be the
same -- on the built-ins, the rounding zoo and the masked kernels.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from helpers import Golden, kernel_spec, trace_kernel
from relations_reference import ReferenceNumbers
from semantic_helpers import KERNELS, LineKernels

import meshproof.verify.semantics.situation_memo as situation_memo
from meshproof.model.channels import derive_channels
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.schedule import Op, Schedule
from meshproof.model.trace import trace
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property
from meshproof.verify.result import NumericResult
from meshproof.verify.semantics import semantic_analysis
from meshproof.verify.semantics.relations import Related, ValueNumbers
from meshproof.verify.semantics.relations_numbering import _NUM

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


class _Recording(ValueNumbers):
    """The numbering an analysis uses, with every call it receives recorded."""

    made: ClassVar[list[_Recording]] = []

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, ...]] = []
        _Recording.made.append(self)

    def related(self, rank: int, op: Op) -> Related:
        rel = super().related(rank, op)
        self.calls.append((rank, op, rel))
        return rel

    def note(self, rank: int, op: Op, mag: float = 0.0, zero: bool = False,
             recv_source: Any = None) -> None:
        self.calls.append((rank, op, mag, zero, recv_source))
        super().note(rank, op, mag, zero, recv_source)


def _replayed(new: _Recording) -> int:
    """Replay new's calls on the reference numbering: the same relation at every op, the
    same dtype for every value, and equal numbers exactly where the reference's are
    equal. The number of relations compared."""
    old = ReferenceNumbers()
    compared = 0
    for call in new.calls:
        if len(call) == 3:
            rank, op, rel = call
            assert old.related(rank, op) == rel, (rank, op.source, op.kind, rel)
            compared += 1
        else:
            old.note(*call)
    pairs: dict[int, int] = {}
    back: dict[int, int] = {}
    for rank, values in new._vns.items():
        for vid, n in values.items():
            o = old._vns[rank][vid]
            assert n & 3 == o & 3, (rank, vid)
            assert pairs.setdefault(n & _NUM, o) == o and back.setdefault(o, n & _NUM) == \
                n & _NUM, (rank, vid)
    return compared


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_Recording]]:
    _Recording.made = []
    monkeypatch.setattr(situation_memo, "ValueNumbers", _Recording)
    yield _Recording.made


def test_the_stated_bounds_of_the_built_ins_and_the_rounding_zoo_are_pinned(
        golden: Golden, recording: list[_Recording]) -> None:
    lines = []
    for name in BUILTINS:
        ref = resolve_kernel(name)
        schedule = trace(ref, build_launch(ref, LaunchOptions.from_mapping({}, "test")))
        for bound in (1.0, 16.0):
            lines.append(_line(name, schedule, bound))
    for name in _zoo():
        lines.append(_line(f"rounding_cases::{name}", ROUND.schedule(name), 16.0))
    golden("numeric_bounds.txt", "\n".join(lines) + "\n")
    assert recording and sum(_replayed(r) for r in recording) > 0


def test_the_masked_kernels_are_numbered_as_the_reference_numbers_them(
        recording: list[_Recording]) -> None:
    names = ["padded", "exp_of_unmasked", "huge_positions", "padded_floor"]
    schedules = [trace_kernel(kernel_spec(f"masked_numeric.py::{n}"), pes=1) for n in names]
    for schedule in schedules:
        semantic_analysis(schedule, derive_channels(schedule))
    assert len(recording) == len(schedules)
    assert all(_replayed(r) > 0 for r in recording)
