"""model/tensor.py: `handle.data` is a stand-in that only `TensorHandle(data=...)` accepts.

Reading tensor data while tracing is refused like data-dependent control flow, whether the
kernel branches on it (`if h.data:`), uses it, or tests its identity (`if h.data is None:`,
which no object can intercept); the seeds' kernbench views (`data=handle.data`) still trace.
"""

from __future__ import annotations

import copy
import pickle
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import TEST_KERNELS, CliResult, kernel_spec, line_of, trace_kernel

from meshproof.errors import DataDependentControlFlow, UnsupportedOp
from meshproof.model import tensor
from meshproof.model.schedule import OpKind
from meshproof.model.tensor import TensorData, TensorHandle
from meshproof.model.topology import Endpoint
from meshproof.model.tracer import KernelSite, Pointer, RankTracer

Run = Callable[[Sequence[str]], CliResult]
MISUSE = TEST_KERNELS / "tl_misuse.py"
REFUSAL = ("; its schedule would depend on tensor data, which meshproof refuses to certify - "
           "branch only on program ids and scalar arguments")


def tracer_here(pe: int = 0) -> RankTracer:
    return RankTracer(Endpoint(0, pe), (2, 1), KernelSite(__file__, "test_tensor.py", 1))


@pytest.fixture
def rank() -> Iterator[RankTracer]:
    t = tracer_here()
    tensor._ACTIVE.append(t)
    try:
        yield t
    finally:
        tensor._ACTIVE.pop()


def here() -> int:
    return sys._getframe(1).f_lineno


# --- kernels: the realistic mistakes are refused, the seeds' idiom traces ------------------

@pytest.mark.parametrize(("kernel", "marker", "what"), [
    ("data_is_none", "DATA-IS-NONE",
     "reads a tensor's data (handle.data) other than to pass it to TensorHandle(data=...)"),
    ("data_is_none_at_the_end", "DATA-AT-END",
     "reads a tensor's data (handle.data) other than to pass it to TensorHandle(data=...)"),
    ("data_truth", "DATA-TRUTH", "uses a tensor's data (handle.data) as a value (a condition)"),
])
def test_branching_on_handle_data_is_refused_at_its_line(kernel: str, marker: str,
                                                         what: str) -> None:
    with pytest.raises(DataDependentControlFlow) as info:
        trace_kernel(kernel_spec(f"tl_misuse.py::{kernel}"), pes=1)
    assert str(info.value) == (f"tests/kernels/tl_misuse.py:{line_of(MISUSE, marker)}: rank "
                               f"(cube 0, pe 0): error: the kernel {what}{REFUSAL}")


@pytest.mark.parametrize("kernel", ["data_is_none", "data_truth"])
def test_a_data_branch_exits_2_in_verify(run_cli: Run, kernel: str) -> None:
    r = run_cli(["verify", f"tests/kernels/tl_misuse.py::{kernel}", "--pes", "1"])
    assert r.code == 2
    assert r.err.count("\n") == 1 and "DataDependent" not in r.err
    assert "handle.data" in r.err and "proved" not in r.out


def test_a_view_built_with_data_of_the_handle_traces() -> None:
    sched = trace_kernel(kernel_spec("tl_misuse.py::data_view"), pes=1)
    ops = sched.programs[0].ops
    assert [op.kind for op in ops] == [OpKind.LOAD, OpKind.RESHAPE, OpKind.STORE]
    assert ops[1].shape == (4,)


def test_the_seed_kernel_still_traces_to_336_comm_ops(seeds_dir: Path) -> None:
    sched = trace_kernel(f"{seeds_dir / 'attention_mesh_mlo.py'}::attention_mesh_mlo_kernel",
                         pes=8, wiring="pe_line",
                         args=(("S_q", 1), ("h_q", 1), ("h_kv", 1), ("S_kv_per_rank", 16),
                               ("d_head", 8), ("n_ranks", 8), ("rank_axis", 0)))
    comm = [op for p in sched.programs for op in p.ops if op.kind.is_comm]
    assert len(sched.active) == 8 and len(comm) == 336
    assert sum(op.kind is OpKind.RESHAPE for p in sched.programs for op in p.ops) == 16


# --- the stand-in: every use it can see is refused at once ---------------------------------

