"""The one partial description of a launch, and its field table.

A launch is described in four places: the CLI's launch flags, a proof-matrix `[[case]]`,
a launches-file `[[launch]]` and the keywords of `meshproof.testing`. All four read
`LAUNCH_KEYS`: one row per key, with the LaunchOptions field, the TOML key (also the
testing keyword), the CLI flag, the parser and the help text. The row's parser is the one
validation of a value, whether it came as CLI text (read first by the row's `from_text`),
a TOML value or a Python keyword. To add a launch key: add the field to LaunchOptions and
a row here (its parser in launch_values.py, if a new one is needed);
tests/test_launch_options.py fails until every front end takes it.

Every field is optional (None: not given), so options combine: `base.overlay(top)` keeps
what `top` gives and fills the rest from `base` (a panel's preset, a launches file's
top-level keys). `args` merge key by key. A `mesh` in `top` replaces the base's mesh, and
with it the base's mesh_rows/mesh_cols arguments and cube count (the `--mesh`-over-panel
rule, written here once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path

from meshproof.errors import ConfigError, MeshproofError
from meshproof.model.launch_values import (
    SCALES,
    MaskChoice,
    args_text,
    float_text,
    int_text,
    names_text,
    parse_args,
    parse_empty_shards,
    parse_groups,
    parse_harness_value,
    parse_int,
    parse_mask,
    parse_mesh_value,
    parse_names,
    parse_scale,
    parse_softmax_scale,
    parse_system_value,
    parse_text,
    show_mask,
    show_value,
)
from meshproof.model.schedule import GroupMode, Harness, Scalar
from meshproof.model.topology import MAX_CUBES, MAX_PES, Endpoint, System

DEFAULT_SHARDED = ("k_ptr", "v_ptr")
MAX_QUEUE_DEPTH = 1 << 16
MESH_ARGS = ("mesh_rows", "mesh_cols")


@dataclass(frozen=True, slots=True)
class LaunchOptions:
    """What a user says about a launch; every field None (or empty) when not said."""

    kernel: str | None = None          # built-in name or "path/file.py::function"
    panel: str | None = None           # a preset kernel + launch (meshproof.panels)
    scale: str | None = None           # the panel's scale (None: validation)
    system: System | None = None       # None: 1x4x4 (or the panel's)
    pes: int | None = None
    wiring: str | None = None
    cubes: int | None = None
    cube_start: int | None = None      # None: the kernel's (0 unless a built-in says so)
    mesh: str | None = None            # "RxC": sets mesh_rows/mesh_cols and the cubes
    args: tuple[tuple[str, Scalar], ...] = ()
    sharded: tuple[str, ...] | None = None        # None: k_ptr, v_ptr
    queue_depth: int | None = None
    harness: Harness | None = None     # None: the kernel's (decode for user kernels)
    groups: GroupMode | None = None    # None: the kernel's own (launch for user kernels)
    outputs: tuple[str, ...] | None = None        # None: o_ptr
    softmax_scale: float | None = None  # the reference's scale; also the kernel's sm_scale
    empty_shards: tuple[Endpoint, ...] = ()
    mask: MaskChoice | None = None     # None: the kernel's own, if any

    def overlay(self, top: LaunchOptions) -> LaunchOptions:
        """These options under `top`: what `top` gives wins, args merge key by key."""
        base = self
        if top.mesh is not None:
            # a new mesh brings its own rows, columns and cube count
            base = replace(base, cubes=None, args=tuple(
                (k, v) for k, v in base.args if k not in MESH_ARGS))
        merged = {f.name: getattr(top, f.name) for f in fields(LaunchOptions)
                  if given(getattr(top, f.name))}
        args = dict(base.args)
        args.update(top.args)
        merged["args"] = tuple(sorted(args.items()))
        return replace(base, **merged)

    @staticmethod
    def from_mapping(raw: Mapping[str, object], where: str,
                     allowed: tuple[str, ...] | None = None) -> LaunchOptions:
        """Read a table of launch keys (a gate case's, a launches file's, the testing
        keywords); `where` prefixes every error (file and case). Unknown keys are refused
        with the known ones listed; `allowed` narrows the keys taken."""
        known = allowed if allowed is not None else KEY_NAMES
        refuse_unknown(raw, known, where, "unknown launch key", "the launch keys")
        values: dict[str, object] = {}
        for key in sorted(raw):
            value = raw[key]
            if value is None:
                continue
            row = KEYS_BY_NAME[key]
            try:
                values[row.field] = row.parse(value, key)
            except MeshproofError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        return LaunchOptions(**values)  # type: ignore[arg-type]

    def anchored(self, base: Path) -> LaunchOptions:
        """Paths (a kernel file, a wiring file) taken relative to `base`, a file's folder."""
        kernel, wiring = self.kernel, self.wiring
        if kernel is not None and "::" in kernel:
            file_part, _, func = kernel.rpartition("::")
            kernel = f"{(base / file_part).resolve()}::{func}"
        if wiring is not None and is_wiring_file(wiring):
            wiring = str((base / wiring).resolve())
        return replace(self, kernel=kernel, wiring=wiring)

    def to_json(self) -> dict[str, object]:
        """The given keys, as a TOML table would spell them (sorted, JSON-ready)."""
        out: dict[str, object] = {}
        for row in LAUNCH_KEYS:
            value = getattr(self, row.field)
            if given(value):
                out[row.key] = row.show(value)
        return out


