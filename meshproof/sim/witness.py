"""Replaying a rounding witness: `meshproof simulate --witness FILE`.

The witness (model/witness_file.py) holds Q, K and V per attention problem of the launch,
rows numbered as model/problem.py numbers a group's rows. The simulator feeds exactly
those values instead of its seeded generator -- each simulated group gets the inputs of
the problem its ranks belong to, and the harness slices them per rank as it slices the
generator's rows (the verifier's `machine_buffers` slices them alike) -- and reports the
numeric error against dense float64 attention as usual. Besides, it reads the witness
element (query row, head, feature) off the output of the rank whose store the verifier
judged, so the verdict's machine value and error can be compared with the simulator's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from meshproof.errors import HarnessError
from meshproof.model.problem import Problem
from meshproof.model.schedule import OpKind, Schedule
from meshproof.model.witness_file import Witness, WitnessFileError, check_against
from meshproof.sim.groups import Group
from meshproof.sim.harness import Buffer, GroupLayout, Memory
from meshproof.sim.inputs import GroupInput, given_input
from meshproof.sim.result import WitnessReplay


@dataclass(frozen=True, slots=True, eq=False)
class ReplayPlan:
    """What the numeric run feeds and reads for a witness: each simulated group's inputs,
    and where the witness element is (simulated group, rank, output buffer, flat index in
    that rank's output rows)."""

    witness: Witness
    given: Mapping[int, GroupInput]      # simulated group index -> its inputs
    group: int                           # simulated group holding the element
    problem_group: int                   # its attention problem (the witness's group)
    rank: int                            # rank index into Schedule.programs
    output: str

    def element_index(self, layout: GroupLayout, position: int) -> int:
        """The element's flat index in the output buffer of the rank at `position`."""
        t, h, e = self.witness.element
        s = layout.shape
        first = layout.out_rows(layout.roles[position]).start
        return int(((t - first) * s.h_q + h) * s.d_head + e)


def plan_replay(schedule: Schedule, problem: Problem | None, groups: Sequence[Group],
                witness: Witness) -> ReplayPlan:
    """Check the witness against the launch and find its element; WitnessFileError (bad
    input, exit 2) when it does not fit."""
    where = witness.where
    if problem is None:
        raise WitnessFileError(
            f"{where}: this launch names no K and V buffers, so it has no attention problem "
            "to feed the witness to; pass --sharded K_PTR,V_PTR as when it was verified")
    check_against(witness, problem)
    x = witness.inputs
    given: dict[int, GroupInput] = {}
    for grp in groups:
        pg = problem.group_of[grp.ranks[0]]
        given[grp.index] = given_input(grp.index, x.q[pg], x.k[pg], x.v[pg])
    rank = _rank(schedule, problem, groups, witness)
    pg = problem.group_of[rank]
    group = next(grp.index for grp in groups if rank in grp.ranks)
    t = witness.element[0]
    if not 0 <= t - (problem.q_base(rank) or 0) < problem.S_q:
        raise WitnessFileError(
            f"{where}: rank {schedule.programs[rank].endpoint.label} holds query rows "
            f"[{problem.q_base(rank)}, {(problem.q_base(rank) or 0) + problem.S_q}) of group "
            f"{pg}, not the witness's row {t}; replay it with the launch it was verified with")
    return ReplayPlan(witness, given, group, pg, rank, _output(schedule, rank, witness))


def _rank(schedule: Schedule, problem: Problem, groups: Sequence[Group],
          witness: Witness) -> int:
    """The rank whose output holds the witness element: the one the witness names, else
    the only rank of its group that stores an output holding the element's row."""
    where = witness.where
    active = {r for grp in groups for r in grp.ranks}
    if witness.endpoint is not None:
        found = [r for r, p in enumerate(schedule.programs)
                 if p.endpoint == witness.endpoint and r in active]
        if not found:
            raise WitnessFileError(
                f"{where}: the witness names rank {witness.endpoint.label}, which runs no ops "
                "in this launch; replay it with the launch it was verified with (the same "
                "kernel, wiring, --cubes, --pes and --arg values)")
        return found[0]
    if witness.group is None:
        raise WitnessFileError(
            f"{where}: the witness names no rank (cube, pe) and its inputs hold "
            f"{len(witness.inputs.q)} groups, so its element is ambiguous; pass the whole "
            "verdict (`meshproof verify ... --json > FILE`), whose witness names the rank")
    t = witness.element[0]
    holders = [r for r in problem.groups[witness.group].ranks
               if r in active and _stores(schedule, r) and
               (base := problem.q_base(r)) is not None and base <= t < base + problem.S_q]
    if len(holders) != 1:
        raise WitnessFileError(
            f"{where}: the witness names no rank (cube, pe) and {len(holders)} ranks store "
            f"query row {t} of group {witness.group}; pass the whole verdict (`meshproof "
            "verify ... --json > FILE`), whose witness names the rank")
    return holders[0]


def _stores(schedule: Schedule, rank: int) -> bool:
    outputs = set(schedule.launch.outputs)
    return any(op.kind is OpKind.STORE and op.ptr in outputs
               for op in schedule.programs[rank].ops)


def _output(schedule: Schedule, rank: int, witness: Witness) -> str:
    """The output buffer of the judged store: the one stored at the witness's line, else
    the rank's first stored output."""
    outputs = schedule.launch.outputs
    stores = [op for op in schedule.programs[rank].ops
              if op.kind is OpKind.STORE and op.ptr in outputs]
    if not stores:
        raise WitnessFileError(
            f"{witness.where}: rank {schedule.programs[rank].endpoint.label} stores no output "
            f"({', '.join(outputs)}) in this launch; replay the witness with the launch it "
            "was verified with")
    at_line = [op for op in stores if str(op.source) == witness.source]
    ptr = (at_line or stores)[0].ptr
    assert ptr is not None
    return ptr


def replay_value(plan: ReplayPlan, schedule: Schedule, layout: GroupLayout,
                 members: tuple[int, ...], groups: Sequence[Group],
                 memories: list[Memory], expected: npt.NDArray[np.float64]
                 ) -> WitnessReplay | None:
    """The witness element after a batch ran, when the batch holds its group."""
    if plan.group not in members:
        return None
    b = members.index(plan.group)
    position = groups[plan.group].ranks.index(plan.rank)
    buf = memories[position][plan.output]
    if not isinstance(buf, Buffer):
        raise HarnessError(f"the output {plan.output} is a generated buffer; it cannot hold "
                           "the witness element (name the outputs with --outputs)")
    flat = plan.element_index(layout, position)
    w = plan.witness
    t, h, e = w.element
    gi = plan.given[plan.group]
    return WitnessReplay(w.path, schedule.programs[plan.rank].endpoint,
                         plan.problem_group, w.element, float(buf.data[b, flat]),
                         float(expected[b, t, h, e]), gi.v.max_abs(), w.machine, w.exact,
                         w.error)

