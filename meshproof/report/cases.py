"""The report's fixed list of runs, as proof-matrix cases with exact expectations.

Good kernels run on their natural launch; each known-bad variant runs on the launch that
shows its bug, expecting exactly the violations it shows (as `proofs.toml` would); two
study facts get their own case (the 1D kernel over 8 cubes of a 4x4 SIP, and the
fan-out's queue-depth threshold). Panels come from meshproof.panels. The sweep judges
every run with the gate's judge.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from meshproof.gate.matrix import GateCase
from meshproof.kernels import BUILTIN_KERNELS
from meshproof.model.launch_options import LaunchOptions
from meshproof.model.schedule import Scalar
from meshproof.model.topology import System
from meshproof.panels import PANEL_NAMES, get_panel
from meshproof.sim.inputs import InputKind
from meshproof.verify.properties import Property

DL, LC, CM = Property.DIRECTION_LEGALITY, Property.LAUNCH_CONFINEMENT, Property.CHANNEL_MATCHING
DF, EOM = Property.DEADLOCK_FREEDOM, Property.EXACTLY_ONCE_MERGE
AE, NS = Property.ATTENTION_EQUIVALENCE, Property.NUMERIC_SAFETY


@dataclass(frozen=True, slots=True)
class ReportCase:
    case: GateCase                   # name (file-name safe, unique), kernel, launch, expect
    why: str                         # what the case shows, one line
    inputs: InputKind = InputKind.NORMAL   # the simulator's input generator

    @property
    def name(self) -> str:
        return self.case.name


# numeric_safety's rounding bounds at |inputs| <= 16 are 1.5e-3..3.1e-3·max|V| for the
# built-ins and the validation panels, and about 1.6e-3·max|V| for the headline panels at
# their |inputs| <= 4 (f32 p, 4096-key tiles; issue 27): all judged at the simulator's
# tolerance (None: the default), no panel at a looser one.
REPORT_TOLERANCE: float | None = None

# The fan-out forwards single-rank partials, so a message's ℓ is at most one rank's key
# count: 131072 per rank (1M context over 8 PEs, the headline) is past float16's 65504.
F16_OVERFLOW_KEYS_PER_RANK = 131072


def _case(name: str, kernel: str, why: str, *violated: Property, numerics_bad: bool = False,
          inputs: InputKind = InputKind.NORMAL, wiring: str | None = None,
          cubes: int | None = None, cube_start: int | None = None, mesh: str | None = None,
          queue_depth: int | None = None,
          args: tuple[tuple[str, Scalar], ...] = ()) -> ReportCase:
    """A validation-scale run, simulated; a schedule that deadlocks cannot be simulated,
    which the judge counts as out of tolerance."""
    launch = LaunchOptions(kernel=kernel, wiring=wiring, cubes=cubes, cube_start=cube_start,
                           mesh=mesh, queue_depth=queue_depth, args=tuple(sorted(args)))
    case = GateCase(name, kernel, violated=violated,
                    numerics_violated=numerics_bad or DF in violated, written=launch,
                    simulate=True, rounding_tolerance=REPORT_TOLERANCE)
    return ReportCase(case, why, inputs)


VALIDATION_CASES: tuple[ReportCase, ...] = (
    _case("mesh_mlo_1d", "mesh_mlo_1d", "1D fan-out all-reduce over the 8-PE line of one cube"),
    _case("mesh_mlo_2d_2x4", "mesh_mlo_2d",
          "2D row-then-column all-reduce on a 2x4 cube sub-mesh: 4 steps instead of 7",
          mesh="2x4", wiring="cube_mesh"),
    _case("mesh_mlo_2d_2x4_at8", "mesh_mlo_2d",
          "the same 2D kernel on the second 2x4 sub-mesh (cube_start 8): subtracts cube_start",
          mesh="2x4", wiring="cube_mesh", cube_start=8),
    _case("mesh_mlo_2d_batch", "mesh_mlo_2d_batch",
          "batch on batch (B=8): PE p of every cube serves user p, each user's 2D all-reduce "
          "over the PEs p of a 2x4 sub-mesh (cube_mesh_all_pes)"),
    _case("mesh_mlo_2d_batch_on_cube_mesh", "mesh_mlo_2d_batch",
          "the same kernel on cube_mesh, which links PE 0 only: PEs 1-7 use links that do "
          "not exist (why the study's v1 silenced them)", DL, DF, EOM, AE,
          wiring="cube_mesh"),
    _case("ring_mlo", "ring_mlo", "closed-ring all-reduce over the 8-PE ring of one cube"),
    _case("mesh_kv", "mesh_kv", "prefill: KV slices circulate both ways along the 8-PE line"),
    _case("mesh_kv_snake", "mesh_kv_snake",
          "8-cube prefill on a 2x4 sub-mesh: KV slices circulate along a snake (E along row "
          "0, S, W along row 1)"),
    _case("mesh_mlo_1d_8cubes", "mesh_mlo_1d",
          "the 1D kernel over 8 cubes of a 4x4 SIP: cube 3 has no E link, cube 4 no W "
          "(IpcqInvalidDirection)", DL, DF, EOM, AE,
          wiring="cube_mesh", cubes=8, args=(("rank_axis", 1),)),
    _case("mesh_mlo_1d_depth2", "mesh_mlo_1d",
          "the fan-out sends 3 messages per direction before receiving: deadlocks at queue "
          "depth 2", DF, queue_depth=2),
    _case("mesh_mlo_2d_physical_rank", "mesh_mlo_2d_physical_rank",
          "ignores cube_start: at cube 8 it computes rows 2..3 of a 2-row mesh and sends N "
          "out of its launch", LC, CM, DF, EOM, AE, mesh="2x4", wiring="cube_mesh",
          cube_start=8),
    _case("mesh_mlo_1d_recv_first", "mesh_mlo_1d_recv_first",
          "receives before sending: neighbours wait on each other (deadlock at any depth), "
          "so no output is ever written", DF, EOM, AE),
    _case("mesh_mlo_1d_forward_running_state", "mesh_mlo_1d_forward_running_state",
          "forwards the merged running state: shards merged twice", EOM, AE,
          numerics_bad=True),
    _case("mesh_mlo_1d_normalised_merge", "mesh_mlo_1d_normalised_merge",
          "merges softmax-normalised o, then divides by l again: each shard's rows weigh "
          "1/l_i (Q = 0 shows it)", EOM, AE,
          numerics_bad=True),
    _case("mesh_kv_skip_last", "mesh_kv_skip_last",
          "prefill that stops one step early: the farthest slice is never merged", EOM, AE,
          numerics_bad=True),
    _case("mesh_mlo_1d_f16_messages", "mesh_mlo_1d",
          "triplets sent in f16, near-uniform attention, 131072 keys per rank (1M context "
          "over 8 PEs): a partial ℓ of 131072 > 65504 overflows f16", NS, numerics_bad=True,
          inputs=InputKind.UNIFORM,
          args=(("S_kv_per_rank", F16_OVERFLOW_KEYS_PER_RANK), ("msg_dtype", "f16"))),
)


def panel_cases(scale: str) -> tuple[ReportCase, ...]:
    """The four panels, every property proved; numerics judged at validation scale only
    (headline numerics are the simulation benchmark's)."""
    return tuple(
        ReportCase(GateCase(f"panel_{name}", get_panel(name, scale).kernel,
                            written=LaunchOptions(panel=name, scale=scale),
                            simulate=scale == "validation",
                            rounding_tolerance=REPORT_TOLERANCE),
                   get_panel(name, scale).description)
        for name in PANEL_NAMES)


# gqa_scaling.png: the multi_user panels over Q heads per cube (h_q with one kv head), one
# kv group each; decode also batch on batch (B=8: every PE of a cube serves a user).
SCALING_PANELS = ("multi_user_prefill", "multi_user_decode")
SCALING_Q_HEADS = (1, 2, 4)
SCALING_USERS = {"multi_user_prefill": (1,), "multi_user_decode": (1, 8)}
# the decode kernel and wiring for B users per cube
_DECODE_BY_USERS = {1: ("mesh_mlo_2d", "cube_mesh"), 8: ("mesh_mlo_2d_batch", "cube_mesh_all_pes")}


@dataclass(frozen=True, slots=True)
class ScalingCase:
    case: ReportCase
    panel: str
    h_q: int
    users: int


def _scaling_case(name: str, scale: str, h_q: int, users: int) -> ScalingCase:
    panel = get_panel(name, scale)
    kernel, wiring = (panel.kernel, panel.wiring) if "decode" not in name else \
        _DECODE_BY_USERS[users]
    params = inspect.signature(BUILTIN_KERNELS[kernel].func).parameters
    args = {k: v for k, v in panel.args if k in params}
    args["h_q"] = h_q
    if "users" in params:
        args["users"] = users
    mesh = f"{panel.mesh[0]}x{panel.mesh[1]}" if panel.mesh else None
    case = GateCase(f"scaling_{name}_b{users}_hq{h_q}", kernel, written=LaunchOptions(
        kernel=kernel, system=panel.system, wiring=wiring,
        cubes=None if mesh else panel.cubes, mesh=mesh, cube_start=panel.launches[0],
        args=tuple(sorted(args.items()))))
    return ScalingCase(ReportCase(case, f"{name}, B={users}, with {h_q} q head(s) per cube"),
                       name, h_q, users)


def scaling_cases(scale: str = "validation") -> tuple[ScalingCase, ...]:
    return tuple(_scaling_case(name, scale, h_q, users) for name in SCALING_PANELS
                 for users in SCALING_USERS[name] for h_q in SCALING_Q_HEADS)


# steps_1d_vs_2d.png: mesh sizes; the 1D kernel runs on a closed cube ring over the same
# cubes (its line part), the 2D kernel on a cube_mesh SIP shaped like the mesh.
STEP_MESHES = ((1, 4), (2, 4), (4, 4), (4, 8), (8, 8))


def step_cases(meshes: tuple[tuple[int, int], ...] = STEP_MESHES) -> tuple[ReportCase, ...]:
    out = []
    for rows, cols in meshes:
        system = System(1, rows, cols)
        n = rows * cols
        out.append(ReportCase(GateCase(f"steps_1d_{rows}x{cols}", "mesh_mlo_1d",
                                       written=LaunchOptions(
                                           kernel="mesh_mlo_1d", system=system,
                                           wiring="cube_ring", cubes=n,
                                           args=(("rank_axis", 1),))),
                              f"1D fan-out over {n} cubes (ring wiring, line schedule)"))
        out.append(ReportCase(GateCase(f"steps_2d_{rows}x{cols}", "mesh_mlo_2d",
                                       written=LaunchOptions(
                                           kernel="mesh_mlo_2d", system=system,
                                           wiring="cube_mesh", mesh=f"{rows}x{cols}")),
                              f"2D all-reduce on a {rows}x{cols} cube mesh"))
    return tuple(out)
