"""Launch options shared by trace, verify and simulate (DESIGN §8), the trace limits every
command that runs kernels takes, and the pipeline the commands run through."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from meshproof.deploy.launches import LaunchList, load_launches, resolve_launches
from meshproof.errors import LaunchError
from meshproof.gate.pipeline import Pipeline, Resolver
from meshproof.model.isolation import (
    DEFAULT_MEMORY_MB,
    DEFAULT_WALL_SECONDS,
    IsolatedResolver,
    IsolatedTracer,
    LimitKnobs,
    TraceLimits,
)
from meshproof.model.launch_options import (
    LAUNCH_KEYS,
    LaunchOptions,
    option_from_text,
)
from meshproof.model.launch_values import parse_arg
from meshproof.model.loader import resolve_kernel

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

F = TypeVar("F", bound=Callable[..., Any])
__all__ = ["parse_arg"]

TIMEOUT_KNOB = "--trace-timeout SECONDS"
MEMORY_KNOB = "--trace-memory MIB"


def trace_limit_options(func: F) -> F:
    """Decorate a command that runs kernels with --trace-timeout and --trace-memory."""
    return _trace_limit_options(func, "past it, one line naming the kernel's line and exit "
                                "2 (bad input)")


def gate_trace_limit_options(func: F) -> F:
    """The gate's --trace-timeout and --trace-memory: past a limit, a case is an error row."""
    return _trace_limit_options(func, "past it, the case is an error row naming the "
                                "kernel's line (never cached) and the gate exits 1")


def _trace_limit_options(func: F, past: str) -> F:
    func = click.option(
        "--trace-memory", "trace_memory", type=click.IntRange(min=1),
        default=DEFAULT_MEMORY_MB, show_default=True, metavar="MIB",
        help="Memory (MiB) a kernel's import and trace may add in their child process.")(func)
    return click.option(
        "--trace-timeout", "trace_timeout", type=click.FloatRange(min=0, min_open=True),
        default=DEFAULT_WALL_SECONDS, show_default=True, metavar="SECONDS",
        help="Wall-clock (and CPU) seconds a kernel's import and trace may take in their "
             f"child process; {past}.")(func)


def trace_limits(trace_timeout: float, trace_memory: int, *, gate: bool = False
                 ) -> TraceLimits:
    """The limits of the trace options, with messages that name them (in the gate, also
    the case key that overrides the option)."""
    wall = f"{TIMEOUT_KNOB} (or the case's trace_timeout key)" if gate else TIMEOUT_KNOB
    base = TraceLimits(memory_mb=trace_memory, knobs=LimitKnobs(memory=MEMORY_KNOB))
    return TraceLimits.of_timeout(trace_timeout, wall, base)


def current_pipeline(limits: TraceLimits | None = None,
                     while_tracing: Callable[[], object] | None = None) -> Pipeline:
    """The pipeline `main(..., pipeline=...)` was given; else the real one, which imports
    and traces kernels in child processes under `limits` (model/isolation.py), running
    `while_tracing` in this process while a child traces."""
    obj = click.get_current_context().find_root().obj
    if isinstance(obj, Pipeline):
        return obj
    limits = limits or trace_limits(DEFAULT_WALL_SECONDS, DEFAULT_MEMORY_MB)
    return Pipeline(resolver=IsolatedResolver(limits),
                    tracer=IsolatedTracer(limits, while_waiting=while_tracing))


def launch_options(func: F) -> F:
    """Decorate a command with KERNEL and the launch flags, one per row of the launch
    table (model/launch_options.py), and `--launches FILE`. The command receives
    `launch: LaunchOptions` (the flags given, parsed by the table's parsers) and
    `launches_file`."""

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        values: dict[str, object] = {}
        for row in LAUNCH_KEYS:
            raw = kwargs.pop(row.field)
            if raw is None or raw == ():
                continue
            values[row.field] = raw if row.field == "kernel" else option_from_text(row, raw)
        return func(launch=LaunchOptions(**values), **kwargs)  # type: ignore[arg-type]

    decorators: list[Callable[[Any], Any]] = []
    for row in LAUNCH_KEYS:
        if not row.flag:
            decorators.append(click.argument(row.field, required=False,
                                             shell_complete=_complete_kernel))
            continue
        kind = click.Choice(row.choices) if row.choices else None
        decorators.append(click.option(row.flag, row.field, type=kind, default=None,
                                       multiple=row.repeatable, metavar=row.metavar,
                                       help=row.help))
    decorators.append(click.option(
        "--launches", "launches_file", type=click.Path(path_type=Path), default=None,
        help="A TOML file of several launches run at once (instead of KERNEL and the "
             "launch flags)."))
    out: Any = wrapper
    for deco in reversed(decorators):
        out = deco(out)
    return out  # type: ignore[no-any-return]


def _complete_kernel(ctx: click.Context, param: click.Parameter,
                     incomplete: str) -> list[CompletionItem]:
    """Built-in kernel names, or files while a path is typed (path/file.py::function)."""
    from click.shell_completion import CompletionItem

    from meshproof.kernels import BUILTIN_KERNELS

    if "/" in incomplete or incomplete.startswith("."):
        return [CompletionItem(incomplete, type="file")]
    return [CompletionItem(name, help=info.description)
            for name, info in BUILTIN_KERNELS.items() if name.startswith(incomplete)]


def cli_launches(launch: LaunchOptions, launches_file: Path | None,
                 resolver: Resolver = resolve_kernel) -> LaunchList:
    """The launches the flags describe (N >= 1): a `--launches FILE` describes every
    launch, so no launch flag may be given with it."""
    if launches_file is not None:
        given = [row.flag or "KERNEL" for row in LAUNCH_KEYS
                 if getattr(launch, row.field) not in (None, ())]
        if given:
            raise LaunchError(f"--launches {launches_file} describes every launch; drop "
                              f"{', '.join(given)} (put them in the file)")
        return load_launches(launches_file, resolver)
    return resolve_launches(launch, resolver)


def several(listed: LaunchList, launches_file: Path | None) -> bool:
    """Whether the launches are run as a deployment (a launches file, or more than one)."""
    return launches_file is not None or listed.is_deployment


def refuse_single_launch_options(listed: LaunchList, **given: object) -> None:
    """Options that draw or dump one launch make no sense for several."""
    used = [name for name, value in given.items() if value]
    if used:
        raise LaunchError(f"{' and '.join(used)} draw(s) one launch, and {listed.name} is "
                          f"{len(listed.launches)} launches; pick one with --cube-start K "
                          "(or run the launch on its own)")
