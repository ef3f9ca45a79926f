"""The `synthesized` key of a matrix case: regenerate the case's kernel with `meshproof
synthesize` (the case's launch, the default profile, the latency objective) and compare
the bytes with the committed file, the way `make demo` reproduces reports/. A committed
kernel edited by hand, or one a changed synthesiser would now write differently, fails the
case with the file and the command that regenerates it."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from meshproof.errors import ConfigError
from meshproof.gate.matrix import GateCase
from meshproof.model.loader import KernelRef
from meshproof.synth.regen import command_text, synthesize_for


def stale_kernel(case: GateCase, resolver: Callable[[str], KernelRef]) -> str | None:
    """Why the case's committed kernel is not what synthesize writes now, or None."""
    written_kernel = case.written.kernel or case.kernel
    file_part = written_kernel.rpartition("::")[0]
    path = Path(file_part) if case.base is None else case.base / file_part
    # the docstring records the wiring as written: relative to the matrix file's folder
    result, _ = synthesize_for(replace(case.launch, kernel=None), resolver,
                               written=replace(case.written, kernel=None))
    try:
        committed = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"case {case.name}: cannot read {file_part}: {exc.strerror}; "
                          "write it with meshproof synthesize") from None
    fresh = result.kernel_text.encode("utf-8")
    if committed == fresh:
        return None
    line = _first_difference(committed, fresh)
    where = ""
    if case.base is not None and case.base.resolve() != Path.cwd().resolve():
        rel = os.path.relpath(case.base)
        where = f"cd {case.base if rel.startswith('..') else rel} && "
    return (f"synthesized: {file_part} is not what meshproof synthesize writes for this "
            f"case's launch (first difference at line {line}); regenerate it: {where}"
            f"{command_text(case.written, file_part)}")


def _first_difference(a: bytes, b: bytes) -> int:
    """The 1-based line of the first byte where `a` and `b` differ."""
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
             min(len(a), len(b)))
    return a[:n].count(b"\n") + 1
