"""`--launches FILE`: several launches in one TOML file, parsed strictly."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import TEST_DATA

from meshproof.deploy.launches import load_launches, panel_launches
from meshproof.errors import ConfigError, MeshproofError
from meshproof.model.schedule import GroupMode
from meshproof.panels import get_panel


def test_the_example_file_gives_two_launches_with_shared_keys() -> None:
    listed = load_launches(TEST_DATA / "two_batch_groups.toml")
    assert listed.name == "two_batch_groups"
    specs = [launch.spec for _, launch in listed.launches]
    assert [s.cube_start for s in specs] == [0, 8]
    assert all(s.kernel == "mesh_mlo_2d_batch" and s.n_cubes == 8 for s in specs)
    assert all(s.wiring == "cube_mesh_all_pes" and s.groups is GroupMode.PE for s in specs)
    assert dict(specs[1].args)["d_head"] == 8 and dict(specs[1].args)["cube_start"] == 8


def test_a_launch_overrides_the_file_defaults_and_merges_args(tmp_path: Path) -> None:
    path = tmp_path / "mixed.toml"
    path.write_text('kernel = "mesh_mlo_2d"\nmesh = "2x4"\n'
                    'args = { S_q = 1, S_kv_per_rank = 8, h_q = 1, h_kv = 1, d_head = 4 }\n'
                    '[[launch]]\ncube_start = 0\n'
                    '[[launch]]\nkernel = "mesh_kv_snake"\ncube_start = 8\n'
                    'args = { S_q = 2 }\ngroups = "launch"\nqueue_depth = 4\n',
                    encoding="utf-8")
    listed = load_launches(path)
    assert listed.name == "mixed"
    (_, a), (ref, b) = listed.launches
    assert ref.name == "mesh_kv_snake" and b.spec.harness.value == "prefill"
    assert dict(b.spec.args)["S_q"] == 2 and dict(b.spec.args)["d_head"] == 4
    assert a.spec.kernel == "mesh_mlo_2d"


@pytest.mark.parametrize(("text", "message"), [
    ('kernel = "mesh_mlo_2d"\n', "lists no launch; add [[launch]] tables"),
    ('kernal = "x"\n[[launch]]\n', "unknown top-level key(s) kernal"),
    ('[[launch]]\ncube_strat = 0\n',
     "launch #1: unknown launch key 'cube_strat' (did you mean 'cube_start'?); the launch "
     "keys: kernel,"),
    ('[[launch]]\ncube_start = 0\n', "launch #1: no kernel; give kernel = \"NAME\""),
    ('kernel = "mesh_mlo_2d"\n[[launch]]\ncube_start = "8"\n',
     "launch #1: cube_start must be an integer, got '8'"),
    ('kernel = "mesh_mlo_2d"\n[[launch]]\ngroups = "user"\n',
     "launch #1: groups must be one of launch, cube, pe, got 'user'"),
    ('kernel = "mesh_mlo_2d"\nargs = 3\n[[launch]]\n', "args must be a table of kernel arguments"),
    ('kernel = "mesh_mlo_2d"\n[[launch]]\nargs = { S_q = [1] }\n',
     "launch #1: args.S_q must be a number, boolean or string, got [1]"),
    ('kernel = "mesh_mlo_2d"\n[[launch]]\nsharded = []\n',
     "launch #1: sharded names no buffer; leave it out for the default k_ptr,v_ptr"),
    ('name = ""\nkernel = "mesh_mlo_2d"\n[[launch]]\n', "name must be a non-empty, one-line"),
    ('kernel = "mesh_mlo_2d"\n[[launch\n', "is not valid TOML"),
])
def test_bad_files_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_launches(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_missing_file_and_a_launch_that_does_not_fit(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"launches file .*nope\.toml does not exist"):
        load_launches(tmp_path / "nope.toml")
    path = tmp_path / "big.toml"
    path.write_text('kernel = "mesh_mlo_2d"\nmesh = "2x4"\n[[launch]]\ncube_start = 12\n',
                    encoding="utf-8")
    with pytest.raises(MeshproofError, match=r"cubes 12\.\.19 do not fit the system 1x4x4"):
        load_launches(path)


def test_a_panel_of_several_launches_gives_one_per_cube_start() -> None:
    listed = panel_launches(get_panel("multi_user_decode", "headline"), "headline")
    assert listed.name == "multi_user_decode (headline)"
    assert [la.spec.cube_start for _, la in listed.launches] == list(range(0, 64, 8))
    one = panel_launches(get_panel("multi_user_decode"), "validation")
    assert len(one.launches) == 1
