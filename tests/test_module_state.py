"""model/module_state.py: every traced rank starts from the module's first state."""

from __future__ import annotations

from typing import Any

from meshproof.model.module_state import ModuleState


def test_rebound_added_and_mutated_globals_are_put_back() -> None:
    """Mistake caught: rank 0 caches itself as the head in a global; rank 1 must not see it."""
    table = [1, 2]
    ns: dict[str, Any] = {"HEAD": None, "seen": [], "memo": {}, "TABLE": table,
                          "flags": set(), "buf": bytearray(b"ab")}
    state = ModuleState(ns)
    ns["HEAD"] = 0
    ns["NEW"] = 1
    ns["seen"].append(0)
    ns["memo"]["k"] = 1
    ns["flags"].add("x")
    ns["buf"][0] = 0
    seen = ns["seen"]
    state.restore()
    assert ns["HEAD"] is None and "NEW" not in ns
    assert ns["seen"] == [] and ns["seen"] is seen  # the same list, emptied again
    assert ns["memo"] == {} and ns["flags"] == set() and ns["buf"] == bytearray(b"ab")
    assert ns["TABLE"] is table and table == [1, 2]


def test_read_only_globals_are_left_alone() -> None:
    """Correct idiom: constant tables and helper functions read by every rank."""
    table = (1, 2)
    ns: dict[str, Any] = {"TABLE": table, "SIZES": [4, 8], "helper": len}
    state = ModuleState(ns)
    state.restore()
    assert ns == {"TABLE": table, "SIZES": [4, 8], "helper": len}
