"""Launches: which endpoints run a kernel, with which wiring, arguments and queue depth.

`program_id(axis=0)` is the PE id inside its cube; `program_id(axis=1)` the *physical*
cube id, so a launch at `cube_start=8` sees cubes 8.. (as kernbench does).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from meshproof.errors import LaunchError
from meshproof.model.hardware import DEFAULT_PROFILE
from meshproof.model.launch_options import DEFAULT_SHARDED, MAX_QUEUE_DEPTH, LaunchOptions
from meshproof.model.launch_values import MaskChoice
from meshproof.model.loader import KernelRef
from meshproof.model.masks import Mask
from meshproof.model.schedule import DEFAULT_OUTPUTS, Harness, LaunchSpec, Scalar
from meshproof.model.topology import DEFAULT_SYSTEM, MAX_CUBES, Endpoint, parse_mesh
from meshproof.model.wiring import Wiring, build_wiring

# Kernel parameters meshproof fills from the launch when the user does not pass them.
LAUNCH_FILLED = ("n_ranks", "cube_start", "mesh_rows", "mesh_cols")
__all__ = ["DEFAULT_SHARDED", "MAX_QUEUE_DEPTH", "Launch", "LaunchOptions", "build_launch"]


@dataclass(frozen=True, slots=True)
class Launch:
    """A built launch: the spec back-ends read, the wiring, and the kernel's call arguments."""

    spec: LaunchSpec
    wiring: Wiring
    call_args: tuple[tuple[str, Scalar], ...]  # scalar args passed to the kernel


def _kernel_params(kernel: KernelRef) -> dict[str, inspect.Parameter]:
    params = dict(inspect.signature(kernel.func).parameters)
    params.pop("tl", None)
    return params


def parse_harness(name: str, kernel: str) -> Harness:
    try:
        return Harness(name)
    except ValueError:
        raise LaunchError(f"unknown harness {name!r} for {kernel}; the simulator has "
                          f"{', '.join(h.value for h in Harness)}: declare one of them on the "
                          "kernel (meshproof_harness)") from None


def build_launch(kernel: KernelRef, opts: LaunchOptions) -> Launch:
    """The launch `opts` describe for `kernel` (opts.kernel, panel and scale are the front
    ends' business: see deploy/launches.py); unset fields take their defaults."""
    system = opts.system or DEFAULT_SYSTEM
    pes = _pes(opts)
    if opts.queue_depth is not None and not 0 <= opts.queue_depth <= MAX_QUEUE_DEPTH:
        raise LaunchError(f"queue depth {opts.queue_depth} is out of range 0..{MAX_QUEUE_DEPTH}")
    cube_start = kernel.default_cube_start if opts.cube_start is None else opts.cube_start
    cubes, mesh = _cubes(kernel, opts, cube_start)
    wiring_name = kernel.default_wiring if opts.wiring is None else opts.wiring
    wiring = build_wiring(wiring_name, system, cube_start, cubes)
    params = _kernel_params(kernel)
    ptrs = [n for n in params if n.endswith("_ptr")]
    values = _argument_values(kernel, opts, params, ptrs, cubes=cubes, pes=pes, mesh=mesh,
                              cube_start=cube_start)
    sharded = tuple(s for s in (opts.sharded or DEFAULT_SHARDED) if s)
    unknown_sharded = sorted(set(sharded) - set(ptrs))
    if unknown_sharded and sharded != DEFAULT_SHARDED:
        raise LaunchError(f"--sharded names {', '.join(unknown_sharded)}, which are not buffer "
                          f"parameters of {kernel.name} ({', '.join(ptrs) or 'none'})")
    depth = opts.queue_depth if opts.queue_depth is not None else DEFAULT_PROFILE.ipcq_depth
    ordered = tuple((n, values[n]) for n in params if n in values)
    spec = LaunchSpec(
        kernel=kernel.name, kernel_file=kernel.site.display_file, wiring=wiring.name,
        system=system, pes=pes, n_cubes=cubes, cube_start=cube_start,
        args=tuple(sorted(values.items())), queue_depth=depth,
        sharded=tuple(s for s in sharded if s in ptrs),
        harness=opts.harness or parse_harness(kernel.harness, kernel.name),
        groups=opts.groups if opts.groups is not None else kernel.default_groups,
        outputs=_outputs(opts.outputs or DEFAULT_OUTPUTS, ptrs, kernel.name),
        softmax_scale=opts.softmax_scale,
        empty_shards=_empty(opts.empty_shards, cube_start, cubes, pes),
        mask=_mask(opts.mask, kernel.default_mask))
    return Launch(spec, wiring, ordered)


def _mask(given: MaskChoice | None, default: str | None) -> Mask | None:
    """--mask, else the kernel's declared mask; `none` launches a masked kernel unmasked. A
    --mask written without `@layout` keeps the declared mask's layout: the rows a zigzag
    kernel holds do not move because the launch names its mask `causal`."""
    if isinstance(given, Mask):
        if given.layout_stated or default is None or default.strip() == "none":
            return given
        return Mask(given.kind, given.param, Mask.parse(default).layout)
    if given == "none" or default is None or default.strip() == "none":
        return None
    return Mask.parse(default)


def _outputs(outputs: tuple[str, ...], ptrs: list[str], kernel: str) -> tuple[str, ...]:
    names = tuple(o for o in outputs if o)
    if not names:
        raise LaunchError("--outputs names no buffer; name the output buffers, e.g. "
                          "--outputs o_ptr")
    unknown = sorted(set(names) - set(ptrs))
    if unknown and names != DEFAULT_OUTPUTS:
        raise LaunchError(f"--outputs names {', '.join(unknown)}, which are not buffer "
                          f"parameters of {kernel} ({', '.join(ptrs) or 'none'})")
    return names


