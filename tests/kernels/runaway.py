"""Kernels whose host code misbehaves: loops that never end, sleeps, memory hogs, crashes.

Traced only in a child process (tests/test_isolation.py): in-process, most of them would
hang or take down the test run. `# NAME` markers name the lines errors must point at.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any


def endless(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """The issue's never-ending host loop between two ops."""
    x = tl.load(x_ptr, shape=(4,), dtype="f16")
    n = 0
    while n >= 0:  # ENDLESS
        n += 1
    tl.store(o_ptr, x)


def sleeps(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Waits forever without using CPU: only the wall clock ends it."""
    tl.load(x_ptr, shape=(4,), dtype="f16")
    time.sleep(3600)  # SLEEPS


def swallows_the_stop(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Catches everything, the stop request included: the parent must kill it."""
    tl.load(x_ptr, shape=(4,), dtype="f16")
    while True:
        try:
            while True:
                pass
        except BaseException:  # the point of this kernel
            pass


def stuck_in_c(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Loops inside one C call, where no Python signal handler runs."""
    tl.load(x_ptr, shape=(4,), dtype="f16")
    sum(range(10**13))


def spins_ignoring_sigxcpu(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Ignores the soft CPU limit's signal: the hard limit kills it."""
    signal.signal(signal.SIGXCPU, signal.SIG_IGN)
    tl.load(x_ptr, shape=(4,), dtype="f16")
    sum(range(10**13))


def hogs_memory(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Allocates without bound."""
    tl.load(x_ptr, shape=(4,), dtype="f16")
    blocks = []
    while True:
        blocks.append(bytearray(64 << 20))  # HOGS


def exits(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Ends the process under the tracer."""
    os._exit(3)


def crashes(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Dies of a signal, as a crash in C code would."""
    os.kill(os.getpid(), signal.SIGSEGV)


def killed(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Killed outright, as the out-of-memory killer would."""
    os.kill(os.getpid(), signal.SIGKILL)


def reads_stdin_and_cwd(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Records what it sees: stdin's first line (length) and where it writes files."""
    line = sys.stdin.readline()
    with open("kernel_was_here.txt", "w", encoding="utf-8") as out:
        out.write(os.getcwd())
    report = os.environ.get("MESHPROOF_TEST_REPORT")
    if report:
        with open(report, "w", encoding="utf-8") as out:
            out.write(f"{len(line)} {os.getcwd()}")
    x = tl.load(x_ptr, shape=(4,), dtype="f16")
    tl.store(o_ptr, x)


def waits_for_ctrl_c(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Writes its pid where the test says, then spins until killed."""
    with open(os.environ["MESHPROOF_TEST_PIDFILE"], "w", encoding="utf-8") as out:
        out.write(str(os.getpid()))
    tl.load(x_ptr, shape=(4,), dtype="f16")
    while True:
        pass


def many_ops(x_ptr: Any, o_ptr: Any, n: int = 10, *, tl: Any) -> None:
    """n additions: a runaway loop of ops when n is large."""
    x = tl.load(x_ptr, shape=(4,), dtype="f16")
    for _ in range(n):
        x = x + 1.0  # MANY-OPS
    tl.store(o_ptr, x)
