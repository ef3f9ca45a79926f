"""Kernels for tracing on two cores (tests/test_trace_split.py): every PE loads, computes a
few ops and stores; one PE may raise, one may die. `# NAME` markers name error lines."""
from __future__ import annotations

import os
from typing import Any


def some_raise(x_ptr: Any, o_ptr: Any, fail_pes: str = "", n: int = 8, *, tl: Any) -> None:
    """Raises on the PEs listed in `fail_pes` ("3,12"), after `n` ops."""
    pe = tl.program_id(axis=0)
    x = tl.load(x_ptr, shape=(4,), dtype="f32")
    for _ in range(n):
        x = x * 2.0 + 1.0
    if str(pe) in fail_pes.split(","):
        raise ValueError(f"pe {pe} gives up")  # SPLIT-RAISE
    tl.store(o_ptr, x)


def dies(x_ptr: Any, o_ptr: Any, die_pe: int = -1, *, tl: Any) -> None:
    """Ends its process without a word on PE `die_pe`."""
    x = tl.load(x_ptr, shape=(4,), dtype="f32")
    if tl.program_id(axis=0) == die_pe:
        os._exit(3)
    tl.store(o_ptr, x * 2.0)
