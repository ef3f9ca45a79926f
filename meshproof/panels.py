"""The four GQA Llama-70B panels of the study, at validation and headline scale.

A panel presets a kernel and its launch, or several launches of it on one system at once
(`cube_starts`: the headline multi-user panels are the 8 kv groups, one launch per 2x4
sub-mesh, 64 cubes busy; meshproof.deploy verifies and simulates them together).
`validation` shapes are small enough to verify and simulate in seconds; `headline` shapes
are the study's (64 q heads, 8 kv heads, d_head 128, 1M context): the schedule is traced
and verified at that scale, numerics are simulated by the benchmark (decode) only.

Besides the four study panels (`PANEL_NAMES`), two **causal prefill panels**
(`CAUSAL_PANEL_NAMES`): Llama-70B prefill of one million tokens under a causal mask on
64 cubes x 8 PEs, every cube an independent 8-PE ring serving one q head (1 q head per
cube, d_head 128, 131,072 positions per PE), `causal_prefill_naive` with rank i holding
chunk i (`ring_prefill_causal_naive`, `--mask causal`) and `causal_prefill_zigzag` with
rank i holding chunks i and 15-i (`ring_prefill_causal_zigzag`, `--mask causal@zigzag`).
Two panels rather than one with a layout choice: each is a fixed kernel and mask, so
`verify --panel`, `simulate --panel` and the gate name the layout without another flag,
and the report sets them side by side (its per-rank imbalance figure). At validation
and at headline scale (one million tokens) all seven properties are proved: the causal
kernels keep p in f32 for the P·V dot and accumulate per key tile of 4096 keys, so the
rounding bound stays within the tolerance (spec/semantics.md §8).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from meshproof.errors import LaunchError
from meshproof.kernels import BUILTIN_KERNELS
from meshproof.model.launch_options import LaunchOptions
from meshproof.model.launch_values import SCALES
from meshproof.model.problem import DEFAULT_INPUT_BOUND
from meshproof.model.schedule import GroupMode, Scalar
from meshproof.model.topology import DEFAULT_SYSTEM, System

__all__ = ["SCALES", "Panel", "get_panel", "panel_input_bound"]
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
    users: int = 1                         # B: PEs per cube serving their own user
    cube_starts: tuple[int, ...] = ()      # several launches at once; () = one at cube_start
    input_bound: float = DEFAULT_INPUT_BOUND   # numeric_safety's |inputs| <= B for the panel

    @property
    def launches(self) -> tuple[int, ...]:
        """The cube_start of every launch the panel runs at once."""
        return self.cube_starts or (self.cube_start,)

    @property
    def is_deployment(self) -> bool:
        return len(self.launches) > 1

    def launch_options(self, queue_depth: int | None = None,
                       cube_start: int | None = None) -> LaunchOptions:
        """One launch: at `cube_start` (default: the panel's first launch)."""
        return LaunchOptions(
            kernel=self.kernel, system=self.system, wiring=self.wiring, cubes=self.cubes,
            cube_start=self.launches[0] if cube_start is None else cube_start,
            mesh=f"{self.mesh[0]}x{self.mesh[1]}" if self.mesh else None,
            args=self.args, queue_depth=queue_depth, groups=self.groups)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "kernel": self.kernel, "wiring": self.wiring,
                "S_q": self.S_q, "n_ranks": self.n_ranks, "rank_axis": self.rank_axis,
                "mesh": f"{self.mesh[0]}x{self.mesh[1]}" if self.mesh else None,
                "system": self.system.shape_text, "cubes": self.cubes,
                "cube_start": self.cube_start, "cube_starts": list(self.launches),
                "users": self.users, "args": dict(self.args),
                "groups": self.groups.value, "description": self.description}


def _panel(name: str, description: str, kernel: str, wiring: str, S_q: int, n_ranks: int,
           rank_axis: int, shapes: dict[str, int], *, mesh: tuple[int, int] | None = None,
           system: System = DEFAULT_SYSTEM, cubes: int = 1, cube_start: int = 0,
           users: int = 1, cube_starts: tuple[int, ...] = (),
           input_bound: float = DEFAULT_INPUT_BOUND,
           numerics: dict[str, Scalar] | None = None) -> Panel:
    params = inspect.signature(BUILTIN_KERNELS[kernel].func).parameters
    args: dict[str, Scalar] = {"S_q": S_q, **shapes, **(numerics or {})}
    if "rank_axis" in params:
        args["rank_axis"] = rank_axis
    # single-user panels: every cube runs its own 8-PE ring, one attention problem each;
    # batch on batch: PE p of every cube serves user p
    groups = GroupMode.CUBE if rank_axis == 0 else \
        GroupMode.PE if users > 1 else GroupMode.LAUNCH
    if mesh is None:
        args["n_ranks"] = n_ranks
    else:
        args["mesh_rows"], args["mesh_cols"] = mesh
    if "users" in params:
        args["users"] = users
    return Panel(name, description, kernel, wiring, S_q, n_ranks, rank_axis, mesh, system,
                 cubes, cube_start, tuple(sorted(args.items())), groups, users, cube_starts,
                 input_bound)


_VAL = {"h_q": 8, "h_kv": 1, "d_head": 16, "S_kv_per_rank": 32}


