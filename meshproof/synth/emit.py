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
from meshproof.synth.order import Ordered, TaskKind
from meshproof.synth.plan import CheckedPlan

KERNEL_NAME = "synthesized"


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


def program_rows(checked: CheckedPlan, ordered: Ordered) -> tuple[str, ...]:
    """One instruction string per rank: S<dir><state> send, R<dir><state> receive into,
    M<out>=<a>+<b> merge, O<state> store."""
    rows = checked.plan.rows
    out: list[str] = []
    for program in ordered.programs:
        words: list[str] = []
        for task in program:
            row = rows[task.row]
            if task.kind is TaskKind.SEND:
                assert task.dir is not None
                words.append(f"S{task.dir.value}{row.args[0]}")
            elif task.kind is TaskKind.RECV:
                assert task.dir is not None
                words.append(f"R{task.dir.value}{row.out}")
            elif task.kind is TaskKind.MERGE:
                words.append(f"M{row.out}={row.args[0]}+{row.args[1]}")
            else:
                words.append(f"O{row.args[0]}")
        out.append(" ".join(words))
    return tuple(out)


def emit_kernel(graph: RankGraph, rows: tuple[str, ...], info: EmitInfo) -> str:
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
    return f'''"""Decode merge kernel synthesised by `meshproof synthesize` (regenerate it).

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

from __future__ import annotations

from typing import Any

from meshproof.kernels.attention_parts import (
    load_kv,
    load_q,
    merge,
    partial_attention,
    softmax_scale,
    store_output,
)

N_RANKS = {graph.n}
# One row per launch-local rank, in program order: S<dir><state> sends a state's m, l, o;
# R<dir><state> receives one into <state>; M<out>=<a>+<b> merges; O<state> stores it.
# State r (< N_RANKS) is rank r's own partial.
PLAN = (
{table}
)


def {KERNEL_NAME}(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any, {size_params},
                {shape}, sm_scale: float | None = None, msg_dtype: str = "f32", *,
                tl: Any) -> None:
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
    states = {{rank: own}}
    for word in PLAN[rank].split():
        code = word[0]
        if code == "S":
            for value in states[int(word[2:])]:
                tl.send(dir=word[1], src=value)
        elif code == "R":
            states[int(word[2:])] = tuple(
                tl.recv(dir=word[1], shape=like.shape, dtype="f32") for like in own)
        elif code == "M":
            out, _, pair = word[1:].partition("=")
            a, _, b = pair.partition("+")
            states[int(out)] = merge(states[int(a)], states[int(b)], tl)
        else:
            _m, ell, o = states[int(word[1:])]
            store_output(o_ptr, o, ell, S_q, h_q, h_kv, d_head, tl)
'''
