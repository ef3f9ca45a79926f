"""The one partial description of a launch, and its field table.

A launch is described in four places: the CLI's launch flags, a proof-matrix `[[case]]`,
a launches-file `[[launch]]` and the keywords of `meshproof.testing`. All four read
`LAUNCH_KEYS`: one row per key, with the LaunchOptions field, the TOML key (also the
testing keyword), the CLI flag, the parser and the help text. The row's parser is the one
validation of a value, whether it came as CLI text (read first by the row's `from_text`),
a TOML value or a Python keyword. To add a launch key: add the field to LaunchOptions and
a row here; tests/test_launch_options.py fails until every front end takes it.

Every field is optional (None: not given), so options combine: `base.overlay(top)` keeps
what `top` gives and fills the rest from `base` (a panel's preset, a launches file's
top-level keys). `args` merge key by key. A `mesh` in `top` replaces the base's mesh, and
with it the base's mesh_rows/mesh_cols arguments and cube count (the `--mesh`-over-panel
rule, written here once).
"""

from __future__ import annotations

import ast
import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Literal, TypeAlias

from meshproof.errors import ConfigError, LaunchError, MeshproofError
from meshproof.model.masks import Mask
from meshproof.model.schedule import GroupMode, Harness, Scalar
from meshproof.model.topology import MAX_CUBES, MAX_PES, Endpoint, System, parse_mesh, parse_system

DEFAULT_SHARDED = ("k_ptr", "v_ptr")
MAX_QUEUE_DEPTH = 1 << 16
SCALES = ("validation", "headline")
# `mask = "none"`: launch a kernel that declares a mask without one
NoMask: TypeAlias = Literal["none"]
MaskChoice: TypeAlias = Mask | NoMask
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


# --- the parsers: (value, the name the user wrote it under) -> typed value ---------------

def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LaunchError(f"{name} must be a non-empty string, got {value!r}")
    return value.strip()


def _int_from(low: int, high: int, fix: str = "") -> Callable[[object, str], int]:
    def parse(value: object, name: str) -> int:
        # bool is an int subclass: a `pes = true` typo must not pass as 1
        if isinstance(value, bool) or not isinstance(value, int):
            raise LaunchError(f"{name} must be an integer, got {value!r}")
        if not low <= value <= high:
            raise LaunchError(f"{name} {value} is out of range {low}..{high}{fix}")
        return value
    return parse


def _int_text(text: str) -> object:
    try:
        return int(text.strip())
    except ValueError:
        return text


def _float_text(text: str) -> object:
    try:
        return float(text.strip())
    except ValueError:
        return text


def _scale(value: object, name: str) -> str:
    text = _text(value, name)
    if text not in SCALES:
        raise LaunchError(f"{name} {text!r} is not one of {', '.join(SCALES)}")
    return text


def _system(value: object, name: str) -> System:
    if isinstance(value, System):
        return value
    # PEs per cube follow --pes (cube_pes) when the launch is resolved
    return parse_system(_text(value, name))


def _mesh(value: object, name: str) -> str:
    rows, cols = parse_mesh(_text(value, name))
    return f"{rows}x{cols}"


# Spellings people type that are not Python literals: JSON's words and IEEE specials. Left
# as strings, `--arg flag=false` would reach the kernel as the (truthy) text "false".
_WORDS: dict[str, Scalar] = {"true": True, "false": False, "null": None,
                             "inf": math.inf, "+inf": math.inf, "-inf": -math.inf,
                             "nan": math.nan}


def parse_arg(item: str) -> tuple[str, Scalar]:
    """One `--arg NAME=VALUE`: a Python literal (or JSON word), else the text."""
    name, sep, text = item.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise LaunchError(f"--arg {item!r} is not NAME=VALUE (e.g. --arg S_q=16)")
    stripped = text.strip()
    if stripped in _WORDS:
        return name, _WORDS[stripped]
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = text
    if not isinstance(value, (int, float, bool, str, type(None))):
        raise LaunchError(f"--arg {name}: only numbers, booleans, strings and None are "
                          f"supported, got {text!r}")
    return name, value


