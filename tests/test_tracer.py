"""The tl tracer: every op's shape and dtype rules, source lines, refusals, kernbench views."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import TEST_KERNELS, RunCli, assert_bad_input, kernel_spec, line_of, trace_kernel
from hypothesis import given, settings
from hypothesis import strategies as st

from meshproof.errors import (
    DataDependentControlFlow,
    KernelRaised,
    MeshproofError,
    ShapeError,
    TraceError,
    UnsupportedArgument,
    UnsupportedOp,
)
from meshproof.model import tensor
from meshproof.model.schedule import Const, DType, Op, OpKind, ValueRef
from meshproof.model.serialize import dumps, op_to_json, schedule_to_json
from meshproof.model.topology import Direction, Endpoint, System
from meshproof.model.tracer import SUPPORTED_OPS, KernelSite, Pointer, RankTracer
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.result import Status

HERE = __file__


class Recorder:
    """Runs snippets against one rank's `tl`, attributing ops to this test file."""

    def __init__(self) -> None:
        self.tracer = RankTracer(Endpoint(0, 0), (1, 1), KernelSite(HERE, "test_tracer.py", 1))
        self.tl: Any = self.tracer.tl
        self.x = Pointer("x_ptr")

    @property
    def ops(self) -> list[Op]:
        return self.tracer.ops

    @property
    def last(self) -> Op:
        return self.tracer.ops[-1]

    def load(self, shape: tuple[int, ...], dtype: str = "f16") -> Any:
        return self.tl.load(self.x, shape=shape, dtype=dtype)


@pytest.fixture
def rec() -> Iterator[Recorder]:
    r = Recorder()
    tensor._ACTIVE.append(r.tracer)
    try:
        yield r
    finally:
        tensor._ACTIVE.pop()


def this_line() -> int:
    return sys._getframe(1).f_lineno


# --- memory ------------------------------------------------------------------------------


def test_load_shape_dtype_pointer_and_bytes(rec: Recorder) -> None:
    t = rec.tl.load(rec.x + 5, shape=(2, 3))
    op = rec.last
    assert (op.kind, op.shape, op.dtype, op.ptr, op.offset) == \
        (OpKind.LOAD, (2, 3), DType.F16, "x_ptr", 5)
    assert op.nbytes == 12 and op.out == 0 and op.args == ()
    assert (t.shape, t.dtype, t.nbytes, t.id) == ((2, 3), "f16", 12, 0)
    assert rec.tl.load(rec.x, shape=4, dtype="float32").shape == (4,)
    assert rec.tl.load(rec.x, shape=[2, 2], dtype="bf16").dtype == "bf16"
    assert rec.last.nbytes == 8


@pytest.mark.parametrize("alias,dtype", [("f16", DType.F16), ("float16", DType.F16),
                                         ("fp16", DType.F16), ("half", DType.F16),
                                         ("bf16", DType.BF16), ("bfloat16", DType.BF16),
                                         ("f32", DType.F32), ("float32", DType.F32),
                                         ("FP32", DType.F32), ("float", DType.F32)])
def test_dtype_aliases(rec: Recorder, alias: str, dtype: DType) -> None:
    rec.load((1,), alias)
    assert rec.last.dtype is dtype


def test_store_records_value_and_defines_nothing(rec: Recorder) -> None:
    x = rec.load((2, 4), "f32")
    assert rec.tl.store(Pointer("o_ptr") + 8, x) is None
    op = rec.last
    assert (op.kind, op.out, op.args, op.shape, op.dtype, op.ptr, op.offset, op.nbytes) == \
        (OpKind.STORE, None, (ValueRef(0),), (2, 4), DType.F32, "o_ptr", 8, 32)


def test_pointer_arithmetic() -> None:
    p = Pointer("k_ptr")
    assert p + 3 == Pointer("k_ptr", 3)
    assert 3 + p == Pointer("k_ptr", 3)
    assert (p + 3) + 4 == Pointer("k_ptr", 7)
    assert repr(p) == "<k_ptr>" and repr(p + 2) == "<k_ptr+2>" and repr(p + -2) == "<k_ptr-2>"
    with pytest.raises(TypeError):
        p + 1.5
    with pytest.raises(TypeError):
        p + True


def test_load_and_store_need_pointers_and_non_negative_offsets(rec: Recorder) -> None:
    with pytest.raises(UnsupportedOp, match=r"tl.load from 1234 is not supported"):
        rec.tl.load(1234, shape=(4,))
    x = rec.load((4,))
    with pytest.raises(UnsupportedOp, match=r"tl.store to 'o' is not supported"):
        rec.tl.store("o", x)
    with pytest.raises(ShapeError, match=r"tl.load at <x_ptr-1>: a negative offset"):
        rec.tl.load(rec.x + -1, shape=(4,))
    with pytest.raises(ShapeError, match=r"tl\.store expects a tensor, got int"):
        rec.tl.store(rec.x, 3)


# --- dot ---------------------------------------------------------------------------------


@pytest.mark.parametrize("a,b,out_dtype,expected", [
    ("f16", "f16", None, DType.F16),      # accumulated in f32, rounded to f16 (kernbench)
    ("bf16", "bf16", None, DType.BF16),
    ("f32", "f32", None, DType.F32),
    ("f16", "f32", None, DType.F32),      # mixed operands promote to f32
    ("f16", "bf16", None, DType.F32),
    ("f16", "f16", "f32", DType.F32),     # out_dtype wins
    ("f32", "f32", "f16", DType.F16),
])
def test_dot_dtype_rules(rec: Recorder, a: str, b: str, out_dtype: str | None,
                         expected: DType) -> None:
    x, y = rec.load((2, 3), a), rec.load((3, 5), b)
    out = rec.tl.dot(x, y) if out_dtype is None else rec.tl.dot(x, y, out_dtype=out_dtype)
    assert (rec.last.kind, rec.last.shape, rec.last.dtype) == (OpKind.DOT, (2, 5), expected)
    assert rec.last.args == (ValueRef(x.id), ValueRef(y.id))
    assert out.dtype == expected.value


