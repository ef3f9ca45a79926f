"""model/budget.py: a launch traces as many ops as fit in memory, not a fixed count."""

from __future__ import annotations

import pytest

from meshproof.model import budget
from meshproof.model.budget import BYTES_PER_OP, OpBudget, available_bytes, size_text


def test_a_launch_may_trace_what_fits_in_the_memory_available(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "available_bytes", lambda: 10_000 * BYTES_PER_OP + 7)
    b = OpBudget.for_launch(8)
    assert (b.limit, b.remaining, b.ranks) == (10_000, 10_000, 8)
    b.finished_rank(2_500)
    assert b.remaining == 7_500


def test_below_an_address_space_limit_only_what_is_left_counts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a traced child runs under TraceLimits.memory_mb (RLIMIT_AS): the machine's free
    # memory is not what it can use
    monkeypatch.setattr(budget, "_meminfo_available", lambda: 1 << 40)
    monkeypatch.setattr(budget, "_address_space", lambda: 3 << 30)
    monkeypatch.setattr(budget.resource, "getrlimit", lambda _: (4 << 30, 4 << 30))
    assert available_bytes() == 1 << 30
    assert OpBudget.for_launch(4).limit == (1 << 30) // BYTES_PER_OP
    monkeypatch.setattr(budget, "_address_space", lambda: 5 << 30)  # already past it
    assert available_bytes() == 0
    assert OpBudget.for_launch(4).limit == 1


def test_the_refusal_says_what_the_whole_launch_needs() -> None:
    b = OpBudget(limit=1000, available=1000 * BYTES_PER_OP, ranks=64)
    b.finished_rank(400)
    b.finished_rank(400)
    # the third rank crosses the line at its 200th op: ~333 ops a rank, 64 ranks
    message = b.exceeded(200)
    assert message.startswith(f"the launch traced more than 1000 ops, all that fit in the "
                              f"{size_text(1000 * BYTES_PER_OP)} of memory available "
                              f"({BYTES_PER_OP} bytes per op to trace and verify)")
    assert "its 64 rank(s) need at least 21333 ops" in message
    assert message.endswith("shrink the launch (--system, --cubes, --pes) or the kernel's "
                            "shapes and loop counts, or free memory")


def test_sizes_read_in_the_unit_that_fits() -> None:
    assert [size_text(n) for n in (512, 5 << 20, 3 << 30)] == ["0 KiB", "5.0 MiB", "3.0 GiB"]
