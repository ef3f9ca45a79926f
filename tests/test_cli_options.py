"""Launch flags shared by the commands (cli/options.py): values, agreement, bad input."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from helpers import TEST_KERNELS, RunCli, assert_bad_input, kernel_spec, line_of

from meshproof.cli import main
from meshproof.cli.options import parse_arg
from meshproof.errors import TraceBudgetExceeded
from meshproof.gate.pipeline import Pipeline
from meshproof.model.launch import Launch
from meshproof.model.loader import KernelRef
from meshproof.model.schedule import Schedule
from meshproof.panels import panel_input_bound


def test_mesh_and_cubes_must_agree(run_cli: RunCli) -> None:
    assert_bad_input(run_cli(["trace", "mesh_mlo_2d", "--mesh", "2x4", "--cubes", "4"]),
                     "--mesh 2x4 launches 8 cubes but --cubes says 4; drop --cubes")
    assert run_cli(["trace", "mesh_mlo_2d", "--mesh", "2x4", "--cubes", "8"]).code == 0
    assert_bad_input(run_cli(["trace", "--panel", "multi_user_decode", "--cubes", "8"]),
                     "cubes 8 disagrees with panel multi_user_decode's 1x4 mesh",
                     "give mesh RxC (--mesh)")
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
                     "--pes 0 is out of range 1..1024: launch at least one PE per cube (cubes "
                     "have 8 PEs, or N when --pes N is more)")
    # --wiring "" silently fell back to the kernel's default wiring.
    assert_bad_input(run_cli(["trace", "mesh_mlo_1d", "--wiring", ""]),
                     "--wiring must be a non-empty string, got ''")
    assert_bad_input(run_cli(["trace", "--panel", "single_user_decode", "--wiring", ""]),
                     "--wiring must be a non-empty string, got ''")


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("false", False), ("null", None), (" 4 ", 4), ("-inf", -math.inf),
    ("'16'", "16"), ('"x y"', "x y"), ("16", 16), ("a=b", "a=b"), ("", ""),
])
def test_arg_values(text: str, value: object) -> None:
    # `--arg flag=false` used to be the truthy string "false"; " 4" the string " 4".
    assert parse_arg(f"flag={text}") == ("flag", value)
    assert math.isnan(float(parse_arg("x=nan")[1] or 0))


# --- the silent choices of issue 10, item 7 ------------------------------------------------

def test_an_argument_given_twice_is_an_error(run_cli: RunCli) -> None:
    # The last one silently won.
    assert_bad_input(run_cli(["trace", "mesh_mlo_1d", "--arg", "S_q=1", "--arg", "S_q=2"]),
                     "--arg S_q is given twice ('S_q=1' and 'S_q=2'); pass each kernel "
                     "argument once")
    assert run_cli(["trace", "mesh_mlo_1d", "--arg", "S_q=1", "--arg", "h_q=8"]).code == 0


def test_a_kernel_and_a_panel_naming_another_kernel_is_an_error(run_cli: RunCli) -> None:
    # The KERNEL argument silently replaced the panel's kernel.
    assert_bad_input(run_cli(["trace", "mesh_kv", "--panel", "single_user_decode"]),
                     "kernel mesh_kv and panel single_user_decode (kernel mesh_mlo_1d) both "
                     "choose the kernel; drop the kernel to run mesh_mlo_1d, or drop the panel")
    # naming the panel's own kernel chooses nothing
    assert run_cli(["trace", "mesh_mlo_1d", "--panel", "single_user_decode"]).code == 0


@pytest.mark.parametrize("command", ["trace", "verify", "simulate"])
def test_sharded_naming_no_buffer_is_an_error(run_cli: RunCli, command: str) -> None:
    # Was accepted, leaving exactly-once merging nothing to count (spec/gate.md says exit 2).
    for text in ("", ",", " , "):
        assert_bad_input(run_cli([command, "mesh_mlo_1d", "--sharded", text]),
                         "--sharded names no buffer; leave it out for the default "
                         "k_ptr,v_ptr")


def test_pes_past_eight_widens_the_cubes_as_the_message_says(run_cli: RunCli) -> None:
    res = run_cli(["trace", "mesh_mlo_1d", "--pes", "16", "--json"])
    assert res.code == 0
    launch = json.loads(res.out)["launch"]
    assert launch["pes"] == 16
    assert_bad_input(run_cli(["trace", "mesh_mlo_1d", "--pes", "1025"]),
                     "--pes 1025 is out of range 1..1024")
    assert "PEs launched per cube, 1..1024" in run_cli(["trace", "--help"]).out


# --- trace limits (issue 10, item 3): every command traces in a child process ----------

ENDLESS = kernel_spec("runaway.py::endless")


@pytest.mark.parametrize("command", ["trace", "verify", "simulate"])
def test_a_never_ending_host_loop_ends_within_its_limit(run_cli: RunCli, command: str) -> None:
    start = time.monotonic()
    res = run_cli([command, ENDLESS, "--pes", "1", "--trace-timeout", "1"])
    assert time.monotonic() - start < 1 + 5
    line = line_of(TEST_KERNELS / "runaway.py", "# ENDLESS")
    assert_bad_input(res, f"tests/kernels/runaway.py:{line}: rank (cube 0, pe 0): error: "
                          f"tracing {ENDLESS} did not finish within its wall-clock limit of "
                          "1 s; make the kernel's host loops end, or raise the limit with "
                          "--trace-timeout SECONDS")


def _over_budget(kernel: KernelRef, launch: Launch) -> Schedule:
    raise TraceBudgetExceeded("tracing built-in kernel mesh_mlo_1d (4 ranks) did not finish "
                              "within its wall-clock limit of 60 s (...): no verdict (unknown)")


@pytest.mark.parametrize("command", ["trace", "verify", "simulate"])
def test_a_built_in_trace_past_its_limit_exits_3_unknown(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Mistake caught: a correct built-in launch that outlasts its trace limit exited 2,
    "bad input"; it is unknown (exit 3), the message saying so."""
    assert main([command, "mesh_mlo_1d"], pipeline=Pipeline(tracer=_over_budget)) == 3
    err = capsys.readouterr().err
    assert "meshproof: error: tracing built-in kernel mesh_mlo_1d" in err
    assert "no verdict (unknown)" in err