def test_dot_batches_broadcast_and_matmul_operator(rec: Recorder) -> None:
    x, y = rec.load((4, 1, 2, 3)), rec.load((5, 3, 7))
    assert rec.tl.dot(x, y).shape == (4, 5, 2, 7)
    assert (x @ y).shape == (4, 5, 2, 7)
    assert rec.last.kind is OpKind.DOT


def test_dot_shape_errors(rec: Recorder) -> None:
    with pytest.raises(ShapeError, match=r"dot needs operands of rank >= 2, got \(3,\)"):
        rec.tl.dot(rec.load((3,)), rec.load((3, 2)))
    with pytest.raises(ShapeError, match=r"inner dimensions 3 and 4 differ"):
        rec.tl.dot(rec.load((2, 3)), rec.load((4, 5)))
    with pytest.raises(ShapeError, match="batch dimensions do not broadcast"):
        rec.tl.dot(rec.load((2, 2, 3)), rec.load((3, 3, 4)))
    with pytest.raises(ShapeError, match=r"tl\.dot expects a tensor, got float"):
        rec.tl.dot(rec.load((2, 2)), 2.0)


# --- layout ops --------------------------------------------------------------------------


def test_trans_default_and_axes(rec: Recorder) -> None:
    x = rec.load((2, 3, 4))
    assert rec.tl.trans(x).shape == (2, 4, 3)
    assert rec.last.perm == (0, 2, 1)
    assert rec.tl.trans(x, (1, 2, 0)).shape == (3, 4, 2)
    assert rec.last.perm == (1, 2, 0) and rec.last.dtype is DType.F16
    assert x.T.shape == (2, 4, 3)
    with pytest.raises(ShapeError, match="not a permutation of 3 axes"):
        rec.tl.trans(x, (0, 0, 1))
    with pytest.raises(ShapeError, match=r"trans needs rank >= 2, got shape \(4,\)"):
        rec.tl.trans(rec.load((4,)))


def test_reshape_keeps_elements_and_dtype(rec: Recorder) -> None:
    x = rec.load((2, 3, 4), "bf16")
    y = rec.tl.reshape(x, (6, 4))
    assert (rec.last.kind, y.shape, y.dtype) == (OpKind.RESHAPE, (6, 4), "bf16")
    assert rec.tl.reshape(x, 24).shape == (24,)
    with pytest.raises(ShapeError, match=r"reshape of \(2, 3, 4\) \(24 elements\) to \(5, 5\)"):
        rec.tl.reshape(x, (5, 5))
    with pytest.raises(ShapeError, match="non-negative ints"):
        rec.tl.reshape(x, (-1, 4))  # no -1 inference


def test_view_records_a_flat_run_of_elements_and_keeps_the_dtype(rec: Recorder) -> None:
    x = rec.load((2, 3, 4), "bf16")
    y = rec.tl.view(x, 12, (3, 4))
    assert (rec.last.kind, rec.last.offset, y.shape, y.dtype) == (OpKind.VIEW, 12, (3, 4),
                                                                  "bf16")
    assert rec.last.args == (ValueRef(x.id),)
    assert rec.tl.view(x, offset=0, shape=24).shape == (24,)
    assert op_to_json(rec.last)["offset"] == 0


def test_view_refuses_a_run_past_the_end_and_a_bad_offset(rec: Recorder) -> None:
    x = rec.load((2, 3, 4))
    with pytest.raises(ShapeError, match=r"view of elements \[20, 28\) of a \(2, 3, 4\) tensor"):
        rec.tl.view(x, 20, (2, 4))
    for bad in (-1, 1.5, True):
        with pytest.raises(ShapeError, match="view offset must be a Python int >= 0"):
            rec.tl.view(x, bad, (4,))


# --- reductions and softmax --------------------------------------------------------------


@pytest.mark.parametrize("op", ["max", "sum"])
def test_reductions_keep_dims_by_default(rec: Recorder, op: str) -> None:
    x = rec.load((2, 3, 4), "f16")
    fn = getattr(rec.tl, op)
    assert fn(x).shape == (2, 3, 1)                     # axis=-1, keepdims=True
    assert (rec.last.axis, rec.last.keepdims, rec.last.dtype) == (2, True, DType.F16)
    assert fn(x, axis=0).shape == (1, 3, 4)
    assert fn(x, axis=-2, keepdims=False).shape == (2, 4)
    assert (rec.last.axis, rec.last.keepdims) == (1, False)
    assert rec.last.kind is OpKind(op)
    with pytest.raises(ShapeError, match=rf"tl.{op} axis 3 is out of range for shape"):
        fn(x, axis=3)
    with pytest.raises(ShapeError, match=rf"tl.{op} axis must be an int, got None"):
        fn(x, axis=None)


def test_row_statistic_broadcasts_against_rows_for_any_rows(rec: Recorder) -> None:
    for rows in (1, 4):
        s = rec.load((rows, 16), "f32")
        m = rec.tl.max(s, axis=-1)
        assert (s - m).shape == (rows, 16)