def refuse_unknown(raw: Mapping[str, object], known: tuple[str, ...], where: str,
                   what: str, listing: str) -> None:
    """ConfigError for the first key of `raw` not `known`, with a "did you mean" hint and
    the known keys listed."""
    for key in sorted(raw):
        if key not in known:
            import difflib  # here: only a misspelt name pays for it (and heapq)

            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where}: {what} {key!r}{hint}; {listing}: {', '.join(known)}")


def given(value: object) -> bool:
    """Whether a field of a partial LaunchOptions is given (None and () are not)."""
    return value is not None and value != ()


def is_wiring_file(wiring: str) -> bool:
    """The rule build_wiring uses to tell a wiring file from a built-in name."""
    return wiring.endswith(".toml") or "/" in wiring


def cube_pes(pes: int | None) -> int:
    """PEs per cube of the system, as `--pes` makes it (spec/machine.md §3): 8 as on the
    hardware, more only if `pes` asks for more; `pes` launches PEs 0..pes-1 of each."""
    return max(pes or 0, 8)


@dataclass(frozen=True, slots=True)
class LaunchKey:
    """One launch key: the field, its TOML key (and testing keyword), its CLI flag, how
    CLI text is read, the one parser, and the help."""

    field: str
    key: str
    flag: str                          # "" : no flag (the CLI's KERNEL argument)
    parse: Callable[[object, str], object]
    help: str
    metavar: str | None = None
    from_text: Callable[[str], object] = lambda text: text
    repeatable: bool = False           # the flag may repeat; its items come as a tuple
    from_items: Callable[[tuple[str, ...]], object] | None = None
    choices: tuple[str, ...] = ()
    show: Callable[[object], object] = show_value


