"""meshproof/cli/pipes.py: a closed pipe (`meshproof verify ... | head -1`) keeps the
verdict's exit code, silently (issue 21, item 1); 1 would mean "violated"."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from meshproof.cli.pipes import pipe_safe_streams

RUN = "import sys; from meshproof.cli import entry; sys.argv[0] = 'meshproof'; entry()"


def _closed_reader(tmp_path: Path, *args: str) -> tuple[int, str]:
    """Run `meshproof ARGS` with a stdout whose reader has already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-c", RUN, *args], cwd=tmp_path, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write)
    return done.returncode, done.stderr


@pytest.mark.parametrize(("args", "code"), [
    (["list"], 0),
    (["verify", "mesh_mlo_2d", "--mesh", "2x4", "--tolerance", "0.1"], 0),
    (["trace", "mesh_mlo_2d", "--mesh", "2x4", "--json"], 0),
    (["verify", "mesh_mlo_1d_recv_first", "--only", "deadlock_freedom"], 1),
], ids=["list", "verify-proved", "trace-json", "verify-violated"])
def test_a_closed_pipe_keeps_the_exit_code(tmp_path: Path, args: list[str], code: int) -> None:
    got, err = _closed_reader(tmp_path, *args)
    assert (got, err) == (code, "")


def test_the_first_closed_write_drops_the_rest() -> None:
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    saved = sys.stdout
    sys.stdout = Closed()
    try:
        with pipe_safe_streams():
            assert sys.stdout.write("lost") == 4
            sys.stdout.flush()
            assert sys.stdout.write("also lost") == 9
    finally:
        sys.stdout = saved


def test_other_errors_still_raise() -> None:
    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

    saved = sys.stdout
    sys.stdout = Full()
    try:
        with pytest.raises(OSError, match="No space"), pipe_safe_streams():
            sys.stdout.write("x")
    finally:
        sys.stdout = saved
