"""Emission of a chunked kernel (o in row chunks, tl.view; spec/synthesis.md §2): the same
table-driven interpreter as emit.py's, whose words name a chunk of o and whose merges and
stores run chunk by chunk (attention_parts.row_chunk, store_row_chunk)."""

from __future__ import annotations

from meshproof.synth.emit_text import KERNEL_NAME, PLAN_ROWS_MAX_RANKS, EmitInfo
from meshproof.synth.graph import RankGraph


def emit_chunked_kernel(graph: RankGraph, rows: tuple[str, ...],
                        merges: tuple[tuple[int, int, int], ...], info: EmitInfo,
                        chunks: int) -> str:
    """The chunked kernel file's text: the same bytes for the same inputs."""
    sizes = dict(info.sizes)
    size_params = ", ".join(f"{k}: int = {sizes[k]!r}" for k in
                            ("S_q", "S_kv_per_rank", "h_q", "h_kv", "d_head"))
    if graph.mesh is not None:
        shape = (f"mesh_rows: int = {graph.mesh[0]}, mesh_cols: int = {graph.mesh[1]}, "
                 f"cube_start: int = 0, rank_axis: int = {graph.rank_axis}")
        count = "mesh_rows * mesh_cols"
    else:
        shape = f"n_ranks: int = {graph.n}, rank_axis: int = {graph.rank_axis}, " \
                "cube_start: int = 0"
        count = "n_ranks"
    gap = info.predicted_s / info.bound_s if info.bound_s > 0 else 0.0
    size_text = ", ".join(f"{k}={v!r}" for k, v in info.sizes)
    per_kv = int(sizes["S_q"] or 0) * (int(sizes["h_q"] or 0) // int(sizes["h_kv"] or 1))
    chunk_rows = int(sizes["h_kv"] or 0) * per_kv // chunks
    table = "\n".join(f"    {row!r}," for row in rows)
    merge_table = "\n".join(f"    {c}: ({a}, {b})," for c, a, b in merges)
    text = f'''"""Decode merge kernel synthesised by `meshproof synthesize` (regenerate it).

plan: {info.plan} (list-scheduled, {info.rule} rule; {info.candidates} candidate(s) ranked)
launch: {info.launch_flags}
wiring: {info.wiring}; {graph.n} ranks; queue depth D = {info.depth}
profile: {info.profile}
sizes: {size_text}
predicted latency: {info.predicted_s * 1e6:.3f} us; lower bound: {info.bound_s * 1e6:.3f} us \
(gap {gap:.2f}x)

The synthesiser is not trusted: this file plus its `meshproof verify` verdict is the
certificate. The numbers above are a note; `meshproof simulate` re-measures.
"""
# ruff: noqa: E501  (each rank's PLAN row is one line: counterexamples name that line)

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import (
    load_kv,
    load_q,
    partial_attention,
    row_chunk,
    softmax_scale,
    store_row_chunk,
)

N_RANKS = {graph.n}
CHUNKS = {chunks}        # o travels, merges and is stored in this many row chunks (views)
CHUNK_ROWS = {chunk_rows}
# if True, ops the interpreter makes are attributed to the rank's PLAN row (model/tracer.py),
# so a counterexample names the row: rank r's row is line PLAN_LINE + r of this file
MESHPROOF_PLAN_ROWS = {graph.n <= PLAN_ROWS_MAX_RANKS}
PLAN_LINE = @PLAN_LINE@
# One row per launch-local rank, in program order: S<dir><c>:<state> sends component c (m,
# l, or chunk k of o as o<k>) of a state; R<dir><c>:<state> receives it; M<p>:<state> runs
# op p of the merge that makes <state> (attention_parts.merge's 8 ops on m and l, then
# o_a*alpha, o_b*beta and their sum per chunk: p = 8 + 3k + j); O<k>:<state> stores
# chunk k. State r (< N_RANKS) is rank r's own partial.
PLAN = (
{table}
)
# merged state: (its two inputs)
MERGES = {{
{merge_table}
}}


def {KERNEL_NAME}(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any,
                {size_params},
                {shape},
                sm_scale: float | None = None, msg_dtype: str = "f32", *, tl: Any) -> None:
    """Synthesised all-reduce of (m, l, o) triplets: {info.plan}."""
    if {count} != N_RANKS or rank_axis != {graph.rank_axis}:
        raise ValueError(f"this kernel was synthesised for {{N_RANKS}} ranks on rank_axis "
                         f"{graph.rank_axis}; run meshproof synthesize for this launch")
    if S_q != 1 and h_kv != 1:
        raise ValueError("a chunked kernel stores o's row chunks at their offsets, which "
                         "needs S_q == 1 or h_kv == 1")
    if h_kv * S_q * (h_q // h_kv) != CHUNKS * CHUNK_ROWS:
        raise ValueError(f"this kernel was synthesised for {{CHUNKS}} chunks of {{CHUNK_ROWS}} "
                         "rows; run meshproof synthesize for these sizes")
    if msg_dtype != "f32":
        raise ValueError("this kernel sends f32 messages; synthesise another for "
                         f"msg_dtype={{msg_dtype}}")
    if rank_axis == 1:
        if tl.program_id(axis=0) != 0:
            return
        rank = tl.program_id(axis=1) - cube_start  # launch-local: program_id is physical
    else:
        rank = tl.program_id(axis=0)
    if not 0 <= rank < N_RANKS:
        return
    q = load_q(q_ptr, S_q, h_q, h_kv, d_head, tl)
    k_t, v = load_kv(k_ptr, v_ptr, S_kv_per_rank, h_kv, d_head, tl)
    own = partial_attention(q, k_t, v, softmax_scale(d_head, sm_scale), tl)
    values: dict[tuple[int, str], Any] = {{(rank, "m"): own[0], (rank, "l"): own[1]}}
    for k in range(CHUNKS):
        values[(rank, f"o{{k}}")] = row_chunk(own[2], k, CHUNK_ROWS, tl)
    meshproof_plan_row = PLAN_LINE + rank  # noqa: F841 (read by the tracer)
    for word in PLAN[rank].split():
        code = word[0]
        if code == "S":
            comp, _, state = word[2:].partition(":")
            tl.send(dir=word[1], src=values[(int(state), comp)])
        elif code == "R":
            comp, _, state = word[2:].partition(":")
            shape = own["ml".index(comp)].shape if comp in "ml" else (CHUNK_ROWS, d_head)
            values[(int(state), comp)] = tl.recv(dir=word[1], shape=shape, dtype="f32")
        elif code == "M":
            op, _, out = word[1:].partition(":")
            _merge_op(int(op), int(out), values, tl)
        else:
            chunk, _, state = word[1:].partition(":")
            store_row_chunk(o_ptr, values[(int(state), f"o{{chunk}}")],
                            values[(int(state), "l")], int(chunk), CHUNK_ROWS, tl)


def _merge_op(op: int, c: int, v: dict[tuple[int, str], Any], tl: Any) -> None:
    """Op `op` of attention_parts.merge(state a, state b) -> state c, in its order, with o
    merged chunk by chunk (op 8 + 3k + j: j of o_a*alpha, o_b*beta, sum for chunk k)."""
    a, b = MERGES[c]
    if op == 0:
        v[(c, "m")] = tl.maximum(v[(a, "m")], v[(b, "m")])
    elif op == 1:
        v[(c, "d_a")] = v[(a, "m")] - v[(c, "m")]
    elif op == 2:
        v[(c, "alpha")] = tl.exp(v[(c, "d_a")])
    elif op == 3:
        v[(c, "d_b")] = v[(b, "m")] - v[(c, "m")]
    elif op == 4:
        v[(c, "beta")] = tl.exp(v[(c, "d_b")])
    elif op == 5:
        v[(c, "l_a")] = v[(a, "l")] * v[(c, "alpha")]
    elif op == 6:
        v[(c, "l_b")] = v[(b, "l")] * v[(c, "beta")]
    elif op == 7:
        v[(c, "l")] = v[(c, "l_a")] + v[(c, "l_b")]
    else:
        k, j = divmod(op - 8, 3)
        if j == 0:
            v[(c, f"oa{{k}}")] = v[(a, f"o{{k}}")] * row_chunk(v[(c, "alpha")], k, CHUNK_ROWS, tl)
        elif j == 1:
            v[(c, f"ob{{k}}")] = v[(b, f"o{{k}}")] * row_chunk(v[(c, "beta")], k, CHUNK_ROWS, tl)
        else:
            v[(c, f"o{{k}}")] = v[(c, f"oa{{k}}")] + v[(c, f"ob{{k}}")]
'''
    lines = text.split("\n")
    first = lines.index("PLAN = (") + 2     # 1-based line of rank 0's row
    return text.replace("@PLAN_LINE@", str(first))
