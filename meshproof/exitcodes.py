"""The process exit codes of every command, and of `Verdict` / `GateResult` / `SimResult`.

0 all proved / ok; 1 a property violated or numerics out of tolerance; 2 bad input (one
line on stderr, no traceback); 3 unknown (never reported as proved); 70 an internal error
(a bug in meshproof, e.g. the simulation and Z3 disagree); 130 interrupted (Ctrl-C);
143 terminated (SIGTERM). 70, 130 and 143 follow the BSD sysexits / shell conventions.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    VIOLATED = 1
    BAD_INPUT = 2
    UNKNOWN = 3
    INTERNAL = 70
    INTERRUPTED = 130
    TERMINATED = 143