def _args_text(items: tuple[str, ...]) -> object:
    """The --arg items as a table; a name given twice is an error (the last would win
    silently)."""
    out: dict[str, Scalar] = {}
    seen: dict[str, str] = {}
    for item in items:
        name, value = parse_arg(item)
        if name in seen:
            raise LaunchError(f"--arg {name} is given twice ({seen[name]!r} and {item!r}); "
                              "pass each kernel argument once")
        seen[name] = item
        out[name] = value
    return out


def _args(value: object, name: str) -> tuple[tuple[str, Scalar], ...]:
    if isinstance(value, tuple) and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        value = dict(value)
    if not isinstance(value, Mapping):
        raise LaunchError(f"{name} must be a table of kernel arguments, e.g. "
                          f"{name} = {{ S_q = 1 }}")
    for key, item in value.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise LaunchError(f"{name}: {key!r} is not a kernel argument name")
        if not isinstance(item, (int, float, bool, str, type(None))):
            raise LaunchError(f"{name}.{key} must be a number, boolean or string, got "
                              f"{item!r}")
    return tuple(sorted(value.items()))


def _names_text(text: str) -> object:
    return [s.strip() for s in text.split(",") if s.strip()]


def _names(default: str, example: str) -> Callable[[object, str], tuple[str, ...]]:
    """A list of buffer names (or comma-separated text); an empty one is refused: with no
    buffer named there is nothing to count (a typo, not a choice)."""
    def parse(value: object, name: str) -> tuple[str, ...]:
        if isinstance(value, str):
            value = _names_text(value)
        if not isinstance(value, (list, tuple)) or \
                not all(isinstance(s, str) and s.strip() for s in value):
            raise LaunchError(f"{name} must be a list of buffer names, e.g. "
                              f"{name} = {list(example.split(','))}")
        if not value:
            raise LaunchError(f"{name} names no buffer; leave it out for the default "
                              f"{default} or name the buffers, e.g. {example}")
        return tuple(s.strip() for s in value)
    return parse


def _harness(value: object, name: str) -> Harness:
    if isinstance(value, Harness):
        return value
    text = _text(value, name)
    try:
        return Harness(text)
    except ValueError:
        raise LaunchError(f"{name} {text!r} is not a harness: use one of "
                          f"{', '.join(h.value for h in Harness)}") from None


def _groups(value: object, name: str) -> GroupMode:
    if isinstance(value, GroupMode):
        return value
    text = _text(value, name)
    try:
        return GroupMode(text)
    except ValueError:
        raise LaunchError(f"{name} must be one of {', '.join(g.value for g in GroupMode)}, "
                          f"got {text!r}") from None


