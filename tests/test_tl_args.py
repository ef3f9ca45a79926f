"""model/tl_args.py: every tl op takes exactly its documented parameters.

Unknown and unmodelled keywords (masks above all), extra positional arguments, missing and
repeated ones are one-line UnsupportedArgument errors naming the op, the argument and the
kernel line; the memory hints are accepted and change nothing.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from helpers import REPO_ROOT, TEST_KERNELS, CliResult, kernel_spec, line_of, trace_kernel

from meshproof.errors import ShapeError, UnsupportedArgument, UnsupportedOp
from meshproof.model import tensor
from meshproof.model.tl_args import MEMORY_HINTS, REFUSED, OpSignature
from meshproof.model.topology import Endpoint
from meshproof.model.tracer import SUPPORTED_OPS, KernelSite, Pointer, RankTracer, Tl

Run = Callable[[Sequence[str]], CliResult]
MISUSE = TEST_KERNELS / "tl_misuse.py"
PREFIX = "test_tl_args.py:{line}: rank (cube 0, pe 0): error: "


class Rank:
    """One rank's `tl`, with ops attributed to this file."""

    def __init__(self) -> None:
        self.tracer = RankTracer(Endpoint(0, 0), (1, 1), KernelSite(__file__, "test_tl_args.py",
                                                                    1))
        self.tl: Any = self.tracer.tl
        self.x = Pointer("x_ptr")


@pytest.fixture
def rank() -> Iterator[Rank]:
    r = Rank()
    tensor._ACTIVE.append(r.tracer)
    try:
        yield r
    finally:
        tensor._ACTIVE.pop()


def here() -> int:
    return sys._getframe(1).f_lineno


def refused(call: Callable[[], object], line: int) -> str:
    with pytest.raises(UnsupportedArgument) as info:
        call()
    text = str(info.value)
    prefix = PREFIX.format(line=line)
    assert text.startswith(prefix), text
    assert "\n" not in text
    return text.removeprefix(prefix)


# --- the masks: a realistic mistake each, refused; the correct idiom, traced ---------------

def test_a_masked_store_is_refused_naming_the_argument_and_line(rank: Rank) -> None:
    x = rank.tl.load(rank.x, shape=(4,))
    line = here() + 1
    text = refused(lambda: rank.tl.store(Pointer("o_ptr"), x, mask=False), line)
    assert text == ("tl.store(mask=...) is not modelled: masked stores are outside meshproof's "
                    "rules (every element of the value would count as written); store exactly "
                    "the elements the rank writes with tl.store(ptr + offset, value) and a "
                    "value of that shape")
    assert len(rank.tracer.ops) == 1  # nothing recorded for the refused store


def test_a_masked_load_is_refused_for_mask_and_for_other(rank: Rank) -> None:
    line = here() + 1
    text = refused(lambda: rank.tl.load(rank.x, shape=(4,), mask=None, other=0.0), line)
    assert text.startswith("tl.load(mask=...) is not modelled: masked loads are outside "
                           "meshproof's rules")
    line = here() + 1
    text = refused(lambda: rank.tl.load(rank.x, shape=(4,), other=0.0), line)
    assert text.startswith("tl.load(other=...) is not modelled: other= fills the masked-off "
                           "elements of a masked load")
    assert rank.tracer.ops == []


def test_the_exact_load_and_store_the_fixes_describe_are_traced(rank: Rank) -> None:
    x = rank.tl.load(rank.x + 4, shape=(2,))
    rank.tl.store(Pointer("o_ptr") + 4, x)
    assert [(op.kind.value, op.offset) for op in rank.tracer.ops] == [("load", 4), ("store", 4)]


@pytest.mark.parametrize(("op", "keyword"), sorted(
    (op, kw) for op, table in REFUSED.items() for kw in table))
def test_every_refused_keyword_says_why(rank: Rank, op: str, keyword: str) -> None:
    line = here() + 1
    text = refused(lambda: getattr(rank.tl, op)(**{keyword: True}), line)
    refusal = REFUSED[op][keyword]
    assert text == f"tl.{op}({keyword}=...) is not modelled: {refusal.reason}; {refusal.fix}"


# --- hints -------------------------------------------------------------------------------

def test_memory_hints_are_accepted_and_change_nothing() -> None:
    hinted = trace_kernel(kernel_spec("tl_misuse.py::hinted"), pes=1)
    plain = trace_kernel(kernel_spec("tl_misuse.py::plain"), pes=1)

    def shape(s: Any) -> list[tuple[object, ...]]:
        return [(op.kind, op.args, op.out, op.shape, op.dtype, op.ptr, op.offset, op.nbytes)
                for p in s.programs for op in p.ops]

    assert shape(hinted) == shape(plain)
    assert MEMORY_HINTS == ("cache_modifier", "eviction_policy")


@pytest.mark.parametrize("op", ["dot", "send", "recv", "max", "exp"])
def test_memory_hints_are_hints_only_for_load_and_store(rank: Rank, op: str) -> None:
    line = here() + 1
    text = refused(lambda: getattr(rank.tl, op)(cache_modifier=".cg"), line)
    assert text.startswith(f"tl.{op}(cache_modifier=...) is not modelled: tl.{op} takes (")


# --- unknown keywords, positional misuse, missing and repeated arguments -------------------

@pytest.mark.parametrize("op", SUPPORTED_OPS)
def test_every_op_refuses_an_unknown_keyword(rank: Rank, op: str) -> None:
    sig: OpSignature = getattr(Tl, op).signature
    line = here() + 1
    text = refused(lambda: getattr(rank.tl, op)(bogus=1), line)
    assert text.startswith(f"tl.{op}(bogus=...) is not modelled: tl.{op} takes {sig.params}")
    assert text.endswith("; remove bogus=")


