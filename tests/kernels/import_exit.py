"""A kernel file that calls sys.exit while being imported."""

from __future__ import annotations

import sys
from typing import Any

sys.exit(0)  # IMPORT-EXIT-LINE


def kernel(x_ptr: Any, *, tl: Any) -> None:
    tl.load(x_ptr, shape=(1,), dtype="f32")
