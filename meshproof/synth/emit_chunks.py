"""Emission of a chunked kernel (o in row chunks, tl.view; spec/synthesis.md §2): the same
table-driven interpreter as emit.py's, whose words name a chunk of o and whose merges and
stores run chunk by chunk (attention_parts.row_chunk, store_row_chunk)."""

from __future__ import annotations

from meshproof.synth.emit_text import (
    M_L_OPS,
    EmitInfo,
    Variant,
    chunk_checks,
    chunk_rows,
    merge_branches,
    render,
)
from meshproof.synth.graph import RankGraph


def emit_chunked_kernel(graph: RankGraph, rows: tuple[str, ...],
                        merges: tuple[tuple[int, int, int], ...], info: EmitInfo,
                        chunks: int) -> str:
    """The chunked kernel file's text: the same bytes for the same inputs."""
    return render(graph, rows, info, Variant(
        imports=("row_chunk", "store_row_chunk"),
        constants=f"CHUNKS = {chunks}        # o travels, merges and is stored in this many "
                  f"row chunks (views)\nCHUNK_ROWS = {chunk_rows(info, chunks)}\n",
        plan_doc=_PLAN_DOC,
        merges_doc="# merged state: (its two inputs)\n",
        merge_table="\n".join(f"    {c}: ({a}, {b})," for c, a, b in merges),
        checks=chunk_checks("chunked kernel stores o's row chunks at their offsets"),
        values=_VALUES, send=_SEND, recv=_RECV, merge=_MERGE, store=_STORE,
        merge_op=_MERGE_OP,
        merge_ops=merge_branches(M_L_OPS, starred=False, last_else=False) + _MERGE_O))


# The chunked kernel's own text (emit_text.render's slots)
_PLAN_DOC = """\
# One row per launch-local rank, in program order: S<dir><c>:<state> sends component c (m,
# l, or chunk k of o as o<k>) of a state; R<dir><c>:<state> receives it; M<p>:<state> runs
# op p of the merge that makes <state> (attention_parts.merge's 8 ops on m and l, then
# o_a*alpha, o_b*beta and their sum per chunk: p = 8 + 3k + j); O<k>:<state> stores
# chunk k. State r (< N_RANKS) is rank r's own partial.
"""
_VALUES = """\
    values: dict[tuple[int, str], Any] = {(rank, "m"): own[0], (rank, "l"): own[1]}
    for k in range(CHUNKS):
        values[(rank, f"o{k}")] = row_chunk(own[2], k, CHUNK_ROWS, tl)
"""
_SEND = """\
            comp, _, state = word[2:].partition(":")
            tl.send(dir=word[1], src=values[(int(state), comp)])
"""
_RECV = """\
            comp, _, state = word[2:].partition(":")
            shape = own["ml".index(comp)].shape if comp in "ml" else (CHUNK_ROWS, d_head)
            values[(int(state), comp)] = tl.recv(dir=word[1], shape=shape, dtype="f32")
"""
_MERGE = """\
            op, _, out = word[1:].partition(":")
            _merge_op(int(op), int(out), values, tl)
"""
_STORE = """\
            chunk, _, state = word[1:].partition(":")
            store_row_chunk(o_ptr, values[(int(state), f"o{chunk}")],
                            values[(int(state), "l")], int(chunk), CHUNK_ROWS, tl)
"""
_MERGE_OP = '''\
def _merge_op(op: int, c: int, v: dict[tuple[int, str], Any], tl: Any) -> None:
    """Op `op` of attention_parts.merge(state a, state b) -> state c, in its order, with o
    merged chunk by chunk (op 8 + 3k + j: j of o_a*alpha, o_b*beta, sum for chunk k)."""
    a, b = MERGES[c]
'''
_MERGE_O = """\
    else:
        k, j = divmod(op - 8, 3)
        if j == 0:
            v[(c, f"oa{k}")] = v[(a, f"o{k}")] * row_chunk(v[(c, "alpha")], k, CHUNK_ROWS, tl)
        elif j == 1:
            v[(c, f"ob{k}")] = v[(b, f"o{k}")] * row_chunk(v[(c, "beta")], k, CHUNK_ROWS, tl)
        else:
            v[(c, f"o{k}")] = v[(c, f"oa{k}")] + v[(c, f"ob{k}")]
"""
