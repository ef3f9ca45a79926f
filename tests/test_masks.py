"""Masks a launch declares (model/masks.py): parsing, predicates and positions; the masked
float64 reference (sim/reference.py); --mask on the CLI and the gate key."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import RunCli, assert_bad_input, kernel_spec, trace_kernel

from meshproof.errors import ConfigError, LaunchError
from meshproof.gate.matrix import parse_case
from meshproof.model.masks import Layout, Mask, MaskKind, block_positions
from meshproof.model.problem import attention_problem
from meshproof.sim.reference import dense_reference, masked_reference


@pytest.mark.parametrize(("text", "mask"), [
    ("causal", Mask(MaskKind.CAUSAL)),
    ("causal:2", Mask(MaskKind.CAUSAL, 2)),
    ("causal:-1", Mask(MaskKind.CAUSAL, -1)),
    ("window:4", Mask(MaskKind.WINDOW, 4)),
    ("padding:10", Mask(MaskKind.PADDING, 10)),
    ("causal@zigzag", Mask(MaskKind.CAUSAL, 0, Layout.ZIGZAG)),
])
def test_masks_parse_and_print_as_written(text: str, mask: Mask) -> None:
    assert Mask.parse(text) == mask and mask.text == text


@pytest.mark.parametrize(("text", "why"), [
    ("wind:3", "is not a mask: write causal"), ("window", "window needs its size"),
    ("padding:0", "must be at least 1"), ("causal@striped", "unknown layout @striped"),
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
    assert case.mask == "window:3" and case.to_json()["mask"] == "window:3"
    with pytest.raises(ConfigError, match="case #1 \\(c\\): --mask 'wnd' is not a mask"):
        parse_case({"name": "c", "kernel": "mesh_kv", "expect": "proved", "mask": "wnd"},
                   Path("."), "case #1")
