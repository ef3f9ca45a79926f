"""Assertions for your own pytest suite.

    from meshproof.testing import assert_verified, assert_violates

    def test_my_allreduce_is_proved():
        assert_verified("kernels/attn.py::my_allreduce", wiring="pe_line", pes=8,
                        args={"S_q": 1, "d_head": 64}, score_bound=30)

    def test_recv_first_variant_deadlocks():
        assert_violates(my_recv_first, "deadlock_freedom", pes=8)

`kernel` is a built-in name, "path/file.py::function" (relative to the working
directory), or the kernel function itself. The launch keywords mean what the CLI's launch
flags mean (`--wiring`, `--system`, ...); the case keys of a proof matrix are the same.
A failing assertion's message is the counterexample, one `file:line: rank (cube C, pe P):
error: ...` line per finding, so pytest shows where the kernel is wrong. The verdict is
judged by the gate's judge (`meshproof.gate.judge`). numeric_safety is proved only when
its rounding bound is within the tolerance (default the simulator's; `rounding_tolerance=`,
formerly `tolerance=`, still read but deprecated) under
the stated assumption (`input_bound=`, `score_bound=`), else unknown, which fails
assert_verified.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypedDict, Unpack

from meshproof.errors import KernelLoadError, LaunchError
from meshproof.gate.case_values import check_positive, check_timeout
from meshproof.gate.judge import NUMERICS, CaseStatus, ItemStatus, Judgement, judge
from meshproof.gate.matrix import DEFAULT_TIMEOUT_S, GateCase, resolve_case_launches
from meshproof.gate.outcome import CaseOutcome, NumericOutcome, PropertyOutcome
from meshproof.gate.results import CaseResult
from meshproof.gate.runner import evaluate
from meshproof.model.launch_options import KEY_NAMES, LaunchOptions
from meshproof.model.loader import KernelRef, site_of
from meshproof.model.schedule import Scalar
from meshproof.panels import get_panel
from meshproof.verify.properties import PROPERTY_NAMES, Property
from meshproof.verify.result import Status, Verdict

__all__ = ["LaunchKeywords", "assert_verified", "assert_violates"]

KernelArg = str | Callable[..., Any]
# the kernel is the first positional argument (a name or the function itself)
TESTING_KEYS = tuple(k for k in KEY_NAMES if k != "kernel")


class LaunchKeywords(TypedDict, total=False):
    """The launch keywords: the keys of the launch table (model/launch_options.py), as a
    proof matrix's case spells them. tests/test_launch_options.py checks they agree."""

    panel: str
    scale: str
    system: str
    pes: int
    wiring: str
    cubes: int
    cube_start: int
    mesh: str
    args: Mapping[str, Scalar]
    sharded: Sequence[str]
    queue_depth: int
    harness: str
    groups: str
    outputs: Sequence[str]
    softmax_scale: float
    mask: str
    empty_shards: Sequence[str | tuple[int, int]]


def assert_verified(kernel: KernelArg | None = None, *, timeout: float = DEFAULT_TIMEOUT_S,
                    simulate: bool = False, input_bound: float | None = None,
                    score_bound: float | None = None,
                    rounding_tolerance: float | None = None,
                    tolerance: float | None = None,
                    **launch: Unpack[LaunchKeywords]) -> Verdict:
    """Assert every property is proved (and, with simulate=True, numerics in tolerance).

    `input_bound`, `score_bound` and `rounding_tolerance` are numeric_safety's assumption
    (|inputs| <= B, |scale·q·kᵀ| <= S) and tolerance, as the matrix keys of that name
    (`tolerance` is rounding_tolerance's old spelling, deprecated).
    Returns the Verdict (e.g. for `min_queue_depth`). Raises AssertionError whose message
    is the counterexample; an unknown property (solver timeout) fails too.
    """
    __tracebackhide__ = True
    case, ref = _case("assert_verified", kernel, (), False, launch, timeout, simulate,
                      (input_bound, score_bound, _tolerance(rounding_tolerance, tolerance)))
    result = _evaluate(case, ref)
    judgement = judge(case.expectation, _outcome(result))
    problems = [_describe(j.got, j.prop) for j in judgement.properties
                if j.status is not ItemStatus.MET]
    numerics = judgement.numerics
    if numerics is not None and numerics.status is not ItemStatus.MET:
        problems.append(f"numerics out of tolerance: {_numeric_text(numerics.got)}")
    if problems:
        raise AssertionError(f"{_label(result)}: expected every property proved\n"
                             + "\n".join(problems))
    return _verdict(result)


