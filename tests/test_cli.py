"""The command group (cli/__init__.py): registration, exit codes, what a command imports."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import RunCli, assert_bad_input

from meshproof import cli
from meshproof.exitcodes import ExitCode


def test_no_command_is_one_line(run_cli: RunCli) -> None:
    # Was click's whole help text folded onto the error line.
    assert_bad_input(run_cli([]), "name a command (export, gate, list, placements, report, "
                                  "simulate, synthesize, trace, verify)")


def test_help_lists_every_command_and_a_typo_gets_a_suggestion(run_cli: RunCli) -> None:
    res = run_cli(["--help"])
    assert res.code == 0
    for name in cli.COMMANDS:
        assert f"  {name} " in res.out
    assert_bad_input(run_cli(["verfy"]), "No such command 'verfy'. Did you mean 'verify'?")


def test_a_broken_command_module_fails_loudly(monkeypatch: pytest.MonkeyPatch,
                                              run_cli: RunCli) -> None:
    # It used to vanish from --help: a ModuleNotFoundError was swallowed.
    monkeypatch.setitem(cli.COMMANDS, "broken", ("meshproof.cli.no_such_module", "broken_cmd"))
    monkeypatch.setitem(cli.SHORT_HELP, "broken", "A command whose module is missing.")
    assert "  broken " in run_cli(["--help"]).out   # listed without importing it
    for args in (["broken"], ["broken", "--help"]):
        res = run_cli(args)
        assert res.code == ExitCode.INTERNAL and res.out == ""
        assert res.err == ("meshproof: internal error (please report): ModuleNotFoundError: "
                           "No module named 'meshproof.cli.no_such_module'; set "
                           "MESHPROOF_DEBUG=1 for the traceback\n")
    monkeypatch.setenv("MESHPROOF_DEBUG", "1")
    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        run_cli(["broken"])


def test_the_listed_help_is_each_commands_own() -> None:
    """`--help` lists SHORT_HELP (no imports); it must say what each command's docstring
    says, shortened the way click shortens it."""
    limit = 78 - 6 - max(len(name) for name in cli.COMMANDS)   # click: an 80-column width
    assert set(cli.SHORT_HELP) == set(cli.COMMANDS)
    for name in cli.COMMANDS:
        assert cli.SHORT_HELP[name] == cli.cli.commands[name].get_short_help_str(limit), name


def test_help_imports_no_command_module() -> None:
    # nor numpy: the built-in kernels are imported at their first look-up, not by `import
    # meshproof` (model/builtin_source.py)
    code = ("import sys; from meshproof.cli import main; main(['--help']); "
            "print(sorted(m for m in sys.modules if m.startswith('meshproof.cli.') and "
            "m.endswith('_cmd') or m.split('.')[0] in ('matplotlib', 'z3', 'numpy')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_bug_exits_70_never_1(monkeypatch: pytest.MonkeyPatch, run_cli: RunCli) -> None:
    """An exception meshproof did not expect is an internal error (70), not "violated"."""
    def bug(*_: object, **__: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(cli.cli, "invoke", bug)
    res = run_cli(["list"])
    assert res.code == ExitCode.INTERNAL == 70
    assert res.err.startswith("meshproof: internal error (please report): ZeroDivisionError")


@pytest.mark.parametrize("args", [["list"], ["--help"], ["--version"], ["trace", "mesh_mlo_1d"],
                                  ["verify", "mesh_mlo_1d_recv_first", "--only",
                                   "deadlock_freedom"], ["trace", "nope"], []])
def test_every_outcome_is_an_exit_code(run_cli: RunCli, args: list[str]) -> None:
    assert type(run_cli(args).code) is ExitCode


def test_interrupts_exit_130(monkeypatch: pytest.MonkeyPatch, run_cli: RunCli) -> None:
    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.cli, "invoke", interrupted)
    res = run_cli(["list"])
    assert res.code == ExitCode.INTERRUPTED == 130
    assert res.err.strip().endswith("meshproof: interrupted")


@pytest.mark.parametrize("as_json", [True, False])
def test_a_proved_verify_imports_no_report_stack_and_no_witness_search(as_json: bool
                                                                       ) -> None:
    """A cold, proved `meshproof verify` pays for z3, numpy and the verifier: not for
    matplotlib or the report, the witness searches (numeric safety's too, with their
    cone and machine evaluation), proof relocation, the witness file or a counterexample's
    details, which are imported where a failure or a second launch needs them; nor for
    the simulator's configuration and inputs, numpy.ma (np.unique loads it) or tomllib
    (its regexes), difflib (a misspelt name's hint) or click's completion; printed as
    text, not for json either."""
    code = ("import sys; from meshproof.cli import main; "
            "code = main(['verify', 'mesh_mlo_2d', '--mesh', '2x4', '--queue-depth', '3'"
            + (", '--json'" if as_json else "") + "]); "
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib' or "
            "m.startswith(('meshproof.report', 'meshproof.cli.report_cmd', 'rich.progress')) "
            "or m in ('meshproof.verify.semantics.sparse_eval', "
            "'meshproof.verify.semantics.rounding_witness', 'meshproof.deploy.relocation', "
            "'meshproof.model.witness_file', 'rich._emoji_codes', "
            "'meshproof.verify.semantics.witness', 'meshproof.verify.semantics.cone', "
            "'numpy.ma', 'tomllib', 'meshproof.sim.config', 'meshproof.model.inputs', "
            "'difflib', 'click.shell_completion', " + ("" if as_json else "'json', ") +
            "'meshproof.verify.details', 'meshproof.verify.semantics.numeric', "
            "'meshproof.model.machine')); "
            "print(code, heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == "0 []"


@pytest.mark.parametrize(("argv", "preset", "threads"), [
    (["list"], None, "1"),             # simulates nothing: numpy loads with one BLAS thread
    (["list"], "3", "3"),              # the user's setting stays
    (["simulate", "--help"], None, None),  # the simulator keeps OpenBLAS's pool
])
def test_the_console_script_starts_one_blas_thread_for_a_command_that_simulates_nothing(
        argv: list[str], preset: str | None, threads: str | None) -> None:
    """OpenBLAS's worker threads spin ~0.1 s on a core after numpy's import; a command
    that multiplies no large matrices (cli.SERIAL_BLAS_COMMANDS) is spared them."""
    env = {k: v for k, v in os.environ.items() if k not in cli.BLAS_THREAD_VARIABLES}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    code = ("import atexit, os, sys; from meshproof import cli; "
            "atexit.register(lambda: print(os.environ.get('OPENBLAS_NUM_THREADS'))); "
            f"sys.argv = ['meshproof', *{argv!r}]; cli.entry()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(threads)


def test_the_console_script_freezes_what_a_command_imported_and_main_alone_does_not(
        ) -> None:
    """entry (the console script) moves the objects alive once a command's module is
    loaded into the collector's permanent generation, so no later collection rescans
    them; a process that calls main itself (tests, tools) keeps its collector as it was."""
    code = ("import atexit, gc, sys; from meshproof import cli; "
            "atexit.register(lambda: print(gc.get_freeze_count() > 0)); "
            "sys.argv = ['meshproof', 'list']; ")
    for call, frozen in (("cli.entry()", "True"), ("cli.main(['list'])", "False")):
        done = subprocess.run([sys.executable, "-c", code + call], capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines()[-1] == frozen


@pytest.mark.parametrize("thread", [False, True])
def test_the_console_script_exits_with_its_code_after_its_exit_handlers_and_output(
        thread: bool) -> None:
    """entry ends the process without the interpreter's teardown: the exit handlers
    still run, buffered output is written, the exit code is the command's; a thread
    still running is waited for, as the interpreter's own exit does."""
    code = ("import atexit, sys, threading, time; from meshproof import cli; "
            "atexit.register(lambda: sys.stdout.write('handler')); "
            + ("threading.Thread(target=lambda: (time.sleep(0.3), print('thread'))).start(); "
               if thread else "")
            + "sys.argv = ['meshproof', 'trace', 'no_such_kernel']; cli.entry()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr
    assert done.stdout == ("thread\nhandler" if thread else "handler")
    assert "no_such_kernel" in done.stderr


def test_exit_codes_are_the_documented_ones() -> None:
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0, "VIOLATED": 1, "BAD_INPUT": 2, "UNKNOWN": 3, "INTERNAL": 70,
        "INTERRUPTED": 130, "TERMINATED": 143}


def test_sigterm_unwinds_and_exits_143(monkeypatch: pytest.MonkeyPatch, run_cli: RunCli) -> None:
    def terminated(*_: object, **__: object) -> None:
        cli._terminate(15, None)  # what the SIGTERM handler of `entry` does

    monkeypatch.setattr(cli.cli, "invoke", terminated)
    res = run_cli(["list"])
    assert res.code == ExitCode.TERMINATED and res.err.strip() == "meshproof: terminated"


@pytest.mark.parametrize(("words", "cword", "expected"), [
    ("meshproof ver", "1", "plain,verify"),
    ("meshproof verify mesh_mlo_1d_r", "2", "plain,mesh_mlo_1d_recv_first"),
    ("meshproof gate --no-c", "2", "plain,--no-cache"),
])
def test_shell_completion(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                          words: str, cword: str, expected: str) -> None:
    # main() refused the empty argv the completion script runs it with.
    monkeypatch.setenv("_MESHPROOF_COMPLETE", "bash_complete")
    monkeypatch.setenv("COMP_WORDS", words)
    monkeypatch.setenv("COMP_CWORD", cword)
    assert cli.main([]) == ExitCode.OK
    assert capsys.readouterr().out.splitlines() == [expected]


def test_the_completion_script_the_readme_installs(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    for shell in ("bash", "zsh", "fish"):
        monkeypatch.setenv("_MESHPROOF_COMPLETE", f"{shell}_source")
        assert cli.main([]) == ExitCode.OK
        assert "_MESHPROOF_COMPLETE" in capsys.readouterr().out
