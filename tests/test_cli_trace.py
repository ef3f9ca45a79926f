"""`meshproof list` and `meshproof trace`: outputs (goldens), JSON schema, bad input."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import TEST_KERNELS, CliResult, Golden, line_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshproof.kernels import BUILTIN_KERNELS
from meshproof.model.schedule import DType, OpKind
from meshproof.model.wiring import BUILTIN_WIRINGS
from meshproof.panels import ALL_PANEL_NAMES, PANEL_NAMES

Run = Callable[[Sequence[str]], CliResult]
BROKEN = "tests/kernels/broken.py"
OP_KINDS = {k.value for k in OpKind}
DTYPES = {d.value for d in DType}


def ok(result: CliResult) -> str:
    assert result.code == 0, result.err
    assert result.err == ""
    return result.out


def test_list_text_golden(run_cli: Run, golden: Golden) -> None:
    out = ok(run_cli(["list"]))
    for name in [*BUILTIN_KERNELS, *BUILTIN_WIRINGS, *ALL_PANEL_NAMES]:
        assert re.search(rf"^  {name} ", out, re.M), name
    golden("list.txt", out)


def test_list_json_schema(run_cli: Run, golden: Golden) -> None:
    out = ok(run_cli(["list", "--json"]))
    doc = json.loads(out)
    assert doc["schema"] == "meshproof/list-v1"
    assert [k["name"] for k in doc["kernels"]] == list(BUILTIN_KERNELS)
    for k in doc["kernels"]:
        assert set(k) == {"name", "description", "harness", "known_bad", "wiring"}
        assert k["description"] and "\n" not in k["description"]
        assert k["known_bad"] == k["description"].startswith("KNOWN BAD")
    assert [w["name"] for w in doc["wirings"]] == ["pe_line", "pe_ring", "cube_mesh",
                                                 "cube_mesh_all_pes", "cube_ring"]
    assert set(doc["panels"]) == {"validation", "headline"}
    for panels in doc["panels"].values():
        assert [p["name"] for p in panels] == list(ALL_PANEL_NAMES)
    assert out == json.dumps(doc, sort_keys=True, indent=2) + "\n"
    golden("list.json", out)


def test_trace_text_golden(run_cli: Run, golden: Golden) -> None:
    out = ok(run_cli(["trace", "mesh_mlo_1d", "--arg", "n_ranks=3"]))
    assert out.startswith("mesh_mlo_1d on pe_line (1x4x4), cubes 0..0 x 8 PEs; groups: launch; "
                          "3 of 8 ranks "
                          "run ops\n")
    assert out.count("(cube 0, pe ") == 3
    golden("trace_mesh_mlo_1d_n3.txt", out)


def check_schedule_json(doc: dict[str, Any]) -> None:
    """The schedule-v1 shape every consumer relies on."""
    assert doc["schema"] == "meshproof/schedule-v1"
    assert set(doc) == {"schema", "launch", "ranks"}
    assert set(doc["launch"]) == {"kernel", "kernel_file", "wiring", "system", "pes", "cubes",
                                  "cube_start", "args", "queue_depth", "sharded", "harness",
                                  "groups", "outputs", "softmax_scale", "empty_shards"} | \
        ({"mask"} if "mask" in doc["launch"] else set())
    eps = [(r["cube"], r["pe"]) for r in doc["ranks"]]
    assert eps == sorted(eps) and len(set(eps)) == len(eps)
    for rank in doc["ranks"]:
        assert set(rank) == {"cube", "pe", "ops"} and rank["ops"]
        for i, op in enumerate(rank["ops"]):
            assert op["index"] == i
            assert op["kind"] in OP_KINDS and op["dtype"] in DTYPES
            assert all(isinstance(d, int) and d >= 0 for d in op["shape"])
            assert re.fullmatch(r"[^:]+\.py:[1-9]\d*", op["source"]), op["source"]
            for arg in op["args"]:
                assert set(arg) in ({"value"}, {"const"})
            if op["kind"] in ("send", "recv"):
                assert op["dir"] in ("E", "W", "N", "S") and op["bytes"] > 0
            else:
                assert "dir" not in op and "bytes" not in op
            assert ("out" in op) == (op["kind"] not in ("send", "store"))


def test_trace_json_schema(run_cli: Run) -> None:
    out = ok(run_cli(["trace", "mesh_mlo_2d", "--mesh", "2x2", "--cube-start", "4", "--json"]))
    doc = json.loads(out)
    check_schedule_json(doc)
    # rank_axis=1: PEs other than 0 return at once and are left out
    assert [(r["cube"], r["pe"]) for r in doc["ranks"]] == [(4, 0), (5, 0), (6, 0), (7, 0)]
    assert doc["launch"]["args"]["cube_start"] == 4
    assert doc["launch"]["args"]["mesh_rows"] == 2


def test_trace_json_golden_of_a_kernbench_kernel(run_cli: Run, golden: Golden) -> None:
    out = ok(run_cli(["trace", "tests/kernels/kernbench_style.py::line_allreduce_kernel",
                      "--pes", "2", "--arg", "rows=1", "--arg", "cols=2", "--json"]))
    check_schedule_json(json.loads(out))
    golden("trace_kernbench_style_2pe.json", out)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(BUILTIN_KERNELS)), n=st.integers(2, 4),
       s_q=st.integers(1, 2))
def test_trace_json_bytes_are_deterministic(run_cli: Run, name: str, n: int, s_q: int) -> None:
    args = ["trace", name, "--arg", f"S_q={s_q}", "--json"]
    if BUILTIN_KERNELS[name].mask is not None:   # causal: one sequence, zigzag chunks of 2
        args[2:4] = ["--arg", f"S_q={2 * s_q}", "--arg", f"S_kv_per_rank={2 * s_q}"]
    if BUILTIN_KERNELS[name].mesh is not None:   # a sub-mesh kernel
        args += ["--mesh", f"1x{n}"]
    else:
        args += ["--arg", f"n_ranks={n}"]
    first, second = run_cli(args), run_cli(args)
    assert first.code == second.code == 0
    assert first.out == second.out
    check_schedule_json(json.loads(first.out))


def test_trace_seed_kernel_via_cli(run_cli: Run, seeds_dir: Path) -> None:
    out = ok(run_cli(["trace", f"{seeds_dir}/attention_mesh_mlo.py::attention_mesh_mlo_kernel",
                      "--wiring", "pe_line", "--pes", "8", "--arg", "n_ranks=8",
                      "--arg", "rank_axis=0", "--arg", "S_q=1", "--arg", "h_q=1",
                      "--arg", "h_kv=1", "--arg", "S_kv_per_rank=16", "--arg", "d_head=8",
                      "--json"]))
    doc = json.loads(out)
    check_schedule_json(doc)
    assert len(doc["ranks"]) == 8
    comm = [op for r in doc["ranks"] for op in r["ops"] if op["kind"] in ("send", "recv")]
    assert len(comm) == 336
    assert all(op["source"].endswith(tuple(f"attention_mesh_mlo.py:{n}" for n in range(1, 200)))
               for op in comm)


@pytest.mark.parametrize("panel", PANEL_NAMES)
def test_trace_panels_validation(run_cli: Run, panel: str) -> None:
    out = ok(run_cli(["trace", "--panel", panel, "--json"]))
    check_schedule_json(json.loads(out))


# --- bad input: exactly one line on stderr, exit code 2, no traceback -----------------------

BAD_INPUTS: list[tuple[str, list[str], str]] = [
    # id, argv, a fragment the message must contain
    ("mesh_malformed", ["trace", "mesh_mlo_1d", "--mesh", "2x"], "malformed mesh '2x'"),
    ("unknown_kernel", ["trace", "mesh_mlo_3d"], "unknown kernel 'mesh_mlo_3d'"),
    ("path_without_function", ["trace", BROKEN], f"write {BROKEN}::function_name"),
    ("missing_function", ["trace", f"{BROKEN}::nope"], "has no function 'nope'"),
    ("empty_function", ["trace", f"{BROKEN}::"], "empty function name"),
    ("not_a_kernel", ["trace", f"{BROKEN}::no_tl_function"], "takes no `tl` parameter"),
    ("missing_file", ["trace", "tests/kernels/nope.py::k"], "does not exist"),
    ("not_python", ["trace", "tests/data/asymmetric.toml::k"], "not a Python source file"),
    ("unknown_wiring", ["trace", "mesh_mlo_1d", "--wiring", "bogus"], "unknown wiring 'bogus'"),
    ("missing_wiring_file", ["trace", "mesh_mlo_1d", "--wiring", "tests/data/nope.toml"],
     "does not exist"),
    ("asymmetric_wiring", ["trace", "mesh_mlo_1d", "--wiring", "tests/data/asymmetric.toml"],
     "is not symmetric"),
    ("invalid_wiring_toml", ["trace", "mesh_mlo_1d", "--wiring", "tests/data/invalid.toml"],
     "is not valid TOML"),
    ("kernel_raises", ["trace", f"{BROKEN}::raises_kernel"],
     "rank (cube 0, pe 2): error: the kernel raised ValueError: rank 2 has no KV slice"),
    ("data_in_if", ["trace", f"{BROKEN}::data_if_kernel"],
     "uses a tensor's value as a condition"),
    ("data_in_compare", ["trace", f"{BROKEN}::data_compare_kernel"], "compares tensor data (>)"),
    ("data_as_shape", ["trace", f"{BROKEN}::data_shape_kernel"], "uses a tensor's value as an int"),
    ("unsupported_op", ["trace", f"{BROKEN}::unsupported_op_kernel"],
     "tl.cumsum is not supported"),
    ("tensor_indexing", ["trace", f"{BROKEN}::indexing_kernel"], "indexing or slicing a tensor"),
    ("bad_shape", ["trace", f"{BROKEN}::bad_shape_kernel"], "shape must hold non-negative ints"),
    ("bad_dtype", ["trace", f"{BROKEN}::bad_dtype_kernel"], "unknown dtype 'f64'"),
    ("dot_mismatch", ["trace", f"{BROKEN}::dot_mismatch_kernel"], "inner dimensions 3 and 4"),
    ("negative_offset", ["trace", f"{BROKEN}::negative_offset_kernel"], "negative offset"),
    ("mutated_handle", ["trace", f"{BROKEN}::mutate_handle_kernel"], "assigning 'shape'"),
    ("multiline_message", ["trace", f"{BROKEN}::multiline_message_kernel"],
     "RuntimeError: first line second line"),
    ("missing_kernel_arg", ["trace", f"{BROKEN}::needs_arg_kernel"],
     "needs argument(s) width: pass --arg width=VALUE"),
    ("unknown_kernel_arg", ["trace", "mesh_mlo_1d", "--arg", "nranks=4"],
     "has no parameter(s) nranks"),
    ("arg_without_value", ["trace", "mesh_mlo_1d", "--arg", "n_ranks"], "is not NAME=VALUE"),
    ("arg_list_value", ["trace", "mesh_mlo_1d", "--arg", "n_ranks=[1]"], "only numbers"),
    ("pointer_as_arg", ["trace", "mesh_mlo_1d", "--arg", "q_ptr=0"],
     "buffers that meshproof provides"),
    ("bad_rank_axis", ["trace", "mesh_mlo_1d", "--arg", "rank_axis=2"],
     "rank_axis must be 0 (PEs) or 1 (cubes), got 2"),
    ("system_zero", ["trace", "mesh_mlo_1d", "--system", "0x4x4"],
     "system n_sips must be a positive integer, got 0"),
    ("system_malformed", ["trace", "mesh_mlo_1d", "--system", "4x4"], "malformed system '4x4'"),
    ("system_absurd", ["trace", "mesh_mlo_1d", "--system", "100x100x100"],
     "system has 1000000 cubes, more than the supported 4096"),
    ("cubes_absurd", ["trace", "mesh_mlo_1d", "--cubes", "100000"],
     "--cubes 100000 is out of range 1..4096"),
    ("cubes_do_not_fit", ["trace", "mesh_mlo_1d", "--cubes", "8", "--cube-start", "12"],
     "cubes 12..19 do not fit the system 1x4x4"),
    ("pes_absurd", ["trace", "mesh_mlo_1d", "--pes", "5000"], "out of range 1..1024"),
    ("pes_zero", ["trace", "mesh_mlo_1d", "--pes", "0"], "--pes 0 is out of range 1..1024"),
    ("queue_depth_negative", ["trace", "mesh_mlo_1d", "--queue-depth", "-1"],
     "--queue-depth -1 is out of range 0..65536"),
    ("pes_not_int", ["trace", "mesh_mlo_1d", "--pes", "x"], "--pes must be an integer, got 'x'"),
    ("unknown_option", ["trace", "mesh_mlo_1d", "--bogus"], "No such option '--bogus'"),
    ("unknown_panel", ["trace", "--panel", "decode"], "unknown panel 'decode'"),
    ("unknown_scale", ["trace", "--panel", "single_user_decode", "--scale", "big"],
     "'big' is not one of 'validation', 'headline'"),
    ("no_kernel", ["trace"], "name a KERNEL"),
    ("unknown_command", ["tarce"], "No such command 'tarce'"),
]


def assert_one_line_bad_input(result: CliResult) -> str:
    assert result.code == 2, (result.code, result.out, result.err)
    assert result.out == ""
    assert "Traceback" not in result.err
    assert result.err.endswith("\n") and result.err.count("\n") == 1, result.err
    assert result.err.startswith("meshproof: error: ")
    return result.err


@pytest.mark.parametrize("argv,fragment", [(a, f) for _, a, f in BAD_INPUTS],
                         ids=[i for i, _, _ in BAD_INPUTS])
def test_bad_input_is_one_line_exit_2(run_cli: Run, argv: list[str], fragment: str) -> None:
    err = assert_one_line_bad_input(run_cli(argv))
    assert fragment in err


def test_bad_input_messages_golden(run_cli: Run, golden: Golden) -> None:
    lines = [f"{case}: {assert_one_line_bad_input(run_cli(argv))}"
             for case, argv, _ in BAD_INPUTS]
    golden("cli_bad_input.txt", "".join(lines))


@pytest.mark.parametrize("kernel,marker", [
    ("raises_kernel", "RAISE-LINE"), ("data_if_kernel", "DATA-IF-LINE"),
    ("data_compare_kernel", "DATA-COMPARE-LINE"), ("data_shape_kernel", "DATA-SHAPE-LINE"),
    ("unsupported_op_kernel", "UNSUPPORTED-LINE"), ("indexing_kernel", "INDEX-LINE"),
    ("bad_shape_kernel", "BAD-SHAPE-LINE"), ("bad_dtype_kernel", "BAD-DTYPE-LINE"),
    ("dot_mismatch_kernel", "DOT-MISMATCH-LINE"), ("negative_offset_kernel", "NEG-OFFSET-LINE"),
    ("mutate_handle_kernel", "MUTATE-LINE"), ("multiline_message_kernel", "MULTILINE-LINE"),
])
def test_kernel_errors_name_file_line_and_rank(run_cli: Run, kernel: str, marker: str) -> None:
    err = assert_one_line_bad_input(run_cli(["trace", f"{BROKEN}::{kernel}"]))
    line = line_of(TEST_KERNELS / "broken.py", marker)
    pe = 2 if kernel == "raises_kernel" else 0
    assert err.startswith(f"meshproof: error: {BROKEN}:{line}: rank (cube 0, pe {pe}): error: ")


def test_kernel_file_that_fails_to_import(run_cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad_import.py"
    bad.write_text("import math\n\nSCALE = math.sqrt(-1)\n\n\ndef k(x_ptr, *, tl):\n    pass\n")
    err = assert_one_line_bad_input(run_cli(["trace", f"{bad}::k"]))
    assert err == (f"meshproof: error: {bad}:3: importing the kernel file raised ValueError: "
                   "math domain error\n")
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def k(x_ptr, *, tl):\n    return (\n")
    err = assert_one_line_bad_input(run_cli(["trace", f"{syntax}::k"]))
    assert err.startswith(f"meshproof: error: {syntax}:2: syntax error: ")


def test_version_and_help_exit_0(run_cli: Run) -> None:
    result = run_cli(["--version"])
    assert result.code == 0 and result.out.startswith("meshproof, version ")
    result = run_cli(["trace", "--help"])
    assert result.code == 0 and "--cube-start" in result.out and "--arg NAME=VALUE" in result.out
