"""Masked launches, where numeric_safety does not judge yet.

Masks are in the algebra (spec/semantics.md §8): attention_equivalence and
exactly_once_merge judge a masked kernel against masked attention. The interval and
rounding domains of numeric_safety do not hold masks yet, so numeric_safety is unknown for
a launch that declares a mask (`--mask`) or stores a value that depends on one, and says
which op, at which line: never proved (no bound is shown) and never violated.
"""

from __future__ import annotations

from meshproof.model.schedule import MASK_KINDS, Op, Schedule
from meshproof.verify.semantics.analysis import Analysis

WHY = ("the interval and rounding domains do not hold masks yet (spec/semantics.md §8): "
       "numeric_safety is not judged on masked outputs")


def _mask_in_cone(a: Analysis, rank: int, store: Op) -> Op | None:
    """The first mask op (by source line) the stored value depends on, if any."""
    if not store.value_args:
        return None
    ev = a.evaluation
    found = [ev.defining[r][v] for r, v in ev.cone([(rank, store.value_args[0])])]
    masks = [op for op in found if op.kind in MASK_KINDS]
    return min(masks, key=lambda op: (op.source, op.index)) if masks else None


def masked_outputs(schedule: Schedule, a: Analysis) -> str | None:
    """Why numeric_safety is unknown for this launch (None: it declares no mask and no
    output depends on one)."""
    declared = schedule.launch.mask
    if declared is not None:
        return f"the launch declares --mask {declared.text}; {WHY}"
    if not MASK_KINDS & {op.kind for prog in schedule.programs for op in prog.ops}:
        return None   # no mask op anywhere: no output's cone needs walking
    for out in a.outputs:
        op = _mask_in_cone(a, out.rank, out.store)
        if op is not None:
            ep = schedule.programs[out.rank].endpoint
            return (f"rank {ep.describe()} stores at {out.store.source} a value that "
                    f"depends on a mask (tl.{op.kind.value} at {op.source}); {WHY}")
    return None
