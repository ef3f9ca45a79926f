"""The values of a proof-matrix case that need more than a type check: kernel arguments,
sharded buffers, timeouts, numeric_safety's assumption and tolerance, and the properties
a case checks (`only` / `skip`). Each raises ConfigError (one line, with the fix)."""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from meshproof.errors import ConfigError, MeshproofError
from meshproof.model.schedule import Scalar
from meshproof.verify.properties import PROPERTY_NAMES, Property, RecheckSolver, parse_recheck


def check_positive(raw: dict[str, Any], key: str, where: str) -> float | None:
    """A positive, finite number (numeric_safety's assumption or tolerance), or None."""
    if key not in raw:
        return None
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where}: {key} must be a positive, finite number, got {value!r}")
    return float(value)


def check_recheck(raw: dict[str, Any], where: str) -> RecheckSolver | None:
    """The `recheck` key: a second solver's name (`--recheck`), or None."""
    if "recheck" not in raw:
        return None
    if not isinstance(raw["recheck"], str):
        raise ConfigError(f"{where}: recheck must be a solver name, e.g. \"cvc5\"")
    try:
        return parse_recheck(raw["recheck"], f"{where}: recheck")
    except MeshproofError as exc:
        raise ConfigError(str(exc)) from None


def check_properties(raw: dict[str, Any], key: str, where: str) -> tuple[Property, ...]:
    """A list of property names (only / skip), in verdict order."""
    if key not in raw:
        return ()
    value = raw[key]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {key} must be a non-empty list of property names; "
                          f"properties: {', '.join(PROPERTY_NAMES)}")
    for item in value:
        if item not in PROPERTY_NAMES:
            close = difflib.get_close_matches(item, PROPERTY_NAMES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where}: {key} names unknown property {item!r}{hint}; "
                              f"properties: {', '.join(PROPERTY_NAMES)}")
    return tuple(p for p in Property if p.value in value)


def check_args(value: object, where: str) -> tuple[tuple[str, Scalar], ...]:
    """Kernel arguments: a table of numbers, booleans and strings (sorted by name)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: args must be an inline table, e.g. args = {{ S_q = 1 }}")
    for key, item in value.items():
        if not isinstance(item, (int, float, bool, str)) or \
                (isinstance(item, float) and not math.isfinite(item)):
            raise ConfigError(f"{where}: args.{key} must be a number, boolean or string, got "
                              f"{item!r}")
    return tuple(sorted(value.items()))


def check_sharded(value: object, where: str) -> tuple[str, ...] | None:
    """Buffer names holding KV shards; None keeps the default. An empty list is refused:
    with no sharded buffer exactly-once merging has nothing to count (a typo, not a
    choice)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [s.strip() for s in value.split(",") if s.strip()]
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
        raise ConfigError(f"{where}: sharded must be a list of buffer names, e.g. "
                          "sharded = [\"k_ptr\", \"v_ptr\"]")
    if not value:
        raise ConfigError(f"{where}: sharded names no buffer; leave it out for the default "
                          "[\"k_ptr\", \"v_ptr\"] or name the buffers holding KV shards")
    return tuple(value)


def check_timeout(value: object, where: str, key: str = "timeout") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where}: {key} must be a positive number of seconds, got "
                          f"{value!r}")
    return float(value)


def check_simulate(raw: dict[str, Any], key: str, where: str) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {key} must be a boolean (true/false), got {value!r}")
    return value


def check_synthesized(raw: dict[str, Any], key: str, where: str) -> bool:
    """`synthesized = true`: the case's kernel is a file `meshproof synthesize` wrote
    (function `synthesized`), which the gate regenerates and compares byte for byte."""
    value = check_simulate(raw, key, where)
    kernel = raw.get("kernel")
    if value and (not isinstance(kernel, str) or not kernel.endswith(".py::synthesized")
                  or "panel" in raw):
        raise ConfigError(f"{where}: synthesized = true needs kernel = "
                          "\"FILE.py::synthesized\" (a file meshproof synthesize wrote) and "
                          "no panel")
    return value


def check_rlimit(raw: dict[str, Any], key: str, where: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: {key} must be an integer >= 1, got {value!r}")
    return value


def _timeout(raw: dict[str, Any], key: str, where: str) -> float | None:
    return check_timeout(raw[key], where, key) if key in raw else None


def _rounding_tolerance(raw: dict[str, Any], key: str, where: str) -> float | None:
    """rounding_tolerance, or its deprecated spelling `tolerance` (not both)."""
    if DEPRECATED_TOLERANCE in raw:
        if key in raw:
            raise ConfigError(f"{where}: rounding_tolerance and tolerance (its deprecated "
                              "spelling) are both given; keep rounding_tolerance")
        return check_positive(raw, DEPRECATED_TOLERANCE, where)
    return check_positive(raw, key, where)


# the old spelling of rounding_tolerance, still read (deprecated: the word "tolerance" also
# names the simulator's check threshold, which this key never set)
DEPRECATED_TOLERANCE = "tolerance"


@dataclass(frozen=True, slots=True)
class CheckKey:
    """One check key of a case: how a verdict is reached, not what is launched. `flag`:
    the `meshproof verify` flag that means the same ("" : none); `testing`: a keyword of
    meshproof.testing's assertions. tests/test_gate_case_values.py holds the front ends
    to this table."""

    key: str
    read: Callable[[dict[str, Any], str, str], object]
    flag: str = ""
    testing: bool = False


CHECK_KEYS: tuple[CheckKey, ...] = (
    CheckKey("timeout", _timeout, "--timeout", testing=True),
    CheckKey("rlimit", check_rlimit),
    CheckKey("trace_timeout", _timeout, "--trace-timeout"),
    CheckKey("simulate", check_simulate, testing=True),
    CheckKey("input_bound", check_positive, "--input-bound", testing=True),
    CheckKey("score_bound", check_positive, "--score-bound", testing=True),
    CheckKey("rounding_tolerance", _rounding_tolerance, "--rounding-tolerance", testing=True),
    CheckKey("only", check_properties, "--only"),
    CheckKey("skip", check_properties, "--skip"),
    CheckKey("synthesized", check_synthesized),
    CheckKey("recheck", lambda raw, key, where: check_recheck(raw, where), "--recheck"),
)
CHECK_KEY_NAMES = tuple(row.key for row in CHECK_KEYS)


def read_checks(raw: dict[str, Any], where: str) -> dict[str, object]:
    """The check keys of a case, each read by its row (absent: the row's default)."""
    return {row.key: row.read(raw, row.key, where) for row in CHECK_KEYS
            if row.key in raw or row.key != "timeout"}
