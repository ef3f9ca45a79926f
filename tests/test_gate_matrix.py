"""Parsing the proof matrix: strict keys, one-line errors, exit 2 for any bad file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import RunCli, one_line_error

from meshproof.cli import main
from meshproof.errors import ConfigError
from meshproof.gate.matrix import GateCase, load_matrix, resolve_case
from meshproof.model.launch_options import LaunchOptions
from meshproof.model.topology import System
from meshproof.verify.properties import Property

DATA = Path(__file__).parent / "data" / "gate"
GOOD = '[[case]]\nname = "a"\nkernel = "mesh_mlo_1d"\nexpect = "proved"\n'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proofs.toml"
    path.write_text(text)
    return path


def gate_error(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """RunCli the gate on a bad file: exit 2, nothing on stdout, exactly one stderr line."""
    assert main(["gate", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = gate_error(tmp_path / "nope.toml", capsys)
    assert "does not exist" in line


def test_default_file_is_proofs_toml_in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["gate"]) == 2
    assert "proofs.toml does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "needle"), [
    ("[[case]\nname = 1", "not valid TOML"),
    ("", "lists no cases"),
    ("title = 'x'\n" + GOOD, "unknown top-level key(s) title"),
    (GOOD.replace('expect = "proved"', 'expcet = "proved"'),
     "unknown key 'expcet' (did you mean 'expect'?)"),
    (GOOD.replace('expect = "proved"\n', ""), "missing required key 'expect'"),
    (GOOD.replace('"proved"', '"ok"'), "expect must be \"proved\" or a non-empty list"),
    (GOOD.replace('"proved"', "[]"), "expect must be \"proved\" or a non-empty list"),
    (GOOD.replace('"proved"', '["deadlock"]'),
     "unknown property 'deadlock' (did you mean 'deadlock_freedom'?)"),
    (GOOD.replace('"proved"', '["deadlock_freedom", "deadlock_freedom"]'), "twice"),
    (GOOD.replace('"proved"', '["numerics"]'), "simulate is not true"),
    (GOOD + GOOD, "name 'a' is used twice"),
    (GOOD.replace('kernel = "mesh_mlo_1d"', ""), "give kernel ="),
    (GOOD + "pes = true\n", "pes must be an integer"),
    (GOOD + "pes = 0\n", "pes 0 is out of range 1..1024"),
    (GOOD + "simulate = 1\n", "simulate must be a boolean"),
    (GOOD + "timeout = 0\n", "timeout must be a positive number"),
    (GOOD + "args = 3\n", "args must be a table of kernel arguments"),
    (GOOD + "args = { S_q = [1] }\n", "args.S_q must be a number"),
    (GOOD + "sharded = [1]\n", "sharded must be a list of buffer names"),
    (GOOD + 'scale = "headline"\n', "scale applies only to panel cases"),
    (GOOD.replace('kernel = "mesh_mlo_1d"', 'panel = "nope"'), "unknown panel 'nope'"),
    ('[[case]]\nname = " a"\nkernel = "k"\nexpect = "proved"\n', "name must be"),
    ("case = [1]\n", "case #1 is not a table"),
])
def test_malformed_matrix_exits_2_with_one_line(tmp_path: Path, text: str, needle: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    line = gate_error(write(tmp_path, text), capsys)
    assert line.startswith("meshproof: error: ")
    assert needle in line


@pytest.mark.parametrize(("extra", "needle"), [
    ('kernel = "no_such_kernel"', "case #1 (a): unknown kernel 'no_such_kernel'"),
    ('kernel = "missing.py::k"', "kernel file"),
    ('kernel = "mesh_mlo_1d"\nwiring = "bogus"', "unknown wiring 'bogus'"),
    ('kernel = "mesh_mlo_1d"\nwiring = "no/such.toml"', "does not exist"),
    ('kernel = "mesh_mlo_1d"\ncubes = 99', "do not fit the system"),
    ('kernel = "mesh_mlo_1d"\nargs = { nope = 1 }', "has no parameter(s) nope"),
    ('kernel = "mesh_mlo_1d"\nsystem = "4x4"', "malformed system"),
])
def test_a_case_that_cannot_launch_is_a_bad_file(tmp_path: Path, extra: str, needle: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before anything is proved, so CI fails in seconds, naming the case."""
    text = f'[[case]]\nname = "a"\n{extra}\nexpect = "proved"\n'
    line = gate_error(write(tmp_path, text), capsys)
    assert needle in line


