"""The command line. Only this package prints or exits; commands return exit codes
(`meshproof.exitcodes.ExitCode`).

Each command lives in its own module, imported when the command runs (`--help` lists them
from SHORT_HELP), so `meshproof verify` does not pay for the report stack's imports. A
module that fails to import fails loudly; it never vanishes from `--help`.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import signal
import sys
from collections.abc import Iterator, MutableMapping, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import click

from meshproof import __version__, interrupts
from meshproof.cli.pipes import pipe_safe_streams
from meshproof.errors import BadInput, InternalError, MeshproofError, TimeBudgetExceeded
from meshproof.exitcodes import ExitCode
from meshproof.interrupts import Terminated
from meshproof.model.paused_gc import paused_gc

if TYPE_CHECKING:
    from meshproof.gate.pipeline import Pipeline

# Set, an internal error (a bug) raises with its traceback instead of its one line.
DEBUG_VARIABLE = "MESHPROOF_DEBUG"
# Set by the shell completion script click generates (README, "Shell completion").
COMPLETE_VARIABLE = "_MESHPROOF_COMPLETE"

# command name -> (module, attribute), in the order `--help` lists them
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("meshproof.cli.trace_cmd", "list_cmd"),
    "trace": ("meshproof.cli.trace_cmd", "trace_cmd"),
    "verify": ("meshproof.cli.verify_cmd", "verify_cmd"),
    "simulate": ("meshproof.cli.simulate_cmd", "simulate_cmd"),
    "placements": ("meshproof.cli.placements_cmd", "placements_cmd"),
    "synthesize": ("meshproof.cli.synthesize_cmd", "synthesize_cmd"),
    "gate": ("meshproof.cli.gate_cmd", "gate_cmd"),
    "report": ("meshproof.cli.report_cmd", "report_cmd"),
    "export": ("meshproof.cli.export_cmd", "export_cmd"),
}
# each command's one-line help as `meshproof --help` lists it: written here so that the
# list costs no imports (the report command alone would import matplotlib);
# tests/test_cli.py checks each against the command's own docstring
SHORT_HELP: dict[str, str] = {
    "export": "Write KERNEL's schedules for another verifier (--promela...",
    "gate": "Prove every case of FILE (default proofs.toml) and check...",
    "list": "List built-in kernels, wirings and panels.",
    "placements": "Verify KERNEL at every cube_start where its launch (--mesh...",
    "report": "Verify and simulate every built-in kernel and panel; write...",
    "simulate": "Run KERNEL in the numpy reference simulator; exit 1 when...",
    "synthesize": "Synthesise a decode merge kernel for a launch, write it to...",
    "trace": "Trace KERNEL symbolically and print each rank's schedule.",
    "verify": "Prove direction legality, launch confinement, channel...",
}


class _LazyCommands(MutableMapping[str, click.Command]):
    """The group's command table: every name is known up front (for `--help` and "did
    you mean"); a command's module is imported when the command is looked up."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, attribute = COMMANDS[name]
            if _freeze_after_import:
                _serial_blas(name)
                # the command's modules (most of start-up's objects) are imported with the
                # collector paused, then frozen: it need never scan them (see entry)
                with paused_gc():
                    command = getattr(importlib.import_module(module), attribute)
                gc.freeze()
            else:
                command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise InternalError(f"{module}.{attribute} is not a click command")
            self._loaded[name] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        raise InternalError(f"the command {name} cannot be removed")

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({*COMMANDS, *self._loaded}))

    def __len__(self) -> int:
        return len({*COMMANDS, *self._loaded})

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in self._loaded


class Interrupted(BaseException):
    """Ctrl-C arrived: unwind (children are killed, temporary files removed, nothing is
    cached or written) and exit 130. Not a KeyboardInterrupt, which click would answer
    with a blank line of its own."""


class _Commands(click.Group):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands()

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from SHORT_HELP: `--help` imports no command module."""
        rows = [(name, SHORT_HELP[name]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted from None


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="meshproof")
def cli() -> None:
    """meshproof: prove mesh SPMD kernels legal, matched, deadlock-free and exactly-once,
    and simulate them in numpy."""


def main(argv: Sequence[str] | None = None, *, pipeline: Pipeline | None = None) -> ExitCode:
    """Run the CLI; return the exit code (the console script exits with it).

    `pipeline` replaces the resolver, tracer, verifier and simulator every command runs
    through (tests and tools pass their own); by default the real ones, which import and
    trace kernels in child processes.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if COMPLETE_VARIABLE in os.environ:  # the shell asks for completions (README)
        return _complete(args)
    if not args:  # click would put its whole help text on the one error line
        _error(f"name a command ({', '.join(sorted(COMMANDS))}); see `meshproof --help`")
        return ExitCode.BAD_INPUT
    hook = sys.unraisablehook
    interrupts.reset()
    try:
        with pipe_safe_streams():  # `| head -1` keeps the verdict's exit code
            code = _run(args, pipeline)
        if interrupts.received() is not None and \
                code not in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
            # the signal's exception was lost on the way (see meshproof.interrupts)
            code = _interrupted(interrupts.received() == signal.SIGTERM)
        if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
            # Objects an interrupt left half-built (a z3 Solver whose __init__ it cut
            # short) are finalised now, under the quiet hook _run installed.
            gc.collect()
        return code
    finally:
        sys.unraisablehook = hook


def _complete(args: list[str]) -> ExitCode:
    """Click's shell completion: it reads the words from the environment, prints, exits."""
    try:
        cli.main(args=args, prog_name="meshproof", complete_var=COMPLETE_VARIABLE)
    except SystemExit as exc:
        return _exit_code(exc.code if isinstance(exc.code, int) else ExitCode.OK)
    return ExitCode.OK


