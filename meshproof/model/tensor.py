"""Symbolic tensors: shape, dtype and a value id; never data.

The class doubles as kernbench's `TensorHandle`: kernel files that build metadata views
with `TensorHandle(id=h.id, shape=new_shape, ...)` get a reshape op recorded instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import numpy as np

from meshproof.errors import DataDependentControlFlow, ShapeError, UnsupportedOp
from meshproof.model.schedule import DType, SourceLoc

_DTYPE_ALIASES = {
    "f16": DType.F16, "float16": DType.F16, "fp16": DType.F16, "half": DType.F16,
    "bf16": DType.BF16, "bfloat16": DType.BF16,
    "f32": DType.F32, "float32": DType.F32, "fp32": DType.F32, "float": DType.F32,
}

_ITEMSIZE = {d: d.itemsize for d in DType}



class _TensorOps(Protocol):
    """The ops of the `tl` namespace a handle's operators call (`a @ b`, `a.T`)."""

    def dot(self, a: object, b: object, /) -> TensorHandle: ...

    def trans(self, x: object, /) -> TensorHandle: ...


class Tracing(Protocol):
    """What a handle needs of the rank tracer that made it (model/tracer.py's RankTracer):
    written here, so that this module, which the tracer imports, does not import it."""

    masks: dict[int, str]

    @property
    def tl(self) -> _TensorOps: ...

    def binary(self, name: str, a: object, b: object) -> TensorHandle: ...

    def unary(self, name: str, x: object) -> TensorHandle: ...

    def compare(self, name: str, symbol: str, a: object, b: object) -> TensorHandle: ...

    def view(self, vid: object, shape: tuple[int, ...], dtype: DType) -> TensorHandle: ...

    def dims(self, shape: object) -> tuple[int, ...]: ...

    def dtype(self, value: object) -> DType: ...

    def read_data(self) -> TensorData: ...

    def unsupported(self, what: str, fix: str, *, probe: bool = False) -> UnsupportedOp: ...

    def shape_error(self, what: str) -> ShapeError: ...

    def data_dependent(self, what: str, at: SourceLoc | None = None
                       ) -> DataDependentControlFlow: ...


# Set while a rank is being traced, so that `TensorHandle(...)` built by kernel code can
# find the tracer it belongs to.
_ACTIVE: list[Tracing] = []


@dataclass(frozen=True, slots=True)
class Pointer:
    """A kernel's `*_ptr` argument: a named per-rank buffer, plus an element offset."""

    name: str
    offset: int = 0

    def __add__(self, other: object) -> Pointer:
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            return Pointer(self.name, self.offset + int(other))
        return NotImplemented

    __radd__ = __add__

    def __repr__(self) -> str:
        return f"<{self.name}{self.offset:+d}>" if self.offset else f"<{self.name}>"


def parse_dtype(value: object) -> DType:
    if isinstance(value, DType):
        return value
    key = getattr(value, "name", value) if not isinstance(value, str) else value
    if isinstance(key, str) and key.lower() in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[key.lower()]
    raise ShapeError(f"unknown dtype {value!r}: use 'f16', 'bf16' or 'f32'")


def promote(dtypes: list[DType]) -> DType:
    """The result dtype of tensor operands (spec/tl.md §4): theirs if all agree, else f32."""
    unique = set(dtypes)
    if len(unique) == 1:
        return dtypes[0]
    return DType.F32


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

    __slots__ = ("_tracer", "addr", "dtype", "id", "nbytes", "pinned", "shape", "space")

    id: int
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    addr: int
    space: str
    pinned: bool
    _tracer: Tracing

    def __init__(self, id: int, addr: int = 0, shape: tuple[int, ...] = (), dtype: Any = "f16",
                 nbytes: int = 0, data: Any = None, space: str = "sram",
                 pinned: bool = False) -> None:
        # Reached only from kernel code: a kernbench metadata view of an existing tensor.
        if not _ACTIVE:
            raise UnsupportedOp("TensorHandle(...) can only be built while meshproof traces "
                                "a kernel (as a view of a tensor the kernel already has)")
        tracer = _ACTIVE[-1]
        if data is not None:
            if not isinstance(data, TensorData) or data._tracer is not tracer:
                raise tracer.unsupported(
                    f"TensorHandle(data=<{type(data).__name__}>)",
                    "meshproof's tensors carry no data: pass data=handle.data of a tensor "
                    "this rank has, or leave data out")
            data._consumed = True
        view = tracer.view(id, tracer.dims(shape), tracer.dtype(dtype))
        for slot in TensorHandle.__slots__:
            object.__setattr__(self, slot, getattr(view, slot))

    @classmethod
    def make(cls, tracer: Tracing, vid: int, shape: tuple[int, ...], dtype: DType,
             addr: int = 0) -> TensorHandle:
        self = object.__new__(cls)
        put = object.__setattr__  # one call per slot: this runs once per traced op
        put(self, "_tracer", tracer)
        put(self, "id", vid)
        put(self, "shape", shape)
        put(self, "dtype", dtype._value_)
        put(self, "nbytes", math.prod(shape) * _ITEMSIZE[dtype])
        put(self, "addr", addr)
        put(self, "space", "sram")
        put(self, "pinned", False)
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
    def data(self) -> TensorData:
        """There is no data while tracing: a stand-in that only `TensorHandle(data=...)`
        accepts (see TensorData)."""
        return self._tracer.read_data()

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
        symbol = self._tracer.masks.get(self.id)
        if symbol is not None:
            self._data_needed(f"compares tensor data ({symbol}) and uses the mask as a "
                              "condition (bool(tensor))")
        self._data_needed("uses a tensor's value as a condition (bool(tensor))")

    def __index__(self) -> int:
        self._data_needed("uses a tensor's value as an int")

    def __int__(self) -> int:
        self._data_needed("uses a tensor's value as an int")

    def __float__(self) -> float:
        self._data_needed("uses a tensor's value as a float")

    # Comparisons make masks (spec/tl.md §4): an f32 tensor of 1.0 and 0.0 for tl.where.
    # Branching on one is still refused (__bool__ above).
    def __lt__(self, other: object) -> TensorHandle:
        return self._tracer.compare("lt", "<", self, other)

    def __le__(self, other: object) -> TensorHandle:
        return self._tracer.compare("le", "<=", self, other)

    def __gt__(self, other: object) -> TensorHandle:
        return self._tracer.compare("gt", ">", self, other)

    def __ge__(self, other: object) -> TensorHandle:
        return self._tracer.compare("ge", ">=", self, other)

    # == and != with what is neither a tensor nor a number (None, a string) fall back to
    # identity, as for any Python object: a handle is never equal to those
    def __eq__(self, other: object) -> TensorHandle:  # type: ignore[override]
        if not isinstance(other, (TensorHandle, int, float, np.floating, np.integer)):
            return NotImplemented
        return self._tracer.compare("eq", "==", self, other)

    def __ne__(self, other: object) -> TensorHandle:  # type: ignore[override]
        if not isinstance(other, (TensorHandle, int, float, np.floating, np.integer)):
            return NotImplemented
        return self._tracer.compare("ne", "!=", self, other)

    def __hash__(self) -> int:
        return hash((id(self._tracer), self.id))

    def __len__(self) -> int:
        if not self.shape:
            # numpy and Triton raise here; 0 would silently skip a `range(len(t))` loop
            raise self._tracer.shape_error("len() of a 0-d tensor: it has no length; use "
                                           "its shape, which is ()")
        return self.shape[0]

    def __iter__(self) -> NoReturn:
        raise self._tracer.unsupported("iterating over a tensor",
                                       "use tl.reshape / tl.trans and whole-tensor ops")

    def __getitem__(self, key: object) -> NoReturn:
        raise self._tracer.unsupported("indexing or slicing a tensor",
                                       "take a run of its elements with tl.view(x, offset, "
                                       "shape), load the slice you need with "
                                       "tl.load(ptr + offset, shape=...) or use tl.reshape")


