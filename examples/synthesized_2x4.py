"""Decode merge kernel synthesised by `meshproof synthesize` (regenerate it).

plan: columns first, segments [0,1]x[1,2] (list-scheduled, forward rule; 59 candidate(s) ranked)
launch: --system 1x4x4 --wiring cube_mesh --mesh 2x4 --cube-start 0 --queue-depth 4
wiring: cube_mesh; 8 ranks; queue depth D = 4
profile: default (assumed, not measured)
sizes: S_q=1, S_kv_per_rank=16, h_q=1, h_kv=1, d_head=8
predicted latency: 6.358 us; lower bound: 5.355 us (gap 1.19x)

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
    softmax_scale,
    store_output,
)

N_RANKS = 8
# if True, ops the interpreter makes are attributed to the rank's PLAN row (model/tracer.py),
# so a counterexample names the row: rank r's row is line PLAN_LINE + r of this file
MESHPROOF_PLAN_ROWS = True
PLAN_LINE = 37
# One row per launch-local rank, in program order: S<dir><c><state> sends component c (m,
# l or o) of a state; R<dir><c><state> receives it; M<p>:<state> runs op p of the merge
# that makes <state> (attention_parts.merge's ops, one at a time); O<state> stores it.
# State r (< N_RANKS) is rank r's own partial.
PLAN = (
    'SEm0 SEl0 SEo0 REm32 REl32 REo32 O32',
    'RWm14 M0:15 SSm15 RWl14 RWo14 M1:15 M3:15 M2:15 M4:15 M5:15 M6:15 M8:15 M9:15 RSm17 M7:15 SSl15 M10:15 SSo15 M0:20 SEm20 M1:20 M3:20 M2:20 M4:20 M5:20 M8:20 RSl17 M6:20 RSo17 M9:20 REm25 M7:20 SEl20 M10:20 SEo20 M0:28 SWm28 M1:28 M3:28 M2:28 M4:28 M5:28 M8:28 REl25 M6:28 REo25 M9:28 M7:28 SWl28 M10:28 SWo28 O28',
    'REm12 M0:13 SSm13 REl12 REo12 M1:13 M3:13 M2:13 M4:13 M5:13 M6:13 M8:13 M9:13 RSm19 M7:13 SSl13 M10:13 SSo13 M0:22 SWm22 M1:22 M3:22 M2:22 M4:22 M5:22 M8:22 RSl19 M6:22 RSo19 M9:22 RWm24 M7:22 SWl22 M10:22 SWo22 M0:29 SEm29 M1:29 M3:29 M2:29 M4:29 M5:29 M8:29 RWl24 M6:29 RWo24 M9:29 M7:29 SEl29 M10:29 SEo29 O29',
    'SWm3 SWl3 SWo3 RWm33 RWl33 RWo33 O33',
    'SEm4 SEl4 SEo4 REm34 REl34 REo34 O34',
    'RWm10 M0:11 SNm11 RWl10 RWo10 M1:11 M3:11 M2:11 M4:11 M5:11 M6:11 M8:11 M9:11 RNm16 M7:11 SNl11 M10:11 SNo11 M0:21 SEm21 M1:21 M3:21 M2:21 M4:21 M5:21 M8:21 RNl16 M6:21 RNo16 M9:21 REm27 M7:21 SEl21 M10:21 SEo21 M0:30 SWm30 M1:30 M3:30 M2:30 M4:30 M5:30 M8:30 REl27 M6:30 REo27 M9:30 M7:30 SWl30 M10:30 SWo30 O30',
    'REm8 M0:9 SNm9 REl8 REo8 M1:9 M3:9 M2:9 M4:9 M5:9 M6:9 M8:9 M9:9 RNm18 M7:9 SNl9 M10:9 SNo9 M0:23 SWm23 M1:23 M3:23 M2:23 M4:23 M5:23 M8:23 RNl18 M6:23 RNo18 M9:23 RWm26 M7:23 SWl23 M10:23 SWo23 M0:31 SEm31 M1:31 M3:31 M2:31 M4:31 M5:31 M8:31 RWl26 M6:31 RWo26 M9:31 M7:31 SEl31 M10:31 SEo31 O31',
    'SWm7 SWl7 SWo7 RWm35 RWl35 RWo35 O35',
)
# merged state: (its two inputs)
MERGES = {
    9: (6, 8),
    11: (5, 10),
    13: (2, 12),
    15: (1, 14),
    20: (15, 17),
    21: (11, 16),
    22: (13, 19),
    23: (9, 18),
    28: (20, 25),
    29: (22, 24),
    30: (21, 27),
    31: (23, 26),
}


def synthesized(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any,
                S_q: int = 1, S_kv_per_rank: int = 16, h_q: int = 1, h_kv: int = 1, d_head: int = 8,
                mesh_rows: int = 2, mesh_cols: int = 4, cube_start: int = 0, rank_axis: int = 1,
                sm_scale: float | None = None, msg_dtype: str = "f32", *, tl: Any) -> None:
    """Synthesised all-reduce of (m, l, o) triplets: columns first, segments [0,1]x[1,2]."""
    if mesh_rows * mesh_cols != N_RANKS or rank_axis != 1:
        raise ValueError(f"this kernel was synthesised for {N_RANKS} ranks on rank_axis "
                         f"1; run meshproof synthesize for this launch")
    if msg_dtype != "f32":
        raise ValueError("this kernel sends f32 messages; synthesise another for "
                         f"msg_dtype={msg_dtype}")
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
    values: dict[tuple[int, str], Any] = {(rank, c): own[i] for i, c in enumerate("mlo")}
    meshproof_plan_row = PLAN_LINE + rank  # noqa: F841 (read by the tracer)
    for word in PLAN[rank].split():
        code = word[0]
        if code == "S":
            tl.send(dir=word[1], src=values[(int(word[3:]), word[2])])
        elif code == "R":
            like = own["mlo".index(word[2])]
            values[(int(word[3:]), word[2])] = tl.recv(dir=word[1], shape=like.shape,
                                                       dtype="f32")
        elif code == "M":
            op, _, out = word[1:].partition(":")
            _merge_op(int(op), int(out), values, tl)
        else:
            state = int(word[1:])
            store_output(o_ptr, values[(state, "o")], values[(state, "l")], S_q, h_q, h_kv,
                         d_head, tl)


def _merge_op(op: int, c: int, v: dict[tuple[int, str], Any], tl: Any) -> None:
    """Op `op` of attention_parts.merge(state a, state b) -> state c, in its order."""
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
    elif op == 8:
        v[(c, "o_a")] = v[(a, "o")] * v[(c, "alpha")]
    elif op == 9:
        v[(c, "o_b")] = v[(b, "o")] * v[(c, "beta")]
    else:
        v[(c, "o")] = v[(c, "o_a")] + v[(c, "o_b")]
