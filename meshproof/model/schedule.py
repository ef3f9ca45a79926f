"""The schedule IR: what every back-end (verify, sim, report) reads.

Frozen, slotted records; ops refer to values by per-rank integer ids. Nothing here holds
kernel code: a back-end that needs more than this has found a gap in the IR.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from meshproof.model.masks import Mask
from meshproof.model.topology import Direction, Endpoint, System
from meshproof.model.wiring import Wiring

Scalar = int | float | bool | str | None


def json_scalar(value: Scalar) -> Scalar:
    """JSON has no inf/nan: non-finite floats are written as "inf", "-inf", "nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


class Harness(Enum):
    """How the simulator builds a kernel's inputs and reference (spec/simulator.md)."""

    DECODE = "decode"      # Q replicated, KV split by sequence across ranks
    PREFILL = "prefill"    # Q and KV split by sequence, KV circulates


class DType(Enum):
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"

    @property
    def itemsize(self) -> int:
        return 4 if self is DType.F32 else 2


class OpKind(Enum):
    LOAD = "load"
    STORE = "store"
    DOT = "dot"
    TRANS = "trans"
    RESHAPE = "reshape"
    VIEW = "view"       # elements [offset, offset + prod(shape)) of x, row-major; no copy
    MAX = "max"
    SUM = "sum"
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    LOG2 = "log2"
    LOG1P = "log1p"
    SIGMOID = "sigmoid"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    CAST = "cast"
    FULL = "full"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    NEG = "neg"
    SEND = "send"
    RECV = "recv"
    ARANGE = "arange"   # positions lo..hi-1 (f32); `fill` holds lo
    LT = "lt"           # comparisons: a mask of 1.0 (true) and 0.0 (false), f32
    LE = "le"
    GT = "gt"
    GE = "ge"
    EQ = "eq"
    NE = "ne"
    WHERE = "where"     # where(cond, a, b): a where cond is nonzero, else b

    @property
    def is_comm(self) -> bool:
        return self in (OpKind.SEND, OpKind.RECV)


ELEMENTWISE_BINARY = frozenset({OpKind.ADD, OpKind.SUB, OpKind.MUL, OpKind.DIV,
                                OpKind.MAXIMUM, OpKind.MINIMUM})
ELEMENTWISE_UNARY = frozenset({OpKind.EXP, OpKind.EXP2, OpKind.LOG, OpKind.LOG2, OpKind.LOG1P,
                               OpKind.SIGMOID, OpKind.NEG})
REDUCTIONS = frozenset({OpKind.MAX, OpKind.SUM})
COMPARISONS = frozenset({OpKind.LT, OpKind.LE, OpKind.GT, OpKind.GE, OpKind.EQ, OpKind.NE})
# the ops of masks (spec/tl.md §4): the verifier's semantic domains do not model them yet
MASK_KINDS = frozenset({OpKind.ARANGE, OpKind.WHERE, *COMPARISONS})


