"""Emission: a kernel file with the built-ins' interface whose schedule is a table.

Each launch-local rank's row lists its instructions in program order; the kernel
interprets its row with Python control flow on constants, so tracing it yields exactly the
scheduled straight-line program. The file is a plain kernel: meshproof proves it like any
other, and that verdict, not the synthesiser, is the certificate (spec/synthesis.md).
"""

from __future__ import annotations

from meshproof.synth.emit_text import (
    MERGE_OPS,
    EmitInfo,
    Variant,
    merge_branches,
    plan_word,
    render,
)
from meshproof.synth.graph import RankGraph
from meshproof.synth.order import Ordered, components
from meshproof.synth.plan import CheckedPlan, RowKind

# the names the rest of synth (and the CLI) imports from here
__all__ = ["emit_kernel", "program_rows"]


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
        out.append(" ".join(plan_word(t, rows[t.row], comps, sep, "",
                                      f"{t.part}:" if chunked else "") for t in program))
    return tuple(out), tuple(merges)


def emit_kernel(graph: RankGraph, rows: tuple[str, ...],
                merges: tuple[tuple[int, int, int], ...], info: EmitInfo) -> str:
    """The kernel file's text: the same bytes for the same inputs."""
    return render(graph, rows, info, Variant(
        imports=("store_output",),
        constants="",
        plan_doc=_PLAN_DOC,
        merges_doc="# merged state: (its two inputs)\n",
        merge_table="\n".join(f"    {c}: ({a}, {b})," for c, a, b in merges),
        checks="",
        values='    values: dict[tuple[int, str], Any] = {(rank, c): own[i] for i, c in '
               'enumerate("mlo")}\n',
        send=_SEND, recv=_RECV, merge=_MERGE, store=_STORE, merge_op=_MERGE_OP,
        merge_ops=merge_branches(len(MERGE_OPS), starred=False, last_else=True)))


# The whole-o kernel's own text (emit_text.render's slots)
_PLAN_DOC = """\
# One row per launch-local rank, in program order: S<dir><c><state> sends component c (m,
# l or o) of a state; R<dir><c><state> receives it; M<p>:<state> runs op p of the merge
# that makes <state> (attention_parts.merge's ops, one at a time); O<state> stores it.
# State r (< N_RANKS) is rank r's own partial.
"""
_SEND = """\
            tl.send(dir=word[1], src=values[(int(word[3:]), word[2])])
"""
_RECV = """\
            like = own["mlo".index(word[2])]
            values[(int(word[3:]), word[2])] = tl.recv(dir=word[1], shape=like.shape,
                                                       dtype="f32")
"""
_MERGE = """\
            op, _, out = word[1:].partition(":")
            _merge_op(int(op), int(out), values, tl)
"""
_STORE = """\
            state = int(word[1:])
            store_output(o_ptr, values[(state, "o")], values[(state, "l")], S_q, h_q, h_kv,
                         d_head, tl)
"""
_MERGE_OP = '''\
def _merge_op(op: int, c: int, v: dict[tuple[int, str], Any], tl: Any) -> None:
    """Op `op` of attention_parts.merge(state a, state b) -> state c, in its order."""
    a, b = MERGES[c]
'''
