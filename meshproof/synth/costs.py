"""What each block of a synthesised kernel costs, by `sim.timing`'s own op costs.

A one-PE probe kernel made of the emitted kernel's building blocks (the partial, one
merge, the store) is traced, and `sim.timing.op_cost` prices its ops; a message's send and
recv are priced the same way. The list scheduler adds these costs op by op, in the order
`run_timing` does, so its prediction is `simulate`'s latency of the emitted file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from meshproof.errors import SynthesisError
from meshproof.kernels.attention_parts import (
    load_kv,
    load_q,
    merge,
    partial_attention,
    softmax_scale,
    store_output,
)
from meshproof.model.hardware import HardwareProfile, LinkCost
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import KernelRef, site_of
from meshproof.model.schedule import Op, OpKind, Scalar
from meshproof.model.topology import System
from meshproof.model.trace import trace
from meshproof.sim.timing import arg_shapes, op_cost

SIZE_NAMES = ("S_q", "S_kv_per_rank", "h_q", "h_kv", "d_head")
MERGE_OPS = 11      # attention_parts.merge: maximum, 2 x (sub, exp), 3 on ℓ, 3 on o


@dataclass(frozen=True, slots=True)
class BlockCosts:
    """Seconds, op by op, of each block a rank runs; message bytes of m, ℓ, o."""

    partial: tuple[float, ...]
    merge: tuple[float, ...]
    store: tuple[float, ...]
    send: float                      # a send's op cost (its injection is per link)
    recv: float
    message_bytes: tuple[int, int, int]
    links: tuple[tuple[str, LinkCost], ...]

    def link(self, cls: str) -> LinkCost:
        return dict(self.links)[cls]

    @staticmethod
    def total(costs: tuple[float, ...], start: float = 0.0) -> float:
        """`start` plus the costs one by one, as the timing run adds them."""
        t = start
        for c in costs:
            t = t + c
        return t


def probe(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int, S_kv_per_rank: int,
          h_q: int, h_kv: int, d_head: int, *, tl: Any) -> None:
    """The emitted kernel's blocks on one rank: partial, one merge, store."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    state = partial_attention(q, k_t, v, softmax_scale(d_head, None), tl)
    _m, ell, o = merge(state, state, tl)
    store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)


def block_costs(sizes: tuple[tuple[str, Scalar], ...], hw: HardwareProfile,
                system: System) -> BlockCosts:
    kernel = KernelRef("synth-probe", probe, site_of(probe))
    launch = build_launch(kernel, LaunchOptions(system=system, pes=1, wiring="pe_line",
                                                args=sizes, queue_depth=1))
    ops = trace(kernel, launch).programs[0].ops
    costs = _priced(ops, hw)
    first_merge = next(i for i, op in enumerate(ops) if op.kind is OpKind.MAXIMUM)
    end_merge = first_merge + MERGE_OPS
    if ops[end_merge].kind is not OpKind.DIV:
        raise SynthesisError("the probe's merge is not attention_parts.merge's 11 ops; "
                             "synthesize needs the built-ins' building blocks")
    triplet = (ops[first_merge], ops[first_merge + 7], ops[first_merge + 10])
    nbytes = tuple(math.prod(op.shape) * 4 for op in triplet)   # f32 on the wire
    send = replace(triplet[0], kind=OpKind.SEND, out=None, nbytes=nbytes[0])
    recv = replace(triplet[0], kind=OpKind.RECV)
    return BlockCosts(
        partial=costs[:first_merge], merge=costs[first_merge:end_merge],
        store=costs[end_merge:], send=op_cost(send, (), hw), recv=op_cost(recv, (), hw),
        message_bytes=(nbytes[0], nbytes[1], nbytes[2]),
        links=(("intra_cube", hw.intra_cube), ("inter_cube", hw.inter_cube),
               ("inter_sip", hw.inter_sip)))


def _priced(ops: tuple[Op, ...], hw: HardwareProfile) -> tuple[float, ...]:
    return tuple(op_cost(op, shapes, hw) for op, shapes in zip(ops, arg_shapes(ops),
                                                                strict=True))
