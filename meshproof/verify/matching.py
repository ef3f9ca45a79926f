"""channel_matching: per link, as many recvs as sends, and the k-th pair agree.

Only links whose both ends are launched and wired are judged here; ops on missing links
or towards endpoints outside the launch are the business of direction_legality and
launch_confinement, so each fault is reported once, by the property it breaks.

The comparison is over the channel table's columns: every message's send and recv carry
one payload id each (shape, dtype, bytes), compared as arrays; only links with a fault are
walked op by op.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from meshproof.model.channel_table import OK, Channel, OpRef
from meshproof.model.schedule import Op, OpKind, Schedule
from meshproof.verify.properties import CheckContext, Property
from meshproof.verify.result import Counterexample, Diagnostic, PropertyResult, Role, Status

if TYPE_CHECKING:
    from meshproof.verify.details import Leftover


def _op(schedule: Schedule, ref: OpRef) -> Op:
    return schedule.programs[ref.rank].ops[ref.op]


def _describe(ch: Channel) -> str:
    dst = ch.dst.describe() if ch.dst else "?"
    return f"link {ch.src.describe()} -{ch.dir.value}-> {dst}"


def channel_matching(ctx: CheckContext) -> PropertyResult:
    start = time.perf_counter()
    schedule, table = ctx.schedule, ctx.channels
    cols = table.cols
    diags: list[Diagnostic] = []
    leftovers: list[Leftover] = []
    judged_mask = table.channel_status() == OK
    n_ch = len(table.channels)
    counts = np.diff(cols.side_start).reshape(n_ch, 2) if n_ch else np.zeros((0, 2), int)
    n_recvs, n_sends = counts[:, 0], counts[:, 1]
    n_pairs = int(np.minimum(n_sends, n_recvs)[judged_mask].sum())
    # a send whose partner carries another payload: a mismatched message
    sends = np.flatnonzero(cols.send & (cols.partner >= 0))
    bad = sends[cols.payload[sends] != cols.payload[cols.partner[sends]]]
    bad = bad[judged_mask[cols.channel[bad]]]
    faulty = set(cols.channel[bad].tolist()) | \
        set(np.flatnonzero(judged_mask & (n_sends != n_recvs)).tolist())
    for i in sorted(faulty):
        _judge_channel(schedule, table.channels[i], diags, leftovers)
    seconds = time.perf_counter() - start
    if not diags:
        return PropertyResult(Property.CHANNEL_MATCHING, Status.PROVED,
                              f"{int(judged_mask.sum())} links, {n_pairs} messages: every send "
                              "has its recv with the same shape, dtype and bytes",
                              seconds=seconds,
                              certificate="enumeration of channels")
    from meshproof.verify.details import MatchingDetails  # for a counterexample only

    n_bad = sum(1 for d in diags if d.role is not Role.NOTE)
    summary = (f"{n_bad} unmatched or mismatched message(s) on "
               f"{len({d.endpoint for d in diags})} rank(s)")
    if leftovers:
        summary += "; leftovers: " + ", ".join(
            f"{lo.link} {lo.sends} sends/{lo.recvs} recvs" for lo in leftovers[:6])
    return PropertyResult(Property.CHANNEL_MATCHING, Status.VIOLATED, summary,
                          Counterexample(summary, tuple(diags), MatchingDetails(tuple(leftovers))),
                          seconds, "enumeration of channels")


def _judge_channel(schedule: Schedule, ch: Channel, diags: list[Diagnostic],
                   leftovers: list[Leftover]) -> None:
    """The faults of one link: mismatched messages, then sends or recvs left over."""
    for k in range(min(len(ch.sends), len(ch.recvs))):
        s_ref, r_ref = ch.sends[k], ch.recvs[k]
        s_op, r_op = _op(schedule, s_ref), _op(schedule, r_ref)
        what = []
        if s_op.shape != r_op.shape:
            what.append(f"shape {s_op.shape} sent vs {r_op.shape} expected")
        if s_op.dtype != r_op.dtype:
            what.append(f"dtype {s_op.dtype.value} sent vs {r_op.dtype.value} expected")
        if s_op.nbytes != r_op.nbytes:
            what.append(f"{s_op.nbytes} bytes sent vs {r_op.nbytes} expected")
        if what:
            s_ep = schedule.programs[s_ref.rank].endpoint
            r_ep = schedule.programs[r_ref.rank].endpoint
            diags.append(Diagnostic(
                f"recv {r_op.dir.value if r_op.dir else ''} (message {k} on {_describe(ch)}) "
                f"disagrees with its send at {s_op.source}: {'; '.join(what)}",
                Role.MISMATCHED, r_op.source, r_ep, r_op.index, OpKind.RECV, r_op.dir,
                s_ep))
            diags.append(Diagnostic(
                f"the matching send {s_op.dir.value if s_op.dir else ''} (message {k})",
                Role.NOTE, s_op.source, s_ep, s_op.index, OpKind.SEND, s_op.dir, r_ep))
    extra_sends = ch.sends[len(ch.recvs):]
    extra_recvs = ch.recvs[len(ch.sends):]
    if extra_sends or extra_recvs:
        from meshproof.verify.details import Leftover  # for a counterexample only

        leftovers.append(Leftover(ch.name, len(ch.sends), len(ch.recvs)))
    for k, ref in enumerate(extra_sends, start=len(ch.recvs)):
        op = _op(schedule, ref)
        diags.append(Diagnostic(
            f"send {ch.dir.value} (message {k} on {_describe(ch)}) is never received: "
            f"{len(ch.sends)} sends vs {len(ch.recvs)} recvs on this link",
            Role.UNMATCHED, op.source, ch.src, op.index, OpKind.SEND, ch.dir, ch.dst))
    for k, ref in enumerate(extra_recvs, start=len(ch.sends)):
        op = _op(schedule, ref)
        ep = schedule.programs[ref.rank].endpoint
        diags.append(Diagnostic(
            f"recv {op.dir.value if op.dir else ''} (message {k} on {_describe(ch)}) has no "
            f"matching send: {len(ch.sends)} sends vs {len(ch.recvs)} recvs on this link",
            Role.UNMATCHED, op.source, ep, op.index, OpKind.RECV, op.dir, ch.src))
