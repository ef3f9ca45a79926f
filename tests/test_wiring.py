"""Wirings: the four built-in installs, their symmetry, and wirings read from TOML files."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import (
    TEST_DATA,
    RunCli,
    assert_bad_input,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from meshproof.errors import WiringError
from meshproof.model.topology import Direction, Endpoint, System
from meshproof.model.wiring import (
    BUILTIN_WIRINGS,
    Link,
    Wiring,
    build_wiring,
    cube_mesh,
    cube_mesh_all_pes,
    cube_ring,
    load_wiring_file,
    pe_line,
    pe_ring,
)

E, W, N, S = Direction.E, Direction.W, Direction.N, Direction.S


def assert_symmetric(wiring: Wiring) -> None:
    """Independent of Wiring.build's own check: A.d == B  <=>  B.opposite(d) == A."""
    seen: set[tuple[Endpoint, Direction]] = set()
    for link in wiring:
        assert (link.src, link.dir) not in seen, f"port listed twice: {link}"
        seen.add((link.src, link.dir))
        assert wiring.neighbour(link.src, link.dir) == link.dst
        assert wiring.neighbour(link.dst, link.dir.opposite) == link.src, f"one-way: {link}"
    system = wiring.system
    for cube in range(system.n_cubes):
        for pe in range(system.pes):
            for d in Direction:
                ep = Endpoint(cube, pe)
                there = wiring.neighbour(ep, d)
                assert (there is not None) == ((ep, d) in seen)
                if there is not None:
                    system.check_endpoint(there)
                    assert there != ep


systems = st.builds(System, n_sips=st.integers(1, 3), rows=st.integers(1, 5),
                    cols=st.integers(1, 5), pes=st.integers(1, 8))


@settings(max_examples=40, deadline=None)
@given(systems)
def test_pe_line_is_symmetric_open_line(system: System) -> None:
    w = pe_line(system)
    assert_symmetric(w)
    assert len(w.links) == 2 * system.n_cubes * (system.pes - 1)
    for link in w:
        assert link.src.cube == link.dst.cube
        assert link.dir in (E, W)
        assert link.dst.pe == link.src.pe + (1 if link.dir is E else -1)
    for cube in range(system.n_cubes):
        assert w.neighbour(Endpoint(cube, 0), W) is None
        assert w.neighbour(Endpoint(cube, system.pes - 1), E) is None


@settings(max_examples=40, deadline=None)
@given(systems)
def test_pe_ring_is_symmetric_closed_ring(system: System) -> None:
    w = pe_ring(system)
    assert_symmetric(w)
    for cube in range(system.n_cubes):
        for pe in range(system.pes):
            east = w.neighbour(Endpoint(cube, pe), E)
            if system.pes == 1:
                assert east is None
            else:
                assert east == Endpoint(cube, (pe + 1) % system.pes)
        assert all(w.neighbour(Endpoint(cube, pe), d) is None
                   for pe in range(system.pes) for d in (N, S))


@settings(max_examples=60, deadline=None)
@given(systems)
def test_cube_mesh_is_symmetric_grid_with_multi_sip_rows(system: System) -> None:
    w = cube_mesh(system)
    assert_symmetric(w)
    per_sip_pairs = system.rows * (system.cols - 1) + (system.rows - 1) * system.cols
    pairs = system.n_sips * per_sip_pairs + (system.n_sips - 1) * system.rows
    assert len(w.links) == 2 * pairs
    for cube in range(system.n_cubes):
        c = system.coord(cube)
        here = Endpoint(cube, 0)
        # PEs other than 0 have no links at all
        for pe in range(1, system.pes):
            assert all(w.neighbour(Endpoint(cube, pe), d) is None for d in Direction)
        east = w.neighbour(here, E)
        if c.col + 1 < system.cols:
            assert east == Endpoint(system.cube_id(c.sip, c.row, c.col + 1), 0)
        elif c.sip + 1 < system.n_sips:  # facing edge cube of the next SIP, same row
            assert east == Endpoint(system.cube_id(c.sip + 1, c.row, 0), 0)
        else:
            assert east is None
        west = w.neighbour(here, W)
        if c.col > 0:
            assert west == Endpoint(system.cube_id(c.sip, c.row, c.col - 1), 0)
        elif c.sip > 0:
            assert west == Endpoint(system.cube_id(c.sip - 1, c.row, system.cols - 1), 0)
        else:
            assert west is None
        south = w.neighbour(here, S)
        assert south == (Endpoint(system.cube_id(c.sip, c.row + 1, c.col), 0)
                         if c.row + 1 < system.rows else None)
        north = w.neighbour(here, N)
        assert north == (Endpoint(system.cube_id(c.sip, c.row - 1, c.col), 0)
                         if c.row > 0 else None)


