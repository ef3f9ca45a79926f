"""The single-file HTML report (`meshproof report --html`): `report.html` beside README.md.

It is README.md as HTML (every section of the README, whatever it holds), with the
figures inlined as data URIs and every diagram the README links inlined as SVG, so its
tooltips work and nothing is fetched: the page opens offline, from a CI artifact or an
e-mail. Diagram links in the tables jump to the inline copy. Deterministic: the same
report directory gives the same bytes.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from meshproof.outputs import write_text
from meshproof.report import style
from meshproof.report.html_markdown import Inline, markdown_to_html

HTML_FILE = "report.html"
_IMAGE_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg"}

_CSS = """
:root { color-scheme: light; }
body { font-family: %(font)s; margin: 1.5rem 2rem; color: #1d1d1d; max-width: 110rem;
       line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.3rem; margin-top: 2rem; }
h3 { font-size: 1.05rem; }
code { font-family: "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: 0.9em;
       background: #f3f3f3; padding: 0 0.2em; border-radius: 3px; }
div.table { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #d0d0d0; padding: 0.2rem 0.45rem; text-align: left;
         vertical-align: top; }
/* long names (mesh_mlo_2d_batch_on_cube_mesh) break, so the kernel table fits a 1,400
   pixel window instead of scrolling sideways */
td { overflow-wrap: break-word; }
td code { font-size: 0.85em; }
th { background: #f2f2f2; position: sticky; top: 0; }
tbody tr:nth-child(even) { background: #fafafa; }
td strong { color: #b00000; }
img { max-width: 100%%; height: auto; border: 1px solid #e4e4e4; }
figure.diagram { margin: 1rem 0 2rem; }
figure.diagram figcaption { font-weight: bold; margin-bottom: 0.3rem; }
div.svg { overflow: auto; max-height: 85vh; border: 1px solid #d8d8d8; background: #fff; }
div.svg svg { display: block; }
nav.diagrams { columns: 3 18rem; font-size: 0.9rem; }
"""


def _prefix_ids(svg: str, prefix: str) -> str:
    """Ids unique across the page: every id, and every reference to one, gets `prefix`."""
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = re.sub(r'(xlink:href|href)="#([^"]+)"',
                 lambda m: f'{m.group(1)}="#{prefix}-{m.group(2)}"', svg)
    return re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}-{m.group(1)})", svg)


def inline_svg(svg: str, prefix: str) -> str:
    """An SVG file's markup as an element of an HTML page (no prolog, no doctype).

    graphviz writes a node's tooltip as `xlink:title` on a link; as a `<title>` child it
    is the tooltip every browser shows."""
    start = svg.find("<svg")
    body = svg[start:] if start >= 0 else svg
    body = re.sub(r"<!--.*?-->", "", body, flags=re.S)
    body = re.sub(r'<a xlink:title="([^"]*)">', r"<a><title>\1</title>", body)
    return _prefix_ids(body, prefix).strip()


def _data_uri(path: Path) -> str | None:
    kind = _IMAGE_TYPES.get(path.suffix.lower())
    if kind is None or not path.is_file():
        return None
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


class _Page:
    """Resolves the README's links and images against the report directory."""

    def __init__(self, report_dir: Path) -> None:
        self.dir = report_dir
        self.diagrams: dict[str, str] = {}     # README link target -> anchor id

    def anchor(self, target: str) -> str:
        name = Path(target).stem
        return "d-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name)

    def link(self, target: str, text: str) -> str:
        if target.startswith("diagrams/") and target.endswith(".svg") and \
                (self.dir / target).is_file():
            anchor = self.diagrams.setdefault(target, self.anchor(target))
            return f'<a href="#{anchor}">{text}</a>'
        return f'<a href="{html.escape(target)}">{text}</a>'

    def image(self, target: str, alt: str) -> str:
        uri = _data_uri(self.dir / target)
        if uri is None:
            return f'<span class="missing">[{html.escape(alt)}: {html.escape(target)} ' \
                   "not found]</span>"
        return f'<img src="{uri}" alt="{html.escape(alt)}">'

    def diagram_section(self) -> str:
        if not self.diagrams:
            return ""
        out = ['<h2 id="diagrams">Diagrams</h2>',
               "<p>Every diagram the tables link, inline (hover a node or an edge for its "
               "details). Faults are drawn in red; see each diagram's title and legend.</p>",
               '<nav class="diagrams"><ul>']
        out += [f'<li><a href="#{a}">{html.escape(Path(t).name)}</a></li>'
                for t, a in self.diagrams.items()]
        out.append("</ul></nav>")
        for target, anchor in self.diagrams.items():
            svg = (self.dir / target).read_text(encoding="utf-8")
            out.append(f'<figure class="diagram" id="{anchor}"><figcaption>'
                       f"{html.escape(Path(target).name)}</figcaption>"
                       f'<div class="svg">{inline_svg(svg, anchor)}</div></figure>')
        return "\n".join(out) + "\n"


def render_html(readme: str, report_dir: Path) -> str:
    """The page for `readme` (README.md's text), resolving files in `report_dir`."""
    page = _Page(report_dir)
    body = markdown_to_html(readme, Inline(link=page.link, image=page.image))
    title = re.search(r"^#\s+(.*)$", readme, flags=re.M)
    head_title = html.escape(title.group(1).strip() if title else "meshproof report")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{head_title}</title>\n<style>{_CSS % {'font': style.FONT_CSS}}</style>\n"
            "</head>\n<body>\n" + body + page.diagram_section() + "</body>\n</html>\n")


def write_html(report_dir: Path) -> Path:
    """Write `report_dir/report.html` from `report_dir/README.md`."""
    readme = (report_dir / "README.md").read_text(encoding="utf-8")
    path = report_dir / HTML_FILE
    write_text(path, render_html(readme, report_dir))
    return path
