"""Machine constants: a Python scalar as the machine holds it in a dtype.

A value that depends on no input is what the machine holds (spec/semantics.md §2): Python
scalars are f32, results are rounded to the op's dtype (round to nearest even), so a factor
1e-50 is 0 in f32 and 1e-9 is 0 in f16.
"""

from __future__ import annotations

import math

import numpy as np

from meshproof.model.schedule import DType


def machine_value(value: float, dtype: DType) -> float:
    """A Python scalar as the machine holds it in `dtype` (round to nearest even)."""
    if not math.isfinite(value):
        return value
    if dtype is DType.F32:
        with np.errstate(over="ignore"):
            return float(np.float32(value))
    if dtype is DType.F16:
        with np.errstate(over="ignore"):
            return float(np.float16(np.float32(value)))
    bits = int(np.array(np.float32(value)).view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(np.array(bits, dtype=np.uint32).view(np.float32))
