"""A kernel written the kernbench way: it imports kernbench's TensorHandle and builds
metadata views with it. meshproof must trace this file unmodified.

`line_allreduce_kernel`: every rank on a line of n_ranks PEs holds one (rows, cols) block;
the ranks all-reduce (sum) the blocks with a bidirectional fan-out, like the attention
kernels, and store the result. The views reshape the block between 2D and 1D.
"""
from __future__ import annotations

from kernbench.common.pe_commands import TensorHandle


def _view(handle: TensorHandle, new_shape: tuple[int, ...]) -> TensorHandle:
    """Reshape: metadata only (same id, new shape)."""
    return TensorHandle(  # VIEW-LINE
        id=handle.id,
        addr=handle.addr,
        shape=new_shape,
        dtype=handle.dtype,
        nbytes=handle.nbytes,
        data=handle.data,
        space=handle.space,
        pinned=handle.pinned,
    )


def line_allreduce_kernel(
    x_ptr: int,
    o_ptr: int,
    rows: int,
    cols: int,
    n_ranks: int,
    *,
    tl,
) -> None:
    """Sum-all-reduce of one (rows, cols) f16 block per rank over a line of PEs."""
    rank = tl.program_id(axis=0)
    if rank >= n_ranks:
        return
    has_e = rank < n_ranks - 1
    has_w = rank > 0
    block = tl.load(x_ptr, shape=(rows * cols,), dtype="f16")  # LOAD-LINE
    acc = _view(block, (rows, cols))
    to_e: TensorHandle | None = acc
    to_w: TensorHandle | None = acc
    for step in range(1, n_ranks):
        if has_e and to_e is not None:
            tl.send(dir="E", src=to_e)  # SEND-E-LINE
        if has_w and to_w is not None:
            tl.send(dir="W", src=to_w)  # SEND-W-LINE
        from_w: TensorHandle | None = None
        from_e: TensorHandle | None = None
        if rank - step >= 0:
            from_w = tl.recv(dir="W", shape=(rows, cols), dtype="f16")  # RECV-W-LINE
            acc = acc + from_w
        if rank + step < n_ranks:
            from_e = tl.recv(dir="E", shape=(rows, cols), dtype="f16")  # RECV-E-LINE
            acc = acc + from_e
        to_e, to_w = from_w, from_e
    tl.store(o_ptr, _view(acc, (rows * cols,)))  # STORE-LINE


def lazy_import_kernel(x_ptr: int, o_ptr: int, *, tl) -> None:
    """Imports kernbench inside the kernel body, as some kernel files do."""
    from kernbench.common.pe_commands import TensorHandle as Handle

    x = tl.load(x_ptr, shape=(2, 4), dtype="f16")
    flat = Handle(id=x.id, addr=x.addr, shape=(8,), dtype=x.dtype, nbytes=x.nbytes,
                  data=x.data, space=x.space, pinned=x.pinned)
    tl.store(o_ptr, flat)
