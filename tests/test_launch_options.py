"""model/launch_options.py: one launch table, read by the four front ends alike.

The parity test: every launch key is accepted, with the same meaning (the same launches
built), by a CLI flag, a proof-matrix case, a launches-file entry and a `testing` keyword.
Adding a key to the table without a sample here, or to one front end only, fails."""

from __future__ import annotations

import typing
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from meshproof.cli.options import cli_launches, launch_options
from meshproof.deploy.launches import ENTRY_KEYS, expand, load_launches, resolve_launches
from meshproof.errors import ConfigError, LaunchError
from meshproof.gate.matrix import CASE_KEYS, parse_case, resolve_case_launches
from meshproof.model.launch_options import (
    KEY_NAMES,
    KEYS_BY_NAME,
    LAUNCH_KEYS,
    LaunchOptions,
)
from meshproof.model.masks import Mask, MaskKind
from meshproof.model.schedule import GroupMode, LaunchSpec
from meshproof.model.topology import Endpoint, System
from meshproof.testing import TESTING_KEYS, LaunchKeywords, _case

KERNEL = "mesh_mlo_1d"
# one sample per launch key: the keys that go with it (a kernel or a panel), as TOML values
SAMPLES: dict[str, dict[str, object]] = {
    "kernel": {"kernel": "mesh_mlo_2d", "mesh": "2x4"},
    "panel": {"panel": "multi_user_decode"},
    "scale": {"panel": "single_user_decode", "scale": "validation"},
    "system": {"kernel": KERNEL, "system": "2x4x4"},
    "pes": {"kernel": KERNEL, "pes": 4},
    "wiring": {"kernel": KERNEL, "wiring": "pe_ring"},
    "cubes": {"kernel": KERNEL, "cubes": 2},
    "cube_start": {"kernel": KERNEL, "cube_start": 3},
    "mesh": {"panel": "multi_user_decode", "mesh": "2x2"},
    "args": {"kernel": KERNEL, "args": {"S_q": 2}},
    "sharded": {"kernel": KERNEL, "sharded": ["v_ptr", "k_ptr"]},
    "queue_depth": {"kernel": KERNEL, "queue_depth": 3},
    "harness": {"kernel": KERNEL, "harness": "prefill"},
    "groups": {"kernel": KERNEL, "groups": "cube"},
    "outputs": {"kernel": KERNEL, "outputs": ["o_ptr"]},
    "softmax_scale": {"kernel": KERNEL, "softmax_scale": 0.5},
    "mask": {"kernel": KERNEL, "mask": "causal"},
    "empty_shards": {"kernel": KERNEL, "empty_shards": ["0,3"]},
}


def _argv(sample: dict[str, object]) -> list[str]:
    argv: list[str] = []
    for key, value in sample.items():
        row = KEYS_BY_NAME[key]
        if not row.flag:
            argv.insert(0, str(value))
        elif isinstance(value, dict):
            argv += [a for k, v in value.items() for a in (row.flag, f"{k}={v}")]
        elif isinstance(value, list) and row.repeatable:
            argv += [a for v in value for a in (row.flag, str(v))]
        elif isinstance(value, list):
            argv += [row.flag, ",".join(map(str, value))]
        else:
            argv += [row.flag, str(value)]
    return argv


