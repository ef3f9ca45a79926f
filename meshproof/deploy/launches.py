"""Launch resolution: LaunchOptions (from any front end) to N >= 1 built launches.

`resolve_launches` is the one road from what a user said to launches: a panel's preset
under the given options (`expand`, where the panel rules live), the system's PEs per cube
following `pes`, each kernel found once, each launch built. A panel that is several
launches at once (the headline multi-user panels) gives one launch per cube_start, the
given options applied to each, unless `cube_start` picks one.

A launches file (`--launches FILE`, TOML) lists launches to run at once. Parsing is strict,
like the proof matrix: an unknown or mistyped key is an error, because a typo that
silently drops a launch would leave it unchecked.

    name = "two_groups"                  # optional; default: the file's stem
    system = "1x4x4"                     # SIPSxROWSxCOLS (default 1x4x4, 8 PEs per cube)
    kernel = "mesh_mlo_2d_batch"         # launch keys here apply to every [[launch]]
    mesh = "2x4"                         #   that does not set them itself
    args = { S_q = 1, d_head = 16 }      # args tables are merged key by key
    [[launch]]
    cube_start = 0
    [[launch]]
    cube_start = 8

Launch keys: every key of model/launch_options.py's table (`system` at the top only: the
launches share one system). Paths (`kernel = "dir/file.py::fn"`, `wiring = "dir/w.toml"`)
are relative to the file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from meshproof.deploy.deployment import Resolver
from meshproof.errors import ConfigError, LaunchError
from meshproof.model.launch import Launch, build_launch
from meshproof.model.launch_options import KEY_NAMES, LaunchOptions, cube_pes
from meshproof.model.loader import KernelRef, resolve_kernel
from meshproof.model.topology import DEFAULT_SYSTEM
from meshproof.panels import Panel, get_panel
from meshproof.tomlfile import read_toml

FILE_KEYS = ("name", "description", "launch")
ENTRY_KEYS = tuple(k for k in KEY_NAMES if k != "system")


@dataclass(frozen=True, slots=True)
class LaunchList:
    """Launches to run at once (N >= 1): a name for them and each launch, built."""

    name: str
    launches: tuple[tuple[KernelRef, Launch], ...]

    @property
    def is_deployment(self) -> bool:
        return len(self.launches) > 1


def expand(opts: LaunchOptions) -> tuple[LaunchOptions, ...]:
    """One LaunchOptions per launch, each naming its kernel: the panel's preset (at each
    of its cube_starts) under `opts`, or `opts` itself. Refuses a kernel and a panel that
    disagree, a scale without a panel, and a cube count that contradicts the panel's mesh
    (give `mesh` to launch another)."""
    opts = _with_cube_pes(opts)
    if opts.panel is None:
        if opts.scale is not None:
            raise LaunchError(f"scale {opts.scale} applies only to a panel; drop it, or "
                              "give a panel")
        if opts.kernel is None:
            raise LaunchError("name a KERNEL (built-in name or path/file.py::function) or "
                              "pass --panel NAME; see `meshproof list`")
        return (_with_system(opts),)
    preset = get_panel(opts.panel, opts.scale or "validation")
    if opts.kernel is not None and opts.kernel != preset.kernel:
        raise LaunchError(f"kernel {opts.kernel} and panel {preset.name} (kernel "
                          f"{preset.kernel}) both choose the kernel; drop the kernel to run "
                          f"{preset.kernel}, or drop the panel and give the launch keys")
    if opts.cubes is not None and opts.mesh is None and preset.mesh is not None:
        rows, cols = preset.mesh
        if opts.cubes != rows * cols:
            raise LaunchError(f"cubes {opts.cubes} disagrees with panel {preset.name}'s "
                              f"{rows}x{cols} mesh ({rows * cols} cubes); give mesh RxC "
                              "(--mesh) to launch another mesh")
    starts = (opts.cube_start,) if opts.cube_start is not None else preset.launches
    return tuple(_with_system(preset.launch_options(cube_start=k).overlay(
        replace(opts, cube_start=k))) for k in starts)


def _with_cube_pes(opts: LaunchOptions) -> LaunchOptions:
    """A system the user gives has 8 PEs per cube, more if `pes` asks for more (spec/
    machine.md §3); a panel's system is taken as it is."""
    if opts.system is None or opts.pes is None:
        return opts
    return replace(opts, system=replace(opts.system, pes=cube_pes(opts.pes)))


