"""The deadlock order certificate, checked by Z3 on the second core.

Z3 takes a few microseconds per ground fact, so a 64x64 mesh's six million constraints cost
it tens of seconds; the other properties do not need its answer. `verify` therefore starts
the check in a forked child as soon as the Kahn run is known (`certificate_job`, shared)
and runs deadlock_freedom last, which then reads the child's answer. The child runs the
same `check_order` as the inline path: the verdict is the same either way, only when it is
computed differs. A child that ends without an answer makes the certificate unknown.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
from dataclasses import dataclass

from meshproof.model.trace_split import two_cores
from meshproof.verify.deadlock_encoding import DeadlockModel, OrderConstraints, order_constraints
from meshproof.verify.deadlock_ground import check_order
from meshproof.verify.kahn import progress_at_depth
from meshproof.verify.properties import CheckContext
from meshproof.verify.z3util import Budget, Outcome, SatResult

BACKGROUND_OPS = 100_000   # comm ops from which the certificate is checked in a child
_PR_SET_PDEATHSIG = 1


def order_constraints_at_depth(ctx: CheckContext) -> OrderConstraints:
    """The order certificate's constraints at the judged depth (shared)."""
    return order_constraints(DeadlockModel(ctx.schedule, ctx.channels), ctx.depth)


@dataclass(slots=True)
class CertificateJob:
    """A running check: its process and the pipe its answer comes through."""

    pid: int
    fd: int
    done: bool = False

    def result(self) -> tuple[Outcome, int]:
        """Z3's outcome and the number of chunks (waits for the child)."""
        try:
            with os.fdopen(self.fd, "rb") as fh:
                value, reason, chunks = pickle.load(fh)
        except (EOFError, pickle.UnpicklingError, OSError, ValueError):
            value, reason, chunks = None, "", 0
        _, code = os.waitpid(self.pid, 0)
        self.done = True
        if value is None:
            how = f"signal {os.WTERMSIG(code)}" if os.WIFSIGNALED(code) else \
                f"exit code {os.WEXITSTATUS(code)}"
            return Outcome(SatResult.UNKNOWN, f"the certificate check on the second core "
                           f"ended without an answer ({how})"), chunks
        return Outcome(SatResult(value), reason), chunks

    def cancel(self) -> None:
        if self.done:
            return
        self.done = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def certificate_job(ctx: CheckContext) -> CertificateJob | None:
    """Start checking the order certificate in a child, for large launches that finish
    (shared: started once by `verify`, read by deadlock_freedom); None: check inline."""
    progress = ctx.shared(progress_at_depth)
    if progress.deadlock or ctx.channels.cols.n < BACKGROUND_OPS or not two_cores():
        return None
    return start(ctx.shared(order_constraints_at_depth), progress.stamps, ctx.budget,
                 ctx.channels.cols.start)


def start(cons: OrderConstraints, stamps: object, budget: Budget,
          starts: object = None) -> CertificateJob:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child, measured by the parent's tests
        os.close(read_fd)
        with contextlib.suppress(Exception):  # die with the parent (Linux)
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        try:
            outcome, chunks = check_order(cons, stamps, budget,  # type: ignore[arg-type]
                                          starts=starts)  # type: ignore[arg-type]
            answer = (outcome.result.value, outcome.reason, chunks)
        except BaseException as exc:
            answer = (SatResult.UNKNOWN.value, f"z3 error: {exc}", 0)
        with contextlib.suppress(Exception), os.fdopen(write_fd, "wb") as fh:
            pickle.dump(answer, fh)
        os._exit(0)
    os.close(write_fd)
    return CertificateJob(pid, read_fd)
