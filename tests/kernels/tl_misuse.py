"""Kernels that use tl ops and tensor handles in ways meshproof must refuse, each next to the
correct idiom it must accept. Used by tests/test_tl_args.py and tests/test_tensor.py; the
`# NAME` markers let the tests find the line each error must point at."""
from __future__ import annotations

from typing import Any

from kernbench.common.pe_commands import TensorHandle


def masked_store(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Stores under a mask that is always False: traced as a plain store, it would be proved."""
    x = tl.load(x_ptr, shape=(4,), dtype="f16")
    tl.store(o_ptr, x, mask=False)  # MASKED-STORE


def masked_load(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """A masked load with a fill value: the kernel reads fewer elements than its shape."""
    x = tl.load(x_ptr, shape=(4,), dtype="f16", mask=None, other=0.0)  # MASKED-LOAD
    tl.store(o_ptr, x)


def positional_mask(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Triton's store(pointer, value, mask) with the mask passed positionally."""
    x = tl.load(x_ptr, shape=(4,), dtype="f16")
    tl.store(o_ptr, x, False)  # POSITIONAL-MASK


def accumulating_dot(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Triton's dot(a, b, acc) with the accumulator passed positionally."""
    a = tl.load(x_ptr, shape=(2, 2), dtype="f16")
    acc = tl.zeros((2, 2), dtype="f32")
    tl.store(o_ptr, tl.dot(a, a, acc))  # POSITIONAL-ACC


def hinted(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Cache hints on load and store: accepted, and they change nothing."""
    x = tl.load(x_ptr, shape=(4,), dtype="f16", cache_modifier=".cg",
                eviction_policy="evict_last")
    tl.store(o_ptr, x, eviction_policy="evict_first", cache_modifier=".wb")


def plain(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """`hinted` without its hints: the schedule both must trace to."""
    x = tl.load(x_ptr, shape=(4,), dtype="f16")
    tl.store(o_ptr, x)


def data_is_none(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """Branches on `handle.data is None`, which kernbench's handles answer with data."""
    x = tl.load(x_ptr, shape=(4,), dtype="f16")
    if x.data is None:  # DATA-IS-NONE
        tl.store(o_ptr, x)


def data_is_none_at_the_end(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """The same branch after the rank's last op: refused when the rank ends."""
    x = tl.load(x_ptr, shape=(4,), dtype="f16")
    tl.store(o_ptr, x)
    if x.data is not None:  # DATA-AT-END
        return


def data_truth(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """`if handle.data:`, refused at once."""
    x = tl.load(x_ptr, shape=(4,), dtype="f16")
    if x.data:  # DATA-TRUTH
        tl.store(o_ptr, x)


def data_view(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    """A kernbench metadata view that copies `data=handle.data`, as the seed kernel does."""
    x = tl.load(x_ptr, shape=(2, 2), dtype="f16")
    flat = TensorHandle(id=x.id, addr=x.addr, shape=(4,), dtype=x.dtype, nbytes=x.nbytes,
                        data=x.data, space=x.space, pinned=x.pinned)
    tl.store(o_ptr, flat)
