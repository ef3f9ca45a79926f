"""The command line. Only this package prints or exits; commands return exit codes.

Exit codes: 0 all proved / ok; 1 a property violated or numerics out of tolerance;
2 bad input (one line, no traceback); 3 unknown (never reported as proved).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from meshproof import __version__
from meshproof.errors import BadInput, InternalError, MeshproofError

EXIT_OK, EXIT_VIOLATED, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="meshproof")
def cli() -> None:
    """meshproof: prove mesh SPMD kernels legal, matched, deadlock-free and exactly-once,
    and simulate them in numpy."""


def _register() -> None:
    from meshproof.cli.trace_cmd import list_cmd, trace_cmd

    cli.add_command(list_cmd)
    cli.add_command(trace_cmd)
    for module, name in (("meshproof.cli.verify_cmd", "verify_cmd"),
                         ("meshproof.cli.simulate_cmd", "simulate_cmd"),
                         ("meshproof.cli.gate_cmd", "gate_cmd"),
                         ("meshproof.cli.report_cmd", "report_cmd")):
        try:
            mod = __import__(module, fromlist=[name])
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        cli.add_command(getattr(mod, name))


_register()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (the console script exits with it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:  # click would put its whole help text on the one error line
        _error(f"name a command ({', '.join(sorted(cli.commands))}); see `meshproof --help`")
        return EXIT_BAD_INPUT
    try:
        result = cli.main(args=args, prog_name="meshproof", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("meshproof: aborted", err=True)
        return EXIT_BAD_INPUT
    except click.UsageError as exc:
        _error(exc.format_message())
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        _error(exc.format_message())
        return EXIT_BAD_INPUT
    except BadInput as exc:
        _error(str(exc))
        return EXIT_BAD_INPUT
    except InternalError as exc:
        _error(str(exc), "internal error (please report)")
        return 70
    except MeshproofError as exc:
        _error(str(exc))
        return EXIT_BAD_INPUT
    if isinstance(result, int):
        return result
    return EXIT_OK


def _error(message: str, label: str = "error") -> None:
    """Diagnostics are exactly one line on stderr."""
    click.echo(f"meshproof: {label}: {' '.join(message.split())}", err=True)


def entry() -> None:
    sys.exit(main())
