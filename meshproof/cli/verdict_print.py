"""How the CLI prints one launch's verdict (verify, and each failing launch of several)."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from meshproof.verify.result import Status, Verdict

_STYLE = {Status.PROVED: "green", Status.VIOLATED: "bold red", Status.UNKNOWN: "yellow"}
MAX_PRINTED_DIAGNOSTICS = 24


def console() -> Console:
    tty = sys.stdout.isatty()
    return Console(file=sys.stdout, width=None if tty else 110, highlight=False,
                   color_system="auto" if tty else None, soft_wrap=not tty)


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
