"""The proof matrix (`proofs.toml`): a list of cases, each a kernel, a launch and an
expected outcome. Parsing is strict — an unknown or mistyped key is an error — because a
typo that silently drops an expectation would let a broken proof pass CI.

Paths in a case (`kernel = "dir/file.py::fn"`, `wiring = "dir/wiring.toml"`) are relative to
the matrix file, so the gate gives the same answer from any working directory.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from meshproof.deploy.launches import LaunchList, panel_launches
from meshproof.errors import ConfigError, MeshproofError
from meshproof.gate.case_values import (
    check_args,
    check_positive,
    check_properties,
    check_recheck,
    check_sharded,
    check_timeout,
)
from meshproof.gate.judge import EXPECT_PROVED, NUMERICS, Expectation, Numerics
from meshproof.model.launch import DEFAULT_SHARDED, Launch, LaunchOptions, build_launch
from meshproof.model.loader import KernelRef, resolve_kernel
from meshproof.model.masks import Mask
from meshproof.model.schedule import Scalar
from meshproof.model.topology import parse_system
from meshproof.panels import SCALES, get_panel
from meshproof.tomlfile import read_toml
from meshproof.verify.properties import PROPERTY_NAMES, Property, RecheckSolver

DEFAULT_TIMEOUT_S = 60.0

CASE_KEYS = ("name", "kernel", "panel", "scale", "wiring", "system", "pes", "cubes",
             "cube_start", "mesh", "queue_depth", "args", "sharded", "timeout", "rlimit",
             "trace_timeout", "simulate", "mask", "input_bound", "score_bound", "tolerance",
             "only", "skip", "expect", "recheck")
REQUIRED_KEYS = ("name", "expect")


@dataclass(frozen=True, slots=True)
class GateCase:
    """One row of the matrix, validated; launch fields left None take the usual defaults."""

    name: str
    kernel: str                          # as written: built-in name or "path.py::fn"
    violated: tuple[Property, ...] = ()  # expected violated, in verdict order; () = proved
    numerics_violated: bool = False      # expected out of tolerance (with simulate)
    kernel_path: str | None = None       # "path::fn" resolved against the matrix file
    panel: str | None = None
    scale: str = "validation"
    wiring: str | None = None            # as written: built-in name or a .toml path
    wiring_path: str | None = None       # a .toml path resolved against the matrix file
    system: str | None = None
    pes: int | None = None
    cubes: int | None = None
    cube_start: int | None = None
    mesh: str | None = None
    queue_depth: int | None = None
    args: tuple[tuple[str, Scalar], ...] = ()
    sharded: tuple[str, ...] | None = None
    timeout: float = DEFAULT_TIMEOUT_S   # wall-clock seconds per solver call
    rlimit: int | None = None            # deterministic Z3 resource limit per call
    simulate: bool = False
    # wall-clock (and CPU) seconds for importing and tracing the kernel in its child
    # process; None: the gate's --trace-timeout (default 60)
    trace_timeout: float | None = None
    mask: str | None = None              # --mask (model/masks.py); None: the kernel's own
    # numeric_safety's assumption and tolerance; None: the panel's B (else 16), no score
    # assumption, the simulator's tolerance
    input_bound: float | None = None
    score_bound: float | None = None
    tolerance: float | None = None
    only: tuple[Property, ...] = ()      # check only these (empty: every property)
    skip: tuple[Property, ...] = ()      # leave these out
    recheck: RecheckSolver | None = None  # re-solve the protocol queries (--recheck)

    @property
    def checked(self) -> tuple[Property, ...]:
        """The properties the case checks, in verdict order."""
        return tuple(p for p in Property
                     if (not self.only or p in self.only) and p not in self.skip)

    @property
    def expectation(self) -> Expectation:
        """Exactly `violated` violated, every other checked property proved; numerics
        judged only when the case simulates."""
        numerics = Numerics.UNCHECKED
        if self.simulate:
            numerics = Numerics.OUT_OF_TOLERANCE if self.numerics_violated else \
                Numerics.IN_TOLERANCE
        return Expectation(frozenset(self.violated), numerics,
                           unchecked=frozenset(p for p in Property if p not in self.checked))

    @property
    def is_deployment(self) -> bool:
        """Several launches at once: a panel that is several, with no cube_start picking
        one (`resolve_case_launches`)."""
        return self.panel is not None and self.cube_start is None and \
            get_panel(self.panel, self.scale).is_deployment

    @property
    def expected_text(self) -> str:
        return self.expectation.text

    def to_json(self) -> dict[str, Any]:
        """The case as written (paths as in the file): part of the gate's JSON output."""
        out: dict[str, Any] = {"name": self.name, "kernel": self.kernel,
                               "expect": list(self.expectation.names) or EXPECT_PROVED}
        for key in ("panel", "wiring", "system", "pes", "cubes", "cube_start", "mesh",
                    "queue_depth", "mask"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.panel is not None:
            out["scale"] = self.scale
        if self.args:
            out["args"] = dict(self.args)
        if self.sharded is not None:
            out["sharded"] = list(self.sharded)
        out["timeout"] = self.timeout
        if self.rlimit is not None:
            out["rlimit"] = self.rlimit
        if self.trace_timeout is not None:
            out["trace_timeout"] = self.trace_timeout
        for key in ("input_bound", "score_bound", "tolerance"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        for key in ("only", "skip"):
            if getattr(self, key):
                out[key] = [p.value for p in getattr(self, key)]
        out["simulate"] = self.simulate
        if self.recheck is not None:
            out["recheck"] = self.recheck.value
        return out


@dataclass(frozen=True, slots=True)
class GateMatrix:
    """A validated proof matrix file: its path and its cases, in file order."""

    path: Path
    cases: tuple[GateCase, ...]


def load_matrix(path: Path) -> GateMatrix:
    """Read and validate a matrix file; raises ConfigError (one line) on any problem."""
    data = read_toml(path, "proof matrix", "pass an existing TOML file (default: proofs.toml "
                     "in the current directory)", directory="pass a TOML file of [[case]] "
                     "tables")
    unknown = sorted(set(data) - {"case"})
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {', '.join(unknown)}; a proof "
                          "matrix holds only [[case]] tables")
    raw_cases = data.get("case")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise ConfigError(f"{path} lists no cases; add [[case]] tables with at least name, "
                          "kernel and expect")
    base = path.resolve().parent
    cases: list[GateCase] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_cases, start=1):
        case = parse_case(raw, base, f"{path}: case #{index}")
        if case.name in seen:
            raise ConfigError(f"{path}: case #{index}: name {case.name!r} is used twice; "
                              "case names must be unique (they name JUnit testcases)")
        seen.add(case.name)
        cases.append(case)
    return GateMatrix(path, tuple(cases))


