"""The one place meshproof talks to Z3: SMT-LIB queries, bounded solvers, readable names.

Queries are built as SMT-LIB 2 text (`SmtLib`) with commented constraint groups and
parsed by Z3: an order of magnitude faster than Z3's Python API at 16x16 meshes, and the
text is what `--smt2` writes. Every solver call is bounded by a deterministic resource
limit (`rlimit`, same answer on every machine) and a wall-clock timeout (a safety net).
`unknown` is returned as such, with Z3's reason — it is never turned into "proved".
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import z3

from meshproof import interrupts
from meshproof.model.channel_table import OpRef
from meshproof.model.schedule import Schedule

_UINT_MAX = 2**32 - 1


class SatResult(Enum):
    SAT = "sat"
    UNSAT = "unsat"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Budget:
    """A solver call's limits: wall-clock seconds and Z3's deterministic resource limit."""

    timeout_s: float
    rlimit: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a solver call returned (unknown keeps Z3's reason)."""

    result: SatResult
    reason: str
    model: Any = None


def warm() -> None:
    """Create Z3's main context now (~15 ms, which the first solver would pay): the CLI's
    verify runs this while its trace child runs, on the other core."""
    z3.main_ctx()


def new_solver(budget: Budget, logic: str | None = None) -> Any:
    ctx_solver = z3.SolverFor(logic) if logic else z3.Solver()
    # Z3 keeps both as unsigned 32-bit values and silently wraps larger ones (a timeout of
    # 2**32 + 1 ms becomes 1 ms), so clamp instead of wrapping.
    ctx_solver.set("timeout", min(max(1, int(budget.timeout_s * 1000)), _UINT_MAX))
    ctx_solver.set("rlimit", min(max(0, int(budget.rlimit)), _UINT_MAX))
    return ctx_solver


class SmtLib:
    """An SMT-LIB 2 query over integers: declarations, then asserts in labelled groups
    (`; group: LABEL` comments), counted per group for the certificate's wording."""

    def __init__(self, title: str) -> None:
        self.lines: list[str] = [f"; meshproof: {title}", "(set-logic QF_LIA)"]
        self.counts: dict[str, int] = {}
        self._group = ""

    def declare(self, names: list[str]) -> None:
        self.lines += [f"(declare-const {n} Int)" for n in names]

    def group(self, label: str) -> None:
        self._group = label
        self.counts.setdefault(label, 0)
        self.lines.append(f"; group: {label}")

    def comment(self, text: str) -> None:
        self.lines.append(f"; {text}")

    def add(self, term: str) -> None:
        self.counts[self._group] += 1
        self.lines.append(f"(assert {term})")

    def text(self, *, check_sat: bool = True) -> str:
        return "\n".join([*self.lines, *(["(check-sat)", ""] if check_sat else [])])

    def solver(self, budget: Budget) -> Any:
        """A bounded solver holding this query (check it with `check`)."""
        solver = new_solver(budget)
        solver.from_string(self.text())
        return solver


# Z3's reason when Ctrl-C ended a check: Z3 catches SIGINT itself while it solves, so
# Python never sees the KeyboardInterrupt (spec/properties.md, "unknown").
INTERRUPTED_REASON = "interrupted from keyboard"


def check_ground(asserts: list[str], budget: Budget) -> Outcome:
    """Check a conjunction of ground facts (`(assert (> 17 12))` lines) with a bounded
    solver: what an order certificate is once its timestamps are fixed."""
    solver = new_solver(budget, "QF_LIA")
    solver.from_string("\n".join(["(set-logic QF_LIA)", *asserts]))
    return check(solver)


def check(solver: Any) -> Outcome:
    """Run `solver`; a check Ctrl-C ended raises KeyboardInterrupt: an interrupted run is
    not an unknown verdict to print, cache or count as expected, it is no verdict."""
    try:
        with _cancelled_by_sigterm(solver):
            result = solver.check()
    except z3.Z3Exception as exc:  # e.g. resource limits hit inside a tactic
        return Outcome(SatResult.UNKNOWN, f"z3 error: {exc}")
    if result == z3.sat:
        return Outcome(SatResult.SAT, "", solver.model())
    if result == z3.unsat:
        return Outcome(SatResult.UNSAT, "")
    reason = str(solver.reason_unknown())
    if reason == INTERRUPTED_REASON:
        interrupts.note(signal.SIGINT)
        raise KeyboardInterrupt
    return Outcome(SatResult.UNKNOWN, reason)


@contextlib.contextmanager
def _cancelled_by_sigterm(solver: Any) -> Iterator[None]:
    """While Z3 solves, a Python signal handler cannot run: SIGTERM (the CLI's handler
    raises Terminated) would wait for the check to end, up to its whole timeout. So,
    when Python handles SIGTERM, a watcher thread hears it through the wakeup fd and
    interrupts Z3, after which the handler runs at once."""
    if not callable(signal.getsignal(signal.SIGTERM)) or \
            threading.current_thread() is not threading.main_thread():
        yield
        return
    heard, wake = os.pipe()
    stop_heard, stop = os.pipe()
    os.set_blocking(wake, False)
    previous = signal.set_wakeup_fd(wake, warn_on_full_buffer=False)

    def watch() -> None:
        while True:
            ready, _, _ = select.select([heard, stop_heard], [], [])
            if stop_heard in ready:
                return
            if signal.SIGTERM in os.read(heard, 64):
                solver.ctx.interrupt()
                return

    watcher = threading.Thread(target=watch, name="meshproof-sigterm", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        os.write(stop, b"x")
        watcher.join()
        signal.set_wakeup_fd(previous)
        for fd in (heard, wake, stop_heard, stop):
            os.close(fd)


def leave_ctrl_c_to_the_caller() -> None:
    """Z3 stops answering SIGINT itself (for worker processes whose parent handles Ctrl-C
    and ends them)."""
    z3.set_param("ctrl_c", False)


def op_var_name(schedule: Schedule, ref: OpRef, prefix: str = "t") -> str:
    ep = schedule.programs[ref.rank].endpoint
    return f"{prefix}_c{ep.cube}p{ep.pe}_op{ref.op}"


def rank_var_name(schedule: Schedule, rank: int, prefix: str) -> str:
    ep = schedule.programs[rank].endpoint
    return f"{prefix}_c{ep.cube}p{ep.pe}"
