"""The op log: how many GEMMs, IPCQ sends/recvs and DMA reads/writes a schedule issues.

Counted from the IR (every rank's ops), so it matches what the kernel would emit: a
`dot` is one GEMM command, a `load` one DMA read, a `store` one DMA write.
"""

from __future__ import annotations

from collections import Counter

from meshproof.model.schedule import OpKind, Schedule
from meshproof.sim.result import OpLog


def op_log(schedule: Schedule) -> OpLog:
    counts = Counter(op.kind for prog in schedule.programs for op in prog.ops)
    return OpLog(gemm=counts[OpKind.DOT], ipcq_send=counts[OpKind.SEND],
                 ipcq_recv=counts[OpKind.RECV], dma_read=counts[OpKind.LOAD],
                 dma_write=counts[OpKind.STORE])
