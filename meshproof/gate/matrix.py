"""The proof matrix (`proofs.toml`): a list of cases, each a kernel, a launch and an
expected outcome. Parsing is strict — an unknown or mistyped key is an error — because a
typo that silently drops an expectation would let a broken proof pass CI.

Paths in a case (`kernel = "dir/file.py::fn"`, `wiring = "dir/wiring.toml"`) are relative to
the matrix file, so the gate gives the same answer from any working directory.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from meshproof.deploy.launches import LaunchList, resolve_launches
from meshproof.errors import ConfigError, MeshproofError
from meshproof.gate.case_values import CHECK_KEY_NAMES, DEPRECATED_TOLERANCE, read_checks
from meshproof.gate.judge import EXPECT_PROVED, NUMERICS, Expectation, Numerics
from meshproof.model.launch import Launch
from meshproof.model.launch_options import KEY_NAMES, LaunchOptions, refuse_unknown
from meshproof.model.loader import KernelRef, resolve_kernel
from meshproof.panels import get_panel
from meshproof.tomlfile import read_toml
from meshproof.verify.properties import PROPERTY_NAMES, Property, RecheckSolver

DEFAULT_TIMEOUT_S = 60.0

# a case's own keys; the launch keys come from the launch table (model/launch_options.py)
# a case's keys: its name, the launch keys (model/launch_options.py), the check keys
# (gate/case_values.py) and its expectation
CASE_KEYS = ("name", *KEY_NAMES, *CHECK_KEY_NAMES, DEPRECATED_TOLERANCE, "expect")
REQUIRED_KEYS = ("name", "expect")


@dataclass(frozen=True, slots=True)
class GateCase:
    """One row of the matrix, validated; launch fields left None take the usual defaults."""

    name: str
    kernel: str                          # as written: built-in name or "path.py::fn"
    violated: tuple[Property, ...] = ()  # expected violated, in verdict order; () = proved
    numerics_violated: bool = False      # expected out of tolerance (with simulate)
    # the launch keys as written (model/launch_options.py); paths relative to `base`
    written: LaunchOptions = field(default_factory=LaunchOptions)
    base: Path | None = None             # the matrix file's folder (None: as written)
    timeout: float = DEFAULT_TIMEOUT_S   # wall-clock seconds per solver call
    rlimit: int | None = None            # deterministic Z3 resource limit per call
    simulate: bool = False
    # wall-clock (and CPU) seconds for importing and tracing the kernel in its child
    # process; None: the gate's --trace-timeout (default 60)
    trace_timeout: float | None = None
    # numeric_safety's assumption and tolerance; None: the panel's B (else 16), no score
    # assumption, the simulator's tolerance
    input_bound: float | None = None
    score_bound: float | None = None
    rounding_tolerance: float | None = None
    only: tuple[Property, ...] = ()      # check only these (empty: every property)
    skip: tuple[Property, ...] = ()      # leave these out
    recheck: RecheckSolver | None = None  # re-solve the protocol queries (--recheck)
    # the kernel file is `meshproof synthesize`'s: regenerate it and compare the bytes
    synthesized: bool = False

    @property
    def launch(self) -> LaunchOptions:
        """The launch keys with their paths anchored at the matrix file, the kernel named."""
        opts = self.written
        if opts.panel is None and opts.kernel is None:
            opts = replace(opts, kernel=self.kernel)
        return opts if self.base is None else opts.anchored(self.base)

    @property
    def panel(self) -> str | None:
        return self.written.panel

    @property
    def scale(self) -> str:
        return self.written.scale or "validation"

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
        return self.panel is not None and self.written.cube_start is None and \
            get_panel(self.panel, self.scale).is_deployment

    @property
    def expected_text(self) -> str:
        return self.expectation.text

    def to_json(self) -> dict[str, Any]:
        """The case as written (paths as in the file): part of the gate's JSON output."""
        out: dict[str, Any] = {"name": self.name, "kernel": self.kernel,
                               "expect": list(self.expectation.names) or EXPECT_PROVED}
        out.update({k: v for k, v in self.written.to_json().items() if k != "kernel"})
        if self.panel is not None:
            out["scale"] = self.scale
        out["timeout"] = self.timeout
        if self.rlimit is not None:
            out["rlimit"] = self.rlimit
        if self.trace_timeout is not None:
            out["trace_timeout"] = self.trace_timeout
        for key in ("input_bound", "score_bound", "rounding_tolerance"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        for key in ("only", "skip"):
            if getattr(self, key):
                out[key] = [p.value for p in getattr(self, key)]
        out["simulate"] = self.simulate
        if self.recheck is not None:
            out["recheck"] = self.recheck.value
        if self.synthesized:
            out["synthesized"] = True
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
    refuse_unknown(raw, CASE_KEYS, where, "unknown key", "allowed")
    for key in REQUIRED_KEYS:
        if key not in raw:
            raise ConfigError(f"{where}: missing required key {key!r}")
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ConfigError(f"{where}: name must be a non-empty string without surrounding "
                          "spaces")
    written = LaunchOptions.from_mapping({k: v for k, v in raw.items() if k in KEY_NAMES},
                                         where)
    if written.panel is None and written.kernel is None:
        raise ConfigError(f"{where}: give kernel = \"NAME\" (or \"path.py::function\"), or "
                          "panel = \"NAME\"")
    if written.panel is not None:
        try:
            preset = get_panel(written.panel, written.scale or "validation")
        except MeshproofError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        kernel_text = written.kernel or preset.kernel
    elif written.scale is not None:
        raise ConfigError(f"{where}: scale applies only to panel cases; remove it")
    else:
        assert written.kernel is not None
        kernel_text = written.kernel
    checks = read_checks(raw, where)
    simulate, only, skip = checks["simulate"], checks["only"], checks["skip"]
    assert isinstance(simulate, bool) and isinstance(only, tuple) and isinstance(skip, tuple)
    expected = _expect(raw["expect"], simulate, where)
    left_out = [p for p in expected if p != NUMERICS and
                ((only and Property(p) not in only) or Property(p) in skip)]
    if left_out:
        raise ConfigError(f"{where}: expect lists {', '.join(left_out)}, which only/skip "
                          "leave out; check it or drop it from expect")
    return GateCase(
        name=name, kernel=kernel_text,
        violated=tuple(Property(p) for p in expected if p != NUMERICS),
        numerics_violated=NUMERICS in expected, written=written, base=base,
        **checks)  # type: ignore[arg-type]


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


def resolve_case_launches(case: GateCase, kernel: KernelRef | None = None, *,
                          resolver: Callable[[str], KernelRef] = resolve_kernel) -> LaunchList:
    """The case's launches (N >= 1), built as the CLI's launch flags would build them
    (deploy/launches.py): a panel of several launches gives each, unless `cube_start`
    picks one. `kernel` overrides the case's kernel (the pytest helper passes function
    objects)."""
    # named as written in the matrix, not by the absolute path it resolved to, so the
    # verdict, JSON output and cache key do not depend on where the checkout lives
    def named(text: str) -> KernelRef:
        return replace(resolver(text), name=case.kernel)

    listed = resolve_launches(case.launch, named, kernel=kernel)
    return LaunchList(listed.name if listed.is_deployment else case.name, listed.launches)


def resolve_case(case: GateCase, kernel: KernelRef | None = None, *,
                 resolver: Callable[[str], KernelRef] = resolve_kernel
                 ) -> tuple[KernelRef, Launch]:
    """The case's one launch; a case of several is refused (`resolve_case_launches`)."""
    listed = resolve_case_launches(case, kernel, resolver=resolver)
    if listed.is_deployment:
        raise ConfigError(f"case {case.name}: panel {case.panel} ({case.scale}) is "
                          f"{len(listed.launches)} launches at once: resolve it with "
                          "resolve_case_launches")
    return listed.launches[0]
