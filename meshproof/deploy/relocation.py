"""One launch's schedule at another placement: moving it, and when a proof moves with it.

Moving a schedule by δ cubes keeps every op and shifts every endpoint (c, p) to (c+δ, p).
Every property reads the schedule only through its ops, its launch (shapes, groups,
shards in endpoint order, outputs, queue depth) and its channels — for each send/recv,
the endpoint its port reaches and whether that endpoint is launched
(model/channels.py). So when schedule B is schedule A moved by δ, with the same launch
up to the placement, and every port A's ops use reaches, in B's wiring, the δ-moved
endpoint it reaches in A's, then B's channels are A's moved by δ and every property of B
has A's status. `carry_proofs` uses that for verdicts that are proved throughout (the
messages of proved results name no endpoint; a violation is re-verified, so its
counterexample names B's own ranks).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from meshproof.model.channels import derive_channels
from meshproof.model.launch import Launch
from meshproof.model.schedule import LaunchSpec, RankProgram, Schedule
from meshproof.model.topology import Endpoint
from meshproof.verify.result import PropertyResult, Verdict


def _moved(ep: Endpoint, delta: int) -> Endpoint:
    return Endpoint(ep.cube + delta, ep.pe)


def relocate(schedule: Schedule, launch: Launch) -> Schedule:
    """`schedule` moved to `launch`'s placement (its spec and wiring)."""
    delta = launch.spec.cube_start - schedule.launch.cube_start
    programs = tuple(RankProgram(_moved(p.endpoint, delta), p.ops) for p in schedule.programs)
    return Schedule(launch.spec, launch.wiring, programs)


def _placement_free(spec: LaunchSpec) -> LaunchSpec:
    """The spec with what depends on the placement taken out."""
    args = tuple((k, v) for k, v in spec.args if k != "cube_start")
    return replace(spec, cube_start=0, args=args,
                   empty_shards=tuple(Endpoint(e.cube - spec.cube_start, e.pe)
                                      for e in spec.empty_shards))


def is_moved(a: Schedule, b: Schedule) -> bool:
    """B is A moved by some δ: the same ops per rank, and the same launch up to placement."""
    delta = b.launch.cube_start - a.launch.cube_start
    if _placement_free(a.launch) != _placement_free(b.launch) or \
            len(a.programs) != len(b.programs):
        return False
    return all(pb.endpoint == _moved(pa.endpoint, delta) and pa.ops == pb.ops
               for pa, pb in zip(a.programs, b.programs, strict=True))


def same_links(a: Schedule, b: Schedule) -> bool:
    """Every port A's send/recv ops use reaches, in B, the δ-moved endpoint it reaches in
    A (a missing port stays missing)."""
    delta = b.launch.cube_start - a.launch.cube_start
    for prog in a.programs:
        here = _moved(prog.endpoint, delta)
        for op in prog.comm_ops:
            assert op.dir is not None
            there_a = a.wiring.neighbour(prog.endpoint, op.dir)
            there_b = b.wiring.neighbour(here, op.dir)
            if (there_a is None) != (there_b is None):
                return False
            if there_a is not None and there_b != _moved(there_a, delta):
                return False
    return True


def same_dataflow(a: Schedule, b: Schedule) -> bool:
    """B is A moved (the same ops per rank) and every send/recv of B has A's partner and
    port status, by rank and op index: each recv reads the value of the same send. The
    semantic properties (exactly_once_merge, attention_equivalence, numeric_safety) read
    a schedule only through its ops, its launch up to the placement and which send each
    recv reads, so B's semantic verdicts are A's, even where the links differ."""
    if not is_moved(a, b):
        return False
    ca, cb = derive_channels(a).cols, derive_channels(b).cols
    return bool(np.array_equal(ca.partner, cb.partner) and
                np.array_equal(ca.status, cb.status))


def carry_proofs(verdict: Verdict, base: Schedule, schedule: Schedule) -> Verdict | None:
    """`schedule`'s verdict from `verdict` (of `base`), when every property is proved and
    `schedule` is `base` moved over the same links; else None (verify it)."""
    if not verdict.ok or not is_moved(base, schedule) or not same_links(base, schedule):
        return None
    note = f"as at cube_start {base.launch.cube_start} (the same schedule moved over the " \
           "same links): "
    results: list[PropertyResult] = [replace(p, seconds=0.0, certificate=note + p.certificate)
                                     for p in verdict.properties]
    return replace(verdict, launch=schedule.launch, properties=tuple(results))
