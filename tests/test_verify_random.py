"""Random send/recv programs: meshproof's verdicts against independent oracles.

Every example is traced through tests/kernels/random_program.py (the real tracer), then
verified; `verify` itself raises InternalError when its simulation and Z3's stuck-state
search disagree. tests/randprog.py recomputes every property from the machine description
and explores all interleavings; both must agree on everything (statuses, the offending
ops, blocked ranks, min_queue_depth, rendezvous). benchmarks/verify_random.py runs the
same check on >= 10,000 seeded examples.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest
import randprog
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from randprog import (
    CommOp,
    Example,
    Machine,
    RandomChooser,
    cross_check,
    expected,
    generate,
)

from meshproof.model.channels import derive_channels
from meshproof.model.loader import resolve_kernel
from meshproof.model.progress import run
from meshproof.model.topology import Direction, Endpoint, System
from meshproof.model.wiring import build_wiring
from meshproof.verify.api import verify
from meshproof.verify.result import Status

KERNEL = resolve_kernel(randprog.KERNEL_SPEC)


class DrawChooser:
    """Random decisions drawn through hypothesis (so failures shrink to small programs)."""

    def __init__(self, draw: Any) -> None:
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return int(self._draw(st.integers(lo, hi)))


@st.composite
def drawn_examples(draw: Any) -> Example:
    """Every decision drawn by hypothesis: failures shrink, but small programs dominate."""
    return generate(DrawChooser(draw))


# The benchmark's mix (seeded generator): the seed is drawn, the program is not shrunk,
# but the failure message carries the full example (machine, D, program string).
seeded_examples = st.integers(0, 2**63).map(lambda seed: generate(RandomChooser(seed)))


def check(ex: Example) -> None:
    result = cross_check(ex, KERNEL)
    event(result.outcome)
    event(f"D={ex.depth}")
    assert not result.problems, f"{ex.describe()}\n" + "\n".join(result.problems)


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seeded_examples)
def test_random_programs_agree_with_the_oracles(ex: Example) -> None:
    check(ex)


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(drawn_examples())
def test_shrinkable_random_programs_agree_with_the_oracles(ex: Example) -> None:
    check(ex)


def test_the_generator_covers_every_kind_of_outcome() -> None:
    """The seeded mix the benchmark uses hits legal/illegal, matched/unmatched, deadlocking
    and free programs, every depth, and min_queue_depth from 0 to "none"."""
    outcomes: Counter[tuple[bool, bool, bool]] = Counter()
    min_depths: Counter[int | None] = Counter()
    families: Counter[str] = Counter()
    for ex in randprog.seeded_examples(7, 300):
        want = expected(ex)
        outcomes[(bool(want.illegal), bool(want.outside), want.deadlock)] += 1
        outcomes[(False, want.matching_faults > 0, want.deadlock)] += 1
        min_depths[want.min_queue_depth] += 1
        families[ex.machine.wiring] += 1
        assert want.terminals == 1  # one dead end: the Kahn-network argument
    for key in [(False, False, False), (False, False, True), (True, False, True),
                (False, True, True), (False, True, False)]:
        assert outcomes[key] >= 5, (key, outcomes)
    assert {0, 1, 2, None} <= set(min_depths), min_depths
    assert set(families) == {"pe_line", "pe_ring", "cube_mesh", "cube_ring"}


# --- the oracle's own footing -----------------------------------------------------------------

MACHINES = [
    Machine("pe_line", (1, 1, 1, 2), 2, 0, 1), Machine("pe_line", (1, 1, 2, 5), 4, 0, 2),
    Machine("pe_ring", (1, 1, 1, 2), 2, 0, 1), Machine("pe_ring", (1, 1, 2, 6), 6, 1, 1),
    Machine("pe_ring", (1, 1, 1, 4), 3, 0, 1), Machine("cube_mesh", (1, 3, 3, 2), 2, 0, 9),
    Machine("cube_mesh", (2, 2, 3, 1), 1, 2, 7), Machine("cube_mesh", (2, 3, 1, 1), 1, 1, 4),
    Machine("cube_ring", (1, 2, 3, 1), 1, 1, 4), Machine("cube_ring", (1, 1, 2, 1), 1, 0, 2),
    Machine("cube_ring", (1, 1, 3, 1), 1, 2, 1),
]


@pytest.mark.parametrize("m", MACHINES, ids=lambda m: f"{m.wiring}{m.system}")
def test_oracle_neighbours_match_meshproof_wirings(m: Machine) -> None:
    system = System(*m.system)
    wiring = build_wiring(m.wiring, system, m.cube_start, m.cubes)
    for cube in range(system.n_cubes):
        for pe in range(system.pes):
            for d in Direction:
                got = wiring.neighbour(Endpoint(cube, pe), d)
                assert m.neighbour((cube, pe), d.value) == \
                    ((got.cube, got.pe) if got else None), (cube, pe, d)


def prog(m: Machine, depth: int, **ops: str) -> Example:
    """`prog(m, D, c0p0="sE rW", ...)`: send/recv ops as kind+direction words."""
    programs: dict[tuple[int, int], tuple[CommOp, ...]] = {ep: () for ep in m.endpoints}
    for key, text in ops.items():
        cube, pe = (int(x) for x in key[1:].split("p"))
        programs[(cube, pe)] = tuple(CommOp(w[0], w[1], 1, "f32") for w in text.split())
    return Example(m, depth, programs, "hand-written")


LINE2 = Machine("pe_line", (1, 1, 1, 2), 2, 0, 1)
LINE3_OF_4 = Machine("pe_line", (1, 1, 1, 4), 3, 0, 1)
RING3 = Machine("pe_ring", (1, 1, 1, 3), 3, 0, 1)


@pytest.mark.parametrize(("ex", "deadlock", "min_depth", "rendezvous_free"), [
    (prog(LINE2, 0, c0p0="sE rE", c0p1="sW rW"), True, 1, False),
    (prog(LINE2, 1, c0p0="sE rE", c0p1="sW rW"), False, 1, False),
    (prog(LINE2, 1, c0p0="sE sE rE rE", c0p1="sW sW rW rW"), True, 2, False),
    (prog(LINE2, 2, c0p0="sE sE rE rE", c0p1="sW sW rW rW"), False, 2, False),
    (prog(LINE2, 4, c0p0="rE sE", c0p1="rW sW"), True, None, False),
    (prog(LINE2, 0, c0p0="sE rE", c0p1="rW sW"), False, 0, True),
    (prog(LINE3_OF_4, 1, c0p2="sE"), False, 1, False),          # fills a queue to nowhere
    (prog(LINE3_OF_4, 1, c0p2="sE sE"), True, 2, False),
    (prog(LINE3_OF_4, 3, c0p2="rE"), True, None, False),        # outsiders never send
    (prog(LINE2, 4, c0p0="sN"), True, None, False),             # no N link on a line
    (prog(RING3, 0, c0p0="sE rW", c0p1="sE rW", c0p2="sE rW"), True, 1, False),
    (prog(LINE2, 1, c0p0="sE", c0p1="rW rW"), True, None, False),
])
def test_oracle_known_answers(ex: Example, deadlock: bool, min_depth: int | None,
                              rendezvous_free: bool) -> None:
    want = expected(ex)
    assert (want.deadlock, want.min_queue_depth, want.rendezvous_free) == \
        (deadlock, min_depth, rendezvous_free)
    assert want.terminals == 1
    result = cross_check(ex, KERNEL)
    assert not result.problems, result.problems


def test_oracle_explores_every_interleaving() -> None:
    """Confluence is checked, not assumed: the oracle visits every state and counts every
    dead end. Here: (0,0) (1,0) (0,1) (1,1) (2,1) (1,2) (2,2); (2,0) needs pe 1's send."""
    ex = prog(LINE2, 1, c0p0="sE rE", c0p1="sW rW")
    exploration = randprog.explore(ex, 1)
    assert exploration.states == 7 and exploration.terminals == ((2, 2),)
    assert randprog.explore(ex, 0).terminals == ((0, 0),)


