"""The messages of a schedule, as a diagram draws them: matched send -> recv with a step.

A message's *step* is its hop depth (`model.progress.hop_steps`, the same computation
the simulator's `comm_steps` uses), so a 2D all-reduce on 2x4 shows steps 1..4. Steps
come from the Kahn-network run at the launch's queue depth: a message that is never sent
in that run (the ranks deadlock first) has no step.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.model.channel_table import ChannelTable, OpRef, PortStatus
from meshproof.model.channels import derive_channels
from meshproof.model.progress import Progress, comm_steps, hop_steps, run
from meshproof.model.schedule import Schedule


@dataclass(frozen=True, slots=True)
class Message:
    """The k-th message on channel `channel`: its send and (if any) its recv."""

    send: OpRef | None
    recv: OpRef | None
    channel: int
    k: int
    step: int | None          # hop depth; None if the send never executes at this depth
    delivered: bool           # the recv executed in the run


@dataclass(frozen=True, slots=True)
class MessageTable:
    table: ChannelTable
    progress: Progress
    messages: tuple[Message, ...]
    comm_steps: int           # the schedule's communication steps at this depth


def message_table(schedule: Schedule, depth: int | None = None) -> MessageTable:
    """Channels, the run at `depth` (default: the launch's), and every message with its step."""
    table = derive_channels(schedule)
    progress = run(schedule, table, schedule.launch.queue_depth if depth is None else depth)
    steps = hop_steps(schedule, table, progress)
    messages: list[Message] = []
    for ch_i, ch in enumerate(table.channels):
        if ch.status is PortStatus.NO_LINK:
            continue  # nothing travels on a port the wiring lacks; drawn as a fault instead
        for k in range(max(len(ch.sends), len(ch.recvs))):
            send = ch.sends[k] if k < len(ch.sends) else None
            recv = ch.recvs[k] if k < len(ch.recvs) else None
            messages.append(Message(send, recv, ch_i, k,
                                    steps.get(send) if send is not None else None,
                                    recv is not None and recv in progress.stamp))
    return MessageTable(table, progress, tuple(messages), comm_steps(steps))
