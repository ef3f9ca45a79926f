"""`meshproof simulate`: exit codes, JSON, Perfetto output, profiles."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    TEST_KERNELS,
    assert_bad_input,
    kernel_spec,
    line_of,
    one_line_error,
    trace_kernel,
)

from meshproof.cli import main
from meshproof.errors import HarnessError
from meshproof.sim.api import SimConfig, simulate

Run = Callable[[Sequence[str]], Any]
SEED_ARGS = ["--arg", "S_q=1", "--arg", "S_kv_per_rank=16", "--arg", "h_q=1", "--arg",
             "h_kv=1", "--arg", "d_head=8"]


def test_good_kernel_exits_0_with_a_table(run_cli: Run) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d"])
    assert res.code == 0, res.err
    assert "numerics (decode, normal inputs, seed 0, 1 group(s)): ok" in res.out
    assert "comm_steps 7" in res.out
    assert "op log: gemm 16, ipcq_send 168, ipcq_recv 168, dma_read 24, dma_write 8" in res.out


@pytest.mark.parametrize("kernel", ["mesh_mlo_1d_normalised_merge",
                                    "mesh_mlo_1d_forward_running_state"])
def test_broken_merges_exit_1(run_cli: Run, kernel: str) -> None:
    res = run_cli(["simulate", kernel])
    assert res.code == 1
    assert "OUT OF TOLERANCE" in res.out


def test_main_returns_the_code_in_process() -> None:
    assert main(["simulate", "mesh_mlo_1d_normalised_merge", "--json"]) == 1
    assert main(["simulate", "mesh_kv", "--inputs", "peaked", "--json"]) == 0


def test_seed_kernel_is_reported_out_of_tolerance(run_cli: Run, seeds_dir: Path) -> None:
    res = run_cli(["simulate", f"{seeds_dir / 'attention_mesh_mlo.py'}"
                   "::attention_mesh_mlo_kernel", *SEED_ARGS])
    assert res.code == 1, res.err
    assert "OUT OF TOLERANCE on 8 of 8 checked rank(s)" in res.out
    assert res.err == ""


def test_deadlock_is_refused_with_exit_1_naming_blocked_ranks(run_cli: Run) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d_recv_first"])
    assert res.code == 1
    assert res.out == ""
    lines = res.err.splitlines()
    assert len(lines) == 1
    assert "at queue depth 4, 8 rank(s) are blocked" in lines[0]
    assert "rank (cube 0, pe 1) at recv W" in lines[0]


def test_deadlock_advice_leads_with_the_op_no_rank_can_release(run_cli: Run) -> None:
    """Issue 28, item 5: the line merge whose PE 7 first sends north on pe_line deadlocks
    at every depth; the refusal starts with PE 7's send and its line, and does not
    suggest a deeper queue."""
    spec = f"{TEST_KERNELS / 'blocked_outputs.py'}::line_merge_north_first"
    res = run_cli(["simulate", spec])
    assert res.code == 1 and res.out == ""
    line = line_of(TEST_KERNELS / "blocked_outputs.py", "BLOCKS: no N link")
    assert res.err.startswith(
        f"meshproof: error: the schedule deadlocks at every queue depth: (cube 0, pe 7) is "
        f"blocked at tests/kernels/blocked_outputs.py:{line} (send N: pe_line has no N link "
        "here); no other rank can release it")
    assert "--queue-depth" not in res.err
    first = run_cli(["simulate", "mesh_mlo_1d_recv_first"])
    assert "wait-for cycle c0p0 -> c0p1 -> c0p0, which no queue depth breaks" in first.err
    assert "--queue-depth" not in first.err


def test_deadlock_advice_names_the_depth_that_removes_it(run_cli: Run) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d", "--queue-depth", "2"])
    assert res.code == 1
    assert res.err.startswith("meshproof: error: the schedule deadlocks at queue depth 2 and "
                              "completes from depth 3: raise --queue-depth to 3")


def test_deadlock_json_says_refused(run_cli: Run) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d", "--queue-depth", "2", "--json"])
    assert res.code == 1
    doc = json.loads(res.out)
    assert doc["ok"] is False and "deadlocks at queue depth 2" in doc["refused"]


def test_json_schema_and_determinism(run_cli: Run) -> None:
    first = run_cli(["simulate", "mesh_mlo_2d", "--mesh", "2x4", "--json", "--seed", "7"])
    second = run_cli(["simulate", "mesh_mlo_2d", "--mesh", "2x4", "--json", "--seed", "7"])
    assert first.code == second.code == 0
    assert first.out == second.out
    doc = json.loads(first.out)
    assert doc["schema"] == "meshproof/simulation-v1"
    assert set(doc) >= {"kernel", "launch", "numeric", "timing", "op_log", "ok"}
    assert set(doc["numeric"]) >= {"rel_err", "max_abs_err", "tolerance", "ok", "per_rank"}
    assert set(doc["timing"]) >= {"latency_s", "comm_steps", "critical_path", "per_rank",
                                  "bytes_per_link"}
    assert doc["timing"]["comm_steps"] == 4
    assert doc["op_log"] == {"gemm": 16, "ipcq_send": 96, "ipcq_recv": 96, "dma_read": 24,
                             "dma_write": 8}
    assert len(doc["numeric"]["per_rank"]) == 8
    assert first.out == json.dumps(doc, sort_keys=True, indent=2) + "\n"


def test_softmax_scale_and_seed_flags(run_cli: Run) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d", "--softmax-scale", "0.125", "--seed", "3",
                   "--json"])
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["launch"]["args"]["sm_scale"] == 0.125
    assert doc["numeric"]["softmax_scale"] == 0.125 and doc["numeric"]["seed"] == 3


def test_softmax_scale_sets_the_reference_of_any_kernel(run_cli: Run, seeds_dir: Path) -> None:
    """The seed kernel has no sm_scale parameter: --softmax-scale sets the reference."""
    res = run_cli(["simulate", f"{seeds_dir / 'attention_mesh_mlo.py'}"
                   "::attention_mesh_mlo_kernel", *SEED_ARGS, "--softmax-scale", "1.0"])
    assert res.code == 1, res.err   # the seed also normalises twice: still out of tolerance
    assert "softmax scale 1 (--softmax-scale 1)" in res.out


def test_the_numerics_header_names_the_reference_scale(run_cli: Run) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d"])
    assert res.code == 0, res.err
    assert "softmax scale 0.353553 (1/sqrt(d_head) = 1/sqrt(8)); change it with " \
        "--softmax-scale X" in res.out
    res = run_cli(["simulate", "mesh_mlo_1d", "--softmax-scale", "0.25"])
    assert res.code == 0, res.err   # the kernel's sm_scale parameter receives it
    assert "softmax scale 0.25 (--softmax-scale 0.25, which the kernel's sm_scale " \
        "receives)" in res.out
    res = run_cli(["simulate", "mesh_mlo_1d", "--arg", "sm_scale=1.0"])
    assert res.code == 0, res.err   # the kernel's own scale is the reference, said so
    assert "softmax scale 1 (the kernel's sm_scale = 1; not 1/sqrt(d_head) = 0.353553)" \
        in res.out


def test_perfetto_file_is_written(run_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    res = run_cli(["simulate", "ring_mlo", "--perfetto", str(out)])
    assert res.code == 0, res.err
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert sum(1 for e in doc["traceEvents"] if e["ph"] == "s") == 168


def test_perfetto_into_a_missing_directory_creates_it(run_cli: Run, tmp_path: Path) -> None:
    # the one output rule (tests/test_outputs.py): missing directories are created
    res = run_cli(["simulate", "mesh_mlo_1d", "--perfetto", str(tmp_path / "no" / "t.json")])
    assert res.code == 0, res.err
    assert (tmp_path / "no" / "t.json").is_file()


def test_hardware_profile_file(run_cli: Run, tmp_path: Path) -> None:
    hw = tmp_path / "hw.toml"
    hw.write_text('name = "slow noc"\n[intra_cube]\nlatency_s = 1e-5\n', encoding="utf-8")
    res = run_cli(["simulate", "mesh_mlo_1d", "--hw", str(hw), "--json"])
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["timing"]["profile"] == "slow noc"
    assert doc["timing"]["latency_s"] > 7e-5
    # the profile's queue depth is the default when --queue-depth is not given
    hw.write_text("ipcq_depth = 2\n", encoding="utf-8")
    assert run_cli(["simulate", "mesh_mlo_1d", "--hw", str(hw)]).code == 1
    assert run_cli(["simulate", "mesh_mlo_1d", "--hw", str(hw), "--queue-depth", "3"]).code == 0


def test_missing_profile_is_bad_input(run_cli: Run, tmp_path: Path) -> None:
    res = run_cli(["simulate", "mesh_mlo_1d", "--hw", str(tmp_path / "none.toml")])
    assert res.code == 2
    assert "does not exist" in res.err


def test_a_profile_path_that_is_a_directory_says_so(run_cli: Run, tmp_path: Path) -> None:
    # It said "does not exist" of a directory that does.
    assert_bad_input(run_cli(["simulate", "mesh_mlo_1d", "--hw", str(tmp_path)]),
                     f"hardware profile {tmp_path} is a directory; pass a TOML file")


RENAMED = "renamed_buffers.py"


def test_sharded_names_the_buffers_the_harness_fills(run_cli: Run) -> None:
    """A user kernel whose K/V buffers are kc_ptr, vc_ptr simulates with --sharded."""
    kernel = kernel_spec(f"{RENAMED}::decode_cache")
    res = run_cli(["simulate", kernel, "--sharded", "kc_ptr,vc_ptr", "--json"])
    assert res.code == 0, res.err
    numeric = json.loads(res.out)["numeric"]
    assert numeric["ok"] and numeric["harness"] == "decode"
    # without it the harness has no kc_ptr, and the message says what to pass
    err = one_line_error(run_cli(["simulate", kernel]))
    assert "load from kc_ptr, which the harness does not provide" in err
    assert "name the K and V buffers with --sharded" in err


def test_harness_option_chooses_the_harness(run_cli: Run) -> None:
    kernel = kernel_spec(f"{RENAMED}::prefill_cache")
    common = ["simulate", kernel, "--sharded", "kc_ptr,vc_ptr", "--pes", "4"]
    res = run_cli([*common, "--harness", "prefill"])
    assert res.code == 0, res.err
    assert "numerics (prefill, normal inputs, seed 0, 1 group(s)): ok" in res.out
    assert "numerics (decode, " in run_cli(common).out  # a user kernel's default
    # a built-in's own harness is the default, and the option overrides it
    res = run_cli(["simulate", "mesh_kv", "--harness", "decode", "--json"])
    assert json.loads(res.out)["numeric"]["harness"] == "decode"
    assert_bad_input(run_cli([*common, "--harness", "train"]), "Invalid value for '--harness'")


def test_panel_runs(run_cli: Run) -> None:
    res = run_cli(["simulate", "--panel", "single_user_prefill", "--json"])
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["numeric"]["harness"] == "prefill"
    assert doc["timing"]["comm_steps"] == 7


def test_negative_seed_is_bad_input(run_cli: Run) -> None:
    err = one_line_error(run_cli(["simulate", "mesh_mlo_1d", "--seed", "-1"]))
    assert "--seed" in err
    with pytest.raises(HarnessError, match="seed -1 is negative"):
        simulate(trace_kernel("mesh_mlo_1d"), SimConfig(seed=-1))


def test_simulate_json_is_byte_identical_across_runs(run_cli: Run) -> None:
    args = ["simulate", "--panel", "multi_user_prefill", "--inputs", "peaked", "--json"]
    first, second = run_cli(args), run_cli(args)
    assert first.code == 0 and first.out == second.out
    doc = json.loads(first.out)
    assert list(doc) == sorted(doc) and "seconds" not in first.out


@pytest.mark.parametrize(("args", "needle"), [
    (["--softmax-scale", "0", "--inputs", "peaked"], "peaked inputs need a non-zero softmax"),
    (["--softmax-scale", "nan"], "--softmax-scale must be a finite number, got nan"),
    (["--softmax-scale", "inf"], "--softmax-scale must be a finite number, got inf"),
])
def test_softmax_scales_the_harness_cannot_use_are_one_line(run_cli: Run, args: list[str],
                                                           needle: str) -> None:
    assert needle in one_line_error(run_cli(["simulate", "mesh_mlo_1d", *args]))


@pytest.mark.parametrize(("given", "names"), [
    (["--inputs", "peaked"], "--inputs builds"),
    (["--seed", "3"], "--seed builds"),
    (["--inputs", "normal", "--seed", "0"], "--inputs and --seed build"),
])
def test_numeric_options_with_no_numerics_are_refused(run_cli: Run, given: list[str],
                                                      names: str) -> None:
    # Were accepted and ignored; even the defaults, given by name, are a choice.
    assert_bad_input(run_cli(["simulate", "mesh_mlo_1d", "--no-numerics", *given]),
                     f"{names} the numeric check's inputs, which --no-numerics skips")

