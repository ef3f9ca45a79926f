"""How the CLI prints a verdict: one launch's, or several launches' as one table, the
cross-launch check, then the counterexamples of the launches that fail."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from meshproof.verify.properties import Property
from meshproof.verify.result import Status, Verdict

if TYPE_CHECKING:
    from meshproof.deploy.verify import DeploymentVerdict

_STYLE = {Status.PROVED: "green", Status.VIOLATED: "bold red", Status.UNKNOWN: "yellow"}
MAX_PRINTED_DIAGNOSTICS = 24
_GLYPH = {Status.PROVED: "[green]✓[/]", Status.VIOLATED: "[bold red]✗[/]",
          Status.UNKNOWN: "[yellow]?[/]"}
_SHORT = {Property.DIRECTION_LEGALITY: "dir", Property.LAUNCH_CONFINEMENT: "conf",
          Property.CHANNEL_MATCHING: "match", Property.DEADLOCK_FREEDOM: "deadlock",
          Property.EXACTLY_ONCE_MERGE: "merge", Property.ATTENTION_EQUIVALENCE: "attention",
          Property.NUMERIC_SAFETY: "numeric"}
# failing launches whose whole verdict is printed; the others are named
PRINTED_FAILING = 1


def console() -> Console:
    tty = sys.stdout.isatty()
    # emoji off: a kernel name or message with `:name:` in it prints as written (and rich's
    # emoji table, a few ms of start-up, is never loaded)
    return Console(file=sys.stdout, width=None if tty else 110, highlight=False,
                   color_system="auto" if tty else None, soft_wrap=not tty, emoji=False)


def verdict_header(verdict: Verdict) -> str:
    header = verdict.launch.header(verdict.depth)
    if verdict.skipped:
        header += "; not checked: " + ", ".join(p.value for p in verdict.skipped)
    return header


def print_verdict(verdict: Verdict, out: Console) -> None:
    out.print(verdict_header(verdict), markup=False)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("property")
    table.add_column("status")
    table.add_column("seconds", justify="right")
    table.add_column("summary", overflow="fold")
    for p in verdict.properties:
        table.add_row(p.name.value, f"[{_STYLE[p.status]}]{p.status.value}[/]",
                      f"{p.seconds:.2f}", p.message)
    out.print(table)
    if verdict.deadlock is not None:
        depth = verdict.min_queue_depth
        out.print(f"min_queue_depth: {depth if depth is not None else 'none up to the bound'}"
                  "; rendezvous (D=0): "
                  f"{'deadlock-free' if verdict.rendezvous is Status.PROVED else 'deadlocks'}")
    for p in verdict.properties:
        if p.counterexample is None:
            continue
        out.print(f"\n[bold]{p.name.value}[/]: {p.counterexample.summary}")
        # A loop repeats the same fault at the same line: print it once, with a count.
        grouped: dict[str, list[int]] = {}
        for d in p.counterexample.diagnostics:
            grouped.setdefault(d.format(), []).append(d.op_index if d.op_index is not None
                                                      else -1)
        for i, (text, ops) in enumerate(grouped.items()):
            if i == MAX_PRINTED_DIAGNOSTICS:
                out.print(f"... {len(grouped) - i} more (see --json)")
                break
            repeat = f" [x{len(ops)}: ops {_op_list(ops)}]" if len(ops) > 1 else ""
            out.print(text + repeat, markup=False)
    if verdict.rechecks:
        out.print("\nre-check:")
        for r in verdict.rechecks:
            out.print(f"  {r.name.value}: {r.describe()}", markup=False)
    unknown = [p for p in verdict.properties if p.status is Status.UNKNOWN]
    for p in unknown:
        out.print(f"\n[yellow]{p.name.value}[/]: unknown, not proved: {p.message}")


def _op_list(ops: list[int]) -> str:
    shown = ", ".join(f"#{o}" for o in ops[:6])
    return shown + (", ..." if len(ops) > 6 else "")


def print_launches_verdict(result: DeploymentVerdict, out: Console) -> None:
    d = result.deployment
    out.print(d.header(), markup=False)
    props = [p.name for p in result.verdicts[0].properties]
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for head in ("launch", "cubes", "groups", *(_SHORT.get(p, p.value) for p in props),
                 "min D", "seconds", "proofs"):
        table.add_column(head, justify="right" if head == "seconds" else "left")
    carried = result.carried_from or (None,) * len(result.verdicts)
    for i, (v, origin) in enumerate(zip(result.verdicts, carried, strict=True)):
        spec = v.launch
        statuses = [_GLYPH[p.status] for p in v.properties]
        depth = v.min_queue_depth
        how = "checked" if origin is None else f"from {origin + 1}"
        table.add_row(str(i + 1), f"{spec.cube_start}..{spec.cube_start + spec.n_cubes - 1}",
                      spec.groups.value, *statuses, "–" if depth is None else str(depth),
                      f"{sum(p.seconds for p in v.properties):.2f}", how)
    out.print(table)
    sep = result.separation
    out.print(f"launch_separation: [{'green' if sep.ok else 'bold red'}]{sep.status.value}[/]"
              f" ({sep.seconds:.2f} s): ", end="")
    out.print(sep.message, markup=False)
    for line in sep.diagnostics[:24]:
        out.print(line, markup=False)
    failing = result.failing()
    for i in failing[:PRINTED_FAILING]:
        out.print(f"\n[bold]{d.label(i)}[/]:")
        print_verdict(result.verdicts[i], out)
    rest = failing[PRINTED_FAILING:]
    if rest:
        out.print(f"\n{len(rest)} more launch(es) not proved: "
                  + ", ".join(str(i + 1) for i in rest) + " (see --json)", markup=False)
    if any(c is not None for c in carried):
        out.print("proofs from N: the launch's schedule is launch N's moved over the same "
                  "links, so it has the same proofs (spec/deployments.md)", markup=False)
    total = sum(p.seconds for v in result.verdicts for p in v.properties) + sep.seconds
    out.print(f"{'proved' if result.ok else 'not proved'}: {len(result.verdicts)} launch(es), "
              f"{d.endpoints} endpoints, {total:.2f} s of checks", markup=False)
