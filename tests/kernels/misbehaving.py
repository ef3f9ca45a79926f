"""Kernels that misbehave in ways a traced kernel must not get away with."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any


def exits_zero(x_ptr: Any, *, tl: Any) -> None:
    """Calls sys.exit(0): must not become meshproof's (all proved) exit code."""
    tl.load(x_ptr, shape=(1,), dtype="f32")
    sys.exit(0)  # EXIT-LINE


def broken_str(x_ptr: Any, *, tl: Any) -> None:
    """Raises an exception whose str() itself raises."""

    class Weird(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    raise Weird()  # WEIRD-LINE


def generator(x_ptr: Any, *, tl: Any) -> Iterator[Any]:
    """A generator: calling it runs none of its body."""
    yield tl.load(x_ptr, shape=(1,), dtype="f32")


def probes_for_ops(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Feature-detects ops the way portable kernels do."""
    x = tl.load(x_ptr, shape=(4,), dtype="f32")
    if not hasattr(tl, "atomic_add") and getattr(tl, "cumsum", None) is None:
        x = x * 2.0
    tl.store(o_ptr, x)


def float_axis(x_ptr: Any, *, tl: Any) -> None:
    """program_id with a float axis."""
    tl.load(x_ptr + tl.program_id(axis=1.0), shape=(1,), dtype="f32")  # AXIS-LINE


def traced_twice(kernel: Callable[..., None]) -> Callable[..., None]:
    """A decorator in this file (decorated.py uses it): runs the kernel as is."""

    @functools.wraps(kernel)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        kernel(*args, **kwargs)  # WRAPPER-LINE

    return wrapper