USES: dict[str, Callable[[Any], object]] = {
    "a condition": bool, "==": lambda d: d == 0, "!=": lambda d: d != 0,
    "<": lambda d: d < 0, ">=": lambda d: d >= 0, "<=": lambda d: d <= 0,
    "add arithmetic": lambda d: d + 1,
    "mul arithmetic": lambda d: 2 * d, "matmul arithmetic": lambda d: d @ d,
    "len": len, "iteration": iter, "indexing": lambda d: d[0], ".shape": lambda d: d.shape,
    "str": str, "repr": repr, "format": lambda d: f"{d:>4}", "an int": int,
    "a float": float, "a numpy array": np.asarray, "a call": lambda d: d(),
    "pickling or copying": pickle.dumps, "copying": copy.copy, "abs": abs,
    "in": lambda d: 0 in d,
}


@pytest.mark.parametrize("how", sorted(USES))
def test_every_use_of_the_data_stand_in_is_data_dependent(rank: RankTracer, how: str) -> None:
    x = rank.tl.load(Pointer("x_ptr"), shape=(4,))
    d = x.data
    assert isinstance(d, TensorData)
    with pytest.raises(DataDependentControlFlow) as info:
        USES[how](d)
    # at the line of the use: here, or the lambda's line in USES
    assert re.fullmatch(r"test_tensor\.py:\d+: rank \(cube 0, pe 0\): error: the kernel uses a "
                        rf"tensor's data \(handle\.data\) as a value \({re.escape(how)}\)"
                        f"{re.escape(REFUSAL)}", str(info.value))


def test_hashing_the_stand_in_is_refused(rank: RankTracer) -> None:
    d = rank.tl.load(Pointer("x_ptr"), shape=(4,)).data
    with pytest.raises(TypeError):
        hash(d)


def test_the_stand_in_as_an_op_parameter_is_data_dependent(rank: RankTracer) -> None:
    x = rank.tl.load(Pointer("x_ptr"), shape=(4,))
    with pytest.raises(DataDependentControlFlow, match=r"as a value \(a concrete op param"):
        rank.tl.full((4,), x.data)


def test_an_unused_read_is_refused_at_the_next_op_at_the_line_that_read_it(
        rank: RankTracer) -> None:
    x = rank.tl.load(Pointer("x_ptr"), shape=(4,))
    line = here() + 1
    assert x.data is not None  # an identity test: invisible to the stand-in
    with pytest.raises(DataDependentControlFlow) as info:
        rank.tl.exp(x)
    assert str(info.value).startswith(f"test_tensor.py:{line}: rank (cube 0, pe 0): error: "
                                      "the kernel reads a tensor's data (handle.data) other "
                                      "than to pass it to TensorHandle(data=...)")


def test_a_read_passed_to_a_view_is_fine_and_may_be_passed_again(rank: RankTracer) -> None:
    x = rank.tl.load(Pointer("x_ptr"), shape=(2, 2))
    d = x.data
    a = TensorHandle(id=x.id, shape=(4,), dtype="f16", data=d)
    b = TensorHandle(id=x.id, shape=(1, 4), dtype="f16", data=d)
    rank.tl.exp(a)
    rank.tl.exp(b)
    rank.check_data_reads()  # what trace() does when the rank ends


def test_a_view_takes_only_a_handles_data(rank: RankTracer) -> None:
    x = rank.tl.load(Pointer("x_ptr"), shape=(2, 2))
    with pytest.raises(UnsupportedOp, match=r"TensorHandle\(data=<ndarray>\) is not supported "
                                            r"by meshproof's tl model; meshproof's tensors "
                                            r"carry no data"):
        TensorHandle(id=x.id, shape=(4,), dtype="f16", data=np.zeros(4))
    other = tracer_here(pe=1)
    tensor._ACTIVE.append(other)
    try:
        foreign = other.tl.load(Pointer("x_ptr"), shape=(2, 2)).data
    finally:
        tensor._ACTIVE.pop()
    with pytest.raises(UnsupportedOp, match=r"TensorHandle\(data=<TensorData>\)"):
        TensorHandle(id=x.id, shape=(4,), dtype="f16", data=foreign)


def test_data_is_not_a_slot_and_handles_stay_immutable(rank: RankTracer) -> None:
    x = rank.tl.load(Pointer("x_ptr"), shape=(4,))
    assert "data" not in TensorHandle.__slots__
    with pytest.raises(UnsupportedOp, match="assigning 'data' of a tensor handle"):
        x.data = None
    d = x.data
    with pytest.raises(DataDependentControlFlow, match=r"\(\.x = \.\.\.\)"):
        d.x = 1
    TensorHandle(id=x.id, shape=(4,), dtype="f16", data=d)