def test_softmax_keeps_shape_and_dtype_traced_as_its_ops_in_f32(rec: Recorder) -> None:
    """tl.softmax is the ops it is (the one place softmax is handled): an f16 operand is
    widened, max, sub, exp, sum, div in f32 along the axis, then rounded back."""
    x = rec.load((2, 8), "f16")
    before = len(rec.ops)
    y = rec.tl.softmax(x)
    ops = rec.ops[before:]
    assert (y.shape, y.dtype) == ((2, 8), "f16")
    assert [op.kind for op in ops] == [OpKind.CAST, OpKind.MAX, OpKind.SUB, OpKind.EXP,
                                       OpKind.SUM, OpKind.DIV, OpKind.CAST]
    assert [op.dtype.value for op in ops] == ["f32"] * 6 + ["f16"]
    assert [(op.axis, op.keepdims) for op in ops if op.kind in (OpKind.MAX, OpKind.SUM)] \
        == [(1, True), (1, True)]
    before = len(rec.ops)
    rec.tl.softmax(x, axis=0)
    assert {op.axis for op in rec.ops[before:] if op.axis is not None} == {0}


def test_softmax_of_f32_needs_no_cast(rec: Recorder) -> None:
    x = rec.load((2, 8), "f32")
    before = len(rec.ops)
    y = rec.tl.softmax(x)
    assert y.dtype == "f32"
    assert [op.kind for op in rec.ops[before:]] == [OpKind.MAX, OpKind.SUB, OpKind.EXP,
                                                    OpKind.SUM, OpKind.DIV]


# --- elementwise -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["exp", "log"])
def test_unary_math_keeps_shape_and_dtype(rec: Recorder, name: str) -> None:
    x = rec.load((3, 2), "bf16")
    y = getattr(rec.tl, name)(x)
    assert (rec.last.kind, y.shape, y.dtype) == (OpKind(name), (3, 2), "bf16")
    z = -x
    assert (rec.last.kind, z.shape, z.dtype) == (OpKind.NEG, (3, 2), "bf16")


@pytest.mark.parametrize("a,b,expected", [("f16", "f16", "f16"), ("f16", "f32", "f32"),
                                          ("bf16", "f32", "f32"), ("f16", "bf16", "f32"),
                                          ("f32", "f32", "f32"), ("bf16", "bf16", "bf16")])
def test_elementwise_promotion(rec: Recorder, a: str, b: str, expected: str) -> None:
    x, y = rec.load((2, 1), a), rec.load((1, 3), b)
    for result in (x + y, x - y, x * y, x / y, rec.tl.maximum(x, y), rec.tl.minimum(x, y)):
        assert (result.shape, result.dtype) == ((2, 3), expected)


def test_python_and_numpy_scalars_do_not_promote(rec: Recorder) -> None:
    import numpy as np

    x = rec.load((2, 4), "f16")
    for result in (x * 0.125, 0.125 * x, x + 1, 2 - x, x / 3.0, 1.0 / x,
                   np.float32(2.0) * x, x * np.float64(2.0), rec.tl.maximum(x, 0.0)):
        assert (result.shape, result.dtype) == ((2, 4), "f16")
    y = 2 - x
    assert rec.last.kind is OpKind.SUB
    assert rec.last.args == (Const(2.0), ValueRef(x.id))  # reflected operand order is kept
    with pytest.raises(ShapeError, match=r"tl\.maximum needs at least one tensor operand"):
        rec.tl.maximum(1.0, 2.0)
    with pytest.raises(UnsupportedOp, match=r"tl\.add with an operand of type ndarray"):
        np.ones(4) + x
    with pytest.raises(UnsupportedOp, match=r"tl\.mul with an operand of type str"):
        x * "2"
    assert y.shape == (2, 4)


def test_broadcast_errors(rec: Recorder) -> None:
    with pytest.raises(ShapeError, match=r"add of shapes \(2, 3\) and \(4,\) does not broadcast"):
        rec.load((2, 3)) + rec.load((4,))


def test_cast_full_zeros(rec: Recorder) -> None:
    x = rec.load((2, 2), "f32")
    y = rec.tl.cast(x, "f16")
    assert (rec.last.kind, y.shape, y.dtype) == (OpKind.CAST, (2, 2), "f16")
    z = rec.tl.full((2, 1), float("-inf"))
    assert (rec.last.kind, z.shape, z.dtype, rec.last.fill) == \
        (OpKind.FULL, (2, 1), "f32", float("-inf"))
    w = rec.tl.zeros((3,), dtype="bf16")
    assert (rec.last.kind, w.shape, w.dtype, rec.last.fill) == (OpKind.FULL, (3,), "bf16", 0.0)
    with pytest.raises(ShapeError, match=r"tl\.full value must be a number"):
        rec.tl.full((2,), "1")
    with pytest.raises(DataDependentControlFlow):
        rec.tl.full((2,), rec.tl.sum(x, axis=0))


# --- communication -----------------------------------------------------------------------


