"""The parsers of the launch table (launch_options.py): each takes a value -- CLI text
already read by its row's `from_text`, a TOML value or a Python keyword -- and the name the
user wrote it under, and returns the typed value or raises LaunchError saying what is
accepted. `show_value` spells a typed value back as a TOML table would."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from typing import Literal, TypeAlias

from meshproof.errors import LaunchError
from meshproof.model.masks import Mask
from meshproof.model.schedule import GroupMode, Harness, Scalar
from meshproof.model.topology import Endpoint, System, parse_mesh, parse_system

SCALES = ("validation", "headline")
# `mask = "none"`: launch a kernel that declares a mask without one
NoMask: TypeAlias = Literal["none"]
MaskChoice: TypeAlias = Mask | NoMask


def parse_text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LaunchError(f"{name} must be a non-empty string, got {value!r}")
    return value.strip()


def parse_int(low: int, high: int, fix: str = "") -> Callable[[object, str], int]:
    def parse(value: object, name: str) -> int:
        # bool is an int subclass: a `pes = true` typo must not pass as 1
        if isinstance(value, bool) or not isinstance(value, int):
            raise LaunchError(f"{name} must be an integer, got {value!r}")
        if not low <= value <= high:
            raise LaunchError(f"{name} {value} is out of range {low}..{high}{fix}")
        return value
    return parse


def int_text(text: str) -> object:
    try:
        return int(text.strip())
    except ValueError:
        return text


def float_text(text: str) -> object:
    try:
        return float(text.strip())
    except ValueError:
        return text


def parse_scale(value: object, name: str) -> str:
    text = parse_text(value, name)
    if text not in SCALES:
        raise LaunchError(f"{name} {text!r} is not one of {', '.join(SCALES)}")
    return text


def parse_system_value(value: object, name: str) -> System:
    if isinstance(value, System):
        return value
    # PEs per cube follow --pes (cube_pes) when the launch is resolved
    return parse_system(parse_text(value, name))


def parse_mesh_value(value: object, name: str) -> str:
    rows, cols = parse_mesh(parse_text(value, name))
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


def args_text(items: tuple[str, ...]) -> object:
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


def parse_args(value: object, name: str) -> tuple[tuple[str, Scalar], ...]:
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


def names_text(text: str) -> object:
    return [s.strip() for s in text.split(",") if s.strip()]


def parse_names(default: str, example: str) -> Callable[[object, str], tuple[str, ...]]:
    """A list of buffer names (or comma-separated text); an empty one is refused: with no
    buffer named there is nothing to count (a typo, not a choice)."""
    def parse(value: object, name: str) -> tuple[str, ...]:
        if isinstance(value, str):
            value = names_text(value)
        if not isinstance(value, (list, tuple)) or \
                not all(isinstance(s, str) and s.strip() for s in value):
            raise LaunchError(f"{name} must be a list of buffer names, e.g. "
                              f"{name} = {list(example.split(','))}")
        if not value:
            raise LaunchError(f"{name} names no buffer; leave it out for the default "
                              f"{default} or name the buffers, e.g. {example}")
        return tuple(s.strip() for s in value)
    return parse


def parse_harness_value(value: object, name: str) -> Harness:
    if isinstance(value, Harness):
        return value
    text = parse_text(value, name)
    try:
        return Harness(text)
    except ValueError:
        raise LaunchError(f"{name} {text!r} is not a harness: use one of "
                          f"{', '.join(h.value for h in Harness)}") from None


def parse_groups(value: object, name: str) -> GroupMode:
    if isinstance(value, GroupMode):
        return value
    text = parse_text(value, name)
    try:
        return GroupMode(text)
    except ValueError:
        raise LaunchError(f"{name} must be one of {', '.join(g.value for g in GroupMode)}, "
                          f"got {text!r}") from None


def parse_softmax_scale(value: object, name: str) -> float:
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


def parse_empty_shards(value: object, name: str) -> tuple[Endpoint, ...]:
    items = value if isinstance(value, (list, tuple)) and not (
        len(value) == 2 and all(isinstance(x, int) for x in value)) else [value]
    return tuple(_endpoint(v, name) for v in items)


def parse_mask(value: object, name: str) -> MaskChoice:
    if isinstance(value, Mask):
        return value
    text = parse_text(value, name)
    if text == "none":
        return "none"
    return Mask.parse(text)


def show_mask(value: object) -> object:
    return value.text if isinstance(value, Mask) else value


def show_value(value: object) -> object:
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