@st.composite
def ring_placements(draw: st.DrawFn) -> tuple[System, int, int]:
    system = draw(systems)
    start = draw(st.integers(0, system.n_cubes - 1))
    count = draw(st.integers(1, system.n_cubes - start))
    return system, start, count


@settings(max_examples=60, deadline=None)
@given(ring_placements())
def test_cube_ring_is_symmetric_closed_ring_over_launched_cubes(
        placement: tuple[System, int, int]) -> None:
    system, start, count = placement
    w = cube_ring(system, start, count)
    assert_symmetric(w)
    cubes = list(range(start, start + count))
    for link in w:
        assert link.src.pe == link.dst.pe == 0
        assert link.src.cube in cubes and link.dst.cube in cubes
    if count == 1:
        assert w.links == ()
        return
    for i, cube in enumerate(cubes):
        assert w.neighbour(Endpoint(cube, 0), E) == Endpoint(cubes[(i + 1) % count], 0)
        assert w.neighbour(Endpoint(cube, 0), W) == Endpoint(cubes[(i - 1) % count], 0)


def test_cube_mesh_facts_of_the_study() -> None:
    w = cube_mesh(System())  # 1 SIP of 4x4
    assert w.neighbour(Endpoint(4, 0), W) is None      # the historical IpcqInvalidDirection
    assert w.neighbour(Endpoint(3, 0), E) is None
    assert w.neighbour(Endpoint(3, 0), W) == Endpoint(2, 0)
    assert w.neighbour(Endpoint(4, 0), N) == Endpoint(0, 0)
    assert w.neighbour(Endpoint(4, 0), E) == Endpoint(5, 0)
    assert w.neighbour(Endpoint(5, 3), E) is None
    assert "cube_mesh links only PE 0 of each cube; pe 3 of cube 5" in \
        w.missing_link_reason(Endpoint(5, 3), E)
    assert w.missing_link_reason(Endpoint(4, 0), W) == \
        "cube 4 (SIP 0, row 1, col 0), pe 0 has no W link in cube_mesh"


@settings(max_examples=40, deadline=None)
@given(systems)
def test_cube_mesh_all_pes_is_cube_mesh_for_every_pe_index(system: System) -> None:
    w = cube_mesh_all_pes(system)
    assert_symmetric(w)
    base = cube_mesh(system)
    assert len(w.links) == system.pes * len(base.links)
    for cube in range(system.n_cubes):
        for pe in range(system.pes):
            for d in Direction:
                there = base.neighbour(Endpoint(cube, 0), d)
                want = Endpoint(there.cube, pe) if there is not None else None
                assert w.neighbour(Endpoint(cube, pe), d) == want


def test_cube_mesh_all_pes_links_pe_p_to_pe_p_of_the_neighbouring_cubes() -> None:
    w = cube_mesh_all_pes(System(2, 4, 4, 8))
    assert w.neighbour(Endpoint(0, 5), E) == Endpoint(1, 5)
    assert w.neighbour(Endpoint(0, 5), S) == Endpoint(4, 5)
    assert w.neighbour(Endpoint(3, 7), E) == Endpoint(16, 7)    # across the SIP edge
    assert w.neighbour(Endpoint(4, 2), W) is None                # no wrap inside a SIP
    assert w.neighbour(Endpoint(1, 3), W) == Endpoint(0, 3)      # not PE 2: no NOC links
    assert w.missing_link_reason(Endpoint(4, 2), W) == \
        "cube 4 (SIP 0, row 1, col 0), pe 2 has no W link in cube_mesh_all_pes"


def test_cube_mesh_two_sips_join_facing_edge_cubes() -> None:
    system = System(2, 4, 4, 8)
    w = cube_mesh(system)
    for row in range(4):
        left, right = row * 4 + 3, 16 + row * 4
        assert w.neighbour(Endpoint(left, 0), E) == Endpoint(right, 0)
        assert w.neighbour(Endpoint(right, 0), W) == Endpoint(left, 0)
    assert w.neighbour(Endpoint(4, 0), W) is None     # still no wrap inside a SIP
    assert w.neighbour(Endpoint(19, 0), E) is None    # last SIP's east edge
    assert w.neighbour(Endpoint(16, 0), N) is None    # SIPs are side by side, not stacked


def test_build_wiring_names_and_unknown() -> None:
    system = System()
    for name in BUILTIN_WIRINGS:
        assert build_wiring(name, system, 0, 4).name == name
    with pytest.raises(WiringError) as info:
        build_wiring("mesh", system)
    assert str(info.value) == ("unknown wiring 'mesh': use one of cube_mesh, cube_mesh_all_pes, "
                               "cube_ring, pe_line, pe_ring or a path to a .toml wiring file")
    with pytest.raises(WiringError, match=r"wiring file nope\.toml does not exist"):
        build_wiring("nope.toml", system)