def test_send_and_recv(rec: Recorder) -> None:
    x = rec.load((1, 8), "f32")
    assert rec.tl.send(dir="E", src=x) is None
    op = rec.last
    assert (op.kind, op.dir, op.shape, op.dtype, op.nbytes, op.out, op.args) == \
        (OpKind.SEND, Direction.E, (1, 8), DType.F32, 32, None, (ValueRef(x.id),))
    y = rec.tl.recv(dir="w", shape=(1, 8))
    op = rec.last
    assert (op.kind, op.dir, op.shape, op.dtype, op.nbytes) == \
        (OpKind.RECV, Direction.W, (1, 8), DType.F16, 16)
    assert y.dtype == "f16"
    rec.tl.recv(dir=Direction.N, shape=(2,), dtype="f32")
    assert rec.last.dir is Direction.N and rec.last.nbytes == 8
    with pytest.raises(ShapeError, match="unknown direction 'NE'"):
        rec.tl.send(dir="NE", src=x)
    with pytest.raises(ShapeError, match=r"tl\.send expects a tensor"):
        rec.tl.send(dir="E", src=1.0)


def test_program_id_axis_checks(rec: Recorder) -> None:
    assert rec.tl.program_id(axis=0) == 0 and rec.tl.program_id(1) == 0
    assert rec.tl.num_programs(0) == 1 and rec.tl.num_programs(axis=1) == 1
    with pytest.raises(ShapeError, match=r"program_id\(axis=2\): axis is 0 \(PE\) or 1 \(cube\)"):
        rec.tl.program_id(axis=2)
    with pytest.raises(ShapeError, match=r"num_programs\(axis=-1\)"):
        rec.tl.num_programs(axis=-1)


def test_value_ids_are_dense_and_op_indices_follow_program_order(rec: Recorder) -> None:
    x = rec.load((2, 2))
    rec.tl.send(dir="E", src=x)
    y = rec.tl.exp(x)
    rec.tl.store(rec.x, y)
    assert [op.index for op in rec.ops] == [0, 1, 2, 3]
    assert [op.out for op in rec.ops] == [0, None, 1, None]


# --- refusals ----------------------------------------------------------------------------


def test_unsupported_tl_attribute_names_the_op(rec: Recorder) -> None:
    with pytest.raises(UnsupportedOp) as info:
        rec.tl.atomic_add(0, 4)
    assert "tl.atomic_add is not supported by meshproof's tl model; the modelled ops are: " + \
        ", ".join(SUPPORTED_OPS) in str(info.value)
    for op in SUPPORTED_OPS:
        assert callable(getattr(rec.tl, op))


@pytest.mark.parametrize(("typo", "meant"), [("sned", "send"), ("recieve", "recv"),
                                             ("program_idx", "program_id"), ("lod", "load")])
def test_a_misspelt_op_gets_a_did_you_mean(rec: Recorder, typo: str, meant: str) -> None:
    with pytest.raises(UnsupportedOp) as info:
        getattr(rec.tl, typo)
    assert f"tl.{typo} is not supported by meshproof's tl model; did you mean tl.{meant}? " \
        "the modelled ops are: " in str(info.value)


def test_tensor_iteration_indexing_and_mutation_are_refused(rec: Recorder) -> None:
    x = rec.load((2, 2))
    with pytest.raises(UnsupportedOp, match="iterating over a tensor"):
        list(x)
    with pytest.raises(UnsupportedOp, match="indexing or slicing a tensor"):
        x[0]
    with pytest.raises(UnsupportedOp, match="assigning 'shape' of a tensor handle"):
        x.shape = (4,)
    assert len(x) == 2 and x.ndim == 2


@pytest.mark.parametrize("use,what", [
    (lambda t: bool(t), "uses a tensor's value as a condition"),
    (lambda t: int(t), "uses a tensor's value as an int"),
    (lambda t: float(t), "uses a tensor's value as a float"),
    (lambda t: range(t), "uses a tensor's value as an int"),
    (lambda t: bool(t < 0), r"compares tensor data \(<\) and uses the mask as a condition"),
    (lambda t: bool(t <= 0), r"compares tensor data \(<=\)"),
    (lambda t: bool(t > 0), r"compares tensor data \(>\)"),
    (lambda t: 0 if t >= 0 else 1, r"compares tensor data \(>=\)"),
    (lambda t: bool(t == 0), r"compares tensor data \(==\)"),
    (lambda t: bool(t != 0), r"compares tensor data \(!=\)"),
    (lambda t: t in [t + 1.0], r"compares tensor data \(==\)"),
    (lambda t: max(t, t), r"compares tensor data"),
])
def test_tensor_data_as_python_value_is_refused(rec: Recorder, use: Callable[[Any], object],
                                                what: str) -> None:
    x = rec.load((1,), "f32")
    with pytest.raises(DataDependentControlFlow, match=what) as info:
        use(x)
    assert "meshproof refuses to certify" in str(info.value)
    assert str(info.value).startswith("test_tracer.py:")


def test_tensors_as_axis_shape_or_direction_are_refused(rec: Recorder) -> None:
    x = rec.load((2, 2), "f32")
    n = rec.tl.sum(rec.tl.sum(x, axis=0), axis=1)
    with pytest.raises(DataDependentControlFlow, match="where a concrete value is needed"):
        rec.tl.max(x, axis=n)
    with pytest.raises(DataDependentControlFlow):
        rec.tl.load(rec.x, shape=(n, 2))
    with pytest.raises(DataDependentControlFlow):
        rec.tl.send(dir=n, src=x)
    with pytest.raises(DataDependentControlFlow):
        rec.tl.program_id(axis=n)


def test_errors_name_the_line_and_rank(rec: Recorder) -> None:
    line = this_line() + 2
    with pytest.raises(ShapeError) as info:
        rec.tl.load(rec.x, shape=(4,), dtype="f64")
    assert str(info.value) == (f"test_tracer.py:{line}: rank (cube 0, pe 0): error: unknown "
                               "dtype 'f64': use 'f16', 'bf16' or 'f32'")
    x = rec.load((2, 2))
    line = this_line() + 2
    with pytest.raises(DataDependentControlFlow) as info2:
        bool(x)
    assert str(info2.value).startswith(f"test_tracer.py:{line}: rank (cube 0, pe 0): error: "
                                       "the kernel uses a tensor's value as a condition")


