"""The causal panels in the report (report/causal.py): both layouts verified and timed,
the per-rank imbalance read from their timing, and the balanced speed-up in words."""

from __future__ import annotations

from pathlib import Path

import jsonschema

from meshproof.gate.pipeline import Pipeline
from meshproof.report import figures
from meshproof.report.causal import (
    causal_records,
    imbalance,
    imbalance_lines,
    imbalance_runs,
)
from meshproof.schemas import load_schema
from meshproof.verify.api import VerifyConfig


def _record(layout: str, busy: list[float], latency: float) -> dict[str, object]:
    return {"panel": f"causal_prefill_{layout}", "kernel": f"ring_prefill_causal_{layout}",
            "layout": layout, "scale": "validation", "why": "", "properties": None,
            "refused": None,
            "timing": {"latency_s": latency, "comm_steps": 7, "per_rank": [
                {"cube": 0, "pe": p, "busy_s": b} for p, b in enumerate(busy)]}}


def test_the_speed_up_is_said_in_words() -> None:
    naive = _record("naive", [14.9e-6 + 5e-6 * i for i in range(7)] + [49.9e-6], 49.9e-6)
    zigzag = _record("zigzag", [44.7e-6] * 8, 44.7e-6)
    assert imbalance(naive) == (14.9e-6, 49.9e-6, 49.9e-6)
    text = "\n".join(imbalance_lines([naive, zigzag]))
    assert "busy time per rank 14.9 µs to 49.9 µs, latency 49.9 µs" in text
    assert "its busiest rank works 3.3× as long as its least busy one" in text
    assert "Balanced, the prefill finishes in 44.7 µs instead of 49.9 µs: 1.12× faster" \
        in text


def test_a_missing_timing_is_said_and_not_drawn() -> None:
    broken = _record("naive", [], 0.0)
    broken["timing"] = None
    broken["refused"] = "deadlocks"
    assert imbalance(broken) is None and imbalance_runs([broken]) == []
    assert "not timed (deadlocks)" in "\n".join(imbalance_lines([broken]))


def test_the_validation_panels_are_proved_timed_and_drawn(tmp_path: Path) -> None:
    records = causal_records("validation", Pipeline(), VerifyConfig(), lambda _: None)
    assert [r["layout"] for r in records] == ["naive", "zigzag"]
    jsonschema.Draft202012Validator(load_schema("sweep-v1")["properties"]["causal"]
                                    ).validate(records)
    for r in records:
        assert r["properties"] == [{"name": "exactly_once_merge", "status": "proved"},
                                   {"name": "attention_equivalence", "status": "proved"},
                                   {"name": "numeric_safety", "status": "proved"}]
        assert len(r["timing"]["per_rank"]) == 8
    naive, zigzag = (imbalance(r) for r in records)
    assert naive is not None and zigzag is not None
    assert naive[1] / naive[0] > 2 and zigzag[1] / zigzag[0] < 1.2   # imbalance vs flat
    # at validation shapes fixed per-op costs dominate: zigzag's 17 small blocks per rank
    # are not faster there (the headline's 1M tokens are); the words say which
    assert ("faster" if zigzag[2] < naive[2] else "slower") in "\n".join(
        imbalance_lines(records))
    png = figures.imbalance_figure(imbalance_runs(records), tmp_path / "c.png")
    assert png.stat().st_size > 1000
