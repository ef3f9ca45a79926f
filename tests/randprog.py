"""Random SPMD send/recv programs for cross-checking the verifier, and independent oracles.

Shared by tests/test_verify_random.py (hypothesis, a few hundred examples) and
benchmarks/verify_random.py (seeded, >= 10,000 examples). Everything that judges the
verifier here is written from the machine description of DESIGN §2 alone — its own
neighbour function, its own channel bookkeeping and an explicit-state search over *all*
interleavings — and never calls meshproof's wiring, channel, progress or verify code.

A generated `Example` is a small machine (a line or ring of PEs, or a cube sub-mesh of a
small multi-SIP system, or a cube ring), a launch on it, a queue depth and one program per
launched endpoint. Programs start as a sequentially consistent exchange (a random global
order of messages on real links, projected onto the ranks: deadlock-free at every depth)
and are then mutated: ops swapped or whole ranks reordered (balanced exchanges in random
orders), ops dropped (missing sends/recvs), extra ops in random directions (including
ports without links and links that leave the launch), and message shapes/dtypes changed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from meshproof.model.launch import LaunchOptions, build_launch
from meshproof.model.loader import KernelRef
from meshproof.model.schedule import Schedule
from meshproof.model.topology import System
from meshproof.model.trace import trace
from meshproof.verify.api import verify
from meshproof.verify.details import DeadlockDetails
from meshproof.verify.properties import Property
from meshproof.verify.result import Diagnostic, Role, Status, Verdict

Ep = tuple[int, int]  # (cube, pe)
DIRS = ("E", "W", "N", "S")
OPPOSITE = {"E": "W", "W": "E", "N": "S", "S": "N"}
DTYPES = ("f16", "f32")
ITEMSIZE = {"f16": 2, "f32": 4}
KERNEL_FILE = Path(__file__).resolve().parent / "kernels" / "random_program.py"
KERNEL_SPEC = f"{KERNEL_FILE}::random_program"
MAX_RANKS = 8        # launched endpoints per example (keeps the interleaving search small)
MAX_MESSAGES = 14    # messages of the initial exchange
MAX_MUTATIONS = 4
MAX_DEPTH = 4


class Chooser(Protocol):
    """Where random decisions come from: hypothesis's `draw` or a seeded `random.Random`."""

    def integer(self, lo: int, hi: int) -> int: ...


class RandomChooser:
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self._rng.randint(lo, hi)


def chance(c: Chooser, percent: int) -> bool:
    return c.integer(0, 99) < percent


def pick(c: Chooser, items: list[object] | tuple[object, ...]) -> object:
    return items[c.integer(0, len(items) - 1)]


@dataclass(frozen=True)
class CommOp:
    kind: str    # "s" (send) or "r" (recv)
    dir: str
    n: int       # the message is an (n,) tensor
    dtype: str

    @property
    def nbytes(self) -> int:
        return self.n * ITEMSIZE[self.dtype]


