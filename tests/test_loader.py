"""Loading kernels (model/loader.py): bad files are one line, sources point at the kernel."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import TEST_KERNELS, RunCli, assert_bad_input, kernel_spec, line_of, trace_kernel


def test_a_kernel_calling_sys_exit_cannot_set_the_exit_code(run_cli: RunCli) -> None:
    # Was exit 0 with no output at all: `verify` looked like "all proved" to CI.
    r = run_cli(["verify", kernel_spec("misbehaving.py::exits_zero"), "--pes", "2"])
    line = line_of(TEST_KERNELS / "misbehaving.py", "EXIT-LINE")
    assert_bad_input(r, f"misbehaving.py:{line}: rank (cube 0, pe 0): error: the kernel raised "
                        "SystemExit: 0")
    r = run_cli(["trace", kernel_spec("import_exit.py::kernel")])
    line = line_of(TEST_KERNELS / "import_exit.py", "IMPORT-EXIT-LINE")
    assert_bad_input(r, f"import_exit.py:{line}: importing the kernel file raised "
                        "SystemExit")


def test_an_exception_with_a_broken_str_is_one_line(run_cli: RunCli) -> None:
    # Was a traceback (str() of the kernel's exception raised inside the error handler).
    r = run_cli(["trace", kernel_spec("misbehaving.py::broken_str"), "--pes", "1"])
    line = line_of(TEST_KERNELS / "misbehaving.py", "WEIRD-LINE")
    assert_bad_input(r, f"misbehaving.py:{line}:", "the kernel raised Weird")
    assert r.err.rstrip().endswith("raised Weird")


def test_a_generator_kernel_is_refused_not_vacuously_proved(run_cli: RunCli) -> None:
    # Was exit 0: calling a generator runs no kernel code, so every property held vacuously.
    r = run_cli(["verify", kernel_spec("misbehaving.py::generator")])
    assert_bad_input(r, "is a generator or async function")


def test_paths_that_are_directories_say_so(run_cli: RunCli, tmp_path: Path) -> None:
    # Both used to say "does not exist".
    folder = tmp_path / "w.toml"
    folder.mkdir()
    assert_bad_input(run_cli(["trace", "mesh_mlo_1d", "--wiring", str(folder)]),
                     "is a directory; pass a .toml file")
    assert_bad_input(run_cli(["trace", f"{tmp_path}::k"]), "is a directory; name a .py file")


def test_a_decorated_kernel_is_attributed_to_its_own_lines() -> None:
    # Ops pointed at the decorator's wrapper line in misbehaving.py (its __code__).
    schedule = trace_kernel(kernel_spec("decorated.py::decorated"), pes=1)
    line = line_of(TEST_KERNELS / "decorated.py", "DECORATED-LOAD")
    assert str(schedule.programs[0].ops[0].source) == f"tests/kernels/decorated.py:{line}"


def test_a_helper_module_next_to_the_kernel_imports(run_cli: RunCli, tmp_path: Path) -> None:
    # Was "importing the kernel file raised ModuleNotFoundError" outside pytest's sys.path.
    (tmp_path / "sibling_helper.py").write_text(
        "def double(x, tl):\n    return x * 2.0\n", encoding="utf-8")
    (tmp_path / "kern.py").write_text(
        "from sibling_helper import double\n\n\n"
        "def k(x_ptr, o_ptr, *, tl):\n"
        "    tl.store(o_ptr, double(tl.load(x_ptr, shape=(4,), dtype='f32'), tl))\n",
        encoding="utf-8")
    r = run_cli(["trace", f"{tmp_path / 'kern.py'}::k", "--pes", "1", "--json"])
    assert r.code == 0, r.err
    sources = [op["source"] for op in json.loads(r.out)["ranks"][0]["ops"]]
    assert all(s.endswith("kern.py:5") for s in sources)  # the helper's op: the calling line
