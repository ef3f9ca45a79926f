"""The report's fixed list of runs: every built-in kernel on the launch that shows it.

Good kernels run on their natural launch; each known-bad variant runs on the launch that
shows its bug; two study facts get their own case (the 1D kernel over 8 cubes of a 4x4
SIP, and the fan-out's queue-depth threshold). Panels come from meshproof.panels.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshproof.model.launch import LaunchOptions
from meshproof.model.topology import System
from meshproof.panels import PANEL_NAMES, get_panel


@dataclass(frozen=True, slots=True)
class Case:
    name: str                       # file-name safe, unique
    kernel: str
    options: LaunchOptions
    expect_ok: bool                 # the verdict the report expects (a known-bad case: False)
    why: str                        # what the case shows, one line
    panel: str | None = None
    scale: str = "validation"
    inputs: str = "normal"          # the simulator's input generator (sim.inputs.InputKind)


# The fan-out forwards single-rank partials, so a message's ℓ is at most one rank's key
# count: 131072 per rank (1M context over 8 PEs, the headline) is past float16's 65504.
F16_OVERFLOW_KEYS_PER_RANK = 131072


def _opts(**kw: object) -> LaunchOptions:
    return LaunchOptions(**kw)  # type: ignore[arg-type]


VALIDATION_CASES: tuple[Case, ...] = (
    Case("mesh_mlo_1d", "mesh_mlo_1d", _opts(), True,
         "1D fan-out all-reduce over the 8-PE line of one cube"),
    Case("mesh_mlo_2d_2x4", "mesh_mlo_2d", _opts(mesh="2x4", wiring="cube_mesh"), True,
         "2D row-then-column all-reduce on a 2x4 cube sub-mesh: 4 steps instead of 7"),
    Case("mesh_mlo_2d_2x4_at8", "mesh_mlo_2d",
         _opts(mesh="2x4", wiring="cube_mesh", cube_start=8), True,
         "the same 2D kernel on the second 2x4 sub-mesh (cube_start 8): subtracts cube_start"),
    Case("ring_mlo", "ring_mlo", _opts(), True,
         "closed-ring all-reduce over the 8-PE ring of one cube"),
    Case("mesh_kv", "mesh_kv", _opts(), True,
         "prefill: KV slices circulate both ways along the 8-PE line"),
    Case("mesh_mlo_1d_8cubes", "mesh_mlo_1d",
         _opts(wiring="cube_mesh", cubes=8, args=(("rank_axis", 1),)), False,
         "the 1D kernel over 8 cubes of a 4x4 SIP: cube 3 has no E link, cube 4 no W "
         "(IpcqInvalidDirection)"),
    Case("mesh_mlo_1d_depth2", "mesh_mlo_1d", _opts(queue_depth=2), False,
         "the fan-out sends 3 messages per direction before receiving: deadlocks at queue "
         "depth 2"),
    Case("mesh_mlo_2d_physical_rank", "mesh_mlo_2d_physical_rank",
         _opts(mesh="2x4", wiring="cube_mesh", cube_start=8), False,
         "ignores cube_start: at cube 8 it computes rows 2..3 of a 2-row mesh and sends N "
         "out of its launch"),
    Case("mesh_mlo_1d_recv_first", "mesh_mlo_1d_recv_first", _opts(), False,
         "receives before sending: neighbours wait on each other (deadlock at any depth)"),
    Case("mesh_mlo_1d_forward_running_state", "mesh_mlo_1d_forward_running_state", _opts(),
         False, "forwards the merged running state: shards merged twice"),
    Case("mesh_mlo_1d_normalised_merge", "mesh_mlo_1d_normalised_merge", _opts(), False,
         "merges softmax-normalised o, then divides by l again: wrong numbers"),
    Case("mesh_kv_skip_last", "mesh_kv_skip_last", _opts(), False,
         "prefill that stops one step early: the farthest slice is never merged"),
    Case("mesh_mlo_1d_f16_messages", "mesh_mlo_1d",
         _opts(args=(("S_kv_per_rank", F16_OVERFLOW_KEYS_PER_RANK), ("msg_dtype", "f16"))),
         False, "triplets sent in f16, near-uniform attention, 131072 keys per rank (1M "
         "context over 8 PEs): a partial ℓ of 131072 > 65504 overflows f16", inputs="uniform"),
)


def panel_cases(scale: str) -> tuple[Case, ...]:
    out = []
    for name in PANEL_NAMES:
        p = get_panel(name, scale)
        out.append(Case(f"panel_{name}", p.kernel, p.launch_options(), True, p.description,
                        panel=name, scale=scale))
    return tuple(out)


# gqa_scaling.png: the multi_user panels over Q heads per cube (h_q with one kv head).
SCALING_PANELS = ("multi_user_prefill", "multi_user_decode")
SCALING_Q_HEADS = (1, 2, 4)


def scaling_cases(scale: str = "validation") -> tuple[Case, ...]:
    out = []
    for name in SCALING_PANELS:
        p = get_panel(name, scale)
        for h_q in SCALING_Q_HEADS:
            args = dict(p.args)
            args["h_q"] = h_q
            base = p.launch_options()
            opts = LaunchOptions(system=base.system, wiring=base.wiring, cubes=base.cubes,
                                 cube_start=base.cube_start, mesh=base.mesh,
                                 args=tuple(sorted(args.items())))
            out.append(Case(f"scaling_{name}_hq{h_q}", p.kernel, opts, True,
                            f"{name} with {h_q} q head(s) per cube", panel=name, scale=scale))
    return tuple(out)


# steps_1d_vs_2d.png: mesh sizes; the 1D kernel runs on a closed cube ring over the same
# cubes (its line part), the 2D kernel on a cube_mesh SIP shaped like the mesh.
STEP_MESHES = ((1, 4), (2, 4), (4, 4), (4, 8), (8, 8))


def step_cases(meshes: tuple[tuple[int, int], ...] = STEP_MESHES) -> tuple[Case, ...]:
    out = []
    for rows, cols in meshes:
        system = System(1, rows, cols, 8)
        n = rows * cols
        out.append(Case(f"steps_1d_{rows}x{cols}", "mesh_mlo_1d",
                        LaunchOptions(system=system, wiring="cube_ring", cubes=n,
                                      args=(("rank_axis", 1),)),
                        True, f"1D fan-out over {n} cubes (ring wiring, line schedule)"))
        out.append(Case(f"steps_2d_{rows}x{cols}", "mesh_mlo_2d",
                        LaunchOptions(system=system, wiring="cube_mesh",
                                      mesh=f"{rows}x{cols}"),
                        True, f"2D all-reduce on a {rows}x{cols} cube mesh"))
    return tuple(out)
