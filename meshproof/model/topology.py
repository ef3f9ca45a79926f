"""The machine: SIPs of rows x cols cubes, each cube with a line of PEs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from meshproof.errors import TopologyError

# Anything past this is a typo (e.g. 4000x4) rather than a machine anyone can trace: a
# wafer of 64x64 cubes, or one cube of 1,024 PEs (the 1D benchmark line).
MAX_CUBES = 4096
MAX_PES = 1024


class Direction(Enum):
    E = "E"
    W = "W"
    N = "N"
    S = "S"

    @property
    def opposite(self) -> Direction:
        return _OPPOSITE[self]

    @classmethod
    def parse(cls, text: object) -> Direction:
        if isinstance(text, Direction):
            return text
        if isinstance(text, str) and text.upper() in cls.__members__:
            return cls[text.upper()]
        raise TopologyError(f"unknown direction {text!r}: use one of 'E', 'W', 'N', 'S'")


_OPPOSITE = {Direction.E: Direction.W, Direction.W: Direction.E,
             Direction.N: Direction.S, Direction.S: Direction.N}


@dataclass(frozen=True, slots=True, order=True)
class Endpoint:
    """A PE on the machine: physical cube id and PE index inside that cube."""

    cube: int
    pe: int

    @property
    def label(self) -> str:
        return f"c{self.cube}p{self.pe}"

    def describe(self) -> str:
        return f"(cube {self.cube}, pe {self.pe})"


@dataclass(frozen=True, slots=True)
class CubeCoord:
    """Where a physical cube sits: its SIP, row and column."""

    sip: int
    row: int
    col: int


@dataclass(frozen=True, slots=True)
class System:
    """`n_sips` SIPs, each a `rows x cols` grid of cubes, each cube with `pes` PEs."""

    n_sips: int = 1
    rows: int = 4
    cols: int = 4
    pes: int = 8

    def __post_init__(self) -> None:
        for name in ("n_sips", "rows", "cols", "pes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TopologyError(f"system {name} must be a positive integer, got {value!r}")
        if self.n_cubes > MAX_CUBES:
            raise TopologyError(
                f"system has {self.n_cubes} cubes, more than the supported {MAX_CUBES}; "
                "check --system (SIPSxROWSxCOLS)")
        if self.pes > MAX_PES:
            raise TopologyError(f"system has {self.pes} PEs per cube, more than {MAX_PES}; "
                                "check --pes")

    @property
    def cubes_per_sip(self) -> int:
        return self.rows * self.cols

    @property
    def n_cubes(self) -> int:
        return self.n_sips * self.cubes_per_sip

    @property
    def shape_text(self) -> str:
        return f"{self.n_sips}x{self.rows}x{self.cols}"

    def coord(self, cube: int) -> CubeCoord:
        self.check_cube(cube)
        sip, local = divmod(cube, self.cubes_per_sip)
        row, col = divmod(local, self.cols)
        return CubeCoord(sip, row, col)

    def cube_id(self, sip: int, row: int, col: int) -> int:
        return sip * self.cubes_per_sip + row * self.cols + col

    def check_cube(self, cube: int) -> None:
        if not 0 <= cube < self.n_cubes:
            raise TopologyError(
                f"cube {cube} is outside the system ({self.n_cubes} cubes, "
                f"{self.shape_text}); use a cube id in 0..{self.n_cubes - 1}")

    def check_endpoint(self, ep: Endpoint) -> None:
        self.check_cube(ep.cube)
        if not 0 <= ep.pe < self.pes:
            raise TopologyError(f"pe {ep.pe} is outside a cube of {self.pes} PEs; "
                                f"use a pe id in 0..{self.pes - 1}")

    def describe_cube(self, cube: int) -> str:
        c = self.coord(cube)
        return f"cube {cube} (SIP {c.sip}, row {c.row}, col {c.col})"

    def to_json(self) -> dict[str, int]:
        return {"n_sips": self.n_sips, "rows": self.rows, "cols": self.cols, "pes": self.pes}


_SYSTEM_RE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)\s*$")
_MESH_RE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")


def parse_system(text: str, pes: int = 8) -> System:
    """Parse `SIPSxROWSxCOLS`, e.g. `1x4x4` or `2x4x4`."""
    match = _SYSTEM_RE.match(text)
    if not match:
        raise TopologyError(f"malformed system {text!r}: write SIPSxROWSxCOLS, e.g. 1x4x4")
    sips, rows, cols = (int(g) for g in match.groups())
    return System(n_sips=sips, rows=rows, cols=cols, pes=pes)


def parse_mesh(text: str) -> tuple[int, int]:
    """Parse a kernel sub-mesh `RxC`, e.g. `2x4`."""
    match = _MESH_RE.match(text)
    if not match:
        raise TopologyError(f"malformed mesh {text!r}: write ROWSxCOLS, e.g. 2x4")
    rows, cols = (int(g) for g in match.groups())
    if rows < 1 or cols < 1:
        raise TopologyError(f"mesh {text!r} must have at least one row and one column")
    if rows * cols > MAX_CUBES:
        raise TopologyError(f"mesh {text!r} has more than {MAX_CUBES} cubes")
    return rows, cols


DEFAULT_SYSTEM = System()