@dataclass(frozen=True)
class Machine:
    wiring: str                      # pe_line | pe_ring | cube_mesh | cube_ring
    system: tuple[int, int, int, int]  # (n_sips, rows, cols, pes)
    launch_pes: int
    cube_start: int
    cubes: int

    @property
    def endpoints(self) -> list[Ep]:
        """Launched endpoints in the order the tracer lays out ranks (cube, then pe)."""
        return [(c, p) for c in range(self.cube_start, self.cube_start + self.cubes)
                for p in range(self.launch_pes)]

    def launched(self, ep: Ep) -> bool:
        cube, pe = ep
        return self.cube_start <= cube < self.cube_start + self.cubes and 0 <= pe < \
            self.launch_pes

    def neighbour(self, ep: Ep, d: str) -> Ep | None:
        """Where port `d` of `ep` leads, from DESIGN §2's description of the built-ins."""
        n_sips, rows, cols, pes = self.system
        cube, pe = ep
        if self.wiring in ("pe_line", "pe_ring"):
            ring = self.wiring == "pe_ring" and pes > 1
            if d == "E":
                return (cube, pe + 1) if pe + 1 < pes else ((cube, 0) if ring else None)
            if d == "W":
                return (cube, pe - 1) if pe > 0 else ((cube, pes - 1) if ring else None)
            return None
        if pe != 0:
            return None  # inter-cube installs link PE 0 only
        if self.wiring == "cube_ring":
            cubes = list(range(self.cube_start, self.cube_start + self.cubes))
            if len(cubes) < 2 or cube not in cubes or d not in ("E", "W"):
                return None
            step = 1 if d == "E" else -1
            return (cubes[(cubes.index(cube) + step) % len(cubes)], 0)
        assert self.wiring == "cube_mesh"
        sip, local = divmod(cube, rows * cols)
        row, col = divmod(local, cols)

        def cid(s: int, r: int, c: int) -> Ep:
            return (s * rows * cols + r * cols + c, 0)

        if d == "E":
            if col + 1 < cols:
                return cid(sip, row, col + 1)
            return cid(sip + 1, row, 0) if sip + 1 < n_sips else None
        if d == "W":
            if col > 0:
                return cid(sip, row, col - 1)
            return cid(sip - 1, row, cols - 1) if sip > 0 else None
        if d == "N":
            return cid(sip, row - 1, col) if row > 0 else None
        return cid(sip, row + 1, col) if row + 1 < rows else None

    def launch_options(self, depth: int, prog: str) -> LaunchOptions:
        n_sips, rows, cols, pes = self.system
        return LaunchOptions(system=System(n_sips, rows, cols, pes), pes=self.launch_pes,
                             wiring=self.wiring, cubes=self.cubes, cube_start=self.cube_start,
                             args=(("prog", prog),), queue_depth=depth)

    def describe(self) -> str:
        s = self.system
        return (f"{self.wiring} system {s[0]}x{s[1]}x{s[2]} pes {s[3]}, launch cubes "
                f"{self.cube_start}..{self.cube_start + self.cubes - 1} x pes "
                f"0..{self.launch_pes - 1}")


@dataclass(frozen=True)
class Example:
    machine: Machine
    depth: int
    programs: dict[Ep, tuple[CommOp, ...]] = field(hash=False)
    family: str = ""

    def prog_json(self) -> str:
        return json.dumps({f"{c},{p}": [[o.kind, o.dir, o.n, o.dtype] for o in ops]
                           for (c, p), ops in sorted(self.programs.items()) if ops},
                          sort_keys=True, separators=(",", ":"))

    def launch_options(self) -> LaunchOptions:
        return self.machine.launch_options(self.depth, self.prog_json())

    @property
    def n_ops(self) -> int:
        return sum(len(ops) for ops in self.programs.values())

    def describe(self) -> str:
        """A repro: the machine, D, and the program string for `--arg prog=...`."""
        return f"{self.family}: {self.machine.describe()}, D={self.depth}, prog={self.prog_json()}"


# --- generation ---------------------------------------------------------------------------

