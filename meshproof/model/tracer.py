"""Symbolic execution of one rank: the recorder behind the `tl` object (model/tl_ops.py).

Python control flow on program ids and scalars runs concretely; tensors are symbolic.
Every op records the innermost frame in the kernel's own file as its source, so helper
functions defined in that file point at their own lines. A table-driven kernel (one that
`meshproof synthesize` writes) may declare `MESHPROOF_PLAN_ROWS = True` at module level
and set a local `meshproof_plan_row` (a line of its file, or None) in a function of that
file: ops made below that frame are then attributed to that line, the row of the plan
table being interpreted, so a counterexample names the row, not the interpreter.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

import numpy as np

from meshproof.errors import (
    DataDependentControlFlow,
    ShapeError,
    TraceError,
    UnsupportedOp,
)
from meshproof.model.budget import OpBudget
from meshproof.model.schedule import Arg, Const, DType, Op, OpKind, SourceLoc, ValueRef
from meshproof.model.tensor import (
    Pointer,
    TensorData,
    TensorHandle,
    check_data_free,
    normalise_shape,
    parse_dtype,
    promote,
)
from meshproof.model.tl_ops import SUPPORTED_OPS, Tl
from meshproof.model.topology import Endpoint

E = TypeVar("E", bound=TraceError)

_KINDS = {k.value: k for k in OpKind}
_DTYPES = {d.value: d for d in DType}
_NO_ARGS: tuple[Arg, ...] = ()
# the plan-row hook (module docstring): the module flag and the local it reads
PLAN_ROWS_FLAG = "MESHPROOF_PLAN_ROWS"
PLAN_ROW_LOCAL = "meshproof_plan_row"


class OpTable:
    """The ops of one launch, each distinct op built once (hash-consing).

    SPMD ranks trace the same op at the same index over and over (every rank of a mesh
    column runs the same row stage); ops are frozen and compare by value, so equal ops can
    be one object. The schedule then holds one pointer per op and one record per distinct
    op: a 64x64 mesh traces 8.9M ops but ~0.3M distinct ones. Value refs and source
    locations are shared the same way."""

    __slots__ = ("locations", "ops", "refs")

    def __init__(self) -> None:
        self.ops: dict[tuple[object, ...], Op] = {}
        self.refs: list[ValueRef] = []
        self.locations: dict[tuple[str, int], SourceLoc] = {}

    def ref(self, vid: int) -> ValueRef:
        refs = self.refs
        while len(refs) <= vid:
            refs.append(ValueRef(len(refs)))
        return refs[vid]

    def location(self, file: str, line: int) -> SourceLoc:
        key = (file, line)
        loc = self.locations.get(key)
        if loc is None:
            loc = self.locations[key] = SourceLoc(file, line)
        return loc


@dataclass(frozen=True, slots=True)
class KernelSite:
    """Where the kernel lives, to attribute ops to its lines."""

    real_file: str      # the code object's filename, to match frames
    display_file: str   # what diagnostics print
    def_line: int


class RankTracer:
    """Records the ops of one endpoint's run of the kernel."""

    def __init__(self, endpoint: Endpoint, grid: tuple[int, int], site: KernelSite,
                 budget: OpBudget | None = None, table: OpTable | None = None) -> None:
        self.endpoint = endpoint
        self.grid = grid
        self.site = site
        self.budget = budget if budget is not None else OpBudget.for_launch(1)
        # what is left of the launch's op budget for this rank
        self.max_ops = self.budget.remaining
        self.table = table if table is not None else OpTable()
        self.ops: list[Op] = []
        self._defining: dict[int, Op] = {}  # value id -> the op that defined it
        self.masks: dict[int, str] = {}  # value id of a comparison -> its operator ("<")
        self._next_value = 0
        self._data_reads: list[TensorData] = []  # `handle.data` stand-ins not yet checked
        self.refusal: TraceError | None = None  # the first refusal, even if the kernel caught it
        self.tl = Tl(self)
        self._plan_rows: bool | None = None   # the kernel's module declares plan rows

    # --- bookkeeping -------------------------------------------------------------------
    def source(self) -> SourceLoc:
        frame = sys._getframe(1)
        real = self.site.real_file
        while frame is not None:
            if frame.f_code.co_filename == real:
                return self.table.location(self.site.display_file, self._line(frame))
            frame = frame.f_back  # type: ignore[assignment]
        return self.table.location(self.site.display_file, self.site.def_line)

    def _line(self, frame: FrameType) -> int:
        """The line an op made in `frame` (in the kernel's file) is attributed to: its own,
        or the plan row a table-driven kernel declares (module docstring)."""
        if self._plan_rows is None:
            self._plan_rows = frame.f_globals.get(PLAN_ROWS_FLAG) is True
        if self._plan_rows:
            real = self.site.real_file
            outer: FrameType | None = frame
            while outer is not None and outer.f_code.co_filename == real:
                row = outer.f_locals.get(PLAN_ROW_LOCAL)
                if isinstance(row, int) and not isinstance(row, bool):
                    return row
                outer = outer.f_back
        return frame.f_lineno

    def where(self) -> str:
        return f"{self.source()}: rank {self.endpoint.describe()}"

    def refuse(self, error: E) -> E:
        """Remember the first refusal: a kernel that catches it (`try: ... except
        Exception:`) would run another path than the machine, so the trace is refused
        when the kernel returns all the same (`check_refusals`)."""
        if self.refusal is None:
            self.refusal = error
        return error

    def check_refusals(self) -> None:
        if self.refusal is not None:
            raise type(self.refusal)(
                f"{self.refusal} (the kernel caught this error and went on; meshproof "
                "refuses the trace all the same, because the machine would not take that "
                "path - do not catch meshproof's errors)")

    def data_dependent(self, what: str, at: SourceLoc | None = None) -> DataDependentControlFlow:
        where = self.where() if at is None else f"{at}: rank {self.endpoint.describe()}"
        return self.refuse(DataDependentControlFlow(
            f"{where}: error: the kernel {what}; its schedule would depend on tensor "
            "data, which meshproof refuses to certify - branch only on program ids and "
            "scalar arguments"))

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

    def unsupported(self, what: str, fix: str, *, probe: bool = False) -> UnsupportedOp:
        """`probe`: an op the machine does not have, looked up on `tl`; a kernel that probes
        for it and falls back runs what the machine runs, so that is not a refusal."""
        error = UnsupportedOp(f"{self.where()}: error: {what} is not supported by "
                              f"meshproof's tl model; {fix}")
        return error if probe else self.refuse(error)

    def shape_error(self, what: str) -> ShapeError:
        return self.refuse(ShapeError(f"{self.where()}: error: {what}"))

    def dims(self, shape: object) -> tuple[int, ...]:
        """`normalise_shape`, with the kernel's line and rank in the error."""
        if type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape):
            return shape  # already one (the common case: a shape the kernel got from a handle)
        try:
            return normalise_shape(shape)
        except ShapeError as exc:
            raise self.shape_error(str(exc)) from None

    def dtype(self, value: object) -> DType:
        """`parse_dtype`, with the kernel's line and rank in the error."""
        if type(value) is str and value in _DTYPES:
            return _DTYPES[value]
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
        index = len(self.ops)
        if index >= self.max_ops:
            raise self.refuse(TraceError(f"{self.where()}: error: {self.budget.exceeded(index)}"))
        out = None
        if defines:
            out = self._next_value
            self._next_value += 1
        frame = sys._getframe(1)   # self.source(), inlined: this runs once per op
        real = self.site.real_file
        while frame is not None and frame.f_code.co_filename != real:
            frame = frame.f_back  # type: ignore[assignment]
        line = self.site.def_line if frame is None else \
            frame.f_lineno if self._plan_rows is False else self._line(frame)
        source = self.table.location(self.site.display_file, line)
        # enums and locations are singletons here: key them by identity, not by their
        # (Python-level) __hash__
        key = (index, out, id(source), id(kind), id(dtype), shape, args, *fields.items()) \
            if fields else (index, out, id(source), id(kind), id(dtype), shape, args)
        ops = self.table.ops
        op = ops.get(key)
        if op is None:
            op = ops[key] = Op(index, kind, args, out, shape, dtype, source,
                               nbytes=math.prod(shape) * dtype.itemsize, **fields)
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

    def ref(self, t: TensorHandle) -> ValueRef:
        """The operand naming `t` (shared: see OpTable)."""
        return self.table.ref(t.id)

    def operand(self, value: object, op: str) -> tuple[Arg, tuple[int, ...], DType | None]:
        if isinstance(value, TensorHandle):
            t = self.tensor(value, op)
            return self.table.ref(t.id), t.shape, _DTYPES[t.dtype]
        if isinstance(value, (int, float, np.floating, np.integer)):
            return Const(float(value)), (), None
        raise self.unsupported(f"tl.{op} with an operand of type {type(value).__name__}",
                               "use tensors or Python numbers")

    # --- op families -------------------------------------------------------------------
    def binary(self, name: str, a: object, b: object) -> TensorHandle:
        kind = _KINDS[name]
        if isinstance(a, TensorHandle) and isinstance(b, TensorHandle) and \
                a._tracer is self and b._tracer is self:
            # two tensors of this rank, same shape and dtype (the common case, inlined)
            refs = self.table.refs
            if a.id < len(refs) and b.id < len(refs) and a.dtype == b.dtype and \
                    a.shape == b.shape:
                return self.defined(kind, (refs[a.id], refs[b.id]), a.shape, _DTYPES[a.dtype])
        args, shape, dtype = self.elementwise(name, (a, b))
        return self.defined(kind, args, shape, dtype)

    def elementwise(self, name: str, values: tuple[object, ...]
                    ) -> tuple[tuple[Arg, ...], tuple[int, ...], DType]:
        """The operands of an elementwise op, their broadcast shape and promoted dtype (the
        dtypes of the tensor operands only; f32 if there are none)."""
        operands = [self.operand(v, name) for v in values]
        dtypes = [dt for _, _, dt in operands if dt is not None]
        if not dtypes:
            raise self.shape_error(f"tl.{name} needs at least one tensor operand")
        dtype = dtypes[0] if all(dt is dtypes[0] for dt in dtypes) else promote(dtypes)
        shapes = [sh for _, sh, _ in operands]
        if all(sh == shapes[0] or not sh for sh in shapes):
            shape = shapes[0]
        else:
            try:
                shape = tuple(int(d) for d in np.broadcast_shapes(*shapes))
            except ValueError:
                text = " and ".join(str(sh) for sh in shapes)
                raise self.shape_error(f"{name} of shapes {text} does not "
                                       "broadcast") from None
        return tuple(arg for arg, _, _ in operands), shape, dtype

    def compare(self, name: str, symbol: str, a: object, b: object) -> TensorHandle:
        """A comparison: an f32 mask of 1.0 where it holds and 0.0 elsewhere."""
        args, shape, _ = self.elementwise(name, (a, b))
        mask = self.defined(_KINDS[name], args, shape, DType.F32)
        self.masks[mask.id] = symbol
        return mask

    def select(self, cond: object, a: object, b: object) -> TensorHandle:
        c = self.tensor(cond, "where")
        if isinstance(a, TensorHandle) or isinstance(b, TensorHandle):
            _, _, dtype = self.elementwise("where", tuple(
                v for v in (a, b) if isinstance(v, TensorHandle)))
        else:
            for v in (a, b):
                self.operand(v, "where")
            dtype = DType.F32
        args, shape, _ = self.elementwise("where", (c, a, b))
        return self.defined(OpKind.WHERE, args, shape, dtype)

    def unary(self, name: str, x: object) -> TensorHandle:
        t = self.tensor(x, name)
        return self.defined(_KINDS[name], (self.table.ref(t.id),), t.shape, _DTYPES[t.dtype])

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


KernelFn = Callable[..., Any]

__all__ = ["SUPPORTED_OPS", "KernelFn", "KernelSite", "OpBudget", "OpTable", "Pointer",
           "RankTracer", "Tl"]