def test_wiring_file_loads_symmetric_custom_install() -> None:
    w = build_wiring(str(TEST_DATA / "square_ring.toml"), System())
    assert w.name == "square_ring"
    assert w.description == "closed square over PE 0 of cubes 0, 1, 5, 4"
    assert_symmetric(w)
    assert len(w.links) == 8
    assert w.neighbour(Endpoint(0, 0), E) == Endpoint(1, 0)
    assert w.neighbour(Endpoint(1, 0), S) == Endpoint(5, 0)
    assert w.neighbour(Endpoint(4, 0), N) == Endpoint(0, 0)
    assert w.neighbour(Endpoint(4, 0), W) is None
    assert w.to_json() == {"name": "square_ring", "n_links": 8,
                           "system": {"n_sips": 1, "rows": 4, "cols": 4, "pes": 8}}


def test_wiring_file_name_defaults_to_the_file_stem(tmp_path: Path) -> None:
    path = tmp_path / "my_board.toml"
    path.write_text('[[link]]\nfrom = [0, 0]\ndir = "E"\nto = [0, 1]\n'
                    '[[link]]\nfrom = [0, 1]\ndir = "W"\nto = [0, 0]\n')
    assert load_wiring_file(path, System()).name == "my_board"


def _load(name: str) -> str:
    path = Path("tests/data") / name
    with pytest.raises(WiringError) as info:
        load_wiring_file(path, System())
    return str(info.value)


def test_wiring_file_errors_are_one_line_and_say_how_to_fix(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TEST_DATA.parent.parent)
    assert _load("asymmetric.toml") == (
        "wiring file tests/data/asymmetric.toml: link (cube 0, pe 0) E -> (cube 0, pe 1) is not "
        'symmetric; add its reverse: from = [0, 1], dir = "W", to = [0, 0]')
    assert "is not symmetric" in _load("mismatched.toml")
    assert _load("out_of_range.toml").startswith(
        "wiring file tests/data/out_of_range.toml: link (cube 0, pe 0) E -> (cube 99, pe 0) "
        "leaves the system: cube 99 is outside the system (16 cubes, 1x4x4)")
    assert _load("duplicate_port.toml") == (
        "wiring file tests/data/duplicate_port.toml: port (cube 0, pe 0) E is wired twice "
        "(to (cube 0, pe 1) and (cube 0, pe 2)); keep one")
    assert _load("self_link.toml") == (
        "wiring file tests/data/self_link.toml: link (cube 0, pe 0) E -> (cube 0, pe 0) joins a "
        "PE to itself; remove it")
    assert _load("unknown_key.toml") == (
        "wiring file tests/data/unknown_key.toml: unknown key(s) links; allowed: name, "
        "description, [[link]]")
    assert _load("bad_link_keys.toml") == (
        "wiring file tests/data/bad_link_keys.toml: link #1 must have exactly the keys from, "
        "dir, to")
    assert _load("bad_endpoint.toml") == (
        "wiring file tests/data/bad_endpoint.toml: link #1: endpoints are [cube, pe] integer "
        "pairs, got [0]")
    assert _load("bad_dir.toml") == (
        "wiring file tests/data/bad_dir.toml: link #1: unknown direction 'NE': use one of "
        "'E', 'W', 'N', 'S'")
    assert _load("no_links.toml").startswith("wiring file tests/data/no_links.toml lists no links")
    assert _load("invalid.toml").startswith("wiring file tests/data/invalid.toml is not valid TOML")
    for name in ("asymmetric.toml", "invalid.toml", "duplicate_port.toml"):
        assert "\n" not in _load(name)


def test_wiring_build_rejects_one_way_links_directly() -> None:
    a, b = Endpoint(0, 0), Endpoint(0, 1)
    with pytest.raises(WiringError, match="is not symmetric"):
        Wiring.build("x", System(), [Link(a, E, b)])
    ok = Wiring.build("x", System(), [Link(a, E, b), Link(b, W, a), Link(a, E, b)])
    assert len(ok.links) == 2  # a repeated identical link is harmless


@pytest.mark.parametrize(("body", "fragment"), [
    ('name = 5\n', "name must be a non-empty, one-line string, got 5"),
    ('name = ""\n', "name must be a non-empty, one-line string, got ''"),
    ('name = "a\\nb"\n', "name must be a non-empty, one-line string"),
    ('description = 3\n', "description must be a string, got 3"),
])
def test_wiring_file_names_are_one_line_strings(run_cli: RunCli, tmp_path: Path, body: str,
                                               fragment: str) -> None:
    # A newline in the name split the trace header and every diagnostic over two lines.
    path = tmp_path / "w.toml"
    path.write_text(body + _PAIR, encoding="utf-8")
    assert_bad_input(run_cli(["trace", "mesh_mlo_1d", "--wiring", str(path), "--arg",
                              "n_ranks=2"]), fragment)


_PAIR = """[[link]]
from = [0, 0]
dir = "E"
to = [0, 1]

[[link]]
from = [0, 1]
dir = "W"
to = [0, 0]
"""