def _empty(eps: tuple[Endpoint, ...], cube_start: int, cubes: int,
           pes: int) -> tuple[Endpoint, ...]:
    for e in eps:
        if not (cube_start <= e.cube < cube_start + cubes and 0 <= e.pe < pes):
            raise LaunchError(f"--empty-shard {e.cube},{e.pe} is not a launched rank "
                              f"(cubes {cube_start}..{cube_start + cubes - 1}, PEs 0..{pes - 1})")
    return tuple(sorted(set(eps)))


def _pes(opts: LaunchOptions) -> int:
    system = opts.system or DEFAULT_SYSTEM
    pes = opts.pes if opts.pes is not None else system.pes
    if pes < 1:
        raise LaunchError(f"--pes {pes} launches no PE: launch 1..{system.pes} PEs per cube")
    if pes > system.pes:
        raise LaunchError(f"--pes {pes} does not fit a cube of {system.pes} PEs: launch "
                          f"1..{system.pes}, or give the system more PEs per cube")
    return pes


def _cubes(kernel: KernelRef, opts: LaunchOptions,
           cube_start: int) -> tuple[int, tuple[int, int] | None]:
    """How many cubes the launch takes, and the kernel's sub-mesh (rows, cols) if any."""
    system = opts.system or DEFAULT_SYSTEM
    mesh = opts.mesh if opts.mesh is not None else (
        kernel.default_mesh if opts.cubes is None else None)
    rows_cols = parse_mesh(mesh) if mesh is not None else None
    cubes = opts.cubes
    if opts.mesh is not None and cubes is not None and rows_cols and \
            cubes != rows_cols[0] * rows_cols[1]:
        raise LaunchError(f"--mesh {opts.mesh.strip()} launches {rows_cols[0] * rows_cols[1]} "
                          f"cubes but --cubes says {cubes}; drop --cubes (--mesh sets it) or "
                          "make them agree")
    if cubes is None:
        cubes = rows_cols[0] * rows_cols[1] if rows_cols else kernel.default_cubes
    if not 1 <= cubes <= MAX_CUBES:
        raise LaunchError(f"--cubes {cubes} is out of range 1..{MAX_CUBES}")
    if cube_start < 0 or cube_start + cubes > system.n_cubes:
        own = f" ({kernel.name}'s own launch starts at cube {cube_start})" \
            if opts.cube_start is None else ""
        raise LaunchError(
            f"cubes {cube_start}..{cube_start + cubes - 1} do not fit the system "
            f"{system.shape_text} ({system.n_cubes} cubes){own}; lower --cube-start/--cubes "
            "or grow --system")
    return cubes, rows_cols


def _argument_values(kernel: KernelRef, opts: LaunchOptions,
                     params: dict[str, inspect.Parameter], ptrs: list[str], *, cubes: int,
                     pes: int, mesh: tuple[int, int] | None,
                     cube_start: int) -> dict[str, Scalar]:
    """The kernel's scalar arguments: given, else the defaults, else filled from the launch."""
    explicit = dict(opts.args)
    defaults = dict(kernel.defaults)
    unknown = sorted(set(explicit) - set(params))
    if unknown:
        raise LaunchError(f"kernel {kernel.name} has no parameter(s) {', '.join(unknown)}; "
                          f"its parameters: {', '.join(params)}")
    bad_ptr = sorted(set(explicit) & set(ptrs))
    if bad_ptr:
        raise LaunchError(f"{', '.join(bad_ptr)} are buffers that meshproof provides; do not "
                          "pass them with --arg")
    values: dict[str, Scalar] = {}
    for name, param in params.items():
        if name in ptrs:
            continue
        if name in explicit:
            values[name] = explicit[name]
        elif name in defaults:
            values[name] = defaults[name]
        elif param.default is not inspect.Parameter.empty:
            values[name] = param.default
    rank_axis = values.get("rank_axis", 0)
    auto: dict[str, Scalar] = {
        "n_ranks": cubes if rank_axis == 1 else pes,
        "cube_start": cube_start,
    }
    if mesh is not None:
        auto["mesh_rows"], auto["mesh_cols"] = mesh
    for name in LAUNCH_FILLED:
        if name in params and name not in explicit and name in auto:
            values[name] = auto[name]
    if opts.softmax_scale is not None and "sm_scale" in params:
        given = explicit.get("sm_scale", opts.softmax_scale)
        if isinstance(given, bool) or not isinstance(given, (int, float)) or \
                float(given) != opts.softmax_scale:
            raise LaunchError(f"--arg sm_scale={given} and --softmax-scale "
                              f"{opts.softmax_scale:g} disagree: the kernel would scale its "
                              f"scores by {given} and the reference by "
                              f"{opts.softmax_scale:g}; give one of them (--softmax-scale X "
                              "also passes sm_scale=X to the kernel)")
        values["sm_scale"] = opts.softmax_scale
    missing = [n for n, p in params.items() if n not in ptrs and n not in values
               and p.kind is not inspect.Parameter.VAR_KEYWORD
               and p.kind is not inspect.Parameter.VAR_POSITIONAL]
    if missing:
        mesh_hint = " (or --mesh RxC, which sets mesh_rows, mesh_cols and --cubes)" \
            if {"mesh_rows", "mesh_cols"} & set(missing) else ""
        raise LaunchError(f"kernel {kernel.name} needs argument(s) {', '.join(missing)}: pass "
                          + " ".join(f"--arg {n}=VALUE" for n in missing) + mesh_hint)
    return values
