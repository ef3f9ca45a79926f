"""Rounding float32 storage to a narrower dtype, keeping float32 storage.

The simulator computes in float32 and keeps every value in float32 arrays; a value whose
dtype is f16 or bf16 holds only numbers that dtype can represent (spec/simulator.md).
Converting through numpy's float16 runs at ~1 GB/s, so large arrays are rounded with
integer bit arithmetic instead (round to nearest, ties to even), in place where allowed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from meshproof.model.schedule import DType

F32 = npt.NDArray[np.float32]

# float32 bit patterns (sign cleared) bounding the f16 normal range: below the smallest
# f16 normal, or at/above 65520 (which rounds to inf), the exact slow path is used.
_F16_LOW_BITS = np.uint32(0x38800000)            # 2**-14
_F16_SPAN = np.uint32(0x477FF000 - 0x38800000)    # 65520 and up round to inf
_ABS_MASK = np.uint32(0x7FFFFFFF)
# Below this many elements numpy's float16 round trip is as fast and obviously exact.
_SMALL = 1 << 12
# Work in cache-sized blocks so the integer temporaries never leave the cache.
_BLOCK = 1 << 16


def round_to(x: F32, dtype: DType, *, inplace: bool = False) -> F32:
    """`x` rounded to `dtype`, as float32. `inplace` may reuse `x`'s memory."""
    if dtype is DType.F32:
        return x
    out = x if inplace and x.flags.writeable and x.flags.c_contiguous else \
        np.array(x, dtype=np.float32, order="C", copy=True)
    flat = out.reshape(-1)
    for start in range(0, flat.size, _BLOCK):
        block = flat[start:start + _BLOCK]
        if dtype is DType.F16:
            _round_f16(block)
        else:
            _round_bf16(block)
    return out


def _round_f16(flat: F32) -> None:
    if flat.size <= _SMALL:
        flat[...] = flat.astype(np.float16).astype(np.float32)
        return
    bits = flat.view(np.uint32)
    # Normal f16 range: round the float32 mantissa to 10 bits (ties to even). The rare
    # subnormal, overflowing, inf and nan values go through numpy's exact conversion.
    offset = bits & _ABS_MASK
    offset -= _F16_LOW_BITS
    special = offset >= _F16_SPAN
    keep = flat[special] if special.any() else None
    lsb = bits >> np.uint32(13)
    lsb &= np.uint32(1)
    lsb += np.uint32(0x0FFF)
    bits += lsb
    bits &= np.uint32(0xFFFFE000)
    if keep is not None:
        with np.errstate(over="ignore"):
            flat[special] = keep.astype(np.float16).astype(np.float32)


def _round_bf16(flat: F32) -> None:
    bits = flat.view(np.uint32)
    nan = np.isnan(flat)
    lsb = bits >> np.uint32(16)
    lsb &= np.uint32(1)
    lsb += np.uint32(0x7FFF)
    bits += lsb
    bits &= np.uint32(0xFFFF0000)
    if nan.any():
        flat[nan] = np.float32(np.nan)
