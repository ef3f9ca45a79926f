"""Symbolic execution of one rank: the `tl` object a kernel receives while traced.

Python control flow on program ids and scalars runs concretely; tensors are symbolic.
Every op records the innermost frame in the kernel's own file as its source, so helper
functions defined in that file point at their own lines.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from meshproof.errors import (
    DataDependentControlFlow,
    ShapeError,
    TopologyError,
    TraceError,
    UnsupportedOp,
)
from meshproof.model.schedule import Arg, Const, DType, Op, OpKind, SourceLoc, ValueRef
from meshproof.model.tensor import (
    TensorData,
    TensorHandle,
    check_data_free,
    normalise_shape,
    parse_dtype,
)
from meshproof.model.tl_args import MEMORY_HINTS, tl_op
from meshproof.model.topology import Direction, Endpoint

# A launch that traces more ops than this is a runaway loop or an absurd size: refuse it
# before it eats the machine (the Llama-70B headline panels trace < 100k ops).
MAX_TRACED_OPS = 1_000_000

SUPPORTED_OPS = ("program_id", "num_programs", "load", "store", "dot", "trans", "reshape",
                 "max", "sum", "exp", "log", "softmax", "maximum", "minimum", "cast", "zeros",
                 "full", "send", "recv")


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


@dataclass(frozen=True, slots=True)
class KernelSite:
    """Where the kernel lives, to attribute ops to its lines."""

    real_file: str      # the code object's filename, to match frames
    display_file: str   # what diagnostics print
    def_line: int


def _promote(dtypes: list[DType]) -> DType:
    unique = set(dtypes)
    if len(unique) == 1:
        return dtypes[0]
    return DType.F32


class RankTracer:
    """Records the ops of one endpoint's run of the kernel."""

    def __init__(self, endpoint: Endpoint, grid: tuple[int, int], site: KernelSite,
                 max_ops: int = MAX_TRACED_OPS) -> None:
        self.endpoint = endpoint
        self.grid = grid
        self.site = site
        self.max_ops = max_ops  # what is left of the launch's op budget for this rank
        self.ops: list[Op] = []
        self._defining: dict[int, Op] = {}  # value id -> the op that defined it
        self._next_value = 0
        self._data_reads: list[TensorData] = []  # `handle.data` stand-ins not yet checked
        self.tl = Tl(self)

    # --- bookkeeping -------------------------------------------------------------------
    def source(self) -> SourceLoc:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.site.real_file:
                return SourceLoc(self.site.display_file, frame.f_lineno)
            frame = frame.f_back  # type: ignore[assignment]
        return SourceLoc(self.site.display_file, self.site.def_line)

    def where(self) -> str:
        return f"{self.source()}: rank {self.endpoint.describe()}"

    def data_dependent(self, what: str, at: SourceLoc | None = None) -> DataDependentControlFlow:
        where = self.where() if at is None else f"{at}: rank {self.endpoint.describe()}"
        return DataDependentControlFlow(
            f"{where}: error: the kernel {what}; its schedule would depend on tensor "
            "data, which meshproof refuses to certify - branch only on program ids and "
            "scalar arguments")

    def read_data(self) -> TensorData:
        data = TensorData(self, self.source())
        self._data_reads.append(data)
        return data

    def check_data_reads(self) -> None:
        """Refuse a `handle.data` read that was not handed to `TensorHandle(data=...)`
        before the next op or the end of the rank: it was used in a way no object can
        intercept (`if h.data is None:`), so the run may have branched on tensor data."""
        for data in self._data_reads:
            if not data._consumed:
                raise self.data_dependent("reads a tensor's data (handle.data) other than "
                                          "to pass it to TensorHandle(data=...)",
                                          data._read_at)
        self._data_reads.clear()

    def unsupported(self, what: str, fix: str) -> UnsupportedOp:
        return UnsupportedOp(f"{self.where()}: error: {what} is not supported by meshproof's "
                             f"tl model; {fix}")

    def shape_error(self, what: str) -> ShapeError:
        return ShapeError(f"{self.where()}: error: {what}")

    def dims(self, shape: object) -> tuple[int, ...]:
        """`normalise_shape`, with the kernel's line and rank in the error."""
        try:
            return normalise_shape(shape)
        except ShapeError as exc:
            raise self.shape_error(str(exc)) from None

    def dtype(self, value: object) -> DType:
        """`parse_dtype`, with the kernel's line and rank in the error."""
        try:
            return parse_dtype(value)
        except ShapeError as exc:
            raise self.shape_error(str(exc)) from None

    def pointer(self, ptr: object, op: str) -> Pointer:
        if not isinstance(ptr, Pointer):
            verb = "from" if op == "load" else "to"
            raise self.unsupported(f"tl.{op} {verb} {ptr!r}",
                                   f"{op} {verb} a kernel argument ending in _ptr")
        if ptr.offset < 0:
            raise self.shape_error(f"tl.{op} at {ptr!r}: a negative offset points before the "
                                   "start of the buffer")
        return ptr

    def record(self, kind: OpKind, args: tuple[Arg, ...], shape: tuple[int, ...], dtype: DType,
               *, defines: bool = True, **fields: Any) -> TensorHandle | None:
        if self._data_reads:
            self.check_data_reads()
        if len(self.ops) >= self.max_ops:
            raise TraceError(
                f"{self.where()}: error: the launch traced more than {MAX_TRACED_OPS} ops; "
                "shrink the launch (--system, --cubes, --pes) or the kernel's shapes and loop "
                "counts")
        out = None
        if defines:
            out = self._next_value
            self._next_value += 1
        nbytes = math.prod(shape) * dtype.itemsize
        op = Op(len(self.ops), kind, args, out, shape, dtype, self.source(), nbytes=nbytes,
                **fields)
        self.ops.append(op)
        if out is None:
            return None
        self._defining[out] = op
        return TensorHandle.make(self, out, shape, dtype)

    def defined(self, kind: OpKind, args: tuple[Arg, ...], shape: tuple[int, ...], dtype: DType,
                **fields: Any) -> TensorHandle:
        handle = self.record(kind, args, shape, dtype, **fields)
        assert handle is not None
        return handle

    def tensor(self, value: object, op: str) -> TensorHandle:
        if isinstance(value, TensorHandle):
            if value._tracer is not self:
                raise self.shape_error(f"tl.{op} got a tensor from another rank's trace")
            return value
        raise self.shape_error(f"tl.{op} expects a tensor, got {type(value).__name__}")

    def operand(self, value: object, op: str) -> tuple[Arg, tuple[int, ...], DType | None]:
        if isinstance(value, TensorHandle):
            t = self.tensor(value, op)
            return ValueRef(t.id), t.shape, t.dt
        if isinstance(value, (int, float, np.floating, np.integer)):
            return Const(float(value)), (), None
        raise self.unsupported(f"tl.{op} with an operand of type {type(value).__name__}",
                               "use tensors or Python numbers")

    # --- op families -------------------------------------------------------------------
    def binary(self, name: str, a: object, b: object) -> TensorHandle:
        kind = OpKind(name)
        arg_a, shape_a, dt_a = self.operand(a, name)
        arg_b, shape_b, dt_b = self.operand(b, name)
        dtypes = [d for d in (dt_a, dt_b) if d is not None]
        if not dtypes:
            raise self.shape_error(f"tl.{name} needs at least one tensor operand")
        try:
            shape = tuple(int(d) for d in np.broadcast_shapes(shape_a, shape_b))
        except ValueError:
            raise self.shape_error(f"{name} of shapes {shape_a} and {shape_b} does not "
                                   "broadcast") from None
        return self.defined(kind, (arg_a, arg_b), shape, _promote(dtypes))

    def unary(self, name: str, x: object) -> TensorHandle:
        t = self.tensor(x, name)
        return self.defined(OpKind(name), (ValueRef(t.id),), t.shape, t.dt)

    def view(self, vid: object, shape: tuple[int, ...], dtype: DType) -> TensorHandle:
        if not isinstance(vid, int) or not 0 <= vid < self._next_value:
            raise self.unsupported(f"TensorHandle(id={vid!r}, ...) for an unknown tensor",
                                   "build views only from handles the kernel already has")
        src = self._defining[vid]  # a dict: kernbench kernels build views all the time
        if dtype != src.dtype:
            raise self.shape_error(f"view of a {src.dtype.value} tensor as {dtype.value}: "
                                   "views keep the dtype; use tl.cast")
        return self.tl.reshape(TensorHandle.make(self, vid, src.shape, src.dtype), shape)

    def axis(self, x: TensorHandle, axis: object, op: str) -> int:
        check_data_free(axis)
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise self.shape_error(f"tl.{op} axis must be an int, got {axis!r}")
        if not -x.ndim <= axis < x.ndim:
            raise self.shape_error(f"tl.{op} axis {axis} is out of range for shape {x.shape}")
        return axis % x.ndim


