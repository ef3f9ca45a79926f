"""The `tl` namespace a kernel receives while traced: one method per modelled op.

Each method checks its arguments (model/tl_args.py), computes the result's shape and dtype
(spec/tl.md §4) and records the op through its rank's tracer (model/tracer.py).
"""

from __future__ import annotations

import math
from typing import Any, NoReturn, Protocol, TypeVar

import numpy as np

from meshproof.errors import TopologyError, TraceError, UnsupportedOp
from meshproof.model.schedule import Arg, DType, OpKind, ValueRef
from meshproof.model.tensor import Pointer, TensorHandle, Tracing, check_data_free, promote
from meshproof.model.tl_args import MEMORY_HINTS, tl_op
from meshproof.model.topology import Direction, Endpoint

_DIRECTIONS = {d.value: d for d in Direction}  # "E" -> Direction.E (parse handles the rest)
SUPPORTED_OPS = ("program_id", "num_programs", "load", "store", "dot", "trans", "reshape",
                 "view", "max", "sum", "exp", "exp2", "log", "log2", "log1p", "sigmoid", "softmax",
                 "maximum", "minimum", "cast", "zeros", "full", "arange", "where", "send",
                 "recv")
# positions are f32 values (spec/tl.md §4): integers are exact in f32 up to this
ARANGE_LIMIT = 2 ** 24


class UnsupportedTlOp(UnsupportedOp, AttributeError):
    """`tl.NAME` for an op meshproof does not model. Also an AttributeError, so that kernels
    probing for an op (`hasattr(tl, "arange")`, `getattr(tl, "where", None)`) see it missing
    instead of failing; calling it still fails with this one-line error."""


_E = TypeVar("_E", bound=TraceError)


class TlTracing(Tracing, Protocol):
    """What the `tl` namespace needs of its rank tracer (model/tracer.py's RankTracer),
    written here so that this module, which the tracer imports, does not import it."""

    @property
    def endpoint(self) -> Endpoint: ...

    def where(self) -> str: ...

    def refuse(self, error: _E) -> _E: ...

    @property
    def grid(self) -> tuple[int, int]: ...

    def tensor(self, value: object, op: str) -> TensorHandle: ...

    def pointer(self, ptr: object, op: str) -> Pointer: ...

    def axis(self, x: TensorHandle, axis: object, op: str) -> int: ...

    def select(self, cond: object, a: object, b: object) -> TensorHandle: ...

    def record(self, kind: OpKind, args: tuple[Arg, ...], shape: tuple[int, ...],
               dtype: DType, *, defines: bool = True, **fields: Any) -> TensorHandle | None: ...

    def defined(self, kind: OpKind, args: tuple[Arg, ...], shape: tuple[int, ...],
                dtype: DType, **fields: Any) -> TensorHandle: ...


class Tl:
    """The `tl` namespace handed to kernels. Unknown attributes raise UnsupportedTlOp."""

    def __init__(self, tracer: TlTracing) -> None:
        self._t = tracer

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__"):
            raise AttributeError(name)
        import difflib  # here: only a misspelt name pays for it (and heapq)

        close = difflib.get_close_matches(name, SUPPORTED_OPS, n=1)
        did_you_mean = f"did you mean tl.{close[0]}? " if close else ""
        error = self._t.unsupported(f"tl.{name}", f"{did_you_mean}the modelled ops are: "
                                    f"{', '.join(SUPPORTED_OPS)}", probe=True)
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
        dt = self._t.dtype(out_dtype) if out_dtype is not None else promote([x.dt, y.dt])
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

    @tl_op()
    def view(self, x: object, offset: object, shape: object) -> TensorHandle:
        """Elements [offset, offset + prod(shape)) of x in row-major order, read as `shape`:
        metadata only, like reshape (a chunk of a state without a round trip through
        memory)."""
        t = self._t.tensor(x, "view")
        check_data_free(offset)
        if not isinstance(offset, (int, np.integer)) or isinstance(offset, bool) or offset < 0:
            raise self._t.shape_error(f"view offset must be a Python int >= 0, got {offset!r}")
        dims = self._t.dims(shape)
        n, total = math.prod(dims), math.prod(t.shape)
        if int(offset) + n > total:
            raise self._t.shape_error(f"view of elements [{int(offset)}, {int(offset) + n}) "
                                      f"of a {t.shape} tensor ({total} elements)")
        return self._t.defined(OpKind.VIEW, (ValueRef(t.id),), dims, t.dt, offset=int(offset))

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
    def exp2(self, x: object) -> TensorHandle:
        return self._t.unary("exp2", x)

    @tl_op()
    def log(self, x: object) -> TensorHandle:
        return self._t.unary("log", x)

    @tl_op()
    def log2(self, x: object) -> TensorHandle:
        return self._t.unary("log2", x)

    @tl_op()
    def log1p(self, x: object) -> TensorHandle:
        return self._t.unary("log1p", x)

    @tl_op()
    def sigmoid(self, x: object) -> TensorHandle:
        return self._t.unary("sigmoid", x)

    @tl_op()
    def softmax(self, x: object, axis: object = -1) -> TensorHandle:
        """Traced as the ops it is (Triton writes it so too): ``e = exp(x - max(x))``,
        ``e / sum(e)`` along `axis`, in float32, rounded to x's dtype. The one place
        softmax is handled: every back-end sees max, sub, exp, sum and div."""
        t = self._t.tensor(x, "softmax")
        ax = self._t.axis(t, axis, "softmax")
        wide = t if t.dt is DType.F32 else \
            self._t.defined(OpKind.CAST, (ValueRef(t.id),), t.shape, DType.F32)
        top = self._reduce(OpKind.MAX, wide, ax, True)
        e = self._t.unary("exp", self._t.binary("sub", wide, top))
        p = self._t.binary("div", e, self._reduce(OpKind.SUM, e, ax, True))
        return p if t.dt is DType.F32 else \
            self._t.defined(OpKind.CAST, (ValueRef(p.id),), t.shape, t.dt)

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

    # --- masks (spec/tl.md §4) ----------------------------------------------------------
    @tl_op()
    def arange(self, start: object, end: object) -> TensorHandle:
        check_data_free(start)
        check_data_free(end)
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                   for v in (start, end)):
            raise self._t.shape_error(f"tl.arange({start!r}, {end!r}): start and end are ints")
        lo, hi = int(start), int(end)  # type: ignore[call-overload]
        if not 0 <= lo < hi <= ARANGE_LIMIT:
            raise self._t.shape_error(f"tl.arange({lo}, {hi}) needs 0 <= start < end <= "
                                      f"{ARANGE_LIMIT} (positions are f32, exact to 2^24)")
        return self._t.defined(OpKind.ARANGE, (), (hi - lo,), DType.F32, fill=float(lo))

    @tl_op()
    def where(self, condition: object, x: object, y: object) -> TensorHandle:
        return self._t.select(condition, x, y)

    @tl_op()
    def zeros(self, shape: object, dtype: object = "f32") -> TensorHandle:
        return self._full(shape, 0.0, dtype)

    # --- communication -----------------------------------------------------------------
    def _dir(self, d: object) -> Direction:
        if type(d) is str and d in _DIRECTIONS:
            return _DIRECTIONS[d]
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
