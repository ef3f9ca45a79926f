"""Launch flags shared by the commands (cli/options.py): values, agreement, bad input."""

from __future__ import annotations

import json
import math

import pytest
from helpers import RunCli, assert_bad_input

from meshproof.cli.options import parse_arg


def test_mesh_and_cubes_must_agree(run_cli: RunCli) -> None:
    assert_bad_input(run_cli(["trace", "mesh_mlo_2d", "--mesh", "2x4", "--cubes", "4"]),
                     "--mesh 2x4 launches 8 cubes but --cubes says 4; drop --cubes")
    assert run_cli(["trace", "mesh_mlo_2d", "--mesh", "2x4", "--cubes", "8"]).code == 0
    assert_bad_input(run_cli(["trace", "--panel", "multi_user_decode", "--cubes", "8"]),
                     "--cubes 8 disagrees with panel multi_user_decode's 1x4 mesh",
                     "pass --mesh RxC")
    assert_bad_input(run_cli(["trace", "mesh_mlo_2d", "--cubes", "8"]),
                     "or --mesh RxC, which sets mesh_rows, mesh_cols and --cubes")


def test_mesh_overrides_a_panels_mesh(run_cli: RunCli) -> None:
    # Was silently ignored: the panel's mesh_rows=1, mesh_cols=4 and 4 cubes stayed.
    r = run_cli(["trace", "--panel", "multi_user_decode", "--mesh", "2x4", "--json"])
    assert r.code == 0
    launch = json.loads(r.out)["launch"]
    assert (launch["cubes"], launch["args"]["mesh_rows"], launch["args"]["mesh_cols"]) == \
        (8, 2, 4)


def test_pes_zero_and_an_empty_wiring_are_clear_errors(run_cli: RunCli) -> None:
    assert_bad_input(run_cli(["trace", "mesh_mlo_1d", "--pes", "0"]),
                     "--pes 0 is out of range 1..64: launch at least one PE per cube (cubes "
                     "have 8 PEs, or N when --pes N is more)")
    # --wiring "" silently fell back to the kernel's default wiring.
    assert_bad_input(run_cli(["trace", "mesh_mlo_1d", "--wiring", ""]), "unknown wiring ''")
    assert_bad_input(run_cli(["trace", "--panel", "single_user_decode", "--wiring", ""]),
                     "unknown wiring ''")


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("false", False), ("null", None), (" 4 ", 4), ("-inf", -math.inf),
    ("'16'", "16"), ('"x y"', "x y"), ("16", 16), ("a=b", "a=b"), ("", ""),
])
def test_arg_values(text: str, value: object) -> None:
    # `--arg flag=false` used to be the truthy string "false"; " 4" the string " 4".
    assert parse_arg(f"flag={text}") == ("flag", value)
    assert math.isnan(float(parse_arg("x=nan")[1] or 0))
