"""The progress display (cli/progress.py): on a terminal after the delay, else silent."""

from __future__ import annotations

import io
import time

from rich.console import Console

from meshproof.cli.progress import NumericBar, working
from meshproof.sim.config import NumericProgress


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
