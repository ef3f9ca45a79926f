"""A rank's loads and stores on its batched memory (one flat float32 buffer per pointer,
a leading batch axis): what `GroupEvaluator` (numerics.py) runs for `load` and `store`.

A load of K or V, which the harness generates (`Generated`), yields a `Streamed` value
when the plan streams it (stream_plan.py), and rows of the generator otherwise. A store
copies: the value stored is never shared with the buffer, and a buffer shared between ranks
(the harness's Q) is copied before a rank writes it.
"""

from __future__ import annotations

import math

import numpy as np

from meshproof.errors import HarnessError
from meshproof.model.schedule import DType, Op
from meshproof.sim.harness import Buffer, Generated, Memory
from meshproof.sim.rounding import F32, round_to
from meshproof.sim.streamed import Streamed


def load(mem: Memory, op: Op, batch: int, where: str, streams: bool) -> F32 | Streamed:
    """The value `op` loads; `where` names the op and rank in errors, `streams`: the plan
    keeps it streamed."""
    assert op.ptr is not None
    buf = mem.get(op.ptr)
    if buf is None:
        raise HarnessError(
            f"{where}: error: load from {op.ptr}, which the harness does not "
            f"provide and the kernel never stored to (buffers: {', '.join(sorted(mem))}); "
            f"if {op.ptr} holds K or V, name the K and V buffers with --sharded (the "
            f"harness fills the first two with K and V), e.g. --sharded {op.ptr},...")
    n = math.prod(op.shape)
    size = buf.n_elements if isinstance(buf, Generated) else buf.data.shape[1]
    if op.offset + n > size:
        raise HarnessError(
            f"{where}: error: load of {op.ptr}[{op.offset}:{op.offset + n}] "
            f"reads past the harness buffer of {size} elements; check the "
            "shape arguments (S_q, S_kv_per_rank, h_q, h_kv, d_head)")
    if isinstance(buf, Generated):
        if streams:
            lo = buf.row_lo + op.offset // buf.row_elements
            return Streamed(buf.sources, lo, lo + op.shape[0], op.shape, (), op.shape, 0)
        view = buf.elements(op.offset, op.offset + n).reshape(batch, *op.shape)
    else:
        view = buf.data[:, op.offset:op.offset + n].reshape(batch, *op.shape)
    if op.dtype is DType.F32 or buf.dtype is op.dtype:
        return view
    return round_to(view, op.dtype)


def store(mem: Memory, op: Op, value: F32, batch: int, where: str) -> None:
    """Write `value` (already of the op's dtype) at the op's offset, growing scratch
    memory and copying a shared buffer first."""
    assert op.ptr is not None
    n = math.prod(op.shape)
    end = op.offset + n
    buf = mem.get(op.ptr)
    if isinstance(buf, Generated):  # written by the kernel: made whole, then copied
        buf = Buffer(buf.elements(0, buf.n_elements), buf.dtype, shared=False)
    if buf is None:  # a buffer the harness does not provide: scratch memory
        data = np.full((batch, end), np.nan, np.float32)
        buf = Buffer(data, op.dtype, shared=False, fixed=False)
    elif end > buf.data.shape[1]:
        if buf.fixed:
            raise HarnessError(
                f"{where}: error: store to {op.ptr}[{op.offset}:{end}] "
                f"writes past the harness buffer of {buf.data.shape[1]} elements; check "
                "the shape arguments (S_q, h_q, d_head)")
        data = np.full((batch, end), np.nan, np.float32)
        data[:, :buf.data.shape[1]] = buf.data
        buf = Buffer(data, buf.dtype, shared=False, fixed=False)
    elif buf.shared:  # copy on write: harness inputs are shared between ranks
        buf = Buffer(buf.data.copy(), buf.dtype, shared=False, fixed=buf.fixed)
    if buf.dtype is not op.dtype:  # mixed contents: loads must round again
        buf = Buffer(buf.data, DType.F32, shared=False, fixed=buf.fixed)
    buf.data[:, op.offset:end] = value.reshape(batch, n)
    mem[op.ptr] = buf
