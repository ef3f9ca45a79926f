"""Hardware profile files: finite positive numbers and a one-line name."""

from __future__ import annotations

from pathlib import Path

import pytest

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
