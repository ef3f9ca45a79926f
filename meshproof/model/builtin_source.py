"""Where `resolve_kernel` (model/loader.py) finds the built-in kernels, without the model
layer naming them.

The `meshproof` package declares the module that holds them (`declare`); that module
registers its resolver when it is imported (`register`). `resolver()` imports the declared
modules at the first look-up of a name, so that `import meshproof` (and with it
`meshproof --help`) does not pay for the kernels and what they import (numpy, the tracer).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

# A built-in kernel by its name (a model/loader.py KernelRef, which the loader checks),
# or None (then a kernel file, or unknown). Typed loosely here so that this module, which
# the `meshproof` package imports, imports nothing of the model layer.
BuiltinResolver = Callable[[str], object]

_DECLARED: list[str] = []
_REGISTERED: list[BuiltinResolver] = []


def declare(module: str) -> None:
    """`module`, once imported, registers the built-in kernels' resolver."""
    if module not in _DECLARED:
        _DECLARED.append(module)


def declared() -> tuple[str, ...]:
    """The declared modules, e.g. for a fork server to import before it forks."""
    return tuple(_DECLARED)


def register(resolver: BuiltinResolver) -> None:
    """Let `resolve_kernel` find built-in kernels by name (a declared module calls this)."""
    _REGISTERED[:] = [resolver]


def resolver() -> BuiltinResolver | None:
    """The registered resolver, importing the declared modules first if none is yet."""
    if not _REGISTERED:
        for module in _DECLARED:
            importlib.import_module(module)
    return _REGISTERED[0] if _REGISTERED else None