class TensorData:
    """What `handle.data` gives while tracing: a stand-in for data that does not exist.

    Its one use is to be handed back to `TensorHandle(data=...)`, as kernbench's metadata
    views do. Any other use raises DataDependentControlFlow: at once where Python lets the
    stand-in see it (truth value, comparison, arithmetic, len, iteration, indexing, an
    attribute, str, numpy conversion, ...), and otherwise (`if h.data is None:`, which no
    object can intercept) when the rank records its next op or ends while the stand-in was
    never handed to a view. So no branch on tensor data is taken silently.
    """

    __slots__ = ("_consumed", "_read_at", "_tracer")

    _tracer: Tracing
    _read_at: SourceLoc
    _consumed: bool

    def __init__(self, tracer: Tracing, read_at: SourceLoc) -> None:
        object.__setattr__(self, "_tracer", tracer)
        object.__setattr__(self, "_read_at", read_at)
        object.__setattr__(self, "_consumed", False)

    def _used(self, how: str) -> NoReturn:
        raise self._tracer.data_dependent(f"uses a tensor's data (handle.data) as a value "
                                          f"({how})")

    def __getattr__(self, name: str) -> NoReturn:
        # numpy probes __array_struct__ / __array_interface__ before __array__
        self._used("a numpy array" if name.startswith("__array") else f".{name}")

    def __setattr__(self, name: str, value: object) -> None:
        if name == "_consumed":  # only TensorHandle(data=...) sets it
            object.__setattr__(self, name, value)
            return
        self._used(f".{name} = ...")

    __hash__ = None  # type: ignore[assignment]  # as a dict key it would be compared


def _refuse_use(how: str) -> Callable[..., NoReturn]:
    def use(self: TensorData, *_: object, **__: object) -> NoReturn:
        self._used(how)
    return use


_DATA_USES = {
    "__bool__": "a condition", "__len__": "len", "__iter__": "iteration",
    "__contains__": "in", "__getitem__": "indexing", "__setitem__": "indexing",
    "__index__": "an int", "__int__": "an int", "__float__": "a float",
    "__complex__": "a complex", "__round__": "round", "__abs__": "abs", "__neg__": "-",
    "__pos__": "+", "__invert__": "~", "__lt__": "<", "__le__": "<=", "__gt__": ">",
    "__ge__": ">=", "__eq__": "==", "__ne__": "!=", "__call__": "a call", "__str__": "str",
    "__repr__": "repr", "__format__": "format", "__array__": "a numpy array",
    "__reduce_ex__": "pickling or copying", "__reduce__": "pickling or copying",
    "__copy__": "copying", "__deepcopy__": "copying",
}
for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
            "xor", "lshift", "rshift", "divmod"):
    _DATA_USES[f"__{_op}__"] = _DATA_USES[f"__r{_op}__"] = f"{_op} arithmetic"
for _name, _how in _DATA_USES.items():
    setattr(TensorData, _name, _refuse_use(_how))


def check_data_free(value: object) -> None:
    """Reject tensors used as op parameters that must be concrete (e.g. axis, shape)."""
    if isinstance(value, TensorHandle):
        raise value._tracer.data_dependent("passes a tensor where a concrete value is needed")
    if isinstance(value, TensorData):
        value._used("a concrete op parameter")


__all__ = ["_ACTIVE", "DataDependentControlFlow", "Pointer", "TensorData", "TensorHandle",
           "Tracing", "check_data_free", "normalise_shape", "parse_dtype", "promote"]