def _softmax_scale(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        raise LaunchError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _endpoint(value: object, name: str) -> Endpoint:
    if isinstance(value, Endpoint):
        return value
    if isinstance(value, str):
        parts = value.replace("c", " ").replace("p", ",").replace(" ", "").split(",")
        try:
            cube, pe = (int(x) for x in parts if x != "")
        except ValueError:
            raise LaunchError(f"{name} {value!r} is not CUBE,PE (e.g. 0,3)") from None
        return Endpoint(cube, pe)
    if isinstance(value, (list, tuple)) and len(value) == 2 and \
            all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return Endpoint(value[0], value[1])
    raise LaunchError(f"{name} {value!r} is not CUBE,PE (e.g. \"0,3\" or [0, 3])")


def _empty_shards(value: object, name: str) -> tuple[Endpoint, ...]:
    items = value if isinstance(value, (list, tuple)) and not (
        len(value) == 2 and all(isinstance(x, int) for x in value)) else [value]
    return tuple(_endpoint(v, name) for v in items)


def _mask(value: object, name: str) -> MaskChoice:
    if isinstance(value, Mask):
        return value
    text = _text(value, name)
    if text == "none":
        return "none"
    return Mask.parse(text)


def _show_mask(value: object) -> object:
    return value.text if isinstance(value, Mask) else value


def _show(value: object) -> object:
    if isinstance(value, System):
        return value.shape_text
    if isinstance(value, (Harness, GroupMode)):
        return value.value
    if isinstance(value, tuple) and value and all(isinstance(v, Endpoint) for v in value):
        return [f"{e.cube},{e.pe}" for e in value]
    if isinstance(value, tuple) and value and all(isinstance(v, tuple) for v in value):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return value


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
    show: Callable[[object], object] = _show


LAUNCH_KEYS: tuple[LaunchKey, ...] = (
    LaunchKey("kernel", "kernel", "", _text,
              "Built-in kernel name or path/to/file.py::function."),
    LaunchKey("panel", "panel", "--panel", _text,
              "Preset kernel + launch: one of the four GQA panels."),
    LaunchKey("scale", "scale", "--scale", _scale,
              "Panel scale (default validation).", choices=SCALES),
    LaunchKey("system", "system", "--system", _system,
              "SIPSxROWSxCOLS of cubes (default 1x4x4).", metavar="SIPSxROWSxCOLS"),
    LaunchKey("pes", "pes", "--pes",
              _int_from(1, MAX_PES, ": launch at least one PE per cube (cubes have 8 PEs, "
                        "or N when --pes N is more)"),
              f"PEs launched per cube, 1..{MAX_PES} (default 8; cubes have 8 PEs, or N when "
              "--pes N is more).", metavar="N", from_text=_int_text),
    LaunchKey("wiring", "wiring", "--wiring", _text,
              "Built-in wiring name or a wiring .toml.", metavar="NAME|FILE"),
    LaunchKey("cubes", "cubes", "--cubes", _int_from(1, MAX_CUBES),
              "Number of cubes launched.", metavar="N", from_text=_int_text),
    LaunchKey("cube_start", "cube_start", "--cube-start", _int_from(0, MAX_CUBES - 1),
              "First physical cube.", metavar="K", from_text=_int_text),
    LaunchKey("mesh", "mesh", "--mesh", _mesh,
              "RxC sub-mesh: sets mesh_rows/cols, cubes (over a panel's mesh too).",
              metavar="RxC"),
    LaunchKey("args", "args", "--arg", _args,
              "Kernel argument (a Python literal, else a string). Repeatable.",
              metavar="NAME=VALUE", repeatable=True, from_items=_args_text),
    LaunchKey("sharded", "sharded", "--sharded", _names("k_ptr,v_ptr", "kc_ptr,vc_ptr"),
              "Comma-separated buffers holding per-rank KV shards (default k_ptr,v_ptr); "
              "the simulator fills the first two with K and V.", metavar="PTR,PTR",
              from_text=_names_text),
    LaunchKey("queue_depth", "queue_depth", "--queue-depth", _int_from(0, MAX_QUEUE_DEPTH),
              "IPCQ depth D (default: hardware profile, 4).", metavar="D",
              from_text=_int_text),
    LaunchKey("harness", "harness", "--harness", _harness,
              "How the simulator builds inputs and the reference: decode (Q replicated, KV "
              "split) or prefill (Q and KV split); default: the kernel's (built-ins), else "
              "decode.", choices=tuple(h.value for h in Harness)),
    LaunchKey("groups", "groups", "--groups", _groups,
              "Which ranks form one attention problem: the whole launch (default), each "
              "cube, or PE p of every cube.", choices=tuple(g.value for g in GroupMode)),
    LaunchKey("outputs", "outputs", "--outputs", _names("o_ptr", "o_ptr,lse_ptr"),
              "Buffers the harness calls outputs (default o_ptr).", metavar="PTR[,PTR]",
              from_text=_names_text),
    LaunchKey("softmax_scale", "softmax_scale", "--softmax-scale", _softmax_scale,
              "The reference's softmax scale (default: the kernel's sm_scale, else "
              "1/sqrt(d_head)); a kernel's sm_scale parameter receives it.", metavar="X",
              from_text=_float_text),
    LaunchKey("mask", "mask", "--mask", _mask,
              "The attention mask the launch declares: causal, causal:OFFSET, window:W or "
              "padding:LEN, optionally @zigzag (positions), or none; default: the "
              "kernel's (built-ins), else none.", metavar="MASK", show=_show_mask),
    LaunchKey("empty_shards", "empty_shards", "--empty-shard", _empty_shards,
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
