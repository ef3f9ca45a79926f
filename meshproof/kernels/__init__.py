"""Built-in reference kernels and deliberately broken variants."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from meshproof.kernels import mesh_causal as _causal
from meshproof.kernels import mesh_kv as _kv
from meshproof.kernels import mesh_masked as _masked
from meshproof.kernels import mesh_mlo as _mlo
from meshproof.model.loader import KernelRef, builtin_ref, register_builtins, resolve_kernel
from meshproof.model.schedule import GroupMode, Scalar

__all__ = ["BUILTIN_KERNELS", "KernelInfo", "resolve_builtin", "resolve_kernel"]

_DECODE_SHAPES: dict[str, Scalar] = {"S_q": 1, "S_kv_per_rank": 16, "h_q": 1, "h_kv": 1,
                                     "d_head": 8}
_PREFILL_SHAPES: dict[str, Scalar] = {"S_q": 4, "S_kv_per_rank": 16, "h_q": 1, "h_kv": 1,
                                      "d_head": 8}
# causal prefill: one sequence, so each rank's query and key rows are the same positions
_CAUSAL_SHAPES: dict[str, Scalar] = {"S_q": 8, "S_kv_per_rank": 8, "h_q": 1, "h_kv": 1,
                                     "d_head": 8}


@dataclass(frozen=True, slots=True)
class KernelInfo:
    name: str
    func: Callable[..., Any]
    description: str
    harness: str = "decode"
    known_bad: bool = False
    defaults: dict[str, Scalar] = field(default_factory=dict)
    wiring: str = "pe_line"
    mesh: str | None = None
    cubes: int = 1
    cube_start: int = 0                    # where its natural launch starts (--cube-start)
    groups: GroupMode = GroupMode.LAUNCH   # the attention problems the kernel computes
    mask: str | None = None                # the mask its natural launch declares


def _info(name: str, func: Callable[..., Any], description: str, **kw: Any) -> KernelInfo:
    harness = kw.get("harness", "decode")
    shapes = _PREFILL_SHAPES if harness == "prefill" else _DECODE_SHAPES
    if kw.get("mask") is not None and harness == "prefill":
        shapes = _CAUSAL_SHAPES
    return KernelInfo(name, func, description, defaults={**shapes, **kw.pop("shapes", {})},
                      **kw)


BUILTIN_KERNELS: dict[str, KernelInfo] = {k.name: k for k in [
    _info("mesh_mlo_1d", _mlo.mesh_mlo_1d,
          "decode: bidirectional fan-out all-reduce of (m, l, o) over a line (E/W)"),
    _info("mesh_mlo_2d", _mlo.mesh_mlo_2d,
          "decode: row-then-column fan-out all-reduce over a cube sub-mesh",
          wiring="cube_mesh", mesh="2x4"),
    _info("ring_mlo", _mlo.ring_mlo,
          "decode: closed-ring all-reduce of (m, l, o); needs a ring wiring", wiring="pe_ring"),
    _info("mesh_mlo_2d_batch", _mlo.mesh_mlo_2d_batch,
          "decode, batch on batch: PE p of every cube serves user p; each user's 2D "
          "all-reduce runs over the PEs p of the sub-mesh", wiring="cube_mesh_all_pes",
          mesh="2x4", groups=GroupMode.PE),
    _info("mesh_kv", _kv.mesh_kv,
          "prefill: each rank's Q rows; KV slices circulate both ways along a line",
          harness="prefill"),
    _info("mesh_kv_snake", _kv.mesh_kv_snake,
          "prefill over a cube sub-mesh: KV slices circulate both ways along a snake path "
          "(E along row 0, S, W along row 1, ...)", harness="prefill", wiring="cube_mesh",
          mesh="2x4"),
    _info("ring_prefill_causal_naive", _causal.ring_prefill_causal_naive,
          "causal prefill over a closed ring: rank i holds chunk i, KV circulates E; "
          "diagonal blocks masked with tl.where, blocks after the query skipped (the last "
          "ranks do most of the work)",
          harness="prefill", wiring="pe_ring", mask="causal"),
    _info("ring_prefill_causal_zigzag", _causal.ring_prefill_causal_zigzag,
          "causal prefill over a closed ring, zigzag layout: rank i holds chunks i and "
          "2n-1-i, so every rank computes about the same blocks", harness="prefill",
          wiring="pe_ring", mask="causal@zigzag"),
    _info("ring_prefill_causal_striped", _causal.ring_prefill_causal_striped,
          "causal prefill over a closed ring, striped layout: rank i holds positions "
          "i, i+n, i+2n, ...; every block is partial (masked with tl.where), so every rank "
          "computes the same blocks", harness="prefill", wiring="pe_ring",
          mask="causal@striped"),
    _info("mesh_prefill_causal_2d", _causal.mesh_prefill_causal_2d,
          "causal prefill over a 2x4 cube sub-mesh: cube r holds chunk r; KV fans out along "
          "the rows, then along the columns; diagonal blocks masked with tl.where, blocks "
          "after the query skipped", harness="prefill", wiring="cube_mesh", mesh="2x4",
          mask="causal"),
    _info("line_decode_window", _masked.line_decode_window,
          "sliding-window decode over a line: rank i holds a slice of the KV cache, only "
          "the last W = 20 keys count (--arg window=W with --mask window:W); ranks the "
          "window never reaches stay idle", wiring="pe_line", mask="window:20",
          shapes={"S_q": 1, "S_kv_per_rank": 8}),
    _info("ring_prefill_padded", _masked.ring_prefill_padded,
          "padded prefill over a closed ring: the first LEN = 45 of 64 keys are real "
          "(--arg length=LEN with --mask padding:LEN); slices of padding skipped, the one "
          "the length cuts masked with tl.where", harness="prefill", wiring="pe_ring",
          mask="padding:45"),
    # at cube_start 0 physical and logical cube ids agree and the bug hides: its own
    # launch starts at cube 8, where it shows
    _info("mesh_mlo_2d_physical_rank", _mlo.mesh_mlo_2d_physical_rank,
          "KNOWN BAD: 2D kernel that ignores cube_start (program_id(1) is physical); its "
          "default launch, the 2x4 sub-mesh at cube_start 8, shows it (at cube_start 0 it "
          "hides)", known_bad=True, wiring="cube_mesh", mesh="2x4", cube_start=8),
    _info("mesh_mlo_1d_forward_running_state", _mlo.mesh_mlo_1d_forward_running_state,
          "KNOWN BAD: forwards the merged running state (double merge)", known_bad=True),
    _info("mesh_mlo_1d_recv_first", _mlo.mesh_mlo_1d_recv_first,
          "KNOWN BAD: receives before sending (deadlocks at any queue depth)", known_bad=True),
    _info("mesh_mlo_1d_normalised_merge", _mlo.mesh_mlo_1d_normalised_merge,
          "KNOWN BAD: merges softmax-normalised o, then divides by l again", known_bad=True),
    _info("mesh_kv_skip_last", _kv.mesh_kv_skip_last,
          "KNOWN BAD: prefill that stops one step early (a slice is never merged)",
          harness="prefill", known_bad=True),
    _info("ring_prefill_causal_off_by_one", _causal.ring_prefill_causal_off_by_one,
          "KNOWN BAD: naive causal ring whose diagonal mask lets each query see the next key "
          "(key <= query + 1); the simulator catches it out of tolerance, the verifier names "
          "query 0 counting key 1 at the tl.where", harness="prefill", wiring="pe_ring",
          known_bad=True, mask="causal"),
]}


def resolve_builtin(name: str) -> KernelRef | None:
    """The built-in kernel `name`, or None (then it is a kernel file, or unknown)."""
    info = BUILTIN_KERNELS.get(name)
    if info is None:
        return None
    return builtin_ref(name, info.func, info.description, info.harness, info.defaults,
                       info.wiring, info.mesh, info.cubes, info.groups, info.mask,
                       info.cube_start)


# `resolve_kernel` (re-exported here: the resolver of built-in names and kernel files)
# finds the built-ins through this; the meshproof package imports this module.
register_builtins(resolve_builtin)

