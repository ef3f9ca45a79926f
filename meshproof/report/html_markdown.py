"""The markdown the report writes, as HTML: headings, paragraphs, bullet lists, pipe
tables, images, links, `code`, **bold** and *emphasis* — the subset `markdown.py` (and
any section added to the README) uses. Everything else is text, escaped.

The HTML page is built from README.md rather than beside it, so every section the README
gains appears in the page without a second writer. Links and images go through
`Resolver` callbacks: the page inlines images and points diagram links at inline SVGs.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field

Resolver = Callable[[str, str], str]   # (target, text) -> HTML


def _default_link(target: str, text: str) -> str:
    return f'<a href="{html.escape(target)}">{text}</a>'


def _default_image(target: str, alt: str) -> str:
    return f'<img src="{html.escape(target)}" alt="{html.escape(alt)}">'


@dataclass(slots=True)
class Inline:
    link: Resolver = _default_link
    image: Resolver = _default_image
    anchors: dict[str, int] = field(default_factory=dict)

    def render(self, text: str) -> str:
        """Inline markdown to HTML: code spans first (their content is literal)."""
        out: list[str] = []
        pos = 0
        for m in re.finditer(r"`([^`]*)`", text):
            out.append(self._spans(text[pos:m.start()]))
            out.append(f"<code>{html.escape(m.group(1))}</code>")
            pos = m.end()
        out.append(self._spans(text[pos:]))
        return "".join(out)

    def _spans(self, text: str) -> str:
        out: list[str] = []
        pos = 0
        for m in re.finditer(r"(!?)\[([^\]]*)\]\(([^)\s]*)\)", text):
            out.append(_emphasis(text[pos:m.start()]))
            label = _emphasis(m.group(2))
            if m.group(1):
                out.append(self.image(m.group(3), m.group(2)))
            else:
                out.append(self.link(m.group(3), label))
            pos = m.end()
        out.append(_emphasis(text[pos:]))
        return "".join(out)


def _emphasis(text: str) -> str:
    escaped = html.escape(text.replace("\\|", "|"), quote=False)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", escaped)


def slug(text: str, used: dict[str, int]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
    n = used.get(base, 0)
    used[base] = n + 1
    return base if n == 0 else f"{base}-{n}"


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def _is_rule(line: str) -> bool:
    return bool(re.fullmatch(r"\|?(\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*\|?", line.strip()))


def _breakable(cell: str) -> str:
    """Code in a table cell may wrap after an underscore (`mesh_mlo_2d_batch_on_cube_mesh`),
    so a wide table fits its window instead of scrolling sideways."""
    return re.sub(r"<code>(.*?)</code>",
                  lambda m: "<code>" + m.group(1).replace("_", "_<wbr>") + "</code>", cell)


def _table(lines: list[str], inline: Inline) -> str:
    head, rows = _cells(lines[0]), [_cells(x) for x in lines[2:]]
    out = ['<div class="table"><table>', "<thead><tr>"]
    out += [f"<th>{inline.render(c)}</th>" for c in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{_breakable(inline.render(c))}</td>" for c in row)
                   + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def markdown_to_html(text: str, inline: Inline | None = None) -> str:
    """The body HTML of a markdown document (block structure, then inline spans)."""
    inl = inline or Inline()
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        heading = re.match(r"(#{1,6})\s+(.*)", line)
        if heading:
            level, title = len(heading.group(1)), heading.group(2).strip()
            out.append(f'<h{level} id="{slug(title, inl.anchors)}">{inl.render(title)}'
                       f"</h{level}>")
            i += 1
            continue
        if line.lstrip().startswith("|") and i + 1 < len(lines) and _is_rule(lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            out.append(_table(lines[i:j], inl))
            i = j
            continue
        if re.match(r"\s*[-*]\s+", line):
            items = []
            while i < len(lines) and re.match(r"\s*[-*]\s+", lines[i]):
                items.append(re.sub(r"^\s*[-*]\s+", "", lines[i]))
                i += 1
            out.append("<ul>\n" + "\n".join(f"<li>{inl.render(t)}</li>" for t in items)
                       + "\n</ul>")
            continue
        para = []
        while i < len(lines) and lines[i].strip() and not re.match(r"#{1,6}\s|\s*[-*]\s+",
                                                                    lines[i]) \
                and not lines[i].lstrip().startswith("|"):
            para.append(lines[i].strip())
            i += 1
        if not para:  # a stray table-looking line without a rule: keep it as text
            para.append(lines[i].strip())
            i += 1
        out.append(f"<p>{inl.render(' '.join(para))}</p>")
    return "\n".join(out) + "\n"
