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
    gqa_group,
    load_kv,
    load_q,
    merge,
    partial_attention,
    row_chunk,
    softmax_scale,
    store_output,
    store_row_chunk,
    store_rows,
)
from meshproof.model.hardware import HardwareProfile, LinkCost
from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import KernelRef, site_of
from meshproof.model.schedule import Op, OpKind, Scalar
from meshproof.model.topology import System
from meshproof.model.trace import trace
from meshproof.model.tracer import KernelFn
from meshproof.sim.timing import arg_shapes, op_cost

SIZE_NAMES = ("S_q", "S_kv_per_rank", "h_q", "h_kv", "d_head")
MERGE_OPS = 11      # attention_parts.merge: maximum, 2 x (sub, exp), 3 on ℓ, 3 on o
WHOLE_OPS = 8       # the merge's ops on m and ℓ; the 3 on o run once per chunk of o


@dataclass(frozen=True, slots=True)
class BlockCosts:
    """Seconds, op by op, of each block a rank runs; message bytes of m, ℓ, o.

    With `chunks` K > 1, o travels and merges as K row chunks (attention_parts.row_chunk,
    views that cost 0): `merge` is the 8 ops on m and ℓ then (mul, mul, add) per chunk,
    `message_bytes` is m, ℓ, then one entry per chunk, and each chunk is stored on its own
    (`store_chunks`)."""

    partial: tuple[float, ...]
    merge: tuple[float, ...]
    store: tuple[float, ...]
    send: float                      # a send's op cost (its injection is per link)
    recv: float
    message_bytes: tuple[int, ...]
    links: tuple[tuple[str, LinkCost], ...]
    chunks: int = 1
    rows: int = 0                    # rows of o per chunk (K > 1)
    store_chunks: tuple[tuple[float, ...], ...] = ()
    split: bool = False              # m and ℓ split by rows too: K independent states

    @property
    def stores(self) -> tuple[tuple[float, ...], ...]:
        """The op costs of each store block, in program order (one block unchunked)."""
        return self.store_chunks or (self.store,)

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


def chunk_probe(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, chunks: int, *,
                tl: Any) -> None:
    """The chunked kernel's blocks on one rank, op for op as emit.py's interpreter makes
    them: partial, one merge (m and ℓ whole, o chunk by chunk), the chunk stores."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    m, ell, o = partial_attention(q, k_t, v, softmax_scale(d_head, None), tl)
    rows = h_kv * S_q * gqa_group(h_q, h_kv) // chunks
    parts = [row_chunk(o, c, rows, tl) for c in range(chunks)]
    m_c = tl.maximum(m, m)
    alpha = tl.exp(m - m_c)
    beta = tl.exp(m - m_c)
    ell_c = ell * alpha + ell * beta
    merged = [parts[c] * row_chunk(alpha, c, rows, tl) + parts[c] * row_chunk(beta, c, rows, tl)
              for c in range(chunks)]
    for c in range(chunks):
        store_row_chunk(o_ptr, merged[c], ell_c, c, rows, tl)


def split_probe(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, S_q: int,
                S_kv_per_rank: int, h_q: int, h_kv: int, d_head: int, chunks: int, *,
                tl: Any) -> None:
    """The split kernel's blocks on one rank: partial, one merge of chunk 0's (m, ℓ, o)
    rows, each chunk's store."""
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    own = partial_attention(q, k_t, v, softmax_scale(d_head, None), tl)
    rows = h_kv * S_q * gqa_group(h_q, h_kv) // chunks
    parts = [tuple(row_chunk(x, c, rows, tl) for x in own) for c in range(chunks)]
    merged = merge(parts[0], parts[0], tl)
    for c in range(chunks):
        store_rows(o_ptr, merged[2], merged[1], c, tl)


