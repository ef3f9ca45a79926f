"""Review of model/, verify/ and the CLI: each test pins a bug found by trying to break them.

The worst bug is a "proved" that should not be: kernels in tests/kernels/review_*.py are
numerically wrong in ways a naive count keeps at 1 and must never be certified.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import z3
from conftest import TEST_KERNELS, CliResult, kernel_spec, line_of, trace_kernel

from meshproof.cli.options import parse_arg
from meshproof.model.schedule import DType, Op, OpKind, RankProgram, SourceLoc, ValueRef
from meshproof.model.topology import Endpoint
from meshproof.verify.api import verify
from meshproof.verify.memory import rank_memory
from meshproof.verify.result import Status, Verdict
from meshproof.verify.z3util import Budget, check, new_solver

RunCli = Callable[[Sequence[str]], CliResult]


def _verify(name: str, **options: object) -> Verdict:
    options.setdefault("pes", 2)
    return verify(trace_kernel(kernel_spec(name), **options))


def _merge(name: str, **options: object) -> tuple[Status, str]:
    result = _verify(name, **options).property("exactly_once_merge")
    return result.status, result.message


# --- exactly_once_merge soundness -------------------------------------------------------

def test_the_correct_two_rank_merge_is_proved() -> None:
    assert _verify("review_merge.py::good").ok


def test_a_partial_spilled_and_reloaded_keeps_its_counts() -> None:
    # Was proved: the reload from scratch was a constant, so o + reloaded(o) counted 1.
    status, message = _merge("review_merge.py::spill_reload")
    assert status is Status.VIOLATED
    assert "max count 2" in message
    assert _verify("review_merge.py::spill_reload_once").ok


def test_a_reload_that_mixes_stored_and_other_elements_is_not_certified() -> None:
    status, message = _merge("review_merge.py::spill_partly")
    assert status is Status.UNKNOWN
    assert "mixes a stored value with other elements" in message


@pytest.mark.parametrize(("kernel", "why"), [
    ("negated", "a negated partial or weight cancels instead of merging"),
    ("zeroed", "not a known positive constant"),
    ("shifted_weight", "not a known positive constant"),
    ("loaded_factor", "not a known positive constant"),
    ("product_of_partials", "dot of additive and additive values"),
])
def test_factors_that_may_cancel_or_drop_a_partial_are_not_proved(kernel: str,
                                                                   why: str) -> None:
    # Each was proved (exit 0): the counts stayed 1 while the partial was negated, zeroed,
    # scaled by a weight that can be <= 0 or by a loaded tensor, or multiplied by another.
    status, message = _merge(f"review_merge.py::{kernel}")
    assert status is Status.UNKNOWN
    assert why in message


@pytest.mark.parametrize("kernel", ["positive_factors", "clamped_scores", "from_empty_state"])
def test_correct_merges_in_other_styles_are_proved(kernel: str) -> None:
    # positive constants are rescalings; an elementwise clamp of scores keeps them scores
    # (was unknown: "dot of weight and data"); a (-inf, 0, 0) start state is shard-free
    # (was unknown: "sub of const and maxlike").
    assert _verify(f"review_merge.py::{kernel}").ok


def test_a_launch_where_every_rank_returns_at_once_is_not_all_proved(run_cli: RunCli) -> None:
    # Was exit 0, "all proved": a wrong --arg cube_start made every rank return at once.
    r = run_cli(["verify", "mesh_mlo_2d", "--cube-start", "8", "--arg", "cube_start=0"])
    assert r.code == 3
    assert "no rank ran any op (every rank returned at once)" in r.out


def test_only_the_final_contents_of_a_buffer_are_judged() -> None:
    # A provisional store that a later store fully rewrites never reaches the output: it
    # was judged anyway ("never merged", a false violation). A partial rewrite still is.
    assert _verify("review_merge.py::overwritten_store").ok
    status, message = _merge("review_merge.py::partly_overwritten_store")
    assert status is Status.VIOLATED and "never merged" in message


def _mem_op(index: int, kind: OpKind, offset: int, n: int) -> Op:
    args = (ValueRef(0),) if kind is OpKind.STORE else ()
    return Op(index, kind, args, None if kind is OpKind.STORE else index, (n,), DType.F32,
              SourceLoc("k.py", 1), ptr="buf", offset=offset)


def test_buffer_contents_follow_the_last_store_of_each_element() -> None:
    S, L = OpKind.STORE, OpKind.LOAD
    ops = [_mem_op(0, S, 0, 8), _mem_op(1, S, 4, 8), _mem_op(2, L, 0, 4), _mem_op(3, L, 2, 4),
           _mem_op(4, L, 10, 4), _mem_op(5, L, 20, 2), _mem_op(6, S, 0, 4),
           _mem_op(7, S, 4, 8), _mem_op(8, L, 3, 2)]
    memory = rank_memory(RankProgram(Endpoint(0, 0), tuple(ops)))
    reads = {i: ([w.index for w in src.writers], src.uncovered)
             for i, src in memory.loads.items()}
    assert reads == {2: ([0], False), 3: ([0, 1], False), 4: ([1], True), 8: ([6, 7], False)}
    assert 5 not in memory.loads  # never stored there: the buffer's input
    # stores 0 and 1 are rewritten by two later halves together: neither reaches the output
    assert memory.live_stores == {6, 7}


def test_many_spills_each_read_their_own_store() -> None:
    # Each load used to scan every store of its buffer (5,000 spills: ~3 s more). Now the
    # buffer map answers per op; this is a correctness check at a size that used to hurt.
    S, L = OpKind.STORE, OpKind.LOAD
    n = 5000
    ops = [_mem_op(i, S, 4 * i, 4) for i in range(n)] + \
        [_mem_op(n + i, L, 4 * i, 4) for i in range(n)]
    memory = rank_memory(RankProgram(Endpoint(0, 0), tuple(ops)))
    assert all(memory.loads[n + i].writers[0].index == i for i in range(n))
    assert len(memory.live_stores) == n


def test_softmax_partials_without_any_sharded_buffer_are_not_vacuously_proved() -> None:
    # Was "proved (vacuous)": the kernel names its KV buffers kc_ptr/vc_ptr, the default
    # --sharded k_ptr,v_ptr is narrowed to nothing, and a double merge went unchecked.
    status, message = _merge("review_merge.py::renamed_buffers")
    assert status is Status.UNKNOWN
    assert "name its KV buffers with --sharded" in message
    status, message = _merge("review_merge.py::renamed_buffers", sharded=("kc_ptr", "vc_ptr"))
    assert status is Status.VIOLATED and "max count 2" in message


# --- bad input through the CLI: one line on stderr, exit 2, nothing written --------------

def _bad(r: CliResult, *fragments: str) -> None:
    assert r.code == 2, r
    assert r.out == ""
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("meshproof: error: "), r.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_a_kernel_calling_sys_exit_cannot_set_the_exit_code(run_cli: RunCli) -> None:
    # Was exit 0 with no output at all: `verify` looked like "all proved" to CI.
    r = run_cli(["verify", kernel_spec("review_bad.py::exits_zero"), "--pes", "2"])
    line = line_of(TEST_KERNELS / "review_bad.py", "REVIEW-EXIT-LINE")
    _bad(r, f"review_bad.py:{line}: rank (cube 0, pe 0): error: the kernel raised "
            "SystemExit: 0")
    r = run_cli(["trace", kernel_spec("review_import_exit.py::kernel")])
    line = line_of(TEST_KERNELS / "review_import_exit.py", "REVIEW-IMPORT-EXIT-LINE")
    _bad(r, f"review_import_exit.py:{line}: importing the kernel file raised SystemExit")


def test_an_exception_with_a_broken_str_is_one_line(run_cli: RunCli) -> None:
    # Was a traceback (str() of the kernel's exception raised inside the error handler).
    r = run_cli(["trace", kernel_spec("review_bad.py::broken_str"), "--pes", "1"])
    line = line_of(TEST_KERNELS / "review_bad.py", "REVIEW-WEIRD-LINE")
    _bad(r, f"review_bad.py:{line}:", "the kernel raised Weird")
    assert r.err.rstrip().endswith("raised Weird")


def test_a_generator_kernel_is_refused_not_vacuously_proved(run_cli: RunCli) -> None:
    # Was exit 0: calling a generator runs no kernel code, so every property held vacuously.
    r = run_cli(["verify", kernel_spec("review_bad.py::generator")])
    _bad(r, "is a generator or async function")


def test_no_command_is_one_line(run_cli: RunCli) -> None:
    # Was click's whole help text folded onto the error line.
    _bad(run_cli([]), "name a command (gate, list, report, simulate, trace, verify)")


@pytest.mark.parametrize("timeout", ["nan", "inf", "0", "-1"])
def test_timeouts_must_be_positive_and_finite(run_cli: RunCli, timeout: str) -> None:
    # nan and inf were tracebacks (int(nan * 1000) inside the solver set-up).
    _bad(run_cli(["verify", "mesh_mlo_1d", "--timeout", timeout]),
         "--timeout must be a positive, finite number of seconds")


def test_huge_timeouts_are_clamped_not_wrapped_to_a_millisecond() -> None:
    # Z3 keeps the timeout in 32 bits: 2**32 + 1 ms used to become 1 ms (instant unknown).
    budget = Budget(timeout_s=(2**32 + 1) / 1000, rlimit=0)
    solver = new_solver(budget)
    x = z3.Int("x")
    solver.add(x * x * x + 7 * x == 123456789012345)
    assert check(solver).reason != "timeout"


def test_smt2_into_a_missing_directory_fails_before_tracing(run_cli: RunCli,
                                                           tmp_path: Path) -> None:
    # Checked up front now, like --diagram: a slow verify no longer ends in a write error.
    r = run_cli(["verify", kernel_spec("review_bad.py::exits_zero"), "--smt2",
                 str(tmp_path / "none" / "q.smt2")])
    _bad(r, "directory", "does not exist; create it or pick another path")
    _bad(run_cli(["verify", "mesh_mlo_1d", "--smt2", ""]), "it is a directory")
    assert list(tmp_path.iterdir()) == []


def test_smt2_output_is_readable_like_any_other_output(run_cli: RunCli,
                                                      tmp_path: Path) -> None:
    path = tmp_path / "q.smt2"
    assert run_cli(["verify", "mesh_mlo_1d", "--queue-depth", "3", "--smt2", str(path)]).code == 0
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # was 0600 (mkstemp's mode)
    assert [p.name for p in tmp_path.iterdir()] == ["q.smt2"]


def test_mesh_and_cubes_must_agree(run_cli: RunCli) -> None:
    _bad(run_cli(["trace", "mesh_mlo_2d", "--mesh", "2x4", "--cubes", "4"]),
         "--mesh 2x4 launches 8 cubes but --cubes says 4; drop --cubes")
    assert run_cli(["trace", "mesh_mlo_2d", "--mesh", "2x4", "--cubes", "8"]).code == 0
    _bad(run_cli(["trace", "--panel", "multi_user_decode", "--cubes", "8"]),
         "--cubes 8 disagrees with panel multi_user_decode's 1x4 mesh", "pass --mesh RxC")
    _bad(run_cli(["trace", "mesh_mlo_2d", "--cubes", "8"]),
         "or --mesh RxC, which sets mesh_rows, mesh_cols and --cubes")


def test_mesh_overrides_a_panels_mesh(run_cli: RunCli) -> None:
    # Was silently ignored: the panel's mesh_rows=1, mesh_cols=4 and 4 cubes stayed.
    r = run_cli(["trace", "--panel", "multi_user_decode", "--mesh", "2x4", "--json"])
    assert r.code == 0
    launch = json.loads(r.out)["launch"]
    assert (launch["cubes"], launch["args"]["mesh_rows"], launch["args"]["mesh_cols"]) == \
        (8, 2, 4)


def test_pes_zero_and_an_empty_wiring_are_clear_errors(run_cli: RunCli) -> None:
    _bad(run_cli(["trace", "mesh_mlo_1d", "--pes", "0"]),
         "--pes 0 launches no PE: launch 1..8 PEs per cube")
    # --wiring "" silently fell back to the kernel's default wiring.
    _bad(run_cli(["trace", "mesh_mlo_1d", "--wiring", ""]), "unknown wiring ''")
    _bad(run_cli(["trace", "--panel", "single_user_decode", "--wiring", ""]),
         "unknown wiring ''")


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("false", False), ("null", None), (" 4 ", 4), ("-inf", -math.inf),
    ("'16'", "16"), ('"x y"', "x y"), ("16", 16), ("a=b", "a=b"), ("", ""),
])
def test_arg_values(text: str, value: object) -> None:
    # `--arg flag=false` used to be the truthy string "false"; " 4" the string " 4".
    assert parse_arg(f"flag={text}") == ("flag", value)
    assert math.isnan(float(parse_arg("x=nan")[1] or 0))


def test_kernels_can_probe_tl_for_ops() -> None:
    # hasattr(tl, "arange") raised UnsupportedOp instead of returning False.
    schedule = trace_kernel(kernel_spec("review_bad.py::probes_for_ops"), pes=1)
    assert [op.kind.value for op in schedule.programs[0].ops] == ["load", "mul", "store"]


def test_program_id_axis_must_be_an_int(run_cli: RunCli) -> None:
    r = run_cli(["trace", kernel_spec("review_bad.py::float_axis"), "--pes", "1"])
    line = line_of(TEST_KERNELS / "review_bad.py", "REVIEW-AXIS-LINE")
    _bad(r, f"review_bad.py:{line}:", "program_id(axis=1.0): axis is 0 (PE) or 1 (cube), an int")


@pytest.mark.parametrize(("body", "fragment"), [
    ('name = 5\n', "name must be a non-empty, one-line string, got 5"),
    ('name = ""\n', "name must be a non-empty, one-line string, got ''"),
    ('name = "a\\nb"\n', "name must be a non-empty, one-line string"),
    ('description = 3\n', "description must be a string, got 3"),
])
def test_wiring_file_names_are_one_line_strings(run_cli: RunCli, tmp_path: Path, body: str,
                                               fragment: str) -> None:
    # A newline in the name split the trace header and every diagnostic over two lines.
    path = tmp_path / "w.toml"
    path.write_text(body + _PAIR, encoding="utf-8")
    _bad(run_cli(["trace", "mesh_mlo_1d", "--wiring", str(path), "--arg", "n_ranks=2"]),
         fragment)


def test_paths_that_are_directories_say_so(run_cli: RunCli, tmp_path: Path) -> None:
    # Both used to say "does not exist".
    folder = tmp_path / "w.toml"
    folder.mkdir()
    _bad(run_cli(["trace", "mesh_mlo_1d", "--wiring", str(folder)]),
         "is a directory; pass a .toml file")
    _bad(run_cli(["trace", f"{tmp_path}::k"]), "is a directory; name a .py file")


def test_a_decorated_kernel_is_attributed_to_its_own_lines() -> None:
    # Ops pointed at the decorator's wrapper line in review_bad.py (its __code__).
    schedule = trace_kernel(kernel_spec("review_decorated.py::decorated"), pes=1)
    line = line_of(TEST_KERNELS / "review_decorated.py", "REVIEW-DECORATED-LOAD")
    assert str(schedule.programs[0].ops[0].source) == f"tests/kernels/review_decorated.py:{line}"


def test_a_helper_module_next_to_the_kernel_imports(run_cli: RunCli, tmp_path: Path) -> None:
    # Was "importing the kernel file raised ModuleNotFoundError" outside pytest's sys.path.
    (tmp_path / "review_sibling_helper.py").write_text(
        "def double(x, tl):\n    return x * 2.0\n", encoding="utf-8")
    (tmp_path / "kern.py").write_text(
        "from review_sibling_helper import double\n\n\n"
        "def k(x_ptr, o_ptr, *, tl):\n"
        "    tl.store(o_ptr, double(tl.load(x_ptr, shape=(4,), dtype='f32'), tl))\n",
        encoding="utf-8")
    r = run_cli(["trace", f"{tmp_path / 'kern.py'}::k", "--pes", "1", "--json"])
    assert r.code == 0, r.err
    sources = [op["source"] for op in json.loads(r.out)["ranks"][0]["ops"]]
    assert all(s.endswith("kern.py:5") for s in sources)  # the helper's op: the calling line


def test_numpy_integers_work_as_shapes_and_offsets() -> None:
    # Were refused: "shape must hold non-negative ints" / "unsupported operand for +".
    ops = trace_kernel(kernel_spec("review_numpy_ints.py::numpy_shapes"), pes=1).programs[0].ops
    assert [(op.kind.value, op.shape, op.offset) for op in ops] == \
        [("load", (2, 4), 4), ("store", (2, 4), 2)]
    assert all(type(d) is int for op in ops for d in (*op.shape, op.offset))


_PAIR = """[[link]]
from = [0, 0]
dir = "E"
to = [0, 1]

[[link]]
from = [0, 1]
dir = "W"
to = [0, 0]
"""
