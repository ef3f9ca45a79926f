"""The machine: systems, cube ids and coordinates, endpoints, directions, parsers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from meshproof.errors import BadInput, TopologyError
from meshproof.model.topology import (
    MAX_CUBES,
    MAX_PES,
    Direction,
    Endpoint,
    System,
    parse_mesh,
    parse_system,
)


def test_default_system_is_one_sip_of_4x4_cubes_with_8_pes() -> None:
    s = System()
    assert (s.n_sips, s.rows, s.cols, s.pes) == (1, 4, 4, 8)
    assert s.n_cubes == 16
    assert s.shape_text == "1x4x4"


def test_cube_id_formula_and_coord_roundtrip() -> None:
    s = System(n_sips=3, rows=2, cols=5, pes=4)
    # physical cube id = sip*rows*cols + row*cols + col
    assert s.cube_id(2, 1, 3) == 2 * 10 + 1 * 5 + 3
    for cube in range(s.n_cubes):
        c = s.coord(cube)
        assert s.cube_id(c.sip, c.row, c.col) == cube
        assert 0 <= c.row < 2 and 0 <= c.col < 5 and 0 <= c.sip < 3


@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 6))
def test_coords_cover_every_cube_once(sips: int, rows: int, cols: int) -> None:
    s = System(sips, rows, cols, 1)
    coords = {(s.coord(c).sip, s.coord(c).row, s.coord(c).col) for c in range(s.n_cubes)}
    assert len(coords) == s.n_cubes == sips * rows * cols


def test_cube_4_of_a_4x4_sip_is_row_1_col_0() -> None:
    c = System().coord(4)
    assert (c.sip, c.row, c.col) == (0, 1, 0)
    assert System().describe_cube(4) == "cube 4 (SIP 0, row 1, col 0)"


@pytest.mark.parametrize("field", ["n_sips", "rows", "cols", "pes"])
@pytest.mark.parametrize("value", [0, -1, True, 2.0])
def test_system_rejects_non_positive_or_non_int(field: str, value: object) -> None:
    kwargs: dict[str, object] = {"n_sips": 1, "rows": 4, "cols": 4, "pes": 8, field: value}
    with pytest.raises(TopologyError, match=f"system {field} must be a positive integer"):
        System(**kwargs)  # type: ignore[arg-type]


def test_system_size_limits_are_bad_input() -> None:
    with pytest.raises(TopologyError, match=f"more than the supported {MAX_CUBES}"):
        System(100, 100, 100, 8)
    with pytest.raises(TopologyError, match=f"more than {MAX_PES}"):
        System(1, 4, 4, MAX_PES + 1)
    assert System(1, 64, 64, MAX_PES).n_cubes == MAX_CUBES
    assert issubclass(TopologyError, BadInput)


def test_check_cube_and_endpoint() -> None:
    s = System()
    s.check_endpoint(Endpoint(15, 7))
    with pytest.raises(TopologyError, match=r"cube 16 is outside the system \(16 cubes, 1x4x4\)"):
        s.check_cube(16)
    with pytest.raises(TopologyError, match="cube -1 is outside"):
        s.check_cube(-1)
    with pytest.raises(TopologyError, match="pe 8 is outside a cube of 8 PEs"):
        s.check_endpoint(Endpoint(0, 8))


def test_endpoint_order_label_and_description() -> None:
    assert sorted([Endpoint(1, 0), Endpoint(0, 7), Endpoint(0, 2)]) == \
        [Endpoint(0, 2), Endpoint(0, 7), Endpoint(1, 0)]
    assert Endpoint(4, 0).label == "c4p0"
    assert Endpoint(4, 0).describe() == "(cube 4, pe 0)"


def test_directions_and_opposites() -> None:
    assert [d.value for d in Direction] == ["E", "W", "N", "S"]
    for d in Direction:
        assert d.opposite.opposite is d
        assert d.opposite is not d
    assert Direction.E.opposite is Direction.W
    assert Direction.N.opposite is Direction.S
    assert Direction.parse("e") is Direction.E
    assert Direction.parse(Direction.S) is Direction.S
    for bad in ("X", "", "EAST", 1, None):
        with pytest.raises(TopologyError, match="unknown direction"):
            Direction.parse(bad)


@pytest.mark.parametrize("text,expected", [("1x4x4", (1, 4, 4)), ("2x4x4", (2, 4, 4)),
                                           (" 4 x 2 x 3 ", (4, 2, 3))])
def test_parse_system(text: str, expected: tuple[int, int, int]) -> None:
    s = parse_system(text, pes=4)
    assert (s.n_sips, s.rows, s.cols, s.pes) == (*expected, 4)


@pytest.mark.parametrize("text", ["4x4", "1x4x", "axbxc", "1x4x4x4", "", "-1x4x4"])
def test_parse_system_rejects_malformed(text: str) -> None:
    with pytest.raises(TopologyError, match="malformed system"):
        parse_system(text)


def test_parse_system_zero_is_rejected_by_the_system() -> None:
    with pytest.raises(TopologyError, match="system n_sips must be a positive integer, got 0"):
        parse_system("0x4x4")


@pytest.mark.parametrize("text,expected", [("2x4", (2, 4)), ("1x4", (1, 4)), (" 4x4", (4, 4))])
def test_parse_mesh(text: str, expected: tuple[int, int]) -> None:
    assert parse_mesh(text) == expected


@pytest.mark.parametrize("text,match", [("2x", "malformed mesh '2x'"), ("x4", "malformed mesh"),
                                        ("2x4x1", "malformed mesh"), ("0x4", "at least one row"),
                                        ("4x0", "at least one row"),
                                        ("100x100", "more than 4096 cubes")])
def test_parse_mesh_rejects(text: str, match: str) -> None:
    with pytest.raises(TopologyError, match=match):
        parse_mesh(text)