def chunkable(sizes: dict[str, Scalar], chunks: int) -> bool:
    """Whether o splits into `chunks` row chunks that views select exactly and that store
    at their offsets: the output's order is o's (S_q == 1 or h_kv == 1), the chunks are
    whole rows that nest with the (h_kv, S_q·group) rows."""
    S_q, h_q, h_kv = (int(sizes[k] or 0) for k in ("S_q", "h_q", "h_kv"))
    if chunks < 2 or (S_q != 1 and h_kv != 1) or h_kv < 1 or h_q % h_kv:
        return False
    per_kv = S_q * (h_q // h_kv)
    total = h_kv * per_kv
    if total % chunks:
        return False
    rows = total // chunks
    return per_kv % rows == 0 or rows % per_kv == 0


def block_costs(sizes: tuple[tuple[str, Scalar], ...], hw: HardwareProfile,
                system: System, chunks: int = 1, split: bool = False) -> BlockCosts:
    if chunks > 1 and split:
        return _split_costs(sizes, hw, system, chunks)
    if chunks > 1:
        return _chunk_costs(sizes, hw, system, chunks)
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


def _chunk_costs(sizes: tuple[tuple[str, Scalar], ...], hw: HardwareProfile,
                 system: System, chunks: int) -> BlockCosts:
    whole = block_costs(sizes, hw, system)
    ops, costs, first = _probe("synth-chunk-probe", chunk_probe, sizes, hw, system, chunks)
    end = first + WHOLE_OPS + 3 * chunks
    if ops[first + WHOLE_OPS - 1].kind is not OpKind.ADD or (len(ops) - end) % chunks:
        raise SynthesisError("the chunk probe's merge is not attention_parts.merge's ops; "
                             "synthesize needs the built-ins' building blocks")
    chunk = ops[first + WHOLE_OPS]
    rows = chunk.shape[0]
    nbytes = (*whole.message_bytes[:2],
              *(math.prod(chunk.shape) * 4 for _ in range(chunks)))
    stores = _stores(costs, end, chunks)
    return replace(whole, merge=costs[first:end], store=stores[0], message_bytes=nbytes,
                   chunks=chunks, rows=rows, store_chunks=stores)


def _split_costs(sizes: tuple[tuple[str, Scalar], ...], hw: HardwareProfile,
                 system: System, chunks: int) -> BlockCosts:
    whole = block_costs(sizes, hw, system)
    ops, costs, first = _probe("synth-split-probe", split_probe, sizes, hw, system, chunks)
    end = first + MERGE_OPS
    if ops[end - 1].kind is not OpKind.ADD or (len(ops) - end) % chunks:
        raise SynthesisError("the split probe's merge is not attention_parts.merge's ops; "
                             "synthesize needs the built-ins' building blocks")
    triplet = (ops[first], ops[first + 7], ops[first + 10])
    nbytes = tuple(math.prod(op.shape) * 4 for op in triplet)
    stores = _stores(costs, end, chunks)
    return replace(whole, merge=costs[first:end], store=stores[0], message_bytes=nbytes,
                   chunks=chunks, rows=triplet[2].shape[0], store_chunks=stores, split=True)


def _probe(name: str, probe: KernelFn, sizes: tuple[tuple[str, Scalar], ...],
           hw: HardwareProfile, system: System, chunks: int
           ) -> tuple[list[Op], tuple[float, ...], int]:
    """A chunked probe's one-rank trace without its views, those ops' costs, and the index
    of its merge's first op."""
    kernel = KernelRef(name, probe, site_of(probe))
    launch = build_launch(kernel, LaunchOptions(system=system, pes=1, wiring="pe_line",
                                                args=(*sizes, ("chunks", chunks)),
                                                queue_depth=1))
    ops = [op for op in trace(kernel, launch).programs[0].ops if op.kind is not OpKind.VIEW]
    first = next(i for i, op in enumerate(ops) if op.kind is OpKind.MAXIMUM)
    return ops, _priced(tuple(ops), hw), first


def _stores(costs: tuple[float, ...], end: int, chunks: int) -> tuple[tuple[float, ...], ...]:
    """The costs of each chunk's store: equal runs after the merge (which ends at `end`)."""
    per_store = (len(costs) - end) // chunks
    return tuple(costs[end + c * per_store:end + (c + 1) * per_store] for c in range(chunks))


def _priced(ops: tuple[Op, ...], hw: HardwareProfile) -> tuple[float, ...]:
    return tuple(op_cost(op, shapes, hw) for op, shapes in zip(ops, arg_shapes(ops),
                                                                strict=True))