def _machine(c: Chooser) -> Machine:
    kind = c.integer(0, 9)
    if kind <= 5:  # a line or a ring of 2..6 PEs in each of one or two cubes
        wiring = "pe_line" if kind <= 2 else "pe_ring"
        pes = c.integer(2, 6)
        n_cubes = 2 if pes <= 3 and chance(c, 25) else 1
        launch_pes = pes if chance(c, 75) else c.integer(1, pes - 1)
        cubes = n_cubes if chance(c, 70) else 1
        start = c.integer(0, n_cubes - cubes)
        return Machine(wiring, (1, 1, n_cubes, pes), launch_pes, start, cubes)
    if kind <= 8:  # a cube sub-mesh of a small (possibly 2-SIP) system
        sips, rows, cols = c.integer(1, 2), c.integer(1, 3), c.integer(1, 3)
        pes = 2 if chance(c, 15) else 1
        total = sips * rows * cols
        cubes = c.integer(1, min(total, MAX_RANKS // pes))
        start = c.integer(0, total - cubes)
        return Machine("cube_mesh", (sips, rows, cols, pes), pes, start, cubes)
    cols = c.integer(2, 4)
    rows = c.integer(1, 2)
    cubes = c.integer(1, min(rows * cols, 6))
    start = c.integer(0, rows * cols - cubes)
    return Machine("cube_ring", (1, rows, cols, 1), 1, start, cubes)


def _random_op(c: Chooser) -> CommOp:
    return CommOp("s" if chance(c, 50) else "r", str(pick(c, DIRS)), c.integer(1, 2),
                  str(pick(c, DTYPES)))


def _shuffle(c: Chooser, ops: list[CommOp]) -> None:
    for i in range(len(ops) - 1, 0, -1):
        j = c.integer(0, i)
        ops[i], ops[j] = ops[j], ops[i]


REORDERINGS = ("swap", "reorder", "sends_first", "recvs_first", "all_reorder",
               "all_sends_first")
FAULTS = ("drop", "reshape", "extra")


def _mutate(c: Chooser, progs: dict[Ep, list[CommOp]], eps: list[Ep],
            kinds: tuple[str, ...]) -> str:
    what = str(pick(c, kinds))
    if what.startswith("all_"):  # every rank at once, e.g. everybody sends before receiving
        for ep in eps:
            if progs[ep]:
                _mutate(c, progs, [ep], (what[4:],))
        return what
    ep = eps[c.integer(0, len(eps) - 1)]
    ops = progs[ep]
    if not ops and what != "extra":
        return "noop"
    if what == "swap":
        i, j = c.integer(0, len(ops) - 1), c.integer(0, len(ops) - 1)
        ops[i], ops[j] = ops[j], ops[i]
    elif what == "reorder":
        _shuffle(c, ops)
    elif what in ("sends_first", "recvs_first"):  # classic sources of depth requirements
        ops.sort(key=lambda o: (o.kind == "s") == (what == "recvs_first"))
    elif what == "drop":
        del ops[c.integer(0, len(ops) - 1)]
    elif what == "reshape":
        i = c.integer(0, len(ops) - 1)
        o = ops[i]
        ops[i] = CommOp(o.kind, o.dir, 3 - o.n, o.dtype) if chance(c, 50) else \
            CommOp(o.kind, o.dir, o.n, "f32" if o.dtype == "f16" else "f16")
    else:
        ops.insert(c.integer(0, len(ops)), _random_op(c))
    return what


def generate(c: Chooser) -> Example:
    """One example. Half keep every link balanced (exchanges reordered per rank: legal
    and matched, deadlocking or not depending on the orders and D); half also get faults."""
    machine = _machine(c)
    eps = machine.endpoints
    links = [(a, d, b) for a in eps for d in DIRS
             if (b := machine.neighbour(a, d)) is not None and machine.launched(b)]
    progs: dict[Ep, list[CommOp]] = {ep: [] for ep in eps}
    uniform = chance(c, 60)  # one message shape: reorderings cannot cause mismatches
    for _ in range(c.integer(1, MAX_MESSAGES) if links else 0):
        a, d, b = links[c.integer(0, len(links) - 1)]
        n, dtype = (1, "f32") if uniform else (c.integer(1, 2), str(pick(c, DTYPES)))
        progs[a].append(CommOp("s", d, n, dtype))
        progs[b].append(CommOp("r", OPPOSITE[d], n, dtype))
    balanced = chance(c, 60)
    steps = [_mutate(c, progs, eps, REORDERINGS) for _ in range(c.integer(0, MAX_MUTATIONS))]
    if not balanced:
        steps += [_mutate(c, progs, eps, FAULTS) for _ in range(c.integer(1, 2))]
    family = "+".join(["balanced" if balanced else "faulty", *steps])
    return Example(machine, c.integer(0, MAX_DEPTH),
                   {ep: tuple(ops) for ep, ops in progs.items()}, family)


def seeded_examples(seed: int, count: int) -> Iterator[Example]:
    rng = random.Random(seed)
    for _ in range(count):
        yield generate(RandomChooser(rng.getrandbits(64)))


# --- oracles --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Resolved:
    """One op with its port resolved against the machine (independent bookkeeping)."""

    kind: str
    dir: str
    status: str                      # "ok" | "no_link" | "outside"
    peer: Ep | None
    channel: tuple[Ep, str] | None   # the sending port of the link this op uses


def resolve(ex: Example) -> dict[Ep, list[Resolved]]:
    m = ex.machine
    out: dict[Ep, list[Resolved]] = {}
    for ep in m.endpoints:
        rows = []
        for op in ex.programs.get(ep, ()):
            peer = m.neighbour(ep, op.dir)
            status = "no_link" if peer is None else ("ok" if m.launched(peer) else "outside")
            channel: tuple[Ep, str] | None = None
            if op.kind == "s":
                channel = (ep, op.dir)
            elif peer is not None:
                channel = (peer, OPPOSITE[op.dir])
            rows.append(Resolved(op.kind, op.dir, status, peer, channel))
        out[ep] = rows
    return out


@dataclass(frozen=True)
class Exploration:
    states: int
    terminals: tuple[tuple[int, ...], ...]  # pcs (comm ops done per rank) of every dead end
    lengths: tuple[int, ...]

    @property
    def deadlock(self) -> bool:
        return any(any(pc < n for pc, n in zip(t, self.lengths, strict=True))
                   for t in self.terminals)


class TooManyStates(Exception):
    pass


def explore(ex: Example, depth: int | None, max_states: int = 2_000_000) -> Exploration:
    """All interleavings at queue depth `depth` (0 rendezvous, None unbounded), by DFS.

    A state is the vector of per-rank program counters: every queue's fill level follows
    from it (sends done by the writer minus recvs done by the reader). Terminal states are
    those with no enabled op; the schedule deadlocks iff one of them is unfinished.
    """
    space = _StateSpace(ex, depth)
    start = (0,) * len(space.progs)
    seen = {start}
    stack = [start]
    terminals: list[tuple[int, ...]] = []
    while stack:
        state = stack.pop()
        moved = False
        for nxt in space.successors(state):
            moved = True
            if nxt not in seen:
                if len(seen) >= max_states:
                    raise TooManyStates(f"more than {max_states} states")
                seen.add(nxt)
                stack.append(nxt)
        if not moved:
            terminals.append(state)
    return Exploration(len(seen), tuple(sorted(terminals)), space.lengths)


Channel = tuple[Ep, str]


class _StateSpace:
    """The example's ranks as resolved ops, and which ops each state enables."""

    def __init__(self, ex: Example, depth: int | None) -> None:
        self.ex = ex
        self.depth = depth
        eps = ex.machine.endpoints
        self.index = {ep: i for i, ep in enumerate(eps)}
        res = resolve(ex)
        self.progs = [res[ep] for ep in eps]
        self.lengths = tuple(len(p) for p in self.progs)
        # prefix[r][ch][pc] = ops on channel ch among rank r's first pc ops
        self.prefix: list[dict[Channel, list[int]]] = []
        for prog in self.progs:
            table: dict[Channel, list[int]] = {}
            for op in prog:
                if op.channel is not None:
                    table.setdefault(op.channel, [0] * (len(prog) + 1))
            for ch, counts in table.items():
                for i, op in enumerate(prog):
                    counts[i + 1] = counts[i] + (op.channel == ch)
            self.prefix.append(table)

    def writer(self, ch: Channel) -> int | None:
        return self.index.get(ch[0])

    def reader(self, ch: Channel) -> int | None:
        dst = self.ex.machine.neighbour(*ch)
        return self.index.get(dst) if dst is not None else None

    def done_on(self, r: int | None, ch: Channel, state: tuple[int, ...]) -> int:
        if r is None:
            return 0
        counts = self.prefix[r].get(ch)
        return counts[state[r]] if counts else 0

    def successors(self, state: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
        for r, prog in enumerate(self.progs):
            pc = state[r]
            if pc >= len(prog):
                continue
            op = prog[pc]
            if op.status == "no_link" or op.channel is None:
                continue  # IpcqInvalidDirection: never completes
            nxt = self._send(r, op.channel, state) if op.kind == "s" else \
                self._recv(r, op, state)
            if nxt is not None:
                yield nxt

    def _send(self, r: int, ch: Channel, state: tuple[int, ...]) -> tuple[int, ...] | None:
        rd = self.reader(ch)
        if self.depth == 0:
            if rd is None:
                return None  # nobody outside the launch ever meets a rendezvous
            rpc = state[rd]
            peer_ops = self.progs[rd]
            if rpc < len(peer_ops) and peer_ops[rpc].kind == "r" and \
                    peer_ops[rpc].channel == ch:
                nxt = list(state)
                nxt[r] += 1
                nxt[rd] += 1
                return tuple(nxt)
            return None
        in_flight = self.done_on(r, ch, state) - self.done_on(rd, ch, state)
        if self.depth is None or in_flight < self.depth:
            return (*state[:r], state[r] + 1, *state[r + 1:])
        return None

    def _recv(self, r: int, op: Resolved, state: tuple[int, ...]) -> tuple[int, ...] | None:
        if self.depth == 0 or op.status == "outside":
            return None  # rendezvous recvs fire with their send; outsiders never send
        assert op.channel is not None
        if self.done_on(self.writer(op.channel), op.channel, state) - \
                self.done_on(r, op.channel, state) > 0:
            return (*state[:r], state[r] + 1, *state[r + 1:])
        return None


@dataclass(frozen=True)
class Expected:
    """What an independent reading of the example says each property should be."""

    illegal: frozenset[tuple[Ep, int]]           # (rank, comm position) on missing ports
    outside: frozenset[tuple[Ep, int, Ep]]       # (rank, position, outside endpoint)
    matching_faults: int                          # mismatched pairs + unmatched leftovers
    deadlock: bool                                # at the example's depth
    terminals: int                                # dead ends at that depth (1 if confluent)
    stuck: frozenset[tuple[Ep, int]]              # (rank, position) blocked, if deadlock
    min_queue_depth: int | None
    rendezvous_free: bool
    states: int
    waits_on: dict[Ep, Ep] = field(default_factory=dict)  # blocked rank -> blocked peer

    def has_wait_cycle(self) -> bool:
        for start in self.waits_on:
            seen, node = set(), start
            while node in self.waits_on and node not in seen:
                seen.add(node)
                node = self.waits_on[node]
            if node in seen:
                return True
        return False


def expected(ex: Example, max_states: int = 2_000_000) -> Expected:
    res = resolve(ex)
    illegal = frozenset((ep, i) for ep, ops in res.items() for i, o in enumerate(ops)
                        if o.status == "no_link")
    outside = frozenset((ep, i, o.peer) for ep, ops in res.items() for i, o in enumerate(ops)
                        if o.status == "outside" and o.peer is not None)
    sends: dict[tuple[Ep, str], list[CommOp]] = {}
    recvs: dict[tuple[Ep, str], list[CommOp]] = {}
    for ep, ops in res.items():
        for o, spec in zip(ops, ex.programs.get(ep, ()), strict=True):
            if o.status != "ok" or o.channel is None:
                continue
            (sends if o.kind == "s" else recvs).setdefault(o.channel, []).append(spec)
    faults = 0
    for ch in set(sends) | set(recvs):
        s, r = sends.get(ch, []), recvs.get(ch, [])
        faults += abs(len(s) - len(r))
        faults += sum(1 for a, b in zip(s, r, strict=False)
                      if (a.n, a.dtype) != (b.n, b.dtype))
    at_depth = explore(ex, ex.depth, max_states)
    stuck: frozenset[tuple[Ep, int]] = frozenset()
    waits_on: dict[Ep, Ep] = {}
    eps = ex.machine.endpoints
    if at_depth.deadlock and len(at_depth.terminals) == 1:
        t = at_depth.terminals[0]
        stuck = frozenset((eps[r], pc) for r, pc in enumerate(t) if pc < at_depth.lengths[r])
        blocked = dict(stuck)
        for ep, pc in stuck:
            peer = res[ep][pc].peer
            if res[ep][pc].status == "ok" and peer in blocked:
                waits_on[ep] = peer
    cache: dict[int | None, bool] = {ex.depth: not at_depth.deadlock}

    def free(d: int | None) -> bool:
        if d not in cache:
            cache[d] = not explore(ex, d, max_states).deadlock
        return cache[d]

    min_depth: int | None = None
    if free(None):
        # With D >= the most sends any port makes no send can block: D behaves as unbounded.
        bound = max([1, *(len(v) for v in _sends_per_port(res).values())])
        min_depth = next((d for d in range(bound + 1) if free(d)), None)
        assert min_depth is not None, "oracle: free when unbounded but not at the send bound"
    return Expected(illegal, outside, faults, at_depth.deadlock, len(at_depth.terminals),
                    stuck, min_depth, free(0), at_depth.states, waits_on)


def _sends_per_port(res: dict[Ep, list[Resolved]]) -> dict[tuple[Ep, str], list[int]]:
    out: dict[tuple[Ep, str], list[int]] = {}
    for ep, ops in res.items():
        for i, o in enumerate(ops):
            if o.kind == "s":
                out.setdefault((ep, o.dir), []).append(i)
    return out



# --- the cross-check ------------------------------------------------------------------------

@dataclass(frozen=True)
class CrossCheck:
    outcome: str              # a label for tallies, e.g. "legal matched free"
    problems: tuple[str, ...]  # disagreements between meshproof and the oracles (want none)
    states: int                # states the interleaving search visited at the example's D
    min_queue_depth: int | None  # the oracle's


def trace_example(ex: Example, kernel: KernelRef) -> Schedule:
    return trace(kernel, build_launch(kernel, ex.launch_options()))


def cross_check(ex: Example, kernel: KernelRef, max_states: int = 2_000_000) -> CrossCheck:
    """Trace `ex` through tests/kernels/random_program.py, verify it, compare with oracles."""
    want = expected(ex, max_states)
    outcome = " ".join((
        "legal" if not want.illegal and not want.outside else "illegal",
        "matched" if not want.matching_faults else "unmatched",
        "deadlock" if want.deadlock else "free"))
    try:
        schedule = trace_example(ex, kernel)
        verdict = verify(schedule)
    except Exception as exc:  # InternalError (Z3 vs simulation) or any crash is a finding
        return CrossCheck(outcome, (f"{type(exc).__name__}: {exc}",), want.states,
                          want.min_queue_depth)
    problems = _compare(ex, want, schedule, verdict)
    return CrossCheck(outcome, tuple(problems), want.states, want.min_queue_depth)


def _compare(ex: Example, want: Expected, schedule: Schedule, verdict: Verdict) -> list[str]:
    eps = ex.machine.endpoints
    got_eps = [(p.endpoint.cube, p.endpoint.pe) for p in schedule.programs]
    if got_eps != eps:
        return [f"tracer ranks {got_eps} != launched endpoints {eps}"]
    problems: list[str] = []
    # comm op index -> position among the rank's comm ops (what the oracle counts)
    position: dict[Ep, dict[int, int]] = {}
    for prog, ep in zip(schedule.programs, eps, strict=True):
        comm = [op for op in prog.ops if op.kind.is_comm]
        position[ep] = {op.index: i for i, op in enumerate(comm)}
        traced = [("s" if op.kind.value == "send" else "r", op.dir.value if op.dir else "",
                   op.shape, op.dtype.value) for op in comm]
        spec = [(o.kind, o.dir, (o.n,), o.dtype) for o in ex.programs.get(ep, ())]
        if traced != spec:
            problems.append(f"tracer: rank {ep} traced {traced}, program says {spec}")
    check = _Checker(verdict, position, problems)
    check.ports(want)
    check.deadlock(ex, want)
    if verdict.min_queue_depth != want.min_queue_depth:
        problems.append(f"min_queue_depth: meshproof {verdict.min_queue_depth}, oracle "
                        f"{want.min_queue_depth}")
    want_rdv = Status.PROVED if want.rendezvous_free else Status.VIOLATED
    if verdict.rendezvous is not want_rdv:
        got_rdv = verdict.rendezvous.value if verdict.rendezvous else "not checked"
        problems.append(f"rendezvous: meshproof {got_rdv}, oracle {want_rdv.value}")
    # No rank loads a sharded buffer, so exactly-once merging holds vacuously; unless no
    # rank runs any op at all, which is nothing to certify (unknown).
    if any(prog.ops for prog in schedule.programs):
        check.status(Property.EXACTLY_ONCE_MERGE, False)
    elif verdict.property(Property.EXACTLY_ONCE_MERGE).status is not Status.UNKNOWN:
        problems.append("exactly_once_merge: no rank runs an op, expected unknown")
    return problems


@dataclass
class _Checker:
    """Compares one property of a verdict with the oracle's answer, noting problems."""

    verdict: Verdict
    position: dict[Ep, dict[int, int]]
    problems: list[str]

    def status(self, prop: Property, violated: bool) -> None:
        got = self.verdict.property(prop)
        want_status = Status.VIOLATED if violated else Status.PROVED
        if got.status is not want_status:
            self.problems.append(f"{prop.value}: meshproof {got.status.value}, oracle "
                                 f"{want_status.value} ({got.message})")

    def diags(self, prop: Property) -> list[Diagnostic]:
        cx = self.verdict.property(prop).counterexample
        return list(cx.diagnostics) if cx else []

    def where(self, d: Diagnostic) -> tuple[Ep, int]:
        assert d.endpoint is not None and d.op_index is not None
        ep = (d.endpoint.cube, d.endpoint.pe)
        return ep, self.position[ep].get(d.op_index, -1)

    def ports(self, want: Expected) -> None:
        self.status(Property.DIRECTION_LEGALITY, bool(want.illegal))
        got_illegal = {self.where(d) for d in self.diags(Property.DIRECTION_LEGALITY)}
        if got_illegal != set(want.illegal):
            self.problems.append(f"direction_legality lists {sorted(got_illegal)}, oracle "
                                 f"{sorted(want.illegal)}")
        self.status(Property.LAUNCH_CONFINEMENT, bool(want.outside))
        got_outside = {(*self.where(d), (d.peer.cube, d.peer.pe) if d.peer else None)
                       for d in self.diags(Property.LAUNCH_CONFINEMENT)}
        if got_outside != set(want.outside):
            self.problems.append(f"launch_confinement lists {sorted(got_outside, key=str)}, "
                                 f"oracle {sorted(want.outside)}")
        self.status(Property.CHANNEL_MATCHING, want.matching_faults > 0)
        n_faults = sum(1 for d in self.diags(Property.CHANNEL_MATCHING)
                       if d.role is not Role.NOTE)
        if n_faults != want.matching_faults:
            self.problems.append(f"channel_matching reports {n_faults} faults, oracle "
                                 f"{want.matching_faults}")

    def deadlock(self, ex: Example, want: Expected) -> None:
        self.status(Property.DEADLOCK_FREEDOM, want.deadlock)
        if want.terminals != 1:
            self.problems.append(f"oracle: {want.terminals} distinct dead ends at "
                                 f"D={ex.depth}; the Kahn-network argument (one run decides) "
                                 "expects exactly one")
        if not want.deadlock:
            return
        cx = self.verdict.property(Property.DEADLOCK_FREEDOM).counterexample
        details = cx.details if cx else None
        if not isinstance(details, DeadlockDetails):
            self.problems.append("deadlock_freedom: no deadlock details")
            return
        got_stuck = {((b.endpoint.cube, b.endpoint.pe),
                      self.position[(b.endpoint.cube, b.endpoint.pe)].get(b.op_index, -1))
                     for b in details.blocked}
        if got_stuck != set(want.stuck):
            self.problems.append(f"deadlock_freedom blocked ranks {sorted(got_stuck)}, "
                                 f"oracle {sorted(want.stuck)}")
        cycle = [(e.cube, e.pe) for e in details.wait_for_cycle]
        edges_ok = all(want.waits_on.get(a) == cycle[(i + 1) % len(cycle)]
                       for i, a in enumerate(cycle))
        if not edges_ok or bool(cycle) != want.has_wait_cycle():
            self.problems.append(f"deadlock_freedom wait-for cycle {cycle}, oracle's wait-for "
                                 f"edges {sorted(want.waits_on.items())}")
