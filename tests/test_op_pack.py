"""model/op_pack.py: traced programs survive the trip to plain tuples and back unchanged;
and schedules pickle (the wiring's lookup table is rebuilt), as isolation and the gate's
workers need."""

from __future__ import annotations

import math
import pickle
from typing import Any

import pytest
from helpers import trace_kernel

from meshproof.kernels import BUILTIN_KERNELS
from meshproof.model import tensor
from meshproof.model.op_pack import pack_programs, unpack_programs
from meshproof.model.schedule import Const, RankProgram, ValueRef
from meshproof.model.topology import Direction, Endpoint, System
from meshproof.model.tracer import KernelSite, Pointer, RankTracer
from meshproof.model.wiring import BUILTIN_WIRINGS, build_wiring


@pytest.mark.parametrize("name", sorted(BUILTIN_KERNELS))
def test_every_builtin_kernels_programs_round_trip(name: str) -> None:
    schedule = trace_kernel(name)
    packed = pack_programs(schedule.programs)
    assert unpack_programs(pickle.loads(pickle.dumps(packed))) == schedule.programs


def constants_and_ids() -> RankProgram:
    tracer = RankTracer(Endpoint(3, 1), (2, 4), KernelSite(__file__, "test_op_pack.py", 1))
    tl: Any = tracer.tl
    tensor._ACTIVE.append(tracer)
    try:
        x = tl.load(Pointer("x_ptr") + 2, shape=(2, 2), dtype="bf16")
        y = x + 1.0          # the constant 1.0 next to the value id 1 ...
        z = y * x - 0.0      # ... and ids next to -0.0 / nan / inf
        w = tl.maximum(z, float("-inf")) + float("nan")
        tl.send("N", tl.trans(w))
        tl.store(Pointer("o_ptr"), tl.full((2,), float("inf"), dtype="f16"))
    finally:
        tensor._ACTIVE.pop()
    return RankProgram(tracer.endpoint, tuple(tracer.ops))


def test_constants_are_never_confused_with_value_ids() -> None:
    program = constants_and_ids()
    (back,) = unpack_programs(pickle.loads(pickle.dumps(pack_programs((program,)))))
    assert back.endpoint == program.endpoint
    assert len(back.ops) == len(program.ops)
    for got, want in zip(back.ops, program.ops, strict=True):
        assert type(got) is type(want)
        for a, b in zip(got.args, want.args, strict=True):
            assert type(a) is type(b)
            if isinstance(a, Const) and isinstance(b, Const):
                assert a.value == b.value or (math.isnan(a.value) and math.isnan(b.value))
                assert math.copysign(1, a.value) == math.copysign(1, b.value)
            else:
                assert a == b
    assert back.ops[1].args == (ValueRef(0), Const(1.0))
    assert back.ops[-1].source == program.ops[-1].source
    assert [op.dir for op in back.ops if op.dir is not None] == [Direction.N]


@pytest.mark.parametrize("wiring", sorted(BUILTIN_WIRINGS))
def test_schedules_and_wirings_pickle(wiring: str) -> None:
    system = System(2, 4, 4, 8)
    built = build_wiring(wiring, system, 0, 4)
    back = pickle.loads(pickle.dumps(built))
    assert back == built
    for link in built:
        assert back.neighbour(link.src, link.dir) == link.dst
    assert back.neighbour(Endpoint(4, 0), Direction.W) == built.neighbour(Endpoint(4, 0),
                                                                          Direction.W)
    schedule = trace_kernel("mesh_mlo_2d")
    assert pickle.loads(pickle.dumps(schedule)) == schedule


def test_ops_shared_by_ranks_cross_once() -> None:
    # the tracer builds each distinct op once (OpTable): PE 0 of every cube of a 4x4 mesh
    # runs the same partial attention, and the pack holds one row per distinct op
    schedule = trace_kernel("mesh_mlo_2d", mesh="4x4")
    _, rows, programs = pack_programs(schedule.programs)
    n_ops = sum(len(p.ops) for p in schedule.programs)
    distinct = {id(op) for p in schedule.programs for op in p.ops}
    assert len(rows) == len(distinct) < n_ops / 3
    back = unpack_programs(pickle.loads(pickle.dumps((_, rows, programs))))
    assert back == schedule.programs
    # equal ops stay one object after the trip, so the back-ends' per-op caches still hit
    assert len({id(op) for p in back for op in p.ops}) == len(distinct)