LAUNCH_KEYS: tuple[LaunchKey, ...] = (
    LaunchKey("kernel", "kernel", "", parse_text,
              "Built-in kernel name or path/to/file.py::function."),
    LaunchKey("panel", "panel", "--panel", parse_text,
              "Preset kernel + launch: one of the four GQA panels, or a causal prefill "
              "panel (causal_prefill_naive, causal_prefill_zigzag)."),
    LaunchKey("scale", "scale", "--scale", parse_scale,
              "Panel scale (default validation).", choices=SCALES),
    LaunchKey("system", "system", "--system", parse_system_value,
              "SIPSxROWSxCOLS of cubes (default 1x4x4).", metavar="SIPSxROWSxCOLS"),
    LaunchKey("pes", "pes", "--pes",
              parse_int(1, MAX_PES, ": launch at least one PE per cube (cubes have 8 PEs, "
                        "or N when --pes N is more)"),
              f"PEs launched per cube, 1..{MAX_PES} (default 8; cubes have 8 PEs, or N when "
              "--pes N is more).", metavar="N", from_text=int_text),
    LaunchKey("wiring", "wiring", "--wiring", parse_text,
              "Built-in wiring name or a wiring .toml.", metavar="NAME|FILE"),
    LaunchKey("cubes", "cubes", "--cubes", parse_int(1, MAX_CUBES),
              "Number of cubes launched.", metavar="N", from_text=int_text),
    LaunchKey("cube_start", "cube_start", "--cube-start", parse_int(0, MAX_CUBES - 1),
              "First physical cube.", metavar="K", from_text=int_text),
    LaunchKey("mesh", "mesh", "--mesh", parse_mesh_value,
              "RxC sub-mesh: sets mesh_rows/cols, cubes (over a panel's mesh too).",
              metavar="RxC"),
    LaunchKey("args", "args", "--arg", parse_args,
              "Kernel argument (a Python literal, else a string). Repeatable.",
              metavar="NAME=VALUE", repeatable=True, from_items=args_text),
    LaunchKey("sharded", "sharded", "--sharded", parse_names("k_ptr,v_ptr", "kc_ptr,vc_ptr"),
              "Comma-separated buffers holding per-rank KV shards (default k_ptr,v_ptr); "
              "the simulator fills the first two with K and V.", metavar="PTR,PTR",
              from_text=names_text),
    LaunchKey("queue_depth", "queue_depth", "--queue-depth", parse_int(0, MAX_QUEUE_DEPTH),
              "IPCQ depth D (default: hardware profile, 4).", metavar="D",
              from_text=int_text),
    LaunchKey("harness", "harness", "--harness", parse_harness_value,
              "How the simulator builds inputs and the reference: decode (Q replicated, KV "
              "split) or prefill (Q and KV split); default: the kernel's (built-ins), else "
              "decode.", choices=tuple(h.value for h in Harness)),
    LaunchKey("groups", "groups", "--groups", parse_groups,
              "Which ranks form one attention problem: the whole launch (default), each "
              "cube, or PE p of every cube.", choices=tuple(g.value for g in GroupMode)),
    LaunchKey("outputs", "outputs", "--outputs", parse_names("o_ptr", "o_ptr,lse_ptr"),
              "Buffers the harness calls outputs (default o_ptr).", metavar="PTR[,PTR]",
              from_text=names_text),
    LaunchKey("softmax_scale", "softmax_scale", "--softmax-scale", parse_softmax_scale,
              "The reference's softmax scale (default: the kernel's sm_scale, else "
              "1/sqrt(d_head)); a kernel's sm_scale parameter receives it.", metavar="X",
              from_text=float_text),
    LaunchKey("mask", "mask", "--mask", parse_mask,
              "The attention mask the launch declares: causal, causal:OFFSET, window:W or "
              "padding:LEN, optionally @zigzag or @striped (positions), or none; default: the "
              "kernel's (built-ins), else none.", metavar="MASK", show=show_mask),
    LaunchKey("empty_shards", "empty_shards", "--empty-shard", parse_empty_shards,
              "A rank whose KV slice is empty (numeric_safety). Repeatable.",
              metavar="CUBE,PE", repeatable=True, from_items=list),
)

KEY_NAMES = tuple(row.key for row in LAUNCH_KEYS)
KEYS_BY_NAME = {row.key: row for row in LAUNCH_KEYS}


def option_from_text(row: LaunchKey, value: str | tuple[str, ...]) -> object:
    """A CLI value of `row` (text, or the items of a repeated flag) parsed by the row."""
    if isinstance(value, tuple):
        assert row.from_items is not None
        raw = row.from_items(value)
    else:
        raw = row.from_text(value)
    return row.parse(raw, row.flag or row.key.upper())
