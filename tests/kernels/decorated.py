"""A kernel wrapped by a decorator that lives in another file."""

from __future__ import annotations

from typing import Any

from misbehaving import traced_twice


@traced_twice
def decorated(x_ptr: Any, o_ptr: Any, *, tl: Any) -> None:
    x = tl.load(x_ptr, shape=(4,), dtype="f32")  # DECORATED-LOAD
    tl.store(o_ptr, x)
