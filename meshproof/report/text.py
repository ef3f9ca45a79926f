"""Short text for titles, notes and tables: ranges, endpoint sets, launches, shapes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from meshproof.model.schedule import LaunchSpec
from meshproof.model.topology import Endpoint


def int_ranges(values: Iterable[int]) -> str:
    """`[0, 1, 2, 5, 7, 8]` -> `0-2, 5, 7-8`."""
    items = sorted(set(values))
    parts: list[str] = []
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        parts.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ", ".join(parts)


def describe_endpoints(endpoints: Iterable[Endpoint], limit: int = 4) -> str:
    """A compact description, e.g. `pes 1-7 of cubes 0-7`."""
    by_cube: dict[int, set[int]] = defaultdict(set)
    for ep in endpoints:
        by_cube[ep.cube].add(ep.pe)
    by_pes: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for cube, pe_set in sorted(by_cube.items()):
        by_pes[tuple(sorted(pe_set))].append(cube)
    parts = []
    for pes, cubes in sorted(by_pes.items(), key=lambda kv: kv[1][0]):
        p = f"pe {pes[0]}" if len(pes) == 1 else f"pes {int_ranges(pes)}"
        c = f"cube {cubes[0]}" if len(cubes) == 1 else f"cubes {int_ranges(cubes)}"
        parts.append(f"{p} of {c}")
    if len(parts) > limit:
        return "; ".join(parts[:limit]) + f"; and {len(parts) - limit} more groups"
    return "; ".join(parts)


def launch_line(spec: LaunchSpec) -> str:
    last = spec.cube_start + spec.n_cubes - 1
    cubes = f"cube {spec.cube_start}" if spec.n_cubes == 1 else f"cubes {spec.cube_start}-{last}"
    return (f"{spec.wiring} on a {spec.system.shape_text} system, {cubes} x {spec.pes} PEs, "
            f"queue depth {spec.queue_depth}")


def shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape) or "scalar"