def test_tensor_handle_outside_tracing_is_refused() -> None:
    with pytest.raises(UnsupportedOp, match="can only be built while meshproof traces"):
        tensor.TensorHandle(id=0, shape=(2,))


def test_views_need_a_known_id_and_keep_the_dtype(rec: Recorder) -> None:
    x = rec.load((2, 4), "f16")
    v = tensor.TensorHandle(id=x.id, addr=0, shape=(8,), dtype="f16", nbytes=16, data=None,
                            space="sram", pinned=False)
    assert (rec.last.kind, rec.last.args, v.shape, v.dtype) == \
        (OpKind.RESHAPE, (ValueRef(x.id),), (8,), "f16")
    with pytest.raises(UnsupportedOp, match=r"TensorHandle\(id=99, ...\) for an unknown tensor"):
        tensor.TensorHandle(id=99, shape=(8,))
    with pytest.raises(ShapeError, match="view of a f16 tensor as f32: views keep the dtype"):
        tensor.TensorHandle(id=x.id, shape=(8,), dtype="f32")
    with pytest.raises(ShapeError, match="reshape of"):
        tensor.TensorHandle(id=x.id, shape=(3,), dtype="f16")


# --- whole kernels: source lines, kernbench, built-ins -----------------------------------


def test_ops_in_helpers_of_the_kernel_file_point_at_the_helper() -> None:
    path = TEST_KERNELS / "probes.py"
    sched = trace_kernel(kernel_spec("probes.py::helper_lines_kernel"), pes=1)
    ops = sched.programs[0].ops
    assert [op.kind for op in ops] == [OpKind.LOAD, OpKind.MUL, OpKind.STORE]
    assert [op.source.line for op in ops] == [line_of(path, "HELPER-CALLER-LOAD"),
                                              line_of(path, "HELPER-BODY"),
                                              line_of(path, "HELPER-CALLER-STORE")]
    assert {op.source.file for op in ops} == {"tests/kernels/probes.py"}


def test_builtin_kernel_ops_point_at_the_kernel_file_not_the_shared_helpers() -> None:
    sched = trace_kernel("mesh_mlo_1d", args=(("n_ranks", 2),))
    files = {op.source.file for p in sched.programs for op in p.ops}
    assert files == {"meshproof/kernels/mesh_mlo.py"}


def test_kernbench_style_kernel_traces_unmodified() -> None:
    path = TEST_KERNELS / "kernbench_style.py"
    assert "from kernbench.common.pe_commands import TensorHandle" in path.read_text()
    sched = trace_kernel(kernel_spec("kernbench_style.py::line_allreduce_kernel"), pes=4,
                         args=(("rows", 2), ("cols", 4)))
    assert "kernbench" not in sys.modules  # the shim is only there while loading / tracing
    assert [p.endpoint for p in sched.programs] == [Endpoint(0, pe) for pe in range(4)]
    view_line = line_of(path, "VIEW-LINE")
    for prog in sched.programs:
        ops = prog.ops
        # same id + new shape = a reshape view, recorded where the view is built
        assert (ops[0].kind, ops[0].shape) == (OpKind.LOAD, (8,))
        assert (ops[1].kind, ops[1].shape, ops[1].args) == \
            (OpKind.RESHAPE, (2, 4), (ValueRef(ops[0].out or 0),))
        assert ops[1].source.line == view_line
        assert (ops[-2].kind, ops[-2].shape, ops[-2].source.line) == \
            (OpKind.RESHAPE, (8,), view_line)
        assert (ops[-1].kind, ops[-1].shape, ops[-1].dtype, ops[-1].source.line) == \
            (OpKind.STORE, (8,), DType.F16, line_of(path, "STORE-LINE"))
        counts = Counter((op.kind, op.dir) for op in prog.comm_ops)
        pe = prog.endpoint.pe
        # fan-out on a line of 4: every other rank's block arrives exactly once
        assert counts[(OpKind.RECV, Direction.W)] == pe
        assert counts[(OpKind.RECV, Direction.E)] == 3 - pe
        for op in prog.comm_ops:
            marker = f"{op.kind.value.upper()}-{op.dir.value if op.dir else ''}-LINE"
            assert op.source.line == line_of(path, marker)
            assert (op.shape, op.dtype, op.nbytes) == ((2, 4), DType.F16, 16)


def test_kernbench_import_inside_the_kernel_body_works() -> None:
    sched = trace_kernel(kernel_spec("kernbench_style.py::lazy_import_kernel"), pes=1)
    assert [op.kind for op in sched.programs[0].ops] == \
        [OpKind.LOAD, OpKind.RESHAPE, OpKind.STORE]
    assert "kernbench" not in sys.modules


def test_kernel_files_may_define_dataclasses() -> None:
    sched = trace_kernel(kernel_spec("probes.py::dataclass_kernel"), pes=1)
    assert sched.programs[0].ops[0].shape == (2, 4)


def test_pointer_offsets_reach_the_ir() -> None:
    sched = trace_kernel(kernel_spec("probes.py::pointer_offsets_kernel"), pes=1)
    ops = sched.programs[0].ops
    assert [(op.ptr, op.offset) for op in ops if op.ptr] == \
        [("x_ptr", 8), ("x_ptr", 16), ("x_ptr", 8), ("o_ptr", 3)]