def cli_options(argv: list[str]) -> LaunchOptions:
    """What the CLI's launch flags parse to (the same decorator every command uses)."""
    seen: list[LaunchOptions] = []

    @click.command()
    @launch_options
    def cmd(launch: LaunchOptions, launches_file: Path | None) -> None:
        seen.append(launch)

    result = CliRunner().invoke(cmd, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return seen[0]


def _toml(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return str(value)


def _specs(listed: typing.Any) -> list[LaunchSpec]:
    return [launch.spec for _, launch in listed.launches]


def test_every_key_has_a_sample_and_every_front_end_takes_it() -> None:
    assert sorted(SAMPLES) == sorted(KEY_NAMES)
    assert set(KEY_NAMES) <= set(CASE_KEYS)
    assert set(typing.get_type_hints(LaunchKeywords)) == set(TESTING_KEYS) == \
        set(KEY_NAMES) - {"kernel"}
    assert set(ENTRY_KEYS) | {"system"} == set(KEY_NAMES)

    @click.command()
    @launch_options
    def cmd(launch: LaunchOptions, launches_file: Path | None) -> None:
        """A command taking the launch flags."""

    assert {p.name for p in cmd.params} == {row.field for row in LAUNCH_KEYS} | \
        {"launches_file"}


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_a_key_means_the_same_in_all_four_front_ends(key: str, tmp_path: Path) -> None:
    sample = SAMPLES[key]
    parsed = LaunchOptions.from_mapping(sample, "sample")
    # CLI flags
    cli = cli_options(_argv(sample))
    assert cli == parsed
    want = _specs(cli_launches(cli, None))
    # a proof-matrix case
    case = parse_case({"name": "c", "expect": "proved", **sample}, tmp_path, "m: case #1")
    assert case.written == parsed
    assert _specs(resolve_case_launches(case)) == want
    # a launches-file entry (system sits at the file's top: one system per file)
    top = {k: v for k, v in sample.items() if k == "system"}
    entry = {k: v for k, v in sample.items() if k != "system"}
    path = tmp_path / "launches.toml"
    path.write_text("".join(f"{k} = {_toml(v)}\n" for k, v in top.items()) + "[[launch]]\n"
                    + "".join(f"{k} = {_toml(v)}\n" for k, v in entry.items()))
    assert _specs(load_launches(path)) == want
    # a testing keyword
    words = {k: v for k, v in sample.items() if k != "kernel"}
    kernel = typing.cast(str | None, sample.get("kernel"))
    tcase, _ = _case("t", kernel, (), False, words, 60.0, False, (None, None, None))
    assert _specs(resolve_case_launches(tcase)) == want


def test_panel_mesh_over_the_panel_in_every_front_end(tmp_path: Path) -> None:
    """The drift bug: `{panel = "multi_user_decode", mesh = "2x2"}` is a 2x2 mesh (it was
    1x4 in the gate, whose panel args kept mesh_rows=1, mesh_cols=4)."""
    case = parse_case({"name": "c", "expect": "proved", "panel": "multi_user_decode",
                       "mesh": "2x2"}, tmp_path, "m")
    (spec,) = _specs(resolve_case_launches(case))
    assert (spec.arg("mesh_rows"), spec.arg("mesh_cols"), spec.n_cubes) == (2, 2, 4)
    (cli,) = _specs(cli_launches(cli_options(["--panel", "multi_user_decode", "--mesh",
                                              "2x2"]), None))
    assert cli == spec


def test_from_mapping_refuses_unknown_keys_listing_the_known() -> None:
    with pytest.raises(ConfigError, match=r"^f.toml: case #2: unknown launch key 'meshh' "
                       r"\(did you mean 'mesh'\?\); the launch keys: kernel, panel"):
        LaunchOptions.from_mapping({"meshh": "2x2"}, "f.toml: case #2")
    with pytest.raises(ConfigError, match=r"^here: pes must be an integer, got '4'$"):
        LaunchOptions.from_mapping({"pes": "4"}, "here")
    with pytest.raises(ConfigError, match=r"^here: groups must be one of launch, cube, pe"):
        LaunchOptions.from_mapping({"groups": "all"}, "here")


def test_the_parsers_give_typed_values() -> None:
    opts = LaunchOptions.from_mapping(
        {"mask": "window:4@zigzag", "groups": "pe", "system": "2x4x4",
         "empty_shards": [[0, 3], "c1p2"], "args": {"b": 1, "a": True}}, "x")
    assert isinstance(opts.mask, Mask) and opts.mask.kind is MaskKind.WINDOW
    assert opts.groups is GroupMode.PE and opts.system == System(2, 4, 4, 8)
    assert opts.empty_shards == (Endpoint(0, 3), Endpoint(1, 2))
    assert opts.args == (("a", True), ("b", 1))
    assert LaunchOptions.from_mapping({"mask": "none"}, "x").mask == "none"
    assert LaunchOptions.from_mapping(opts.to_json(), "again") == opts


def test_overlay_given_fields_win_and_args_merge() -> None:
    base = LaunchOptions(kernel="k", pes=4, mesh="1x4", cubes=4,
                         args=(("S_q", 1), ("mesh_cols", 4), ("mesh_rows", 1)))
    top = LaunchOptions(pes=2, args=(("d_head", 8),))
    merged = base.overlay(top)
    assert merged.pes == 2 and merged.kernel == "k" and merged.cubes == 4
    assert dict(merged.args) == {"S_q": 1, "mesh_cols": 4, "mesh_rows": 1, "d_head": 8}
    remeshed = base.overlay(LaunchOptions(mesh="2x2"))
    assert remeshed.mesh == "2x2" and remeshed.cubes is None
    assert dict(remeshed.args) == {"S_q": 1}


def test_a_panel_and_a_contradicting_cube_count_or_kernel_are_refused() -> None:
    with pytest.raises(LaunchError, match="cubes 2 disagrees with panel multi_user_decode's "
                       "1x4 mesh"):
        expand(LaunchOptions(panel="multi_user_decode", cubes=2))
    with pytest.raises(LaunchError, match="both choose the kernel"):
        expand(LaunchOptions(panel="multi_user_decode", kernel="mesh_kv"))
    with pytest.raises(LaunchError, match="scale headline applies only to a panel"):
        expand(LaunchOptions(kernel=KERNEL, scale="headline"))


def test_resolution_returns_every_launch_of_a_panel_of_several() -> None:
    listed = resolve_launches(LaunchOptions(panel="multi_user_decode", scale="headline",
                                            queue_depth=3))
    assert [s.cube_start for s in _specs(listed)] == list(range(0, 64, 8))
    assert {s.queue_depth for s in _specs(listed)} == {3}
    one = resolve_launches(LaunchOptions(panel="multi_user_decode", scale="headline",
                                         cube_start=8))
    assert [s.cube_start for s in _specs(one)] == [8]


def test_every_row_has_a_flag_help_and_a_parser() -> None:
    for row in LAUNCH_KEYS:
        assert row.help.endswith(".") and row.key.isidentifier()
        assert row.flag == "" or row.flag.startswith("--")


def test_the_gate_json_schema_takes_every_launch_key() -> None:
    import json

    from meshproof.schemas import __file__ as schemas_init

    schema = json.loads((Path(schemas_init).parent / "gate-v2.json").read_text())
    assert set(KEY_NAMES) <= set(schema["$defs"]["case"]["properties"])