class UnsupportedTlOp(UnsupportedOp, AttributeError):
    """`tl.NAME` for an op meshproof does not model. Also an AttributeError, so that kernels
    probing for an op (`hasattr(tl, "arange")`, `getattr(tl, "where", None)`) see it missing
    instead of failing; calling it still fails with this one-line error."""


class Tl:
    """The `tl` namespace handed to kernels. Unknown attributes raise UnsupportedTlOp."""

    def __init__(self, tracer: RankTracer) -> None:
        self._t = tracer

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__"):
            raise AttributeError(name)
        error = self._t.unsupported(f"tl.{name}",
                                    f"the modelled ops are: {', '.join(SUPPORTED_OPS)}")
        raise UnsupportedTlOp(str(error))

    # --- launch queries ----------------------------------------------------------------
    def _grid_axis(self, axis: object, op: str) -> int:
        check_data_free(axis)
        if isinstance(axis, int) and not isinstance(axis, bool) and axis in (0, 1):
            return axis
        raise self._t.shape_error(f"{op}(axis={axis!r}): axis is 0 (PE) or 1 (cube), an int")

    @tl_op()
    def program_id(self, axis: object = 0) -> int:
        if self._grid_axis(axis, "program_id") == 0:
            return self._t.endpoint.pe
        return self._t.endpoint.cube

    @tl_op()
    def num_programs(self, axis: object = 0) -> int:
        return self._t.grid[self._grid_axis(axis, "num_programs")]

    # --- memory ------------------------------------------------------------------------
    @tl_op(*MEMORY_HINTS)
    def load(self, ptr: object, shape: object, dtype: object = "f16") -> TensorHandle:
        p = self._t.pointer(ptr, "load")
        dims = self._t.dims(shape)
        return self._t.defined(OpKind.LOAD, (), dims, self._t.dtype(dtype), ptr=p.name,
                               offset=p.offset)

    @tl_op(*MEMORY_HINTS)
    def store(self, ptr: object, value: object) -> None:
        p = self._t.pointer(ptr, "store")
        t = self._t.tensor(value, "store")
        self._t.record(OpKind.STORE, (ValueRef(t.id),), t.shape, t.dt, defines=False,
                       ptr=p.name, offset=p.offset)

    # --- compute -----------------------------------------------------------------------
    @tl_op()
    def dot(self, a: object, b: object, *, out_dtype: object = None) -> TensorHandle:
        x, y = self._t.tensor(a, "dot"), self._t.tensor(b, "dot")
        if x.ndim < 2 or y.ndim < 2:
            raise self._t.shape_error(f"dot needs operands of rank >= 2, got {x.shape} and "
                                      f"{y.shape}")
        if x.shape[-1] != y.shape[-2]:
            raise self._t.shape_error(f"dot of {x.shape} and {y.shape}: inner dimensions "
                                      f"{x.shape[-1]} and {y.shape[-2]} differ")
        try:
            batch = tuple(int(d) for d in np.broadcast_shapes(x.shape[:-2], y.shape[:-2]))
        except ValueError:
            raise self._t.shape_error(f"dot of {x.shape} and {y.shape}: batch dimensions do "
                                      "not broadcast") from None
        dt = self._t.dtype(out_dtype) if out_dtype is not None else _promote([x.dt, y.dt])
        return self._t.defined(OpKind.DOT, (ValueRef(x.id), ValueRef(y.id)),
                               (*batch, x.shape[-2], y.shape[-1]), dt)

    @tl_op()
    def trans(self, x: object, axes: object = None) -> TensorHandle:
        t = self._t.tensor(x, "trans")
        if t.ndim < 2:
            raise self._t.shape_error(f"trans needs rank >= 2, got shape {t.shape}")
        if axes is None:
            perm = (*range(t.ndim - 2), t.ndim - 1, t.ndim - 2)
        else:
            perm = self._t.dims(axes)
            if sorted(perm) != list(range(t.ndim)):
                raise self._t.shape_error(f"trans axes {axes!r} are not a permutation of "
                                          f"{t.ndim} axes")
        return self._t.defined(OpKind.TRANS, (ValueRef(t.id),),
                               tuple(t.shape[i] for i in perm), t.dt, perm=tuple(perm))

    @tl_op()
    def reshape(self, x: object, shape: object) -> TensorHandle:
        t = self._t.tensor(x, "reshape")
        dims = self._t.dims(shape)
        if math.prod(dims) != math.prod(t.shape):
            raise self._t.shape_error(f"reshape of {t.shape} ({math.prod(t.shape)} elements) "
                                      f"to {dims} ({math.prod(dims)} elements)")
        return self._t.defined(OpKind.RESHAPE, (ValueRef(t.id),), dims, t.dt)

    def _reduce(self, kind: OpKind, x: object, axis: object, keepdims: object) -> TensorHandle:
        t = self._t.tensor(x, kind.value)
        ax = self._t.axis(t, axis, kind.value)
        check_data_free(keepdims)
        if not isinstance(keepdims, (bool, np.bool_)):
            raise self._t.shape_error(f"tl.{kind.value} keepdims must be True or False, got "
                                      f"{keepdims!r}")
        keep = bool(keepdims)
        shape = tuple(1 if i == ax else d for i, d in enumerate(t.shape)) if keep else \
            tuple(d for i, d in enumerate(t.shape) if i != ax)
        return self._t.defined(kind, (ValueRef(t.id),), shape, t.dt, axis=ax, keepdims=keep)

    @tl_op()
    def max(self, x: object, axis: object = -1, *, keepdims: object = True) -> TensorHandle:
        return self._reduce(OpKind.MAX, x, axis, keepdims)

    @tl_op()
    def sum(self, x: object, axis: object = -1, *, keepdims: object = True) -> TensorHandle:
        return self._reduce(OpKind.SUM, x, axis, keepdims)

    @tl_op()
    def exp(self, x: object) -> TensorHandle:
        return self._t.unary("exp", x)

    @tl_op()
    def log(self, x: object) -> TensorHandle:
        return self._t.unary("log", x)

    @tl_op()
    def softmax(self, x: object, axis: object = -1) -> TensorHandle:
        t = self._t.tensor(x, "softmax")
        ax = self._t.axis(t, axis, "softmax")
        return self._t.defined(OpKind.SOFTMAX, (ValueRef(t.id),), t.shape, t.dt, axis=ax)

    @tl_op()
    def maximum(self, a: object, b: object) -> TensorHandle:
        return self._t.binary("maximum", a, b)

    @tl_op()
    def minimum(self, a: object, b: object) -> TensorHandle:
        return self._t.binary("minimum", a, b)

    @tl_op()
    def cast(self, x: object, dtype: object) -> TensorHandle:
        t = self._t.tensor(x, "cast")
        return self._t.defined(OpKind.CAST, (ValueRef(t.id),), t.shape, self._t.dtype(dtype))

    @tl_op()
    def full(self, shape: object, value: object, dtype: object = "f32") -> TensorHandle:
        return self._full(shape, value, dtype)

    def _full(self, shape: object, value: object, dtype: object) -> TensorHandle:
        check_data_free(value)
        if not isinstance(value, (int, float)):
            raise self._t.shape_error(f"tl.full value must be a number, got {value!r}")
        return self._t.defined(OpKind.FULL, (), self._t.dims(shape), self._t.dtype(dtype),
                               fill=float(value))

    @tl_op()
    def zeros(self, shape: object, dtype: object = "f32") -> TensorHandle:
        return self._full(shape, 0.0, dtype)

    # --- communication -----------------------------------------------------------------
    def _dir(self, d: object) -> Direction:
        check_data_free(d)
        try:
            return Direction.parse(d)
        except TopologyError as exc:
            raise self._t.shape_error(str(exc)) from None

    @tl_op()
    def send(self, dir: object, src: object) -> None:
        d = self._dir(dir)
        t = self._t.tensor(src, "send")
        self._t.record(OpKind.SEND, (ValueRef(t.id),), t.shape, t.dt, defines=False, dir=d)

    @tl_op()
    def recv(self, dir: object, shape: object, dtype: object = "f16") -> TensorHandle:
        d = self._dir(dir)
        return self._t.defined(OpKind.RECV, (), self._t.dims(shape), self._t.dtype(dtype),
                                      dir=d)


KernelFn = Callable[..., Any]
