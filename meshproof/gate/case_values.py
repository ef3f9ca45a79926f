"""The values of a proof-matrix case that need more than a type check: kernel arguments,
sharded buffers, timeouts, numeric_safety's assumption and tolerance, and the properties
a case checks (`only` / `skip`). Each raises ConfigError (one line, with the fix)."""

from __future__ import annotations

import difflib
import math
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