def test_non_finite_constants_serialise_as_strings() -> None:
    sched = trace_kernel(kernel_spec("probes.py::scale_kernel"), pes=1,
                         args=(("d_head", 16),))
    text = dumps(schedule_to_json(sched))
    ops = json.loads(text)["ranks"][0]["ops"]
    assert [op["kind"] for op in ops] == ["load", "mul", "mul", "full", "maximum", "store"]
    assert ops[1]["args"][1] == {"const": 0.25}
    assert ops[2]["args"][0] == {"const": 2.0}
    assert ops[3]["fill"] == "-inf"
    assert ops[4]["dtype"] == "f32" and ops[1]["dtype"] == "f16"


def test_kernel_exceptions_become_one_line_trace_errors() -> None:
    path = TEST_KERNELS / "broken.py"
    with pytest.raises(KernelRaised) as info:
        trace_kernel(kernel_spec("broken.py::raises_kernel"), pes=4)
    assert str(info.value) == (f"tests/kernels/broken.py:{line_of(path, 'RAISE-LINE')}: rank "
                               "(cube 0, pe 2): error: the kernel raised ValueError: rank 2 has "
                               "no KV slice")
    with pytest.raises(KernelRaised) as info:
        trace_kernel(kernel_spec("broken.py::multiline_message_kernel"), pes=1)
    assert str(info.value).endswith("RuntimeError: first line second line")
    assert isinstance(info.value, TraceError)


# --- the seeds' kernbench kernel -----------------------------------------------------------


SEED_ARGS = (("n_ranks", 8), ("rank_axis", 0), ("S_q", 1), ("h_q", 1), ("h_kv", 1),
             ("S_kv_per_rank", 16), ("d_head", 8))


def test_seed_attention_kernel_on_an_8_pe_line(seeds_dir: Any) -> None:
    path = seeds_dir / "attention_mesh_mlo.py"
    sched = trace_kernel(f"{path}::attention_mesh_mlo_kernel", wiring="pe_line", pes=8,
                         args=SEED_ARGS)
    assert len(sched.active) == 8
    comm = [op for p in sched.programs for op in p.comm_ops]
    assert len(comm) == 336
    lines = path.read_text().splitlines()
    for op in comm:
        assert re.fullmatch(r".*attention_mesh_mlo\.py:\d+", str(op.source))
        text = lines[op.source.line - 1]
        assert f"tl.{op.kind.value}(dir=\"{op.dir.value if op.dir else ''}\"" in text
        assert op.dtype is DType.F16  # dot of f16 operands is f16; reductions keep it
    # the merged triplet keeps S_q rows: m and l are (1, 1), o is (1, h_q * d_head)
    assert {op.shape for op in comm} == {(1, 1), (1, 8)}
    sends = Counter(op.kind for op in comm)
    assert sends[OpKind.SEND] == sends[OpKind.RECV] == 168


def test_seed_kernel_rank_axis_1_silences_pes_other_than_0(seeds_dir: Any) -> None:
    path = seeds_dir / "attention_mesh_mlo.py"
    args = tuple((k, 1 if k == "rank_axis" else 4 if k == "n_ranks" else v) for k, v in SEED_ARGS)
    sched = trace_kernel(f"{path}::attention_mesh_mlo_kernel", wiring="cube_mesh", cubes=4,
                         args=args)
    assert [p.endpoint for p in sched.active] == [Endpoint(c, 0) for c in range(4)]


# --- determinism ---------------------------------------------------------------------------


