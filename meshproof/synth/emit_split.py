"""Emission of a split kernel (issue 31's reduce-scatter / all-gather): every state in K row
chunks (tl.view), each chunk an independent (m, ℓ, o) state that follows its own plan, so
chunk c can be reduced at its own rank and broadcast from there. The same table-driven
interpreter as emit.py's, whose words name the chunk."""

from __future__ import annotations

from meshproof.synth.emit_text import (
    MERGE_OPS,
    EmitInfo,
    Variant,
    chunk_checks,
    chunk_rows,
    merge_branches,
    plan_word,
    render,
)
from meshproof.synth.graph import RankGraph
from meshproof.synth.order import COMPONENTS, Ordered
from meshproof.synth.plan import CheckedPlan, RowKind


def program_rows_split(plans: tuple[CheckedPlan, ...], ordered: Ordered
                       ) -> tuple[tuple[str, ...], tuple[tuple[int, int, int, int], ...]]:
    """One instruction string per rank, and the merges (chunk, out, a, b)."""
    out: list[str] = []
    merges = sorted((k, r.out, r.args[0], r.args[1]) for k, p in enumerate(plans)
                    for r in p.plan.rows if r.kind is RowKind.MERGE and r.out is not None)
    for program in ordered.programs:
        out.append(" ".join(plan_word(t, plans[t.chunk].plan.rows[t.row], COMPONENTS,
                                      f"{t.chunk}:", f"{t.chunk}.", f"{t.chunk}:")
                            for t in program))
    return tuple(out), tuple(merges)


def emit_split_kernel(graph: RankGraph, rows: tuple[str, ...],
                      merges: tuple[tuple[int, int, int, int], ...], info: EmitInfo,
                      chunks: int) -> str:
    """The split kernel file's text: the same bytes for the same inputs."""
    return render(graph, rows, info, Variant(
        imports=("row_chunk", "store_rows"),
        constants=f"CHUNKS = {chunks}        # every state in this many row chunks, each with "
                  f"its own plan\nCHUNK_ROWS = {chunk_rows(info, chunks)}\n",
        plan_doc=_PLAN_DOC,
        merges_doc="# (chunk, merged state): (its two inputs)\n",
        merge_table="\n".join(f"    ({k}, {c}): ({a}, {b})," for k, c, a, b in merges),
        checks=chunk_checks("split kernel stores each chunk's rows at their offset"),
        values=_VALUES, send=_SEND, recv=_RECV, merge=_MERGE, store=_STORE,
        merge_op=_MERGE_OP,
        merge_ops=merge_branches(len(MERGE_OPS), starred=True, last_else=True)))


# The split kernel's own text (emit_text.render's slots)
_PLAN_DOC = """\
# One row per launch-local rank, in program order: S<dir><c><k>:<state> sends component c
# (m, l or o) of chunk k's state; R<dir><c><k>:<state> receives it; M<p>:<k>.<state> runs
# op p of the merge that makes chunk k's <state> (attention_parts.merge's ops, one at a
# time); O<k>:<state> stores chunk k. State r (< N_RANKS) is rank r's own partial's rows.
"""
_VALUES = """\
    values: dict[tuple[int, int, str], Any] = {}
    for k in range(CHUNKS):
        for i, c in enumerate("mlo"):
            values[(k, rank, c)] = row_chunk(own[i], k, CHUNK_ROWS, tl)
"""
_SEND = """\
            chunk, _, state = word[3:].partition(":")
            tl.send(dir=word[1], src=values[(int(chunk), int(state), word[2])])
"""
_RECV = """\
            chunk, _, state = word[3:].partition(":")
            like = values[(int(chunk), rank, word[2])]
            values[(int(chunk), int(state), word[2])] = tl.recv(dir=word[1], shape=like.shape,
                                                                dtype="f32")
"""
_MERGE = """\
            op, _, out = word[1:].partition(":")
            chunk, _, state = out.partition(".")
            _merge_op(int(op), int(chunk), int(state), values, tl)
"""
_STORE = """\
            chunk, _, state = word[1:].partition(":")
            store_rows(o_ptr, values[(int(chunk), int(state), "o")],
                       values[(int(chunk), int(state), "l")], int(chunk), tl)
"""
_MERGE_OP = '''\
def _merge_op(op: int, k: int, state: int, values: dict[tuple[int, int, str], Any],
              tl: Any) -> None:
    """Op `op` of attention_parts.merge(state a, state b) -> state c of chunk k, in its
    order."""
    ia, ib = MERGES[(k, state)]
    v = values
    a, b, c = (k, ia), (k, ib), (k, state)
'''
