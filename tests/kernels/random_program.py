"""A kernel that runs a random send/recv program given as a JSON string (tests/randprog.py).

`prog` maps "cube,pe" to that rank's ops, each `[kind, dir, n, dtype]`: kind "s" sends a
loaded `(n,)` tensor of `dtype` towards `dir`, kind "r" receives an `(n,)` tensor of
`dtype` from `dir`. Ranks missing from `prog` run nothing. Going through this kernel makes
random programs take the real path: tracer -> schedule IR -> verify.
"""
from __future__ import annotations

import json
from typing import Any


def random_program(x_ptr: Any, prog: str, *, tl: Any) -> None:
    ops = json.loads(prog).get(f"{tl.program_id(axis=1)},{tl.program_id(axis=0)}", [])
    for kind, direction, n, dtype in ops:
        if kind == "s":
            tl.send(dir=direction, src=tl.load(x_ptr, shape=(n,), dtype=dtype))  # RANDOM-SEND
        else:
            tl.recv(dir=direction, shape=(n,), dtype=dtype)  # RANDOM-RECV
