"""Ctrl-C and SIGTERM, remembered until the process exits.

Python raises a signal handler's exception wherever the main thread happens to be. Raised
inside a finaliser (`__del__`) or an at-fork callback (the logging module registers one),
it is "unraisable": printed as "Exception ignored in ...", and lost, so the run would go
on and could end in exit 0 with results written. The CLI's handlers therefore also
`note` the signal here, and every place that commits a result (`outputs.write_bytes`:
reports, caches, JUnit, diagrams; the report's final swap; the CLI's exit code) calls
`check` first, which raises again if a signal was noted.

Only a process that `arm`s it (the console script) remembers: in a long-lived Python
session a Ctrl-C stops the call it interrupts, not every later one.
"""

from __future__ import annotations

import signal

_received: list[int] = []
_armed: list[bool] = []


class Terminated(BaseException):
    """SIGTERM arrived: unwind (children are killed, temporary files removed, nothing is
    cached or written) and exit 143."""


def arm() -> None:
    """Remember signals from now on (the console script calls this once)."""
    _armed[:] = [True]


def note(signum: int) -> None:
    if _armed:
        _received.append(signum)


def received() -> int | None:
    """The first signal noted since `reset`, if any."""
    return _received[0] if _received else None


def reset() -> None:
    _received.clear()


def check() -> None:
    """Raise KeyboardInterrupt (Ctrl-C) or Terminated (SIGTERM) if either was noted."""
    signum = received()
    if signum == signal.SIGTERM:
        raise Terminated
    if signum is not None:
        raise KeyboardInterrupt
