"""The kernel file text the three emitters share (emit.py's whole o, emit_chunks.py's o in
row chunks, emit_split.py's split states): one template whose header, launch checks,
table-driven interpreter loop and merge ops are written once, so a fix to the emitted kernel
lands in every variant. Each emitter fills a `Variant` with what its file says differently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from meshproof.model.schedule import Scalar
from meshproof.synth.graph import RankGraph
from meshproof.synth.order import Task, TaskKind
from meshproof.synth.plan import Row

KERNEL_NAME = "synthesized"
# Past this many ranks the kernel does not declare its plan rows: an op attributed to its
# rank's own row is a distinct op per rank, so the semantic analysis shares less work
# across ranks (16x16: exactly_once_merge 7.5 s with rows, 3.1 s without).
PLAN_ROWS_MAX_RANKS = 256
# attention_parts.merge's ops in its order, on states A, B -> C (X.n: component n of X);
# the first M_L_OPS make m and l, the rest o
MERGE_OPS = (
    ("C.m", "tl.maximum(A.m, B.m)"),
    ("C.d_a", "A.m - C.m"),
    ("C.alpha", "tl.exp(C.d_a)"),
    ("C.d_b", "B.m - C.m"),
    ("C.beta", "tl.exp(C.d_b)"),
    ("C.l_a", "A.l * C.alpha"),
    ("C.l_b", "B.l * C.beta"),
    ("C.l", "C.l_a + C.l_b"),
    ("C.o_a", "A.o * C.alpha"),
    ("C.o_b", "B.o * C.beta"),
    ("C.o", "C.o_a + C.o_b"),
)
M_L_OPS = 8
_COMPONENT = re.compile(r"\b([ABC])\.(\w+)")


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


@dataclass(frozen=True, slots=True)
class Variant:
    """One emitter's part of the file. Multi-line fields are whole lines, each ending in a
    newline (empty: nothing); loop bodies are indented for the interpreter's branches."""

    imports: tuple[str, ...]    # attention_parts' names besides the loads and partial
    constants: str              # after N_RANKS
    plan_doc: str               # the comment on PLAN's words
    merges_doc: str             # the comment on MERGES
    merge_table: str            # MERGES' entries, joined by newlines (no last one)
    checks: str                 # launch checks before msg_dtype's
    values: str                 # the values dict, seeded with the rank's own partial
    send: str
    recv: str
    merge: str
    store: str
    merge_op: str               # _merge_op's def, docstring and set-up
    merge_ops: str              # its branches (merge_branches, plus any of the variant's)


def plan_word(task: Task, row: Row, comps: tuple[str, ...], tag: str, merge_tag: str,
              store_tag: str) -> str:
    """A task's PLAN word: S<dir><comp><tag><state> sends, R<dir><comp><tag><state> receives,
    M<op>:<merge_tag><state> merges, O<store_tag><state> stores (a variant's tags name the
    chunk, or are empty)."""
    if task.kind is TaskKind.SEND or task.kind is TaskKind.RECV:
        assert task.dir is not None
        code, state = ("S", row.args[0]) if task.kind is TaskKind.SEND else ("R", row.out)
        return f"{code}{task.dir.value}{comps[task.part]}{tag}{state}"
    if task.kind is TaskKind.MERGE_OP:
        return f"M{task.part}:{merge_tag}{row.out}"
    return f"O{store_tag}{row.args[0]}"


def chunk_rows(info: EmitInfo, chunks: int) -> int:
    """Rows of o in each of `chunks` row chunks at info's sizes."""
    sizes = dict(info.sizes)
    per_kv = int(sizes["S_q"] or 0) * (int(sizes["h_q"] or 0) // int(sizes["h_kv"] or 1))
    return int(sizes["h_kv"] or 0) * per_kv // chunks


def chunk_checks(stores: str) -> str:
    """The launch checks of a kernel whose o is in row chunks; `stores` says how its stores
    place the chunks (why it needs S_q == 1 or h_kv == 1)."""
    return f"""\
    if S_q != 1 and h_kv != 1:
        raise ValueError("a {stores}, which "
                         "needs S_q == 1 or h_kv == 1")
    if h_kv * S_q * (h_q // h_kv) != CHUNKS * CHUNK_ROWS:
        raise ValueError(f"this kernel was synthesised for {{CHUNKS}} chunks of {{CHUNK_ROWS}} "
                         "rows; run meshproof synthesize for these sizes")
"""


def merge_branches(count: int, starred: bool, last_else: bool) -> str:
    """The if/elif chain running MERGE_OPS[:count] on v[(a, n)] (v[(*a, n)] if starred);
    with last_else the last op is the chain's else."""
    star = "*" if starred else ""
    lines = []
    for p, (target, expr) in enumerate(MERGE_OPS[:count]):
        head = "else:" if last_else and p == count - 1 else \
            f"{'if' if p == 0 else 'elif'} op == {p}:"
        body = _COMPONENT.sub(lambda m: f'v[({star}{m[1].lower()}, "{m[2]}")]',
                              f"{target} = {expr}")
        lines.append(f"    {head}\n        {body}\n")
    return "".join(lines)


def render(graph: RankGraph, rows: tuple[str, ...], info: EmitInfo, variant: Variant) -> str:
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
    imports = "".join(f"    {name},\n" for name in sorted(
        ("load_kv", "load_q", "partial_attention", "softmax_scale", *variant.imports)))
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
{imports})

N_RANKS = {graph.n}
{variant.constants}\
# if True, ops the interpreter makes are attributed to the rank's PLAN row (model/tracer.py),
# so a counterexample names the row: rank r's row is line PLAN_LINE + r of this file
MESHPROOF_PLAN_ROWS = {graph.n <= PLAN_ROWS_MAX_RANKS}
PLAN_LINE = @PLAN_LINE@
{variant.plan_doc}\
PLAN = (
{table}
)
{variant.merges_doc}\
MERGES = {{
{variant.merge_table}
}}


def {KERNEL_NAME}(q_ptr: Any, k_ptr: Any, v_ptr: Any, o_ptr: Any,
                {size_params},
                {shape},
                sm_scale: float | None = None, msg_dtype: str = "f32", *, tl: Any) -> None:
    """Synthesised all-reduce of (m, l, o) triplets: {info.plan}."""
    if {count} != N_RANKS or rank_axis != {graph.rank_axis}:
        raise ValueError(f"this kernel was synthesised for {{N_RANKS}} ranks on rank_axis "
                         f"{graph.rank_axis}; run meshproof synthesize for this launch")
{variant.checks}\
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
{variant.values}\
    meshproof_plan_row = PLAN_LINE + rank  # noqa: F841 (read by the tracer)
    for word in PLAN[rank].split():
        code = word[0]
        if code == "S":
{variant.send}\
        elif code == "R":
{variant.recv}\
        elif code == "M":
{variant.merge}\
        else:
{variant.store}\


{variant.merge_op}\
{variant.merge_ops}'''
    lines = text.split("\n")
    first = lines.index("PLAN = (") + 2     # 1-based line of rank 0's row
    return text.replace("@PLAN_LINE@", str(first))
