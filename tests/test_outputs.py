"""Every output path follows one rule and is written atomically (meshproof/outputs.py).

The rule: the path is not a directory, and the nearest existing ancestor of its
directory is a writable directory; missing directories are created. It is checked before
any work, so a bad path is one line and exit 2, and nothing is left behind.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from helpers import CliResult, one_line_error

from meshproof.cli import main
from meshproof.errors import OutputError
from meshproof.gate.pipeline import Pipeline
from meshproof.model.launch import Launch
from meshproof.model.loader import KernelRef
from meshproof.model.schedule import Schedule
from meshproof.outputs import check_writable, check_writable_dir, write_bytes, write_text

# (command and kernel, the output flag, a file name the flag accepts)
WRITERS = [
    (["verify", "mesh_mlo_1d", "--queue-depth", "3", "--tolerance", "0.1"], "--smt2", "q.smt2"),
    (["verify", "mesh_mlo_1d", "--queue-depth", "3", "--tolerance", "0.1"], "--diagram",
     "d.dot"),
    (["simulate", "mesh_mlo_1d"], "--perfetto", "t.json"),
]


def _not_traced(kernel: KernelRef, launch: Launch) -> Schedule:
    raise AssertionError("traced although the output path cannot be written")


def _run(args: list[str], pipeline: Pipeline | None,
         capsys: pytest.CaptureFixture[str]) -> CliResult:
    capsys.readouterr()
    code = main(args, pipeline=pipeline)
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


@pytest.mark.parametrize(("command", "flag", "name"), WRITERS)
@pytest.mark.parametrize(("where", "needle"), [
    ("afile/{name}", "afile is a file, not a directory; pass another {flag} path"),
    ("afile/deeper/{name}", "afile is a file, not a directory"),
    ("adir", "is a directory"),
])
def test_a_path_that_cannot_work_fails_before_tracing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], flag: str,
        name: str, where: str, needle: str) -> None:
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    (tmp_path / "adir").mkdir()
    target = tmp_path / where.format(name=name)
    res = _run([*command, flag, str(target)], Pipeline(tracer=_not_traced), capsys)
    assert needle.format(flag=flag) in one_line_error(res)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]


@pytest.mark.parametrize(("command", "flag", "name"), WRITERS)
def test_missing_directories_are_created(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         command: list[str], flag: str, name: str) -> None:
    target = tmp_path / "new" / "deeper" / name
    res = _run([*command, flag, str(target)], None, capsys)
    assert res.code == 0, res.err
    assert target.is_file()
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".")] == []


def test_outputs_get_normal_permissions(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    old = os.umask(0o022)
    try:
        trace_path = tmp_path / "t.json"
        assert _run(["simulate", "mesh_mlo_1d", "--perfetto", str(trace_path)], None,
                    capsys).code == 0
        write_bytes(tmp_path / "x.bin", b"x")
        write_text(tmp_path / "y.txt", "y")
    finally:
        os.umask(old)
    for path in (trace_path, tmp_path / "x.bin", tmp_path / "y.txt"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path  # not mkstemp's 0600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_the_rule_as_a_library_call(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    check_writable(tmp_path / "a" / "b" / "c.xml", "--junit")  # missing: fine, created later
    with pytest.raises(OutputError, match=r"^cannot write the JUnit report .*afile is a file"):
        check_writable(tmp_path / "afile" / "c.xml", "--junit", what="the JUnit report ")
    with pytest.raises(OutputError, match=r"--diagram path .*\.pdf must end in \.svg or \.dot"):
        check_writable(tmp_path / "d.pdf", "--diagram", suffixes=(".svg", ".dot"))
    with pytest.raises(OutputError, match=r"cannot write .*: .*; pass a path in a writable"):
        write_bytes(tmp_path / "afile" / "x", b"")


def test_a_read_only_directory_is_refused_even_for_root(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(OutputError, match=r"locked is not writable; pass another --junit"):
            check_writable(locked / "j.xml", "--junit")
        with pytest.raises(OutputError, match=r"it is not writable; pass another --out"):
            check_writable_dir(locked, "--out")
    finally:
        locked.chmod(0o755)


def test_a_symbolic_link_is_followed_and_stays(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "j.xml").write_text("old", encoding="utf-8")
    link = tmp_path / "j.xml"
    link.symlink_to(tmp_path / "real" / "j.xml")
    check_writable(link, "--junit")
    write_text(link, "new")
    assert link.is_symlink() and (tmp_path / "real" / "j.xml").read_text() == "new"
    dangling = tmp_path / "d.xml"
    dangling.symlink_to(tmp_path / "real" / "later.xml")
    write_text(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "real" / "later.xml").read_text() == "made"
    dir_link = tmp_path / "out"
    dir_link.symlink_to(tmp_path / "real")
    assert check_writable_dir(dir_link, "--out") == (tmp_path / "real").resolve()
    with pytest.raises(OutputError, match=r"it is a directory"):
        check_writable(dir_link, "--junit")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.xml", "j.xml", "out", "real"]
