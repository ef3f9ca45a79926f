"""The launch `meshproof synthesize` synthesises for, and the kernel it writes, for a given
set of launch keys: one function for the command and for the gate's `synthesized` key,
so the gate regenerates exactly the bytes the command writes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from meshproof.model.hardware import DEFAULT_PROFILE, HardwareProfile
from meshproof.model.launch import Launch, build_launch
from meshproof.model.launch_options import LAUNCH_KEYS, LaunchOptions, given
from meshproof.model.loader import KernelRef
from meshproof.model.topology import System, parse_mesh
from meshproof.synth.api import Objective, Synthesis, synthesize

_SIP_ROWS, _SIP_COLS = 4, 4     # the default system's SIP (1x4x4)
# the built-ins whose launch and interface a synthesised kernel copies
MESH_INTERFACE, LINE_INTERFACE = "mesh_mlo_2d", "mesh_mlo_1d"


def synthesis_options(opts: LaunchOptions, hw: HardwareProfile) -> LaunchOptions:
    """The launch keys filled as synthesize fills them: the profile's queue depth, the
    built-in interface (mesh_mlo_2d with --mesh, else mesh_mlo_1d), and a system big
    enough for a mesh the default SIP cannot hold."""
    if opts.queue_depth is None:
        opts = replace(opts, queue_depth=hw.ipcq_depth)
    if opts.kernel is None:
        opts = replace(opts, kernel=MESH_INTERFACE if opts.mesh else LINE_INTERFACE)
    if opts.system is None and opts.mesh:
        rows, cols = parse_mesh(opts.mesh)
        if rows > _SIP_ROWS or (rows > 1 and cols != _SIP_COLS) or cols > _SIP_COLS:
            opts = replace(opts, system=System(1, rows, cols, max(8, opts.pes or 8)))
    return opts


def launch_flags(launch: Launch, opts: LaunchOptions) -> str:
    """The launch flags that reproduce the launch, for the file's docstring (the wiring as
    written in `opts`, so a wiring file keeps its relative path)."""
    spec = launch.spec
    where = f"--mesh {opts.mesh.strip()}" if opts.mesh else \
        f"--cubes {spec.n_cubes} --pes {spec.pes}"
    return (f"--system {spec.system.shape_text} --wiring {opts.wiring or spec.wiring} "
            f"{where} --cube-start {spec.cube_start} --queue-depth {spec.queue_depth}")


def synthesize_for(opts: LaunchOptions, resolver: Callable[[str], KernelRef],
                   hw: HardwareProfile = DEFAULT_PROFILE,
                   objective: Objective = Objective.LATENCY,
                   written: LaunchOptions | None = None,
                   chunks: int | None = None) -> tuple[Synthesis, LaunchOptions]:
    """Synthesise for the launch `opts` describe (filled by `synthesis_options`); returns
    the synthesis and the filled options. `written`: the keys as the user wrote them, for
    the docstring's flags (default: `opts`), when `opts` holds anchored paths."""
    filled = synthesis_options(opts, hw)
    assert filled.kernel is not None
    built = build_launch(resolver(filled.kernel), filled)
    shown = synthesis_options(written, hw) if written is not None else filled
    return synthesize(built, hw, objective, launch_flags(built, shown), chunks), filled


def command_text(written: LaunchOptions, out: str) -> str:
    """The `meshproof synthesize` command that writes `out` for these launch keys (as a
    matrix case writes them; the synthesised file itself is not a key)."""
    words = ["meshproof", "synthesize"]
    for row in LAUNCH_KEYS:
        value = getattr(written, row.field)
        if not row.flag or not given(value):
            continue
        if row.field == "args":
            words += [f"--arg {k}={v}" for k, v in value
                      if not (written.mesh and k in ("mesh_rows", "mesh_cols"))]
            continue
        shown = row.show(value)
        if isinstance(shown, (list, tuple)):
            if row.repeatable:
                words += [f"{row.flag} {item}" for item in shown]
                continue
            shown = ",".join(str(item) for item in shown)
        words.append(f"{row.flag} {shown}")
    return " ".join([*words, "--out", out])
