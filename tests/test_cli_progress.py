"""The progress display (cli/progress.py): on a terminal after the delay, else silent."""

from __future__ import annotations

import io
import threading
import time

import pytest
from rich.console import Console

from meshproof.cli.progress import NumericBar, VerifyBar, working
from meshproof.model import isolation
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import resolve_kernel
from meshproof.model.trace import trace
from meshproof.sim.config import NumericProgress
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property, VerifyProgress


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=120), out


def test_the_bar_shows_bytes_and_groups_on_a_terminal_and_clears_at_the_end() -> None:
    console, out = _console(True)
    with NumericBar(True, "simulate", runs=2, console=console, delay_s=0.0) as bar:
        bar(NumericProgress(1 << 30, 4 << 30, 0, 8))
        assert bar.progress is not None
        bar.progress.refresh()
        shown = out.getvalue()
        assert "simulate" in shown and "launch 1/2" in shown and "groups 0/8" in shown
        bar(NumericProgress(4 << 30, 4 << 30, 8, 8))
        bar(NumericProgress(1 << 30, 4 << 30, 0, 8))     # the second launch starts
        assert bar.progress is not None
        task = bar.progress.tasks[0]
        assert task.total == 8 << 30 and task.completed == 5 << 30
        bar(NumericProgress(4 << 30, 4 << 30, 8, 8))     # all done: the bar goes
        assert bar.progress is None


def test_silent_when_not_a_terminal_disabled_or_short() -> None:
    for terminal, enabled, delay in ((False, True, 0.0), (True, False, 0.0), (True, True, 60)):
        console, out = _console(terminal)
        with NumericBar(enabled, "simulate", console=console, delay_s=delay) as bar:
            bar(NumericProgress(1, 4, 0, 1))
            assert bar.progress is None
        assert out.getvalue() == ""


def test_the_spinner_appears_only_after_its_delay() -> None:
    console, out = _console(True)
    with working(True, "verifying k", console=console, delay_s=60):
        pass
    assert out.getvalue() == ""
    with working(True, "verifying k", console=console, delay_s=0.01):
        time.sleep(0.3)
    assert "verifying k" in out.getvalue()
    console, out = _console(False)
    with working(True, "verifying k", console=console, delay_s=0.0):
        time.sleep(0.05)
    assert out.getvalue() == ""


def test_verify_reports_each_property_in_order_and_the_analysis_ops() -> None:
    ref = resolve_kernel("mesh_mlo_1d")
    schedule = trace(ref, build_launch(ref, LaunchOptions(pes=4)))
    seen: list[VerifyProgress] = []
    verify(schedule, VerifyConfig(progress=seen.append))
    starts = [p for p in seen if p.ops_total == 0]
    assert {p.prop for p in starts} == set(Property)
    assert [p.index for p in starts] == list(range(len(Property)))
    assert all(p.count == len(Property) for p in seen)
    ops = [p for p in seen if p.ops_total]
    assert ops and ops[-1].ops_done == ops[-1].ops_total == sum(
        len(prog.ops) for prog in schedule.programs)
    assert [p.ops_done for p in ops] == sorted(p.ops_done for p in ops)
    # the progress sink is not part of what is verified
    assert VerifyConfig(progress=seen.append) == VerifyConfig()


def test_the_verify_bar_names_the_property_and_counts_ops_on_a_terminal() -> None:
    console, out = _console(True)
    with VerifyBar(True, "verifying k", console=console, delay_s=0.0) as bar:
        time.sleep(0.2)
        assert bar.progress is not None
        bar(VerifyProgress(Property.EXACTLY_ONCE_MERGE, 4, 7, 500, 2000))
        bar.progress.refresh()
        task = bar.progress.tasks[0]
        assert task.total == 2000 and task.completed == 500
        assert "verifying k: exactly_once_merge (5/7)" in out.getvalue()
    assert bar.progress is None
    console, out = _console(False)
    with VerifyBar(True, "verifying k", console=console, delay_s=0.0) as bar:
        time.sleep(0.05)
        bar(VerifyProgress(Property.EXACTLY_ONCE_MERGE, 4, 7, 500, 2000))
    assert out.getvalue() == ""


def test_a_trace_under_a_waiting_bar_is_forked_and_the_bar_still_shows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar's timer stops while the trace forks its child (a fork server would be a
    second start-up), then waits out the rest of its delay."""
    chosen: list[tuple[isolation.StartMethod, int]] = []
    default = isolation.StartMethod.default

    def spy(findable: bool = True) -> isolation.StartMethod:
        method = default(findable)
        chosen.append((method, threading.active_count()))
        return method

    monkeypatch.setattr(isolation.StartMethod, "default", staticmethod(spy))
    ref = resolve_kernel("mesh_mlo_1d")
    launch = build_launch(ref, LaunchOptions(pes=2))
    console, out = _console(True)
    before = threading.active_count()   # a test worker may run threads of its own
    with VerifyBar(True, "verifying k", console=console, delay_s=0.3) as bar:
        isolation.trace_isolated(ref, launch)
        assert threading.active_count() == before + 1    # the timer again, waiting
        time.sleep(0.6)
        assert bar.progress is not None
    assert [count for _, count in chosen] == [before]
    if before == 1:
        assert [method for method, _ in chosen] == [isolation.StartMethod.FORK]
    assert "verifying k: tracing" in out.getvalue()
