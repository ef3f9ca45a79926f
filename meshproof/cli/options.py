"""Launch options shared by trace, verify and simulate (DESIGN §8), the trace limits every
command that runs kernels takes, and the pipeline the commands run through."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.shell_completion import CompletionItem

from meshproof.deploy.launches import LaunchList, load_launches
from meshproof.errors import LaunchError
from meshproof.gate.matrix import cube_pes
from meshproof.gate.pipeline import Pipeline, Resolver
from meshproof.model.isolation import (
    DEFAULT_MEMORY_MB,
    DEFAULT_WALL_SECONDS,
    IsolatedResolver,
    IsolatedTracer,
    LimitKnobs,
    TraceLimits,
)
from meshproof.model.launch import DEFAULT_SHARDED, Launch, LaunchOptions, build_launch
from meshproof.model.loader import KernelRef, resolve_kernel
from meshproof.model.masks import Mask
from meshproof.model.schedule import GroupMode, Harness, Scalar
from meshproof.model.topology import MAX_PES, Endpoint, parse_mesh, parse_system
from meshproof.panels import SCALES, get_panel

F = TypeVar("F", bound=Callable[..., Any])

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


def current_pipeline(limits: TraceLimits | None = None) -> Pipeline:
    """The pipeline `main(..., pipeline=...)` was given; else the real one, which imports
    and traces kernels in child processes under `limits` (model/isolation.py)."""
    obj = click.get_current_context().find_root().obj
    if isinstance(obj, Pipeline):
        return obj
    limits = limits or trace_limits(DEFAULT_WALL_SECONDS, DEFAULT_MEMORY_MB)
    return Pipeline(resolver=IsolatedResolver(limits), tracer=IsolatedTracer(limits))


def launch_options(func: F) -> F:
    """Decorate a command with KERNEL and the launch flags."""
    decorators = [
        click.argument("kernel", required=False, shell_complete=_complete_kernel),
        click.option("--panel", help="Preset kernel + launch: one of the four GQA panels, or "
                     "a causal prefill panel (causal_prefill_naive, causal_prefill_zigzag)."),
        click.option("--scale", type=click.Choice(SCALES), default="validation",
                     show_default=True, help="Panel scale."),
        click.option("--system", "system_text", default=None,
                     help="SIPSxROWSxCOLS of cubes (default 1x4x4)."),
        click.option("--pes", type=int, default=None, callback=_check_pes,
                     help=f"PEs launched per cube, 1..{MAX_PES} (default 8; cubes have 8 "
                     "PEs, or N when --pes N is more)."),
        click.option("--wiring", default=None, help="Built-in wiring name or a wiring .toml."),
        click.option("--cubes", type=int, default=None, help="Number of cubes launched."),
        click.option("--cube-start", type=int, default=None, help="First physical cube."),
        click.option("--mesh", default=None, help="RxC sub-mesh: sets mesh_rows/cols, cubes."),
        click.option("--arg", "arg_items", multiple=True, metavar="NAME=VALUE",
                     help="Kernel argument (a Python literal, else a string). Repeatable."),
        click.option("--sharded", default=",".join(DEFAULT_SHARDED), show_default=True,
                     help="Comma-separated buffers holding per-rank KV shards; the "
                     "simulator fills the first two with K and V."),
        click.option("--harness", type=click.Choice([h.value for h in Harness]),
                     default=None, help="How the simulator builds inputs and the reference: "
                     "decode (Q replicated, KV split) or prefill (Q and KV split); default: "
                     "the kernel's (built-ins), else decode."),
        click.option("--queue-depth", type=int, default=None,
                     help="IPCQ depth D (default: hardware profile, 4)."),
        click.option("--groups", "groups", type=click.Choice([g.value for g in GroupMode]),
                     default=None, help="Which ranks form one attention problem: the whole "
                     "launch (default), each cube, or PE p of every cube."),
        click.option("--outputs", default=None, metavar="PTR[,PTR]",
                     help="Buffers the harness calls outputs (default o_ptr)."),
        click.option("--softmax-scale", type=float, default=None,
                     help="The reference's softmax scale (default: the kernel's sm_scale, "
                     "else 1/sqrt(d_head)); a kernel's sm_scale parameter receives it."),
        click.option("--mask", default=None, metavar="MASK",
                     help="The attention mask the launch declares: causal, causal:OFFSET, "
                     "window:W or padding:LEN, optionally @zigzag or @striped (positions), or "
                     "none; "
                     "default: the kernel's (built-ins), else none."),
        click.option("--empty-shard", "empty_shards", multiple=True, metavar="CUBE,PE",
                     help="A rank whose KV slice is empty (numeric_safety). Repeatable."),
        click.option("--launches", "launches_file", type=click.Path(path_type=Path),
                     default=None, help="A TOML file of several launches run at once "
                     "(instead of KERNEL and the launch flags)."),
    ]
    for deco in reversed(decorators):
        func = deco(func)
    return func


def _complete_kernel(ctx: click.Context, param: click.Parameter,
                     incomplete: str) -> list[CompletionItem]:
    """Built-in kernel names, or files while a path is typed (path/file.py::function)."""
    from meshproof.kernels import BUILTIN_KERNELS

    if "/" in incomplete or incomplete.startswith("."):
        return [CompletionItem(incomplete, type="file")]
    return [CompletionItem(name, help=info.description)
            for name, info in BUILTIN_KERNELS.items() if name.startswith(incomplete)]


def _check_pes(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """The rule the message states: any count 1..MAX_PES (cubes grow past 8 to fit it)."""
    if value is not None and not 1 <= value <= MAX_PES:
        raise LaunchError(f"--pes {value} is out of range 1..{MAX_PES}: launch at least one PE "
                          f"per cube (cubes have 8 PEs, or N when --pes N is more)")
    return value


# Spellings people type that are not Python literals: JSON's words and IEEE specials. Left
# as strings, `--arg flag=false` would reach the kernel as the (truthy) text "false".
_WORDS: dict[str, Scalar] = {"true": True, "false": False, "null": None,
                             "inf": math.inf, "+inf": math.inf, "-inf": -math.inf,
                             "nan": math.nan}


def parse_arg(item: str) -> tuple[str, Scalar]:
    name, sep, text = item.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise LaunchError(f"--arg {item!r} is not NAME=VALUE (e.g. --arg S_q=16)")
    stripped = text.strip()
    if stripped in _WORDS:
        return name, _WORDS[stripped]
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = text
    if not isinstance(value, (int, float, bool, str, type(None))):
        raise LaunchError(f"--arg {name}: only numbers, booleans, strings and None are "
                          f"supported, got {text!r}")
    return name, value


def _endpoint(text: str) -> Endpoint:
    parts = text.replace("c", " ").replace("p", ",").replace(" ", "").split(",")
    try:
        cube, pe = (int(x) for x in parts if x != "")
    except ValueError:
        raise LaunchError(f"--empty-shard {text!r} is not CUBE,PE (e.g. --empty-shard 0,3)"
                          ) from None
    return Endpoint(cube, pe)


def problem_options(groups: str | None, outputs: str | None, softmax_scale: float | None,
                    empty_shards: tuple[str, ...], mask: str | None = None) -> dict[str, Any]:
    """The attention-problem flags as LaunchOptions fields (only those given)."""
    out: dict[str, Any] = {}
    if mask is not None:
        if mask.strip() != "none":
            Mask.parse(mask)   # a bad mask is one line before anything runs
        out["mask"] = mask
    if groups is not None:
        out["groups"] = GroupMode(groups)
    if outputs is not None:
        out["outputs"] = _split(outputs) or ("",)
    if softmax_scale is not None:
        if not math.isfinite(softmax_scale):
            raise LaunchError(f"--softmax-scale must be a finite number, got {softmax_scale}")
        out["softmax_scale"] = softmax_scale
    if empty_shards:
        out["empty_shards"] = tuple(_endpoint(e) for e in empty_shards)
    return out


def resolve_launch(kernel: str | None, panel: str | None, scale: str, system_text: str | None,
                   pes: int | None, wiring: str | None, cubes: int | None,
                   cube_start: int | None, mesh: str | None, arg_items: tuple[str, ...],
                   sharded: str, queue_depth: int | None, groups: str | None = None,
                   outputs: str | None = None, softmax_scale: float | None = None,
                   empty_shards: tuple[str, ...] = (), harness: str | None = None,
                   mask: str | None = None, *,
                   resolver: Resolver = resolve_kernel) -> tuple[KernelRef, Launch]:
    """The kernel (found with `resolver`) and the launch the flags describe."""
    ref, opts = resolve_options(kernel, panel, scale, system_text, pes, wiring, cubes,
                                cube_start, mesh, arg_items, sharded, queue_depth, groups,
                                outputs, softmax_scale, empty_shards, harness, mask,
                                resolver=resolver)
    return ref, build_launch(ref, opts)


def resolve_options(kernel: str | None, panel: str | None, scale: str,
                    system_text: str | None, pes: int | None, wiring: str | None,
                    cubes: int | None, cube_start: int | None, mesh: str | None,
                    arg_items: tuple[str, ...], sharded: str, queue_depth: int | None,
                    groups: str | None = None, outputs: str | None = None,
                    softmax_scale: float | None = None, empty_shards: tuple[str, ...] = (),
                    harness: str | None = None, mask: str | None = None, *,
                    resolver: Resolver = resolve_kernel) -> tuple[KernelRef, LaunchOptions]:
    """The kernel (found with `resolver`) and the launch options the flags describe (not
    yet built)."""
    user_args = _unique_args(arg_items)
    problem = problem_options(groups, outputs, softmax_scale, empty_shards, mask)
    if harness is not None:
        problem["harness"] = harness
    sharded_names = _sharded(sharded)
    if panel is not None:
        p = get_panel(panel, scale)
        if kernel is not None and kernel != p.kernel:
            raise LaunchError(f"KERNEL {kernel} and --panel {panel} (kernel {p.kernel}) both "
                              f"choose the kernel; drop KERNEL to run {p.kernel}, or drop "
                              "--panel and give the launch flags")
        base = p.launch_options(queue_depth)
        kernel_name = p.kernel
        merged = dict(base.args)
        if mesh is not None:
            # --mesh overrides the panel's mesh: its rows, columns and cube count follow it
            merged.pop("mesh_rows", None)
            merged.pop("mesh_cols", None)
        elif cubes is not None and base.mesh is not None:
            rows, cols = parse_mesh(base.mesh)
            if cubes != rows * cols:
                raise LaunchError(f"--cubes {cubes} disagrees with panel {panel}'s "
                                  f"{base.mesh} mesh ({rows * cols} cubes); pass --mesh RxC "
                                  "to launch another mesh")
        merged.update(dict(user_args))
        opts = LaunchOptions(
            system=parse_system(system_text, cube_pes(pes)) if system_text else base.system,
            pes=pes, wiring=wiring if wiring is not None else base.wiring,
            cubes=cubes if cubes is not None or mesh is not None else base.cubes,
            cube_start=cube_start if cube_start is not None else base.cube_start,
            mesh=mesh if mesh is not None else base.mesh, args=tuple(sorted(merged.items())),
            sharded=sharded_names, queue_depth=queue_depth,
            **{"groups": base.groups, **problem})
    else:
        if kernel is None:
            raise LaunchError("name a KERNEL (built-in name or path/file.py::function) or "
                              "pass --panel NAME; see `meshproof list`")
        kernel_name = kernel
        system = parse_system(system_text or "1x4x4", cube_pes(pes))
        opts = LaunchOptions(system=system, pes=pes, wiring=wiring, cubes=cubes,
                             cube_start=cube_start, mesh=mesh, args=user_args,
                             sharded=sharded_names, queue_depth=queue_depth, **problem)
    return resolver(kernel_name), opts


# each launch flag: its spelling, and its value when the user does not give it
_FLAGS: dict[str, tuple[str, object]] = {
    "kernel": ("KERNEL", None), "panel": ("--panel", None), "system_text": ("--system", None),
    "pes": ("--pes", None), "wiring": ("--wiring", None), "cubes": ("--cubes", None),
    "cube_start": ("--cube-start", None), "mesh": ("--mesh", None), "arg_items": ("--arg", ()),
    "sharded": ("--sharded", ",".join(DEFAULT_SHARDED)), "queue_depth": ("--queue-depth", None),
    "groups": ("--groups", None), "outputs": ("--outputs", None),
    "softmax_scale": ("--softmax-scale", None), "empty_shards": ("--empty-shard", ()),
    "harness": ("--harness", None), "mask": ("--mask", None)}


def resolve_launches(opts: dict[str, Any],
                     resolver: Resolver = resolve_kernel) -> LaunchList | None:
    """Several launches at once, or None for one (then `resolve_launch(**opts)`).

    Takes `launches_file` out of `opts`. A `--launches FILE` describes every launch, so no
    other launch flag may be given; a panel that is several launches (the headline
    multi-user panels) gives one launch per cube_start, each with the flags applied,
    unless --cube-start picks one of them.
    """
    path = opts.pop("launches_file", None)
    if path is not None:
        given = [flag for key, (flag, unset) in _FLAGS.items()
                 if opts.get(key, unset) != unset]
        if given:
            raise LaunchError(f"--launches {path} describes every launch; drop "
                              f"{', '.join(given)} (put them in the file)")
        return load_launches(path, resolver)
    panel = opts.get("panel")
    if panel is None or opts.get("cube_start") is not None:
        return None
    preset = get_panel(panel, opts.get("scale", "validation"))
    if not preset.is_deployment:
        return None
    launches = tuple(resolve_launch(**{**opts, "cube_start": k}, resolver=resolver)
                     for k in preset.launches)
    return LaunchList(f"{preset.name} ({opts.get('scale')})", launches)


def _unique_args(arg_items: tuple[str, ...]) -> tuple[tuple[str, Scalar], ...]:
    """The --arg values; a name given twice is an error (the last one would win silently)."""
    parsed = tuple(parse_arg(a) for a in arg_items)
    seen: dict[str, str] = {}
    for (name, _), item in zip(parsed, arg_items, strict=True):
        if name in seen:
            raise LaunchError(f"--arg {name} is given twice ({seen[name]!r} and {item!r}); "
                              "pass each kernel argument once")
        seen[name] = item
    return parsed


def _sharded(text: str) -> tuple[str, ...]:
    names = _split(text)
    if not names:
        raise LaunchError(f"--sharded {text!r} names no buffer; leave it out for the default "
                          f"{','.join(DEFAULT_SHARDED)} or name the buffers holding KV shards, "
                          "e.g. --sharded kc_ptr,vc_ptr")
    return names


def _split(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())