def test_paths_are_relative_to_the_matrix_file(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # not the matrix's directory
    matrix = load_matrix(DATA / "real.toml")
    pair = matrix.cases[0]
    assert pair.kernel == "kernels/user_kernels.py::pair_decode"
    assert pair.launch.kernel == \
        f"{(DATA / 'kernels' / 'user_kernels.py').resolve()}::pair_decode"
    ref, launch = resolve_case(pair)
    assert ref.func.__name__ == "pair_decode"
    assert launch.spec.pes == 2


def test_full_case_record(tmp_path: Path) -> None:
    wiring = tmp_path / "w" / "two.toml"
    wiring.parent.mkdir()
    wiring.write_text('[[link]]\nfrom = [0, 0]\ndir = "E"\nto = [0, 1]\n'
                      '[[link]]\nfrom = [0, 1]\ndir = "W"\nto = [0, 0]\n')
    path = write(tmp_path, '''
[[case]]
name = "2d-2x4-at-8"
kernel = "mesh_mlo_2d"
wiring = "cube_mesh"
system = "2x4x4"
pes = 8
cubes = 8
cube_start = 8
queue_depth = 3
args = { S_q = 1, S_kv_per_rank = 16, d_head = 8, mesh_rows = 2, mesh_cols = 4 }
sharded = "k_ptr, v_ptr"
timeout = 5
rlimit = 1000
expect = ["exactly_once_merge", "deadlock_freedom"]

[[case]]
name = "own-wiring"
kernel = "mesh_mlo_1d"
wiring = "w/two.toml"
pes = 2
expect = "proved"
''')
    first, second = load_matrix(path).cases
    assert first == GateCase(
        name="2d-2x4-at-8", kernel="mesh_mlo_2d",
        violated=(Property.DEADLOCK_FREEDOM, Property.EXACTLY_ONCE_MERGE),  # canonical order
        written=LaunchOptions(
            kernel="mesh_mlo_2d", wiring="cube_mesh", system=System(2, 4, 4, 8), pes=8,
            cubes=8, cube_start=8, queue_depth=3,
            args=(("S_kv_per_rank", 16), ("S_q", 1), ("d_head", 8), ("mesh_cols", 4),
                  ("mesh_rows", 2)),  # sorted
            sharded=("k_ptr", "v_ptr")), base=path.resolve().parent, timeout=5.0,
        rlimit=1000)
    spec = resolve_case(first)[1].spec
    assert (spec.system.shape_text, spec.cube_start, spec.n_cubes, spec.queue_depth) == \
        ("2x4x4", 8, 8, 3)
    assert spec.arg("cube_start") == 8  # filled from the launch
    assert (second.written.wiring, second.launch.wiring) == ("w/two.toml",
                                                             str(wiring.resolve()))
    assert resolve_case(second)[1].wiring.name != "pe_line"


def test_panel_shorthand_presets_the_launch(tmp_path: Path) -> None:
    path = write(tmp_path, '[[case]]\nname = "p"\npanel = "multi_user_decode"\n'
                           'queue_depth = 3\nexpect = "proved"\n')
    case = load_matrix(path).cases[0]
    assert case.kernel == "mesh_mlo_2d"
    spec = resolve_case(case)[1].spec
    assert (spec.wiring, spec.n_cubes, spec.queue_depth) == ("cube_mesh", 4, 3)
    assert spec.arg("S_q") == 1 and spec.arg("mesh_rows") == 1


def test_load_matrix_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key 'kernal'"):
        load_matrix(write(tmp_path, GOOD.replace("kernel", "kernal")))


def test_the_documented_example_matrix_parses(tmp_path: Path) -> None:
    """docs/ci.md shows a proofs.toml; it must stay valid against the strict parser."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "ci.md").read_text()
    block = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    cases = load_matrix(write(tmp_path, block)).cases
    assert [c.name for c in cases] == ["decode-line-8", "decode-2x4-at-cube-8",
                                       "recv-first-stays-caught", "panel"]
    assert cases[2].violated == (Property.DEADLOCK_FREEDOM, Property.EXACTLY_ONCE_MERGE,
                                 Property.ATTENTION_EQUIVALENCE)
    assert cases[2].expected_text == \
        "deadlock_freedom, exactly_once_merge, attention_equivalence"
    resolve_case(cases[3])


CASE = '[[case]]\nname = "a"\nkernel = "mesh_mlo_1d"\nexpect = "proved"\n'


def _gate(run_cli: RunCli, tmp_path: Path, text: str, *extra: str) -> Any:
    matrix = tmp_path / "proofs.toml"
    matrix.write_text(text, encoding="utf-8")
    return run_cli(["gate", str(matrix), "--no-cache", *extra])


@pytest.mark.parametrize(("edit", "needle"), [
    (("", 'sharded = []\n'), "sharded names no buffer"),
    (("", 'sharded = ""\n'), "sharded names no buffer"),
    (('"proved"', '"prooved"'), 'got \'prooved\'; did you mean "proved"?'),
    (('"proved"', '"deadlock_freedom"'),
     'a violated property goes in a list: expect = ["deadlock_freedom"]'),
    (('"mesh_mlo_1d"', '"mesh_mlo_1dd"'), "case #1 (a): unknown kernel 'mesh_mlo_1dd'"),
    (("", "args = { S_kv_per_rank = 16, S_kv_per_rnk = 8 }\n"),
     "case #1 (a): kernel mesh_mlo_1d has no parameter(s) S_kv_per_rnk"),
])
def test_gate_file_typos_are_one_line(run_cli: RunCli, tmp_path: Path,
                                      edit: tuple[str, str], needle: str) -> None:
    old, new = edit
    text = CASE.replace(old, new, 1) if old else CASE + new
    err = one_line_error(_gate(run_cli, tmp_path, text))
    assert needle in err


def test_an_empty_sharded_list_cannot_make_a_known_bad_kernel_pass(run_cli: RunCli,
                                                                  tmp_path: Path) -> None:
    text = CASE.replace("mesh_mlo_1d", "mesh_mlo_1d_forward_running_state") + "sharded = []\n"
    assert _gate(run_cli, tmp_path, text).code == 2


def test_a_panel_of_several_launches_is_one_deployment_its_keys_applied_to_each(
        tmp_path: Path) -> None:
    from meshproof.gate.matrix import resolve_case_launches

    path = tmp_path / "proofs.toml"
    path.write_text('[[case]]\nname = "b8"\npanel = "multi_user_decode"\nscale = "headline"\n'
                    'expect = "proved"\n\n[[case]]\nname = "one"\npanel = "multi_user_decode"\n'
                    'scale = "headline"\ncube_start = 8\nexpect = "proved"\n\n[[case]]\n'
                    'name = "changed"\npanel = "multi_user_decode"\nscale = "headline"\n'
                    'queue_depth = 5\nexpect = "proved"\n', encoding="utf-8")
    b8, one, changed = load_matrix(path).cases
    assert b8.is_deployment and not one.is_deployment
    assert [launch.spec.cube_start for _, launch in resolve_case_launches(b8).launches] == \
        [0, 8, 16, 24, 32, 40, 48, 56]
    assert len(resolve_case_launches(one).launches) == 1
    # the keys mean what they mean for the CLI's flags: applied to every launch
    assert {launch.spec.queue_depth for _, launch in resolve_case_launches(changed).launches} \
        == {5}
