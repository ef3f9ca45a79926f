"""Progress on long work: a rich progress bar on stderr, for a person at a terminal.

Shown only when stderr is a terminal, never under `--json`, and only once the work has
run for `DELAY_S` seconds (short commands print exactly what they printed before). It is
transient: when the work ends (or is interrupted: Ctrl-C still exits 130 and nothing is
written) the bar is erased, so the command's own output follows as usual.

- `NumericBar`: `meshproof simulate` — K/V bytes (counted as f16) done of all, groups
  done, rate and time left, fed by `SimConfig.progress`; several launches at once run one
  after another and fill one bar.
- `VerifyBar`: `meshproof verify` — the property being checked (k of n) and, while the
  semantic analysis runs, its ops done of all, rate and time left, fed by
  `VerifyConfig.progress`; before the first property (tracing) a spinner and the time.
- `working`: an elapsed-time display for work that reports no progress.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from types import TracebackType
from typing import TYPE_CHECKING

from meshproof.model.isolation import threads_paused_for_fork
from meshproof.verify.properties import VerifyProgress

if TYPE_CHECKING:  # rich's progress module is imported when a bar is first shown
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from meshproof.sim.config import NumericProgress

DELAY_S = 2.0


def _nothing() -> None:
    """Resumes nothing (a display with no thread to pause)."""


def _console(console: Console | None) -> Console:
    from rich.console import Console

    return console if console is not None else Console(stderr=True)


class NumericBar:
    """The progress sink of a numeric run (pass it as `SimConfig.progress`); a context
    manager that removes the bar at the end. `runs`: simulate calls expected (launches
    of a deployment), each reporting its own totals."""

    def __init__(self, enabled: bool, label: str, runs: int = 1, *,
                 console: Console | None = None, delay_s: float = DELAY_S) -> None:
        self.console = _console(console)
        self.enabled = enabled and self.console.is_terminal
        self.label = label
        self.runs = max(1, runs)
        self.delay_s = delay_s
        self.start = time.monotonic()
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self._offset = 0          # bytes of the runs already finished
        self._run = 0
        from meshproof.sim.config import NumericProgress  # a simulate run's: verify's bar is not

        self._last = NumericProgress(0, 0, 0, 0)

    def __enter__(self) -> NumericBar:
        self.start = time.monotonic()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def __call__(self, p: NumericProgress) -> None:
        if not self.enabled:
            return
        last = self._last
        if p.done_bytes < last.done_bytes or p.groups_done < last.groups_done:
            self._offset += last.total_bytes   # the next launch started
            self._run += 1
        self._last = p
        if self.progress is None:
            if time.monotonic() - self.start < self.delay_s or self._finished(p):
                return
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
                TransferSpeedColumn(), TextColumn("{task.fields[groups]}"),
                TimeRemainingColumn(), console=self.console, transient=True)
            self.task = self.progress.add_task(self.label, total=None, groups="")
            self.progress.start()
        assert self.task is not None
        left = max(0, self.runs - self._run - 1)
        total = self._offset + p.total_bytes * (1 + left)
        launch = f"launch {self._run + 1}/{self.runs}, " if self.runs > 1 else ""
        self.progress.update(self.task, total=total, completed=self._offset + p.done_bytes,
                             groups=f"{launch}groups {p.groups_done}/{p.groups_total}")
        if self._finished(p):  # the numerics are done: clear the way for the output
            self.progress.stop()
            self.progress = None
            self.enabled = False

    def _finished(self, p: NumericProgress) -> bool:
        return self._run == self.runs - 1 and p.groups_done == p.groups_total


class VerifyBar:
    """The progress sink of a verify run (pass it as `VerifyConfig.progress`); a context
    manager that shows the bar from `delay_s` on (a timer: tracing and Z3 report nothing
    while they run) and removes it at the end."""

    def __init__(self, enabled: bool, label: str, *, console: Console | None = None,
                 delay_s: float = DELAY_S) -> None:
        self.console = _console(console)
        self.enabled = enabled and self.console.is_terminal
        self.label = label
        self.delay_s = delay_s
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._done = False
        self._last: VerifyProgress | None = None
        self._entered = 0.0
        self._stack = ExitStack()

    def __enter__(self) -> VerifyBar:
        if self.enabled:
            self._entered = time.monotonic()
            self._start_timer(self.delay_s)
            self._stack.enter_context(threads_paused_for_fork(self._pause))
        return self

    def _start_timer(self, delay_s: float) -> None:
        self._timer = threading.Timer(delay_s, self._show)
        self._timer.daemon = True
        self._timer.start()

    def _pause(self) -> Callable[[], None]:
        """Stop the waiting timer while a trace forks its child (model/isolation.py), so
        that the child is forked rather than started by a fork server (a second
        start-up); return what restarts it. Once the bar shows, rich runs a thread of its
        own: nothing is paused, and the trace uses the fork server, as it always did."""
        timer = self._timer
        if timer is None or self.progress is not None:
            return _nothing
        timer.cancel()
        timer.join()
        if self.progress is not None:  # it fired meanwhile
            return _nothing

        def resume() -> None:
            if not self._done:
                self._start_timer(max(0.0, self.delay_s - (time.monotonic() - self._entered)))

        return resume

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stack.close()
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._done = True
            if self.progress is not None:
                self.progress.stop()
                self.progress = None

    def _show(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        with self._lock:
            if self._done or self.progress is not None:
                return
            self.progress = Progress(
                SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                MofNCompleteColumn(), TextColumn("ops"), TimeElapsedColumn(),
                TimeRemainingColumn(), console=self.console, transient=True)
            self.task = self.progress.add_task(self._describe(), total=None)
            self._update()
            self.progress.start()

    def _describe(self) -> str:
        p = self._last
        if p is None:
            return f"{self.label}: tracing"
        return f"{self.label}: {p.prop.value} ({p.index + 1}/{p.count})"

    def _update(self) -> None:
        if self.progress is None or self.task is None:
            return
        p = self._last
        known = p is not None and p.ops_total > 0
        self.progress.update(self.task, description=self._describe(),
                             total=p.ops_total if known and p else None,
                             completed=p.ops_done if known and p else 0)

    def __call__(self, p: VerifyProgress) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._last = p
            self._update()


@contextmanager
def working(enabled: bool, label: str, *, console: Console | None = None,
            delay_s: float = DELAY_S) -> Iterator[None]:
    """An elapsed-time spinner on stderr while the body runs, from `delay_s` on."""
    out = _console(console)
    if not (enabled and out.is_terminal):
        yield
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    progress = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"),
                        TimeElapsedColumn(), console=out, transient=True)
    progress.add_task(label, total=None)
    lock = threading.Lock()
    state = {"started": False, "done": False}

    def show() -> None:
        with lock:
            if not state["done"]:
                progress.start()
                state["started"] = True

    entered = time.monotonic()
    timers = [threading.Timer(delay_s, show)]
    timers[0].daemon = True
    timers[0].start()

    def pause() -> Callable[[], None]:
        # as VerifyBar._pause: only a timer still waiting stops for a trace's fork
        if state["started"]:
            return _nothing
        timers[-1].cancel()
        timers[-1].join()
        if state["started"]:
            return _nothing

        def resume() -> None:
            if not state["done"]:
                again = threading.Timer(max(0.0, delay_s - (time.monotonic() - entered)), show)
                again.daemon = True
                timers.append(again)
                again.start()

        return resume

    try:
        with threads_paused_for_fork(pause):
            yield
    finally:
        for timer in timers:
            timer.cancel()
        with lock:
            state["done"] = True
            if state["started"]:
                progress.stop()
