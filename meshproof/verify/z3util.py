"""The one place meshproof talks to Z3: bounded solvers, readable names, labelled groups.

Every solver call is bounded by a deterministic resource limit (`rlimit`, same answer on
every machine) and a wall-clock timeout (a safety net). `unknown` is returned as such,
with Z3's reason — it is never turned into "proved".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import z3

from meshproof.model.channels import OpRef
from meshproof.model.schedule import Schedule

_UINT_MAX = 2**32 - 1


class SatResult(Enum):
    SAT = "sat"
    UNSAT = "unsat"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Budget:
    timeout_s: float
    rlimit: int


@dataclass(frozen=True, slots=True)
class Outcome:
    result: SatResult
    reason: str
    model: Any = None


def new_solver(budget: Budget, logic: str | None = None) -> Any:
    ctx_solver = z3.SolverFor(logic) if logic else z3.Solver()
    # Z3 keeps both as unsigned 32-bit values and silently wraps larger ones (a timeout of
    # 2**32 + 1 ms becomes 1 ms), so clamp instead of wrapping.
    ctx_solver.set("timeout", min(max(1, int(budget.timeout_s * 1000)), _UINT_MAX))
    ctx_solver.set("rlimit", min(max(0, int(budget.rlimit)), _UINT_MAX))
    return ctx_solver


def add_group(solver: Any, label: str, constraints: list[Any]) -> None:
    """Add constraints under a label; `assert_and_track` would slow large checks, so the
    label lives in the SMT2 text as a comment-like named Boolean instead."""
    if not constraints:
        return
    guard = z3.Bool(f"group_{label}")
    solver.add(guard)
    solver.add(z3.Implies(guard, z3.And(constraints)) if len(constraints) > 1 else
               z3.Implies(guard, constraints[0]))


def check(solver: Any) -> Outcome:
    try:
        result = solver.check()
    except z3.Z3Exception as exc:  # e.g. resource limits hit inside a tactic
        return Outcome(SatResult.UNKNOWN, f"z3 error: {exc}")
    if result == z3.sat:
        return Outcome(SatResult.SAT, "", solver.model())
    if result == z3.unsat:
        return Outcome(SatResult.UNSAT, "")
    return Outcome(SatResult.UNKNOWN, str(solver.reason_unknown()))


def op_var_name(schedule: Schedule, ref: OpRef, prefix: str = "t") -> str:
    ep = schedule.programs[ref.rank].endpoint
    return f"{prefix}_c{ep.cube}p{ep.pe}_op{ref.op}"


def rank_var_name(schedule: Schedule, rank: int, prefix: str) -> str:
    ep = schedule.programs[rank].endpoint
    return f"{prefix}_c{ep.cube}p{ep.pe}"
