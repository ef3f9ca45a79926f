"""Hardware profile files: finite positive numbers and a one-line name."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import RunCli, one_line_error

from meshproof.errors import ConfigError
from meshproof.model.hardware import load_profile


def test_hardware_profile_rejects_non_finite_numbers_and_odd_names(tmp_path: Path) -> None:
    for text, fragment in (("gemm_flops_per_pe = nan", "positive number"),
                           ("[inter_cube]\nbandwidth_Bps = inf", "positive number"),
                           ("name = [1]", "one-line string")):
        path = tmp_path / "hw.toml"
        path.write_text(text + "\n")
        with pytest.raises(ConfigError, match=fragment):
            load_profile(path)


@pytest.mark.parametrize(("text", "needle"), [
    ("gemm_flops_per_pe = nan\n", "gemm_flops_per_pe must be a positive number (not nan or inf)"),
    ("dma_bandwidth_Bps = inf\n", "dma_bandwidth_Bps must be a positive number (not nan"),
    ("[inter_sip]\nlatency_s = inf\n", "inter_sip.latency_s must be a positive number"),
    ("gemm_flops_per_pe = -1e12\n", "gemm_flops_per_pe must be a positive number"),
    ("gemm_flop_per_pe = 1e12\n", "unknown key(s) gemm_flop_per_pe"),
    ("gemm_flops_per_pe = \n", "is not valid TOML"),
])
def test_bad_hardware_profiles_are_one_line(run_cli: RunCli, tmp_path: Path, text: str,
                                           needle: str) -> None:
    hw = tmp_path / "hw.toml"
    hw.write_text(text, encoding="utf-8")
    assert needle in one_line_error(run_cli(["simulate", "mesh_mlo_1d", "--hw", str(hw),
                                              "--json"]))