@st.composite
def builtin_launches(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    from meshproof.kernels import BUILTIN_KERNELS

    name = draw(st.sampled_from(sorted(BUILTIN_KERNELS)))
    shapes = {"S_q": draw(st.integers(1, 3)), "S_kv_per_rank": draw(st.sampled_from([4, 8])),
              "h_kv": draw(st.integers(1, 2)), "d_head": draw(st.sampled_from([4, 8]))}
    shapes["h_q"] = shapes["h_kv"] * draw(st.integers(1, 2))
    if BUILTIN_KERNELS[name].mask is not None:   # causal ring prefill: one sequence, PEs
        shapes["S_q"] = shapes["S_kv_per_rank"]
        opts: dict[str, Any] = {"pes": draw(st.integers(1, 8)), "wiring": "pe_ring"}
    elif BUILTIN_KERNELS[name].mesh is not None:   # a sub-mesh kernel
        rows, cols = draw(st.integers(1, 2)), draw(st.integers(1, 4))
        start = draw(st.integers(0, 16 - rows * cols))
        opts = {"mesh": f"{rows}x{cols}", "cube_start": start, "wiring": "cube_mesh"}
    elif draw(st.booleans()):
        cubes = draw(st.integers(2, 4))
        opts = {"cubes": cubes, "wiring": draw(st.sampled_from(["cube_mesh", "cube_ring"])),
                "cube_start": draw(st.integers(0, 16 - cubes))}
        shapes["rank_axis"] = 1
    else:
        opts = {"pes": draw(st.integers(1, 8)),
                "wiring": draw(st.sampled_from(["pe_line", "pe_ring"]))}
    opts["args"] = tuple(sorted(shapes.items()))
    opts["system"] = System()
    return name, opts


@settings(max_examples=25, deadline=None)
@given(builtin_launches())
def test_tracing_is_deterministic(launch: tuple[str, dict[str, Any]]) -> None:
    name, opts = launch
    sched = trace_kernel(name, **opts)
    first = dumps(schedule_to_json(sched))
    second = dumps(schedule_to_json(trace_kernel(name, **opts)))
    assert first == second
    for prog in sched.programs:  # value ids are SSA: dense, defined before use, per rank
        defined: list[int] = []
        for op in prog.ops:
            assert all(v in defined for v in op.value_args)
            if op.out is not None:
                assert op.out == len(defined)
                defined.append(op.out)
    doc = json.loads(first)
    assert doc["schema"] == "meshproof/schedule-v1"
    assert doc["ranks"], "every built-in launch has at least one active rank"


# --- schedule IR: channels and k-th send <-> k-th recv --------------------------------------


def test_channels_match_kth_send_with_kth_recv() -> None:
    from meshproof.model.channel_table import OpRef, PortStatus
    from meshproof.model.channels import derive_channels

    sched = trace_kernel("mesh_mlo_1d", args=(("n_ranks", 4),))
    table = derive_channels(sched)
    assert [ch.name for ch in table.channels] == ["c0p0_E", "c0p1_E", "c0p1_W", "c0p2_E",
                                                  "c0p2_W", "c0p3_W"]
    for ch in table.channels:
        assert ch.status is PortStatus.OK and not ch.orphan
        assert ch.dst == sched.wiring.neighbour(ch.src, ch.dir)
        assert len(ch.sends) == len(ch.recvs) > 0
        for k, (s, r) in enumerate(zip(ch.sends, ch.recvs, strict=True)):
            send = sched.programs[s.rank].ops[s.op]
            recv = sched.programs[r.rank].ops[r.op]
            assert sched.programs[s.rank].endpoint == ch.src
            assert sched.programs[r.rank].endpoint == ch.dst
            assert (send.kind, send.dir, recv.kind, recv.dir) == \
                (OpKind.SEND, ch.dir, OpKind.RECV, ch.dir.opposite)
            assert (send.shape, send.dtype, send.nbytes) == (recv.shape, recv.dtype, recv.nbytes)
            assert table.position[s] == table.position[r] == (table.channels.index(ch), k)
            assert table.match(s, send) == r and table.match(r, recv) == s
        # sends (and recvs) keep program order along the channel
        assert [s.op for s in ch.sends] == sorted(s.op for s in ch.sends)
    n_comm = sum(len(p.comm_ops) for p in sched.programs)
    assert len(table.position) == len(table.port_use) == n_comm
    assert OpRef(0, 0) not in table.position  # a load is on no channel


def test_channels_flag_missing_links_and_outside_endpoints() -> None:
    from meshproof.model.channel_table import PortStatus
    from meshproof.model.channels import derive_channels

    # the study's bug: the 1D kernel over 8 cubes of a 4x4 cube mesh needs E at cube 3 and
    # W at cube 4, which the wiring lacks
    sched = trace_kernel("mesh_mlo_1d", cubes=8, wiring="cube_mesh", args=(("rank_axis", 1),))
    table = derive_channels(sched)
    by_name = {ch.name: ch for ch in table.channels}
    for name in ("c3p0_E", "c4p0_W"):
        assert by_name[name].status is PortStatus.NO_LINK and by_name[name].dst is None
        assert by_name[name].sends and not by_name[name].recvs
    for name in ("c3p0_E_in", "c4p0_W_in"):  # recvs on a missing port: keyed on the receiver
        assert by_name[name].orphan and by_name[name].recvs and not by_name[name].sends
    # a launch of 4 PEs of an 8-PE line: PE 3 talks to PE 4, which runs nothing
    sched = trace_kernel("mesh_mlo_1d", pes=4, args=(("n_ranks", 8),))
    table = derive_channels(sched)
    by_name = {ch.name: ch for ch in table.channels}
    assert by_name["c0p3_E"].status is PortStatus.OUTSIDE and not by_name["c0p3_E"].recvs
    assert by_name["c0p4_W"].status is PortStatus.OUTSIDE and not by_name["c0p4_W"].sends
    assert by_name["c0p4_W"].recvs  # PE 3's recvs from E wait on a link nobody writes
    for ref, use in table.port_use.items():
        if use.status is PortStatus.OUTSIDE:
            assert use.peer == Endpoint(0, 4) and sched.programs[ref.rank].endpoint.pe == 3


def test_runaway_kernels_and_absurd_launches_hit_the_memory_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from meshproof.model import budget

    # no fixed cap: as many ops as fit in the memory available, here 500 ops' worth
    monkeypatch.setattr(budget, "available_bytes", lambda: 500 * budget.BYTES_PER_OP)
    path = TEST_KERNELS / "broken.py"
    with pytest.raises(TraceError) as info:
        trace_kernel(kernel_spec("broken.py::runaway_kernel"), pes=1)
    assert str(info.value) == (
        f"tests/kernels/broken.py:{line_of(path, 'RUNAWAY-LINE')}: rank (cube 0, pe 0): error: "
        "the launch traced more than 500 ops, all that fit in the 195 KiB of memory available "
        f"({budget.BYTES_PER_OP} bytes per op to trace and verify); at that rate its 1 rank(s) "
        "need at least 500 ops, 195 KiB; shrink the launch (--system, --cubes, --pes) or the "
        "kernel's shapes and loop counts, or free memory")
    # the budget is shared by all ranks of a launch: 8 ranks of ~140 ops exceed it, and the
    # message extrapolates what the whole launch needs from the ranks traced so far
    with pytest.raises(TraceError, match=r"rank \(cube 0, pe [1-7]\): error: the launch traced "
                       r"more than 500 ops, .* its 8 rank\(s\) need at least 1\d\d\d ops"):
        trace_kernel("mesh_mlo_1d")
    assert len(trace_kernel("mesh_mlo_1d", pes=2).programs) == 2


def test_kernels_can_probe_tl_for_ops() -> None:
    # hasattr(tl, "arange") raised UnsupportedOp instead of returning False.
    schedule = trace_kernel(kernel_spec("misbehaving.py::probes_for_ops"), pes=1)
    assert [op.kind.value for op in schedule.programs[0].ops] == ["load", "mul", "store"]


def test_program_id_axis_must_be_an_int(run_cli: RunCli) -> None:
    r = run_cli(["trace", kernel_spec("misbehaving.py::float_axis"), "--pes", "1"])
    line = line_of(TEST_KERNELS / "misbehaving.py", "AXIS-LINE")
    assert_bad_input(r, f"misbehaving.py:{line}:",
                     "program_id(axis=1.0): axis is 0 (PE) or 1 (cube), an int")


def test_numpy_integers_work_as_shapes_and_offsets() -> None:
    # Were refused: "shape must hold non-negative ints" / "unsupported operand for +".
    ops = trace_kernel(kernel_spec("numpy_ints.py::numpy_shapes"), pes=1).programs[0].ops
    assert [(op.kind.value, op.shape, op.offset) for op in ops] == \
        [("load", (2, 4), 4), ("store", (2, 4), 2)]
    assert all(type(d) is int for op in ops for d in (*op.shape, op.offset))


def test_equal_ops_of_different_ranks_are_one_object() -> None:
    # hash-consing: every rank of the 8-PE line loads q at op 0 the same way, so op 0 is
    # one object; ops that differ (a send east vs west at the same index) are not
    sched = trace_kernel("mesh_mlo_1d")
    firsts = {id(p.ops[0]) for p in sched.programs}
    assert len(firsts) == 1
    by_index: dict[int, set[int]] = {}
    for p in sched.programs:
        for op in p.ops:
            by_index.setdefault(op.index, set()).add(id(op))
    for i, ids in by_index.items():
        ops = {sched.programs[r].ops[i] for r in range(8) if len(sched.programs[r].ops) > i}
        assert len(ids) == len(ops), f"op {i}: equal ops must be one object, unequal ones not"


ESCAPES = "trace_escapes.py"
ONE = {"pes": 1, "wiring": "pe_line"}


def _trace_escape(name: str, **opts: object) -> object:
    return trace_kernel(kernel_spec(f"{ESCAPES}::{name}"), **{**ONE, **opts})


def _all_proved(name: str, **opts: object) -> bool:
    s = _trace_escape(name, **opts)
    v = verify(s, VerifyConfig(queue_depth=s.launch.queue_depth))  # type: ignore[attr-defined]
    return all(p.status is Status.PROVED for p in v.properties)


def _refused_or_not_proved(name: str, error: type[MeshproofError], **opts: object) -> None:
    """What a kernel that meshproof cannot model must get: its error, never all proved."""
    try:
        proved = _all_proved(name, **opts)
    except error:
        return
    assert not proved, f"{name} is proved"


# --- kernels whose trace could differ from what the machine runs (tests/kernels/
# trace_escapes.py): refused, never proved --------------------------------------------


def test_a_refused_mask_caught_by_the_kernel_is_still_refused() -> None:
    _refused_or_not_proved("masked_store_fallback", UnsupportedArgument)
    with pytest.raises(UnsupportedArgument, match=r"trace_escapes\.py:\d+: rank \(cube 0, "
                       r"pe 0\): error: tl\.store\(mask=\.\.\.\) is not modelled.*\(the "
                       r"kernel caught this error and went on; meshproof refuses the trace all "
                       r"the same"):
        _trace_escape("masked_store_fallback")


def test_a_data_dependent_branch_caught_by_the_kernel_is_still_refused() -> None:
    _refused_or_not_proved("data_branch_swallowed", DataDependentControlFlow)


# --- state shared between ranks ---------------------------------------------------------


def test_a_module_global_set_by_an_earlier_rank_does_not_steer_a_later_one() -> None:
    _refused_or_not_proved("cached_program_id", MeshproofError, pes=2)


# --- an op that returns something plausible but wrong ----------------------------------


def test_len_of_a_0d_tensor_is_refused() -> None:
    with pytest.raises(MeshproofError):
        _trace_escape("len_of_scalar_handle")


# --- data and numpy uses of handles; hints and hashing ----------------------------------


@pytest.mark.parametrize(("name", "error"), [
    ("numpy_sum_of_handle", UnsupportedOp),          # np.asarray iterates the handle
    ("python_max_of_handles", DataDependentControlFlow),
    ("while_on_data", DataDependentControlFlow),
    ("range_over_tensor", DataDependentControlFlow),
    ("float_of_tensor", DataDependentControlFlow),
    ("negative_step_shape", UnsupportedOp),
    ("numpy_ufunc_on_handle", KernelRaised),         # __array_ufunc__ = None: a TypeError
    ("program_id_2", ShapeError),
])
def test_data_and_numpy_uses_of_handles_are_refused(name: str,
                                                    error: type[MeshproofError]) -> None:
    with pytest.raises(error):
        _trace_escape(name)


@pytest.mark.parametrize("name", ["keyword_hint_load", "handle_in_list"])
def test_hints_and_hashing_are_traced_and_proved(name: str) -> None:
    assert _all_proved(name)
