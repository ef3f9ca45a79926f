"""Every rank sees the kernel's module as a PE of the machine does: in its first state.

Ranks are traced one after another in one interpreter, so a kernel that keeps state in a
module global (a cached "head" rank, a counter, a memo) would let one rank's run steer the
next one's, where on the machine every PE runs its own copy. The module's globals are
captured before the first rank and put back before each later one: names rebound or added
are restored or removed, and top-level lists, dicts, sets and bytearrays get their
contents back. State deeper than that (an attribute of an object, a list inside a list) is
not tracked (spec/tl.md §10).
"""

from __future__ import annotations

from typing import Any

_Contents = list[Any] | dict[Any, Any] | set[Any] | bytes


def _contents(value: object) -> _Contents | None:
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, set):
        return set(value)
    if isinstance(value, bytearray):
        return bytes(value)
    return None


def _same(now: object, saved: _Contents) -> bool:
    if isinstance(now, list) and isinstance(saved, list):
        return len(now) == len(saved) and all(a is b for a, b in zip(now, saved, strict=True))
    if isinstance(now, dict) and isinstance(saved, dict):
        return len(now) == len(saved) and all(k in now and now[k] is v
                                              for k, v in saved.items())
    if isinstance(now, bytearray) and isinstance(saved, bytes):
        return bytes(now) == saved
    return now == saved


class ModuleState:
    """The globals of one kernel module, to put back between ranks."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace
        self._bindings = dict(namespace)
        self._contents = {name: c for name, value in namespace.items()
                          if (c := _contents(value)) is not None}

    def restore(self) -> None:
        ns = self._namespace
        for name in [n for n in ns if n not in self._bindings]:
            del ns[name]
        for name, value in self._bindings.items():
            if ns.get(name, self) is not value:
                ns[name] = value
        for name, saved in self._contents.items():
            value = ns[name]
            if _same(value, saved):
                continue
            if isinstance(value, list | bytearray):
                value[:] = saved
            else:
                value.clear()
                value.update(saved)