def test_cross_check_flags_a_wrong_verdict() -> None:
    """The comparison can fail: tamper with a correct verdict and it must complain."""
    ex = prog(LINE3_OF_4, 1, c0p0="sE sE rE", c0p1="rW sW rW", c0p2="sN sW")
    schedule = randprog.trace_example(ex, KERNEL)
    verdict = verify(schedule)
    want = expected(ex)
    assert randprog._compare(ex, want, schedule, verdict) == []
    deadlock = verdict.deadlock
    assert deadlock is not None
    wrong_depth = dataclasses.replace(verdict, properties=tuple(
        dataclasses.replace(deadlock, min_queue_depth=7) if p is deadlock else p
        for p in verdict.properties))
    assert any("min_queue_depth" in p for p in randprog._compare(ex, want, schedule, wrong_depth))
    props = tuple(dataclasses.replace(p, status=Status.PROVED) for p in verdict.properties)
    flipped = dataclasses.replace(verdict, properties=props)
    problems = randprog._compare(ex, want, schedule, flipped)
    assert any(p.startswith("direction_legality: meshproof proved") for p in problems)
    assert any(p.startswith("deadlock_freedom: meshproof proved") for p in problems)


def test_simulation_alone_matches_the_oracle_at_every_depth() -> None:
    """model/progress.run (the Kahn run) against the interleaving search, D = 0..4."""
    for ex in randprog.seeded_examples(11, 60):
        schedule = randprog.trace_example(ex, KERNEL)
        table = derive_channels(schedule)
        for depth in range(5):
            assert run(schedule, table, depth).deadlock == \
                randprog.explore(ex, depth).deadlock, (depth, ex.describe())
