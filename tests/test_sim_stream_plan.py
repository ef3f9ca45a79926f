"""The evaluator's plan (sim/stream_plan.py): which elementwise ops write their result over
a dying operand's array (`donors`)."""

from __future__ import annotations

import pytest
from helpers import trace_kernel

from meshproof.model.channels import derive_channels
from meshproof.model.schedule import Const, DType, Op, OpKind, SourceLoc, ValueRef
from meshproof.sim import numerics
from meshproof.sim.api import SimConfig, simulate
from meshproof.sim.checking import plan_numerics
from meshproof.sim.stream_plan import donors

SHAPE = (2, 8)
HERE = SourceLoc("k.py", 1)


def _op(index: int, kind: OpKind, args: tuple[int | float, ...],
        shape: tuple[int, ...] = SHAPE, **kw: object) -> Op:
    refs = tuple(Const(a) if isinstance(a, float) else ValueRef(a) for a in args)
    out = None if kind in (OpKind.SEND, OpKind.STORE) else index
    return Op(index, kind, refs, out, shape, DType.F32, HERE, **kw)


def _dot(index: int) -> Op:
    return Op(index, OpKind.DOT, (ValueRef(90), ValueRef(91)), index, SHAPE, DType.F32, HERE)


def test_a_decode_overwrites_its_scores_in_scale_sub_and_exp_with_the_same_numbers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """scores * scale, s - m and exp(...) each overwrite their dying operand (no new
    array): the outputs are those of new arrays, to the bit."""
    schedule = trace_kernel("mesh_mlo_1d", args=(
        ("S_kv_per_rank", 4096), ("d_head", 32), ("h_q", 4), ("h_kv", 1),
        ("p_dtype", "f32"), ("key_tile", 1024)))
    rank = plan_numerics(schedule, derive_channels(schedule), 1 << 30).classes[0].plan.ranks[0]
    big = {op.index: op.kind for op in rank.ops if op.shape == (1, 4, 4096)}
    over = [big[op.index] for op in rank.ops if op.index in big and rank.donors[op.index] >= 0]
    assert over == [OpKind.MUL, OpKind.SUB, OpKind.EXP]
    fast = simulate(schedule, SimConfig(timing=False))
    monkeypatch.setattr(numerics, "donors", lambda ops, _: (-1,) * len(ops))
    new = simulate(schedule, SimConfig(timing=False))
    assert fast.numeric is not None and new.numeric is not None and fast.numeric.ok
    assert [r.rel_err for r in fast.numeric.per_rank] == [r.rel_err for r in new.numeric.per_rank]


def test_an_operand_that_is_handed_on_or_used_later_is_never_overwritten() -> None:
    """The realistic mistakes: overwriting a value a reshape or a send still shares, one
    used again later, a loaded or received array, or one the result outgrows."""
    ops = (
        _dot(0), _op(1, OpKind.RESHAPE, (0,)), _op(2, OpKind.MUL, (0, 0.5)),      # aliased
        _dot(3), _op(4, OpKind.SEND, (3,)), _op(5, OpKind.EXP, (3,)),              # sent
        _dot(6), _op(7, OpKind.EXP, (6,)), _op(8, OpKind.ADD, (6, 7)),              # used later
        _op(9, OpKind.LOAD, (), ptr="q_ptr"), _op(10, OpKind.NEG, (9,)),            # loaded
        _op(11, OpKind.MAX, (10,), (2, 1), axis=1), _op(12, OpKind.SUB, (11, 10)),  # outgrown
        _op(13, OpKind.SIGMOID, (12,)),                                            # no ufunc
    )
    assert donors(ops, frozenset()) == (-1, -1, -1, -1, -1, -1, -1, -1, 0, -1, -1, -1, 1, -1)


def test_the_streamed_operand_is_never_overwritten() -> None:
    ops = (_dot(0), _op(1, OpKind.EXP, (0,)))
    assert donors(ops, frozenset()) == (-1, 0)
    assert donors(ops, frozenset({0})) == (-1, -1)