def parse_case(raw: object, base: Path, where: str) -> GateCase:
    """Validate one `[[case]]` table; `base` anchors relative paths."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} is not a table; write each case as a [[case]] table")
    name = raw.get("name")
    if isinstance(name, str) and name.strip():
        where = f"{where} ({name})"
    for key in sorted(raw):
        if key not in CASE_KEYS:
            close = difflib.get_close_matches(key, CASE_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where}: unknown key {key!r}{hint}; allowed: "
                              f"{', '.join(CASE_KEYS)}")
    for key in REQUIRED_KEYS:
        if key not in raw:
            raise ConfigError(f"{where}: missing required key {key!r}")
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ConfigError(f"{where}: name must be a non-empty string without surrounding "
                          "spaces")
    panel = _opt(raw, "panel", str, where)
    kernel_text = _opt(raw, "kernel", str, where)
    if panel is None and kernel_text is None:
        raise ConfigError(f"{where}: give kernel = \"NAME\" (or \"path.py::function\"), or "
                          "panel = \"NAME\"")
    scale = _opt(raw, "scale", str, where) or "validation"
    if scale not in SCALES:
        raise ConfigError(f"{where}: scale {scale!r} is not one of {', '.join(SCALES)}")
    if panel is not None:
        try:
            preset = get_panel(panel, scale)
        except MeshproofError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        kernel_text = kernel_text or preset.kernel
    elif "scale" in raw:
        raise ConfigError(f"{where}: scale applies only to panel cases; remove it")
    assert kernel_text is not None
    kernel_path = None
    if "::" in kernel_text:
        file_part, _, func = kernel_text.rpartition("::")
        kernel_path = f"{(base / file_part).resolve()}::{func}"
    wiring = _opt(raw, "wiring", str, where)
    wiring_path = str((base / wiring).resolve()) if wiring and is_wiring_file(wiring) else None
    simulate = _opt(raw, "simulate", bool, where) or False
    expected = _expect(raw["expect"], simulate, where)
    only, skip = check_properties(raw, "only", where), check_properties(raw, "skip", where)
    left_out = [p for p in expected if p != NUMERICS and
                ((only and Property(p) not in only) or Property(p) in skip)]
    if left_out:
        raise ConfigError(f"{where}: expect lists {', '.join(left_out)}, which only/skip "
                          "leave out; check it or drop it from expect")
    return GateCase(
        name=name, kernel=kernel_text,
        violated=tuple(Property(p) for p in expected if p != NUMERICS),
        numerics_violated=NUMERICS in expected,
        kernel_path=kernel_path, panel=panel, scale=scale, wiring=wiring,
        wiring_path=wiring_path,
        system=_opt(raw, "system", str, where), pes=_int(raw, "pes", 1, where),
        cubes=_int(raw, "cubes", 1, where), cube_start=_int(raw, "cube_start", 0, where),
        mesh=_opt(raw, "mesh", str, where), queue_depth=_int(raw, "queue_depth", 0, where),
        args=check_args(raw.get("args", {}), where),
        sharded=check_sharded(raw.get("sharded"), where),
        timeout=check_timeout(raw.get("timeout", DEFAULT_TIMEOUT_S), where),
        rlimit=_int(raw, "rlimit", 1, where), simulate=simulate,
        trace_timeout=check_timeout(raw["trace_timeout"], where, "trace_timeout")
        if "trace_timeout" in raw else None, mask=_mask(raw, where),
        input_bound=check_positive(raw, "input_bound", where),
        score_bound=check_positive(raw, "score_bound", where),
        tolerance=check_positive(raw, "tolerance", where), only=only, skip=skip,
        recheck=check_recheck(raw, where))


def _mask(raw: dict[str, Any], where: str) -> str | None:
    text = _opt(raw, "mask", str, where)
    if text is not None and text.strip() != "none":
        try:
            Mask.parse(text)
        except MeshproofError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return text  # type: ignore[no-any-return]


def is_wiring_file(wiring: str) -> bool:
    """The rule build_wiring uses to tell a wiring file from a built-in name."""
    return wiring.endswith(".toml") or "/" in wiring


def _opt(raw: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = raw.get(key)
    if value is None:
        return None
    # bool is an int subclass; a `pes = true` typo must not pass as 1
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: {key} must be {_KIND_WORDS[kind]}, got {value!r}")
    return value


_KIND_WORDS = {str: "a string", bool: "a boolean (true/false)", int: "an integer"}


def _int(raw: dict[str, Any], key: str, low: int, where: str) -> int | None:
    value = _opt(raw, key, int, where)
    if value is not None and value < low:
        raise ConfigError(f"{where}: {key} must be >= {low}, got {value}")
    return value  # type: ignore[no-any-return]


def _expect(value: object, simulate: bool, where: str) -> tuple[str, ...]:
    allowed = (*PROPERTY_NAMES, NUMERICS)
    if value == EXPECT_PROVED:
        return ()
    if isinstance(value, str):
        close = difflib.get_close_matches(value, [EXPECT_PROVED, *allowed], n=1)
        if close and close[0] == EXPECT_PROVED:
            hint = "; did you mean \"proved\"?"
        elif close:
            hint = f"; a violated property goes in a list: expect = [\"{close[0]}\"]"
        else:
            hint = f"; properties: {', '.join(allowed)}"
        raise ConfigError(f"{where}: expect must be \"proved\" or a non-empty list of the "
                          f"properties expected violated, got {value!r}{hint}")
    if not isinstance(value, list) or not value or \
            not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expect must be \"proved\" or a non-empty list of the "
                          f"properties expected violated ({', '.join(allowed)})")
    for item in value:
        if item not in allowed:
            close = difflib.get_close_matches(item, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where}: expect names unknown property {item!r}{hint}; "
                              f"properties: {', '.join(allowed)}")
    if len(set(value)) != len(value):
        raise ConfigError(f"{where}: expect lists a property twice")
    if NUMERICS in value and not simulate:
        raise ConfigError(f"{where}: expect lists \"numerics\" but simulate is not true; add "
                          "simulate = true or remove \"numerics\"")
    return tuple(p for p in allowed if p in value)  # canonical order


def cube_pes(pes: int | None) -> int:
    """PEs per cube of the system, as `--pes` makes it (spec/machine.md §3): 8 as on the
    hardware, more only if `pes` asks for more; `pes` launches PEs 0..pes-1 of each."""
    return max(pes or 0, 8)


def resolve_case(case: GateCase, kernel: KernelRef | None = None, *,
                 resolver: Callable[[str], KernelRef] = resolve_kernel
                 ) -> tuple[KernelRef, Launch]:
    """Resolve the kernel (with `resolver`, e.g. model/isolation.py's) and build the
    launch, as the CLI's launch flags would.

    `kernel` overrides the case's kernel name (the pytest helper passes function objects).
    """
    # named as written in the matrix, not by the absolute path it resolved to, so the
    # verdict, JSON output and cache key do not depend on where the checkout lives
    ref = kernel or replace(resolver(case.kernel_path or case.kernel), name=case.kernel)
    wiring = case.wiring_path or case.wiring
    sharded = case.sharded if case.sharded is not None else DEFAULT_SHARDED
    if case.panel is not None:
        preset = get_panel(case.panel, case.scale)
        if preset.is_deployment and case.cube_start is None:
            raise ConfigError(f"case {case.name}: panel {case.panel} ({case.scale}) is "
                              f"{len(preset.launches)} launches at once: resolve it with "
                              "resolve_case_launches")
        base = preset.launch_options(case.queue_depth)
        merged = dict(base.args)
        merged.update(dict(case.args))
        opts = LaunchOptions(
            system=parse_system(case.system, cube_pes(case.pes)) if case.system else base.system,
            pes=case.pes, wiring=wiring or base.wiring,
            cubes=case.cubes if case.cubes is not None else base.cubes,
            cube_start=case.cube_start if case.cube_start is not None else base.cube_start,
            mesh=case.mesh or base.mesh, args=tuple(sorted(merged.items())),
            sharded=sharded, queue_depth=case.queue_depth, groups=base.groups,
            mask=case.mask)
    else:
        system = parse_system(case.system or "1x4x4", cube_pes(case.pes))
        opts = LaunchOptions(system=system, pes=case.pes, wiring=wiring,
                             cubes=case.cubes, cube_start=case.cube_start, mesh=case.mesh,
                             args=case.args, sharded=sharded, queue_depth=case.queue_depth,
                             mask=case.mask)
    return ref, build_launch(ref, opts)


# The keys of a case that change one launch; a panel of several launches takes none.
_LAUNCH_KEYS = ("wiring", "system", "pes", "cubes", "mesh", "args", "sharded")


def resolve_case_launches(case: GateCase, kernel: KernelRef | None = None, *,
                          resolver: Callable[[str], KernelRef] = resolve_kernel) -> LaunchList:
    """The case's deployment: one launch (`resolve_case`), or every launch of a panel that
    is several (a headline multi-user panel: its kv groups, checked together with
    launch_separation) unless `cube_start` picks one."""
    if case.panel is not None and case.cube_start is None:
        preset = get_panel(case.panel, case.scale)
        if preset.is_deployment:
            given = [key for key in _LAUNCH_KEYS if getattr(case, key) not in (None, ())]
            if given:
                raise ConfigError(
                    f"case {case.name}: panel {case.panel} ({case.scale}) is "
                    f"{len(preset.launches)} launches at once (cube_start "
                    f"{', '.join(map(str, preset.launches))}), checked together as the panel "
                    f"sets them; {', '.join(given)} would change one launch: drop "
                    f"{', '.join(given)}, or give cube_start = K to check that launch alone")
            listed = panel_launches(preset, case.scale, case.queue_depth, resolver)
            named = tuple((kernel or replace(ref, name=case.kernel), launch)
                          for ref, launch in listed.launches)
            return LaunchList(listed.name, named)
    ref, launch = resolve_case(case, kernel, resolver=resolver)
    return LaunchList(case.name, ((ref, launch),))

