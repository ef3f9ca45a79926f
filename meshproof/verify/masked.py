"""Outputs that depend on masks, which the semantic properties do not judge yet.

`tl.where`, comparisons and `tl.arange` are in the IR (spec/tl.md §4), but not in the
algebra (spec/semantics.md §8): the symbolic domain makes their values opaque at their
line. attention_equivalence, exactly_once_merge and numeric_safety are unknown for a launch
with an output whose value depends on one -- never proved (the unmasked reference is not
what a masked kernel computes) and never violated (the masked reference is not modelled) --
and say which op, at which line; and for a launch that declares a mask (`--mask`), whose
reference is masked attention, whatever the kernel computes.
"""

from __future__ import annotations

from meshproof.model.schedule import MASK_KINDS, Op, Schedule
from meshproof.verify.semantics.analysis import Analysis
from meshproof.verify.semantics.symbolic import mask_reason


def _mask_in_cone(a: Analysis, rank: int, store: Op) -> Op | None:
    """The first mask op (by source line) the stored value depends on, if any."""
    if not store.value_args:
        return None
    ev = a.evaluation
    found = [ev.defining[r][v] for r, v in ev.cone([(rank, store.value_args[0])])]
    masks = [op for op in found if op.kind in MASK_KINDS]
    return min(masks, key=lambda op: (op.source, op.index)) if masks else None


def masked_outputs(schedule: Schedule, a: Analysis) -> str | None:
    """Why the semantic properties are unknown for this launch (None: it declares no mask
    and no output depends on one). Only opaque outputs are searched: a mask makes every
    value after it opaque."""
    for out in a.outputs:
        if out.opaque is None:
            continue
        op = out.opaque.op if out.opaque.op.kind in MASK_KINDS else \
            _mask_in_cone(a, out.rank, out.store)
        if op is not None:
            ep = schedule.programs[out.rank].endpoint
            return (f"rank {ep.describe()} stores at {out.store.source} a value that "
                    f"depends on a mask: {mask_reason(op)}")
    declared = schedule.launch.mask
    if declared is not None:
        # the reference is masked attention, which the algebra does not hold yet: proving
        # the kernel equal to unmasked attention would prove the wrong thing
        return (f"the launch declares --mask {declared.text}, and masked attention is not "
                "modelled yet as a reference: spec/semantics.md §8")
    return None
