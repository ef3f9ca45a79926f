"""DESIGN §7: at 1M context ℓ can exceed float16's max (65504) when carried in f16.

The fan-out forwards single-rank partials, so a message's ℓ is one rank's key count under
uniform attention: 131072 keys per rank (1M context over 8 PEs) overflows, 16384 does not.
"""

from __future__ import annotations

import pytest

from meshproof.cli import main


def _simulate(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    rc = main(["simulate", "mesh_mlo_1d", "--inputs", "uniform", *extra])
    return rc, capsys.readouterr().out


def test_l_in_f16_overflows_at_131072_keys_per_rank(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _simulate(capsys, "--arg", "S_kv_per_rank=131072", "--arg", "msg_dtype='f16'")
    assert rc == 1
    assert "OUT OF TOLERANCE" in out


def test_l_in_f32_is_fine_at_131072_keys_per_rank(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _simulate(capsys, "--arg", "S_kv_per_rank=131072")
    assert rc == 0, out


def test_l_in_f16_is_fine_below_65504_keys_per_rank(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _simulate(capsys, "--arg", "S_kv_per_rank=16384", "--arg", "msg_dtype='f16'")
    assert rc == 0, out
