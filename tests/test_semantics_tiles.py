"""Key tiles (verify/semantics/tiles.py): a block accumulated per key tile, then over the
tiles (fold_scores' key_tile, the causal built-ins' blocks wider than 4096 keys), is
proved like the untiled block; V tiles that do not match the weights' tiles are violated."""

from __future__ import annotations

import pytest
from helpers import kernel_spec, trace_kernel, verify_kernel

from meshproof.sim.api import simulate
from meshproof.verify.api import VerifyConfig, verify
from meshproof.verify.properties import Property
from meshproof.verify.result import Status
from meshproof.verify.semantics.guards import Guard
from meshproof.verify.semantics.index import BOUND, Aff
from meshproof.verify.semantics.tiles import tile_guard

AE, EO, NS = (Property.ATTENTION_EQUIVALENCE, Property.EXACTLY_ONCE_MERGE,
              Property.NUMERIC_SAFETY)


def test_a_tile_guard_keeps_exactly_its_tiles_rows() -> None:
    row = Aff(5, ((1, 1), (2, 4)))            # 5 + i + 4·t, i in [0, 4), t in [0, 3)
    made = tile_guard(row, frozenset({1}), 4, {1: 4, 2: 3})
    assert made is not None
    g, lo, hi = made
    assert (lo, hi) == (5, 17)
    for t in range(3):
        rows = [b for b in range(0, 20) if g.holds({BOUND: b, 2: t})]
        assert rows == list(range(5 + 4 * t, 9 + 4 * t))
    # a tile digit whose step is not the tile's extent is no tiling (gaps or overlaps)
    assert tile_guard(Aff(5, ((1, 1), (2, 3))), frozenset({1}), 4, {1: 4, 2: 3}) is None
    assert isinstance(g, Guard)


@pytest.mark.parametrize("name", ["ring_prefill_causal_naive", "ring_prefill_causal_striped"])
def test_a_ring_that_accumulates_per_key_tile_is_proved(name: str) -> None:
    r = {p.name: p for p in verify_kernel(name, args=(("key_tile", 4),)).properties}
    for prop in (AE, EO, NS):
        assert r[prop].status is Status.PROVED, (prop, r[prop].message)


def test_v_tiles_that_do_not_match_the_weights_tiles_are_violated() -> None:
    args = {"n_ranks": 8, "S_q": 8, "S_kv_per_rank": 8, "h_q": 1, "h_kv": 1, "d_head": 4}
    schedule = trace_kernel(kernel_spec("causal_mutants.py::ring_causal_strided_v_tiles"),
                            wiring="pe_ring", pes=8, harness="prefill",
                            args=tuple(args.items()), mask="causal")
    r = {p.name: p for p in verify(schedule, VerifyConfig(only=(AE, EO))).properties}
    assert r[AE].status is Status.VIOLATED, r[AE].message
    assert r[EO].status is Status.VIOLATED, r[EO].message
    assert not simulate(schedule).ok


def _million_keys_ns(key_tile: int) -> tuple[Status, str]:
    """numeric_safety of the naive ring on 2 ranks x 131,072 keys (a headline block) at
    |inputs| <= 4."""
    args = (("n_ranks", 2), ("S_q", 131072), ("S_kv_per_rank", 131072), ("h_q", 1),
            ("h_kv", 1), ("d_head", 128), ("key_tile", key_tile))
    r = verify_kernel("ring_prefill_causal_naive", VerifyConfig(only=(NS,), input_bound=4.0),
                      pes=2, args=args)
    (ns,) = r.properties
    return ns.status, ns.message


def test_a_headline_block_in_key_tiles_is_numerically_safe() -> None:
    status, message = _million_keys_ns(4096)
    assert status is Status.PROVED, message
    assert "rounding bound of the outputs" in message


def test_a_headline_block_in_one_dot_exceeds_the_tolerance() -> None:
    """131,072 keys accumulated in f32 in one dot: (n - 1)·u = 7.8e-3 for ℓ and for o."""
    status, message = _million_keys_ns(131072)
    assert status is Status.UNKNOWN
    assert "exceeds the tolerance 1e-2·max|V|" in message and "accumulation" in message