HEADLINE_SYSTEM = System(4, 4, 4, 8)
# At d_head = 128 and |x| <= 16 per element, scores reach 0.088 * 128 * 16^2 = 2896, whose
# rounding brings the decode panels' bound to 9.95e-3·max|V|, at the edge of the default
# tolerance. The headline panels assume |x| <= 4 (scores up to 181; 1.5e-3·max|V|), which
# every verdict states; `--input-bound` overrides it.
HEADLINE_INPUT_BOUND = 4.0
# At 131,072 keys per rank the decode and prefill kernels keep p in f32 for the P·V dot
# and accumulate per tile of 4096 keys (mesh_mlo's docstring, spec/semantics.md §8):
# numeric_safety is then proved at the default tolerance (bound 1.6e-3·max|V|), which an
# f16 p over one dot of every key misses (1.7e-2·max|V| + 0.13).
HEADLINE_NUMERICS: dict[str, Scalar] = {"p_dtype": "f32", "key_tile": 4096}
# the multi-user kv groups: a 2x4 sub-mesh at cube_start 0 and 8 of each SIP
HEADLINE_GROUP_STARTS = tuple(range(0, HEADLINE_SYSTEM.n_cubes, 8))
# one kv head (8 q heads) per group, its 1M-token KV split over the group's 8 cubes
_HEADLINE_GROUP = {"h_q": 8, "h_kv": 1, "d_head": 128, "S_kv_per_rank": CONTEXT_HEADLINE // 8}


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
               system=HEADLINE_SYSTEM, input_bound=HEADLINE_INPUT_BOUND, cubes=64,
               numerics=HEADLINE_NUMERICS),
        _panel("multi_user_prefill",
               "Llama-70B prefill, batch: 8 kv groups at once, each group's KV split over a "
               "2x4 sub-mesh and circulated along a snake path (cube_start 0 and 8 in each "
               "of 4 SIPs: 64 cubes busy, PE 0 of each)",
               "mesh_kv_snake", "cube_mesh", 8, 8, 1, _HEADLINE_GROUP, mesh=(2, 4),
               system=HEADLINE_SYSTEM, input_bound=HEADLINE_INPUT_BOUND, cubes=8,
               cube_starts=HEADLINE_GROUP_STARTS, numerics=HEADLINE_NUMERICS),
        _panel("single_user_decode",
               "Llama-70B decode, one user: 64 cubes, each an independent 8-PE line "
               "(1 q head per cube, 8 cubes per kv group, 8 groups, 1M context)",
               "mesh_mlo_1d", "pe_line", 1, 8, 0, _headline_kv(8),
               system=HEADLINE_SYSTEM, input_bound=HEADLINE_INPUT_BOUND, cubes=64,
               numerics=HEADLINE_NUMERICS),
        _panel("multi_user_decode",
               "Llama-70B decode, batch on batch (B=8): 8 kv groups at once on 2x4 "
               "sub-meshes (cube_start 0 and 8 in each of 4 SIPs: 64 cubes, 512 PEs); PE p "
               "of every cube serves user p, whose all-reduce runs over the PEs p of its "
               "group's 8 cubes",
               "mesh_mlo_2d_batch", "cube_mesh_all_pes", 1, 8, 1, _HEADLINE_GROUP,
               mesh=(2, 4), system=HEADLINE_SYSTEM, input_bound=HEADLINE_INPUT_BOUND,
               cubes=8, users=8, cube_starts=HEADLINE_GROUP_STARTS,
               numerics=HEADLINE_NUMERICS),
    ]},
}

_CAUSAL_VAL = {"h_q": 8, "h_kv": 1, "d_head": 16, "S_kv_per_rank": 32}
_CAUSAL_HEADLINE = {"h_q": 1, "h_kv": 1, "d_head": 128, "S_kv_per_rank": CONTEXT_HEADLINE // 8}
CAUSAL_LAYOUTS = {"causal_prefill_naive": "naive", "causal_prefill_zigzag": "zigzag"}


def _causal(name: str, scale: str) -> Panel:
    layout = CAUSAL_LAYOUTS[name]
    how = "rank i holds chunk i: the last ranks do most of the work" if layout == "naive" \
        else "rank i holds chunks i and 15-i: every rank the same work"
    if scale == "validation":
        return _panel(name, f"causal prefill, {layout} layout, over the 8-PE ring of one "
                      f"cube ({how})", f"ring_prefill_causal_{layout}", "pe_ring", 32, 8, 0,
                      _CAUSAL_VAL)
    return _panel(name, f"Llama-70B causal prefill of 1M tokens, {layout} layout: 64 cubes, "
                  f"each an independent 8-PE ring (1 q head per cube, 131,072 positions per "
                  f"PE; {how})", f"ring_prefill_causal_{layout}", "pe_ring",
                  CONTEXT_HEADLINE // 8, 8, 0, _CAUSAL_HEADLINE, system=HEADLINE_SYSTEM,
                  input_bound=HEADLINE_INPUT_BOUND, cubes=64)


for _scale in SCALES:
    PANELS[_scale].update({n: _causal(n, _scale) for n in CAUSAL_LAYOUTS})

# the study's four panels (the report's panel table, op-log figures and scaling)
PANEL_NAMES = ("single_user_prefill", "multi_user_prefill", "single_user_decode",
               "multi_user_decode")
CAUSAL_PANEL_NAMES = tuple(CAUSAL_LAYOUTS)
ALL_PANEL_NAMES = PANEL_NAMES + CAUSAL_PANEL_NAMES


def get_panel(name: str, scale: str = "validation") -> Panel:
    if scale not in PANELS:
        raise LaunchError(f"unknown scale {scale!r}: use one of {', '.join(SCALES)}")
    if name not in PANELS[scale]:
        raise LaunchError(f"unknown panel {name!r}: use one of {', '.join(ALL_PANEL_NAMES)}")
    return PANELS[scale][name]


def panel_input_bound(name: str | None, scale: str | None) -> float:
    """numeric_safety's |inputs| <= B for a launch of panel `name` (the headline panels
    assume a smaller one than the default), else the default: what `verify --panel` and
    gate cases with a panel use unless told otherwise."""
    if name is None:
        return DEFAULT_INPUT_BOUND
    return get_panel(name, scale or "validation").input_bound