def assert_violates(kernel: KernelArg | None, *properties: str | Property,
                    exactly: bool = False, timeout: float = DEFAULT_TIMEOUT_S,
                    simulate: bool = False, input_bound: float | None = None,
                    score_bound: float | None = None,
                    rounding_tolerance: float | None = None,
                    tolerance: float | None = None,
                    **launch: Unpack[LaunchKeywords]) -> Verdict:
    """Assert each named property is violated (a known-bad kernel stays known-bad).

    With exactly=True every other property must be proved, as in a proof matrix. Name
    "numerics" (with simulate=True) to assert the simulation is out of tolerance.
    """
    __tracebackhide__ = True
    if not properties:
        raise LaunchError("assert_violates needs at least one property name, e.g. "
                          "assert_violates(kernel, \"deadlock_freedom\")")
    names = [p.value if isinstance(p, Property) else p for p in properties]
    allowed = (*PROPERTY_NAMES, NUMERICS)
    for name in names:
        if name not in allowed:
            raise LaunchError(f"unknown property {name!r}; properties: {', '.join(allowed)}")
    if NUMERICS in names and not simulate:
        raise LaunchError("asserting \"numerics\" needs simulate=True")
    violated = tuple(p for p in Property if p.value in names)
    case, ref = _case("assert_violates", kernel, violated, NUMERICS in names, launch,
                      timeout, simulate,
                      (input_bound, score_bound, _tolerance(rounding_tolerance, tolerance)))
    result = _evaluate(case, ref)
    expect = replace(case.expectation, exactly=exactly)
    problems = _violation_problems(judge(expect, _outcome(result)))
    if problems:
        raise AssertionError(f"{_label(result)}: expected {', '.join(names)} violated"
                             + (" and everything else proved" if exactly else "") + "\n"
                             + "\n".join(problems))
    return _verdict(result)


def _violation_problems(judgement: Judgement) -> list[str]:
    problems: list[str] = []
    for j in judgement.properties:
        if j.status is ItemStatus.MET:
            continue
        if j.want is Status.VIOLATED and j.got is not None:
            problems.append(f"{j.prop.value}: expected violated, got {j.got.status.value}: "
                            f"{j.got.message}")
        else:
            problems.append(_describe(j.got, j.prop))
    numerics = judgement.numerics
    if numerics is not None and numerics.status is not ItemStatus.MET:
        got = numerics.got
        problems.append(f"numerics: expected {'in' if numerics.want_ok else 'out of'} "
                        f"tolerance, got {_numeric_text(got)}")
    return problems