def _run(args: list[str], pipeline: Pipeline | None) -> ExitCode:
    try:
        result = cli.main(args=args, prog_name="meshproof", standalone_mode=False,
                          obj=pipeline)
    except click.exceptions.Exit as exc:  # --help, --version
        return _exit_code(exc.exit_code)
    except (Interrupted, click.exceptions.Abort):  # Abort: click's KeyboardInterrupt
        return _interrupted(False)
    except Terminated:
        return _interrupted(True)
    except click.ClickException as exc:
        _error(exc.format_message())
        return ExitCode.BAD_INPUT
    except BadInput as exc:
        _error(str(exc))
        return ExitCode.BAD_INPUT
    except InternalError as exc:
        _error(str(exc), "internal error (please report)")
        return ExitCode.INTERNAL
    except TimeBudgetExceeded as exc:   # no result within the budget: unknown
        _error(str(exc))
        return ExitCode.UNKNOWN
    except MeshproofError as exc:
        _error(str(exc))
        return ExitCode.BAD_INPUT
    except Exception as exc:  # a bug in meshproof: never exit 1, which means "violated"
        if os.environ.get(DEBUG_VARIABLE):
            raise
        _error(f"{type(exc).__name__}: {exc}; set {DEBUG_VARIABLE}=1 for the traceback",
               "internal error (please report)")
        return ExitCode.INTERNAL
    return _exit_code(result if isinstance(result, int) else ExitCode.OK)


def _exit_code(value: int) -> ExitCode:
    try:
        return ExitCode(value)
    except ValueError:
        raise InternalError(f"exit code {value} is not one of meshproof's ExitCode "
                            "values") from None


def _error(message: str, label: str = "error") -> None:
    """Diagnostics are exactly one line on stderr."""
    click.echo(f"meshproof: {label}: {' '.join(message.split())}", err=True)


def _interrupted(terminated: bool) -> ExitCode:
    sys.unraisablehook = _unraisable_after_interrupt
    click.echo(f"meshproof: {'terminated' if terminated else 'interrupted'}", err=True)
    return ExitCode.TERMINATED if terminated else ExitCode.INTERRUPTED


def _unraisable_after_interrupt(unraisable: Any) -> None:
    """An interrupted run ends with its one line: the errors of finalisers that run on
    objects the interrupt left half-built (`Solver.__del__` without `self.solver`) are
    noise, not news."""


def _interrupt(signum: int, frame: FrameType | None) -> None:
    interrupts.note(signum)
    raise KeyboardInterrupt


def _terminate(signum: int, frame: FrameType | None) -> None:
    interrupts.note(signum)
    raise Terminated


# The cyclic collector's first-generation threshold for a CLI process (CPython's default:
# 700 container allocations). Start-up builds ~100k long-lived objects (modules, classes,
# the dataclasses' generated methods) and none of them is garbage: at 700 the collector
# rescanned them ~120 times, a tenth of `meshproof verify`'s CPU time. At 50k, cyclic
# garbage still goes within 50k allocations (a few MB).
GC_THRESHOLD = 50_000
# Whether a command's module is imported with the collector paused, then every object
# alive moved into its permanent generation (gc.freeze): the console script's imports
# (modules, classes, the dataclasses' generated methods) live as long as the process, and
# collections that scanned them cost a seventh of a proved `meshproof verify`
# (benchmarks/cli_start.py); the trace child, forked after, then shares those pages instead
# of touching them. Only `entry` sets it: a process that calls `main` itself (tests, tools)
# keeps its collector (and its BLAS threads, `_serial_blas`).
_freeze_after_import = False


# The commands that multiply no large matrices: none of them runs the simulator, so
# numpy's BLAS thread pool only costs them. OpenBLAS starts its worker threads when numpy
# is imported, and each spins on a core for ~2^28 cycles (~0.1 s) before it sleeps: on a
# busy 2-core machine that spin takes a core from the command itself (a sixth of a proved
# `meshproof verify`, benchmarks/cli_start.py), and it is CPU time on any machine. The
# simulating commands (simulate, gate, report) keep the pool: their P·V products use it.
SERIAL_BLAS_COMMANDS = frozenset({"list", "trace", "verify", "placements", "synthesize",
                                  "export"})
# What OpenBLAS reads for its thread count, in its order: a user's setting is left alone.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _serial_blas(command: str) -> None:
    """One BLAS thread for a command in SERIAL_BLAS_COMMANDS, if numpy is not imported yet
    (the console script imports it with the command's module) and the user set no thread
    count. Children inherit it: the trace child multiplies no matrices either."""
    if command in SERIAL_BLAS_COMMANDS and "numpy" not in sys.modules and \
            not any(variable in os.environ for variable in BLAS_THREAD_VARIABLES):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def entry() -> None:
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, older, oldest)
    global _freeze_after_import
    _freeze_after_import = True
    interrupts.arm()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _terminate)
    code = main()
    # A second Ctrl-C or SIGTERM now, while the interpreter shuts down, must not turn the
    # exit code into a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _exit(code)


def _exit(code: int) -> NoReturn:
    """End the console script's process with `code`, without the interpreter's teardown
    when only the main thread runs: the exit handlers run (multiprocessing's, logging's,
    coverage's) and the standard streams are flushed, then the process ends, skipping the
    freeing of every module and object start-up made, ~16 ms of a proved `meshproof
    verify` (benchmarks/cli_start.py) that no one waits for. Every file meshproof writes
    is closed by then (outputs.py, `with` blocks). With another thread alive the
    interpreter's own exit joins it, as always."""
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to keep
            stream.flush()
    os._exit(code)
