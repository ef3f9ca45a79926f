"""The command line. Only this package prints or exits; commands return exit codes
(`meshproof.exitcodes.ExitCode`).

Each command lives in its own module, imported when the command runs (or when `--help`
lists them all), so `meshproof verify` does not pay for the report stack's imports. A
module that fails to import fails loudly; it never vanishes from `--help`.
"""

from __future__ import annotations

import importlib
import signal
import sys
from collections.abc import Iterator, MutableMapping, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from meshproof import __version__
from meshproof.errors import BadInput, InternalError, MeshproofError
from meshproof.exitcodes import ExitCode

if TYPE_CHECKING:
    from meshproof.gate.pipeline import Pipeline

# command name -> (module, attribute), in the order `--help` lists them
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("meshproof.cli.trace_cmd", "list_cmd"),
    "trace": ("meshproof.cli.trace_cmd", "trace_cmd"),
    "verify": ("meshproof.cli.verify_cmd", "verify_cmd"),
    "simulate": ("meshproof.cli.simulate_cmd", "simulate_cmd"),
    "placements": ("meshproof.cli.placements_cmd", "placements_cmd"),
    "gate": ("meshproof.cli.gate_cmd", "gate_cmd"),
    "report": ("meshproof.cli.report_cmd", "report_cmd"),
}


class _LazyCommands(MutableMapping[str, click.Command]):
    """The group's command table: every name is known up front (for `--help` and "did
    you mean"); a command's module is imported when the command is looked up."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, attribute = COMMANDS[name]
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


class _Commands(click.Group):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands()


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="meshproof")
def cli() -> None:
    """meshproof: prove mesh SPMD kernels legal, matched, deadlock-free and exactly-once,
    and simulate them in numpy."""


class Terminated(BaseException):
    """SIGTERM arrived: unwind (temporary files are removed on the way) and exit 143."""


def main(argv: Sequence[str] | None = None, *, pipeline: Pipeline | None = None) -> int:
    """Run the CLI; return the exit code (the console script exits with it).

    `pipeline` replaces the tracer, verifier and simulator every command runs through
    (tests and tools pass their own); by default the real ones.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:  # click would put its whole help text on the one error line
        _error(f"name a command ({', '.join(sorted(COMMANDS))}); see `meshproof --help`")
        return ExitCode.BAD_INPUT
    try:
        result = cli.main(args=args, prog_name="meshproof", standalone_mode=False,
                          obj=pipeline)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.Abort:  # click's name for a KeyboardInterrupt
        click.echo("meshproof: interrupted", err=True)
        return ExitCode.INTERRUPTED
    except Terminated:
        click.echo("meshproof: terminated", err=True)
        return ExitCode.TERMINATED
    except click.ClickException as exc:
        _error(exc.format_message())
        return ExitCode.BAD_INPUT
    except BadInput as exc:
        _error(str(exc))
        return ExitCode.BAD_INPUT
    except InternalError as exc:
        _error(str(exc), "internal error (please report)")
        return ExitCode.INTERNAL
    except MeshproofError as exc:
        _error(str(exc))
        return ExitCode.BAD_INPUT
    if isinstance(result, int):
        return result
    return ExitCode.OK


def _error(message: str, label: str = "error") -> None:
    """Diagnostics are exactly one line on stderr."""
    click.echo(f"meshproof: {label}: {' '.join(message.split())}", err=True)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def entry() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    sys.exit(main())