def test_a_misspelt_keyword_gets_a_suggestion(rank: Rank) -> None:
    line = here() + 1
    text = refused(lambda: rank.tl.load(rank.x, shpe=(4,)), line)
    assert text == ("tl.load(shpe=...) is not modelled: tl.load takes (ptr, shape, "
                    "dtype='f16') and the hints cache_modifier=, eviction_policy= (ignored); "
                    "remove shpe= (did you mean shape=?)")


def test_triton_spellings_point_at_meshproofs(rank: Rank) -> None:
    x = rank.tl.load(rank.x, shape=(2, 4))
    line = here() + 1
    assert refused(lambda: rank.tl.sum(x, axis=1, keep_dims=True), line) == (
        "tl.sum(keep_dims=...) is not modelled: meshproof spells it keepdims= (and keeps the "
        "reduced axis by default); write keepdims=True or keepdims=False")
    line = here() + 1
    assert refused(lambda: rank.tl.softmax(x, dim=1), line) == (
        "tl.softmax(dim=...) is not modelled: meshproof spells it axis=; write axis=...")


def test_a_positional_mask_is_refused_not_absorbed(rank: Rank) -> None:
    x = rank.tl.load(rank.x, shape=(4,))
    line = here() + 1
    assert refused(lambda: rank.tl.store(Pointer("o_ptr"), x, False), line) == (
        "tl.store with 3 positional arguments is not modelled: tl.store takes (ptr, value) and "
        "the hints cache_modifier=, eviction_policy= (ignored); remove the extra arguments")


def test_options_that_triton_takes_positionally_are_keyword_only(rank: Rank) -> None:
    a = rank.tl.load(rank.x, shape=(2, 2))
    acc = rank.tl.zeros((2, 2))
    line = here() + 1
    assert refused(lambda: rank.tl.dot(a, a, acc), line) == (
        "tl.dot with 3 positional arguments is not modelled: tl.dot takes (a, b, *, "
        "out_dtype=None); remove the extra arguments (out_dtype= go by keyword)")
    line = here() + 1  # Triton's max(x, axis, return_indices)
    assert refused(lambda: rank.tl.max(a, -1, True), line).startswith(
        "tl.max with 3 positional arguments is not modelled")
    assert rank.tl.dot(a, a, out_dtype="f32").dtype == "f32"
    assert rank.tl.max(a, -1, keepdims=False).shape == (2,)


def test_keepdims_must_be_a_bool(rank: Rank) -> None:
    x = rank.tl.load(rank.x, shape=(2, 4))
    with pytest.raises(ShapeError, match=r"tl.sum keepdims must be True or False, got 'no'"):
        rank.tl.sum(x, keepdims="no")


def test_missing_and_repeated_arguments(rank: Rank) -> None:
    line = here() + 1
    assert refused(lambda: rank.tl.load(rank.x), line) == (
        "tl.load needs shape: tl.load takes (ptr, shape, dtype='f16') and the hints "
        "cache_modifier=, eviction_policy= (ignored); pass shape=...")
    line = here() + 1
    assert refused(lambda: rank.tl.load(rank.x, (4,), shape=(4,)), line) == (
        "tl.load got shape twice (as positional argument 2 and as shape=); pass it once")
    assert rank.tracer.ops == []


def test_an_unsupported_argument_is_an_unsupported_op() -> None:
    # the CLI and the gate treat it like any refused construct: exit 2, an error row
    assert issubclass(UnsupportedArgument, UnsupportedOp)


# --- whole kernels through the CLI: exit 2 with one line, never proved ---------------------

@pytest.mark.parametrize(("kernel", "marker", "start"), [
    ("masked_store", "MASKED-STORE", "tl.store(mask=...) is not modelled: masked stores"),
    ("masked_load", "MASKED-LOAD", "tl.load(mask=...) is not modelled: masked loads"),
    ("positional_mask", "POSITIONAL-MASK", "tl.store with 3 positional arguments"),
    ("accumulating_dot", "POSITIONAL-ACC", "tl.dot with 3 positional arguments"),
])
@pytest.mark.parametrize("command", ["verify", "trace"])
def test_masked_kernels_exit_2_in_the_cli(run_cli: Run, command: str, kernel: str, marker: str,
                                          start: str) -> None:
    r = run_cli([command, f"tests/kernels/tl_misuse.py::{kernel}", "--pes", "1"])
    assert r.code == 2
    assert r.err.count("\n") == 1
    assert r.err.startswith(f"meshproof: error: tests/kernels/tl_misuse.py:"
                            f"{line_of(MISUSE, marker)}: rank (cube 0, pe 0): error: {start}")
    assert "proved" not in r.out


def test_the_hinted_kernel_verifies(run_cli: Run) -> None:
    # a copy, not attention: only the protocol properties apply
    r = run_cli(["verify", "tests/kernels/tl_misuse.py::hinted", "--pes", "1", "--only",
                 "direction_legality,launch_confinement,channel_matching,deadlock_freedom"])
    assert r.code == 0, r.err


# --- spec/tl.md stays true ---------------------------------------------------------------

def test_spec_lists_each_ops_parameters_and_the_hints() -> None:
    spec = (REPO_ROOT / "spec" / "tl.md").read_text(encoding="utf-8").replace('"', "'")
    for op in SUPPORTED_OPS:
        sig: OpSignature = getattr(Tl, op).signature
        assert f"`{op}{sig.params}`" in spec, f"spec/tl.md §4 does not show {op}{sig.params}"
    hints = re.search(r"\*\*Hints\*\*(.*?)\n\n", spec, re.DOTALL)
    assert hints is not None and all(f"`{h}`" in hints.group(0) for h in MEMORY_HINTS)
