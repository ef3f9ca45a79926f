"""The diagrams' DOT, built with the graphviz package (`graphviz.Digraph`, `graphviz.Graph`).

The package's graph objects hold the statements and render them (`render.py`); meshproof
fixes the spelling through the package's syntax hooks: every ID quoted, attributes in the
order given (separated by ", "), each statement ended by ";", two spaces per nesting
level, graph attributes one per line. Statements come out in the order they were added,
so a diagram is deterministic and the committed `.dot` files stay byte-identical.

A cluster (`subgraph`) can be filled after later statements of its parent were added: it
keeps its place in the parent's body and is spelled out when the source is read.
Multi-line labels are lists of lines; `\\n` centres a line, `\\l` left-justifies it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import graphviz

Attrs = dict[str, str | int | float]

if TYPE_CHECKING:
    # The spelling below is a mixin over the package's graph classes; for the type checker
    # it extends one of them (the package is untyped), so `super()` calls reach it.
    from graphviz import Digraph as _PackageGraph
else:
    _PackageGraph = object


class Raw(str):
    """A DOT value already escaped and quoted (from `label_lines`): written verbatim."""

    __slots__ = ()


def quote(text: str) -> str:
    return '"' + _escape(text) + '"'


def label_lines(lines: list[str] | tuple[str, ...], *, left: bool = False) -> Raw:
    """A multi-line DOT label: each line escaped, joined by centring or left breaks."""
    sep = "\\l" if left else "\\n"
    body = sep.join(_escape(line) for line in lines)
    return Raw('"' + body + (sep if left else "") + '"')


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _value(value: str | int | float) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    return str(value)


def _attr_list(attrs: Attrs | None) -> str:
    if not attrs:
        return ""
    return " [" + ", ".join(f"{key}={_value(value)}" for key, value in attrs.items()) + "]"


class _Cluster(str):
    """A subgraph's place in its parent's body (spelled out when the source is read)."""

    graph: Any


class _Spelling(_PackageGraph):
    """meshproof's DOT spelling, through the hooks the graphviz package's `Dot` calls."""

    _quote = staticmethod(quote)
    _quote_edge = staticmethod(quote)
    _tail = "}\n"

    @staticmethod
    def _node(left: str, right: str) -> str:
        return f"  {left}{right};\n"

    @staticmethod
    def _attr(left: str, right: str) -> str:
        return f"  {left}{right};\n"

    @staticmethod
    def _attr_list(label: str | None = None, kwargs: Attrs | None = None,
                   attributes: Attrs | None = None) -> str:
        return _attr_list({**({"label": label} if label is not None else {}),
                           **(kwargs or {}), **(attributes or {})})

    def node(self, node_id: str, **attrs: str | int | float) -> None:
        # through `_attributes`: the package's `label=` parameter would move the label first
        super().node(node_id, _attributes=attrs)

    def edge(self, tail: str, head: str, **attrs: str | int | float) -> None:
        super().edge(tail, head, _attributes=attrs)

    def subgraph(self, name: str, **attrs: str | int | float) -> Any:
        """A cluster at this point of the body, filled by the caller from now on."""
        child = type(self)(name=name, graph_attr=attrs)
        place = _Cluster(name)
        place.graph = child
        self.body.append(place)
        return child

    def same_rank(self, node_ids: list[str]) -> None:
        if node_ids:
            self.body.append("  {rank=same; " + " ".join(quote(n) for n in node_ids) + "}\n")

    def __iter__(self, subgraph: bool = False) -> Iterator[str]:
        head = "subgraph" if subgraph else ("digraph" if self.directed else "graph")
        yield f"{head} {quote(self.name)} {{\n"
        for key, value in self.graph_attr.items():
            yield f"  {key}={_value(value)};\n"
        for kw, attrs in (("node", self.node_attr), ("edge", self.edge_attr)):
            if attrs:
                yield self._attr(kw, _attr_list(attrs))
        for line in self.body:
            if isinstance(line, _Cluster):
                yield from (f"  {inner}" for inner in line.graph.__iter__(subgraph=True))
            else:
                yield line
        yield self._tail


class Digraph(_Spelling, graphviz.Digraph):
    """A directed diagram (the schedule's space-time diagram)."""

    @staticmethod
    def _edge(*, tail: str, head: str, attr: str) -> str:
        return f"  {tail} -> {head}{attr};\n"


class Graph(_Spelling, graphviz.Graph):
    """An undirected diagram (the topology)."""

    @staticmethod
    def _edge(*, tail: str, head: str, attr: str) -> str:
        return f"  {tail} -- {head}{attr};\n"
