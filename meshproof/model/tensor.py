"""Symbolic tensors: shape, dtype and a value id; never data.

The class doubles as kernbench's `TensorHandle`: kernel files that build metadata views
with `TensorHandle(id=h.id, shape=new_shape, ...)` get a reshape op recorded instead.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from meshproof.errors import DataDependentControlFlow, ShapeError, UnsupportedOp
from meshproof.model.schedule import DType

if TYPE_CHECKING:
    from meshproof.model.tracer import RankTracer

_DTYPE_ALIASES = {
    "f16": DType.F16, "float16": DType.F16, "fp16": DType.F16, "half": DType.F16,
    "bf16": DType.BF16, "bfloat16": DType.BF16,
    "f32": DType.F32, "float32": DType.F32, "fp32": DType.F32, "float": DType.F32,
}

# Set while a rank is being traced, so that `TensorHandle(...)` built by kernel code can
# find the tracer it belongs to.
_ACTIVE: list[RankTracer] = []


def parse_dtype(value: object) -> DType:
    if isinstance(value, DType):
        return value
    key = getattr(value, "name", value) if not isinstance(value, str) else value
    if isinstance(key, str) and key.lower() in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[key.lower()]
    raise ShapeError(f"unknown dtype {value!r}: use 'f16', 'bf16' or 'f32'")


def normalise_shape(shape: object) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise ShapeError(f"shape must be a tuple of ints, got {shape!r}")
    dims: list[int] = []
    for d in shape:
        if isinstance(d, TensorHandle):
            d.__index__()
        if isinstance(d, np.integer):  # shape arithmetic done in numpy
            d = int(d)
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            raise ShapeError(f"shape must hold non-negative ints, got {tuple(shape)!r}")
        dims.append(int(d))
    return tuple(dims)


class TensorHandle:
    """A symbolic tensor of one rank. Attribute names follow kernbench's TensorHandle."""

    __slots__ = ("_tracer", "addr", "data", "dtype", "id", "nbytes", "pinned", "shape", "space")

    id: int
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    addr: int
    data: None
    space: str
    pinned: bool
    _tracer: RankTracer

    def __init__(self, id: int, addr: int = 0, shape: tuple[int, ...] = (), dtype: Any = "f16",
                 nbytes: int = 0, data: Any = None, space: str = "sram",
                 pinned: bool = False) -> None:
        # Reached only from kernel code: a kernbench metadata view of an existing tensor.
        if not _ACTIVE:
            raise UnsupportedOp("TensorHandle(...) can only be built while meshproof traces "
                                "a kernel (as a view of a tensor the kernel already has)")
        tracer = _ACTIVE[-1]
        view = tracer.view(id, tracer.dims(shape), tracer.dtype(dtype))
        for slot in TensorHandle.__slots__:
            object.__setattr__(self, slot, getattr(view, slot))

    @classmethod
    def make(cls, tracer: RankTracer, vid: int, shape: tuple[int, ...], dtype: DType,
             addr: int = 0) -> TensorHandle:
        self = object.__new__(cls)
        fields = {"_tracer": tracer, "id": vid, "shape": shape, "dtype": dtype.value,
                  "nbytes": math.prod(shape) * dtype.itemsize, "addr": addr, "data": None,
                  "space": "sram", "pinned": False}
        for name, value in fields.items():
            object.__setattr__(self, name, value)
        return self

    # Handles are immutable: assigning `h.shape = ...` would change what the kernel sees
    # without recording an op, so the schedule would silently disagree with the kernel.
    def __setattr__(self, name: str, value: object) -> None:
        raise self._tracer.unsupported(
            f"assigning {name!r} of a tensor handle",
            "build a view with TensorHandle(id=..., shape=...) or use tl.reshape / tl.cast")

    # numpy scalars and arrays defer to our reflected operators (np.float32(2) * t works;
    # an ndarray operand is then rejected by the tracer with a clear message).
    __array_ufunc__ = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dt(self) -> DType:
        return DType(self.dtype)

    def __repr__(self) -> str:
        return f"TensorHandle(id={self.id}, shape={self.shape}, dtype={self.dtype!r})"

    # Arithmetic: numpy broadcasting; Python scalars do not promote the dtype.
    def __add__(self, other: object) -> TensorHandle:
        return self._tracer.binary("add", self, other)

    def __radd__(self, other: object) -> TensorHandle:
        return self._tracer.binary("add", other, self)

    def __sub__(self, other: object) -> TensorHandle:
        return self._tracer.binary("sub", self, other)

    def __rsub__(self, other: object) -> TensorHandle:
        return self._tracer.binary("sub", other, self)

    def __mul__(self, other: object) -> TensorHandle:
        return self._tracer.binary("mul", self, other)

    def __rmul__(self, other: object) -> TensorHandle:
        return self._tracer.binary("mul", other, self)

    def __truediv__(self, other: object) -> TensorHandle:
        return self._tracer.binary("div", self, other)

    def __rtruediv__(self, other: object) -> TensorHandle:
        return self._tracer.binary("div", other, self)

    def __neg__(self) -> TensorHandle:
        return self._tracer.unary("neg", self)

    def __matmul__(self, other: object) -> TensorHandle:
        return self._tracer.tl.dot(self, other)

    @property
    def T(self) -> TensorHandle:
        return self._tracer.tl.trans(self)

    # Anything that needs the tensor's *data* as a Python value cannot be traced.
    def _data_needed(self, what: str) -> NoReturn:
        raise self._tracer.data_dependent(what)

    def __bool__(self) -> bool:
        self._data_needed("uses a tensor's value as a condition (bool(tensor))")

    def __index__(self) -> int:
        self._data_needed("uses a tensor's value as an int")

    def __int__(self) -> int:
        self._data_needed("uses a tensor's value as an int")

    def __float__(self) -> float:
        self._data_needed("uses a tensor's value as a float")

    def __lt__(self, other: object) -> bool:
        self._data_needed("compares tensor data (<)")

    def __le__(self, other: object) -> bool:
        self._data_needed("compares tensor data (<=)")

    def __gt__(self, other: object) -> bool:
        self._data_needed("compares tensor data (>)")

    def __ge__(self, other: object) -> bool:
        self._data_needed("compares tensor data (>=)")

    def __eq__(self, other: object) -> bool:
        self._data_needed("compares tensor data (==)")

    def __ne__(self, other: object) -> bool:
        self._data_needed("compares tensor data (!=)")

    def __hash__(self) -> int:
        return hash((id(self._tracer), self.id))

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def __iter__(self) -> NoReturn:
        raise self._tracer.unsupported("iterating over a tensor",
                                       "use tl.reshape / tl.trans and whole-tensor ops")

    def __getitem__(self, key: object) -> NoReturn:
        raise self._tracer.unsupported("indexing or slicing a tensor",
                                       "load the slice you need with tl.load(ptr + offset, "
                                       "shape=...) or use tl.reshape")


def check_data_free(value: object) -> None:
    """Reject tensors used as op parameters that must be concrete (e.g. axis, shape)."""
    if isinstance(value, TensorHandle):
        raise value._tracer.data_dependent("passes a tensor where a concrete value is needed")


__all__ = ["_ACTIVE", "DataDependentControlFlow", "TensorHandle", "check_data_free",
           "normalise_shape", "parse_dtype"]