def _case(where: str, kernel: KernelArg | None, violated: tuple[Property, ...],
          numerics_violated: bool, launch: Mapping[str, object], timeout: float,
          simulate: bool, numeric: tuple[float | None, float | None, float | None]
          ) -> tuple[GateCase, KernelRef | None]:
    """The keywords as a proof-matrix case, checked like one: a misuse raises BadInput
    (ConfigError, LaunchError, ...) here, never a failed assertion later."""
    written = LaunchOptions.from_mapping(launch, where, TESTING_KEYS)
    if kernel is None:
        if written.panel is None:
            raise LaunchError("name a kernel (built-in name, \"path/file.py::function\" or "
                              "the function) or pass panel=NAME")
        kernel = get_panel(written.panel, written.scale or "validation").kernel
    ref = None if isinstance(kernel, str) else kernel_ref(kernel)
    name = ref.name if ref is not None else str(kernel)
    if written.panel is None:
        written = replace(written, kernel=name)
    case = GateCase(name=name, kernel=name, violated=violated,
                    numerics_violated=numerics_violated, written=written, base=Path.cwd(),
                    timeout=check_timeout(timeout, where), simulate=simulate)
    case = replace(case, input_bound=_positive(numeric[0], "input_bound", where),
                   score_bound=_positive(numeric[1], "score_bound", where),
                   rounding_tolerance=_positive(numeric[2], "rounding_tolerance", where))
    # a bad launch is a usage error (typed), not a failed assertion
    resolve_case_launches(case, ref)
    return case, ref


def _tolerance(rounding: float | None, old: float | None) -> float | None:
    """rounding_tolerance=, or its deprecated spelling tolerance= (not both)."""
    if old is not None and rounding is not None:
        raise LaunchError("rounding_tolerance= and tolerance= (its deprecated spelling) are "
                          "both given; keep rounding_tolerance=")
    return rounding if rounding is not None else old


def _positive(value: float | None, key: str, where: str) -> float | None:
    """A numeric_safety assumption or tolerance: positive and finite when given."""
    return None if value is None else check_positive({key: value}, key, where)


def kernel_ref(func: Callable[..., Any]) -> KernelRef:
    """A KernelRef for a kernel function object (as resolve_kernel builds for a file)."""
    if not inspect.isfunction(func):
        raise KernelLoadError(f"{func!r} is not a kernel: pass a built-in name, "
                              "\"path/file.py::function\" or a `def k(..., *, tl)` function")
    if "tl" not in inspect.signature(func).parameters:
        raise KernelLoadError(f"{func.__qualname__} takes no `tl` parameter; kernels are "
                              "`def k(..., *, tl)`")
    site = site_of(func)
    try:
        digest = hashlib.sha256(Path(site.real_file).read_bytes()).hexdigest()[:16]
    except OSError:
        digest = ""
    doc = (inspect.getdoc(func) or "").strip().splitlines()
    return KernelRef(f"{site.display_file}::{func.__name__}", func, site,
                     doc[0] if doc else "", str(getattr(func, "meshproof_harness", "decode")),
                     (), digest, default_mask=_declared_mask(func))


def _declared_mask(func: Callable[..., Any]) -> str | None:
    mask = getattr(func, "meshproof_mask", None)
    return None if mask is None else str(mask)


def _evaluate(case: GateCase, ref: KernelRef | None) -> CaseResult:
    __tracebackhide__ = True
    result = evaluate(case, kernel=ref)
    if result.status is CaseStatus.ERROR:
        raise AssertionError(f"{case.kernel}: {result.error}")
    return result


def _outcome(result: CaseResult) -> CaseOutcome:
    assert result.outcome is not None  # not an ERROR result: _evaluate raised for those
    return result.outcome


def _verdict(result: CaseResult) -> Verdict:
    """The first launch's verdict (the only one but for a panel of several launches, whose
    others are in `result.verdict`)."""
    assert result.verdict is not None
    return result.verdict.verdicts[0]


def _numeric_text(numeric: NumericOutcome | None) -> str:
    return numeric.text() if numeric is not None else "the simulation did not run"


def _describe(prop: PropertyOutcome | None, name: Property) -> str:
    if prop is None:
        return f"{name.value}: the verifier reported no result"
    if prop.status is Status.UNKNOWN:
        return f"{prop.name.value}: unknown, not proved: {prop.message}"
    head = f"{prop.name.value} {prop.status.value}: {prop.summary or prop.message}"
    return "\n".join([head, *(f"  {line}" for line in prop.diagnostics)])


def _label(result: CaseResult) -> str:
    spec = result.launch
    if spec is None:
        return result.case.kernel
    return spec.header(spec.queue_depth)
