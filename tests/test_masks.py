"""Masks a launch declares (model/masks.py): parsing, predicates and positions; the masked
float64 reference (sim/reference.py); --mask on the CLI and the gate key."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import RunCli, assert_bad_input, kernel_spec, trace_kernel
from hypothesis import given, settings
from hypothesis import strategies as st

from meshproof.errors import ConfigError, LaunchError
from meshproof.gate.matrix import parse_case
from meshproof.model.masks import Layout, Mask, MaskKind, block_positions
from meshproof.model.problem import attention_problem
from meshproof.sim.api import simulate
from meshproof.sim.reference import dense_reference, masked_reference


@pytest.mark.parametrize(("text", "mask"), [
    ("causal", Mask(MaskKind.CAUSAL)),
    ("causal:2", Mask(MaskKind.CAUSAL, 2)),
    ("causal:-1", Mask(MaskKind.CAUSAL, -1)),
    ("window:4", Mask(MaskKind.WINDOW, 4)),
    ("padding:10", Mask(MaskKind.PADDING, 10)),
    ("causal@zigzag", Mask(MaskKind.CAUSAL, 0, Layout.ZIGZAG)),
    ("window:3@striped", Mask(MaskKind.WINDOW, 3, Layout.STRIPED)),
])
def test_masks_parse_and_print_as_written(text: str, mask: Mask) -> None:
    assert Mask.parse(text) == mask and mask.text == text


@pytest.mark.parametrize(("text", "why"), [
    ("wind:3", "is not a mask: write causal"), ("window", "window needs its size"),
    ("padding:0", "must be at least 1"), ("causal@rows", "unknown layout @rows"),
    ("", "is not a mask"),
])
def test_a_bad_mask_is_one_clear_error(text: str, why: str) -> None:
    with pytest.raises(LaunchError, match=why):
        Mask.parse(text)


def test_the_predicates_allow_what_the_issue_says() -> None:
    q, k = np.arange(6), np.arange(6)
    causal = Mask.parse("causal").allowed(q, k)
    assert (causal == (k[None, :] <= q[:, None])).all()
    assert (Mask.parse("causal:1").allowed(q, k) == (k[None, :] <= q[:, None] + 1)).all()
    window = Mask.parse("window:2").allowed(q, k)
    assert window.sum(axis=1).tolist() == [1, 2, 2, 2, 2, 2] and window[3, 2] and window[3, 3]
    pad = Mask.parse("padding:4").allowed(q, k)
    assert pad.shape == (6, 6) and (pad.sum(axis=1) == 4).all() and not pad[:, 4:].any()


def test_zigzag_positions_hold_chunks_b_and_2n_minus_1_minus_b() -> None:
    n, rows = 4, 6
    blocks = [block_positions(Layout.ZIGZAG, b, n, rows) for b in range(n)]
    assert blocks[0].tolist() == [0, 1, 2, 21, 22, 23]
    assert blocks[3].tolist() == [9, 10, 11, 12, 13, 14]
    assert sorted(np.concatenate(blocks).tolist()) == list(range(n * rows))
    with pytest.raises(LaunchError, match="even S_q"):
        block_positions(Layout.ZIGZAG, 0, n, 5)


def test_striped_positions_hold_every_nth_position() -> None:
    n, rows = 4, 3
    blocks = [block_positions(Layout.STRIPED, b, n, rows) for b in range(n)]
    assert blocks[0].tolist() == [0, 4, 8] and blocks[3].tolist() == [3, 7, 11]
    assert sorted(np.concatenate(blocks).tolist()) == list(range(n * rows))
    assert block_positions(Layout.STRIPED, 1, n, 5).tolist() == [1, 5, 9, 13, 17]


def test_the_problem_gives_each_group_its_positions_and_allowed_keys() -> None:
    schedule = trace_kernel("ring_prefill_causal_zigzag")
    problem = attention_problem(schedule)
    assert problem.mask == Mask.parse("causal@zigzag")
    queries, keys = problem.positions(0)
    assert queries.tolist() == keys.tolist() and sorted(keys.tolist()) == list(range(64))
    allowed = problem.allowed(0)
    assert allowed is not None and allowed.shape == (64, 64)
    assert (allowed.sum(axis=1) == queries + 1).all()    # causal: positions 0..q
    assert attention_problem(trace_kernel("mesh_kv")).allowed(0) is None
    q1, k1 = problem.rank_positions(1)                    # rank 1: chunks 1 and 14 of 4
    assert q1 is not None and k1 is not None
    assert q1.tolist() == k1.tolist() == [4, 5, 6, 7, 56, 57, 58, 59]


def test_the_masked_reference_is_softmax_over_the_allowed_keys() -> None:
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((n, 2, 4)) for n in (5, 7, 7))
    allowed = rng.random((5, 7)) < 0.5
    allowed[:, 0] = True
    allowed[4] = False                                   # a query that sees no key
    got = masked_reference(q, k, v, 0.5, allowed)
    for t in range(4):
        keys = np.flatnonzero(allowed[t])
        want = dense_reference(q[t:t + 1], k[keys], v[keys], 0.5)
        assert np.allclose(got[t], want[0], rtol=1e-12, atol=1e-12)
    assert (got[4] == 0).all()
    every = masked_reference(q, k, v, 0.5, np.ones((5, 7), bool))
    assert np.allclose(every, dense_reference(q, k, v, 0.5), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("command", ["simulate", "verify", "trace"])
def test_a_bad_mask_on_the_cli_is_one_line_and_exit_2(run_cli: RunCli, command: str) -> None:
    assert_bad_input(run_cli([command, "ring_prefill_causal_naive", "--mask", "window:x"]),
                     "--mask 'window:x' is not a mask")


def test_the_launch_json_carries_the_mask_only_when_declared() -> None:
    assert trace_kernel("ring_prefill_causal_naive").launch.to_json()["mask"] == "causal"
    assert "mask" not in trace_kernel("mesh_kv").launch.to_json()
    assert trace_kernel("ring_prefill_causal_naive", mask="none").launch.mask is None
    spec = trace_kernel(kernel_spec("masked.py::decode_padding"), pes=1).launch
    assert spec.mask == Mask.parse("padding:10")      # the kernel's meshproof_mask


def test_the_gate_takes_a_mask_key() -> None:
    case = parse_case({"name": "c", "kernel": "ring_prefill_causal_naive", "expect": "proved",
                       "mask": "window:3"}, Path("."), "case #1")
    assert case.written.mask == Mask.parse("window:3") and case.to_json()["mask"] == "window:3"
    with pytest.raises(ConfigError, match="case #1 \\(c\\): --mask 'wnd' is not a mask"):
        parse_case({"name": "c", "kernel": "mesh_kv", "expect": "proved", "mask": "wnd"},
                   Path("."), "case #1")


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["causal", "window", "padding"]), size=st.integers(-3, 12),
       layout=st.sampled_from(["", "@zigzag", "@striped"]), blocks=st.integers(1, 4),
       half=st.integers(1, 3), seed=st.integers(0, 2 ** 16))
def test_the_masked_reference_over_random_masks_and_layouts(kind: str, size: int,
                                                            layout: str, blocks: int,
                                                            half: int, seed: int) -> None:
    """Dense masked attention at the layout's positions equals, row by row, the softmax
    over the keys the predicate allows, by brute force over positions."""
    if kind != "causal":
        size = max(1, size)
    text = kind if kind == "causal" and size == 0 else f"{kind}:{size}"
    mask = Mask.parse(text + layout)
    rows = 2 * half
    pos = np.concatenate([block_positions(mask.layout, b, blocks, rows)
                          for b in range(blocks)])
    assert sorted(pos.tolist()) == list(range(blocks * rows))
    allowed = mask.allowed(pos, pos)
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((blocks * rows, 1, 3)) for _ in range(3))
    got = masked_reference(q, k, v, 0.7, allowed)
    for r, p in enumerate(pos.tolist()):
        keys = [j for j, kp in enumerate(pos.tolist())
                if (kp <= p + mask.param if kind == "causal" else
                    p - mask.param < kp <= p if kind == "window" else kp < mask.param)]
        if not keys:
            assert (got[r] == 0).all()
            continue
        want = dense_reference(q[r:r + 1], k[keys], v[keys], 0.7)
        assert np.allclose(got[r], want[0], rtol=1e-12, atol=1e-12)


@settings(max_examples=6, deadline=None)
@given(pad=st.integers(1, 16), window=st.integers(1, 16))
def test_the_simulator_evaluates_where_comparisons_and_positions(pad: int, window: int) -> None:
    """A kernel masking with tl.where on tl.arange positions is in tolerance against the
    masked reference its launch declares, and out of it against another."""
    padded = trace_kernel(kernel_spec("masked.py::decode_padding"), pes=1,
                          args=(("pad", pad),), mask=f"padding:{pad}")
    assert simulate(padded).ok
    windowed = trace_kernel(kernel_spec("masked.py::decode_window"), pes=1,
                            args=(("window", window),), mask=f"window:{window}")
    assert simulate(windowed).ok
    if window < 16:
        wrong = trace_kernel(kernel_spec("masked.py::decode_window"), pes=1,
                             args=(("window", window),), mask=f"window:{window + 1}")
        assert not simulate(wrong).ok
