"""What a schedule diagram's nodes and message edges say: labels, fills, fault text.

A node's label names its ops (`send E x3  #15-17`), a faulty node adds one line per fault
role and its source file; a message edge carries the shapes and dtype of its payload.
"""

from __future__ import annotations

import textwrap

from meshproof.model.schedule import Op, OpKind, RankProgram, Schedule
from meshproof.report import style
from meshproof.report.diagram_lanes import LaneNode, NodeKind
from meshproof.report.dot import Attrs, label_lines
from meshproof.report.faults import FaultMarks, OpMark
from meshproof.report.messages import Message
from meshproof.report.text import shape_text
from meshproof.verify.result import Role


def node_attrs(prog: RankProgram, node: LaneNode, marks: FaultMarks) -> tuple[Attrs, bool]:
    """DOT attributes of `node` in `prog`'s lane, and whether it is drawn as a fault."""
    ops = [prog.ops[i] for i in node.ops]
    first = ops[0]
    span = f"#{node.ops[0]}" + (f"-{node.ops[-1]}" if len(node.ops) > 1 else "")
    if node.kind is NodeKind.ELIDED:
        return {"label": f"... {len(node.ops)} ops not shown ...", "shape": "plaintext",
                "style": "", "fontcolor": style.COMPUTE_TEXT, "fontsize": 9}, False
    if node.kind is NodeKind.COMPUTE:
        kinds = sorted({op.kind.value for op in ops})
        return {"label": f"{len(ops)} compute op{'s' if len(ops) > 1 else ''}",
                "shape": "plaintext", "style": "", "fontcolor": style.COMPUTE_TEXT,
                "fontsize": 9, "height": 0.2,
                "tooltip": f"{span}: {', '.join(kinds)}"}, False
    if node.kind is NodeKind.COMM:
        mult = f" x{len(ops)}" if len(ops) > 1 else ""
        lines = [f"{first.kind.value} {node.dir.value if node.dir else None}{mult}  {span}"]
        fill = style.SEND_FILL if first.kind is OpKind.SEND else style.RECV_FILL
    elif node.kind is NodeKind.STORE:
        lines = [f"store {first.ptr or ''}  {span}"]
        fill = style.STORE_FILL
    else:
        lines = [f"{first.kind.value}  {span}"]
        fill = "white"
    attrs: Attrs = {"fillcolor": fill, "tooltip": f"{span} {first.source}"}
    faults = [m for m in node.marks if m.role is not Role.NOTE]
    notes = [m for m in node.marks if m.role is Role.NOTE]
    if faults:
        blocked_at = marks.blocked.get(prog.endpoint)
        at = f" at #{blocked_at}" if len(ops) > 1 and blocked_at in node.ops else ""
        lines += fault_lines(faults, first.kind, at)
        lines.append(str(first.source).rsplit("/", 1)[-1])
        attrs.update(color=style.FAULT, fillcolor=style.FAULT_FILL, penwidth=2,
                     fontcolor=style.FAULT,
                     tooltip="; ".join(dict.fromkeys(m.message for m in faults)))
    elif notes:
        lines.append(textwrap.shorten(notes[0].message, 40, placeholder="..."))
        attrs.update(color=style.NOTE, fillcolor=style.NOTE_FILL, penwidth=1.5,
                     tooltip=notes[0].message)
    attrs["label"] = label_lines(lines)
    return attrs, bool(faults)


def fault_lines(marks: list[OpMark], kind: OpKind, blocked_at: str = "") -> list[str]:
    """One short line per fault role on a node (a merge fault gets its message wrapped)."""
    out: list[str] = []
    for role in dict.fromkeys(m.role for m in marks):
        m = next(x for x in marks if x.role is role)
        if role is Role.ILLEGAL:
            out.append(f"ILLEGAL: no {m.dir.value if m.dir else ''} link".rstrip())
        elif role is Role.OUTSIDE:
            out.append(f"OUTSIDE: {m.peer.label if m.peer else 'peer'} not launched")
        elif role is Role.UNMATCHED:
            out.append("UNMATCHED: " + ("never received" if kind is OpKind.SEND
                                        else "never sent"))
        elif role is Role.MISMATCHED:
            out.append("MISMATCHED shape/dtype")
        elif role is Role.BLOCKED:
            out.append(f"BLOCKED{blocked_at} (deadlock)")
        elif role in _WRAPPED:
            lines = textwrap.wrap(m.message, 44, max_lines=3, placeholder=" ...")
            out += [f"{_WRAPPED[role]}: {lines[0]}", *lines[1:]] if lines else [_WRAPPED[role]]
    return out


# faults whose message is the explanation: shown wrapped under a short head
_WRAPPED = {Role.MERGE: "MERGE", Role.DEPARTURE: "NOT ATTENTION", Role.NUMERIC: "NUMERIC"}


def count_text(schedule: Schedule, group: list[Message]) -> str:
    """A burst in a few characters: `3x f32` (one message: its dtype)."""
    dtypes = sorted({_op(schedule, m).dtype.value for m in group})
    kind = "/".join(dtypes)
    return f"{len(group)}x {kind}" if len(group) > 1 else kind


def _op(schedule: Schedule, m: Message) -> Op:
    ref = m.send if m.send is not None else m.recv
    assert ref is not None  # a message has a send or a recv, else it would not exist
    return schedule.programs[ref.rank].ops[ref.op]


def payload_text(schedule: Schedule, group: list[Message]) -> str:
    """What a burst of messages carries: `1x1x1, 1x1x1, 1x1x8 f32`."""
    ops = []
    for m in group:
        ref = m.send if m.send is not None else m.recv
        assert ref is not None  # a message has a send or a recv, else it would not exist
        ops.append(schedule.programs[ref.rank].ops[ref.op])
    dtypes = {op.dtype.value for op in ops}
    if len(dtypes) == 1:
        return ", ".join(shape_text(op.shape) for op in ops) + f" {dtypes.pop()}"
    return ", ".join(f"{shape_text(op.shape)} {op.dtype.value}" for op in ops)
