"""Decode merge kernel synthesised by `meshproof synthesize` (regenerate it).

plan: columns then rows, segments [0,1]x[1,2] (list-scheduled, forward rule; 109 candidate(s) ranked)
launch: --system 1x4x4 --wiring cube_mesh --mesh 2x4 --cube-start 0 --queue-depth 4
wiring: cube_mesh; 8 ranks; queue depth D = 4
profile: default (assumed, not measured)
sizes: S_q=1, S_kv_per_rank=16, h_q=1, h_kv=1, d_head=8
predicted latency: 6.307 us; lower bound: 5.755 us (gap 1.10x)

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
    'SSm0 SSl0 SSo0 RSm9 M0:10 SEm10 RSl9 RSo9 M1:10 M3:10 M2:10 M4:10 M5:10 M6:10 M8:10 M9:10 M7:10 SEl10 M10:10 SEo10 REm32 REl32 REo32 O32',
    'SSm1 SSl1 SSo1 RSm13 M0:14 RSl13 RSo13 M1:14 M3:14 M2:14 M4:14 M5:14 M6:14 M8:14 M9:14 M7:14 RWm24 M0:25 SEm25 M1:25 M3:25 M2:25 M4:25 M10:14 M5:25 M8:25 RWl24 REm29 M6:25 RWo24 M9:25 M7:25 SEl25 M10:25 SEo25 M0:30 SWm30 M1:30 M3:30 M2:30 M4:30 M5:30 M8:30 REl29 M6:30 REo29 M9:30 M7:30 SWl30 M10:30 SWo30 O30',
    'SSm2 SSl2 SSo2 RSm17 M0:18 RSl17 RSo17 M1:18 M3:18 M2:18 M4:18 M5:18 M6:18 M8:18 M9:18 M7:18 REm26 M0:27 SWm27 M1:27 M3:27 M2:27 M4:27 M10:18 M5:27 M8:27 REl26 RWm28 M6:27 REo26 M9:27 M7:27 SWl27 M10:27 SWo27 M0:31 SEm31 M1:31 M3:31 M2:31 M4:31 M5:31 M8:31 RWl28 M6:31 RWo28 M9:31 M7:31 SEl31 M10:31 SEo31 O31',
    'SSm3 SSl3 SSo3 RSm21 M0:22 SWm22 RSl21 RSo21 M1:22 M3:22 M2:22 M4:22 M5:22 M6:22 M8:22 M9:22 M7:22 SWl22 M10:22 SWo22 RWm33 RWl33 RWo33 O33',
    'SNm4 SNl4 SNo4 RNm8 M0:11 SEm11 RNl8 RNo8 M1:11 M3:11 M2:11 M4:11 M5:11 M6:11 M8:11 M9:11 M7:11 SEl11 M10:11 SEo11 REm42 REl42 REo42 O42',
    'SNm5 SNl5 SNo5 RNm12 M0:15 RNl12 RNo12 M1:15 M3:15 M2:15 M4:15 M5:15 M6:15 M8:15 M9:15 M7:15 RWm34 M0:35 SEm35 M1:35 M3:35 M2:35 M4:35 M10:15 M5:35 M8:35 RWl34 REm39 M6:35 RWo34 M9:35 M7:35 SEl35 M10:35 SEo35 M0:40 SWm40 M1:40 M3:40 M2:40 M4:40 M5:40 M8:40 REl39 M6:40 REo39 M9:40 M7:40 SWl40 M10:40 SWo40 O40',
    'SNm6 SNl6 SNo6 RNm16 M0:19 RNl16 RNo16 M1:19 M3:19 M2:19 M4:19 M5:19 M6:19 M8:19 M9:19 M7:19 REm36 M0:37 SWm37 M1:37 M3:37 M2:37 M4:37 M10:19 M5:37 M8:37 REl36 RWm38 M6:37 REo36 M9:37 M7:37 SWl37 M10:37 SWo37 M0:41 SEm41 M1:41 M3:41 M2:41 M4:41 M5:41 M8:41 RWl38 M6:41 RWo38 M9:41 M7:41 SEl41 M10:41 SEo41 O41',
    'SNm7 SNl7 SNo7 RNm20 M0:23 SWm23 RNl20 RNo20 M1:23 M3:23 M2:23 M4:23 M5:23 M6:23 M8:23 M9:23 M7:23 SWl23 M10:23 SWo23 RWm43 RWl43 RWo43 O43',
)
# merged state: (its two inputs)
MERGES = {
    10: (0, 9),
    11: (4, 8),
    14: (1, 13),
    15: (5, 12),
    18: (2, 17),
    19: (6, 16),
    22: (3, 21),
    23: (7, 20),
    25: (14, 24),
    27: (18, 26),
    30: (25, 29),
    31: (27, 28),
    35: (15, 34),
    37: (19, 36),
    40: (35, 39),
    41: (37, 38),
}


def synthesized(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any,
                S_q: int = 1, S_kv_per_rank: int = 16, h_q: int = 1, h_kv: int = 1, d_head: int = 8,
                mesh_rows: int = 2, mesh_cols: int = 4, cube_start: int = 0, rank_axis: int = 1,
                sm_scale: float | None = None, msg_dtype: str = "f32", *, tl: Any) -> None:
    """Synthesised all-reduce of (m, l, o) triplets: columns then rows, segments [0,1]x[1,2]."""
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
