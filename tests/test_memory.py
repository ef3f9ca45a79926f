"""Buffer contents per rank (model/memory.py): which store last wrote each element."""

from __future__ import annotations

from meshproof.model.memory import rank_memory
from meshproof.model.schedule import DType, Op, OpKind, RankProgram, SourceLoc, ValueRef
from meshproof.model.topology import Endpoint


def _mem_op(index: int, kind: OpKind, offset: int, n: int) -> Op:
    args = (ValueRef(0),) if kind is OpKind.STORE else ()
    return Op(index, kind, args, None if kind is OpKind.STORE else index, (n,), DType.F32,
              SourceLoc("k.py", 1), ptr="buf", offset=offset)


def test_buffer_contents_follow_the_last_store_of_each_element() -> None:
    S, L = OpKind.STORE, OpKind.LOAD
    ops = [_mem_op(0, S, 0, 8), _mem_op(1, S, 4, 8), _mem_op(2, L, 0, 4), _mem_op(3, L, 2, 4),
           _mem_op(4, L, 10, 4), _mem_op(5, L, 20, 2), _mem_op(6, S, 0, 4),
           _mem_op(7, S, 4, 8), _mem_op(8, L, 3, 2)]
    memory = rank_memory(RankProgram(Endpoint(0, 0), tuple(ops)))
    reads = {i: ([w.index for w in src.writers], src.uncovered)
             for i, src in memory.loads.items()}
    assert reads == {2: ([0], False), 3: ([0, 1], False), 4: ([1], True), 8: ([6, 7], False)}
    assert 5 not in memory.loads  # never stored there: the buffer's input
    # stores 0 and 1 are rewritten by two later halves together: neither reaches the output
    assert memory.live_stores == {6, 7}


def test_many_spills_each_read_their_own_store() -> None:
    # Each load used to scan every store of its buffer (5,000 spills: ~3 s more). Now the
    # buffer map answers per op; this is a correctness check at a size that used to hurt.
    S, L = OpKind.STORE, OpKind.LOAD
    n = 5000
    ops = [_mem_op(i, S, 4 * i, 4) for i in range(n)] + \
        [_mem_op(n + i, L, 4 * i, 4) for i in range(n)]
    memory = rank_memory(RankProgram(Endpoint(0, 0), tuple(ops)))
    assert all(memory.loads[n + i].writers[0].index == i for i in range(n))
    assert len(memory.live_stores) == n
