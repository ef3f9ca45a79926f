"""Committed reports that do not change from one machine to the next.

The simulator's measured errors move in their third digit with the BLAS library and CPU
(the stored f16 outputs round differently when an f32 sum does). The sweep keeps two
significant digits of them (sweep.MEASURED_DIGITS), and a rerun over an existing report
keeps the numbers already on file where the new ones differ by less than MEASURED_NOISE
and agree on everything decided (in or out of tolerance, the tolerance): a rounding
boundary between two machines' values cannot flip a digit of a committed file. A real
change (a kernel edit, another seed) moves the numbers by far more, or flips `ok`.
"""

from __future__ import annotations

import copy
import math
from typing import Any

MEASURED_DIGITS = 2     # significant digits of a measured (BLAS-dependent) error on file
MEASURED_NOISE = 0.02   # relative: what BLAS / CPU differences move a measured error by
_MEASURED = ("rel_err", "max_abs_err")


def measured(value: float | None) -> float | None:
    """A measured error as the committed files hold it: MEASURED_DIGITS digits."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{MEASURED_DIGITS}g}")


def keep_stable_values(new: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
    """`new` with each case's and panel's numeric record taken from `old` (the report on
    file) when the two differ only by measurement noise."""
    if not old or old.get("scale") != new.get("scale") or old.get("seed") != new.get("seed"):
        return new
    out = copy.deepcopy(new)
    for key in ("cases", "panels"):
        before = {r.get("name"): r for r in old.get(key, []) if isinstance(r, dict)}
        for record in out.get(key, []):
            was = _numeric(before.get(record.get("name")))
            now = _numeric(record)
            if was is not None and now is not None and _same_measurement(was, now):
                kept = copy.deepcopy(was)
                for k in _MEASURED:  # a file from before the digits rule gets it now
                    kept[k] = measured(kept.get(k))
                record["sim"]["numeric"] = kept
    return out


def _numeric(record: dict[str, Any] | None) -> dict[str, Any] | None:
    sim = record.get("sim") if isinstance(record, dict) else None
    numeric = sim.get("numeric") if isinstance(sim, dict) else None
    return numeric if isinstance(numeric, dict) else None


def _same_measurement(was: dict[str, Any], now: dict[str, Any]) -> bool:
    if was.get("ok") != now.get("ok") or was.get("tolerance") != now.get("tolerance"):
        return False
    return all(_close(was.get(k), now.get(k)) for k in _MEASURED)


def _close(a: object, b: object) -> bool:
    if a is None or b is None:
        return a is b
    if not isinstance(a, int | float) or not isinstance(b, int | float) or \
            isinstance(a, bool) or isinstance(b, bool):
        return False
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= MEASURED_NOISE * max(abs(a), abs(b))
