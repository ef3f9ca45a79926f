"""A tiny DOT writer: nested (cluster) subgraphs, nodes and edges with quoted attributes.

Deterministic by construction: statements come out in the order they were added.
Multi-line labels are lists of lines; `\\n` centres a line, `\\l` left-justifies it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Attrs = dict[str, str | int | float]


class Raw(str):
    """A DOT value already escaped and quoted (from `label_lines`): written verbatim."""

    __slots__ = ()


def quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def label_lines(lines: list[str] | tuple[str, ...], *, left: bool = False) -> Raw:
    """A multi-line DOT label: each line escaped, joined by centring or left breaks."""
    sep = "\\l" if left else "\\n"
    body = sep.join(_escape(line) for line in lines)
    return Raw('"' + body + (sep if left else "") + '"')


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _fmt_attrs(attrs: Attrs) -> str:
    if not attrs:
        return ""
    parts = []
    for key, value in attrs.items():
        if isinstance(value, Raw):
            parts.append(f"{key}={value}")
        elif isinstance(value, str):
            parts.append(f"{key}={quote(value)}")
        else:
            parts.append(f"{key}={value}")
    return " [" + ", ".join(parts) + "]"


@dataclass
class Graph:
    name: str
    attrs: Attrs = field(default_factory=dict)
    node_defaults: Attrs = field(default_factory=dict)
    edge_defaults: Attrs = field(default_factory=dict)
    statements: list[str | Graph] = field(default_factory=list)
    directed: bool = True

    def node(self, node_id: str, **attrs: str | int | float) -> None:
        self.statements.append(f"{quote(node_id)}{_fmt_attrs(attrs)};")

    def edge(self, tail: str, head: str, **attrs: str | int | float) -> None:
        arrow = "->" if self.directed else "--"
        self.statements.append(f"{quote(tail)} {arrow} {quote(head)}{_fmt_attrs(attrs)};")

    def subgraph(self, name: str, **attrs: str | int | float) -> Graph:
        sub = Graph(name, dict(attrs), directed=self.directed)
        self.statements.append(sub)
        return sub

    def same_rank(self, node_ids: list[str]) -> None:
        if node_ids:
            self.statements.append("{rank=same; " + " ".join(quote(n) for n in node_ids) + "}")

    def source(self, indent: int = 0, *, top: bool = True) -> str:
        pad = "  " * indent
        head = ("digraph " if self.directed else "graph ") if top else "subgraph "
        lines = [f"{pad}{head}{quote(self.name)} {{"]
        inner = pad + "  "
        for key, value in self.attrs.items():
            lines.append(f"{inner}{key}={_fmt_value(value)};")
        if self.node_defaults:
            lines.append(f"{inner}node{_fmt_attrs(self.node_defaults)};")
        if self.edge_defaults:
            lines.append(f"{inner}edge{_fmt_attrs(self.edge_defaults)};")
        for stmt in self.statements:
            if isinstance(stmt, Graph):
                lines.append(stmt.source(indent + 1, top=False))
            else:
                lines.append(inner + stmt)
        lines.append(pad + "}")
        return "\n".join(lines) + ("\n" if top else "")


def _fmt_value(value: str | int | float) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    return str(value)
