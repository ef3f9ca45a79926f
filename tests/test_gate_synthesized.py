"""gate/synthesized.py, the `synthesized` key of a matrix case: the gate regenerates the
committed kernel with `meshproof synthesize` and fails the case, naming the file and the
command that regenerates it, when the bytes differ."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import REPO_ROOT, RunCli, one_line_error

from meshproof.errors import ConfigError
from meshproof.gate.matrix import load_matrix
from meshproof.kernels import resolve_kernel
from meshproof.synth.regen import command_text, synthesize_for

EXAMPLE = REPO_ROOT / "examples" / "synthesized_2x4.py"
CASE = ('[[case]]\nname = "synth"\nkernel = "synthesized_2x4.py::synthesized"\n'
        'wiring = "cube_mesh"\nmesh = "2x4"\nsynthesized = true\nexpect = "proved"\n')


def _matrix(tmp_path: Path, body: str = CASE) -> Path:
    shutil.copy(EXAMPLE, tmp_path / EXAMPLE.name)
    path = tmp_path / "proofs.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_the_committed_example_is_what_synthesize_writes(run_cli: RunCli,
                                                          tmp_path: Path) -> None:
    """The correct idiom: the file synthesize wrote, committed unchanged, is proved and
    regenerates to the same bytes; the case's JSON says it is a synthesised one."""
    res = run_cli(["gate", str(_matrix(tmp_path)), "--no-cache", "--json"])
    assert res.code == 0, res.out + res.err
    (row,) = json.loads(res.out)["cases"]
    assert row["status"] == "met" and row["reasons"] == []
    assert row["case"]["synthesized"] is True


def test_a_kernel_edited_by_hand_fails_with_the_file_and_the_command(
        run_cli: RunCli, tmp_path: Path) -> None:
    """A realistic mistake: the docstring's note touched up by hand still proves (the
    verdict alone would pass), but the file is no longer the synthesiser's output: the
    case fails, naming the file, the first differing line and the command to regenerate
    it."""
    path = _matrix(tmp_path)
    kernel = tmp_path / EXAMPLE.name
    text = kernel.read_text(encoding="utf-8")
    edited = text.replace("predicted latency: 6.307 us", "predicted latency: 6.0 us", 1)
    assert edited != text
    kernel.write_text(edited, encoding="utf-8")
    junit = tmp_path / "gate.xml"
    res = run_cli(["gate", str(path), "--no-cache", "--junit", str(junit)])
    assert res.code == 1, res.out + res.err
    root = ET.parse(junit).getroot()
    failure = root.find(".//testcase[@name='synthesized']/failure")
    assert failure is not None and "synthesized_2x4.py is not what" in (failure.text or "")
    assert root.get("failures") == "1"   # every property still proved
    flat = " ".join(res.out.split())
    assert ("synthesized: synthesized_2x4.py is not what meshproof synthesize writes for "
            "this case's launch (first difference at line 8); regenerate it: cd "
            f"{tmp_path} && meshproof synthesize --wiring cube_mesh --mesh 2x4 --out "
            "synthesized_2x4.py") in flat


def test_the_regenerate_command_writes_the_committed_bytes() -> None:
    """The command the failure names is the one that reproduces the file."""
    case = load_matrix(REPO_ROOT / "proofs.toml")
    (synth,) = [c for c in case.cases if c.synthesized]
    assert command_text(synth.written, "examples/synthesized_2x4.py") == (
        "meshproof synthesize --wiring cube_mesh --mesh 2x4 --out "
        "examples/synthesized_2x4.py")
    result, _ = synthesize_for(synth.written, resolve_kernel)
    assert result.kernel_text == EXAMPLE.read_text(encoding="utf-8")


@pytest.mark.parametrize("body", [
    CASE.replace("synthesized_2x4.py::synthesized", "mesh_mlo_2d"),
    CASE.replace("synthesized = true", "synthesized = 1"),
])
def test_the_key_needs_a_synthesised_kernel_and_a_boolean(run_cli: RunCli, tmp_path: Path,
                                                          body: str) -> None:
    res = run_cli(["gate", str(_matrix(tmp_path, body)), "--no-cache"])
    err = one_line_error(res)
    assert ("synthesized = true needs kernel = \"FILE.py::synthesized\"" in err or
            "synthesized must be a boolean (true/false), got 1" in err), err
    with pytest.raises(ConfigError):
        load_matrix(tmp_path / "proofs.toml")
