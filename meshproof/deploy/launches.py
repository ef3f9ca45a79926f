"""Where a deployment's launches come from: a panel that is several launches, or a
`--launches FILE` (TOML). Parsing is strict, like the proof matrix: an unknown or mistyped
key is an error, because a typo that silently drops a launch would leave it unchecked.

    name = "two_groups"                  # optional; default: the file's stem
    system = "1x4x4"                     # SIPSxROWSxCOLS (default 1x4x4, 8 PEs per cube)
    kernel = "mesh_mlo_2d_batch"         # launch keys here apply to every [[launch]]
    mesh = "2x4"                         #   that does not set them itself
    args = { S_q = 1, d_head = 16 }      # args tables are merged key by key
    [[launch]]
    cube_start = 0
    [[launch]]
    cube_start = 8

Launch keys: kernel (required, here or in every launch), wiring, pes, cubes, cube_start,
mesh, args, sharded, groups, outputs, softmax_scale, queue_depth. Paths (`kernel =
"dir/file.py::fn"`, `wiring = "dir/w.toml"`) are relative to the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshproof.deploy.deployment import Resolver
from meshproof.errors import ConfigError
from meshproof.model.launch import DEFAULT_SHARDED, Launch, LaunchOptions, build_launch
from meshproof.model.loader import KernelRef, resolve_kernel
from meshproof.model.schedule import DEFAULT_OUTPUTS, GroupMode, Scalar
from meshproof.model.topology import parse_system
from meshproof.panels import Panel
from meshproof.tomlfile import read_toml

LAUNCH_KEYS = ("kernel", "wiring", "pes", "cubes", "cube_start", "mesh", "args", "sharded",
               "groups", "outputs", "softmax_scale", "queue_depth")
FILE_KEYS = ("name", "description", "system", "launch")


@dataclass(frozen=True, slots=True)
class LaunchList:
    """Launches to run at once: a name for them and each launch, resolved and built."""

    name: str
    launches: tuple[tuple[KernelRef, Launch], ...]


def panel_launches(panel: Panel, scale: str, queue_depth: int | None = None,
                   resolver: Resolver = resolve_kernel) -> LaunchList:
    """Every launch of a panel, at each of its cube_starts."""
    ref = resolver(panel.kernel)
    return LaunchList(f"{panel.name} ({scale})", tuple(
        (ref, build_launch(ref, panel.launch_options(queue_depth, cube_start=k)))
        for k in panel.launches))


def load_launches(path: Path, resolver: Resolver = resolve_kernel) -> LaunchList:
    """Read and validate a launches file; raises ConfigError (one line) on any problem.
    Kernels are found with `resolver` (the CLI's imports kernel files in a child first)."""
    data = read_toml(path, "launches file", "pass an existing TOML file with [[launch]] "
                     "tables", directory="pass a TOML file with [[launch]] tables")
    unknown = sorted(set(data) - set(FILE_KEYS) - set(LAUNCH_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {', '.join(unknown)}; allowed: "
                          f"{', '.join(FILE_KEYS)} and the launch keys "
                          f"{', '.join(LAUNCH_KEYS)}")
    entries = data.get("launch")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path} lists no launch; add [[launch]] tables (e.g. cube_start = 0)")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name.strip() or not name.isprintable():
        raise ConfigError(f"{path}: name must be a non-empty, one-line string, got {name!r}")
    system_text = data.get("system", "1x4x4")
    if not isinstance(system_text, str):
        raise ConfigError(f"{path}: system must be a string SIPSxROWSxCOLS, got "
                          f"{system_text!r}")
    defaults = {k: v for k, v in data.items() if k in LAUNCH_KEYS}
    launches = []
    for i, entry in enumerate(entries):
        where = f"{path}: launch #{i + 1}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be a table")
        bad = sorted(set(entry) - set(LAUNCH_KEYS))
        if bad:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(bad)}; allowed: "
                              f"{', '.join(LAUNCH_KEYS)}")
        merged = {**defaults, **entry}
        merged["args"] = {**_table(defaults.get("args", {}), path, "args"),
                          **_table(entry.get("args", {}), where, "args")}
        launches.append(_launch(merged, system_text, path.parent, where, resolver))
    return LaunchList(name, tuple(launches))


def _table(value: object, where: object, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key} must be an inline table, e.g. {key} = {{ S_q = 1 }}")
    return value


def _launch(raw: dict[str, Any], system_text: str, base: Path, where: str,
            resolver: Resolver) -> tuple[KernelRef, Launch]:
    kernel = _get(raw, "kernel", str, where)
    if kernel is None:
        raise ConfigError(f"{where}: no kernel; give kernel = \"NAME\" (or \"path.py::fn\") in "
                          "the launch or at the top of the file")
    if "::" in kernel:
        file_part, _, func = kernel.rpartition("::")
        kernel = f"{(base / file_part).resolve()}::{func}"
    wiring = _get(raw, "wiring", str, where)
    if wiring is not None and (wiring.endswith(".toml") or "/" in wiring):
        wiring = str((base / wiring).resolve())
    pes = _int(raw, "pes", 1, where)
    ref = resolver(kernel)
    opts = LaunchOptions(
        system=parse_system(system_text, max(pes or 8, 8)), pes=pes, wiring=wiring,
        cubes=_int(raw, "cubes", 1, where), cube_start=_int(raw, "cube_start", 0, where) or 0,
        mesh=_get(raw, "mesh", str, where), args=_args(raw["args"], where),
        sharded=_names(raw, "sharded", where) or DEFAULT_SHARDED,
        queue_depth=_int(raw, "queue_depth", 0, where), groups=_groups(raw, where),
        outputs=_names(raw, "outputs", where) or DEFAULT_OUTPUTS,
        softmax_scale=_scale(raw, where))
    return ref, build_launch(ref, opts)


def _get(raw: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = raw.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        word = {str: "a string", int: "an integer"}[kind]
        raise ConfigError(f"{where}: {key} must be {word}, got {value!r}")
    return value


def _int(raw: dict[str, Any], key: str, low: int, where: str) -> int | None:
    value = _get(raw, key, int, where)
    if value is not None and value < low:
        raise ConfigError(f"{where}: {key} must be >= {low}, got {value}")
    return value  # type: ignore[no-any-return]


def _args(value: dict[str, Any], where: str) -> tuple[tuple[str, Scalar], ...]:
    for key, item in value.items():
        if not isinstance(item, (int, float, bool, str)) or \
                (isinstance(item, float) and not math.isfinite(item)):
            raise ConfigError(f"{where}: args.{key} must be a number, boolean or string, got "
                              f"{item!r}")
    return tuple(sorted(value.items()))


def _names(raw: dict[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not value or \
            not all(isinstance(s, str) and s for s in value):
        raise ConfigError(f"{where}: {key} must be a non-empty list of buffer names, e.g. "
                          f"{key} = [\"k_ptr\", \"v_ptr\"]")
    return tuple(value)


def _groups(raw: dict[str, Any], where: str) -> GroupMode | None:
    value = _get(raw, "groups", str, where)
    if value is None:
        return None
    try:
        return GroupMode(value)
    except ValueError:
        raise ConfigError(f"{where}: groups must be one of "
                          f"{', '.join(g.value for g in GroupMode)}, got {value!r}") from None


def _scale(raw: dict[str, Any], where: str) -> float | None:
    value = raw.get("softmax_scale")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        raise ConfigError(f"{where}: softmax_scale must be a finite number, got {value!r}")
    return float(value)