def _with_system(opts: LaunchOptions) -> LaunchOptions:
    if opts.system is not None:
        return opts
    return replace(opts, system=replace(DEFAULT_SYSTEM, pes=cube_pes(opts.pes)))


def resolve_launches(opts: LaunchOptions, resolver: Resolver = resolve_kernel, *,
                     kernel: KernelRef | None = None, name: str | None = None) -> LaunchList:
    """The launches `opts` describe, built. Kernels are found with `resolver` (the CLI's
    imports kernel files in a child first), once each; `kernel` overrides them (the
    testing helpers pass function objects)."""
    found: dict[str, KernelRef] = {}
    built: list[tuple[KernelRef, Launch]] = []
    for one in expand(opts):
        assert one.kernel is not None   # expand names it
        if kernel is not None:
            ref = kernel
        elif one.kernel in found:
            ref = found[one.kernel]
        else:
            ref = found[one.kernel] = resolver(one.kernel)
        built.append((ref, build_launch(ref, one)))
    if name is None:
        name = built[0][0].name if opts.panel is None else \
            f"{opts.panel} ({opts.scale or 'validation'})"
    return LaunchList(name, tuple(built))


def panel_launches(panel: Panel, scale: str, queue_depth: int | None = None,
                   resolver: Resolver = resolve_kernel) -> LaunchList:
    """Every launch of a panel, at each of its cube_starts."""
    return resolve_launches(LaunchOptions(panel=panel.name, scale=scale,
                                          queue_depth=queue_depth), resolver)


def load_launches(path: Path, resolver: Resolver = resolve_kernel) -> LaunchList:
    """Read and validate a launches file; raises ConfigError (one line) on any problem.
    Kernels are found with `resolver` (the CLI's imports kernel files in a child first)."""
    data = read_toml(path, "launches file", "pass an existing TOML file with [[launch]] "
                     "tables", directory="pass a TOML file with [[launch]] tables")
    unknown = sorted(set(data) - set(FILE_KEYS) - set(KEY_NAMES))
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {', '.join(unknown)}; allowed: "
                          f"{', '.join(FILE_KEYS)} and the launch keys "
                          f"{', '.join(KEY_NAMES)}")
    entries = data.get("launch")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path} lists no launch; add [[launch]] tables (e.g. cube_start = 0)")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name.strip() or not name.isprintable():
        raise ConfigError(f"{path}: name must be a non-empty, one-line string, got {name!r}")
    top = LaunchOptions.from_mapping({k: v for k, v in data.items() if k in KEY_NAMES},
                                     str(path)).anchored(path.parent)
    launches: list[tuple[KernelRef, Launch]] = []
    for i, entry in enumerate(entries):
        where = f"{path}: launch #{i + 1}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be a table")
        if "system" in entry:
            raise ConfigError(f"{where}: system is the file's (the launches share one "
                              "system); set it at the top of the file")
        mine = LaunchOptions.from_mapping(entry, where, ENTRY_KEYS).anchored(path.parent)
        merged = top.overlay(mine)
        if merged.kernel is None and merged.panel is None:
            raise ConfigError(f"{where}: no kernel; give kernel = \"NAME\" (or "
                              "\"path.py::fn\") in the launch or at the top of the file")
        try:
            launches.extend(resolve_launches(merged, resolver).launches)
        except LaunchError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return LaunchList(name, tuple(launches))
