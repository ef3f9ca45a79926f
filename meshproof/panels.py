"""The four GQA Llama-70B panels of the study, at validation and headline scale.

A panel presets a kernel and its launch. `validation` shapes are small enough to verify
and simulate in seconds; `headline` shapes are the study's (64 q heads, 8 kv heads,
d_head 128, 1M context): the schedule is traced and verified at that scale, numerics are
simulated by the benchmark (decode) only.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.errors import LaunchError
from meshproof.model.launch import LaunchOptions
from meshproof.model.schedule import GroupMode, Scalar
from meshproof.model.topology import DEFAULT_SYSTEM, System

SCALES = ("validation", "headline")
CONTEXT_HEADLINE = 1 << 20


@dataclass(frozen=True, slots=True)
class Panel:
    """A GQA Llama-70B panel: a kernel and its launch at one scale."""

    name: str
    description: str
    kernel: str
    wiring: str
    S_q: int
    n_ranks: int
    rank_axis: int
    mesh: tuple[int, int] | None
    system: System
    cubes: int
    cube_start: int
    args: tuple[tuple[str, Scalar], ...]
    groups: GroupMode = GroupMode.LAUNCH   # which ranks form one attention problem

    def launch_options(self, queue_depth: int | None = None) -> LaunchOptions:
        return LaunchOptions(
            system=self.system, wiring=self.wiring, cubes=self.cubes,
            cube_start=self.cube_start,
            mesh=f"{self.mesh[0]}x{self.mesh[1]}" if self.mesh else None,
            args=self.args, queue_depth=queue_depth, groups=self.groups)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "kernel": self.kernel, "wiring": self.wiring,
                "S_q": self.S_q, "n_ranks": self.n_ranks, "rank_axis": self.rank_axis,
                "mesh": f"{self.mesh[0]}x{self.mesh[1]}" if self.mesh else None,
                "system": self.system.shape_text, "cubes": self.cubes,
                "cube_start": self.cube_start, "args": dict(self.args),
                "groups": self.groups.value, "description": self.description}


def _panel(name: str, description: str, kernel: str, wiring: str, S_q: int, n_ranks: int,
           rank_axis: int, shapes: dict[str, int], *, mesh: tuple[int, int] | None = None,
           system: System = DEFAULT_SYSTEM, cubes: int = 1, cube_start: int = 0) -> Panel:
    args: dict[str, Scalar] = {"S_q": S_q, "rank_axis": rank_axis, **shapes}
    # single-user panels: every cube runs its own 8-PE ring, one attention problem each
    groups = GroupMode.CUBE if rank_axis == 0 else GroupMode.LAUNCH
    if mesh is None:
        args["n_ranks"] = n_ranks
    else:
        args["mesh_rows"], args["mesh_cols"] = mesh
    return Panel(name, description, kernel, wiring, S_q, n_ranks, rank_axis, mesh, system,
                 cubes, cube_start, tuple(sorted(args.items())), groups)


_VAL = {"h_q": 8, "h_kv": 1, "d_head": 16, "S_kv_per_rank": 32}


def _headline_kv(n: int) -> dict[str, int]:
    return {"h_q": 1, "h_kv": 1, "d_head": 128, "S_kv_per_rank": CONTEXT_HEADLINE // n}


PANELS: dict[str, dict[str, Panel]] = {
    "validation": {p.name: p for p in [
        _panel("single_user_prefill", "B=1 prefill: KV split over the 8 PEs of one cube",
               "mesh_kv", "pe_line", 16, 8, 0, _VAL),
        _panel("multi_user_prefill", "B=8 prefill: KV split over 4 cubes (PE 0 of each)",
               "mesh_kv", "cube_mesh", 16, 4, 1, _VAL, cubes=4),
        _panel("single_user_decode", "B=1 decode: 1D fan-out over the 8 PEs of one cube",
               "mesh_mlo_1d", "pe_line", 1, 8, 0, _VAL),
        _panel("multi_user_decode", "B=8 decode: 2D all-reduce on a 1x4 cube mesh",
               "mesh_mlo_2d", "cube_mesh", 1, 4, 1, _VAL, mesh=(1, 4), cubes=4),
    ]},
    "headline": {p.name: p for p in [
        _panel("single_user_prefill",
               "Llama-70B prefill, one user: 64 cubes, each an independent 8-PE line "
               "(1 q head per cube, 1M context)",
               "mesh_kv", "pe_line", 8, 8, 0, _headline_kv(8),
               system=System(4, 4, 4, 8), cubes=64),
        _panel("multi_user_prefill",
               "Llama-70B prefill, batch: KV of one group split over a row of 4 cubes",
               "mesh_kv", "cube_mesh", 8, 4, 1,
               {"h_q": 8, "h_kv": 1, "d_head": 128, "S_kv_per_rank": CONTEXT_HEADLINE // 4},
               system=System(4, 4, 4, 8), cubes=4),
        _panel("single_user_decode",
               "Llama-70B decode, one user: 64 cubes, each an independent 8-PE line "
               "(1 q head per cube, 8 cubes per kv group, 8 groups, 1M context)",
               "mesh_mlo_1d", "pe_line", 1, 8, 0, _headline_kv(8),
               system=System(4, 4, 4, 8), cubes=64),
        _panel("multi_user_decode",
               "Llama-70B decode, batch: one 8-cube kv group on a 2x4 sub-mesh at cube 8 "
               "(the other 7 groups are the same schedule at cube_start 0, 16, ..., 56)",
               "mesh_mlo_2d", "cube_mesh", 1, 8, 1,
               {"h_q": 8, "h_kv": 1, "d_head": 128, "S_kv_per_rank": CONTEXT_HEADLINE // 8},
               mesh=(2, 4), system=System(4, 4, 4, 8), cubes=8, cube_start=8),
    ]},
}

PANEL_NAMES = tuple(PANELS["validation"])


def get_panel(name: str, scale: str = "validation") -> Panel:
    if scale not in PANELS:
        raise LaunchError(f"unknown scale {scale!r}: use one of {', '.join(SCALES)}")
    if name not in PANELS[scale]:
        raise LaunchError(f"unknown panel {name!r}: use one of {', '.join(PANEL_NAMES)}")
    return PANELS[scale][name]
