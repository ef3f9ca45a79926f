"""Committed reports that do not change from one machine to the next (issue 10, item 9):
measured errors with two digits (report/sweep.py, report/markdown.py), the worst rank by
those digits (sim/result.py), values on file kept across noise (report/stability.py)."""

from __future__ import annotations

import copy
from typing import Any

from meshproof.model.topology import Endpoint
from meshproof.report.markdown import _num
from meshproof.report.stability import MEASURED_DIGITS, keep_stable_values, measured
from meshproof.sim.result import NumericResult, RankNumeric


def _sweep(rel_err: float, ok: bool = True, tolerance: float = 0.01) -> dict[str, Any]:
    numeric = {"rel_err": rel_err, "max_abs_err": rel_err / 2, "tolerance": tolerance,
               "ok": ok, "message": f"machine says {rel_err}"}
    return {"scale": "validation", "seed": 0, "scaling": [],
            "cases": [{"name": "a", "sim": {"numeric": numeric}}], "panels": []}


def test_measured_errors_keep_two_digits_on_file() -> None:
    # 2.72e-04 on one machine, 2.73e-04 on the next: the example
    assert MEASURED_DIGITS == 2
    assert measured(0.000272) == measured(0.000273) == 0.00027
    assert _num({"numeric": {"rel_err": 0.000272, "ok": True}}) == "2.7e-04 ✓"


def test_a_rerun_keeps_the_values_on_file_when_they_moved_by_noise() -> None:
    on_file = _sweep(0.00026)
    rerun = _sweep(0.00025)  # across a rounding boundary of the two digits, 4% apart
    assert keep_stable_values(rerun, on_file) == rerun  # 4% is more than noise
    rerun = _sweep(0.000255)
    kept = keep_stable_values(rerun, on_file)
    assert kept["cases"][0]["sim"]["numeric"] == on_file["cases"][0]["sim"]["numeric"]
    # a file written before the two-digit rule gets it when its values are kept
    old_format = _sweep(0.000255123)
    kept = keep_stable_values(_sweep(0.000255), old_format)["cases"][0]["sim"]["numeric"]
    assert (kept["rel_err"], kept["message"]) == (0.00026, "machine says 0.000255123")
    assert rerun["cases"][0]["sim"]["numeric"]["rel_err"] == 0.000255  # input untouched


def test_a_decided_change_is_never_hidden() -> None:
    on_file = _sweep(0.0099, ok=True)
    assert keep_stable_values(_sweep(0.0100, ok=False), on_file)["cases"][0]["sim"][
        "numeric"]["ok"] is False
    assert keep_stable_values(_sweep(0.0099, tolerance=0.02), on_file) == \
        _sweep(0.0099, tolerance=0.02)
    other_seed = copy.deepcopy(on_file)
    other_seed["seed"] = 1
    assert keep_stable_values(_sweep(0.00991), other_seed) == _sweep(0.00991)
    assert keep_stable_values(_sweep(0.00991), None) == _sweep(0.00991)


def _numeric(*errors: float) -> NumericResult:
    ranks = tuple(RankNumeric(Endpoint(0, pe), 0, e, e, 8, False) for pe, e in enumerate(errors))
    return NumericResult("decode", "normal", 0, 0.35, ("f16",), 0.01, "", 1, 1, ranks)


def test_the_worst_rank_does_not_depend_on_noise() -> None:
    # "worst rank pe 0" became "pe 3" on another machine: errors equal to two digits
    # are a tie, won by the first rank in launch order
    assert "worst rank (cube 0, pe 0): rel_err 1.1 > tolerance" in \
        _numeric(1.0901, 1.0899, 1.09, 1.0902).message
    assert "worst rank (cube 0, pe 2): rel_err 1.2" in _numeric(1.09, 1.0899, 1.2).message
