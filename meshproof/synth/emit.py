"""Emission: a kernel file with the built-ins' interface whose schedule is a table.

Each launch-local rank's row lists its instructions in program order; the kernel
interprets its row with Python control flow on constants, so tracing it yields exactly the
scheduled straight-line program. The file is a plain kernel: meshproof proves it like any
other, and that verdict, not the synthesiser, is the certificate (spec/synthesis.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.model.schedule import Scalar
from meshproof.synth.graph import RankGraph
from meshproof.synth.order import Ordered, TaskKind, components
from meshproof.synth.plan import CheckedPlan, RowKind

KERNEL_NAME = "synthesized"
# Past this many ranks the kernel does not declare its plan rows: an op attributed to its
# rank's own row is a distinct op per rank, so the semantic analysis shares less work
# across ranks (16x16: exactly_once_merge 7.5 s with rows, 3.1 s without).
PLAN_ROWS_MAX_RANKS = 256


@dataclass(frozen=True, slots=True)
class EmitInfo:
    """What the written file's docstring records (a note: `simulate` re-measures)."""

    plan: str
    rule: str
    profile: str
    sizes: tuple[tuple[str, Scalar], ...]
    depth: int
    wiring: str
    launch_flags: str
    predicted_s: float
    bound_s: float
    candidates: int


def program_rows(checked: CheckedPlan, ordered: Ordered) -> tuple[tuple[str, ...],
                                                              tuple[tuple[int, int, int], ...]]:
    """One instruction string per rank, and the merges (out, a, b). Words: S<dir><c><state>
    sends component c (m, l or o) of a state; R<dir><c><state> receives it; M<p>:<out> runs
    op p of attention_parts.merge's 11 for state out; O<state> stores. Chunked (o in K row
    chunks): S<dir><c>:<state> and R<dir><c>:<state> with c one of m, l, o0, o1, ...;
    O<chunk>:<state> stores one chunk."""
    rows = checked.plan.rows
    chunked = ordered.chunks > 1
    comps = components(ordered.chunks)
    sep = ":" if chunked else ""
    out: list[str] = []
    merges = sorted((r.out, r.args[0], r.args[1]) for r in rows
                    if r.kind is RowKind.MERGE and r.out is not None)
    for program in ordered.programs:
        words: list[str] = []
        for task in program:
            row = rows[task.row]
            if task.kind is TaskKind.SEND:
                assert task.dir is not None
                words.append(f"S{task.dir.value}{comps[task.part]}{sep}{row.args[0]}")
            elif task.kind is TaskKind.RECV:
                assert task.dir is not None
                words.append(f"R{task.dir.value}{comps[task.part]}{sep}{row.out}")
            elif task.kind is TaskKind.MERGE_OP:
                words.append(f"M{task.part}:{row.out}")
            else:
                words.append(f"O{task.part}:{row.args[0]}" if chunked else f"O{row.args[0]}")
        out.append(" ".join(words))
    return tuple(out), tuple(merges)


def emit_kernel(graph: RankGraph, rows: tuple[str, ...],
                merges: tuple[tuple[int, int, int], ...], info: EmitInfo) -> str:
    """The kernel file's text: the same bytes for the same inputs."""
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
    softmax_scale,
    store_output,
)

N_RANKS = {graph.n}
# if True, ops the interpreter makes are attributed to the rank's PLAN row (model/tracer.py),
# so a counterexample names the row: rank r's row is line PLAN_LINE + r of this file
MESHPROOF_PLAN_ROWS = {graph.n <= PLAN_ROWS_MAX_RANKS}
PLAN_LINE = @PLAN_LINE@
# One row per launch-local rank, in program order: S<dir><c><state> sends component c (m,
# l or o) of a state; R<dir><c><state> receives it; M<p>:<state> runs op p of the merge
# that makes <state> (attention_parts.merge's ops, one at a time); O<state> stores it.
# State r (< N_RANKS) is rank r's own partial.
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
    values: dict[tuple[int, str], Any] = {{(rank, c): own[i] for i, c in enumerate("mlo")}}
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
'''
    lines = text.split("\n")
    first = lines.index("PLAN = (") + 2     # 1-based line of rank 0's row
    return text.replace("@PLAN_LINE@", str(first))