def test_a_kernel_file_whose_top_level_never_ends_is_stopped(run_cli: RunCli,
                                                             tmp_path: Path) -> None:
    """The file is imported in a child first: its top-level loop never reaches meshproof's
    own process."""
    kernel = tmp_path / "loops_at_import.py"
    kernel.write_text("n = 0\nwhile n >= 0:\n    n += 1\n\n\n"
                      "def k(x_ptr, o_ptr, *, tl):\n"
                      "    tl.store(o_ptr, tl.load(x_ptr, shape=(4,), dtype='f16'))\n",
                      encoding="utf-8")
    start = time.monotonic()
    res = run_cli(["verify", f"{kernel}::k", "--trace-timeout", "1"])
    assert time.monotonic() - start < 1 + 5
    assert_bad_input(res, f"{kernel}:2: error: importing kernel file {kernel} did not finish "
                          "within its wall-clock limit of 1 s; make its top-level code end, "
                          "or raise the limit with --trace-timeout SECONDS")


def test_trace_limits_are_checked_and_documented(run_cli: RunCli) -> None:
    assert_bad_input(run_cli(["verify", "mesh_mlo_1d", "--trace-timeout", "0"]),
                     "Invalid value for '--trace-timeout'")
    assert_bad_input(run_cli(["verify", "mesh_mlo_1d", "--trace-timeout", "inf"]),
                     "the trace's wall-clock limit must be a positive number of seconds, got "
                     "inf (--trace-timeout SECONDS)")
    assert_bad_input(run_cli(["trace", "mesh_mlo_1d", "--trace-memory", "0"]),
                     "Invalid value for '--trace-memory'")
    for command in ("trace", "verify", "simulate", "report", "gate"):
        text = " ".join(run_cli([command, "--help"]).out.split())
        assert "--trace-timeout SECONDS" in text and "[default: 60" in text, command
        assert "--trace-memory MIB" in text and "[default: 4096" in text, command


def test_the_input_bound_defaults_to_the_panels() -> None:
    assert panel_input_bound(None, None) == 16.0
    assert panel_input_bound("multi_user_decode", "validation") == 16.0
    assert panel_input_bound("multi_user_decode", "headline") == 4.0
