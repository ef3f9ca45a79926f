"""cvc5 as meshproof's second solver (`--recheck cvc5`, spec/verify.md "Re-check").

The query is the SMT-LIB 2 text Z3 was given (or would be), parsed by cvc5's own
front end through its Python API. Each check is bounded like Z3's: a deterministic
resource limit (`rlimit-per`, the same answer on every machine) and a wall-clock timeout
(`tlimit-per`, a safety net); past either cvc5 answers unknown, with its reason.
cvc5 is an optional extra (`pip install 'meshproof[recheck]'`): imported only here, and
only when a re-check is asked for.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from meshproof.errors import RecheckUnavailable
from meshproof.verify.z3util import Budget, Outcome, SatResult

MISSING = ("--recheck cvc5 needs the cvc5 Python package, which is not installed: "
           "pip install 'meshproof[recheck]' (or pip install 'cvc5>=1.4')")


def require_cvc5() -> None:
    """RecheckUnavailable unless cvc5 can be imported."""
    if importlib.util.find_spec("cvc5") is None:
        raise RecheckUnavailable(MISSING)


def solve_cvc5(text: str, budget: Budget) -> Outcome:
    """cvc5's answer on one SMT-LIB 2 query (its `(check-sat)` is run once, by the API,
    so that an unknown keeps cvc5's explanation)."""
    try:
        import cvc5
    except ImportError:
        raise RecheckUnavailable(MISSING) from None
    solver: Any = cvc5.Solver()
    solver.setOption("tlimit-per", str(max(1, int(budget.timeout_s * 1000))))
    solver.setOption("rlimit-per", str(max(1, int(budget.rlimit))))
    parser: Any = cvc5.InputParser(solver)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "meshproof")
    symbols = parser.getSymbolManager()
    try:
        while True:
            command = parser.nextCommand()
            if command.isNull():
                break
            if command.getCommandName() != "check-sat":
                command.invoke(solver, symbols)
        result = solver.checkSat()
    except RuntimeError as exc:   # cvc5 raises its API errors as RuntimeError
        return Outcome(SatResult.UNKNOWN, f"cvc5 error: {exc}")
    if result.isSat():
        return Outcome(SatResult.SAT, "")
    if result.isUnsat():
        return Outcome(SatResult.UNSAT, "")
    return Outcome(SatResult.UNKNOWN, str(result.getUnknownExplanation()).split(".")[-1]
                   .lower())
