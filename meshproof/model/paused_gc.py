"""The cyclic garbage collector paused while a trace or an op pack builds millions of
acyclic records: it would rescan the growing heap again and again for nothing (a quarter
of a 32x32 trace)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
