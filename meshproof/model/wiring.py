"""Wirings (SFR installs): which endpoint each (endpoint, direction) port reaches.

A wiring is symmetric: if A's E port reaches B then B's W port reaches A (same for N/S).
Built-ins are described in spec/machine.md; users describe their own hardware in TOML.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from meshproof.errors import TopologyError, WiringError
from meshproof.model.topology import Direction, Endpoint, System
from meshproof.tomlfile import read_toml

Port = tuple[Endpoint, Direction]


@dataclass(frozen=True, slots=True)
class Link:
    """One directed link of a wiring: `src --dir--> dst`."""

    src: Endpoint
    dir: Direction
    dst: Endpoint


@dataclass(frozen=True, slots=True)
class Wiring:
    """A named, validated, symmetric set of directed links over a system."""

    name: str
    system: System
    links: tuple[Link, ...]
    description: str = ""
    _table: Mapping[Port, Endpoint] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False)

    @staticmethod
    def build(name: str, system: System, links: list[Link], description: str = "",
              origin: str = "") -> Wiring:
        table: dict[Port, Endpoint] = {}
        where = origin or f"wiring {name!r}"
        for link in links:
            for ep in (link.src, link.dst):
                try:
                    system.check_endpoint(ep)
                except TopologyError as exc:
                    raise WiringError(f"{where}: link {_fmt(link)} leaves the system: {exc}") \
                        from None
            if link.src == link.dst:
                # A PE wired to itself is never real hardware, and a rendezvous (D = 0)
                # on such a link could only ever wait for itself.
                raise WiringError(f"{where}: link {_fmt(link)} joins a PE to itself; "
                                  "remove it")
            port = (link.src, link.dir)
            if port in table and table[port] != link.dst:
                raise WiringError(
                    f"{where}: port {link.src.describe()} {link.dir.value} is wired twice "
                    f"(to {table[port].describe()} and {link.dst.describe()}); keep one")
            table[port] = link.dst
        for (src, d), dst in table.items():
            back = table.get((dst, d.opposite))
            if back != src:
                raise WiringError(
                    f"{where}: link {src.describe()} {d.value} -> {dst.describe()} is not "
                    f"symmetric; add its reverse: from = [{dst.cube}, {dst.pe}], "
                    f"dir = \"{d.opposite.value}\", to = [{src.cube}, {src.pe}]")
        ordered = tuple(sorted((Link(s, d, t) for (s, d), t in table.items()),
                               key=lambda lk: (lk.src, lk.dir.value)))
        return Wiring(name, system, ordered, description, MappingProxyType(table))

    # The lookup table is a read-only view, which pickle refuses; it is rebuilt from the
    # links (already validated) so that schedules cross process boundaries
    # (model/isolation.py, the gate's workers).
    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.name, self.system, self.links, self.description))

    def neighbour(self, ep: Endpoint, d: Direction) -> Endpoint | None:
        return self._table.get((ep, d))

    def __iter__(self) -> Iterator[Link]:
        return iter(self.links)

    def missing_link_reason(self, ep: Endpoint, d: Direction) -> str:
        """Why `ep` has no `d` port, in words a kernel developer recognises."""
        where = self.system.describe_cube(ep.cube)
        if self.name in ("cube_mesh", "cube_ring") and ep.pe != 0:
            return (f"{self.name} links only PE 0 of each cube; pe {ep.pe} of {where} "
                    f"has no {d.value} link")
        return f"{where}, pe {ep.pe} has no {d.value} link in {self.name}"

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "system": self.system.to_json(), "n_links": len(self.links)}


def _rebuild(name: str, system: System, links: tuple[Link, ...], description: str) -> Wiring:
    table = MappingProxyType({(link.src, link.dir): link.dst for link in links})
    return Wiring(name, system, links, description, table)


def _fmt(link: Link) -> str:
    return f"{link.src.describe()} {link.dir.value} -> {link.dst.describe()}"


def _pair(a: Endpoint, d: Direction, b: Endpoint) -> list[Link]:
    return [Link(a, d, b), Link(b, d.opposite, a)]


def pe_line(system: System) -> Wiring:
    links: list[Link] = []
    for cube in range(system.n_cubes):
        for pe in range(system.pes - 1):
            links += _pair(Endpoint(cube, pe), Direction.E, Endpoint(cube, pe + 1))
    return Wiring.build("pe_line", system, links, "PE p -E-> PE p+1 inside every cube (open line)")


def pe_ring(system: System) -> Wiring:
    links = list(pe_line(system).links)
    if system.pes > 1:
        for cube in range(system.n_cubes):
            links += _pair(Endpoint(cube, system.pes - 1), Direction.E, Endpoint(cube, 0))
    return Wiring.build("pe_ring", system, links,
                        "pe_line plus the wrap-around link (closed ring of PEs in every cube)")


def cube_mesh(system: System) -> Wiring:
    links: list[Link] = []
    for sip in range(system.n_sips):
        for row in range(system.rows):
            for col in range(system.cols):
                here = Endpoint(system.cube_id(sip, row, col), 0)
                if col + 1 < system.cols:
                    east = Endpoint(system.cube_id(sip, row, col + 1), 0)
                    links += _pair(here, Direction.E, east)
                elif sip + 1 < system.n_sips:
                    east = Endpoint(system.cube_id(sip + 1, row, 0), 0)
                    links += _pair(here, Direction.E, east)
                if row + 1 < system.rows:
                    south = Endpoint(system.cube_id(sip, row + 1, col), 0)
                    links += _pair(here, Direction.S, south)
    return Wiring.build("cube_mesh", system, links,
                        "PE 0 of each cube linked E/W/N/S to its grid neighbours; SIPs side by "
                        "side with E/W links between facing edge cubes")


def cube_mesh_all_pes(system: System) -> Wiring:
    """`cube_mesh` for every PE index: PE p of each cube linked E/W/N/S to PE p of its grid
    neighbours (and across facing SIP edges), so that 8 users' all-reduces run side by
    side (batch on batch). No links inside a cube: a port reaches one endpoint."""
    links = [Link(Endpoint(link.src.cube, pe), link.dir, Endpoint(link.dst.cube, pe))
             for link in cube_mesh(system).links for pe in range(system.pes)]
    return Wiring.build("cube_mesh_all_pes", system, links,
                        "every PE p of each cube linked E/W/N/S to PE p of its grid "
                        "neighbours; SIPs side by side as in cube_mesh")


def cube_ring(system: System, cube_start: int, n_cubes: int) -> Wiring:
    cubes = list(range(cube_start, cube_start + n_cubes))
    for cube in cubes:
        system.check_cube(cube)
    links: list[Link] = []
    if n_cubes > 1:
        for i, cube in enumerate(cubes):
            nxt = cubes[(i + 1) % n_cubes]
            links += _pair(Endpoint(cube, 0), Direction.E, Endpoint(nxt, 0))
    return Wiring.build("cube_ring", system, links,
                        "closed ring over PE 0 of the launched cubes (older closed-ring install)")


BUILTIN_WIRINGS: dict[str, str] = {
    "pe_line": "PE p -E-> PE p+1 inside every cube (open line)",
    "pe_ring": "pe_line plus the wrap-around link (closed ring of PEs)",
    "cube_mesh": "PE 0 of each cube linked to its grid neighbours, multi-SIP",
    "cube_mesh_all_pes": "every PE p linked to PE p of the neighbouring cubes, multi-SIP",
    "cube_ring": "closed ring over PE 0 of the launched cubes",
}


def build_wiring(name_or_path: str, system: System, cube_start: int = 0,
                 n_cubes: int = 1) -> Wiring:
    """A built-in wiring by name, or a wiring TOML file by path."""
    if name_or_path == "pe_line":
        return pe_line(system)
    if name_or_path == "pe_ring":
        return pe_ring(system)
    if name_or_path == "cube_mesh":
        return cube_mesh(system)
    if name_or_path == "cube_mesh_all_pes":
        return cube_mesh_all_pes(system)
    if name_or_path == "cube_ring":
        return cube_ring(system, cube_start, n_cubes)
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        return load_wiring_file(Path(name_or_path), system)
    raise WiringError(f"unknown wiring {name_or_path!r}: use one of "
                      f"{', '.join(sorted(BUILTIN_WIRINGS))} or a path to a .toml wiring file")


def load_wiring_file(path: Path, system: System) -> Wiring:
    """Load `[[link]] from = [cube, pe], dir = "E", to = [cube, pe]` entries.

    Both halves of every link must be listed: an asymmetric file is rejected, because a
    one-way entry is far more often a typo than real hardware.
    """
    data = read_toml(path, "wiring file", f"pass a built-in name "
                     f"({', '.join(sorted(BUILTIN_WIRINGS))}) or an existing .toml file",
                     directory="pass a .toml file", error=WiringError)
    unknown = set(data) - {"name", "description", "link"}
    if unknown:
        raise WiringError(f"wiring file {path}: unknown key(s) {', '.join(sorted(unknown))}; "
                          "allowed: name, description, [[link]]")
    entries = data.get("link", [])
    if not isinstance(entries, list) or not entries:
        raise WiringError(f"wiring file {path} lists no links; add [[link]] tables with "
                          "from = [cube, pe], dir = \"E\", to = [cube, pe]")
    links: list[Link] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) != {"from", "dir", "to"}:
            raise WiringError(f"wiring file {path}: link #{i + 1} must have exactly the keys "
                              "from, dir, to")
        try:
            direction = Direction.parse(entry["dir"])
        except TopologyError as exc:
            raise WiringError(f"wiring file {path}: link #{i + 1}: {exc}") from None
        links.append(Link(_endpoint(entry["from"], path, i), direction,
                          _endpoint(entry["to"], path, i)))
    name = data.get("name", path.stem)
    description = data.get("description", "")
    # The name heads every diagnostic and report line: one non-empty line of text.
    if not isinstance(name, str) or not name.strip() or not name.isprintable():
        raise WiringError(f"wiring file {path}: name must be a non-empty, one-line string, "
                          f"got {name!r}")
    if not isinstance(description, str):
        raise WiringError(f"wiring file {path}: description must be a string, got "
                          f"{description!r}")
    return Wiring.build(name, system, links, description, origin=f"wiring file {path}")


def _endpoint(value: object, path: Path, i: int) -> Endpoint:
    if (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        return Endpoint(int(value[0]), int(value[1]))
    raise WiringError(f"wiring file {path}: link #{i + 1}: endpoints are [cube, pe] integer "
                      f"pairs, got {value!r}")