@dataclass(frozen=True, slots=True, order=True)
class SourceLoc:
    """A kernel source line an op was traced at, printed as `file:line`."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class ValueRef:
    """An operand that is a tensor value of the same rank, by id."""

    id: int


@dataclass(frozen=True, slots=True)
class Const:
    """An operand that is a Python scalar baked into the op."""

    value: float


Arg = ValueRef | Const


@dataclass(frozen=True, slots=True)
class Op:
    """One tl op of one rank.

    `shape`/`dtype` describe the op's result; for `send` and `store` they describe the
    value sent or stored. `out` is the id of the value the op defines (None for send and
    store). `axis` is the reduction/softmax axis (non-negative); `perm` the axis order of
    `trans`; `ptr`/`offset` the buffer of `load`/`store` (offset in elements), and `offset`
    the first flat element a `view` selects; `fill` the
    value of `full` and the first position of `arange`.
    """

    index: int
    kind: OpKind
    args: tuple[Arg, ...]
    out: int | None
    shape: tuple[int, ...]
    dtype: DType
    source: SourceLoc
    dir: Direction | None = None
    nbytes: int = 0
    axis: int | None = None
    keepdims: bool = True
    perm: tuple[int, ...] | None = None
    ptr: str | None = None
    offset: int = 0
    fill: float | None = None

    @property
    def value_args(self) -> tuple[int, ...]:
        return tuple(a.id for a in self.args if isinstance(a, ValueRef))


@dataclass(frozen=True, slots=True)
class RankProgram:
    """The ordered ops of one launched endpoint. Empty if the rank returned at once."""

    endpoint: Endpoint
    ops: tuple[Op, ...]

    @property
    def comm_ops(self) -> tuple[Op, ...]:
        return tuple(op for op in self.ops if op.kind.is_comm)


class GroupMode(Enum):
    """Which ranks form one attention problem (spec/semantics.md §1)."""

    LAUNCH = "launch"   # the whole launch is one problem: one Q, KV split over its ranks
    CUBE = "cube"       # every cube is its own problem (the single-user panels)
    PE = "pe"           # PE p of every cube forms problem p (batch on batch)


DEFAULT_OUTPUTS = ("o_ptr",)


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """Everything about a launch that back-ends need, as plain data."""

    kernel: str
    kernel_file: str
    wiring: str
    system: System
    pes: int
    n_cubes: int
    cube_start: int
    args: tuple[tuple[str, Scalar], ...]
    queue_depth: int
    sharded: tuple[str, ...]
    harness: Harness
    groups: GroupMode = GroupMode.LAUNCH
    outputs: tuple[str, ...] = DEFAULT_OUTPUTS
    softmax_scale: float | None = None      # the reference's scale, if given
    empty_shards: tuple[Endpoint, ...] = ()  # ranks whose KV slice is empty (numeric_safety)
    mask: Mask | None = None                 # the attention mask the launch declares

    @property
    def cubes(self) -> range:
        return range(self.cube_start, self.cube_start + self.n_cubes)

    def is_launched(self, ep: Endpoint) -> bool:
        return self.cube_start <= ep.cube < self.cube_start + self.n_cubes and \
            0 <= ep.pe < self.pes

    def header(self, queue_depth: int | None = None) -> str:
        """The launch as every command's first line states it: `KERNEL on WIRING
        (SYSTEM), cubes A..B x P PEs`, then `, queue depth D` when given, then the
        attention problems (`; groups: launch|cube|pe`)."""
        last = self.cube_start + self.n_cubes - 1
        depth = f", queue depth {queue_depth}" if queue_depth is not None else ""
        return (f"{self.kernel} on {self.wiring} ({self.system.shape_text}), cubes "
                f"{self.cube_start}..{last} x {self.pes} PEs{depth}; groups: "
                f"{self.groups.value}")

    def arg(self, name: str, default: Scalar = None) -> Scalar:
        for key, value in self.args:
            if key == name:
                return value
        return default

    def to_json(self) -> dict[str, object]:
        return {
            "kernel": self.kernel,
            "kernel_file": self.kernel_file,
            "wiring": self.wiring,
            "system": self.system.shape_text,
            "pes": self.pes,
            "cubes": self.n_cubes,
            "cube_start": self.cube_start,
            "args": {k: json_scalar(v) for k, v in self.args},
            "queue_depth": self.queue_depth,
            "sharded": list(self.sharded),
            "harness": self.harness.value,
            "groups": self.groups.value,
            "outputs": list(self.outputs),
            "softmax_scale": json_scalar(self.softmax_scale),
            "empty_shards": [[e.cube, e.pe] for e in self.empty_shards],
            **({"mask": self.mask.text} if self.mask is not None else {}),
        }


@dataclass(frozen=True, slots=True)
class Schedule:
    """A traced launch: per launched endpoint (sorted), its program."""

    launch: LaunchSpec
    wiring: Wiring
    programs: tuple[RankProgram, ...]

    def rank_index(self) -> dict[Endpoint, int]:
        return {p.endpoint: i for i, p in enumerate(self.programs)}

    @property
    def active(self) -> tuple[RankProgram, ...]:
        return tuple(p for p in self.programs if p.ops)

    def program(self, ep: Endpoint) -> RankProgram | None:
        for p in self.programs:
            if p.endpoint == ep:
                return p
        return None
