"""Shapes and offsets computed with numpy integers."""

from __future__ import annotations

from typing import Any

import numpy as np


def numpy_shapes(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    rows = np.int64(8) // 4
    x = tl.load(x_ptr + np.int32(4), shape=(rows, np.int64(4)), dtype="f16")
    tl.store(np.int64(2) + o_ptr, x)
